"""Baseline policies, the registry, and the legality checks of the step API.

Policy tests build a real request with the step API (``sim.advance()``) and look at the plan a policy returns
for it; every expected choice is worked out in the comment. Scores are those documented in
``baselines/fitgpp.py``: fitness = ||(freed - deficit) / capacity||_2 (a zero capacity counts as 1), score =
fitness + lam * max_grace / grace_scale with lam = 1 and grace_scale = 60 by default.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import be, cluster, fit_vs_grace_jobs, in_node_jobs, te

from schedgym.errors import ConfigError, IllegalDecisionError, UnknownNameError
from schedgym.experiments import run_policy
from schedgym.registry import make_policy, policy_names
from schedgym.sim import DECLINE, PreemptionPlan, SimConfig, Simulator
from schedgym.workloads import Workload

ALL_POLICIES = ["fifo", "fitgpp", "fitgpp-fitness", "fitgpp-gracefirst", "k8s", "priority", "random"]


def first_request(nodes, jobs, **config):
    """Run until the first preemption request; return (simulator, request)."""
    sim = Simulator(nodes, jobs, SimConfig(**config))
    req = sim.advance()
    assert req is not None, "the workload was meant to trigger a preemption request"
    return sim, req


def decide(name, nodes, jobs, **config):
    """(plan of policy ``name`` for the first request, job ids by index)."""
    sim, req = first_request(nodes, jobs, **config)
    policy = make_policy(name)
    policy.reset(np.random.default_rng(0))
    plan = policy.decide(req)
    sim.resolve(plan)  # a baseline's plan must be legal
    return plan, [j.job_id for j in jobs]


def victim_ids(plan, ids):
    return sorted(ids[v] for v in plan.victims)


# ----------------------------------------------------------------------------------------------------------
# FitGpp and its ablations
# ----------------------------------------------------------------------------------------------------------


def test_fitgpp_prefers_the_node_whose_victims_fit_best():
    # All grace periods 10. n0: fitness = |8 - 4| / 8 = 0.5, score 0.5 + 10/60 = 0.667.
    # n1: s1 and s2 fit exactly (tie broken by job index -> s1): fitness 0, score 0.167 -> n1, victim s1.
    plan, ids = decide("fitgpp", cluster(8, 8), fit_vs_grace_jobs(10, 10))
    assert plan.nodes == (1,)
    assert victim_ids(plan, ids) == ["s1"]


def test_fitgpp_trades_fit_for_a_much_shorter_grace_period():
    # big grace 10, s1/s2 grace 300. n0: 0.5 + 10/60 = 0.667; n1: 0 + 300/60 = 5 -> n0.
    plan, ids = decide("fitgpp", cluster(8, 8), fit_vs_grace_jobs(10, 300))
    assert plan.nodes == (0,)
    assert victim_ids(plan, ids) == ["big"]


def test_fitgpp_keeps_fit_when_grace_difference_is_small():
    # big grace 10, s1/s2 grace 20. n0: 0.5 + 0.167 = 0.667; n1: 0 + 20/60 = 0.333 -> n1.
    plan, ids = decide("fitgpp", cluster(8, 8), fit_vs_grace_jobs(10, 20))
    assert plan.nodes == (1,)


def test_fitgpp_fitness_ablation_ignores_grace():
    # lam = 0: n0 scores 0.5, n1 scores 0 whatever the grace periods -> n1 even with grace 300 there.
    plan, ids = decide("fitgpp-fitness", cluster(8, 8), fit_vs_grace_jobs(10, 300))
    assert plan.nodes == (1,)
    assert victim_ids(plan, ids) == ["s1"]


def test_fitgpp_gracefirst_picks_shortest_grace():
    # rank by max grace first: n0 has 10, n1 has 20 -> n0, although n1 fits better.
    plan, ids = decide("fitgpp-gracefirst", cluster(8, 8), fit_vs_grace_jobs(10, 20))
    assert plan.nodes == (0,)
    assert victim_ids(plan, ids) == ["big"]


def test_fitgpp_victim_that_exceeds_the_deficit_least():
    # Single candidates that cover 3: v4 (excess 1) and v8 (excess 5) -> v4.
    plan, ids = decide("fitgpp", cluster(16), in_node_jobs())
    assert victim_ids(plan, ids) == ["v4"]


def test_fitgpp_gracefirst_takes_victims_by_grace_then_prunes():
    # Ascending grace: v2 (5; 2 < 3, not enough), then v8 (20; 2 + 8 >= 3). Pruning drops v2 (v8 alone covers 3).
    # v4 (grace 50) is never considered.
    plan, ids = decide("fitgpp-gracefirst", cluster(16), in_node_jobs())
    assert victim_ids(plan, ids) == ["v8"]


def test_fitgpp_combines_victims_when_none_covers_alone():
    # One 8-GPU node with four 2-GPU BE jobs; "t" (TE, 6 GPUs) needs three of them: the greedy picks the three
    # lowest indices (equal cover, equal grace), and none of them can be pruned.
    jobs = [be(f"b{i}", 0, 1000, 2, grace=10) for i in range(4)] + [te("t", 10, 100, 6)]
    plan, ids = decide("fitgpp", cluster(8), jobs)
    assert victim_ids(plan, ids) == ["b0", "b1", "b2"]


def test_fitgpp_counts_everything_a_gang_victim_frees():
    # Three 8-GPU nodes. "g" (BE gang, 2 x 8 GPUs, grace 10) on n0 and n1; "s" (BE, 8 GPUs, grace 10) on n2.
    # "t" (TE, 8 GPUs) at 10: preempting g frees 16 GPUs for a deficit of 8 -> fitness (16 - 8) / 8 = 1 on n0
    # and n1; preempting s frees exactly 8 -> fitness 0 on n2. FitGpp takes n2 (a per-node count would tie
    # all three nodes and take n0).
    jobs = [be("g", 0, 1000, 16, grace=10, gang_size=2), be("s", 0, 1000, 8, grace=10), te("t", 10, 100, 8)]
    plan, ids = decide("fitgpp", cluster(8, 8, 8), jobs)
    assert plan.nodes == (2,)
    assert victim_ids(plan, ids) == ["s"]


def test_fitgpp_gang_te_uses_free_node_first():
    # Three 8-GPU nodes. "ph" (8 GPUs, 5 s) holds n0 until 5, so that "b1" (8 GPUs, grace 30) goes to n1 and "b2"
    # (8 GPUs, grace 10) to n2. "tg" (TE gang 2 x 8 GPUs) at 10: n0 already has room (score -inf), then the
    # better of n1 (0 + 30/60) and n2 (0 + 10/60) -> nodes (0, 2), victim b2.
    jobs = [
        be("ph", 0, 5, 8),  # placeholder on n0 until 5
        be("b1", 0, 1000, 8, grace=30),  # n1
        be("b2", 0, 1000, 8, grace=10),  # n2
        te("tg", 10, 100, 16, gang_size=2),
    ]
    plan, ids = decide("fitgpp", cluster(8, 8, 8), jobs)
    assert plan.nodes == (0, 2)
    assert victim_ids(plan, ids) == ["b2"]


# ----------------------------------------------------------------------------------------------------------
# Kubernetes-like
# ----------------------------------------------------------------------------------------------------------


def test_k8s_prefers_the_node_needing_fewest_victims():
    # Two 8-GPU nodes: "a" and "b" (4 GPUs each) on n0, "c" (8 GPUs) on n1. "t" (TE, 8 GPUs): n0 needs two
    # victims, n1 one -> n1, victim c.
    jobs = [be("a", 0, 1000, 4), be("b", 0, 1000, 4), be("c", 0, 1000, 8), te("t", 10, 100, 8)]
    plan, ids = decide("k8s", cluster(8, 8), jobs)
    assert plan.nodes == (1,)
    assert victim_ids(plan, ids) == ["c"]


def test_k8s_breaks_ties_towards_the_most_recently_started_victim():
    # Two 8-GPU nodes: "x" (8 GPUs) starts at 0 on n0, "y" (8 GPUs) at 50 on n1. "t" (TE, 8 GPUs) at 100: one
    # victim either way; y started later -> n1.
    jobs = [be("x", 0, 1000, 8), be("y", 50, 1000, 8), te("t", 100, 100, 8)]
    plan, ids = decide("k8s", cluster(8, 8), jobs)
    assert plan.nodes == (1,)
    assert victim_ids(plan, ids) == ["y"]
    # FitGpp, for contrast, sees two identical options and takes the lower node index.
    plan, ids = decide("fitgpp", cluster(8, 8), jobs)
    assert plan.nodes == (0,)


def test_k8s_reprieves_earliest_started_first_within_a_node():
    # One 16-GPU node: "p", "q", "r" (4 GPUs each) start at 0, 10, 20; 4 GPUs free. "t" (TE, 8 GPUs) at 30 needs
    # one victim; p and q are reprieved first (earliest started) -> victim r.
    jobs = [be("p", 0, 1000, 4), be("q", 10, 1000, 4), be("r", 20, 1000, 4), te("t", 30, 100, 8)]
    plan, ids = decide("k8s", cluster(16), jobs)
    assert victim_ids(plan, ids) == ["r"]


# ----------------------------------------------------------------------------------------------------------
# Random, FIFO, priority
# ----------------------------------------------------------------------------------------------------------


def contended_workload(n: int = 40, seed: int = 7) -> Workload:
    """A small, busy workload on ``cluster(8, 8, 4)`` with many preemption opportunities."""
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n):
        is_te = rng.random() < 0.4
        gpus = float(rng.choice([1, 2, 4]))
        dur = float(rng.integers(10, 200))
        submit = float(rng.integers(0, 300))
        if is_te:
            jobs.append(te(f"j{i}", submit, dur, gpus))
        else:
            jobs.append(be(f"j{i}", submit, dur, gpus, grace=float(rng.integers(0, 20))))
    return Workload(tuple(jobs))


def test_a_policy_reset_without_a_generator_repeats_itself():
    # It drew from the operating system's entropy until 2026-12-05.
    draws = []
    for _ in range(2):
        policy = make_policy("random")
        policy.reset()
        draws.append(policy.rng.random(4))
    np.testing.assert_array_equal(draws[0], draws[1])


def test_random_policy_is_deterministic_for_the_same_rng():
    wl = contended_workload()
    a = run_policy(make_policy("random"), cluster(8, 8, 4), wl, rng=np.random.default_rng(3))
    b = run_policy(make_policy("random"), cluster(8, 8, 4), wl, rng=np.random.default_rng(3))
    assert a.n_preemptions > 0
    np.testing.assert_array_equal(a.completion, b.completion)
    assert a.segments == b.segments


def test_random_policy_depends_on_the_rng():
    wl = contended_workload()
    outcomes = {
        tuple(run_policy(make_policy("random"), cluster(8, 8, 4), wl, rng=np.random.default_rng(s)).segments)
        for s in range(6)
    }
    assert len(outcomes) > 1


def test_random_policy_plans_are_legal_and_use_candidates():
    # Every plan is checked by resolve() (IllegalDecisionError otherwise); also check it by hand here.
    for seed in range(5):
        sim = Simulator(cluster(8, 8, 4), contended_workload(seed=seed).jobs, SimConfig())
        policy = make_policy("random")
        policy.reset(np.random.default_rng(seed))
        while (req := sim.advance()) is not None:
            plan = policy.decide(req)
            legal = {j.idx for js in req.candidates.values() for j in js}
            assert set(plan.victims) <= legal
            assert len(set(plan.nodes)) == len(plan.nodes) == (req.job.gang_size if plan.nodes else 0)
            sim.resolve(plan)
        assert sim.done


def test_random_policy_picks_among_feasible_nodes():
    # Three 8-GPU nodes each running one 8-GPU BE job; "t" (TE, 8 GPUs) can take any node. Over a few seeds the
    # random policy must use more than one of them, and always exactly one node with that node's job.
    jobs = [be("a", 0, 1000, 8), be("b", 0, 1000, 8), be("c", 0, 1000, 8), te("t", 10, 10, 8)]
    chosen = set()
    for seed in range(12):
        sim, req = first_request(cluster(8, 8, 8), jobs)
        policy = make_policy("random")
        policy.reset(np.random.default_rng(seed))
        plan = policy.decide(req)
        assert plan.victims == plan.nodes  # job i runs on node i here
        sim.resolve(plan)
        chosen.add(plan.nodes)
    assert len(chosen) > 1


@pytest.mark.parametrize("name", ["fifo", "priority"])
def test_non_preemptive_policies_decline(name):
    _, req = first_request(cluster(8), [be("b", 0, 100, 8), te("t", 10, 10, 8)])
    policy = make_policy(name)
    policy.reset(np.random.default_rng(0))
    assert policy.decide(req) == DECLINE
    result = run_policy(make_policy(name), cluster(8, 8, 4), contended_workload())
    assert result.n_preemptions == 0
    assert result.preemptions.sum() == 0


@pytest.mark.parametrize("name", ["fitgpp", "fitgpp-fitness", "fitgpp-gracefirst", "k8s", "random"])
def test_preemptive_policies_preempt_on_a_contended_workload(name):
    result = run_policy(make_policy(name), cluster(8, 8, 4), contended_workload())
    assert result.n_preemptions > 0
    te_mask = result.job_class == 0
    assert result.preemptions[te_mask].sum() == 0  # only BE jobs are ever preempted


def test_run_policy_uses_the_policy_queue_discipline():
    # One 8-GPU node; blk (BE) runs [0, 100); b (BE) at 10 and t (TE) at 20 wait. fifo: b first; priority: t first.
    # The SimConfig queue is overridden by the policy's own.
    wl = Workload((be("blk", 0, 100, 8), be("b", 10, 100, 8), te("t", 20, 100, 8)))
    fifo = run_policy(make_policy("fifo"), cluster(8), wl, SimConfig(queue="priority"))
    prio = run_policy(make_policy("priority"), cluster(8), wl, SimConfig(queue="fifo"))
    assert fifo.first_start.tolist() == [0.0, 100.0, 200.0]
    assert prio.first_start.tolist() == [0.0, 200.0, 100.0]
    # ... unless queue= overrides it explicitly.
    forced = run_policy(make_policy("fifo"), cluster(8), wl, queue="priority")
    assert forced.first_start.tolist() == [0.0, 200.0, 100.0]


# ----------------------------------------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------------------------------------


def test_registry_lists_the_baselines():
    assert set(ALL_POLICIES) <= set(policy_names())


def test_registry_ablation_kwargs():
    assert make_policy("fitgpp").lam == 1.0
    assert make_policy("fitgpp-fitness").lam == 0.0
    g = make_policy("fitgpp-gracefirst")
    assert (g.order, g.rank) == ("grace", "grace")
    assert make_policy("fitgpp", lam=0.25).lam == 0.25


def test_registry_unknown_name_lists_known_ones():
    with pytest.raises(UnknownNameError, match="registered policies are") as exc:
        make_policy("nope")
    assert "fitgpp" in str(exc.value)


def test_registry_refuses_a_rule_name_for_a_saved_agent():
    with pytest.raises(UnknownNameError, match="'fitgpp' is a rule"):
        make_policy("fitgpp:model.zip")


def test_every_registered_name_builds_a_policy():
    from schedgym.registry import policy_names
    from schedgym.sim import Policy

    for name in policy_names():
        assert isinstance(make_policy(name), Policy), name


def test_policies_are_fresh_objects():
    assert make_policy("fitgpp") is not make_policy("fitgpp")


# ----------------------------------------------------------------------------------------------------------
# Legality of plans and of the step API
# ----------------------------------------------------------------------------------------------------------

# Three 8-GPU nodes. Priority order at 0 places the TE job first: "tr" (TE, 8) -> n0; then "b0" (BE, 8) -> n1;
# "b1", "b2" (BE, 4 each) -> n2. "t" (TE, 8 GPUs) at 10 cannot be placed; candidates: n1 [b0], n2 [b1, b2].
LEGAL_JOBS = [
    be("b0", 0, 1000, 8),
    be("b1", 0, 1000, 4),
    be("b2", 0, 1000, 4),
    te("tr", 0, 1000, 8),
    te("t", 10, 100, 8),
]
B0, B1, B2, TR = 0, 1, 2, 3


@pytest.fixture
def pending():
    sim, req = first_request(cluster(8, 8, 8), LEGAL_JOBS)
    assert req.job.job_id == "t"
    assert {n: [j.idx for j in js] for n, js in req.candidates.items()} == {1: [B0], 2: [B1, B2]}
    return sim


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (PreemptionPlan(nodes=(0,), victims=(TR,)), "not a preemption candidate"),  # a TE job
        (PreemptionPlan(nodes=(1,), victims=(99,)), "not a preemption candidate"),  # no such job
        (PreemptionPlan(nodes=(1, 2), victims=(B0, B1, B2)), "needs 1 distinct node"),  # too many nodes
        (PreemptionPlan(nodes=(2,), victims=(B1,)), "would offer"),  # 4 GPUs freed, 8 needed
        (PreemptionPlan(nodes=(2,), victims=(B0,)), "would offer"),  # victim on another node
        (PreemptionPlan(nodes=(5,), victims=(B0,)), "not a node index"),
        (PreemptionPlan(nodes=(-1,), victims=(B0,)), "not a node index"),
        (PreemptionPlan(nodes=(1,), victims=(B0, B0)), "more than once"),
        (PreemptionPlan(nodes=(), victims=(B0,)), "must name the nodes"),
    ],
)
def test_illegal_plans_are_rejected(pending, plan, message):
    with pytest.raises(IllegalDecisionError, match=message):
        pending.resolve(plan)


def test_rejected_plan_leaves_the_request_pending_and_state_untouched(pending):
    free_before = pending.unused.copy()
    with pytest.raises(IllegalDecisionError):
        pending.resolve(PreemptionPlan(nodes=(2,), victims=(B1,)))
    assert pending.pending_request is not None
    np.testing.assert_array_equal(pending.unused, free_before)
    assert pending.n_preemptions == 0
    # A legal plan still works: preempt b1 and b2 on n2 (grace 0): t runs [10, 110) on n2.
    pending.resolve(PreemptionPlan(nodes=(2,), victims=(B1, B2)))
    while pending.advance() is not None:
        pending.resolve(DECLINE)
    result = pending.result()
    assert [s for s in result.segments if s.job == 4] == [(4, 2, 10.0, 110.0, "completed")]


def test_gang_plan_with_duplicate_nodes_is_rejected():
    # Two 8-GPU nodes, each with a BE job; "tg" (TE, 2 x 8 GPUs) must name two distinct nodes.
    sim, req = first_request(cluster(8, 8), [be("a", 0, 100, 8), be("b", 0, 100, 8), te("tg", 1, 10, 16, gang_size=2)])
    with pytest.raises(IllegalDecisionError, match="distinct"):
        sim.resolve(PreemptionPlan(nodes=(0, 0), victims=(0,)))
    with pytest.raises(IllegalDecisionError, match="distinct"):
        sim.resolve(PreemptionPlan(nodes=(0,), victims=(0,)))
    sim.resolve(PreemptionPlan(nodes=(1, 0), victims=(0, 1)))


def test_resolve_without_advance_raises():
    sim = Simulator(cluster(8), LEGAL_JOBS[:1], SimConfig())
    with pytest.raises(IllegalDecisionError, match="no decision pending"):
        sim.resolve(DECLINE)


def test_advance_while_a_decision_is_pending_raises(pending):
    with pytest.raises(IllegalDecisionError, match="pending"):
        pending.advance()


def test_result_before_the_end_raises(pending):
    with pytest.raises(IllegalDecisionError, match="unfinished"):
        pending.result()


def test_declined_job_is_not_asked_again_until_something_changes():
    # One 8-GPU node: "b" (BE, 8 GPUs, 100 s) runs; "t" (TE, 8 GPUs) at 10 is declined. Nothing changes until b
    # ends at 100, when t simply starts: exactly one request was made.
    sim = Simulator(cluster(8), [be("b", 0, 100, 8), te("t", 10, 10, 8)], SimConfig())
    asked = 0
    while sim.advance() is not None:
        asked += 1
        sim.resolve(DECLINE)
    assert asked == 1
    assert sim.n_requests == 1


def test_no_requests_without_preemption():
    sim = Simulator(cluster(8), [be("b", 0, 100, 8), te("t", 10, 10, 8)], SimConfig(), preemption=False)
    assert sim.advance() is None
    assert sim.done


def test_unfittable_and_duplicate_jobs_are_rejected_by_the_simulator():
    from schedgym.errors import ImpossibleJobError

    with pytest.raises(ImpossibleJobError, match="can never run"):
        Simulator(cluster(8), [be("huge", 0, 10, 9)])
    with pytest.raises(ImpossibleJobError, match="can never run"):
        Simulator(cluster(8, 8), [be("gang", 0, 10, 24, gang_size=3)])
    with pytest.raises(ImpossibleJobError, match="Duplicate"):
        Simulator(cluster(8), [be("a", 0, 10, 1), be("a", 1, 10, 1)])


def test_fitgpp_rejects_bad_parameters():
    for kwargs in ({"lam": -1.0}, {"grace_scale": 0.0}, {"order": "x"}, {"rank": "x"}):
        with pytest.raises(ConfigError):
            make_policy("fitgpp", **kwargs)


def test_request_arrays_are_read_only(pending):
    req = pending.pending_request
    with pytest.raises(ValueError):
        req.avail[0, 0] = 100.0
    with pytest.raises(ValueError):
        req.capacity[0, 0] = 100.0
    with pytest.raises(ValueError):
        req.job.member[0] = 0.0
    assert req.demand.tolist() == [8.0, 0.0, 0.0]
    assert req.gang_size == 1

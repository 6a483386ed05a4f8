"""The ``lookahead`` policy: options, playouts on clones, and the choice between waiting and preempting.

Every test runs once per engine (conftest's ``engine`` fixture).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import View, be, cluster, in_node_jobs, te

from baselines.lookahead import Lookahead, fewest_victims
from schedgym.cli import main
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim import DECLINE, PreemptionPlan, SimConfig, Simulator
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.simulator import native_available
from schedgym.workloads import Workload, generate, preset

# Two 8-GPU nodes. At 0: "short" (BE, 20 s) -> n0, "long" (BE, 10,000 s) -> n1, both with a 300 s grace period.
# "t" (TE, 8 GPUs, 100 s) at 10 cannot be placed. Preempting either BE job makes t wait out 300 s of grace
# (start at 310); waiting, it starts at 20 when "short" completes by itself.
WAIT_WINS = [be("short", 0, 20, 8, grace=300), be("long", 0, 10_000, 8, grace=300), te("t", 10, 100, 8)]

# One 8-GPU node running "b" (BE, 10,000 s, no grace). "t" (TE, 8 GPUs, 100 s) at 10: waiting costs it some
# 10,000 s (slowdown ~100); preempting delays b by 100 s (slowdown +0.01).
PREEMPT_WINS = [be("b", 0, 10_000, 8), te("t", 10, 100, 8)]


def run(jobs, nodes, policy):  # noqa: ANN001
    return View(run_policy(policy, nodes, Workload(jobs)))


def test_lookahead_waits_when_a_node_frees_before_the_grace_period_would_end():
    assert run(WAIT_WINS, cluster(8, 8), make_policy("fitgpp"))["t"].first_start == 310.0  # the rules preempt
    assert run(WAIT_WINS, cluster(8, 8), make_policy("k8s"))["t"].first_start == 310.0
    policy = make_policy("lookahead")
    view = run(WAIT_WINS, cluster(8, 8), policy)
    assert view["t"].first_start == 20.0
    assert view.result.n_preemptions == 0
    plans = [plan for plan, _ in policy.last_options]
    assert plans[0] == DECLINE and len(plans) == 3  # wait; n0's plan (fitgpp, k8s, fewest victims); n1's
    scores = [score for _, score in policy.last_options]
    assert scores[0] < min(scores[1:])


def test_without_waiting_lookahead_serves_every_request_it_can():
    # WAIT_WINS: waiting was best, but wait=False leaves only the preemptions; both make t wait out the grace
    # period, and delaying "long" (10,000 s) by it costs far less slowdown than delaying "short" (20 s).
    policy = Lookahead(horizon=None, wait=False)
    view = run(WAIT_WINS, cluster(8, 8), policy)
    assert view["t"].first_start == 310.0
    assert view["long"].preemptions == 1 and view["short"].preemptions == 0
    assert DECLINE not in [plan for plan, _ in policy.last_options]
    # A request nothing can serve (no candidates) still waits.
    sim = Simulator(cluster(8), [te("a", 0, 100, 8), te("b", 1, 100, 8)])
    request = sim.advance()
    assert Lookahead(wait=False).options(request) == [DECLINE]
    assert Lookahead(wait=False).decide(request) == DECLINE


def test_lookahead_preempts_when_waiting_costs_more():
    policy = make_policy("lookahead")
    view = run(PREEMPT_WINS, cluster(8), policy)
    assert view["t"].first_start == 10.0 and view["t"].completion == 110.0
    assert view["b"].preemptions == 1
    assert [plan for plan, _ in policy.last_options] == [DECLINE, PreemptionPlan(nodes=(0,), victims=(0,))]


def test_a_preemption_cost_or_a_short_horizon_changes_the_answer():
    # Charged 1,000 per preemption, waiting is cheaper.
    assert run(PREEMPT_WINS, cluster(8), Lookahead(preemption_cost=1000.0))["b"].preemptions == 0
    # Scored 50 s after the request, before t could finish either way, the two options tie (both jobs are in the
    # system throughout), and a tie waits; scored after t would have finished, preempting wins.
    assert run(PREEMPT_WINS, cluster(8), Lookahead(horizon=50.0))["b"].preemptions == 0
    assert run(PREEMPT_WINS, cluster(8), Lookahead(horizon=200.0))["b"].preemptions == 1


def test_options_are_distinct_and_wait_comes_first():
    sim = Simulator(cluster(16), in_node_jobs())
    request = sim.advance()
    assert request is not None
    options = Lookahead().options(request)
    assert options[0] == DECLINE
    keys = [(frozenset(p.nodes), frozenset(p.victims)) for p in options]
    assert len(set(keys)) == len(keys)
    assert all(p.nodes == (0,) for p in options[1:])


def test_fewest_victims_breaks_ties_by_grace_period():
    sim = Simulator(cluster(16), in_node_jobs())
    request = sim.advance()
    cands = request.candidates[0]
    # Deficit 3 GPUs: v4 (grace 50) or v8 (grace 20) alone covers it; v2 (2) does not.
    assert [v.job_id for v in fewest_victims((3.0, 0.0, 0.0), cands)] == ["v8"]
    assert [v.job_id for v in fewest_victims((13.0, 0.0, 0.0), cands)] == ["v2", "v4", "v8"]
    assert fewest_victims((15.0, 0.0, 0.0), cands) is None


def test_lookahead_needs_the_simulation_and_refuses_bad_settings():
    sim = Simulator(cluster(8), PREEMPT_WINS)
    request = sim.advance()
    orphan = type(request)(**{f: getattr(request, f) for f in request.__dataclass_fields__ if f != "sim"})
    with pytest.raises(SchedGymError, match="request.sim"):
        make_policy("lookahead").decide(orphan)
    with pytest.raises(ConfigError, match="does not look ahead"):
        Lookahead(base=Lookahead())
    with pytest.raises(ConfigError, match="horizon"):
        Lookahead(horizon=-1.0)
    with pytest.raises(ConfigError, match="max_decisions"):
        Lookahead(max_decisions=-2)


def small_paper(n_jobs: int = 300, seed: int = 1) -> tuple:
    cl = cluster_preset("small")
    return cl, generate(preset("paper", n_jobs=n_jobs), cl, np.random.default_rng(seed))


@pytest.mark.parametrize("kwargs", [{}, {"max_decisions": 1, "horizon": 3600.0}, {"base": "random"}])
def test_lookahead_is_deterministic_and_leaves_the_simulation_alone(kwargs):
    cl, wl = small_paper()
    a = run_policy(Lookahead(**kwargs), cl, wl, rng=np.random.default_rng(5))
    b = run_policy(Lookahead(**kwargs), cl, wl, rng=np.random.default_rng(5))
    assert a.completion.tolist() == b.completion.tolist()
    assert a.n_requests > 0
    # Deciding never drives the simulation it reads: a run that records the decisions and replays them by
    # hand gets the same result.
    policy, plans = Lookahead(**kwargs), []
    policy.reset(np.random.default_rng(5))
    sim = Simulator(cl, wl.table, SimConfig(queue=policy.queue))
    while (request := sim.advance()) is not None:
        plans.append(policy.decide(request))
        sim.resolve(plans[-1])
    replay = Simulator(cl, wl.table, SimConfig(queue=policy.queue))
    for plan in plans:
        replay.advance()
        replay.resolve(plan)
    assert replay.advance() is None
    assert policy.n_playouts > len(plans) > 0
    assert replay.result().completion.tolist() == sim.result().completion.tolist() == a.completion.tolist()


def test_lookahead_decides_the_same_on_both_engines():
    if not native_available():
        pytest.skip("the native engine is not built")
    cl, wl = small_paper(200, seed=2)
    policies = [Lookahead(), Lookahead()]
    results = [run_policy(p, cl, wl, SimConfig(engine=e)) for p, e in zip(policies, ("native", "python"), strict=True)]
    assert results[0].completion.tolist() == results[1].completion.tolist()
    assert results[0].n_preemptions == results[1].n_preemptions
    assert policies[0].n_playouts == policies[1].n_playouts > 0


def test_compare_runs_lookahead(tmp_path, capsys):
    out = tmp_path / "out.json"
    argv = ["compare", "--policies", "fifo,lookahead", "--seeds", "1", "--jobs", "200", "--cluster", "small"]
    assert main([*argv, "--json", str(out), "--no-progress"]) == 0
    data = json.loads(out.read_text())
    assert set(data["policies"]) == {"fifo", "lookahead"}
    assert "lookahead" in capsys.readouterr().out


def test_lookahead_acting_through_the_environment_decides_as_in_the_simulator():
    # The environment's requests carry its simulation (on the native engine, one deciding victim by victim in
    # C++, whose clones carry the decision in progress): an agent that looks ahead sees what run_policy's does.
    from helpers import play_episode

    from agents import HeuristicAgent
    from schedgym.envs import PreemptionEnv

    n_jobs, seed = 1000, 0
    env = PreemptionEnv(n_jobs=n_jobs, max_candidates=400)
    obs, _ = env.reset(options={"workload_seed": seed})
    rng = np.random.SeedSequence([seed, 1])
    agent = HeuristicAgent(Lookahead(horizon=3600.0), env, rng=np.random.default_rng(rng))
    steps, _ = play_episode(env, obs, lambda o: agent.predict(o)[0])
    cl = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=n_jobs), cl, np.random.default_rng(np.random.SeedSequence([seed, 0])))
    direct = run_policy(Lookahead(horizon=3600.0), cl, wl, rng=np.random.default_rng(rng))
    assert steps > 0 and agent.policy.n_playouts > 0
    assert env.unwrapped.sim.result().completion.tolist() == direct.completion.tolist()

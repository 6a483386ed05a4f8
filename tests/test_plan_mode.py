"""The plan-level action mode (schedgym/decision/plan_mode.py, schedgym/PreemptionPlan-v1): the option set, its
rows, masks and actions by hand; the environment in lockstep on both engines, pickled mid-episode; a policy
acting in it inside the simulator (as in ``compare``), which reproduces a rule exactly when it takes that
rule's row; and lookahead's choice always among the options."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest
from helpers import be, cluster, fit_vs_grace_jobs, te

import schedgym  # noqa: F401 - registers the ids
from baselines.lookahead import Lookahead
from schedgym.decision.features import N_HEAD_V2, PLAN_FEATURES, QUEUE_FEATURES
from schedgym.decision.plan_mode import PlanDecision, PlanEncoder, PlanPolicy
from schedgym.envs import EnvConfig, PreemptionEnv
from schedgym.errors import ConfigError, IllegalDecisionError
from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim import PreemptionPlan, SimConfig, Simulator
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.job import JobTable
from schedgym.workloads import generate, preset

PLAN_ID = "schedgym/PreemptionPlan-v1"
ROW = len(PLAN_FEATURES)
NAMES = [f.name for f in PLAN_FEATURES]


def encoder(jobs, n_nodes_gpus=(8, 8), max_plans=24, queue_rows=4):
    sim = Simulator(cluster(*n_nodes_gpus), jobs, SimConfig())
    request = sim.advance()
    assert request is not None
    enc = PlanEncoder(
        sim.capacity,
        JobTable.from_specs(jobs),
        max_plans=max_plans,
        queue_rows=queue_rows,
        estimate_noise=0.0,
        rng=np.random.default_rng(0),
    )
    return sim, enc, enc.begin(request)


def plan_rows(decision: PlanDecision, queue_rows: int = 4) -> list[dict[str, float]]:
    obs = decision.observe()
    start = N_HEAD_V2 + 2 * queue_rows * len(QUEUE_FEATURES)
    return [
        dict(zip(NAMES, obs[start + ROW * i : start + ROW * (i + 1)].tolist(), strict=True))
        for i in range(len(decision.options))
    ]


def test_options_of_a_request_by_hand():
    # Two 8-GPU nodes: "big" (8 GPUs) on n0, "s1" and "s2" (4 each) on n1; "t" (TE, 4 GPUs, 100 s) at 10, grace
    # 10 everywhere. fitgpp: n1, s1 (exact fit, tie to the lower index). k8s: fewest victims (one either way),
    # ties to node order: n0, big. Per node: n0 {big}, n1 {s1} (tie on grace, lower index): the same two plans,
    # so three options, each rule's plan flagged per_node as well.
    _, _, d = encoder(fit_vs_grace_jobs(10, 10))
    assert [o.plan for o in d.options] == [
        PreemptionPlan(),
        PreemptionPlan(nodes=(1,), victims=(1,)),
        PreemptionPlan(nodes=(0,), victims=(0,)),
    ]
    assert [sorted(o.sources) for o in d.options] == [["wait"], ["fitgpp", "per_node"], ["k8s", "per_node"]]
    assert d.offers_choice and d.n_rows == 2
    assert d.mask().tolist() == [True] * 3 + [False] * 21
    assert d.choose(2) == PreemptionPlan(nodes=(0,), victims=(0,))
    with pytest.raises(IllegalDecisionError, match="option row"):
        d.check(3)


def test_plan_rows_by_hand():
    # Estimates are exact (noise 0). fitgpp's row: one victim (1/2), on one node of two, 4 of 16 GPUs freed,
    # nothing left on n1 once t is placed; t starts after s1's grace, 10 s / t's 100 s -> 10/110; s1 has
    # 1000 - 10 = 990 s left against the BE median 1000 -> 990/1990, against t's 100 -> 990/1090; it ran 10 s;
    # with P = 1 this preemption is its last. k8s's row frees big's 8 GPUs: 4 left on n0 (surplus 4/8), and
    # 4 of 16 GPUs unused after, all on one node (fragmentation 0).
    _, _, d = encoder(fit_vs_grace_jobs(10, 10))
    wait, fit, k8s = plan_rows(d)
    assert wait["valid"] == wait["wait"] == 1.0
    assert all(v == 0.0 for k, v in wait.items() if k not in ("valid", "wait"))
    expected_fit = {
        "valid": 1.0, "wait": 0.0, "by_fitgpp": 1.0, "by_k8s": 0.0, "per_node": 1.0, "victims": 0.5,
        "gang_victims": 0.0, "nodes_touched": 0.5, "freed_gpus": 0.25, "surplus_gpus": 0.0,
        "start_delay": 10 / 110, "remaining": 990 / 1990, "remaining_vs_te": 990 / 1090, "elapsed": 10 / 1010,
        "preemptions": 0.0, "last_chance": 1.0, "starts_te": 0.0, "starts_be": 0.0, "unused_gpus_after": 0.0,
        "fragmentation_after": 0.0,
    }  # fmt: skip
    for name, value in expected_fit.items():
        assert fit[name] == pytest.approx(value, abs=1e-6), name
    assert k8s["by_k8s"] == 1.0 and k8s["by_fitgpp"] == 0.0
    assert k8s["freed_gpus"] == pytest.approx(0.5)
    assert k8s["surplus_gpus"] == pytest.approx(0.5)
    assert k8s["unused_gpus_after"] == pytest.approx(0.25)
    assert k8s["fragmentation_after"] == 0.0


def test_queued_jobs_that_a_plan_lets_start():
    # One 8-GPU node, "a" (BE, 8 GPUs) running; "q" (BE, 2 GPUs) queued at 1; "t" (TE, 4 GPUs) at 2. The only
    # plan preempts a: t takes 4 of its 8 GPUs and q fits in the 4 left: starts_be = 1 -> 1/2, and 2 of the 8
    # GPUs stay unused.
    jobs = [be("a", 0, 1000, 8, grace=5), be("q", 1, 100, 2), te("t", 2, 50, 4)]
    _, _, d = encoder(jobs, n_nodes_gpus=(8,))
    wait, plan = plan_rows(d)
    assert plan["starts_be"] == pytest.approx(0.5)
    assert plan["starts_te"] == 0.0
    assert wait["starts_be"] == 0.0
    assert plan["unused_gpus_after"] == pytest.approx(2 / 8)


def test_options_beyond_max_plans_are_cut_from_the_end():
    _, _, d = encoder(fit_vs_grace_jobs(10, 10), max_plans=2)
    assert [o.plan for o in d.options] == [PreemptionPlan(), PreemptionPlan(nodes=(1,), victims=(1,))]
    assert d.mask().tolist() == [True, True]


def test_the_plan_mode_has_observation_version_2_only():
    with pytest.raises(ConfigError, match="observation_version 2"):
        EnvConfig(action_mode="plan", observation_version=1)
    with pytest.raises(ConfigError, match="action_mode"):
        EnvConfig(action_mode="plans")
    with pytest.raises(ConfigError, match="max_plans"):
        EnvConfig(action_mode="plan", observation_version=2, max_plans=1)
    with pytest.raises(ConfigError, match="observation_version"):
        EnvConfig(observation_version=3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_plans": 8},
            "max_plans applies to action_mode 'plan', got max_plans 8 with action_mode 'victim'",
        ),
        (
            {"observation_version": 2, "max_plans": 2},
            "max_plans applies to action_mode 'plan', got max_plans 2 with action_mode 'victim'",
        ),
        (
            {"action_mode": "plan", "observation_version": 2, "max_candidates": 64},
            "max_candidates applies to action_mode 'victim', got max_candidates 64 with action_mode 'plan'",
        ),
        (
            {"queue_rows": 0},
            "queue_rows applies to observation_version 2, got queue_rows 0 with observation_version 1",
        ),
        (
            {"queue_rows": 8, "max_candidates": 4},
            "queue_rows applies to observation_version 2, got queue_rows 8 with observation_version 1",
        ),
    ],
)
def test_row_counts_the_mode_does_not_read_are_refused(kwargs, message):
    # Ignored silently before: the victim mode shows max_candidates rows whatever max_plans says, the plan mode
    # max_plans rows whatever max_candidates says, and version 1 has no queue rows.
    for make in (EnvConfig, PreemptionEnv, lambda **kw: gym.make("schedgym/Preemption-v1", **kw)):
        with pytest.raises(ConfigError) as err:
            make(**kwargs)
        assert str(err.value).startswith(message), str(err.value)
        assert "\n" not in str(err.value)


def test_row_counts_at_their_defaults_pass_in_every_mode():
    # A dataclass cannot tell a given value from its default: the defaults (and the ids' own) go everywhere.
    assert EnvConfig(max_plans=24, queue_rows=4).decision_spec.n_actions == 17
    assert EnvConfig(action_mode="plan", observation_version=2, max_candidates=16).decision_spec.n_actions == 24
    gym.make(PLAN_ID, max_plans=6, queue_rows=0).close()
    gym.make("schedgym/Preemption-v1", observation_version=2, queue_rows=2).close()
    gym.make("schedgym/Preemption-v1", action_mode="plan", observation_version=2).close()  # the id's 16: default


def test_an_id_setting_max_candidates_is_refused_in_the_plan_mode_as_the_message_says():
    # PreemptionLarge-v1 sets max_candidates 32, which the plan mode would have dropped without a word.
    with pytest.raises(ConfigError, match=r"got max_candidates 32 .*\(if the environment id sets another, pass "):
        gym.make("schedgym/PreemptionLarge-v1", action_mode="plan", observation_version=2)
    env = gym.make("schedgym/PreemptionLarge-v1", action_mode="plan", observation_version=2, max_candidates=16)
    assert env.action_space.n == 24
    env.close()


def test_overriding_the_mode_keeps_no_row_count_of_the_other():
    plan = EnvConfig(action_mode="plan", observation_version=2, max_plans=8, queue_rows=2)
    with pytest.raises(ConfigError, match="max_plans applies to action_mode 'plan'"):
        PreemptionEnv(plan, action_mode="victim")
    with pytest.raises(ConfigError, match="queue_rows applies to observation_version 2"):
        PreemptionEnv(plan, action_mode="victim", observation_version=1, max_plans=24)


def test_the_environment_id():
    env = gym.make(PLAN_ID)
    assert env.action_space.n == 24
    assert env.observation_space.shape == (N_HEAD_V2 + 8 * len(QUEUE_FEATURES) + 24 * ROW,)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    options = env.unwrapped.plan_options
    assert len(options) == int(info["action_mask"].sum()) >= 2
    assert info["n_candidates"] == len(options) - 1


def _episode(engine: str, seed: int, n_jobs: int = 300, pickle_at: int | None = None):
    """Observations, masks and rewards of an episode with seeded random legal actions."""
    env = PreemptionEnv(EnvConfig(action_mode="plan", observation_version=2, n_jobs=n_jobs, sim={"engine": engine}))
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [(obs, info["action_mask"], 0.0)]
    done, steps = False, 0
    while not done:
        if pickle_at is not None and steps == pickle_at:
            env = pickle.loads(pickle.dumps(env))
        legal = np.flatnonzero(env.action_masks())
        obs, reward, done, _, info = env.step(int(rng.choice(legal)))
        out.append((obs, info["action_mask"], reward))
        steps += 1
    return out


def test_both_engines_and_a_pickled_copy_give_the_same_episode():
    reference = _episode("python", seed=3)
    assert len(reference) > 5
    for other in (_episode("native", seed=3), _episode("python", seed=3, pickle_at=3)):
        assert len(other) == len(reference)
        for (o1, m1, r1), (o2, m2, r2) in zip(reference, other, strict=True):
            np.testing.assert_array_equal(o1, o2)
            np.testing.assert_array_equal(m1, m2)
            assert r1 == r2


class FollowRule(PlanPolicy):
    """Takes the row the rule ``rule`` proposes (wait when it proposes none)."""

    def __init__(self, rule: str) -> None:
        super().__init__(estimate_noise=0.0)
        self.rule = rule

    def choose(self, decision: PlanDecision) -> int:
        return next((i for i, o in enumerate(decision.options) if self.rule in o.sources), 0)


@pytest.mark.parametrize("rule", ["fitgpp", "k8s"])
def test_a_plan_policy_taking_a_rules_row_is_that_rule(rule):
    cl = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=600), cl, np.random.default_rng(7))
    expected = run_policy(make_policy(rule), cl, wl).summary()
    got = run_policy(FollowRule(rule), cl, wl).summary()
    assert got == expected


def test_the_environment_taking_fitgpps_row_is_fitgpp():
    env = PreemptionEnv(EnvConfig(action_mode="plan", observation_version=2, n_jobs=400, estimate_noise=0.0))
    obs, info = env.reset(seed=5)
    workload = env.unwrapped._workload
    done = env.pending_request is None
    while not done:
        row = next((i for i, o in enumerate(env.plan_options) if "fitgpp" in o.sources), 0)
        obs, _, done, _, info = env.step(row)
    expected = run_policy(make_policy("fitgpp"), env.cluster, workload).summary()
    assert env.sim.result().summary() == expected


def test_lookaheads_choice_is_always_one_of_the_options():
    cl = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=1500), cl, np.random.default_rng(2))
    teacher = Lookahead(wait=False, preemption_cost=10.0)
    teacher.reset(np.random.default_rng(0))
    sim = Simulator(cl, wl.jobs, SimConfig())
    enc = PlanEncoder(
        sim.capacity, JobTable.from_specs(wl.jobs), max_plans=64, queue_rows=4, estimate_noise=0.0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    n = 0
    while (request := sim.advance()) is not None:
        decision = enc.begin(request)
        plan = teacher.decide(request)
        assert decision.index_of(plan) is not None
        sim.resolve(plan)
        n += 1
    assert n > 10


def test_a_plan_policy_runs_in_compare_like_any_rule(monkeypatch):
    # Registered as any policy is, it runs in `compare` on the same workloads as the rules: taking fitgpp's
    # row, it is fitgpp on every seed.
    from schedgym import registry
    from schedgym.experiments.compare import CompareConfig, run_comparison

    registry.policy_names()  # loads the registered packages first
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the test's registration only
    registry.register_policy("follow-fitgpp", FollowRule, kwargs={"rule": "fitgpp"})
    result = run_comparison(CompareConfig(policies=("fitgpp", "follow-fitgpp"), seeds=2, n_jobs=300)).summary()
    per_seed = {name: p["per_seed"] for name, p in result["policies"].items()}
    strip = [{k: v for k, v in s.items() if k != "wall_time_s"} for s in per_seed["fitgpp"]]
    assert [{k: v for k, v in s.items() if k != "wall_time_s"} for s in per_seed["follow-fitgpp"]] == strip


def test_the_plan_mode_trains_on_the_workload_distribution():
    # workload="mix": every episode a level on its own cluster; the spaces stay the same.
    env = gym.make(PLAN_ID, workload="mix", num_levels=5)
    sizes = set()
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        assert env.observation_space.contains(obs)
        sizes.add(env.unwrapped.cluster.n_nodes)
        done = env.unwrapped.pending_request is None
        while not done:
            obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[-1]))
            assert env.observation_space.contains(obs)
            done = terminated or truncated
    assert len(sizes) > 1

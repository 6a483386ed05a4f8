"""Observation version 2 (schedgym/decision/scalefree.py): its time units by hand, and its two properties:
multiplying every time of a workload by k > 0 leaves every observation, mask and decision unchanged (bit for
bit when k is a power of two, which float arithmetic scales exactly; up to float32 rounding otherwise), in both
action modes; and permuting the nodes permutes the option rows only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedgym.decision import scalefree
from schedgym.decision.features import N_HEAD_V2, QUEUE_FEATURES, schema
from schedgym.decision.plan_mode import PlanEncoder
from schedgym.decision.plans import per_node_plans, plan_options
from schedgym.decision.scalefree import WorkloadScales, prefix_lower_medians
from schedgym.decision.stepwise import DecisionEncoder
from schedgym.envs import EnvConfig, PreemptionEnv
from schedgym.sim import PreemptionPlan, SimConfig, Simulator
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.job import JobClass, JobTable
from schedgym.sim.policy import PreemptionRequest
from schedgym.workloads import Workload, generate, preset


def test_prefix_lower_medians_by_hand():
    # [3] -> 3; [3, 1] -> lower median 1; [3, 1, 2] -> 2; [3, 1, 2, 5] -> sorted 1 2 3 5, lower median 2.
    assert prefix_lower_medians(np.array([3.0, 1.0, 2.0, 5.0])).tolist() == [3.0, 1.0, 2.0, 2.0]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 1e-3, 7e5]) | st.floats(1e-6, 1e7), max_size=60),
    limit=st.sampled_from([0, 5, 4096]),
)
def test_prefix_lower_medians_are_the_elements_of_rank_i_over_2(values, limit):
    # Both ways of computing them (a sorted list up to _INSORT_LIMIT values, two heaps beyond) agree with the
    # definition.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scalefree, "_INSORT_LIMIT", limit)
        got = prefix_lower_medians(np.array(values, dtype=np.float64))
    assert got.dtype == np.float64 and got.tolist() == [sorted(values[: i + 1])[i // 2] for i in range(len(values))]


def test_running_medians_count_only_jobs_submitted_so_far():
    table = JobTable(
        job_id=["t0", "b0", "t1", "b1", "t2"],
        submit_time=[0.0, 5.0, 10.0, 20.0, 30.0],
        duration=[100.0, 1000.0, 300.0, 2000.0, 50.0],
        gpus=1.0,
        job_class=[JobClass.TE, JobClass.BE, JobClass.TE, JobClass.BE, JobClass.TE],
    )
    scales = WorkloadScales(table, np.ones(5))
    assert scales.medians(0.0) == (100.0, 100.0)  # no BE job yet: the TE median stands for both
    assert scales.medians(5.0) == (100.0, 1000.0)
    assert scales.medians(25.0) == (100.0, 1000.0)  # TE {100, 300} -> 100; BE {1000, 2000} -> 1000
    assert scales.medians(30.0) == (100.0, 1000.0)  # TE {50, 100, 300} -> 100


# ---------------------------------------------------------------------------------------------------- scaling
def scaled(workload: Workload, k: float) -> Workload:
    """Every time of ``workload`` times ``k``: arrivals, durations, grace periods, restart overheads."""
    jobs = tuple(
        dataclasses.replace(
            j,
            submit_time=j.submit_time * k,
            duration=j.duration * k,
            grace_period=j.grace_period * k,
            restart_overhead=None if j.restart_overhead is None else j.restart_overhead * k,
        )
        for j in workload.jobs
    )
    return Workload(jobs, name=workload.name)


def one_grace_period(workload: Workload, grace: float) -> Workload:
    """``workload`` with every job's grace period ``grace``: fitgpp's score weighs grace periods against a
    fixed 60 s (baselines/fitgpp.py), so with different grace periods its plan, and the plan mode's
    ``by_fitgpp`` row, can change when times are scaled; with one grace period it cannot."""
    return Workload(tuple(dataclasses.replace(j, grace_period=grace) for j in workload.jobs), name=workload.name)


WEIGHTS = np.random.default_rng(0).normal(size=64)


def act(obs: np.ndarray, mask: np.ndarray, row: int, start: int, offset: int) -> int:
    """A decision that depends on the observation only: of the legal actions but waiting (action 0), the one
    whose row scores highest under fixed weights (action ``a`` has row ``a - offset``)."""

    def score(a: int) -> float:
        i = start + row * (a - offset)
        return float(obs[i : i + row] @ WEIGHTS[:row])

    legal = np.flatnonzero(mask).tolist()
    return int(max(legal[1:], key=score)) if len(legal) > 1 else 0


def trajectory(mode: str, workload: Workload, overhead: float) -> list[tuple[np.ndarray, np.ndarray, int]]:
    config = EnvConfig(
        action_mode=mode,
        observation_version=2,
        n_jobs=len(workload.jobs),
        cluster="small",
        sim={"restart_overhead": overhead, "max_preemptions": 2},
    )
    env = PreemptionEnv(config)
    obs, info = env.reset(seed=11, options={"workload": workload})
    row = len(schema(2, mode).row)
    start = N_HEAD_V2 + 2 * config.queue_rows * len(QUEUE_FEATURES)
    out = []
    done = env.pending_request is None
    while not done:
        mask = info["action_mask"]
        a = act(obs, mask, row, start, 1 if mode == "victim" else 0)
        out.append((obs, mask, a))
        obs, _, done, _, info = env.step(a)
    return out


def base_workload(seed: int, mode: str) -> Workload:
    cl = cluster_preset("small")
    wl = generate(preset("paper", n_jobs=400), cl, np.random.default_rng(seed))
    return one_grace_period(wl, 20.0) if mode == "plan" else wl


@pytest.mark.parametrize("mode", ["victim", "plan"])
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), exponent=st.integers(-3, 6))
def test_scaling_every_time_by_a_power_of_two_changes_nothing(mode, seed, exponent):
    wl = base_workload(seed, mode)
    k = 2.0**exponent
    reference = trajectory(mode, wl, 30.0)
    other = trajectory(mode, scaled(wl, k), 30.0 * k)
    assert len(other) == len(reference)
    for (o1, m1, a1), (o2, m2, a2) in zip(reference, other, strict=True):
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(m1, m2)
        assert a1 == a2


@pytest.mark.parametrize("mode", ["victim", "plan"])
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), k=st.floats(0.05, 50.0))
def test_scaling_every_time_by_any_factor_changes_nothing_beyond_rounding(mode, seed, k):
    wl = base_workload(seed, mode)
    reference = trajectory(mode, wl, 30.0)
    other = trajectory(mode, scaled(wl, k), 30.0 * k)
    assert len(other) == len(reference)
    for (o1, m1, a1), (o2, m2, a2) in zip(reference, other, strict=True):
        np.testing.assert_allclose(o1, o2, atol=1e-5)
        np.testing.assert_array_equal(m1, m2)
        assert a1 == a2


# ---------------------------------------------------------------------------------------------------- permuting
def permuted(request: PreemptionRequest, p: list[int]) -> PreemptionRequest:
    """``request`` with node ``n`` renamed ``p[n]`` (the jobs copied, their nodes renamed)."""
    inverse = np.argsort(p)
    copies = {}
    for cands in request.candidates.values():
        for c in cands:
            if c.idx not in copies:
                copy = c.copy()
                copy.nodes = tuple(p[n] for n in c.nodes)
                copies[c.idx] = copy
    candidates = {p[n]: [copies[c.idx] for c in cands] for n, cands in request.candidates.items()}
    candidates = dict(sorted(candidates.items()))
    return dataclasses.replace(
        request,
        avail=request.avail[inverse],
        capacity=request.capacity[inverse],
        held=request.held[inverse],
        candidates=candidates,
        capacity_rows=request.capacity[inverse].tolist(),
    )


def renamed(plan: PreemptionPlan, p: list[int]) -> PreemptionPlan:
    return PreemptionPlan(nodes=tuple(p[n] for n in plan.nodes), victims=plan.victims)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**16), perm_seed=st.integers(0, 2**16))
def test_permuting_the_nodes_permutes_the_rows_only(seed, perm_seed):
    cl = cluster_preset("small")
    wl = generate(preset("paper", n_jobs=300), cl, np.random.default_rng(seed))
    sim = Simulator(cl, wl.jobs, SimConfig(engine="python"))
    table = JobTable.from_specs(wl.jobs)
    rng = np.random.default_rng(perm_seed)
    plan_enc = PlanEncoder(sim.capacity, table, max_plans=64, queue_rows=4, estimate_noise=0.3, rng=rng)
    victim_enc = DecisionEncoder(
        sim.capacity, len(table), max_candidates=64, estimate_noise=0.3, rng=np.random.default_rng(perm_seed),
        table=table, queue_rows=4,
    )  # fmt: skip
    n_checked = 0
    while (request := sim.advance()) is not None and n_checked < 6:
        p = rng.permutation(len(cl.nodes)).tolist()
        other = permuted(request, p)
        # The per-node options are renamed, nothing else.
        assert sorted((p[n], renamed(plan, p)) for n, plan in per_node_plans(request)) == sorted(per_node_plans(other))
        # The same options, renamed, have the same rows; head and queue rows are the same.
        obs = plan_enc.observer
        medians = obs.scales.medians(request.now)
        jobs = obs.queued(request)
        options = plan_options(request, plan_enc.rules)
        for o in options:
            a = obs.plan_row(request, o.plan, o.sources, jobs, medians)
            b = obs.plan_row(other, renamed(o.plan, p), o.sources, jobs, medians)
            np.testing.assert_allclose(a, b, atol=1e-9)
        np.testing.assert_allclose(obs.head(request, medians, {}), obs.head(other, medians, {}), atol=1e-9)
        np.testing.assert_allclose(obs.queue(request, jobs, medians), obs.queue(other, jobs, medians), atol=1e-9)
        # Victim mode: the candidate rows are permuted (as a multiset, the same rows).
        a_rows = victim_enc.begin(request).observe()
        b_rows = victim_enc.begin(other).observe()
        start = len(obs.head_names) + 2 * 4 * len(obs.queue_names)
        width = 14
        ra = sorted(map(tuple, np.round(a_rows[start:].reshape(-1, width), 6).tolist()))
        rb = sorted(map(tuple, np.round(b_rows[start:].reshape(-1, width), 6).tolist()))
        assert ra == rb
        np.testing.assert_allclose(a_rows[:start], b_rows[:start], atol=1e-6)
        sim.resolve(plan_enc.rules[0][1].decide(request))
        n_checked += 1
    assert n_checked > 0


def test_version_1_is_not_scale_free():
    # What the tests above would catch: version 1 squashes times with fixed scales (600 s, 3,600 s).
    wl = base_workload(3, "victim")

    def first(w: Workload, overhead: float) -> np.ndarray:
        env = PreemptionEnv(EnvConfig(n_jobs=400, cluster="small", sim={"restart_overhead": overhead}))
        return env.reset(seed=11, options={"workload": w})[0]

    assert np.abs(first(wl, 30.0) - first(scaled(wl, 4.0), 120.0)).max() > 0.1

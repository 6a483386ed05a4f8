"""Property tests: random small clusters and workloads under every policy and every rule variant.

Invariants checked on every run (see ``check_run``):
- no node is ever over-allocated: replaying run segments plus the grace period after each preempted segment,
  the demand on every node stays within its capacity at all times; and the simulator's own ``free`` stays in
  [0, capacity] whenever it stops for a decision;
- every job completes exactly once: finite completion, one "completed" segment on each of its k distinct
  nodes, all ending at the completion time;
- a gang's members start and stop together; no job runs before its submit time; completion - submit >=
  duration; per job, the segments on one node add up to duration + overhead_time;
- only BE jobs are preempted, at most max_preemptions times, and each preemption costs exactly its grace
  period before the job runs again.

A second group compares the non-preemptive scheduler with a deliberately naive reference implementation of
the documented queue/backfill/placement rules.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.experiments import run_policy
from schedgym.registry import make_policy
from schedgym.sim import ClusterSpec, JobClass, JobSpec, NodeSpec, SimConfig, Simulator
from schedgym.sim.metrics import RunResult
from schedgym.workloads import SyntheticConfig, Workload, generate, load_trace, save_trace

ALL_POLICIES = ["fifo", "priority", "fitgpp", "fitgpp-fitness", "fitgpp-gracefirst", "k8s", "random"]
TOL = 1e-6
# Multiply the number of examples for a longer bug hunt: SCHEDGYM_PROPERTY_SCALE=20 pytest tests/test_properties.py
SCALE = float(os.environ.get("SCHEDGYM_PROPERTY_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


PROPERTY_SETTINGS = settings(
    max_examples=examples(50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ----------------------------------------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------------------------------------


@st.composite
def clusters(draw) -> ClusterSpec:
    n = draw(st.integers(1, 4))
    fractional = draw(st.booleans())
    gpu_sizes = [1.0, 1.5, 2.5, 0.7] if fractional else [1.0, 2.0, 4.0, 8.0]
    nodes = tuple(
        NodeSpec(
            f"n{i}",
            draw(st.sampled_from(gpu_sizes)),
            draw(st.sampled_from([0.0, 4.0, 16.0])),
            draw(st.sampled_from([0.0, 32.0, 64.0])),
        )
        for i in range(n)
    )
    return ClusterSpec(nodes)


def _fits(cap: np.ndarray, member: tuple[float, float, float], k: int) -> bool:
    return int((cap >= np.array(member) - 1e-9).all(axis=1).sum()) >= k


@st.composite
def workloads(draw, cap: np.ndarray) -> list[JobSpec]:
    n_nodes = len(cap)
    n_jobs = draw(st.integers(5, 30))
    fractions = st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0])
    # A job's own restart overhead (None: the config's), given by some jobs in a third of the workloads.
    restart = st.sampled_from([None, 0.0, 3.0, 12.0]) if draw(st.sampled_from([False, False, True])) else st.just(None)
    jobs = []
    for i in range(n_jobs):
        host = cap[draw(st.integers(0, n_nodes - 1))]
        member = tuple(float(host[r] * draw(fractions)) for r in range(3))
        if sum(member) <= 0:
            member = (float(host[0]) * 0.5, float(host[1]) * 0.5, float(host[2]) * 0.5)
        k = draw(st.integers(1, min(3, n_nodes)))
        if not _fits(cap, member, k):
            k = 1  # the host node always fits one member
        is_te = draw(st.booleans())
        jobs.append(
            JobSpec(
                job_id=f"j{i}",
                submit_time=float(draw(st.integers(0, 60))),  # many equal times on purpose
                duration=float(draw(st.sampled_from([1, 2, 5, 7.5, 10, 20, 33, 50]))),
                gpus=member[0] * k,
                cpus=member[1] * k,
                mem_gb=member[2] * k,
                gang_size=k,
                job_class=JobClass.TE if is_te else JobClass.BE,
                grace_period=float(draw(st.sampled_from([0, 0, 1, 3, 10, 25]))),
                restart_overhead=draw(restart),
            )
        )
    return jobs


@st.composite
def scenarios(draw):
    cl = draw(clusters())
    jobs = draw(workloads(cl.capacity))
    config = SimConfig(
        queue=draw(st.sampled_from(["fifo", "priority"])),
        backfill=draw(st.booleans()),
        placement=draw(st.sampled_from(["best-fit", "first-fit"])),
        max_preemptions=draw(st.integers(0, 3)),
        restart_overhead=float(draw(st.sampled_from([0.0, 0.0, 2.0, 7.5]))),
    )
    seed = draw(st.integers(0, 2**16))
    return cl, jobs, config, seed


# ----------------------------------------------------------------------------------------------------------
# Driving and checking
# ----------------------------------------------------------------------------------------------------------


def drive(policy_name: str, cl: ClusterSpec, jobs: list[JobSpec], config: SimConfig, seed: int) -> RunResult:
    """Run with the step API, checking the simulator's resource accounting at every stop."""
    policy = make_policy(policy_name)
    policy.reset(np.random.default_rng(seed))
    sim = Simulator(cl, jobs, config, preemption=bool(policy.preempts))
    cap = sim.capacity
    n_requests = 0
    while (req := sim.advance()) is not None:
        n_requests += 1
        assert req.job.job_class == JobClass.TE
        assert (sim.unused >= -1e-9).all(), sim.unused
        assert (sim.unused <= cap + 1e-9).all(), sim.unused
        for js in req.candidates.values():
            for j in js:
                assert j.job_class == JobClass.BE and j.preemptions < config.max_preemptions
        sim.resolve(policy.decide(req))
        assert n_requests < 100_000, "the simulator keeps asking"
    if not policy.preempts:
        assert n_requests == 0
    assert sim.done
    assert np.allclose(sim.unused, cap), "resources leaked at the end"
    assert np.allclose(sim.avail, cap)
    return sim.result()


def check_run(result: RunResult, cl: ClusterSpec, jobs: list[JobSpec], config: SimConfig) -> None:
    cap = cl.capacity
    by_job: dict[int, list] = defaultdict(list)
    for s in result.segments:
        assert 0 <= s.node < cl.n_nodes
        assert s.end_reason in ("completed", "preempted")
        assert s.end >= s.start - TOL
        by_job[s.job].append(s)

    assert len(result.job_ids) == len(jobs)
    for i, spec in enumerate(jobs):
        segs = by_job[i]  # in the order the simulator closed them, i.e. chronological
        k = spec.gang_size
        completion = result.completion[i]
        assert math.isfinite(completion), f"{spec.job_id} never completed"
        # A run of a gang of k is k consecutive segments with equal start and end on distinct nodes. (Runs may
        # have zero length, e.g. a job preempted at the instant it started, so runs are not keyed by time.)
        assert len(segs) % k == 0, f"{spec.job_id}: {len(segs)} segments for a gang of {k}"
        ordered = []
        for c in range(0, len(segs), k):
            members = segs[c : c + k]
            assert len({(m.start, m.end, m.end_reason) for m in members}) == 1, members
            assert len({m.node for m in members}) == k, members
            ordered.append(((members[0].start, members[0].end), members))
        completed = [r for r in ordered if r[1][0].end_reason == "completed"]
        assert len(completed) == 1, f"{spec.job_id} completed {len(completed)} times"
        assert ordered[-1][1][0].end_reason == "completed", "a run after completion"
        assert completed[0][0][1] == pytest.approx(completion)
        # Timing.
        assert ordered[0][0][0] >= spec.submit_time - TOL, f"{spec.job_id} started before its submission"
        assert result.first_start[i] == pytest.approx(ordered[0][0][0])
        assert completion - spec.submit_time >= spec.duration - TOL
        for (prev, _), (nxt, _) in zip(ordered, ordered[1:], strict=False):
            # the next run starts no earlier than the end of the grace period that followed the previous run
            assert nxt[0] >= prev[1] + spec.grace_period - TOL, f"{spec.job_id} restarted during its grace period"
        one_node = sum(end - start for (start, end), _ in ordered)
        assert one_node == pytest.approx(spec.duration + result.overhead_time[i], abs=TOL)
        assert result.run_time[i] == pytest.approx(one_node, abs=TOL)
        # Preemptions.
        n_pre = len(ordered) - 1
        assert result.preemptions[i] == n_pre
        assert n_pre <= config.max_preemptions
        if spec.job_class == JobClass.TE:
            assert n_pre == 0, f"TE job {spec.job_id} was preempted"
        assert result.grace_time[i] == pytest.approx(n_pre * spec.grace_period)
        own = config.restart_overhead if spec.restart_overhead is None else spec.restart_overhead
        assert result.overhead_time[i] <= n_pre * own + TOL
        assert result.wait[i] >= -TOL
    assert result.n_preemptions == int(result.preemptions.sum())

    # Replay occupancy: a segment holds [start, end); a preempted one also holds [end, end + grace).
    deltas: dict[int, list[tuple[float, int, np.ndarray]]] = defaultdict(list)
    for s in result.segments:
        spec = jobs[s.job]
        member = np.array(spec.member_demand)
        stop = s.end + (spec.grace_period if s.end_reason == "preempted" else 0.0)
        if stop > s.start:
            deltas[s.node].append((s.start, 1, member))
            deltas[s.node].append((stop, 0, -member))  # 0 sorts releases before acquisitions at equal times
    for node, evs in deltas.items():
        evs.sort(key=lambda e: (e[0], e[1]))
        used = np.zeros(3)
        for t, _, d in evs:
            used = used + d
            assert (used <= cap[node] + 1e-6).all(), f"node {node} over-allocated at t={t}: {used} > {cap[node]}"


# ----------------------------------------------------------------------------------------------------------
# The properties
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy_name", ALL_POLICIES)
@PROPERTY_SETTINGS
@given(scenario=scenarios())
def test_invariants_hold_for_every_policy(policy_name, scenario):
    cl, jobs, config, seed = scenario
    result = drive(policy_name, cl, jobs, config, seed)
    check_run(result, cl, jobs, config)


@pytest.mark.slow
@pytest.mark.parametrize("policy_name", ["fitgpp", "k8s", "random"])
@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_invariants_thorough(policy_name, scenario):
    """The same invariants with many more examples (run with ``-m slow``)."""
    cl, jobs, config, seed = scenario
    check_run(drive(policy_name, cl, jobs, config, seed), cl, jobs, config)


@pytest.mark.parametrize("policy_name", ["fitgpp", "k8s", "random"])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_same_seed_gives_identical_results(policy_name, scenario):
    cl, jobs, config, seed = scenario
    a = drive(policy_name, cl, jobs, config, seed)
    b = drive(policy_name, cl, jobs, config, seed)
    assert a.segments == b.segments
    for field in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_zero_cap_means_no_preemption_under_any_policy(scenario):
    cl, jobs, config, seed = scenario
    from dataclasses import replace

    config = replace(config, max_preemptions=0)
    for name in ("fitgpp", "k8s", "random"):
        result = drive(name, cl, jobs, config, seed)
        assert result.n_preemptions == 0
        assert all(s.end_reason == "completed" for s in result.segments)


# ----------------------------------------------------------------------------------------------------------
# Differential test against a naive reference of the non-preemptive rules
# ----------------------------------------------------------------------------------------------------------


def reference_schedule(cap: np.ndarray, jobs: list[JobSpec], config: SimConfig) -> list[tuple[float, tuple[int, ...]]]:
    """(start time, nodes) of every job, computed the slow obvious way: at each event time, first apply every
    completion and arrival at that time, then scan the whole pending list in queue order and start every
    job that fits (stop at the first that does not, without backfill)."""
    free = cap.copy()
    pending: list[int] = []
    running: list[tuple[float, int]] = []  # (end, job)
    placed: dict[int, tuple[float, tuple[int, ...]]] = {}
    arrivals = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_time, i))
    a = 0
    priority = config.queue.value == "priority"

    def key(i: int):
        spec = jobs[i]
        return (int(spec.job_class), spec.submit_time, i) if priority else (spec.submit_time, i)

    def place(i: int):
        member = np.array(jobs[i].member_demand)
        k = jobs[i].gang_size
        fit = [n for n in range(len(cap)) if (free[n] >= member - 1e-9).all()]
        if len(fit) < k:
            return None
        if config.placement == "first-fit":
            return tuple(fit[:k])
        return tuple(sorted(fit, key=lambda n: (*(free[n] - member).tolist(), n))[:k])

    while a < len(arrivals) or running:
        times = [end for end, _ in running]
        if a < len(arrivals):
            times.append(jobs[arrivals[a]].submit_time)
        t = min(times)
        for _, i in [r for r in running if r[0] == t]:
            for n in placed[i][1]:
                free[n] += np.array(jobs[i].member_demand)
        running = [r for r in running if r[0] != t]
        while a < len(arrivals) and jobs[arrivals[a]].submit_time == t:
            pending.append(arrivals[a])
            a += 1
        for i in sorted(pending, key=key):
            nodes = place(i)
            if nodes is None:
                if not config.backfill:
                    break
                continue
            for n in nodes:
                free[n] -= np.array(jobs[i].member_demand)
            placed[i] = (t, nodes)
            running.append((t + jobs[i].duration, i))
            pending.remove(i)
    return [placed[i] for i in range(len(jobs))]


@st.composite
def integer_scenarios(draw):
    """Integer capacities and demands, so that best-fit ties are exact."""
    n = draw(st.integers(1, 4))
    cl = ClusterSpec(
        tuple(
            NodeSpec(f"n{i}", draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from([8, 16])), 64.0) for i in range(n)
        )
    )
    cap = cl.capacity
    jobs = []
    for i in range(draw(st.integers(3, 25))):
        k = draw(st.integers(1, n))
        g = draw(st.integers(0, 8))
        c = draw(st.integers(0, 16))
        if g + c == 0:
            g = 1
        if not _fits(cap, (g, c, 0.0), k):
            k, g, c = 1, 1, 1
            if not _fits(cap, (g, c, 0.0), k):
                continue
        jobs.append(
            JobSpec(
                f"j{i}",
                float(draw(st.integers(0, 30))),
                float(draw(st.integers(1, 20))),
                gpus=float(g * k),
                cpus=float(c * k),
                gang_size=k,
                job_class=JobClass.TE if draw(st.booleans()) else JobClass.BE,
            )
        )
    if not jobs:
        jobs.append(JobSpec("only", 0.0, 1.0, 1.0, cpus=1.0))
    config = SimConfig(
        queue=draw(st.sampled_from(["fifo", "priority"])),
        backfill=draw(st.booleans()),
        placement=draw(st.sampled_from(["best-fit", "first-fit"])),
    )
    return cl, jobs, config


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=integer_scenarios())
def test_non_preemptive_schedule_matches_naive_reference(scenario):
    cl, jobs, config = scenario
    sim = Simulator(cl, jobs, config, preemption=False)
    assert sim.advance() is None
    result = sim.result()
    got = []
    for i in range(len(jobs)):
        segs = [s for s in result.segments if s.job == i]
        got.append((segs[0].start, tuple(sorted(s.node for s in segs))))
    want = [(t, tuple(sorted(nodes))) for t, nodes in reference_schedule(cl.capacity, jobs, config)]
    assert got == want


# ----------------------------------------------------------------------------------------------------------
# Determinism of whole experiments and trace round trips
# ----------------------------------------------------------------------------------------------------------


def small_synthetic(seed: int) -> tuple[ClusterSpec, Workload]:
    cl = ClusterSpec.homogeneous(3, 8, 64, 512)
    cfg = SyntheticConfig(n_jobs=60, gpus_per_node=8.0)
    return cl, generate(cfg, cl, np.random.default_rng(seed))


def assert_same_result(a: RunResult, b: RunResult) -> None:
    assert a.job_ids == b.job_ids
    for field in (
        "job_class",
        "submit",
        "duration",
        "first_start",
        "completion",
        "preemptions",
        "grace_time",
        "overhead_time",
        "run_time",
    ):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.segments == b.segments


def test_synthetic_generation_is_deterministic():
    _, a = small_synthetic(5)
    _, b = small_synthetic(5)
    _, c = small_synthetic(6)
    assert a.jobs == b.jobs
    assert a.jobs != c.jobs


@pytest.mark.parametrize("policy_name", ALL_POLICIES)
def test_same_seed_same_run_result(policy_name):
    cl, wl = small_synthetic(11)
    cfg = SimConfig(restart_overhead=5.0)
    a = run_policy(make_policy(policy_name), cl, wl, cfg, rng=np.random.default_rng(1))
    b = run_policy(make_policy(policy_name), cl, wl, cfg, rng=np.random.default_rng(1))
    assert_same_result(a, b)


@pytest.mark.parametrize("policy_name", ["fifo", "fitgpp", "random"])
def test_trace_round_trip_gives_identical_results(tmp_path, policy_name):
    cl, wl = small_synthetic(12)
    path = tmp_path / "trace.csv"
    save_trace(path, wl.jobs)
    loaded = load_trace(path)
    assert loaded.jobs == wl.jobs
    assert loaded.lines == tuple(range(2, len(wl) + 2))
    a = run_policy(make_policy(policy_name), cl, wl, rng=np.random.default_rng(2))
    b = run_policy(make_policy(policy_name), cl, loaded, rng=np.random.default_rng(2))
    assert_same_result(a, b)


@PROPERTY_SETTINGS
@given(scenario=scenarios())
def test_save_and_load_trace_round_trip_any_workload(tmp_path_factory, scenario):
    _, jobs, _, _ = scenario
    path = tmp_path_factory.mktemp("rt") / "t.csv"
    save_trace(path, jobs)
    assert load_trace(path).jobs == tuple(jobs)

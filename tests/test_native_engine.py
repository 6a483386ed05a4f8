"""Differential tests: the native engine (``schedgym.sim._engine.Engine``) against the Python engine.

The Python engine is the specification. Both are driven in lockstep with the same decisions: every time the
Python engine asks for a preemption decision, the native engine must ask for the same job at the same time,
with the same cluster state (``now``, ``avail``, ``held``, candidates, queue lengths, accrued slowdown and,
on small workloads, every job's record). The plan is computed once, from the Python engine's request, and
given to both. At the end, per-job results, run segments and counters must be identical.

Floats are compared exactly: the native engine does the Python engine's float operations in the same order.

Decisions come from: (a) always declining; (b) the preemptive baselines (fitgpp and its ablations, k8s,
random); (c) an adversarial chooser that mixes declines, legal plans no baseline would make (more victims than
needed, victims on other nodes, nodes and victims in shuffled order) and illegal plans (whose error messages
must match the Python engine's, after which both decline).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.errors import ConfigError, IllegalDecisionError
from schedgym.registry import make_policy
from schedgym.sim import DECLINE, ClusterSpec, JobClass, JobSpec, NodeSpec, PreemptionPlan, PreemptionRequest
from schedgym.sim.simulator import SimConfig, Simulator

_engine = pytest.importorskip("schedgym.sim._engine", reason="the native engine is not built")

PREEMPTIVE = ["fitgpp", "fitgpp-fitness", "fitgpp-gracefirst", "k8s", "random"]

Chooser = Callable[[PreemptionRequest, Simulator], PreemptionPlan]


@pytest.fixture(scope="module", autouse=True)
def engine() -> str:
    """Overrides conftest's per-engine parametrisation: these tests build both engines explicitly."""
    return "both"


# ----------------------------------------------------------------------------------------------------------
# Building both engines
# ----------------------------------------------------------------------------------------------------------


def python_reference(cluster: ClusterSpec, jobs: Sequence[JobSpec], config: dict, preemption: bool) -> Simulator:
    """The Python engine (the one place that knows how to ask for it)."""
    if "engine" in {f.name for f in fields(SimConfig)}:
        config = {**config, "engine": "python"}
    sim = Simulator(cluster, list(jobs), SimConfig(**config), preemption=preemption)
    assert getattr(sim, "engine", "python") == "python"
    return sim


def native_engine(
    cluster: ClusterSpec, jobs: Sequence[JobSpec], config: dict, preemption: bool, job_ids: bool = True
) -> _engine.Engine:
    """The native engine, built from the same JobSpecs (``config``: SimConfig keyword arguments); jobs' own
    restart overheads are passed only when some job gives one (the others take the config's)."""
    cfg = SimConfig(**config)
    n = len(jobs)
    restart = None
    if any(j.restart_overhead is not None for j in jobs):
        own = [j.restart_overhead for j in jobs]
        restart = np.array([cfg.restart_overhead if r is None else r for r in own], dtype=np.float64)
    return _engine.Engine(
        np.ascontiguousarray(cluster.capacity, dtype=np.float64),
        np.array([j.submit_time for j in jobs], dtype=np.float64),
        np.array([j.duration for j in jobs], dtype=np.float64),
        np.array([j.member_demand for j in jobs], dtype=np.float64).reshape(n, 3),
        np.array([j.gang_size for j in jobs], dtype=np.int64),
        np.array([int(j.job_class) for j in jobs], dtype=np.int64),
        np.array([j.grace_period for j in jobs], dtype=np.float64),
        priority_queue=cfg.queue.value == "priority",
        backfill=cfg.backfill,
        first_fit=cfg.placement == "first-fit",
        max_preemptions=cfg.max_preemptions,
        restart_overhead=float(cfg.restart_overhead),
        preemption=preemption,
        job_ids=[j.job_id for j in jobs] if job_ids else None,
        restart=restart,
    )


# ----------------------------------------------------------------------------------------------------------
# Comparing them
# ----------------------------------------------------------------------------------------------------------

PER_JOB_FLOATS = (
    "remaining",
    "run_start",
    "run_overhead",
    "first_start",
    "completion",
    "grace_time",
    "overhead_time",
    "run_time",
)


def assert_same_state(py: Simulator, nat: _engine.Engine, per_job: bool) -> None:
    """The state both engines expose, compared exactly (NaN equals NaN)."""
    assert nat.now == py.now
    np.testing.assert_array_equal(nat.avail(), py.avail)
    np.testing.assert_array_equal(nat.held(), py.held)
    assert nat.queue_lengths == py.queue_lengths
    assert nat.candidates() == [(n, [j.idx for j in js]) for n, js in py.candidates().items()]
    assert nat.n_preemptions == py.n_preemptions
    assert nat.n_requests == py.n_requests
    assert nat.accrued() == tuple(py.accrued)
    assert nat.accrued_bounded() == tuple(py.accrued_bounded)
    assert nat.done == py.done
    if not per_job:
        return
    jobs = py.jobs
    np.testing.assert_array_equal(nat.state(), [int(j.state) for j in jobs])
    np.testing.assert_array_equal(nat.preemptions(), [j.preemptions for j in jobs])
    for name in PER_JOB_FLOATS:
        np.testing.assert_array_equal(getattr(nat, name)(), [getattr(j, name) for j in jobs], err_msg=name)
    assert [nat.job_nodes(j.idx) for j in jobs] == [tuple(j.nodes) for j in jobs]
    for n in range(len(py.avail)):
        assert frozenset(nat.running_on(n)) == py.running_on(n)
    assert len(nat.segments()[0]) == len(py.segments)


def assert_same_result(py: Simulator, nat: _engine.Engine) -> None:
    assert nat.done and py.done
    result = py.result()
    for name in ("first_start", "completion", "grace_time", "overhead_time", "run_time"):
        got = getattr(nat, name)()
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, getattr(result, name), err_msg=name)
    np.testing.assert_array_equal(nat.preemptions(), result.preemptions)
    job, node, start, end, completed = nat.segments()
    got = list(zip(job.tolist(), node.tolist(), start.tolist(), end.tolist(), completed.tolist(), strict=True))
    want = [(s.job, s.node, s.start, s.end, s.end_reason == "completed") for s in result.segments]
    assert got == want
    assert nat.n_preemptions == result.n_preemptions == py.n_preemptions
    assert nat.n_requests == py.n_requests
    assert nat.accrued() == tuple(py.accrued)
    assert nat.accrued_bounded() == tuple(py.accrued_bounded)
    np.testing.assert_array_equal(nat.avail(), py.avail)
    np.testing.assert_array_equal(nat.held(), py.held)


def lockstep(
    cluster: ClusterSpec,
    jobs: Sequence[JobSpec],
    config: dict,
    chooser: Chooser | None,
    *,
    per_job_every: int = 1,
) -> tuple[Simulator, _engine.Engine, dict[str, int]]:
    """Drive both engines with the same decisions (``chooser`` None: no preemption), comparing them at every
    request (every job's record only at every ``per_job_every``-th request) and at the end."""
    preemption = chooser is not None
    py = python_reference(cluster, jobs, config, preemption)
    nat = native_engine(cluster, jobs, config, preemption)
    counts = {"requests": 0, "applied": 0, "illegal": 0}
    while True:
        request = py.advance()
        idx = nat.advance()
        if request is None:
            assert idx == -1
            break
        assert idx == request.job.idx == nat.pending
        assert_same_state(py, nat, per_job=counts["requests"] % per_job_every == 0)
        counts["requests"] += 1
        assert counts["requests"] < 50_000, "the engines keep asking"
        plan = chooser(request, py)
        nodes, victims = [int(n) for n in plan.nodes], [int(v) for v in plan.victims]
        try:
            py.resolve(plan)
        except IllegalDecisionError as exc:
            with pytest.raises(ValueError) as info:
                nat.resolve(nodes, victims)
            assert str(info.value) == str(exc)
            assert nat.pending == idx  # still pending after an illegal plan
            counts["illegal"] += 1
            py.resolve(DECLINE)
            nat.resolve([], [])
        else:
            nat.resolve(nodes, victims)
            counts["applied"] += bool(nodes)
        assert nat.pending == -1
    assert_same_state(py, nat, per_job=True)
    assert_same_result(py, nat)
    assert nat.advance() == -1  # drained stays drained
    return py, nat, counts


def decline(request: PreemptionRequest, sim: Simulator) -> PreemptionPlan:
    return DECLINE


def baseline(name: str, seed: int = 0) -> Chooser:
    policy = make_policy(name)
    policy.reset(np.random.default_rng(seed))
    return lambda request, sim: policy.decide(request)


def adversarial(seed: int) -> Chooser:
    """Legal plans that no baseline makes, illegal plans, and declines, drawn from ``seed``."""
    rng = random.Random(seed)

    def choose(request: PreemptionRequest, sim: Simulator) -> PreemptionPlan:
        job = request.job
        k = job.gang_size
        n_nodes = len(request.avail)
        cands = request.candidates
        all_cands = sorted({j.idx for js in cands.values() for j in js})
        r = rng.random()
        if r < 0.1:
            return DECLINE
        if r < 0.3:  # most likely illegal: wrong node count, bad indices, non-candidates, duplicates
            n = max(0, k + rng.choice([0, 0, -1, 1]))
            nodes = tuple(rng.randrange(-1, n_nodes + 1) for _ in range(n))
            pool = [*all_cands, job.idx, len(sim.jobs) + 2, -1]
            victims = tuple(rng.choice(pool) for _ in range(rng.randrange(0, 4)))
            return PreemptionPlan(nodes, victims)
        # Legal if the chosen nodes have room once all their candidates are gone: take them all (more than
        # needed), maybe drop one (may become illegal), add candidates from other nodes, shuffle everything.
        rows = request.avail.tolist()
        room = {n: np.array(rows[n]) + sum((c.member for c in cands.get(n, [])), np.zeros(3)) for n in range(n_nodes)}
        ok = [n for n in range(n_nodes) if (room[n] >= job.member - 1e-9).all()]
        if len(ok) < k:
            return DECLINE
        nodes = rng.sample(ok, k)
        victims = sorted({c.idx for n in nodes for c in cands.get(n, [])})
        if victims and rng.random() < 0.2:
            victims.remove(rng.choice(victims))
        others = [v for v in all_cands if v not in victims]
        if others and rng.random() < 0.3:
            victims.append(rng.choice(others))
        rng.shuffle(victims)
        return PreemptionPlan(tuple(nodes), tuple(victims))

    return choose


# ----------------------------------------------------------------------------------------------------------
# Strategies: small heterogeneous clusters and workloads that exercise every rule
# ----------------------------------------------------------------------------------------------------------


@st.composite
def clusters(draw) -> ClusterSpec:
    n = draw(st.integers(1, 5))
    fractional = draw(st.booleans())
    gpu_sizes = [1.0, 1.5, 2.5, 0.7, 0.3] if fractional else [1.0, 2.0, 4.0, 8.0]
    return ClusterSpec(
        tuple(
            NodeSpec(
                f"n{i}",
                draw(st.sampled_from(gpu_sizes)),
                draw(st.sampled_from([0.0, 4.0, 16.0, 6.4])),
                draw(st.sampled_from([0.0, 32.0, 64.0, 0.1])),
            )
            for i in range(n)
        )
    )


def _fits(cap: np.ndarray, member: tuple[float, float, float], k: int) -> bool:
    return int((cap >= np.array(member) - 1e-9).all(axis=1).sum()) >= k


@st.composite
def workloads(draw, cap: np.ndarray) -> list[JobSpec]:
    n_nodes = len(cap)
    n_jobs = draw(st.integers(1, 30))
    # Fractions that leave float noise behind (0.1, 0.3, 0.7 of a fractional GPU) on purpose.
    fractions = st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 1.0])
    grace = st.sampled_from([0.0, 0.0, 1.0, 3.0, 10.0, 25.0, 1000.0])
    # A job's own restart overhead (None: the config's); in a third of the workloads, some jobs give one.
    own_restart = draw(st.sampled_from([False, False, True]))
    restart = st.sampled_from([None, 0.0, 2.0, 7.0, 60.0]) if own_restart else st.just(None)
    jobs = []
    for i in range(n_jobs):
        host = cap[draw(st.integers(0, n_nodes - 1))]
        member = tuple(float(host[r] * draw(fractions)) for r in range(3))
        if sum(member) <= 0:
            member = (float(host[0]) * 0.5, float(host[1]) * 0.5, float(host[2]) * 0.5)
        if sum(member) <= 0:  # a node with nothing: ask for a little of everything it does not have
            member = (0.1, 0.0, 0.0)
        k = draw(st.integers(1, min(3, n_nodes)))
        if not _fits(cap, member, k):
            k = 1
        if not _fits(cap, member, k):
            continue
        jobs.append(
            JobSpec(
                job_id=f"j{i}",
                submit_time=float(draw(st.sampled_from([0, 0, 1, 2, 5, 7.5, 10, 20, 33, 60]))),
                duration=float(draw(st.sampled_from([0.5, 1, 2, 5, 7.5, 10, 20, 33, 50, 100]))),
                gpus=member[0] * k,
                cpus=member[1] * k,
                mem_gb=member[2] * k,
                gang_size=k,
                job_class=JobClass.TE if draw(st.booleans()) else JobClass.BE,
                grace_period=draw(grace),
                restart_overhead=draw(restart),
            )
        )
    if not jobs:
        jobs.append(JobSpec("only", 0.0, 1.0, float(cap[0][0]) or 0.0, cpus=float(cap[0][1]) or 1.0))
    return jobs


@st.composite
def configs(draw) -> dict:
    return {
        "queue": draw(st.sampled_from(["fifo", "priority"])),
        "backfill": draw(st.booleans()),
        "placement": draw(st.sampled_from(["best-fit", "first-fit"])),
        "max_preemptions": draw(st.integers(0, 5)),
        "restart_overhead": draw(st.sampled_from([0.0, 5.0, 60.0])),
    }


@st.composite
def scenarios(draw):
    cl = draw(clusters())
    cap = cl.capacity
    jobs = draw(workloads(cap))
    # Jobs that fit nowhere cannot be built (both engines reject them); the fallback above always fits node 0.
    jobs = [j for j in jobs if _fits(cap, j.member_demand, j.gang_size)]
    return cl, jobs, draw(configs()), draw(st.integers(0, 2**16))


DIFF_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# ----------------------------------------------------------------------------------------------------------
# Differential properties
# ----------------------------------------------------------------------------------------------------------


@settings(DIFF_SETTINGS, max_examples=150)
@given(scenario=scenarios(), preemption=st.booleans())
def test_declining_matches_python(scenario, preemption):
    cl, jobs, config, _ = scenario
    lockstep(cl, jobs, config, decline if preemption else None)


@pytest.mark.parametrize("policy_name", PREEMPTIVE)
@DIFF_SETTINGS
@given(scenario=scenarios())
def test_baseline_decisions_match_python(policy_name, scenario):
    cl, jobs, config, seed = scenario
    lockstep(cl, jobs, config, baseline(policy_name, seed))


@settings(DIFF_SETTINGS, max_examples=400)
@given(scenario=scenarios())
def test_adversarial_decisions_match_python(scenario):
    cl, jobs, config, seed = scenario
    lockstep(cl, jobs, config, adversarial(seed))


@settings(DIFF_SETTINGS, max_examples=40)
@given(scenario=scenarios())
def test_run_declining_matches_lockstep_declining(scenario):
    cl, jobs, config, _ = scenario
    py, stepped, _ = lockstep(cl, jobs, config, decline)
    whole = native_engine(cl, jobs, config, preemption=True)
    whole.run_declining()
    assert whole.n_requests == stepped.n_requests
    assert_same_result(py, whole)


def test_adversarial_chooser_covers_legal_and_illegal_plans():
    """The adversarial chooser is only useful if both kinds of plan reach the engines."""
    cl = ClusterSpec(tuple(NodeSpec(f"n{i}", 4.0, 16.0, 64.0) for i in range(3)))
    rng = np.random.default_rng(3)
    jobs = [
        JobSpec(
            f"j{i}",
            float(rng.integers(0, 100)),
            float(rng.integers(1, 60)),
            float(rng.choice([1.0, 2.0, 4.0])),
            cpus=4.0,
            job_class=JobClass.TE if i % 3 == 0 else JobClass.BE,
            grace_period=float(rng.choice([0.0, 5.0, 500.0])),
        )
        for i in range(120)
    ]
    total = {"requests": 0, "applied": 0, "illegal": 0}
    for seed in range(8):
        _, _, counts = lockstep(cl, jobs, {"max_preemptions": 3, "restart_overhead": 5.0}, adversarial(seed))
        for key, value in counts.items():
            total[key] += value
    assert total["applied"] >= 20 and total["illegal"] >= 10, total


# ----------------------------------------------------------------------------------------------------------
# The paper's synthetic workload
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paper_2000():
    from schedgym.sim import cluster_preset
    from schedgym.workloads import generate, preset

    cl = cluster_preset("paper")
    return cl, list(generate(preset("paper", n_jobs=2000), cl, np.random.default_rng(7)).jobs)


@pytest.mark.parametrize(
    "name, config",
    [
        ("fifo", {"queue": "fifo"}),
        ("priority", {"queue": "priority"}),
        ("fifo", {"queue": "fifo", "backfill": False, "placement": "first-fit"}),
    ],
)
def test_paper_workload_without_preemption(paper_2000, name, config):
    cl, jobs = paper_2000
    py, _, counts = lockstep(cl, jobs, config, None)
    assert counts["requests"] == 0
    whole = native_engine(cl, jobs, config, preemption=False)
    whole.run_declining()
    assert_same_result(py, whole)


def test_jobs_own_restart_overheads_match_python():
    """Per-job restart overheads (None for some jobs: the config's) on a contended workload with preemptions
    and restarts inside the overhead (P = 3): both engines give the same jobs, decision by decision."""
    cl = ClusterSpec(tuple(NodeSpec(f"n{i}", 8.0, 32.0, 128.0) for i in range(3)))
    rng = np.random.default_rng(11)
    jobs = []
    for i in range(150):
        gpus = float(rng.choice([1.0, 2.0, 4.0, 8.0]))
        jobs.append(
            JobSpec(
                f"j{i}",
                float(rng.integers(0, 400)),
                float(rng.integers(5, 120)),
                gpus,
                cpus=2.0 * gpus,
                job_class=JobClass.TE if i % 3 == 0 else JobClass.BE,
                grace_period=float(rng.choice([0.0, 3.0, 20.0])),
                restart_overhead=None if i % 4 == 0 else 3.0 * gpus,
            )
        )
    for chooser in (baseline("fitgpp"), baseline("k8s"), adversarial(4)):
        py, nat, counts = lockstep(cl, jobs, {"max_preemptions": 3, "restart_overhead": 11.0}, chooser)
        assert counts["applied"] > 0
        overhead = np.array(nat.overhead_time())
        assert overhead.sum() > 0
        # Nobody pays more than its own overhead (or the config's) per preemption.
        own = np.array([11.0 if j.restart_overhead is None else j.restart_overhead for j in jobs])
        assert (overhead <= np.array(nat.preemptions()) * own + 1e-9).all()


@pytest.mark.parametrize(
    "name, config",
    [
        ("fitgpp", {}),
        ("k8s", {}),
        ("fitgpp", {"max_preemptions": 3, "restart_overhead": 60.0, "placement": "first-fit"}),
        ("k8s", {"queue": "fifo", "max_preemptions": 2, "restart_overhead": 5.0, "backfill": False}),
    ],
)
def test_paper_workload_with_preemption(paper_2000, name, config):
    cl, jobs = paper_2000
    py, nat, counts = lockstep(cl, jobs, config, baseline(name), per_job_every=50)
    assert counts["applied"] > 0 and nat.n_preemptions > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fitgpp", "k8s", "random"])
def test_paper_workload_20000_jobs(name):
    from schedgym.sim import cluster_preset
    from schedgym.workloads import generate, preset

    cl = cluster_preset("paper")
    jobs = list(generate(preset("paper", n_jobs=20_000, load=1.1), cl, np.random.default_rng(2)).jobs)
    lockstep(cl, jobs, {"max_preemptions": 2, "restart_overhead": 5.0}, baseline(name, 1), per_job_every=500)


@pytest.mark.slow
@pytest.mark.parametrize("policy_name", [*PREEMPTIVE, "adversarial"])
@settings(DIFF_SETTINGS, max_examples=1000)
@given(scenario=scenarios())
def test_decisions_match_python_thorough(policy_name, scenario):
    cl, jobs, config, seed = scenario
    chooser = adversarial(seed) if policy_name == "adversarial" else baseline(policy_name, seed)
    lockstep(cl, jobs, config, chooser)


# ----------------------------------------------------------------------------------------------------------
# Hand-written cases: reservations, hand-over and ties
# ----------------------------------------------------------------------------------------------------------


def te(job_id: str, submit: float, duration: float, gpus: float, **kw) -> JobSpec:
    return JobSpec(job_id, float(submit), float(duration), float(gpus), job_class=JobClass.TE, **kw)


def be(job_id: str, submit: float, duration: float, gpus: float, grace: float = 0.0, **kw) -> JobSpec:
    return JobSpec(job_id, float(submit), float(duration), float(gpus), job_class=JobClass.BE, grace_period=grace, **kw)


def scripted(script: dict[str, tuple[tuple[int, ...], tuple[str, ...]]], jobs: Sequence[JobSpec]) -> Chooser:
    index = {j.job_id: i for i, j in enumerate(jobs)}

    def choose(request: PreemptionRequest, sim: Simulator) -> PreemptionPlan:
        if request.job.job_id not in script:
            return DECLINE
        nodes, victims = script.pop(request.job.job_id)
        return PreemptionPlan(nodes, tuple(index[v] for v in victims))

    return choose


def test_three_reservations_on_one_node_hand_over_in_order():
    """First-fit packs node 0; three TE jobs reserve it (a gang also reserves node 1) with victims of different
    grace periods, and a completion hands over in between: the job a victim was preempted for is served
    first, then the other reservations oldest first."""
    cl = ClusterSpec((NodeSpec("n0", 12.0, 0.0, 0.0), NodeSpec("n1", 8.0, 0.0, 0.0)))
    jobs = [
        be("b3", 0, 100, 8.0, grace=5.0, gang_size=2),  # 4 on each node
        be("b0", 0, 100, 3.0, grace=10.0),
        be("b1", 0, 100, 3.0, grace=20.0),
        be("b2", 0, 15, 1.0),
        be("b4", 0, 100, 4.0),
        te("t0", 1, 10, 4.0),
        te("t1", 1, 10, 3.0),
        te("g", 2, 10, 8.0, gang_size=2),
        te("t2", 3, 10, 5.0),  # declined
    ]
    script = {"t0": ((0,), ("b1",)), "t1": ((0,), ("b0",)), "g": ((1, 0), ("b3",))}
    config = {"max_preemptions": 2, "restart_overhead": 2.5, "placement": "first-fit"}
    py, nat, counts = lockstep(cl, jobs, config, scripted(script, jobs))
    assert counts["applied"] == 3 and counts["illegal"] == 0 and nat.n_preemptions == 3
    first_start = dict(zip([j.job_id for j in jobs], nat.first_start().tolist(), strict=True))
    # g: b3 releases at 5 + 2; t1: b0 at 10 + 1; t0: b2's completion (15) and g's (17) cover it before b1's
    # grace period ends (21).
    assert first_start["g"] == 7.0 and first_start["t1"] == 11.0 and first_start["t0"] == 17.0


def test_grace_zero_releases_at_the_decision_instant_and_fractional_best_fit_ties():
    cl = ClusterSpec(tuple(NodeSpec(f"n{i}", 1.0, 0.0, 0.0) for i in range(3)))
    jobs = [
        be("b0", 0, 50, 0.7),
        be("b1", 0, 50, 0.1),
        be("b2", 0, 50, 0.1),
        be("b3", 0, 50, 0.3),
        te("t0", 1, 5, 0.9),
        te("t1", 1, 5, 0.3),
        te("t2", 2, 5, 0.2, gang_size=1),
    ]
    lockstep(cl, jobs, {"max_preemptions": 1}, baseline("fitgpp"))
    lockstep(cl, jobs, {"max_preemptions": 1, "placement": "first-fit"}, baseline("k8s"))


# ----------------------------------------------------------------------------------------------------------
# The binding: errors, dtypes, conversions, threads
# ----------------------------------------------------------------------------------------------------------

SMALL_CLUSTER = ClusterSpec((NodeSpec("n0", 4.0, 8.0, 32.0), NodeSpec("n1", 2.0, 8.0, 32.0)))
SMALL_JOBS = [
    be("b0", 0, 100, 2.0, grace=5.0, cpus=2.0),
    be("b1", 0, 100, 2.0, grace=5.0, cpus=2.0),
    be("b2", 0, 100, 2.0, grace=5.0, cpus=2.0),
    te("t0", 1, 10, 4.0),
    te("t1", 2, 10, 2.0, cpus=1.0, gang_size=2),
]


def small_args():
    jobs = SMALL_JOBS
    n = len(jobs)
    args = [
        SMALL_CLUSTER.capacity.copy(),
        np.array([j.submit_time for j in jobs]),
        np.array([j.duration for j in jobs]),
        np.array([j.member_demand for j in jobs]).reshape(n, 3),
        np.array([j.gang_size for j in jobs], dtype=np.int64),
        np.array([int(j.job_class) for j in jobs], dtype=np.int64),
        np.array([j.grace_period for j in jobs]),
    ]
    kwargs = dict(
        priority_queue=True, backfill=True, first_fit=False, max_preemptions=1, restart_overhead=0.0, preemption=True
    )
    return args, kwargs


@pytest.mark.parametrize("position", range(1, 7))
def test_mismatched_lengths_raise_value_error(position):
    args, kwargs = small_args()
    args[position] = args[position][:-1]
    with pytest.raises(ValueError):
        _engine.Engine(*args, **kwargs)


def test_bad_shapes_and_values_raise_value_error():
    args, kwargs = small_args()
    for bad in (
        (0, np.zeros((2, 4))),  # capacity not (n, 3)
        (0, np.zeros(6)),
        (3, np.zeros((5, 2))),  # member not (n_jobs, 3)
        (1, np.zeros((5, 1))),  # submit not 1-d
        (5, np.array([0, 1, 2, 0, 3])),  # job class outside {0, 1}
        (4, np.array([1, 1, 1, 1, 3])),  # a gang larger than the cluster
        (4, np.array([1, 1, 1, 0, 1])),  # a gang of 0
        (2, np.array([1.0, 1.0, np.nan, 1.0, 1.0])),  # NaN duration
        (1, np.array([0.0, -1.0, 0.0, 0.0, 0.0])),  # negative submit time
    ):
        a = list(args)
        a[bad[0]] = bad[1]
        with pytest.raises(ValueError):
            _engine.Engine(*a, **kwargs)
    a = list(args)
    a[3] = a[3] * 10  # needs 40 GPUs somewhere
    with pytest.raises(ValueError, match="can never run"):
        _engine.Engine(*a, **kwargs)
    with pytest.raises(ValueError):
        _engine.Engine(*args, **{**kwargs, "max_preemptions": -1})
    with pytest.raises(ValueError):
        _engine.Engine(*args, **{**kwargs, "restart_overhead": float("inf")})
    with pytest.raises(ValueError):
        _engine.Engine(*args, **kwargs, job_ids=["a"])
    for restart in (np.zeros(4), np.zeros((5, 1)), np.array([0.0, 1.0, -1.0, 0.0, 0.0]), np.full(5, np.inf)):
        with pytest.raises(ValueError):
            _engine.Engine(*args, **kwargs, restart=restart)


def test_restart_none_is_the_config_overhead_for_every_job():
    args, kwargs = small_args()
    kwargs = {**kwargs, "restart_overhead": 9.0}
    n = len(args[1])
    given = _engine.Engine(*args, **kwargs, restart=np.full(n, 9.0))
    default = _engine.Engine(*args, **kwargs)
    for eng in (given, default):
        eng.run_declining()
    for name in ("first_start", "completion", "run_time", "overhead_time"):
        np.testing.assert_array_equal(getattr(given, name)(), getattr(default, name)())


def test_non_contiguous_and_other_dtypes_are_converted():
    args, kwargs = small_args()
    want = _engine.Engine(*args, **kwargs)
    want.run_declining()
    odd = list(args)
    odd[0] = np.asfortranarray(args[0])
    odd[3] = np.hstack([args[3], args[3]])[:, ::2]  # strided view
    odd[4] = args[4].astype(np.int32)
    odd[1] = args[1].astype(np.float32)  # exact for these values
    got = _engine.Engine(*odd, **kwargs)
    got.run_declining()
    for name in ("first_start", "completion", "run_time"):
        np.testing.assert_array_equal(getattr(got, name)(), getattr(want, name)())


def test_state_before_any_event_and_dtypes():
    args, kwargs = small_args()
    eng = _engine.Engine(*args, **kwargs)
    assert eng.now == 0.0 and eng.pending == -1 and not eng.done and eng.queue_lengths == (0, 0)
    assert eng.state().dtype == np.int8 and (eng.state() == 0).all()
    assert eng.preemptions().dtype == np.int64
    assert np.isnan(eng.first_start()).all() and np.isnan(eng.run_start()).all()
    np.testing.assert_array_equal(eng.remaining(), args[2])
    np.testing.assert_array_equal(eng.avail(), args[0])
    assert eng.avail().shape == (2, 3) and (eng.held() == 0).all()
    assert eng.candidates() == [] and eng.job_nodes(0) == () and eng.running_on(1) == []
    segs = eng.segments()
    assert [a.dtype for a in segs] == [np.int64, np.int64, np.float64, np.float64, np.bool_]
    a = eng.avail()
    a[0, 0] = -5.0  # a copy: the engine is not affected
    assert eng.avail()[0, 0] == 4.0
    with pytest.raises(IndexError):
        eng.job_nodes(len(SMALL_JOBS))
    with pytest.raises(IndexError):
        eng.running_on(-1)


def test_driving_errors():
    args, kwargs = small_args()
    eng = _engine.Engine(*args, **kwargs)
    with pytest.raises(RuntimeError, match=r"resolve\(\) called with no decision pending"):
        eng.resolve([], [])
    idx = eng.advance()
    assert idx == 3 and eng.pending == 3 and eng.now == 1.0
    with pytest.raises(RuntimeError, match=r"advance\(\) called while a decision is pending; call resolve\(\) first"):
        eng.advance()
    with pytest.raises(ValueError, match=r"^A plan with victims \(0,\) must name the nodes to use$"):
        eng.resolve([], [0])
    with pytest.raises(ValueError, match=r"^A plan with victims \(0, 1\) must name the nodes to use$"):
        eng.resolve([], [0, 1])
    # Without job_ids, messages name the job by index.
    with pytest.raises(ValueError, match=r"^Job #3 needs 1 distinct node\(s\); the plan names nodes \[0, 1\]$"):
        eng.resolve([0, 1], [0])
    assert eng.pending == 3
    assert eng.candidates() == [(0, [1, 2]), (1, [0])]
    eng.resolve([0], [2, 1])
    assert eng.pending == -1 and eng.n_preemptions == 2 and eng.queue_lengths == (1, 0)  # t0 reserved
    eng.run_declining()
    assert eng.done and eng.advance() == -1


ILLEGAL_PLANS = [  # at t0's request: b1, b2 run on node 0 (no GPU free), b0 on node 1 (no GPU free)
    ((0, 1), (0,)),  # t0 is a single-node job
    ((0, 0), ()),
    ((), (0,)),
    ((2,), (0,)),
    ((-1,), (0,)),
    ((0,), (0, 0)),
    ((0,), (3,)),  # the requesting job itself
    ((0,), (99,)),
    ((0,), (-1,)),
    ((0,), ()),  # no room without victims
    ((0,), (0,)),  # a victim on another node
    ((0,), (1,)),  # one victim is not enough
    ((1,), (0, 1)),
    ((0,), (2, 0)),
]


@pytest.mark.parametrize("plan", ILLEGAL_PLANS)
def test_illegal_plans_give_the_python_messages(plan):
    nodes, victims = plan
    py = python_reference(SMALL_CLUSTER, SMALL_JOBS, {}, True)
    nat = native_engine(SMALL_CLUSTER, SMALL_JOBS, {}, True)
    request = py.advance()
    assert nat.advance() == request.job.idx
    with pytest.raises(IllegalDecisionError) as want:
        py.resolve(PreemptionPlan(nodes, victims))
    with pytest.raises(ValueError) as got:
        nat.resolve(list(nodes), list(victims))
    assert str(got.value) == str(want.value)


def test_float_repr_in_messages_matches_python():
    """The room/demand message prints floats as Python's repr does (shortest digits, exponent rules)."""
    for gpus in (0.1, 1e-05, 3.0000000001, 123456.125, 3.3e5):  # amounts are at most 1e6 (MAX_AMOUNT)
        cl = ClusterSpec((NodeSpec("n0", gpus * 2, 0.0, 0.0),))
        jobs = [be("b", 0, 10, gpus * 1.5, grace=1.0), te("t", 1, 1, gpus)]
        py = python_reference(cl, jobs, {}, True)
        nat = native_engine(cl, jobs, {}, True)
        assert nat.advance() == py.advance().job.idx
        with pytest.raises(IllegalDecisionError) as want:
            py.resolve(PreemptionPlan((0,), ()))
        with pytest.raises(ValueError) as got:
            nat.resolve([0], [])
        assert str(got.value) == str(want.value)


def test_engines_run_in_threads_without_the_gil(paper_2000):
    """advance()/run_declining() release the GIL: engines in threads give the same results."""
    cl, jobs = paper_2000
    engines = [native_engine(cl, jobs, {"queue": "fifo"}, preemption=False) for _ in range(3)]
    threads = [threading.Thread(target=e.run_declining) for e in engines]
    for t in threads:
        t.start()
    for e in engines[:1]:  # reading while another thread drives waits for it instead of crashing
        e.avail()
        e.segments()
    for t in threads:
        t.join()
    for e in engines[1:]:
        np.testing.assert_array_equal(e.completion(), engines[0].completion())
        assert e.done


# ------------------------------------------------------------------------------------------ through the facade


@pytest.mark.parametrize("name", ["fifo", "priority", "fitgpp", "fitgpp-fitness", "fitgpp-gracefirst", "k8s", "random"])
def test_built_in_rules_give_identical_runs_on_both_engines(name, monkeypatch):
    """Simulator.run on the native engine runs fitgpp, k8s and random in C++ (never calling the Python rule), the
    others through Python requests; every run equals the Python engine's, job by job."""
    from baselines.base import NodeByNodePolicy
    from schedgym.experiments.runner import run_policy
    from schedgym.registry import make_policy
    from schedgym.sim import cluster_preset
    from schedgym.workloads import generate, preset

    cluster = cluster_preset("paper")
    calls = {"n": 0}
    original = NodeByNodePolicy._decide

    def counting(self, request):  # noqa: ANN001
        calls["n"] += 1
        return original(self, request)

    monkeypatch.setattr(NodeByNodePolicy, "_decide", counting)
    for seed in (0, 1):
        wl = generate(preset("paper", n_jobs=1500, load=1.2), cluster, np.random.default_rng(seed))
        runs = {}
        for engine in ("python", "native"):
            calls["n"] = 0
            config = SimConfig(engine=engine, max_preemptions=2)
            runs[engine] = run_policy(make_policy(name), cluster, wl, config, rng=np.random.default_rng(seed))
            if engine == "native" and make_policy(name).native_rule() is not None:
                assert calls["n"] == 0, "a built-in rule must decide in C++ on the native engine"
        a, b = runs["python"], runs["native"]
        for field in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=f"{name} {field}")
        assert a.segments == b.segments and a.n_preemptions == b.n_preemptions


# ------------------------------------------------------------------------------------------ engine selection


def _tiny():
    from schedgym.sim import cluster_preset
    from schedgym.workloads import generate, preset

    cluster = cluster_preset("small")
    return cluster, generate(preset("paper", n_jobs=20), cluster, np.random.default_rng(0)).jobs


def test_the_native_engine_is_the_default(monkeypatch):
    from schedgym.sim.simulator import ENV_VAR

    monkeypatch.delenv(ENV_VAR, raising=False)
    cluster, jobs = _tiny()
    assert Simulator(cluster, jobs).engine == "native"
    assert Simulator(cluster, jobs, SimConfig(engine="python")).engine == "python"
    monkeypatch.setenv(ENV_VAR, "python")
    assert Simulator(cluster, jobs).engine == "python"
    assert Simulator(cluster, jobs, SimConfig(engine="native")).engine == "native"  # the config wins


def test_without_the_native_module_the_default_warns_once_and_runs_python(monkeypatch):
    import schedgym.sim.simulator as simulator

    monkeypatch.delenv(simulator.ENV_VAR, raising=False)
    monkeypatch.setattr(simulator, "native_available", lambda: False)
    monkeypatch.setattr(simulator, "_warned", False)
    cluster, jobs = _tiny()
    with pytest.warns(RuntimeWarning, match="native engine"):
        assert Simulator(cluster, jobs).engine == "python"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second simulation does not warn again
        assert Simulator(cluster, jobs).engine == "python"
    with pytest.raises(ConfigError, match="native engine was asked for"):
        Simulator(cluster, jobs, SimConfig(engine="native"))
    monkeypatch.setenv(simulator.ENV_VAR, "native")
    with pytest.raises(ConfigError, match="native engine was asked for"):
        Simulator(cluster, jobs)


def test_a_bad_engine_name_is_a_config_error(monkeypatch):
    from schedgym.sim.simulator import ENV_VAR

    with pytest.raises(ConfigError, match="engine"):
        SimConfig(engine="fortran")
    monkeypatch.setenv(ENV_VAR, "fortran")
    cluster, jobs = _tiny()
    with pytest.raises(ConfigError, match="SCHEDGYM_ENGINE"):
        Simulator(cluster, jobs)


def test_a_native_simulation_pickles_by_replay():
    import pickle

    from schedgym.registry import make_policy

    cluster, jobs = _tiny()
    sim = Simulator(cluster, jobs, SimConfig(engine="native"))
    policy = make_policy("k8s")
    request = sim.advance()
    steps = 0
    while request is not None and steps < 3:
        sim.resolve(policy.decide(request))
        request = sim.advance()
        steps += 1
    twin = pickle.loads(pickle.dumps(sim))
    assert twin.now == sim.now and (twin.pending_request is None) == (sim.pending_request is None)
    np.testing.assert_array_equal(twin.avail, sim.avail)
    a, b = sim.run(policy), twin.run(policy)
    np.testing.assert_array_equal(a.completion, b.completion)

"""Simulator.queued (both engines): the oldest waiting jobs of each class, by hand and against a brute-force
reference from the job records, at every request and at stops between them of random small workloads, under
both queue disciplines; on the environment's native simulator while a decision is in progress (victims chosen,
not yet preempted), on its clones and after pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import be, cluster, small_workloads, te
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.decision.backend import DecisionSpec, NativeBackend, PythonBackend, open_backend
from schedgym.errors import ConfigError
from schedgym.registry import make_policy
from schedgym.sim import DECLINE, PreemptionPlan, SimConfig, Simulator
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.job import JobClass, JobState
from schedgym.sim.simulator import native_available
from schedgym.workloads import generate, preset


def ids(jobs):
    return [j.job_id for j in jobs]


def test_the_oldest_waiting_jobs_of_each_class_by_hand():
    # One 8-GPU node. "a" (BE, 8 GPUs, grace 10) starts at 0. "b" (BE, 4) at 1 and "c" (BE, 4) at 2 wait; "t"
    # (TE, 8) asks at 3: it is itself waiting in its queue, so it is listed. Preempting a reserves the node for
    # t (no longer waiting in a queue) and puts a back in the BE queue with its own submit time 0: ahead of b.
    jobs = [be("a", 0, 100, 8, grace=10), be("b", 1, 50, 4), be("c", 2, 50, 4), te("t", 3, 20, 8)]
    sim = Simulator(cluster(8), jobs, SimConfig())
    request = sim.advance()
    assert request is not None and request.job.job_id == "t"
    te_jobs, be_jobs = sim.queued(5)
    assert (ids(te_jobs), ids(be_jobs)) == (["t"], ["b", "c"])
    assert ids(sim.queued(1)[1]) == ["b"]
    assert sim.queued(0) == ([], [])
    sim.resolve(PreemptionPlan(nodes=(0,), victims=(0,)))
    assert sim.advance(until=5.0) is None  # a is in its grace period until 13
    te_jobs, be_jobs = sim.queued(5)
    assert (ids(te_jobs), ids(be_jobs)) == ([], ["b", "c"])  # t is reserved; a still holds the node
    assert sim.advance(until=14.0) is None  # a released at 13, t started on the node
    te_jobs, be_jobs = sim.queued(5)
    assert (ids(te_jobs), ids(be_jobs)) == ([], ["a", "b", "c"])
    assert all(j.state == JobState.PENDING for j in be_jobs)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None])
def test_limit_is_an_integer_at_least_0(bad):
    sim = Simulator(cluster(8), [be("a", 0, 100, 8)], SimConfig())
    with pytest.raises(ConfigError, match="limit"):
        sim.queued(bad)


def test_a_limit_beyond_the_workload_lists_every_waiting_job():
    sim = Simulator(cluster(8), [be("a", 0, 100, 8), be("b", 1, 50, 4), te("t", 2, 20, 8)], SimConfig())
    assert sim.advance() is not None  # t asks at 2; b waits
    for limit in (3, 2**70, np.int64(7)):
        assert tuple(ids(c) for c in sim.queued(limit)) == (["t"], ["b"])


def brute_force(sim: Simulator, limit: int) -> tuple[list[int], list[int]]:
    """From the job records: PENDING, submitted, not reserved (a reserved TE job has its nodes while pending)."""
    now = sim.now
    waiting = [j for j in sim.jobs if j.state == JobState.PENDING and j.submit_time <= now and not j.nodes]
    waiting.sort(key=lambda j: (j.submit_time, j.idx))
    te_jobs = [j.idx for j in waiting if j.job_class == JobClass.TE][:limit]
    be_jobs = [j.idx for j in waiting if j.job_class == JobClass.BE][:limit]
    return te_jobs, be_jobs


def states(cl, jobs, queue: str, limit: int, rule: str, stops: list[float]) -> list[tuple[list[int], list[int]]]:
    """``queued(limit)`` at every request and at every stop in ``stops`` (``advance(until=...)``), each checked
    against :func:`brute_force`."""
    sim = Simulator(cl, jobs, SimConfig(queue=queue))
    policy = make_policy(rule) if rule != "decline" else None
    if policy is not None:
        policy.reset(np.random.default_rng(0))
    out = []
    stops = sorted(stops)
    while True:
        until = stops.pop(0) if stops else float("inf")
        request = sim.advance(until=until)
        te_jobs, be_jobs = sim.queued(limit)
        got = ([j.idx for j in te_jobs], [j.idx for j in be_jobs])
        assert got == brute_force(sim, limit)
        if request is not None:
            assert request.job.idx in got[0] or limit <= len(got[0])  # the requesting TE job is listed
            stops.insert(0, until)
        out.append(got)
        if request is not None:
            sim.resolve(policy.decide(request) if policy is not None else DECLINE)
        elif sim.done:
            return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=small_workloads(),
    queue=st.sampled_from(["priority", "fifo"]),
    limit=st.integers(0, 4),
    rule=st.sampled_from(["fitgpp", "k8s", "decline"]),
    stops=st.lists(st.floats(0.0, 300.0, allow_nan=False), max_size=6),
)
def test_both_engines_agree_with_the_job_records(workload, queue, limit, rule, stops):
    cl, jobs = workload
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCHEDGYM_ENGINE", "python")
        python = states(cl, jobs, queue, limit, rule, stops)
        if not native_available():
            return
        mp.setenv("SCHEDGYM_ENGINE", "native")
        native = states(cl, jobs, queue, limit, rule, stops)
    assert native == python


def queued_ids(sim: Simulator, limit: int) -> tuple[list[int], list[int]]:
    te_jobs, be_jobs = sim.queued(limit)
    return [j.idx for j in te_jobs], [j.idx for j in be_jobs]


@pytest.mark.parametrize("queue", ["priority", "fifo"])
def test_a_decision_in_progress_on_the_native_core(queue):
    # The environment's native simulator (the victim protocol in C++, EnvCore) and the Python protocol on the
    # Python engine, stepped with the same actions: at every step (victims chosen so far included) both list the
    # same jobs, which the job records confirm; a clone and a pickled copy made mid-decision list them too.
    if not native_available():
        pytest.skip("the native engine is not built")
    cl = cluster_preset("small")
    table = generate(preset("paper", n_jobs=300), cl, np.random.default_rng(3)).table
    backends = []
    for engine in ("native", "python"):
        backend = open_backend(
            cl,
            table,
            SimConfig(queue=queue, engine=engine),
            spec=DecisionSpec(),
            estimate_noise=0.0,
            rng=np.random.default_rng(0),
        )
        backends.append(backend)
    native, python = backends
    assert isinstance(native, NativeBackend) and isinstance(python, PythonBackend)
    rng = np.random.default_rng(1)
    mid_decision = 0
    while not native.done:
        assert native.job == python.job
        if native.job >= 0 and native.chosen():
            mid_decision += 1
            assert [j.idx for j in native.chosen()] == [j.idx for j in python.chosen()]
        for limit in (0, 2, 5):
            got = queued_ids(native.sim, limit)
            assert got == queued_ids(python.sim, limit) == brute_force(native.sim, limit)
            if native.job >= 0 and limit:
                assert native.job in got[0] or len(got[0]) == limit  # the job being decided is listed
        if mid_decision and mid_decision % 5 == 1 and native.chosen():
            expected = queued_ids(native.sim, 5)
            assert queued_ids(native.sim.clone(), 5) == expected
            assert queued_ids(pickle.loads(pickle.dumps(native.sim)), 5) == expected
        mask = native.mask()
        assert np.array_equal(mask, python.mask())
        legal = np.flatnonzero(mask)
        action = int(rng.choice(legal[1:])) if len(legal) > 1 and rng.random() < 0.8 else 0
        native.step(action)
        python.step(action)
    assert python.done
    assert mid_decision > 0  # the workload offers decisions with several victims
    assert queued_ids(native.sim, 5) == queued_ids(python.sim, 5) == ([], [])


def test_clones_and_copies_are_unaffected():
    # Calling queued (which refreshes some records on the native engine) changes nothing a clone or a pickled
    # copy sees, and a clone lists what the original lists.
    cl = cluster_preset("small")
    table = generate(preset("paper", n_jobs=200), cl, np.random.default_rng(5)).table
    sim = Simulator(cl, table, SimConfig())
    policy = make_policy("fitgpp")
    for _ in range(8):
        request = sim.advance()
        assert request is not None
        sim.resolve(policy.decide(request))
    request = sim.advance()
    assert request is not None
    before = queued_ids(sim, 6)
    copy = sim.clone()
    assert queued_ids(copy, 6) == before
    restored = pickle.loads(pickle.dumps(sim))
    assert queued_ids(restored, 6) == before
    for s in (sim, copy, restored):
        s.resolve(policy.decide(s.pending_request))
        s.advance(until=request.now + 3600.0)
    assert queued_ids(sim, 6) == queued_ids(copy, 6) == queued_ids(restored, 6) == brute_force(sim, 6)

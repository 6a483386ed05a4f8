"""Simulator.queued (both engines): the oldest waiting jobs of each class, by hand and against a brute-force
reference from the job records, at every request of random small workloads, under both queue disciplines."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import be, cluster, small_workloads, te
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.errors import ConfigError
from schedgym.registry import make_policy
from schedgym.sim import DECLINE, PreemptionPlan, SimConfig, Simulator
from schedgym.sim.job import JobClass, JobState


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


def brute_force(sim: Simulator, limit: int) -> tuple[list[int], list[int]]:
    """From the job records: PENDING, submitted, not reserved (a reserved TE job has its nodes while pending)."""
    now = sim.now
    waiting = [j for j in sim.jobs if j.state == JobState.PENDING and j.submit_time <= now and not j.nodes]
    waiting.sort(key=lambda j: (j.submit_time, j.idx))
    te_jobs = [j.idx for j in waiting if j.job_class == JobClass.TE][:limit]
    be_jobs = [j.idx for j in waiting if j.job_class == JobClass.BE][:limit]
    return te_jobs, be_jobs


def states(cl, jobs, queue: str, limit: int, rule: str) -> list[tuple[list[int], list[int]]]:
    sim = Simulator(cl, jobs, SimConfig(queue=queue))
    policy = make_policy(rule) if rule != "decline" else None
    if policy is not None:
        policy.reset(np.random.default_rng(0))
    out = []
    while (request := sim.advance()) is not None:
        te_jobs, be_jobs = sim.queued(limit)
        got = ([j.idx for j in te_jobs], [j.idx for j in be_jobs])
        assert got == brute_force(sim, limit)
        out.append(got)
        sim.resolve(policy.decide(request) if policy is not None else DECLINE)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=small_workloads(),
    queue=st.sampled_from(["priority", "fifo"]),
    limit=st.integers(0, 4),
    rule=st.sampled_from(["fitgpp", "k8s", "decline"]),
)
def test_both_engines_agree_with_the_job_records(workload, queue, limit, rule):
    cl, jobs = workload
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCHEDGYM_ENGINE", "python")
        python = states(cl, jobs, queue, limit, rule)
        mp.setenv("SCHEDGYM_ENGINE", "native")
        native = states(cl, jobs, queue, limit, rule)
    assert native == python

"""Simulator.clone() on both engines: an exact, independent copy; and advance(until) / run_until / accrued_at,
which let a copy be played out to a horizon.

Every test runs once per engine (conftest's ``engine`` fixture).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import be, cluster, small_workloads, te
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.decision.features import feature_scales
from schedgym.errors import IllegalDecisionError
from schedgym.registry import make_policy
from schedgym.sim import DECLINE, JobState, SimConfig, Simulator
from schedgym.sim.metrics import RunResult

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CONFIGS = st.fixed_dictionaries(
    {
        "queue": st.sampled_from(["fifo", "priority"]),
        "backfill": st.booleans(),
        "placement": st.sampled_from(["best-fit", "first-fit"]),
        "max_preemptions": st.integers(0, 3),
        "restart_overhead": st.sampled_from([0.0, 5.0]),
    }
)


def same_result(a: RunResult, b: RunResult) -> None:
    """Every per-job result, segment and count identical (NaN where NaN)."""
    for name in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert list(a.segments) == list(b.segments)
    assert (a.n_preemptions, a.n_requests) == (b.n_preemptions, b.n_requests)


def snapshot(sim: Simulator) -> tuple:
    """What a simulation looks like from outside, for checking that driving a copy leaves it as it was."""
    req = sim.pending_request
    jobs = [(j.state, j.remaining, j.preemptions, j.nodes, j.first_start, j.completion) for j in sim.jobs]
    return (
        sim.now,
        sim.done,
        sim.n_requests,
        sim.n_preemptions,
        tuple(sim.accrued),
        tuple(sim.accrued_bounded),
        sim.avail.tolist(),
        sim.held.tolist(),
        sim.queue_lengths,
        list(sim.segments),
        None if req is None else (req.job.idx, req.now, {n: [c.idx for c in cs] for n, cs in req.candidates.items()}),
        repr(jobs),  # repr: NaN == NaN
    )


def drive_to_decision(sim: Simulator, policy, k: int) -> bool:  # noqa: ANN001
    """Answer ``k`` requests with ``policy``, then advance to the next one (pending, True) or the end (False)."""
    for _ in range(k):
        request = sim.advance()
        if request is None:
            return False
        sim.resolve(policy.decide(request))
    return sim.advance() is not None


def finish(sim: Simulator, policy) -> RunResult:  # noqa: ANN001
    if sim.pending_request is not None:
        sim.resolve(policy.decide(sim.pending_request))
    return sim.run(policy)


@SETTINGS
@given(workload=small_workloads(), config=CONFIGS, k=st.integers(0, 6), pending=st.booleans())
def test_a_clone_finishes_as_the_original_does(workload, config, k, pending):
    cl, jobs = workload
    fitgpp = make_policy("fitgpp")
    reference = Simulator(cl, jobs, SimConfig(**config)).run(fitgpp)
    sim = Simulator(cl, jobs, SimConfig(**config))
    at_request = drive_to_decision(sim, fitgpp, k)
    if at_request and not pending:  # between a resolve and the next advance
        sim.resolve(fitgpp.decide(sim.pending_request))
    copy = sim.clone()
    assert copy.engine == sim.engine
    assert snapshot(copy) == snapshot(sim)
    # The copy first, to the end: the original must not notice.
    same_result(finish(copy, fitgpp), reference)
    same_result(finish(sim, fitgpp), reference)
    assert tuple(copy.accrued) == tuple(sim.accrued)
    assert tuple(copy.accrued_bounded) == tuple(sim.accrued_bounded)


@SETTINGS
@given(workload=small_workloads(), k=st.integers(0, 4))
def test_driving_a_clone_otherwise_leaves_the_original_as_it_was(workload, k):
    cl, jobs = workload
    fitgpp = make_policy("fitgpp")
    reference = Simulator(cl, jobs).run(fitgpp)
    sim = Simulator(cl, jobs)
    drive_to_decision(sim, fitgpp, k)
    before = snapshot(sim)
    copy = sim.clone()
    second = copy.clone()
    for c, other in ((copy, "k8s"), (second, "random")):  # other policies, other trajectories
        if c.pending_request is not None:
            c.resolve(DECLINE)
        c.run(make_policy(other))
    assert snapshot(sim) == before
    same_result(finish(sim, fitgpp), reference)


@SETTINGS
@given(workload=small_workloads(), k=st.integers(0, 4))
def test_driving_the_original_leaves_a_clone_as_it_was(workload, k):
    cl, jobs = workload
    fitgpp = make_policy("fitgpp")
    sim = Simulator(cl, jobs)
    drive_to_decision(sim, fitgpp, k)
    copy = sim.clone()
    before = snapshot(copy)
    finish(sim, make_policy("k8s"))
    assert snapshot(copy) == before


def test_clones_of_clones_fresh_and_finished_simulations():
    cl = cluster(8, 8)
    jobs = [be("b0", 0, 100, 8, grace=5), be("b1", 0, 100, 8, grace=5), te("t", 10, 20, 8)]
    fitgpp = make_policy("fitgpp")
    reference = Simulator(cl, jobs).run(fitgpp)
    fresh = Simulator(cl, jobs)
    same_result(fresh.clone().clone().run(fitgpp), reference)
    same_result(fresh.run(fitgpp), reference)
    done = fresh.clone()
    assert done.done
    same_result(done.result(), reference)


def test_the_pending_request_is_rebuilt_on_the_clone():
    cl = cluster(8)
    jobs = [be("b", 0, 100, 8, grace=5), te("t", 10, 20, 8)]
    sim = Simulator(cl, jobs)
    request = sim.advance()
    assert request is not None and request.sim is sim
    copy = sim.clone()
    twin = copy.pending_request
    assert twin is not None and twin.sim is copy
    assert (twin.now, twin.queued, twin.avail.tolist(), twin.held.tolist()) == (
        request.now,
        request.queued,
        request.avail.tolist(),
        request.held.tolist(),
    )
    assert twin.job is not request.job and twin.job.job_id == "t"
    assert [c.idx for c in twin.candidates[0]] == [0]
    copy.resolve(make_policy("fitgpp").decide(twin))
    assert sim.pending_request is request  # still pending on the original
    assert copy.jobs[0].state == JobState.PREEMPTING and sim.jobs[0].state == JobState.RUNNING


def test_a_clone_pickles_like_the_original():
    cl = cluster(8, 8)
    jobs = [be("b0", 0, 100, 8, grace=5), be("b1", 0, 100, 8, grace=5), te("t", 10, 20, 8), te("u", 12, 20, 8)]
    fitgpp = make_policy("fitgpp")
    reference = Simulator(cl, jobs).run(fitgpp)
    sim = Simulator(cl, jobs)
    sim.resolve(fitgpp.decide(sim.advance()))
    sim.advance()
    copy = pickle.loads(pickle.dumps(sim.clone()))
    assert snapshot(copy) == snapshot(sim)
    same_result(finish(copy, fitgpp), reference)


def test_python_clone_shares_only_what_never_changes(engine):
    if engine != "python":
        pytest.skip("the Python engine's structural copy")
    cl = cluster(8, 8)
    jobs = [be("b0", 0, 100, 8, grace=5), be("b1", 0, 100, 8, grace=5), te("t", 10, 20, 8)]
    sim = Simulator(cl, jobs)
    sim.advance()
    copy = sim.clone()
    for name, value in vars(sim).items():
        if isinstance(value, (list, dict, set, np.ndarray)) and vars(copy)[name] is value:
            assert name in sim._CLONE_SHARES, f"clone() shares the mutable attribute {name!r}"
    for mine, theirs in zip(sim.jobs, copy.jobs, strict=True):
        assert mine is not theirs or mine.state == JobState.COMPLETED


def test_native_clone_copies_the_decision_in_progress(engine):
    if engine != "native":
        pytest.skip("the native decision core")
    from schedgym.sim.native_engine import StepwiseNativeSimulator

    cl = cluster(8, 8)
    # n0: b0 (4) + b1 (4); n1: b2 (8). t (TE, 8) at 10: two victims on n0 or one on n1.
    jobs = [be("b0", 0, 100, 4, grace=5), be("b1", 0, 100, 4, grace=5), be("b2", 0, 100, 8), te("t", 10, 20, 8)]

    def stepwise() -> StepwiseNativeSimulator:
        sim = StepwiseNativeSimulator(cl, jobs, SimConfig(engine="native"))
        scales = feature_scales()
        sim.begin_decisions(8, np.ones(len(jobs)), [1.0, 1.0, 1.0], [16.0, 1.0, 1.0], scales["head"], scales["row"])
        assert sim.next_decision()
        return sim

    sim = stepwise()
    row = next(i for i, (job, node) in enumerate(sim.core.rows()) if node == 0)
    assert sim.choose(row + 1) == -1  # one victim of two chosen: the decision goes on
    copy = sim.clone()
    assert copy.core is not sim.core
    assert (copy.core.job, copy.core.chosen(), copy.core.targets()) == (
        sim.core.job,
        sim.core.chosen(),
        sim.core.targets(),
    )
    assert copy.core.rows() == sim.core.rows()
    results = []
    for s in (copy, sim):  # the copy first: the original must not notice
        assert s.choose(1) == 2
        while s.next_decision():
            s.choose(0)
        results.append(s.result())
    same_result(*results)
    assert results[0].preemptions.tolist() == [1, 1, 0, 0]


# ----------------------------------------------------------------------------------------------------------
# Horizons: advance(until), run_until, accrued_at
# ----------------------------------------------------------------------------------------------------------


@SETTINGS
@given(workload=small_workloads(), step=st.sampled_from([0.5, 3.0, 7.0, 25.0]))
def test_stopping_at_until_changes_nothing(workload, step):
    cl, jobs = workload
    fitgpp = make_policy("fitgpp")
    reference = Simulator(cl, jobs).run(fitgpp)
    sim = Simulator(cl, jobs)
    t = 0.0
    while not sim.done:
        request = sim.advance(until=t)
        if request is None:
            assert sim.now <= t
            t += step
            continue
        assert request.now <= t
        sim.resolve(fitgpp.decide(request))
    same_result(sim.result(), reference)


@SETTINGS
@given(workload=small_workloads(), until=st.sampled_from([5.0, 30.0, 1e9]), n=st.sampled_from([None, 0, 1, 3]))
def test_run_until_stops_at_the_horizon_or_after_n_decisions(workload, until, n):
    cl, jobs = workload
    for policy in ("fitgpp", "k8s"):
        rule = make_policy(policy)
        reference = Simulator(cl, jobs).run(rule)
        sim = Simulator(cl, jobs)
        made = sim.run_until(rule, until, max_decisions=n)
        assert sim.pending_request is None
        assert sim.now <= until
        assert made <= (n if n is not None else made)
        assert sim.n_requests >= made
        if not sim.done:
            copy = pickle.loads(pickle.dumps(sim))  # the native engine replays a stop at a horizon too
            assert snapshot(copy) == snapshot(sim)
        same_result(sim.run(rule), reference)


def test_accrued_at_extrapolates_at_the_current_rates():
    # One 8-GPU node: b (BE, 100 s) runs 0..100; t (TE, 20 s, 8 GPUs) waits from 10 (declined).
    sim = Simulator(cluster(8), [be("b", 0, 100, 8), te("t", 10, 20, 8)])
    assert sim.advance(until=50.0) is not None  # t's request at 10
    sim.resolve(DECLINE)
    assert sim.advance(until=50.0) is None and not sim.done
    assert sim.now == 10.0
    te_acc, be_acc = sim.accrued_at(50.0)
    assert te_acc == pytest.approx(40 / 20) and be_acc == pytest.approx(50 / 100)
    assert sim.accrued_at(50.0, bounded=True) == pytest.approx([40 / 20, 50 / 100])
    with pytest.raises(IllegalDecisionError, match="Expected t >= now"):
        sim.accrued_at(5.0)
    sim.run(make_policy("fifo"))
    assert sim.accrued == pytest.approx([(120 - 10) / 20, 1.0])
    assert sim.accrued_at(1e9) == sim.accrued  # drained: nothing accrues any more


def test_run_until_with_a_policy_that_never_preempts_declines():
    sim = Simulator(cluster(8), [be("b", 0, 100, 8), te("t", 10, 20, 8)])
    assert sim.run_until(make_policy("fifo")) == 1
    assert sim.done and sim.n_preemptions == 0
    assert sim.result().completion.tolist() == [100.0, 120.0]

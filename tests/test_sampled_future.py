"""``lookahead`` with ``future="sampled"``: shadows rebuilt from the past, the present and estimates.

Every test runs once per engine (conftest's ``engine`` fixture).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import be, cluster, te

from baselines.lookahead import Lookahead
from baselines.sampled_future import MIN_HISTORY, SampledFuture, in_shadow
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim import DECLINE, PreemptionPlan, SimConfig, Simulator
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.job import JobState
from schedgym.sim.simulator import native_available
from schedgym.workloads import generate, preset

SAMPLED = {"horizon": None, "wait": False, "preemption_cost": 10.0, "future": "sampled", "samples": 2}


def small_paper(n_jobs: int = 200, seed: int = 3) -> tuple:
    cl = cluster_preset("small")
    return cl, generate(preset("paper", n_jobs=n_jobs), cl, np.random.default_rng(seed))


def decisions(policy: Lookahead, cl, jobs, until: float = np.inf) -> list:  # noqa: ANN001
    """(time, job, plan) of every request up to ``until``, the policy deciding."""
    policy.reset(np.random.default_rng(11))
    sim = Simulator(cl, jobs, SimConfig(queue=policy.queue))
    out = []
    while (request := sim.advance()) is not None and request.now <= until:
        plan = policy.decide(request)
        out.append((request.now, request.job.idx, plan))
        sim.resolve(plan)
    return out


def test_the_decisions_do_not_change_when_the_future_does():
    cl, wl = small_paper(400)
    jobs = list(wl.table)
    cut = jobs[3 * len(jobs) // 4].submit_time
    # Another future after `cut`: the same number of jobs, each twice as long and submitted later.
    later = {"duration": lambda j: 2 * j.duration, "submit_time": lambda j: j.submit_time + 60}
    other = [j if j.submit_time <= cut else replace(j, **{k: f(j) for k, f in later.items()}) for j in jobs]
    policy = Lookahead(**SAMPLED, arrivals_horizon=6 * 3600.0)
    a = decisions(policy, cl, jobs, until=cut)
    assert policy.n_playouts > 20  # requests with a choice were played out on shadows
    assert len(a) >= 10 and a == decisions(policy, cl, other, until=cut)
    # The test can fail: the lookahead that plays out clones, which hold the future, decides otherwise.
    known = Lookahead(horizon=None, wait=False, preemption_cost=10.0)
    assert decisions(known, cl, jobs, until=cut) != decisions(known, cl, other, until=cut)


def check_shadows(cl, jobs, config: SimConfig, future: SampledFuture | None = None) -> tuple[int, int]:  # noqa: ANN001
    """Drive a run (fitgpp's plans, every third request declined) and check a shadow at every request with
    candidates against the simulation: time, preemptions, resources, queues, and each shared job's state,
    nodes and preemptions. Returns (shadows checked, plans resolved that preempt or serve a gang)."""
    sim = Simulator(cl, jobs, config)
    if future is None:
        future = SampledFuture(np.random.default_rng(0), estimate_noise=0.5, arrivals_horizon=3600.0)
    fitgpp, checked, gangs = make_policy("fitgpp"), 0, 0
    while (request := sim.advance()) is not None:
        if request.candidates:
            shadow, index = future.shadow(request)
            assert shadow.now == sim.now and shadow.n_preemptions == sim.n_preemptions
            assert shadow.avail.tolist() == sim.avail.tolist() and shadow.held.tolist() == sim.held.tolist()
            assert shadow.queue_lengths == sim.queue_lengths
            mine = shadow.jobs
            for job in sim.jobs:
                if job.idx in index:
                    twin = mine[index[job.idx]]
                    assert (twin.state, twin.nodes, twin.preemptions) == (job.state, job.nodes, job.preemptions)
            checked += 1
        plan = DECLINE if sim.n_requests % 3 == 0 else fitgpp.decide(request)
        victims = [sim.jobs[v] for v in plan.victims]
        gangs += not plan.is_empty and (request.gang_size > 1 or any(v.gang_size > 1 for v in victims))
        future.decided(request, plan)
        sim.resolve(plan)
    return checked, gangs


@pytest.mark.parametrize("shuffled", [False, True])
def test_a_shadow_stands_where_the_simulation_stands(shuffled):
    # Noisy estimates and restart overheads, so that drawn durations differ from the true ones and a wrong
    # count of the work done would move a completion before the request.
    cl, wl = small_paper(400)
    jobs = list(wl.table)
    if shuffled:  # job indices out of submit order: the shadows keep the known jobs' relative order
        jobs = [jobs[k] for k in np.random.default_rng(0).permutation(len(jobs))]
    checked, _ = check_shadows(cl, jobs, SimConfig(restart_overhead=300.0))
    assert checked > 5


def test_shadows_replay_gangs():
    # Two 8-GPU nodes. A BE gang over both is preempted for "t", a TE gang waits for both nodes, and 1-GPU BE
    # jobs keep arriving so that the shadows draw arrivals too.
    jobs = [be("g", 0, 10_000, 16, gang_size=2, grace=30), te("t", 10, 100, 8), te("tg", 500, 100, 16, gang_size=2)]
    jobs += [be(f"b{i}", 20.0 + 40 * i, 3000, 1, grace=10) for i in range(40)]
    checked, gangs = check_shadows(cluster(8, 8), sorted(jobs, key=lambda j: j.submit_time), SimConfig())
    assert checked >= 2 and gangs >= 2


def test_a_perturbed_window_is_the_real_future_with_durations_slightly_off():
    cl, wl = small_paper(400)
    jobs = list(wl.table)
    future = SampledFuture(np.random.default_rng(0), 0.3, None, window=True, perturbation=0.05)
    checked, _ = check_shadows(cl, jobs, SimConfig(restart_overhead=300.0), future)  # the past replayed
    assert checked > 5
    future = SampledFuture(np.random.default_rng(0), 0.3, None, window=True, perturbation=0.05)
    sim = Simulator(cl, jobs)
    for _ in range(30):
        request = sim.advance()
        future.decided(request, DECLINE)
        sim.resolve(DECLINE)
    request = sim.advance()
    shadow, index = future.shadow(request)
    assert len(shadow.jobs) == len(jobs) and sorted(index) == [j.idx for j in sim.jobs if j.spec.submit_time <= sim.now]
    true = {j.spec.job_id: j for j in sim.jobs}
    ratios = []
    for twin in shadow.jobs:
        job = true[twin.spec.job_id]
        assert twin.spec.submit_time == job.spec.submit_time  # every real arrival, at its time
        if job.state is JobState.COMPLETED:
            assert twin.spec.duration == job.spec.duration
        else:
            ratios.append(twin.spec.duration / job.spec.duration)
    ratios = np.log(ratios)
    assert len(ratios) > 100 and np.all(ratios != 0) and np.all(np.abs(ratios) < 0.05 * 6)
    assert 0.04 < np.std(ratios) < 0.06
    # Without a perturbation the window holds the true durations.
    plain = SampledFuture(np.random.default_rng(0), 0.3, None, window=True)
    plain._log, plain._sim, plain._factor = list(future._log), sim, future._factor
    assert [j.spec for j in plain.shadow(request)[0].jobs] == [j.spec for j in sim.jobs]


def test_perturbed_shadows_come_from_the_generator_passed_in():
    cl, wl = small_paper(300)

    def durations(seed: int) -> list[float]:
        future = SampledFuture(np.random.default_rng(seed), 0.3, None, window=True, perturbation=0.01)
        sim = Simulator(cl, wl.table)
        for _ in range(20):
            request = sim.advance()
            future.decided(request, DECLINE)
            sim.resolve(DECLINE)
        return [j.spec.duration for j in future.shadow(sim.advance())[0].jobs]

    assert durations(5) == durations(5) != durations(6)


def test_a_perturbed_lookahead_plays_a_run():
    cl, wl = small_paper(300)
    policy = Lookahead(horizon=None, wait=False, future="window", perturbation=0.01, samples=2)
    a = run_policy(policy, cl, wl, rng=np.random.default_rng(4))
    assert policy.n_playouts > 0 and a.n_preemptions > 0
    assert run_policy(policy, cl, wl, rng=np.random.default_rng(4)).completion.tolist() == a.completion.tolist()


def test_a_perturbation_reads_the_real_future_only():
    with pytest.raises(ConfigError, match="future='window' only"):
        Lookahead(future="sampled", perturbation=0.01)
    with pytest.raises(ConfigError, match="window only"):
        SampledFuture(np.random.default_rng(0), 0.3, None, perturbation=0.01)
    with pytest.raises(ConfigError, match="perturbation >= 0"):
        Lookahead(future="window", perturbation=-0.01)
    window = Lookahead(future="window", perturbation=0.01, samples=2)
    assert "perturbation=0.01" in repr(window) and "perturbation" not in repr(Lookahead(future="window"))


def test_a_driver_that_skips_requests_or_resolves_other_plans_is_refused():
    cl, wl = small_paper(400)
    sim = Simulator(cl, wl.table)
    future = SampledFuture(np.random.default_rng(0), estimate_noise=0.3, arrivals_horizon=0.0)
    sim.resolve(make_policy("fitgpp").decide(sim.advance()))  # a request the policy never saw
    with pytest.raises(SchedGymError, match="must answer every request"):
        future.decided(sim.advance(), DECLINE)
    sim = Simulator(cl, wl.table)
    future = SampledFuture(np.random.default_rng(0), estimate_noise=0.3, arrivals_horizon=0.0)
    served = 0
    while (request := sim.advance()) is not None and served < 3:
        plan = make_policy("fitgpp").decide(request)
        future.decided(request, DECLINE)  # recorded as declined, resolved as served
        sim.resolve(plan)
        served += not plan.is_empty
    with pytest.raises(SchedGymError, match="did not replay the run"):
        future.shadow(request)


def test_shadows_draw_arrivals_from_the_past_only():
    # One 8-GPU node; 1-GPU BE jobs every 10 s (8 run, the rest queue), a TE job of 8 GPUs at 300 s asks.
    jobs = [be(f"b{i}", 10.0 * i, 5000.0, 1) for i in range(MIN_HISTORY + 10)]
    jobs += [te("t", 300.0, 100.0, 8), be("late", 10_000.0, 7.0, 8)]
    sim = Simulator(cluster(8), sorted(jobs, key=lambda j: j.submit_time))
    request = sim.advance()
    assert request is not None and request.job.job_id == "t"
    future = SampledFuture(np.random.default_rng(1), estimate_noise=0.0, arrivals_horizon=3600.0)
    shadow, index = future.shadow(request)
    known = {j.job_id for j in jobs if j.submit_time <= 300.0}
    drawn = [j.spec for j in shadow.jobs if j.idx >= len(index)]
    assert len(index) == len(known) and drawn
    assert all(300.0 < s.submit_time <= 3900.0 for s in drawn)
    assert {s.job_id.split("~")[0] for s in drawn} <= known  # copies of submitted jobs; never "late"
    assert len({s.job_id for s in drawn}) == len(drawn)
    # The rate counts from the first submission, not from 0: the same jobs 1,000 s later, the same arrivals.
    late = [replace(j, submit_time=j.submit_time + 1000.0) for j in sorted(jobs, key=lambda j: j.submit_time)]
    sim = Simulator(cluster(8), late)
    again = SampledFuture(np.random.default_rng(1), estimate_noise=0.0, arrivals_horizon=3600.0)
    shifted, index = again.shadow(sim.advance())
    assert [j.spec.submit_time - 1000.0 for j in shifted.jobs[len(index) :]] == pytest.approx(
        [s.submit_time for s in drawn]
    )
    # Without a horizon, as many are drawn as the workload has jobs still to come (the request says how many).
    whole = SampledFuture(np.random.default_rng(1), estimate_noise=0.0, arrivals_horizon=None)
    shadow, index = whole.shadow(request)
    assert len(shadow.jobs) == request.n_jobs and min(j.spec.submit_time for j in shadow.jobs[len(index) :]) > 300
    # With too little history, nothing is drawn.
    few = SampledFuture(np.random.default_rng(1), estimate_noise=0.0, arrivals_horizon=3600.0)
    sim = Simulator(cluster(8), [be(f"b{i}", float(i), 5000.0, 1) for i in range(8)] + [te("t", 8.0, 100.0, 8)])
    shadow, index = few.shadow(sim.advance())
    assert len(shadow.jobs) == len(index) == 9


def test_the_sampled_lookahead_is_deterministic_and_engines_agree():
    cl, wl = small_paper(120, seed=4)
    runs = [run_policy(Lookahead(**SAMPLED), cl, wl, rng=np.random.default_rng(2)) for _ in range(2)]
    assert runs[0].completion.tolist() == runs[1].completion.tolist()
    assert runs[0].n_requests > 0
    if not native_available():
        pytest.skip("the native engine is not built")
    both = [
        run_policy(Lookahead(**SAMPLED), cl, wl, SimConfig(engine=e), rng=np.random.default_rng(2))
        for e in ("native", "python")
    ]
    assert both[0].completion.tolist() == both[1].completion.tolist() == runs[0].completion.tolist()


def test_in_shadow_renumbers_victims_only():
    plan = PreemptionPlan(nodes=(3,), victims=(7, 9))
    assert in_shadow(plan, {7: 1, 9: 2}) == PreemptionPlan(nodes=(3,), victims=(1, 2))


def test_bad_settings_and_a_policy_reused_without_reset():
    for kwargs, match in (
        ({"future": "oracle"}, "future"),
        ({"samples": 0}, "samples"),
        ({"samples": True}, "samples"),
        ({"arrivals_horizon": -1.0}, "arrivals_horizon"),
        ({"estimate_noise": float("nan")}, "estimate_noise"),
    ):
        with pytest.raises(ConfigError, match=match):
            Lookahead(**kwargs)
    cl, wl = small_paper(120, seed=4)
    policy = Lookahead(**SAMPLED)
    policy.reset(np.random.default_rng(0))
    asked = 0
    for _ in range(2):  # two simulations, one reset
        sim = Simulator(cl, wl.table, SimConfig(queue=policy.queue))
        request = sim.advance()
        while request is not None and len(policy.options(request)) == 1:
            sim.resolve(policy.decide(request))
            request = sim.advance()
        assert request is not None
        if asked:
            with pytest.raises(SchedGymError, match="one simulation per reset"):
                policy.decide(request)
        else:
            policy.decide(request)
        asked += 1
    assert "future='sampled'" in repr(policy) and "future" not in repr(Lookahead())


def test_a_window_as_long_as_the_workload_is_the_lookahead_on_clones():
    # Shadows holding true durations and every real arrival are the clones: the same scores, the same run.
    cl, wl = small_paper(300)
    known = run_policy(Lookahead(horizon=None, wait=False), cl, wl, rng=np.random.default_rng(4))
    window = Lookahead(horizon=None, wait=False, future="window", arrivals_horizon=None, samples=3)
    shadows = run_policy(window, cl, wl, rng=np.random.default_rng(4))
    assert known.n_preemptions > 0 and window.n_playouts > 0
    assert shadows.completion.tolist() == known.completion.tolist()
    assert shadows.n_preemptions == known.n_preemptions
    # A short window sees less, and decides otherwise somewhere.
    glimpse = Lookahead(horizon=None, wait=False, future="window", arrivals_horizon=600.0)
    short = run_policy(glimpse, cl, wl, rng=np.random.default_rng(4))
    assert short.completion.tolist() != known.completion.tolist()

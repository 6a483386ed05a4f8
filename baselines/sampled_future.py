"""What a lookahead may know without seeing the future: the past, the present, and duration estimates.

``lookahead`` (:mod:`baselines.lookahead`) plays options out on clones of the simulation that asks, and a clone
holds the whole workload: every job still to arrive, and every job's true duration. With ``future="sampled"``
it plays them out instead on *shadows*: simulations rebuilt from what a real scheduler knows at the request,

- the jobs submitted so far, completed ones with their true durations; an unfinished job's duration is drawn
  from its estimate (``estimate x exp(N(0, estimate_noise))``, the estimate being the true duration times
  ``exp(N(0, estimate_noise))``, drawn once per job and run, as the learned agents' estimates are) and at
  least the work it has done;
- arrivals drawn from the past: a Poisson process at the rate observed so far (jobs submitted / time
  elapsed) over ``arrivals`` seconds after the request, each job a copy of a job submitted so far, picked
  uniformly, with a duration drawn from that job's estimate in the same way;
- the decisions made so far in this run, replayed: a shadow is built from the start and driven through the
  policy's own log of (request, plan), so it is in the same state as the real simulation at the request for
  every job it shares with it (a job's draws affect only what happens after the request).

Nothing is read of a job that has not been submitted: the decisions do not change when the workload's
future does (``tests/test_sampled_future.py``). Rebuilding costs a replay of the run so far per shadow, so the
cost per request grows with the run; ``docs/lookahead.md`` gives the figures.

A diagnostic in between (``future="window"``): shadows with every job's true duration and the real arrivals
of the next ``arrivals`` seconds, then none: how far ahead the future a clone holds is worth knowing.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from schedgym.errors import SchedGymError
from schedgym.sim.job import Job, JobSpec, JobState
from schedgym.sim.policy import PreemptionPlan, PreemptionRequest
from schedgym.sim.simulator import Simulator

MIN_HISTORY = 20
"""jobs that must have been submitted before arrivals are drawn from them (fewer: no arrivals are drawn)"""
MIN_DURATION = 1.0
"""the least duration drawn (s)"""
_TRIES = 20


class SampledFuture:
    """The knowledge of one run: estimate factors per job, the log of decisions, and a generator of shadows.

    Args:
        rng: draws the estimates (once per job) and every shadow's durations and arrivals.
        estimate_noise: sigma of the log-normal estimate error (as the environment's ``estimate_noise``).
        arrivals: seconds after a request over which arrivals are drawn (0: none).
        window: draw nothing: true durations, and the real arrivals of the next ``arrivals`` seconds (a
            diagnostic that reads the future; module docstring).
    """

    def __init__(self, rng: np.random.Generator, estimate_noise: float, arrivals: float, window: bool = False) -> None:
        self.estimate_noise = float(estimate_noise)
        self.arrivals = float(arrivals)
        self.window = bool(window)
        estimate_rng, self._rng = rng.spawn(2)
        self._estimate_rng = estimate_rng
        self._factor: np.ndarray | None = None  # per job: estimate / duration, drawn at the first request
        self._sim: Simulator | None = None
        self._log: list[tuple[int, PreemptionPlan]] = []

    def decided(self, request: PreemptionRequest, plan: PreemptionPlan) -> None:
        """Record the answer to ``request`` (every request of the run, in order: the shadows replay them)."""
        self._log.append((request.job.idx, plan))

    def shadow(self, request: PreemptionRequest) -> tuple[Simulator, dict[int, int]]:
        """A new simulation, standing at ``request``, whose unfinished jobs' durations and future arrivals are
        drawn (module docstring), and the shadow's index of each real job it shares (:func:`in_shadow`)."""
        sim = request.sim
        if sim is None:
            raise SchedGymError("lookahead needs the simulation that asks (request.sim)")
        if self._sim is None:
            self._sim = sim
            self._factor = np.exp(self.estimate_noise * self._estimate_rng.standard_normal(request.n_jobs))
        elif sim is not self._sim:
            raise SchedGymError("a lookahead with future='sampled' decides for one simulation per reset()")
        jobs = sim.jobs
        now = request.now
        known = [j for j in jobs if j.spec.submit_time <= now]
        index = {j.idx: i for i, j in enumerate(known)}  # the real job index -> the shadow's
        if self.window:
            end = now + self.arrivals
            specs = [j.spec for j in known] + [j.spec for j in jobs if now < j.spec.submit_time <= end]
        else:
            specs = [self._present(j, now) for j in known] + self._arrivals(known, now)
        shadow = Simulator(sim.cluster, specs, sim.config, preemption=True)
        for job, plan in self._log:
            self._expect(shadow.advance(), index[job])
            shadow.resolve(in_shadow(plan, index))
        self._expect(shadow.advance(), index[request.job.idx])
        return shadow, index

    @staticmethod
    def _expect(request: PreemptionRequest | None, job: int) -> None:
        # The shadow shares the run's past, so it asks the same requests in the same order; anything else
        # means the log is not this run's (a policy reused without reset()).
        if request is None or request.job.idx != job:
            raise SchedGymError("a shadow simulation did not replay the run: was the lookahead reset() before it?")

    def _draw_duration(self, job: int, spec: JobSpec, done: float) -> float:
        """A duration for a job known only by its estimate, at least ``done`` (plus a second)."""
        assert self._factor is not None
        estimate = spec.duration * float(self._factor[job])
        floor = max(MIN_DURATION, done + 1.0)
        for _ in range(_TRIES):
            d = estimate * math.exp(self.estimate_noise * float(self._rng.standard_normal()))
            if d >= floor:
                return d
        return floor * 1.1  # the job has outrun its estimate: it is expected to end soon

    def _present(self, job: Job, now: float) -> JobSpec:
        """A submitted job as a shadow has it: a completed one as it was, an unfinished one with a duration drawn
        from its estimate, at least the work it has done."""
        spec = job.spec
        if job.state is JobState.COMPLETED:
            return spec
        done = spec.duration - job.remaining
        if job.state is JobState.RUNNING:  # remaining is brought up to date only when a job stops
            done += max(0.0, now - job.run_start - job.run_overhead)
        return replace(spec, duration=self._draw_duration(job.idx, spec, done))

    def _arrivals(self, known: list[Job], now: float) -> list[JobSpec]:
        """Arrivals over the next ``arrivals`` seconds: a Poisson process at the rate seen so far, each a copy of a
        submitted job (under a new id) with a duration drawn from that job's estimate."""
        if self.arrivals <= 0 or len(known) < MIN_HISTORY or now <= 0:
            return []
        rate = len(known) / now
        n = int(self._rng.poisson(rate * self.arrivals))
        times = np.sort(now + self.arrivals * (1.0 - self._rng.random(n)))  # in (now, now + arrivals]
        picks = self._rng.integers(len(known), size=n)
        taken = {j.spec.job_id for j in known}
        out = []
        for k, (t, p) in enumerate(zip(times.tolist(), picks.tolist(), strict=True)):
            source = known[p]
            job_id = f"{source.spec.job_id}~sampled{k}"
            while job_id in taken:
                job_id += "~"
            taken.add(job_id)
            d = self._draw_duration(source.idx, source.spec, 0.0)
            out.append(replace(source.spec, job_id=job_id, submit_time=float(t), duration=d))
        return out


def in_shadow(plan: PreemptionPlan, index: dict[int, int]) -> PreemptionPlan:
    """``plan`` with its victims' real job indices replaced by a shadow's (``index``, from
    :meth:`SampledFuture.shadow`); nodes are the same."""
    return PreemptionPlan(nodes=plan.nodes, victims=tuple(index[v] for v in plan.victims))

"""What a lookahead may know without seeing the future: the past, the present, and duration estimates.

``lookahead`` (:mod:`baselines.lookahead`) plays options out on clones of the simulation that asks, and a clone
holds the whole workload: every job still to arrive, and every job's true duration. With ``future="sampled"``
it plays them out instead on *shadows*: simulations rebuilt from what a real scheduler knows at the request,

- the jobs submitted so far, completed ones with their true durations; an unfinished job's duration is drawn
  from its estimate (``estimate x exp(N(0, estimate_noise))``, the estimate being the true duration times
  ``exp(N(0, estimate_noise))``, drawn once per job and run, as the learned agents' estimates are) and at
  least the work it has done;
- arrivals drawn from the past: a Poisson process at the rate observed so far (jobs submitted / time since the
  first), each job a copy of a job submitted so far, picked uniformly, with a duration drawn from that job's
  estimate in the same way; over ``arrivals_horizon`` seconds after the request, or (``None``) until the
  workload holds as many jobs as the request says it has (``request.n_jobs``), as a clone does;
- the decisions made so far in this run, replayed: a shadow is built from the start and driven through the
  policy's own log of (time, request, plan), so it is in the same state as the real simulation at the request
  for every job it shares with it (a job's draws affect only what happens after the request). So the policy
  must answer every request of one simulation, and its answers must be the ones resolved; a shadow that does
  not reach the simulation's state (time, preemptions, free resources) raises
  :class:`~schedgym.errors.SchedGymError`.

Nothing is read of a job that has not been submitted: the decisions do not change when the workload's
future does (``tests/test_sampled_future.py``). Rebuilding costs a replay of the run so far per shadow, so the
cost per request grows with the run; ``docs/lookahead.md`` gives the figures.

A diagnostic in between (``future="window"``): shadows with every job's true duration and the real arrivals
of the next ``arrivals_horizon`` seconds, then none: how far ahead the future a clone holds is worth knowing.
With ``None`` it holds every arrival, and is the clone (tested). With a ``perturbation`` sigma, each shadow
multiplies every unfinished or future job's true duration by its own draw of ``exp(N(0, sigma))`` (at least
the work done): the real future known almost exactly, to see whether a gain survives a small error in it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from schedgym.errors import ConfigError, SchedGymError
from schedgym.sim.job import Job, JobSpec, JobState
from schedgym.sim.policy import PreemptionPlan, PreemptionRequest
from schedgym.sim.simulator import Simulator

MIN_HISTORY = 20
"""jobs that must have been submitted before arrivals are drawn from them (fewer: no arrivals are drawn)"""
MIN_DRAWN_DURATION = 1.0
"""the least duration drawn (s)"""
_TRIES = 20


class SampledFuture:
    """The knowledge of one run: estimate factors per job, the log of decisions, and a generator of shadows.

    Args:
        rng: draws the estimates (once per job) and every shadow's durations and arrivals.
        estimate_noise: sigma of the log-normal estimate error (as the environment's ``estimate_noise``).
        arrivals_horizon: seconds after a request over which arrivals are drawn (0: none; None: until the
            workload holds ``request.n_jobs`` jobs).
        window: true durations, and the real arrivals of the next ``arrivals_horizon`` seconds (a diagnostic
            that reads the future; module docstring).
        perturbation: with ``window``, sigma of a log-normal factor drawn per shadow on each unfinished or future
            job's true duration (0: none, the shadow is drawn from nothing).
    """

    def __init__(
        self,
        rng: np.random.Generator,
        estimate_noise: float,
        arrivals_horizon: float | None,
        window: bool = False,
        perturbation: float = 0.0,
    ) -> None:
        self.estimate_noise = float(estimate_noise)
        self.arrivals_horizon = None if arrivals_horizon is None else float(arrivals_horizon)
        self.window = bool(window)
        self.perturbation = float(perturbation)
        if self.perturbation and not self.window:
            raise ConfigError("a perturbation applies to the real future of a window only (window=True)")
        self._estimate_rng, self._rng = rng.spawn(2)
        self._factor: np.ndarray | None = None  # per job: estimate / duration, drawn at the first shadow
        self._sim: Simulator | None = None
        self._log: list[tuple[float, int, PreemptionPlan]] = []

    def decided(self, request: PreemptionRequest, plan: PreemptionPlan) -> None:
        """Record the answer to ``request``: the policy must record every request of its simulation, in order,
        and the plans it records must be the ones resolved (the shadows replay them)."""
        sim = request.sim
        if sim is not None and sim.n_requests != len(self._log) + 1:
            raise SchedGymError(
                f"a lookahead with future={'window' if self.window else 'sampled'!r} must answer every request of "
                f"its simulation: this is request {sim.n_requests}, it answered {len(self._log)}"
            )
        self._log.append((request.now, request.job.idx, plan))

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
            end = math.inf if self.arrivals_horizon is None else now + self.arrivals_horizon
            specs = [self._perturbed(j, now) for j in known]
            specs += [self._perturbed(j, now) for j in jobs if now < j.spec.submit_time <= end]
        else:
            specs = [self._present(j, now) for j in known] + self._arrivals(known, now, request.n_jobs)
        shadow = Simulator(sim.cluster, specs, sim.config, preemption=True)
        for t, job, plan in self._log:
            self._expect(shadow.advance(), t, index[job])
            shadow.resolve(in_shadow(plan, index))
        self._expect(shadow.advance(), now, index[request.job.idx])
        # The past is the same, so is what it left: a shadow that differs replayed something else.
        if shadow.n_preemptions != sim.n_preemptions or not np.array_equal(shadow.avail, sim.avail):
            raise _diverged()
        return shadow, index

    @staticmethod
    def _expect(request: PreemptionRequest | None, now: float, job: int) -> None:
        # The shadow shares the run's past, so it asks the same requests at the same times in the same order.
        if request is None or request.now != now or request.job.idx != job:
            raise _diverged()

    def _draw_duration(self, job: int, spec: JobSpec, done: float) -> float:
        """A duration for a job known only by its estimate, at least ``done`` (plus a second)."""
        assert self._factor is not None
        estimate = spec.duration * float(self._factor[job])
        floor = _floor(done)
        for _ in range(_TRIES):
            d = estimate * math.exp(self.estimate_noise * float(self._rng.standard_normal()))
            if d >= floor:
                return d
        return floor * 1.1  # the job has outrun its estimate: it is expected to end soon

    @staticmethod
    def _done(job: Job, now: float) -> float:
        """The work ``job`` has done by ``now`` (s)."""
        done = job.spec.duration - job.remaining
        if job.state is JobState.RUNNING:  # remaining is brought up to date only when a job stops
            done += max(0.0, now - job.run_start - job.run_overhead)
        return done

    def _perturbed(self, job: Job, now: float) -> JobSpec:
        """A job as a window shadow has it: its true spec, an unfinished job's duration (with a perturbation)
        multiplied by ``exp(N(0, perturbation))``, at least the work done plus a second."""
        spec = job.spec
        if self.perturbation == 0.0 or job.state is JobState.COMPLETED:
            return spec
        factor = math.exp(self.perturbation * float(self._rng.standard_normal()))
        return replace(spec, duration=max(_floor(self._done(job, now)), spec.duration * factor))

    def _present(self, job: Job, now: float) -> JobSpec:
        """A submitted job as a shadow has it: a completed one as it was, an unfinished one with a duration drawn
        from its estimate, at least the work it has done."""
        spec = job.spec
        if job.state is JobState.COMPLETED:
            return spec
        return replace(spec, duration=self._draw_duration(job.idx, spec, self._done(job, now)))

    def _arrivals(self, known: list[Job], now: float, n_jobs: int) -> list[JobSpec]:
        """Arrivals over the next ``arrivals_horizon`` seconds (None: the workload's remaining ``n_jobs`` -
        submitted), a Poisson process at the rate seen so far, each a copy of a submitted job (under a new id)
        with a duration drawn from that job's estimate."""
        elapsed = now - min(j.spec.submit_time for j in known)
        if self.arrivals_horizon == 0 or len(known) < MIN_HISTORY or elapsed <= 0:
            return []
        rate = len(known) / elapsed
        if self.arrivals_horizon is None:
            times = now + np.cumsum(self._rng.exponential(1.0 / rate, size=max(0, n_jobs - len(known))))
        else:
            n = int(self._rng.poisson(rate * self.arrivals_horizon))
            times = np.sort(now + self.arrivals_horizon * (1.0 - self._rng.random(n)))  # in (now, now + horizon]
        picks = self._rng.integers(len(known), size=len(times))
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


def _floor(done: float) -> float:
    """The least duration a shadow gives a job that has done ``done`` seconds of work (0 for one not yet
    submitted): it must not end before the request it stands at."""
    return max(MIN_DRAWN_DURATION, done + 1.0)


def _diverged() -> SchedGymError:
    return SchedGymError(
        "a shadow simulation did not replay the run: a lookahead with future='sampled' or 'window' must answer "
        "every request of one simulation (reset() before each), and its answers must be the ones resolved"
    )


def in_shadow(plan: PreemptionPlan, index: dict[int, int]) -> PreemptionPlan:
    """``plan`` with its victims' real job indices replaced by a shadow's (``index``, from
    :meth:`SampledFuture.shadow`); nodes are the same."""
    return PreemptionPlan(nodes=plan.nodes, victims=tuple(index[v] for v in plan.victims))

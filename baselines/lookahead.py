"""``lookahead``: try each option of a preemption request on a copy of the simulation, keep the best.

At every :class:`~schedgym.sim.policy.PreemptionRequest` the policy clones the simulation that asks
(``request.sim``, :meth:`Simulator.clone <schedgym.sim.simulator.Simulator.clone>`) once per *option*, applies
the option to the copy, lets a *base rule* answer the requests that follow, and scores the copy at the end of
the *horizon*. It answers with the option of the least score. Nothing is estimated: every playout is the
simulator itself, so the policy is a reference for what a decision is worth under its base rule, at the cost
of simulating ahead.

Options (in this order; identical plans, as sets of nodes and victims, are tried once, the first kept):

1. wait: the empty plan (decline); with ``wait=False`` only when no other option exists (the policy then
   serves every request it can, as the rules do);
2. the plans of the ``plans`` rules (default ``fitgpp`` and ``k8s``), each asked on the request itself;
3. with ``per_node`` (default), for a job of one node: on every node where preemption can make room, the
   fewest victims that do (ties: the shorter longest grace period, then the lower job indices; nodes with more
   than :data:`MAX_SUBSET_CANDIDATES` candidates are left to the rules). A gang is offered the rules' plans only.

Score of an option: ``te_weight * TE + be_weight * BE + preemption_cost * preemptions``, where TE and BE are
the slowdown accrued in the copy from now to the end of the horizon (``Simulator.accrued``, or
``accrued_bounded`` with ``bounded``: the quantities the environment's reward is made of) and preemptions the
preemptions made in the copy meanwhile. Ties go to the earlier option, so waiting wins a tie.

Horizon: ``horizon`` simulated seconds after the request (``None``: to the end of the workload), and at most
``max_decisions`` later requests answered by the base rule (``None``: all of them); requests after those wait
(declined), up to the same horizon. Every option is scored at the same instant, ``now + horizon``
(:meth:`Simulator.accrued_at`), so a copy that drained or stopped earlier is not favoured.

Cost per decision: one clone and one playout per distinct option (at most 1 + len(plans) + nodes with
candidates: 12 to 18 on the paper cluster), each playout as long as the horizon; a request that no rule and no
node can serve (wait is the only option) costs nothing. On the native engine with a built-in base rule a
playout runs in C++ (``Engine.run_rule``) and a clone copies the C++ state (15 us for 2,000 jobs): about 3 ms
per request with the default horizon on 2,000-job paper workloads, 20-30 ms to the end of the workload; some
20 times more on the Python engine. ``benchmarks/bench_lookahead.py`` measures it; ``docs/lookahead.md`` gives
the figures.

What a playout knows: with ``future="known"`` (the default) a clone holds the whole workload, so the policy
sees the future (the arrivals to come and every job's true duration): a reference, not a scheduler. With
``future="sampled"`` it plays each option on ``samples`` shadows rebuilt from the past, the present and
duration estimates only (:mod:`baselines.sampled_future`), with ``arrivals_horizon`` seconds of arrivals drawn
from the past (None: as many jobs as the workload has), and takes the least mean score: what a scheduler
could do by simulating ahead without a forecast. ``future="window"`` (a diagnostic) plays on shadows holding
true durations and only the next ``arrivals_horizon`` seconds of the real arrivals: how far ahead knowing the
future pays. Both must answer every request of the simulation, and their answers must be the ones resolved.

Determinism: given the seed of :meth:`reset`, the same workload gives the same decisions. A randomised base
rule draws, in every playout of one request, from the same generator state (common random numbers), drawn
once per request from the policy's own generator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from baselines.sampled_future import SampledFuture, in_shadow
from schedgym.decision.plans import MAX_SUBSET_CANDIDATES, fewest_victims, plan_options
from schedgym.errors import ConfigError, SchedGymError
from schedgym.sim.policy import Policy, PreemptionPlan, PreemptionRequest, QueueDiscipline

_WAIT = Policy()  # never preempts: answers DECLINE (natively, the engine's 'decline' rule)
FUTURES = ("known", "sampled", "window")
"""what a playout knows of the future: all of it (a clone), what is drawn from the past (shadows), or the real
arrivals of a window and true durations (shadows; a diagnostic)"""


class Lookahead(Policy):
    """Clone the simulation, play out every option with a base rule over a horizon, take the least weighted slowdown.

    Args:
        base: the rule that answers later requests in a playout (a registry name or a Policy; not a lookahead).
        plans: rules whose plans for the request are options (registry names or Policies).
        per_node: also offer, per node, the fewest victims that make room there (jobs of one node only).
        horizon: simulated seconds after the request at which options are scored (None: the end of the workload).
        max_decisions: later requests the base rule answers in a playout (None: all within the horizon); the
            rest wait.
        te_weight, be_weight: weights of TE and BE accrued slowdown in the score.
        preemption_cost: added to the score per preemption made in the playout (the environment's
            ``preemption_cost``).
        bounded: score bounded slowdown (``accrued_bounded``) instead of slowdown.
        wait: waiting is an option; False: the policy waits only when nothing else can serve the request (a
            learned agent can imitate it without guessing when to wait, which depends on a future it cannot see).
        future: ``"known"``: playouts on clones, which hold the future; ``"sampled"``: on shadows that know only
            the past, the present and estimates (:mod:`baselines.sampled_future`); ``"window"``: on shadows with
            true durations and the real arrivals of the next ``arrivals_horizon`` seconds (a diagnostic).
        samples: shadows per request (``future="sampled"``, or ``"window"`` with a ``perturbation``); an
            option's score is its mean over them (``"window"`` without one draws nothing: one shadow).
        arrivals_horizon: seconds after the request over which a shadow's arrivals are drawn, or (``"window"``)
            taken; None: all of them (drawn: until the workload holds ``request.n_jobs`` jobs).
        estimate_noise: sigma of the log-normal duration estimates a shadow's durations are drawn from
            (``future="sampled"``; the environment's default is 0.3).
        perturbation: ``future="window"`` only: sigma of a log-normal factor drawn per shadow on each unfinished
            or future job's true duration, over ``samples`` shadows (0: one shadow, the true durations). A
            diagnostic: does a gain survive a small error in the future it reads?
    """

    name = "lookahead"
    queue = QueueDiscipline.PRIORITY
    preempts = True

    def __init__(
        self,
        base: str | Policy = "fitgpp",
        plans: Sequence[str | Policy] = ("fitgpp", "k8s"),
        per_node: bool = True,
        horizon: float | None = 6 * 3600.0,
        max_decisions: int | None = None,
        te_weight: float = 1.0,
        be_weight: float = 1.0,
        preemption_cost: float = 0.0,
        bounded: bool = False,
        wait: bool = True,
        future: str = "known",
        samples: int = 4,
        arrivals_horizon: float | None = None,
        estimate_noise: float = 0.3,
        perturbation: float = 0.0,
    ) -> None:
        from schedgym.registry import make_policy  # the registry imports the baselines' modules lazily too

        def resolve(p: str | Policy) -> Policy:
            policy = make_policy(p) if isinstance(p, str) else p
            if isinstance(policy, Lookahead):
                raise ConfigError(f"Expected a rule that does not look ahead itself, got {policy!r}")
            return policy

        if horizon is not None and not (isinstance(horizon, (int, float)) and math.isfinite(horizon) and horizon > 0):
            raise ConfigError(f"Expected horizon > 0 (seconds) or None, got {horizon!r}")
        if max_decisions is not None and (
            isinstance(max_decisions, bool) or not isinstance(max_decisions, int) or max_decisions < 0
        ):
            raise ConfigError(f"Expected max_decisions >= 0 or None, got {max_decisions!r}")
        if future not in FUTURES:
            raise ConfigError(f"Expected future in {list(FUTURES)}, got {future!r}")
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise ConfigError(f"Expected samples >= 1, got {samples!r}")
        for label, value in (
            ("te_weight", te_weight),
            ("be_weight", be_weight),
            ("preemption_cost", preemption_cost),
            ("arrivals_horizon", 0.0 if arrivals_horizon is None else arrivals_horizon),
            ("estimate_noise", estimate_noise),
            ("perturbation", perturbation),
        ):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"Expected {label} >= 0, got {value!r}")
        if perturbation and future != "window":
            raise ConfigError(f"perturbation applies to future='window' only, got future={future!r}")
        self.base = resolve(base)
        self.plans = [resolve(p) for p in plans]
        self.per_node = bool(per_node)
        self.horizon = None if horizon is None else float(horizon)
        self.max_decisions = max_decisions
        self.te_weight = float(te_weight)
        self.be_weight = float(be_weight)
        self.preemption_cost = float(preemption_cost)
        self.bounded = bool(bounded)
        self.wait = bool(wait)
        self.future = future
        self.samples = samples
        self.arrivals_horizon = None if arrivals_horizon is None else float(arrivals_horizon)
        self.estimate_noise = float(estimate_noise)
        self.perturbation = float(perturbation)
        self.queue = self.base.queue
        self.last_options: list[tuple[PreemptionPlan, float]] = []
        """The options of the last request that had more than one, with their scores, in the order tried."""
        self.n_playouts = 0
        """Playouts simulated since :meth:`reset`."""
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        # Independent streams for the plan rules (a randomised one draws on the real request) and for the
        # playouts' base rule.
        children = self.rng.spawn(len(self.plans) + 2)
        for policy, child in zip(self.plans, children[:-2], strict=True):
            policy.reset(child)
        self._playout_rng = children[-2]
        self._shadows = (
            None
            if self.future == "known"
            else SampledFuture(
                children[-1],
                self.estimate_noise,
                self.arrivals_horizon,
                window=self.future == "window",
                perturbation=self.perturbation,
            )
        )
        self.base.reset(np.random.default_rng(0))
        self.last_options = []
        self.n_playouts = 0

    def __repr__(self) -> str:
        return (
            f"Lookahead(base={self.base!r}, plans={self.plans!r}, per_node={self.per_node}, horizon={self.horizon}, "
            f"max_decisions={self.max_decisions}, te_weight={self.te_weight}, be_weight={self.be_weight}, "
            f"preemption_cost={self.preemption_cost}, bounded={self.bounded}, wait={self.wait}"
            + (
                ""
                if self.future == "known"
                else f", future={self.future!r}, samples={self.samples}, arrivals_horizon={self.arrivals_horizon}, "
                f"estimate_noise={self.estimate_noise}"
                + (f", perturbation={self.perturbation}" if self.perturbation else "")
            )
            + ")"
        )

    # ------------------------------------------------------------------ options
    def options(self, request: PreemptionRequest) -> list[PreemptionPlan]:
        """The distinct options of ``request``, in the order they are tried (wait first; with ``wait=False``, wait
        only if it is the only one): the plan option set of :func:`schedgym.decision.plans.plan_options`."""
        rules = [(p.name, p) for p in self.plans]
        out = [option.plan for option in plan_options(request, rules, per_node=self.per_node)]
        if not self.wait and len(out) > 1:
            del out[0]
        return out

    # ------------------------------------------------------------------ deciding
    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        plan = self._best(request)
        if self._shadows is not None:
            self._shadows.decided(request, plan)  # every answer: the shadows replay the run's requests
        return plan

    def _best(self, request: PreemptionRequest) -> PreemptionPlan:
        sim = request.sim
        if sim is None:
            raise SchedGymError(
                "lookahead needs the simulation that asks (request.sim); it is set on the requests that "
                "Simulator.advance() makes"
            )
        options = self.options(request)
        if len(options) == 1:
            return options[0]  # nothing to compare: wait, or (wait=False) the one plan
        # One generator state for every playout of this request: the options differ only in themselves.
        seed = int(self._playout_rng.integers(2**63))
        end = None if self.horizon is None else request.now + self.horizon
        scored: list[tuple[PreemptionPlan, float]] = []
        if self._shadows is None:
            for plan in options:
                scored.append((plan, self._play(sim, plan, end, seed)))
        else:
            scored = self._sampled_scores(request, options, end, seed)
        self.last_options = scored
        best_plan, best = scored[0]
        for plan, score in scored[1:]:
            if score < best:  # strictly: ties go to the earlier option (waiting first)
                best_plan, best = plan, score
        return best_plan

    def _sampled_scores(
        self, request: PreemptionRequest, options: list[PreemptionPlan], end: float | None, seed: int
    ) -> list[tuple[PreemptionPlan, float]]:
        """Each option's mean score over ``samples`` shadows (each option played on every shadow)."""
        assert self._shadows is not None
        totals = [0.0] * len(options)
        samples = 1 if self.future == "window" and not self.perturbation else self.samples
        for _ in range(samples):
            shadow, index = self._shadows.shadow(request)
            for i, plan in enumerate(options):
                totals[i] += self._play(shadow, in_shadow(plan, index), end, seed)
        return [(plan, total / samples) for plan, total in zip(options, totals, strict=True)]

    def _play(self, sim, plan: PreemptionPlan, end: float | None, seed: int) -> float:  # noqa: ANN001
        """The score of ``plan``: apply it to a clone of ``sim``, play out to ``end`` (None: the end)."""
        copy = sim.clone()
        n_preemptions = copy.n_preemptions
        copy.resolve(plan)
        self.base.reset(np.random.default_rng(seed))
        until = math.inf if end is None else end
        copy.run_until(self.base, until, max_decisions=self.max_decisions)
        if self.max_decisions is not None:
            copy.run_until(_WAIT, until)  # later requests wait
        self.n_playouts += 1
        if end is None:  # drained
            acc = copy.accrued_bounded if self.bounded else copy.accrued
        else:  # every option at the same instant, whether its copy drained or stopped before it
            acc = copy.accrued_at(end, bounded=self.bounded)
        return (
            self.te_weight * acc[0]
            + self.be_weight * acc[1]
            + self.preemption_cost * (copy.n_preemptions - n_preemptions)
        )


__all__ = ["MAX_SUBSET_CANDIDATES", "Lookahead", "fewest_victims"]

"""The plan-level decision protocol: a simulator request answered by choosing one whole plan.

In the victim-by-victim protocol (:mod:`schedgym.decision.stepwise`) an agent builds a plan one victim per
action. Here it picks, once per request, one of the request's *plan options*
(:func:`schedgym.decision.plans.plan_options`: wait, the plans of the rules of
:data:`~schedgym.decision.features.PLAN_RULES`, and the fewest victims that make room on each node), each
described by one row of :data:`~schedgym.decision.features.PLAN_FEATURES`: the option set ``lookahead`` plays
out, so a learned scheduler can score whole options with one shared network, as Decima and RLScheduler do.

- action ``i`` = option row ``i``; row 0 is always wait (preempt nothing; the TE job is offered again after
  the cluster gains resources or candidates);
- legal actions: the options present (at most ``max_plans``; options beyond are cut from the end of the
  order); a request whose only option is to wait is declined without asking.

The observation is version 2 (:mod:`schedgym.decision.scalefree`). Nothing here knows of gymnasium: the
environment (:mod:`schedgym.envs`) and learned agents deciding inside the simulator share it.
"""

from __future__ import annotations

import functools

import numpy as np

from schedgym.decision.features import PLAN_RULES
from schedgym.decision.plans import PlanOption, plan_options
from schedgym.decision.scalefree import ScaleFreeObserver
from schedgym.decision.stepwise import check_action, draw_estimates
from schedgym.errors import ConfigError
from schedgym.sim.job import Job, JobTable
from schedgym.sim.policy import Policy, PreemptionPlan, PreemptionRequest


@functools.cache
def plan_rules() -> tuple[tuple[str, Policy], ...]:
    """The rules of :data:`PLAN_RULES`, built by name through :mod:`schedgym.registry` (they are registered by
    the ``baselines`` package; ``schedgym`` does not import it). Built once per process and shared by every
    encoder: both rules are deterministic and keep no state between requests, and building them through the
    registry took a fifth of a plan-mode reset."""
    from schedgym.registry import make_policy  # the registry loads the registered packages on first use

    rules = []
    for name in PLAN_RULES:
        rule = make_policy(name)
        rule.reset(np.random.default_rng(0))
        rules.append((name, rule))
    return tuple(rules)


class PlanEncoder:
    """The plan protocol for one simulation: the options' rules, the row limits, the estimate noise and the
    version-2 observer.

    Args:
        capacity: per-node capacities, shape (n_nodes, 3).
        table: the workload.
        max_plans: option rows per observation (wait included); the action space is ``Discrete(max_plans)``.
        queue_rows: queue rows per job class in the observation.
        estimate_noise: sigma of the lognormal error of duration and remaining-work estimates, one factor per
            job drawn here from ``rng`` (as :class:`~schedgym.decision.DecisionEncoder` draws them).
        rng: the generator for those factors.
    """

    mode = "plan"

    def __init__(
        self,
        capacity: np.ndarray,
        table: JobTable,
        *,
        max_plans: int,
        queue_rows: int,
        estimate_noise: float,
        rng: np.random.Generator,
    ) -> None:
        if not isinstance(max_plans, (int, np.integer)) or max_plans < 2:
            raise ConfigError(f"Expected max_plans >= 2 (wait and one plan), got {max_plans!r}")
        self.max_plans = int(max_plans)
        self.n_actions = self.max_plans
        self.rules = plan_rules()
        self.estimate = draw_estimates(estimate_noise, len(table), rng)
        self.observer = ScaleFreeObserver(
            capacity, table, self.estimate, mode="plan", n_rows=self.max_plans, queue_rows=queue_rows
        )
        self.size = self.observer.size

    def begin(self, request: PreemptionRequest) -> PlanDecision:
        """Start deciding ``request``; check :attr:`PlanDecision.offers_choice` before asking anyone."""
        return PlanDecision(self, request)

    def empty_observation(self) -> np.ndarray:
        """The observation when no decision is pending (the end of an episode): all zeros."""
        return np.zeros(self.size, dtype=np.float32)


class PlanDecision:
    """One request being decided by choosing a plan. Read :attr:`options`, :meth:`mask`, :meth:`observe`;
    answer with :meth:`choose`. (``rows``, ``chosen`` and ``targets``, the victim protocol's, are empty.)"""

    def __init__(self, encoder: PlanEncoder, request: PreemptionRequest) -> None:
        self.encoder = encoder
        self.request = request
        self.options: list[PlanOption] = plan_options(request, encoder.rules)[: encoder.max_plans]

    @property
    def rows(self) -> list[tuple[Job, int]]:
        return []

    @property
    def chosen(self) -> list[Job]:
        return []

    @property
    def targets(self) -> list[int]:
        return []

    @property
    def offers_choice(self) -> bool:
        """False if waiting is the only option: the request is then declined without asking."""
        return len(self.options) > 1

    @property
    def n_rows(self) -> int:
        """Options other than wait (legal actions are 0 to ``n_rows``)."""
        return len(self.options) - 1

    def mask(self) -> np.ndarray:
        """Legal actions (bool, shape ``(max_plans,)``)."""
        mask = np.zeros(self.encoder.max_plans, dtype=bool)
        mask[: len(self.options)] = True
        return mask

    def check(self, action: object) -> int:
        """``action`` as an int if it is legal, else :class:`~schedgym.errors.IllegalDecisionError`."""
        return check_action(action, self.n_rows, what="option row i")

    def choose(self, action: object) -> PreemptionPlan:
        """The plan of option ``action``."""
        return self.options[self.check(action)].plan

    def index_of(self, plan: PreemptionPlan) -> int | None:
        """The option row holding ``plan`` (as sets of nodes and victims), or None (for a teacher's answer)."""
        key = (frozenset(plan.nodes), frozenset(plan.victims))
        return next((i for i, o in enumerate(self.options) if o.key == key), None)

    def observe(self) -> np.ndarray:
        """The observation of this decision (a fresh float32 array, version 2, plan mode)."""
        obs = self.encoder.observer
        req = self.request
        medians = obs.scales.medians(req.now)
        queue_jobs = obs.queued(req)
        rows = [obs.plan_row(req, o.plan, o.sources, queue_jobs, medians) for o in self.options]
        return obs.assemble(obs.head(req, medians, {}), obs.queue(req, queue_jobs, medians), rows)


class PlanPolicy(Policy):
    """Base class of a policy that decides in the plan mode inside the simulator, like any rule (``compare``,
    ``Simulator.run``): at each request it builds the options and the observation as the environment
    ``schedgym/PreemptionPlan-v1`` does and answers with the plan of the option :meth:`choose` picks. A
    request whose only option is to wait is declined without asking, as the environment does.

    Args:
        max_plans, queue_rows: as the environment's (:class:`~schedgym.envs.EnvConfig`).
        estimate_noise: as the environment's; the factors are drawn at the run's first request from the
            generator of :meth:`reset`.
    """

    name = "plan-policy"
    preempts = True

    def __init__(self, *, max_plans: int = 24, queue_rows: int = 4, estimate_noise: float = 0.3) -> None:
        self.max_plans = max_plans
        self.queue_rows = queue_rows
        self.estimate_noise = estimate_noise
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        self._encoder: PlanEncoder | None = None
        self._sim: object = None

    def choose(self, decision: PlanDecision) -> int:
        """The option row to take (a legal action of ``decision``)."""
        raise NotImplementedError

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        sim = request.sim
        if self._encoder is None or sim is not self._sim:  # a new run (or a request built by hand)
            if sim is None:
                raise ConfigError("a plan-mode policy needs the simulation that asks (request.sim)")
            table = JobTable.from_specs([j.spec for j in sim.jobs])
            self._encoder = PlanEncoder(
                request.capacity,
                table,
                max_plans=self.max_plans,
                queue_rows=self.queue_rows,
                estimate_noise=self.estimate_noise,
                rng=self.rng,
            )
            self._sim = sim
        decision = self._encoder.begin(request)
        if not decision.offers_choice:
            return decision.options[0].plan
        return decision.choose(self.choose(decision))


__all__ = ["PlanDecision", "PlanEncoder", "PlanPolicy", "plan_rules"]

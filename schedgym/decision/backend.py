"""One simulation decided victim by victim: the one interface the environment and the vector environment talk to.

:func:`open_backend` builds, at every ``reset``, the simulation and its decision protocol on the engine the
configuration selects, and returns a :class:`DecisionBackend`. Its two implementations run the same protocol
(:mod:`schedgym.decision.stepwise` is the specification):

- :class:`PythonBackend`: :class:`~schedgym.decision.stepwise.StepwiseDecision` on any simulator;
- :class:`NativeBackend`: the protocol in C++ (``EnvCore``, ``schedgym/sim/native/decision.cpp``) on the
  native engine's state, without building Python requests or observation lists.

Above this module nothing asks which one it has: the environment reads and acts through the public methods
below, and a batch of backends is stepped through :mod:`schedgym.decision.batch`. An engine capability is
added here (both implementations, the Python one first) and tested in lockstep.

Also here, written once for both engines' Python side: what a step earns (:class:`Reward`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from schedgym.decision.features import observation_size, schema
from schedgym.decision.plan_mode import PlanDecision, PlanEncoder
from schedgym.decision.plans import MAX_SUBSET_CANDIDATES, PER_NODE, WAIT, PlanOption
from schedgym.decision.stepwise import DecisionEncoder, StepwiseDecision, action_index, check_action
from schedgym.errors import ConfigError, IllegalDecisionError, SchedGymError
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import Job, JobTable
from schedgym.sim.native_engine import PlanNativeSimulator, StepwiseNativeSimulator
from schedgym.sim.policy import DECLINE, PreemptionPlan, PreemptionRequest
from schedgym.sim.simulator import SimConfig, Simulator, select_engine


@dataclass(frozen=True, slots=True)
class Reward:
    """What a step earns, in named parts (``te_slowdown``, ``be_slowdown``, ``preemption``): minus the slowdown
    every job accrued since the previous step, weighted per class, and minus ``preemption_cost`` per job
    preempted at this step. The native batch stepper computes the same in C++ (``RewardConfig``)."""

    te_weight: float = 1.0
    be_weight: float = 1.0
    preemption_cost: float = 0.0
    bounded: bool = False  # reward "bounded_slowdown": accrued with 1/max(duration, 10 s)

    def parts(self, backend: DecisionBackend, n_preempted: int) -> tuple[float, float, float]:
        """The step's parts, taking the slowdown accrued since the previous call from ``backend``."""
        te, be = backend.take_accrued(self.bounded)
        return -self.te_weight * te, -self.be_weight * be, -self.preemption_cost * n_preempted


class DecisionBackend(ABC):
    """A simulation from reset to the end of its workload, its requests decided victim by victim.

    Drive it with :meth:`start` (to the first decision) and :meth:`step`; read the decision in progress with
    :attr:`job`, :attr:`n_rows`, :meth:`mask_into`, :meth:`observe_into`, :meth:`rows`, :meth:`chosen`,
    :meth:`targets` and :attr:`request`. The episode's counters (:attr:`n_steps`, :attr:`n_decisions`,
    :attr:`done`, :attr:`ended`) are kept here, so that whoever steps it (the environment, a batch) keeps them
    the same way."""

    def __init__(self, sim: Simulator, encoder: DecisionEncoder | PlanEncoder, table: JobTable) -> None:
        self.sim = sim
        self.encoder = encoder
        self.table = table
        self.n_steps = 0  # steps taken (actions applied)
        self.n_decisions = 0  # decisions offered so far
        self.done = False  # the workload has drained
        self.ended = False  # ... and a step has returned terminated=True
        self.last_accrued = (0.0, 0.0)  # accrued (TE, BE) slowdown when the reward was last taken

    # ---------------------------------------------------------------- the engine's part
    @property
    @abstractmethod
    def job(self) -> int:
        """Index of the TE job being decided, or -1 (no decision pending)."""

    @property
    @abstractmethod
    def n_rows(self) -> int:
        """Candidate rows of the decision in progress (legal actions 0 to ``n_rows``)."""

    @property
    @abstractmethod
    def request(self) -> PreemptionRequest | None:
        """The simulator's request behind the decision in progress (None when none is pending)."""

    @abstractmethod
    def rows(self) -> list[tuple[Job, int]]:
        """``(job, node)`` of each candidate row; action ``i`` preempts row ``i - 1``."""

    @abstractmethod
    def chosen(self) -> list[Job]:
        """Victims chosen so far in the attempt in progress, in order."""

    @abstractmethod
    def targets(self) -> list[int]:
        """Nodes of the chosen victims' rows, first choice first."""

    @abstractmethod
    def mask_into(self, out: np.ndarray) -> None:
        """Legal actions into ``out`` (bool, ``max_candidates + 1``); 0 is always legal."""

    @abstractmethod
    def observe_into(self, out: np.ndarray) -> None:
        """The observation into ``out`` (float32, the encoder's size; all zeros with no decision pending)."""

    @abstractmethod
    def view(self) -> StepwiseDecision | PlanDecision | NativeDecision | None:
        """The decision in progress as a read-only object (None when none is pending)."""

    @abstractmethod
    def _advance(self) -> bool:
        """Advance to the next request that offers a choice (True), declining those that offer none, or to the
        end of the workload (False)."""

    @abstractmethod
    def _choose(self, action: int) -> int:
        """Apply the legal ``action``: the number of victims preempted once the request is resolved (0 for a
        decline), or -1 if the decision goes on."""

    # ---------------------------------------------------------------- shared by both
    def start(self) -> None:
        """Run the simulation to the first decision (or the end)."""
        self._next_decision()

    def step(self, action: object) -> int:
        """Check and apply one action; returns the number of jobs preempted at this step. An episode without
        any decision takes one step, action 0, that only ends it."""
        if self.ended:
            raise SchedGymError("step() called on a finished episode (or before reset()); call reset() first")
        if self.job < 0:
            if action_index(action) != 0:
                raise IllegalDecisionError(f"Action {action!r} is illegal: no decision is pending; legal: [0]")
            n = 0
        else:
            n = self._choose(check_action(action, self.n_rows))
            if n >= 0:  # resolved (0: declined)
                self._next_decision()
        self.n_steps += 1
        self.ended = self.done
        return max(n, 0)

    def take_accrued(self, bounded: bool) -> tuple[float, float]:
        """Slowdown (TE, BE) accrued since the previous call (since reset at the first)."""
        acc = self.sim.accrued_bounded if bounded else self.sim.accrued
        te, be = acc[0] - self.last_accrued[0], acc[1] - self.last_accrued[1]
        self.last_accrued = (acc[0], acc[1])
        return te, be

    def mask(self) -> np.ndarray:
        mask = np.empty(self.encoder.n_actions, dtype=bool)
        self.mask_into(mask)
        return mask

    def observe(self) -> np.ndarray:
        obs = np.empty(self.encoder.size, dtype=np.float32)
        self.observe_into(obs)
        return obs

    def job_name(self) -> str | None:
        """The trace's name of the TE job being decided (None when none is pending)."""
        job = self.job
        return self.table.job_ids[job] if job >= 0 else None

    def _next_decision(self) -> None:
        if self._advance():
            self.n_decisions += 1
        else:
            self.done = True


class PythonBackend(DecisionBackend):
    """A protocol in Python on either engine's simulator: the victim-by-victim one of
    :mod:`schedgym.decision.stepwise` (the specification of the native one) with a
    :class:`~schedgym.decision.stepwise.DecisionEncoder`, or the plan-level one of
    :mod:`schedgym.decision.plan_mode` with a :class:`~schedgym.decision.plan_mode.PlanEncoder`."""

    def __init__(self, sim: Simulator, encoder: DecisionEncoder | PlanEncoder, table: JobTable) -> None:
        super().__init__(sim, encoder, table)
        self._decision: StepwiseDecision | PlanDecision | None = None

    @property
    def job(self) -> int:
        return self._decision.request.job.idx if self._decision is not None else -1

    @property
    def n_rows(self) -> int:
        return self._decision.n_rows if self._decision is not None else 0

    @property
    def request(self) -> PreemptionRequest | None:
        return self._decision.request if self._decision is not None else None

    def rows(self) -> list[tuple[Job, int]]:
        return list(self._decision.rows) if self._decision is not None else []

    def chosen(self) -> list[Job]:
        return list(self._decision.chosen) if self._decision is not None else []

    def targets(self) -> list[int]:
        return list(self._decision.targets) if self._decision is not None else []

    def mask_into(self, out: np.ndarray) -> None:
        out[:] = False
        out[: 1 + self.n_rows] = True

    def observe_into(self, out: np.ndarray) -> None:
        if self._decision is None:
            out[:] = 0.0
        else:
            out[:] = self._decision.observe()

    def view(self) -> StepwiseDecision | PlanDecision | None:
        return self._decision

    def _advance(self) -> bool:
        sim, encoder = self.sim, self.encoder
        while (request := sim.advance()) is not None:
            decision = encoder.begin(request)
            if decision.offers_choice:
                self._decision = decision
                return True
            sim.resolve(DECLINE)  # no victim can make room: no choice to offer
        self._decision = None
        return False

    def _choose(self, action: int) -> int:
        decision = self._decision
        assert decision is not None
        plan = decision.choose(action)
        if plan is None:
            return -1
        self.sim.resolve(plan)
        return len(plan.victims)


class CoreBackend(DecisionBackend):
    """What the two protocols in C++ share: a decision core (``EnvCore`` or ``PlanCore``) that belongs to the
    native simulator (which pickles and clones it by replay), so that this object holds nothing the simulator
    does not; the core answers the job, the mask and the observation, the simulator advances and chooses."""

    sim: StepwiseNativeSimulator
    _core: Any

    @property
    def core(self) -> Any:
        """The C++ decision core (``schedgym.sim._engine.EnvCore`` or ``PlanCore``)."""
        return self._core

    @property
    def job(self) -> int:
        job: int = self._core.job
        return job

    # The core is the simulator's (pickled by replay, rebuilt by its __setstate__); this object keeps a
    # reference for speed (each step reads it a few times), taken again from the simulator after a copy.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_core"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._core = self.sim.core

    @property
    def request(self) -> PreemptionRequest | None:
        return self.sim.pending_request if self.job >= 0 else None

    def mask_into(self, out: np.ndarray) -> None:
        self._core.mask(out)

    def observe_into(self, out: np.ndarray) -> None:
        self._core.observe(out)

    def _advance(self) -> bool:
        return self.sim.next_decision()

    def _choose(self, action: int) -> int:
        return self.sim.choose(action)


class NativeBackend(CoreBackend):
    """The protocol in C++ (``EnvCore``) on a :class:`~schedgym.sim.native_engine.StepwiseNativeSimulator`:
    the same rows, plans and bit-identical observations. The core belongs to the simulator (which pickles
    and clones it by replay), so this object holds nothing the simulator does not."""

    sim: StepwiseNativeSimulator
    encoder: DecisionEncoder

    def __init__(self, sim: StepwiseNativeSimulator, encoder: DecisionEncoder, table: JobTable) -> None:
        super().__init__(sim, encoder, table)
        lay = encoder.layout
        self._core = sim.begin_decisions(
            encoder.max_candidates,
            encoder.estimate,
            encoder.scale,
            encoder.total,
            lay.head_scale_array,
            lay.row_scale_array,
        )

    @property
    def n_rows(self) -> int:
        n: int = self._core.n_rows
        return n

    def rows(self) -> list[tuple[Job, int]]:
        rows = self._core.rows()
        jobs = self.sim.decision_jobs([i for i, _ in rows])
        return [(job, node) for job, (_, node) in zip(jobs, rows, strict=True)]

    def chosen(self) -> list[Job]:
        return self.sim.decision_jobs(self._core.chosen())

    def targets(self) -> list[int]:
        return list(self._core.targets())

    def view(self) -> NativeDecision | None:
        return NativeDecision(self) if self.job >= 0 else None

    def note_batch_step(self, n_decisions: int, accrued: Sequence[float], done: bool, resolved: bool) -> None:
        """Record a step the native batch stepper took (``schedgym/sim/native/batch.cpp``): what :meth:`step`
        and :meth:`take_accrued` record when they do it."""
        self.n_steps += 1
        self.n_decisions = n_decisions
        self.last_accrued = (accrued[0], accrued[1])
        self.done = self.ended = done
        if resolved:
            self.sim.note_native_step()


class NativeDecision:
    """The decision in progress of a :class:`NativeBackend`, where the protocol of
    :class:`~schedgym.decision.StepwiseDecision` runs in C++: the same read-only view (``request``, ``rows``,
    ``chosen``, ``targets``, ``offers_choice``, :meth:`mask`, :meth:`observe`, :meth:`check`). Act through
    the environment's ``step``."""

    __slots__ = ("_backend",)

    def __init__(self, backend: NativeBackend) -> None:
        self._backend = backend

    @property
    def encoder(self) -> DecisionEncoder:
        return self._backend.encoder

    @property
    def request(self) -> PreemptionRequest | None:
        return self._backend.request

    @property
    def rows(self) -> list[tuple[Job, int]]:
        return self._backend.rows()

    @property
    def chosen(self) -> list[Job]:
        return self._backend.chosen()

    @property
    def targets(self) -> list[int]:
        return self._backend.targets()

    @property
    def offers_choice(self) -> bool:
        return self._backend.n_rows > 0

    def mask(self) -> np.ndarray:
        return self._backend.mask()

    def observe(self) -> np.ndarray:
        return self._backend.observe()

    def check(self, action: object) -> int:
        return check_action(action, self._backend.n_rows)


class NativePlanBackend(CoreBackend):
    """The plan-level protocol in C++ (``PlanCore``) on a :class:`~schedgym.sim.native_engine.PlanNativeSimulator`:
    the options, masks and bit-identical observations of :mod:`schedgym.decision.plan_mode`. The encoder is the
    Python one (:class:`~schedgym.decision.plan_mode.PlanEncoder`): its estimate factors, capacity scales and
    running medians are handed to the core, and its rules by their native counterparts. As with
    :class:`NativeBackend`, the core belongs to the simulator, which pickles and clones it by replay."""

    sim: PlanNativeSimulator
    encoder: PlanEncoder

    def __init__(self, sim: PlanNativeSimulator, encoder: PlanEncoder, table: JobTable) -> None:
        super().__init__(sim, encoder, table)
        obs = encoder.observer
        rules = []
        for name, rule in encoder.rules:
            native = rule.native_rule()
            if native is None:
                raise ConfigError(f"The plan rule {name!r} has no native counterpart; use the Python protocol")
            rules.append((name, native[0], native[1]))
        self._core = sim.begin_plan_decisions(
            rules,
            (obs.head_names, obs.queue_names, obs.row_names),
            encoder.max_plans,
            obs.queue_rows,
            encoder.estimate,
            obs.scale,
            obs.total,
            obs.scales.columns(),
            MAX_SUBSET_CANDIDATES,
        )
        self._sources = (WAIT, *(name for name, _ in encoder.rules), PER_NODE)

    @property
    def n_rows(self) -> int:
        n: int = self._core.n_options
        return max(n - 1, 0)

    def rows(self) -> list[tuple[Job, int]]:
        return []

    def chosen(self) -> list[Job]:
        return []

    def targets(self) -> list[int]:
        return []

    def options(self) -> list[PlanOption]:
        """The options of the decision in progress, as :func:`~schedgym.decision.plans.plan_options` lists them
        (empty when none is pending)."""
        sources = self._sources
        return [
            PlanOption(
                PreemptionPlan(nodes=tuple(nodes), victims=tuple(victims)),
                frozenset(s for i, s in enumerate(sources) if bits >> i & 1),
            )
            for nodes, victims, bits in self._core.options()
        ]

    def view(self) -> NativePlanDecision | None:
        return NativePlanDecision(self) if self.job >= 0 else None


class NativePlanDecision(PlanDecision):
    """The decision in progress of a :class:`NativePlanBackend`, where the protocol of
    :class:`~schedgym.decision.plan_mode.PlanDecision` runs in C++: the same read-only view (``request``,
    ``options``, ``offers_choice``, :meth:`mask`, :meth:`observe`, :meth:`check`, :meth:`choose` and
    :meth:`index_of`, which only name the plan of a row). Act through the environment's ``step``."""

    def __init__(self, backend: NativePlanBackend) -> None:  # the options are the core's, not built here
        self.encoder = backend.encoder
        self._backend = backend
        self.options = backend.options()
        request = backend.request
        assert request is not None
        self.request = request

    def mask(self) -> np.ndarray:
        return self._backend.mask()

    def observe(self) -> np.ndarray:
        return self._backend.observe()


@dataclass(frozen=True, slots=True)
class DecisionSpec:
    """How an agent is asked: the action ``mode`` (``"victim"``: victim by victim, :mod:`schedgym.decision.
    stepwise`; ``"plan"``: one whole plan, :mod:`schedgym.decision.plan_mode`), the observation ``version``
    (1, or 2: :mod:`schedgym.decision.scalefree`; the plan mode has 2 only), the option rows (``max_candidates``
    candidate rows or ``max_plans`` plan rows) and version 2's ``queue_rows`` per job class."""

    mode: Literal["victim", "plan"] = "victim"
    version: int = 1
    max_candidates: int = 16
    max_plans: int = 24
    queue_rows: int = 4

    def __post_init__(self) -> None:
        if self.mode not in ("victim", "plan"):
            raise ConfigError(f"Expected action_mode 'victim' or 'plan', got {self.mode!r}")
        if self.version not in (1, 2) or (self.mode == "plan" and self.version != 2):
            raise ConfigError(
                f"Expected observation_version 1 or 2 (the plan mode has version 2 only), got {self.version!r} "
                f"in action mode {self.mode!r}"
            )

    @property
    def n_actions(self) -> int:
        """The size of the action space."""
        return self.max_candidates + 1 if self.mode == "victim" else self.max_plans

    @property
    def observation_size(self) -> int:
        """The length of the flat observation."""
        if self.version == 1:
            return observation_size(self.max_candidates)
        n_rows = self.max_candidates if self.mode == "victim" else self.max_plans
        return schema(2, self.mode).size(n_rows, self.queue_rows)


def open_backend(
    cluster: ClusterSpec,
    table: JobTable,
    config: SimConfig,
    *,
    spec: DecisionSpec,
    estimate_noise: float,
    rng: np.random.Generator,
    protocol: Literal["auto", "python"] = "auto",
) -> DecisionBackend:
    """A new simulation of ``table`` on ``cluster`` under ``config``, at its first decision, decided by the
    protocol on the engine ``config`` selects: the victim protocol with observation version 1 in C++ on the
    native engine, everything else in Python (on either engine). ``protocol="python"`` runs the Python protocol
    on either engine (the tests isolate the protocol from the engine with it). ``spec`` is the action mode,
    the observation and the row counts. The encoder draws its estimate noise from ``rng``."""
    native = protocol == "auto" and select_engine(config.engine) == "native"
    encoder: DecisionEncoder | PlanEncoder
    if spec.mode == "plan":
        encoder = PlanEncoder(
            cluster.capacity,
            table,
            max_plans=spec.max_plans,
            queue_rows=spec.queue_rows,
            estimate_noise=estimate_noise,
            rng=rng,
        )
    else:
        encoder = DecisionEncoder(
            cluster.capacity,
            len(table),
            max_candidates=spec.max_candidates,
            estimate_noise=estimate_noise,
            rng=rng,
            table=table if spec.version == 2 else None,
            queue_rows=spec.queue_rows,
        )
    backend: DecisionBackend
    if native and isinstance(encoder, DecisionEncoder) and spec.version == 1:
        backend = NativeBackend(StepwiseNativeSimulator(cluster, table, config), encoder, table)
    elif native and isinstance(encoder, PlanEncoder) and all(r.native_rule() is not None for _, r in encoder.rules):
        backend = NativePlanBackend(PlanNativeSimulator(cluster, table, config), encoder, table)
    else:
        backend = PythonBackend(Simulator(cluster, table, config), encoder, table)
    backend.start()
    return backend


__all__ = [
    "CoreBackend",
    "DecisionBackend",
    "NativeBackend",
    "NativeDecision",
    "NativePlanBackend",
    "NativePlanDecision",
    "DecisionSpec",
    "PythonBackend",
    "Reward",
    "open_backend",
]

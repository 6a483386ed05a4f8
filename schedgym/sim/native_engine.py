"""The native engine behind the :class:`~schedgym.sim.simulator.Simulator` API.

The state and the stepping live in C++ (``schedgym/sim/native/``, the module ``schedgym.sim._engine``); this
wrapper validates inputs at the boundary, turns the engine's requests into the same
:class:`~schedgym.sim.policy.PreemptionRequest` objects the Python engine builds (its :class:`Job` records
are refreshed from the engine when a request or a caller needs them), and pickles a simulation by replaying
its decisions (the engine is deterministic), so copied environments work on both engines. :meth:`clone
<NativeSimulator.clone>` copies the C++ state instead, which is far cheaper.
"""

from __future__ import annotations

import copy
import enum
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedgym.errors import ConfigError, IllegalDecisionError
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import Job, JobSpec, JobState, JobTable, build_jobs, check_workload
from schedgym.sim.metrics import RunResult, SegmentTable
from schedgym.sim.policy import Policy, PreemptionPlan, PreemptionPolicy, PreemptionRequest, QueueDiscipline
from schedgym.sim.simulator import SimConfig, Simulator

ENGINE_VERSION = 6
"""The version of the compiled engine this wrapper expects (``schedgym.sim._engine.ENGINE_VERSION``)."""
COMPENSATED_SUM = sys.version_info >= (3, 12)
"""Whether Python's ``sum()`` of floats is compensated (from 3.12 on): the plan core's sums follow it."""

_STATES = tuple(JobState)

Decision = tuple[list[int], list[int]]
"""One logged resolve: (nodes, victims), as ``Engine.resolve`` takes them."""


class ReplayPhase(enum.Enum):
    """Where a native simulation stands relative to its replay log (what :class:`ReplayState` must redo)."""

    FRESH = "fresh"
    """Nothing has driven the engine: a whole run may be handed to it in one call."""
    RESOLVED = "resolved"
    """The last thing done was a logged resolve: replaying the log reproduces the state."""
    ADVANCED = "advanced"
    """The engine was advanced (to :attr:`ReplayState.until`) after the last logged resolve, or from the start:
    a replay advances as far after the log."""


@dataclass
class ReplayState:
    """What a :class:`NativeSimulator` needs to rebuild its engine by replay (pickling, ``copy.deepcopy``): the
    engine is deterministic, so the same calls reproduce the same state exactly.

    Attributes:
        log: every resolve, in order (the decision core's are added when it hands them over).
        phase: where the engine stands after the log (:class:`ReplayPhase`).
        until: how far the engine was advanced after the log (``advance(until=...)``), in phase ADVANCED.
        native_rule: ``(name, parameters)`` of a built-in rule that ran the whole simulation from the start in
            C++, with the parameters as they were at its start (a randomised rule's Generator advances during
            the run); the replay is then that one call, and the log is not used.
    """

    log: list[Decision] = field(default_factory=list)
    phase: ReplayPhase = ReplayPhase.FRESH
    until: float = math.inf
    native_rule: tuple[str, Mapping[str, Any]] | None = None

    @property
    def fresh(self) -> bool:
        """Nothing has driven the engine yet."""
        return self.phase is ReplayPhase.FRESH

    def resolved(self, decisions: Sequence[Decision]) -> None:
        """Record resolves that the engine stopped right after."""
        self.log.extend(decisions)
        self.phase = ReplayPhase.RESOLVED

    def advanced(self, until: float) -> None:
        """Record that the engine was advanced to ``until`` after the last logged resolve (a replay advances as
        far: advancing to a later time first and then to an earlier one stops at the later one)."""
        self.until = max(self.until, until) if self.phase is ReplayPhase.ADVANCED else until
        self.phase = ReplayPhase.ADVANCED

    def ran_rule(self, name: str, params: Mapping[str, Any]) -> None:
        """Record that the built-in rule ``name`` ran the simulation from the start with ``params``."""
        self.native_rule = (name, params)
        self.phase = ReplayPhase.ADVANCED

    def copy(self) -> ReplayState:
        """A copy with a log of its own (the logged pairs and the rule's parameters are shared: nothing changes
        them)."""
        return ReplayState(self.log.copy(), self.phase, self.until, self.native_rule)

    @classmethod
    def from_legacy(cls, state: dict[str, Any]) -> ReplayState:
        """The replay state of a simulation pickled before :class:`ReplayState` (its flags popped from
        ``state``)."""
        log = state.pop("_log")
        advanced = state.pop("_advanced_after_log")
        until = state.pop("_until", math.inf)
        native_rule = state.pop("_native_rule", None)
        phase = ReplayPhase.ADVANCED if advanced else ReplayPhase.RESOLVED if log else ReplayPhase.FRESH
        return cls(log, phase, until, native_rule)


class NativeSimulator(Simulator):
    """The native engine (see :class:`~schedgym.sim.simulator.Simulator` for the API)."""

    engine = "native"

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[JobSpec],
        config: SimConfig | None = None,
        *,
        preemption: bool = True,
    ) -> None:
        self._set_up(cluster, config, preemption)
        # A JobTable (a Workload's table) is built from its columns: no JobSpec is made unless asked for.
        self._specs: Sequence[JobSpec] = jobs if isinstance(jobs, JobTable) else list(jobs)
        table = JobTable.from_specs(self._specs)
        self._columns = table.columns  # read once
        self._job_list: list[Job] | None = None  # built when first needed: a run of rules never needs them
        self._job_source: list[Job] | None = None  # a clone's: the original's records, copied when first needed
        # check_workload's checks, in its order: a duplicate id here; a job that can never run is one the engine
        # refuses (per job shape, with first_unplaceable's test), and check_workload then names it as the Python
        # engine does (or a duplicate id before it). Testing every job in numpy first cost a twentieth of an
        # environment's reset.
        if table.first_duplicate() < len(table):
            check_workload(self._specs, self.capacity)
        try:
            self._engine = self._build()
        except ValueError:
            check_workload(self._specs, self.capacity)
            raise
        self._request: PreemptionRequest | None = None
        self._replay = ReplayState()  # for pickling by replay
        self._stale = False  # the Job records lag behind the engine

    def _build(self) -> Any:
        from schedgym.sim import _engine

        col = self._columns
        restart = self._restart()
        # Passed only when some job gives its own: a workload without per-job overheads builds the engine exactly
        # as before they existed.
        extra = {} if restart is None else {"restart": restart}
        return _engine.Engine(
            np.ascontiguousarray(self.capacity, dtype=np.float64),
            col["submit"],
            col["duration"],
            col["member"],
            col["gang"],
            col["job_class"],
            col["grace"],
            priority_queue=QueueDiscipline(self.config.queue) == QueueDiscipline.PRIORITY,
            backfill=self.config.backfill,
            first_fit=self.config.placement == "first-fit",
            max_preemptions=self.config.max_preemptions,
            restart_overhead=float(self.config.restart_overhead),
            preemption=self.preemption,
            job_ids=col["job_id"],  # error messages name jobs as the Python engine does
            **extra,
        )

    def _restart(self) -> np.ndarray | None:
        """Each job's restart overhead (the config's where a job gives none), or None if no job gives one."""
        restart = self._columns["restart"]
        if restart is None:
            return None
        return np.where(np.isnan(restart), float(self.config.restart_overhead), restart)

    # ------------------------------------------------------------------ driving
    def _advance_engine(self, until: float = math.inf) -> int:
        """The engine's next request (its job index), or -1 at the end or at ``until``. Without preemption nobody
        is asked, so a fresh simulation runs to the end (or to ``until``) in one native call."""
        if not self.preemption and not self._replay.log:
            self._engine.run_declining(until)
            return -1
        return int(self._engine.advance(until))

    def _note_advanced(self, until: float) -> None:
        """Record that the engine was advanced to ``until`` (:meth:`ReplayState.advanced`); the records lag."""
        self._replay.advanced(until)
        self._stale = True

    def run(self, policy: PreemptionPolicy) -> RunResult:
        """Drive the simulation to the end; a built-in rule (``policy.native_rule()``) decides in C++."""
        spec = policy.native_rule() if isinstance(policy, Policy) else None
        if spec is not None and self.preemption and not self._replay.fresh and self._engine.pending < 0:
            self.run_until(policy)  # mid-run: decided in C++ as well, and logged for replay
            return self.result()
        if spec is not None and self._replay.fresh and self.preemption:
            name, params = spec
            # Replayed by pickling, from the parameters as they are now: a randomised rule's Generator advances
            # during the run, and the replay must draw what the run drew.
            start = copy.deepcopy(params)
            self._engine.run_rule(name, dict(params))
            self._replay.ran_rule(name, start)
            self._stale = True
            return self.result()
        return super().run(policy)

    def run_until(self, policy: PreemptionPolicy, until: float = math.inf, *, max_decisions: int | None = None) -> int:
        """See :meth:`Simulator.run_until`; a built-in rule (``policy.native_rule()``) decides in C++, and its
        decisions are logged for pickling by replay."""
        spec = policy.native_rule() if isinstance(policy, Policy) else None
        if spec is None and isinstance(policy, Policy) and not policy.preempts and type(policy).decide is Policy.decide:
            spec = ("decline", {})  # what Policy.decide answers for a policy that never preempts
        if spec is None or not self.preemption or self._engine.pending >= 0:
            return super().run_until(policy, until, max_decisions=max_decisions)
        if max_decisions is not None and max_decisions < 0:
            raise ConfigError(f"Expected max_decisions >= 0 or None, got {max_decisions}")
        if max_decisions == 0:
            return 0
        name, params = spec
        limit = -1 if max_decisions is None else int(max_decisions)
        plans = self._engine.run_rule(name, dict(params), until=float(until), max_decisions=limit, log=True)
        self._request = None
        self._stale = True
        if plans:
            self._replay.resolved(plans)
        if len(plans) != max_decisions:  # stopped by advance(until): the end, or the time limit
            self._note_advanced(until)
        return len(plans)

    def advance(self, until: float = math.inf) -> PreemptionRequest | None:
        """See :meth:`Simulator.advance` (:meth:`PythonSimulator.advance
        <schedgym.sim.python_engine.PythonSimulator.advance>` for ``until``)."""
        if self._request is not None or self._engine.pending >= 0:
            raise IllegalDecisionError("advance() called while a decision is pending; call resolve() first")
        idx = self._advance_engine(until)
        self._note_advanced(until)
        if idx < 0:
            return None
        self._request = self._make_request(idx)
        return self._request

    def resolve(self, plan: PreemptionPlan) -> None:
        if self._engine.pending < 0:
            raise IllegalDecisionError("resolve() called with no decision pending")
        nodes, victims = tuple(plan.nodes), tuple(plan.victims)
        for n in nodes:
            if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
                raise IllegalDecisionError(f"Plan node {n!r} is not a node index in [0, {self.cluster.n_nodes})")
        for v in victims:
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                request = self.pending_request
                assert request is not None
                legal = sorted({j.idx for js in request.candidates.values() for j in js})
                raise IllegalDecisionError(
                    f"Job index {v!r} is not a preemption candidate for {request.job.job_id!r}; candidates are {legal}"
                )
        decision = ([int(n) for n in nodes], [int(v) for v in victims])
        try:
            self._engine.resolve(*decision)
        except ValueError as exc:  # the engine checks the plan exactly as the Python engine does
            raise IllegalDecisionError(str(exc)) from None
        self._replay.resolved([decision])
        self._request = None
        self._stale = True

    def result(self) -> RunResult:
        eng = self._engine
        if not eng.done:
            unfinished = int((eng.state() != JobState.COMPLETED).sum())
            raise IllegalDecisionError(f"result() needs a finished simulation; {unfinished} jobs are unfinished")
        col = self._columns
        return RunResult(
            job_ids=list(col["job_id"]),
            job_class=col["job_class"].copy(),
            submit=col["submit"].copy(),
            duration=col["duration"].copy(),
            gpus=col["gpus"].copy(),
            cpus=col["cpus"].copy(),
            first_start=eng.first_start(),
            completion=eng.completion(),
            preemptions=eng.preemptions().astype(np.int64),
            grace_time=eng.grace_time(),
            overhead_time=eng.overhead_time(),
            run_time=eng.run_time(),
            segments=self.segments,
            capacity_total=self.capacity.sum(axis=0),
            n_preemptions=int(eng.n_preemptions),
            n_requests=int(eng.n_requests),
        )

    # ------------------------------------------------------------------ state
    @property
    def now(self) -> float:
        return float(self._engine.now)

    @property
    def done(self) -> bool:
        return bool(self._engine.done)

    @property
    def pending_request(self) -> PreemptionRequest | None:
        """The request waiting for :meth:`resolve`, or None (built when first asked for on a clone)."""
        if self._request is None:
            idx = self._engine.pending
            if idx >= 0:
                self._request = self._make_request(idx)
        return self._request

    @property
    def n_preemptions(self) -> int:
        return int(self._engine.n_preemptions)

    @property
    def n_requests(self) -> int:
        return int(self._engine.n_requests)

    @property
    def accrued(self) -> list[float]:
        return list(self._engine.accrued())

    @property
    def accrued_bounded(self) -> list[float]:
        return list(self._engine.accrued_bounded())

    def _rates(self, bounded: bool) -> tuple[float, float]:
        te, be, te_b, be_b = self._engine.rate()
        return (te_b, be_b) if bounded else (te, be)

    # ------------------------------------------------------------------ copying
    def clone(self) -> NativeSimulator:
        """An independent simulation in exactly this state (see :meth:`Simulator.clone`): a copy of the C++
        engine (its copy constructor), not a replay. The workload's columns and specs are shared (nothing
        changes them); the copy makes its :class:`Job` records, and the pending request on them, only when
        they are asked for. The replay log is copied too, so the copy pickles as the original does."""
        new = object.__new__(type(self))
        d = new.__dict__
        d.update(self.__dict__)
        d["_engine"] = self._engine.clone()
        d["_replay"] = self._replay.copy()
        d["_request"] = None  # rebuilt on the copy's records by pending_request
        d["_stale"] = True
        # Records are refreshed from the engine before anyone reads them: the copy needs records of its own, not
        # these ones' contents, and copies them (cheaper than building them) only if it needs them at all.
        d["_job_list"] = None
        d["_job_source"] = self._job_list if self._job_list is not None else self._job_source
        return new

    @property
    def avail(self) -> np.ndarray:
        return _read_only(self._engine.avail())

    @property
    def held(self) -> np.ndarray:
        return _read_only(self._engine.held())

    @property
    def unused(self) -> np.ndarray:
        """Per-node resources that no RUNNING or PREEMPTING job occupies (a fresh array: ``avail + held``)."""
        unused: np.ndarray = self._engine.avail() + self._engine.held()
        return unused

    @property
    def queue_lengths(self) -> tuple[int, int]:
        te, be = self._engine.queue_lengths
        return int(te), int(be)

    @property
    def jobs(self) -> list[Job]:
        """The per-job records, brought up to date with the engine."""
        if self._stale or self._job_list is None:
            self._sync_all()
        return self._jobs

    @property
    def _jobs(self) -> list[Job]:
        if self._job_list is None:
            source = self._job_source
            if source is not None:  # cheaper than building them; the copies are refreshed before anyone reads them
                self._job_list = [j.copy() for j in source]
                self._job_source = None
            else:
                self._job_list = build_jobs(self._specs, self.capacity, self._columns["member"])
        return self._job_list

    @property
    def segments(self) -> SegmentTable:
        return SegmentTable(*self._engine.segments())

    def candidates(self) -> dict[int, list[Job]]:
        """Preemptible jobs per node (RUNNING, BE, fewer than max_preemptions preemptions), by job index."""
        jobs = self.jobs
        return {int(n): [jobs[i] for i in idx] for n, idx in self._engine.candidates()}

    def running_on(self, node: int) -> frozenset[int]:
        return frozenset(self._engine.running_on(node))

    def _queued(self, limit: int) -> tuple[list[Job], list[Job]]:
        # No class has more jobs than the workload (and a larger int would not fit the binding's int64).
        te, be = self._engine.queued(min(limit, len(self._specs)))
        jobs = self._jobs
        if te or be:
            self._sync([*te, *be])  # bring just those records up to date
        return [jobs[i] for i in te], [jobs[i] for i in be]

    # ------------------------------------------------------------------ requests
    def _make_request(self, idx: int) -> PreemptionRequest:
        jobs = self._jobs
        listed = self._engine.candidates()
        # The policy reads the job's and the candidates' records: bring just those up to date.
        self._sync([idx, *sorted({i for _, ids in listed for i in ids})])
        candidates = {int(n): [jobs[i] for i in ids] for n, ids in listed}
        return PreemptionRequest(
            job=jobs[idx],
            now=self.now,
            avail=self.avail,
            capacity=self.capacity,
            candidates=candidates,
            capacity_rows=self._capacity_rows,
            held=self.held,
            queued=self.queue_lengths,
            n_jobs=len(jobs),
            max_preemptions=self.config.max_preemptions,
            sim=self,
        )

    def _sync(self, ids: list[int]) -> None:
        jobs = self._jobs
        for i, rec in zip(ids, self._engine.job_records(ids), strict=True):
            job = jobs[i]
            job.state = _STATES[rec[0]]
            (
                job.remaining,
                job.preemptions,
                job.run_start,
                job.run_overhead,
                job.first_start,
                job.completion,
                job.grace_time,
                job.overhead_time,
                job.run_time,
                job.nodes,
            ) = rec[1:]

    def _sync_all(self) -> None:
        self._sync(list(range(len(self._specs))))
        self._stale = False

    # ------------------------------------------------------------------ pickling by replay
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_engine"]
        state["_request"] = None
        state["_job_source"] = None
        state["_pending"] = self._engine.pending >= 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        pending = state.pop("_pending")
        if "_replay" not in state:
            state["_replay"] = ReplayState.from_legacy(state)
        self.__dict__.update(state)
        self._engine = self._build()
        # Deterministic: the same advance/resolve calls reproduce the same state exactly.
        replay: ReplayState = self._replay
        if replay.native_rule is not None:
            # On a copy: the stored parameters (a Generator's starting state) must serve the next replay too.
            name, params = replay.native_rule
            self._engine.run_rule(name, copy.deepcopy(dict(params)))
            self._stale = True
            return
        for decision in replay.log:
            self._engine.advance()
            self._engine.resolve(*decision)
        self._stale = True
        if replay.phase is ReplayPhase.ADVANCED:
            idx = self._advance_engine(replay.until)
            if pending and idx >= 0:
                self._request = self._make_request(idx)


class StepwiseNativeSimulator(NativeSimulator):
    """A native simulation whose requests are decided victim by victim in C++: the protocol of
    :mod:`schedgym.decision.stepwise` (``EnvCore``, ``schedgym/sim/native/decision.cpp``) on the engine's state,
    with the same rows, plans and observations. :class:`~schedgym.decision.backend.NativeBackend` (what the
    environment runs on when the native engine is selected) drives it.

    After :meth:`begin_decisions`, drive it with :meth:`next_decision` and :meth:`choose` (read the decision
    from :attr:`core`); :attr:`pending_request` is built only when asked for. The rest of the
    :class:`~schedgym.sim.simulator.Simulator` API works as on :class:`NativeSimulator`, and it pickles by
    replay, the decision in progress included.
    """

    _core: Any = None
    _core_args: tuple[Any, ...] | None = None

    def begin_decisions(
        self,
        max_candidates: int,
        estimate: np.ndarray,
        scale: Sequence[float],
        total: Sequence[float],
        head_scale: Sequence[float] | np.ndarray,
        row_scale: Sequence[float] | np.ndarray,
    ) -> Any:
        """Build the decision core (``DecisionEncoder``'s ``max_candidates``, ``estimate``, ``scale``, ``total``
        and the features' declared scales, ``head_scale`` and ``row_scale``) and return it."""
        from schedgym.sim import _engine

        args = (
            int(max_candidates),
            np.ascontiguousarray(estimate, dtype=np.float64),
            np.ascontiguousarray(scale, dtype=np.float64),
            np.ascontiguousarray(total, dtype=np.float64),
            np.ascontiguousarray(head_scale, dtype=np.float64),
            np.ascontiguousarray(row_scale, dtype=np.float64),
        )
        self._core = _engine.EnvCore(self._engine, *args)
        self._core_args = args
        return self._core

    @property
    def core(self) -> Any:
        """The decision core (``schedgym.sim._engine.EnvCore``), or None before :meth:`begin_decisions`."""
        return self._core

    def next_decision(self) -> bool:
        """Advance to the next request that offers a choice (True), declining those that offer none, or to the
        end of the workload (False)."""
        found = bool(self._core.next_decision())
        self._request = None
        self._note_advanced(math.inf)
        return found

    def choose(self, action: int) -> int:
        """Apply a legal ``action`` (checked by the caller) to the decision in progress: the number of victims
        preempted once the request is resolved (0 for a decline; call :meth:`next_decision` next), or -1 if
        the decision goes on."""
        n = int(self._core.choose(action))
        if n >= 0:  # resolved: the engine waits for next_decision()
            self._request = None
            self._replay.phase = ReplayPhase.RESOLVED  # logged by the core, handed over by _flush_log
            self._stale = True
        return n

    def run_until(self, policy: PreemptionPolicy, until: float = math.inf, *, max_decisions: int | None = None) -> int:
        self._flush_log()  # the core's resolves come first in the replay log
        n = super().run_until(policy, until, max_decisions=max_decisions)
        if self._core is not None:
            self._core.attach()  # nothing is pending now: the core follows
        return n

    def clone(self) -> StepwiseNativeSimulator:
        """An independent simulation in exactly this state (see :meth:`Simulator.clone`), with a decision core
        of its own at the same point of the decision in progress (the victims chosen so far)."""
        self._flush_log()
        new = super().clone()
        assert isinstance(new, StepwiseNativeSimulator)
        if self._core is not None:
            new._core = new._new_core()
            new._resume(self._progress())
        return new

    # The decision core's construction and progress, for copies (clone, pickling): what a subclass with another
    # core (PlanNativeSimulator) replaces.
    def _new_core(self) -> Any:
        from schedgym.sim import _engine

        assert self._core_args is not None
        return _engine.EnvCore(self._engine, *self._core_args)

    def _progress(self) -> Any:
        core = self._core
        return (core.chosen(), core.targets()) if core is not None else None

    def _resume(self, progress: Any) -> None:
        if self._core.attach() and progress is not None and progress[0]:
            self._core.restore(*progress)

    def note_native_step(self) -> None:
        """Record that the decision core resolved the request and advanced to the next one by itself (a
        vector environment's batch step, ``schedgym/sim/native/batch.cpp``): what :meth:`choose` and
        :meth:`next_decision` record when they do it."""
        self._request = None
        self._note_advanced(math.inf)

    def decision_jobs(self, ids: Sequence[int]) -> list[Job]:
        """The records of jobs ``ids``, brought up to date with the engine (as a request's are)."""
        jobs = self._jobs
        if ids:
            self._sync(list(dict.fromkeys(ids)))
        return [jobs[i] for i in ids]

    def _flush_log(self) -> None:
        if self._core is not None:
            self._replay.log.extend(self._core.take_log())

    def advance(self, until: float = math.inf) -> PreemptionRequest | None:
        if self._engine.pending >= 0:
            raise IllegalDecisionError("advance() called while a decision is pending; call resolve() first")
        self._flush_log()
        return super().advance(until)

    def resolve(self, plan: PreemptionPlan) -> None:
        self._flush_log()
        super().resolve(plan)
        if self._core is not None:
            self._core.attach()  # nothing is pending now: the core follows

    def run(self, policy: PreemptionPolicy) -> RunResult:
        self._flush_log()
        return super().run(policy)

    def __getstate__(self) -> dict[str, Any]:
        self._flush_log()
        state = super().__getstate__()
        state.pop("_core", None)
        state["_core_progress"] = self._progress()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        progress = state.pop("_core_progress")
        super().__setstate__(state)
        if self._core_args is not None:
            self._core = self._new_core()
            self._resume(progress)


class PlanNativeSimulator(StepwiseNativeSimulator):
    """A native simulation whose requests are decided plan by plan in C++: the protocol of
    :mod:`schedgym.decision.plan_mode` (``PlanCore``, ``schedgym/sim/native/plan_core.cpp``) on the engine's state,
    with the same options, masks and observations (version 2).
    :class:`~schedgym.decision.backend.NativePlanBackend` drives it.

    After :meth:`begin_plan_decisions`, drive it with :meth:`next_decision` and :meth:`choose` (which always
    resolves the request); it clones and pickles by replay as :class:`StepwiseNativeSimulator` does (a plan
    decision has no progress of its own: the copy's core begins deciding the same pending request).
    """

    def begin_plan_decisions(
        self,
        rules: Sequence[tuple[str, str, Mapping[str, Any]]],
        names: tuple[Sequence[str], Sequence[str], Sequence[str]],
        max_plans: int,
        queue_rows: int,
        estimate: np.ndarray,
        scale: Sequence[float],
        total: Sequence[float],
        scales: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        max_subset: int,
    ) -> Any:
        """Build the plan decision core and return it. ``rules``: ``(source name, native rule name, parameters)``
        of each rule whose plans are offered, in order; ``names``: the declared feature names (head, queue row,
        plan row), which must be those the core computes; ``estimate``, ``scale``, ``total`` and ``scales`` (the
        running medians, ``WorkloadScales.columns()``) as the Python observer has them; ``max_subset``:
        ``MAX_SUBSET_CANDIDATES``. Raises ValueError if the declaration and this build disagree."""
        from schedgym.sim import _engine

        built = _engine.plan_feature_names([source for source, _, _ in rules])
        declared = tuple(tuple(group) for group in names)
        if declared != tuple(tuple(group) for group in built):
            raise ValueError(
                "The plan mode's observation layout declared in schedgym.decision.features differs from the one "
                f"this native engine computes: declared {declared}, built {tuple(built)}"
            )
        args = (
            [(native, dict(params)) for _, native, params in rules],
            int(max_plans),
            int(queue_rows),
            np.ascontiguousarray(estimate, dtype=np.float64),
            np.ascontiguousarray(scale, dtype=np.float64),
            np.ascontiguousarray(total, dtype=np.float64),
            *(np.ascontiguousarray(a, dtype=np.float64) for a in scales),
            int(max_subset),
        )
        self._core_args = args
        self._core = self._new_core()
        return self._core

    def _new_core(self) -> Any:
        from schedgym.sim import _engine

        assert self._core_args is not None
        # Python's sum() of floats is compensated from 3.12 on; the core sums as the Python running it does.
        plan_core: Any = _engine.PlanCore  # (its arguments are the stored ones: the stub cannot check a tuple of them)
        return plan_core(self._engine, *self._core_args, COMPENSATED_SUM)

    def _progress(self) -> Any:
        return None

    def _resume(self, progress: Any) -> None:
        self._core.attach()


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


__all__ = [
    "ENGINE_VERSION",
    "NativeSimulator",
    "PlanNativeSimulator",
    "ReplayPhase",
    "ReplayState",
    "StepwiseNativeSimulator",
]

"""The simulator's rules (:class:`SimConfig`) and its API (:class:`Simulator`), on either engine.

A simulation is driven step-wise so that the same engine serves an in-process rule and a Gymnasium agent::

    sim = Simulator(cluster, jobs, SimConfig())
    while (request := sim.advance()) is not None:   # a TE job needs a preemption decision
        sim.resolve(policy.decide(request))
    result = sim.result()

Two engines implement it with identical results: the compiled native engine (``schedgym/sim/native/``,
default) and the Python engine (:mod:`schedgym.sim.python_engine`), the readable specification that the
native one is tested against. :func:`make_simulator` (or ``Simulator(...)``, which calls the same choice) builds
the one that :func:`select_engine` picks; :func:`engine_class` names its class.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from schedgym.errors import ConfigError, IllegalDecisionError
from schedgym.limits import MAX_PREEMPTIONS, check_time
from schedgym.sim.policy import PreemptionPolicy, QueueDiscipline

if TYPE_CHECKING:
    from schedgym.sim.cluster import ClusterSpec
    from schedgym.sim.job import Job, JobSpec
    from schedgym.sim.metrics import RunResult, Segment
    from schedgym.sim.policy import PreemptionPlan, PreemptionRequest

ENGINES = ("native", "python")
ENV_VAR = "SCHEDGYM_ENGINE"


def is_number(value: object) -> bool:
    """Whether ``value`` is a finite real number: an int, a float or a numpy scalar of either, not a bool (nor
    a string, None, an array...). The type check of every number field of the configuration dataclasses
    (:class:`SimConfig`, :class:`~schedgym.workloads.synthetic.SyntheticConfig`,
    :class:`~schedgym.envs.EnvConfig`)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except (OverflowError, TypeError, ValueError):  # a Real that float() cannot take
        return False


def is_integer(value: object) -> TypeGuard[int | np.integer]:
    """Whether ``value`` is an integer: an int or a numpy integer, not a bool (nor 2.0 or 2.5). The type check
    of every count field of the configuration dataclasses."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Rules of the simulator that are not part of the workload or the cluster.

    Attributes:
        queue: queue discipline, ``"fifo"`` or ``"priority"``.
        backfill: if True (default, as Kubernetes), a job that does not fit is skipped and later jobs may
            start; if False, the queue blocks at the first job that does not fit (strict head of line).
        placement: ``"best-fit"`` (least leftover GPUs, then CPUs, then memory; ties by node order) or
            ``"first-fit"`` (lowest node index that fits).
        max_preemptions: the cap P: a job preempted this many times is no longer a candidate (an integer
            from 0 to :data:`MAX_PREEMPTIONS`).
        restart_overhead: seconds charged at the start of every run that follows a preemption (no
            progress is made during it), for every job that gives none of its own
            (``JobSpec.restart_overhead``, the trace column ``restart_overhead``); a number from 0 to
            :data:`~schedgym.limits.MAX_TIME`.
        engine: ``"native"`` (the compiled engine), ``"python"`` (the reference), or None: the environment
            variable ``SCHEDGYM_ENGINE``, else native, falling back to Python with one warning if the native
            module cannot be imported. Both give the same results.

    Construction checks every field, whichever front end gave it (the CLI's options, ``sweep --set``, the
    environment's ``sim``, Python): a wrong type (a bool is not a number, 2.5 not an int), a value that is not
    finite or out of range raises :class:`~schedgym.errors.ConfigError` stating the expected and the given
    value. Numpy scalars are taken and stored as Python numbers.
    """

    queue: QueueDiscipline | str = QueueDiscipline.PRIORITY
    backfill: bool = True
    placement: str = "best-fit"
    max_preemptions: int = 1
    restart_overhead: float = 0.0
    engine: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "queue", QueueDiscipline(self.queue))
        except (TypeError, ValueError):
            raise ConfigError(f"Expected queue in {[q.value for q in QueueDiscipline]}, got {self.queue!r}") from None
        if not isinstance(self.placement, str) or self.placement not in ("best-fit", "first-fit"):
            raise ConfigError(f"Expected placement 'best-fit' or 'first-fit', got {self.placement!r}")
        if not is_integer(self.max_preemptions):
            raise ConfigError(f"Expected max_preemptions to be an int, got {self.max_preemptions!r}")
        if self.max_preemptions < 0:
            raise ConfigError(f"Expected max_preemptions >= 0, got {self.max_preemptions!r}")
        if self.max_preemptions > MAX_PREEMPTIONS:
            raise ConfigError(
                f"Expected max_preemptions <= {MAX_PREEMPTIONS:,} (schedgym.limits.MAX_PREEMPTIONS), "
                f"got {self.max_preemptions!r}"
            )
        if type(self.max_preemptions) is not int:  # a numpy integer: stored as the int it is
            object.__setattr__(self, "max_preemptions", int(self.max_preemptions))
        overhead = self.restart_overhead
        if not is_number(overhead) or overhead < 0:
            raise ConfigError(f"Expected restart_overhead to be a finite number >= 0, got {overhead!r}")
        problem = check_time(float(overhead))
        if problem is not None:
            raise ConfigError(f"Expected restart_overhead {problem.removeprefix('expected ')}, got {overhead!r}")
        if type(overhead) not in (int, float):  # a numpy scalar: stored as the Python number it is
            object.__setattr__(self, "restart_overhead", float(overhead))
        if not isinstance(self.backfill, (bool, np.bool_)):
            raise ConfigError(f"Expected backfill to be a bool, got {self.backfill!r}")
        object.__setattr__(self, "backfill", bool(self.backfill))
        if self.engine is not None and (not isinstance(self.engine, str) or self.engine not in ENGINES):
            raise ConfigError(f"Expected engine in {list(ENGINES)} or None, got {self.engine!r}")


def native_available() -> bool:
    """True if the compiled engine imports and matches this version of the Python package."""
    from schedgym._optional import import_optional

    _engine = import_optional("schedgym.sim._engine")
    if _engine is None:
        return False
    from schedgym.sim.native_engine import ENGINE_VERSION

    return hasattr(_engine, "Engine") and getattr(_engine, "ENGINE_VERSION", None) == ENGINE_VERSION


_warned = False


def select_engine(requested: str | None = None) -> str:
    """The engine a simulation runs on: ``requested``, else ``$SCHEDGYM_ENGINE``, else native.

    Asked for by name (argument or environment variable), an engine that cannot run is an error. By default,
    a native module that cannot be imported gives the Python engine and one warning per process.
    """
    global _warned
    name = requested if requested is not None else os.environ.get(ENV_VAR) or None
    if name is not None and name not in ENGINES:
        raise ConfigError(f"Expected engine ({ENV_VAR}) in {list(ENGINES)}, got {name!r}")
    if name == "python":
        return "python"
    if native_available():
        return "native"
    if name == "native":
        raise ConfigError(
            "The native engine was asked for but schedgym.sim._engine cannot be imported; reinstall with a C++ "
            "compiler available (pip install .), or use engine='python'"
        )
    if not _warned:
        _warned = True
        warnings.warn(
            "schedgym's native engine (schedgym.sim._engine) is not available; running the Python engine, "
            "which gives the same results more slowly. Reinstall with a C++ compiler (pip install .) to build it.",
            RuntimeWarning,
            stacklevel=3,
        )
    return "python"


def engine_version(requested: str | None = None) -> str:
    """The engine :func:`select_engine` picks, with the compiled engine's version: ``"native 6"`` or
    ``"python"`` (a run folder records it: results kept by one engine are resumed by the same)."""
    name = select_engine(requested)
    if name != "native":
        return name
    from schedgym.sim.native_engine import ENGINE_VERSION

    return f"native {ENGINE_VERSION}"


def engine_class(config: SimConfig | None = None) -> type[Simulator]:
    """The engine class that runs a simulation under ``config``: :class:`~schedgym.sim.native_engine.NativeSimulator`
    or :class:`~schedgym.sim.python_engine.PythonSimulator`, as :func:`select_engine` picks from ``config.engine``
    (else ``$SCHEDGYM_ENGINE``, else native). The one place where the engine is chosen."""
    if config is not None and not isinstance(config, SimConfig):
        raise ConfigError(f"Expected config to be a SimConfig, got {config!r}")
    if select_engine(config.engine if config is not None else None) == "native":
        from schedgym.sim.native_engine import NativeSimulator

        return NativeSimulator
    from schedgym.sim.python_engine import PythonSimulator

    return PythonSimulator


def make_simulator(
    cluster: ClusterSpec, jobs: Sequence[JobSpec], config: SimConfig | None = None, *, preemption: bool = True
) -> Simulator:
    """A simulation of ``jobs`` on ``cluster`` under ``config`` on the engine :func:`engine_class` picks (see
    :class:`Simulator` for the arguments). ``Simulator(cluster, jobs, config)`` gives the same."""
    return engine_class(config)(cluster, jobs, config, preemption=preemption)


class Simulator:
    """One simulation of ``jobs`` on ``cluster`` under ``config``, on the engine ``config.engine`` selects.

    Args:
        cluster: the nodes.
        jobs: the workload, as JobSpecs or as a :class:`~schedgym.sim.job.JobTable` (``Workload.table``: the
            native engine is then built from its columns, without a JobSpec per job); job ids must be unique
            and every job must fit the cluster.
        config: simulator rules.
        preemption: if False, TE jobs are never offered for preemption and :meth:`advance` runs to the end
            in one call (used for the non-preemptive baselines, and faster).

    Both engines offer: :meth:`advance` (run to the next preemption request, or None at the end or at a
    time ``until``), :meth:`resolve` (answer it with a :class:`~schedgym.sim.policy.PreemptionPlan`),
    :meth:`run`, :meth:`run_until`, :meth:`result`, :meth:`clone` (an independent copy in the same state) and
    :meth:`accrued_at`; the state ``now``, ``jobs`` (:class:`~schedgym.sim.job.Job` records), ``avail``, ``held``,
    ``unused``, ``capacity``, ``accrued``, ``accrued_bounded``, ``n_preemptions``, ``n_requests``,
    ``segments``, ``queue_lengths``, ``done``, ``pending_request``, ``candidates()``, ``running_on(node)``;
    and ``engine`` (``"native"`` or ``"python"``).
    """

    engine: str = ""
    cluster: ClusterSpec
    config: SimConfig
    preemption: bool
    capacity: np.ndarray
    """Per-node capacity, (n_nodes, 3): GPUs, CPUs, memory (read-only)."""

    if TYPE_CHECKING:
        # The state both engines offer, declared for the type checker: attributes on the Python engine (which
        # redeclares them as such), properties on the native one. Read-only here: only the engines change them.
        @property
        def now(self) -> float:
            """The simulation clock (seconds)."""

        @property
        def jobs(self) -> list[Job]:
            """The per-job records, by job index, up to date."""

        @property
        def avail(self) -> np.ndarray:
            """Per-node resources anyone may use, (n_nodes, 3)."""

        @property
        def held(self) -> np.ndarray:
            """Per-node free resources set aside for reserved TE jobs, (n_nodes, 3)."""

        @property
        def accrued(self) -> list[float]:
            """Slowdown accrued so far per class (TE, BE)."""

        @property
        def accrued_bounded(self) -> list[float]:
            """Bounded slowdown accrued so far per class (TE, BE)."""

        @property
        def n_preemptions(self) -> int:
            """Preemptions so far."""

        @property
        def n_requests(self) -> int:
            """Preemption requests made to the policy so far."""

        @property
        def segments(self) -> Sequence[Segment]:
            """The run segments so far."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Simulator:
        # Simulator(...) itself builds the engine engine_class() picks (as make_simulator does); an engine's class
        # builds itself. Any arguments: unpickling calls cls.__new__(cls) with none.
        if cls is Simulator:
            cls = engine_class(kwargs.get("config", args[2] if len(args) > 2 else None))
        return super().__new__(cls)

    def __init__(  # pragma: no cover - the engines define it
        self, cluster: ClusterSpec, jobs: Sequence[JobSpec], config: SimConfig | None = None, *, preemption: bool = True
    ) -> None:
        raise NotImplementedError

    def _set_up(self, cluster: ClusterSpec, config: SimConfig | None, preemption: bool) -> None:
        """What both engines keep the same way: the cluster, the rules, the capacities."""
        self.cluster = cluster
        self.config = config if config is not None else SimConfig()
        self.preemption = preemption
        self.capacity = cluster.capacity
        self.capacity.setflags(write=False)  # shared with every request: nobody may change it
        self._capacity_rows = self.capacity.tolist()

    # ------------------------------------------------------------------ what each engine defines
    def advance(self, until: float = math.inf) -> PreemptionRequest | None:  # pragma: no cover - the engines define it
        """Run until a TE job needs a preemption decision (returned) or the workload drains (None); or stop
        (None, not :attr:`done`) before processing events later than ``until``. Stopping changes nothing: a
        later ``advance()`` goes on as if it had not stopped."""
        raise NotImplementedError

    def resolve(self, plan: PreemptionPlan) -> None:  # pragma: no cover - the engines define it
        """Apply the answer to the pending request (see :class:`~schedgym.sim.policy.PreemptionPlan`)."""
        raise NotImplementedError

    def result(self) -> RunResult:  # pragma: no cover - the engines define it
        """Per-job records, run segments and aggregates; only valid once the workload has drained."""
        raise NotImplementedError

    @property
    def done(self) -> bool:  # pragma: no cover - the engines define it
        """Whether every job has completed."""
        raise NotImplementedError

    @property
    def pending_request(self) -> PreemptionRequest | None:  # pragma: no cover - the engines define it
        """The request waiting for :meth:`resolve`, or None."""
        raise NotImplementedError

    @property
    def unused(self) -> np.ndarray:  # pragma: no cover - the engines define it
        """Per-node resources that no RUNNING or PREEMPTING job occupies (a fresh array: ``avail + held``)."""
        raise NotImplementedError

    @property
    def queue_lengths(self) -> tuple[int, int]:  # pragma: no cover - the engines define it
        """(TE, BE) jobs pending, reserved TE jobs included."""
        raise NotImplementedError

    def candidates(self) -> dict[int, list[Job]]:  # pragma: no cover - the engines define it
        """Preemptible jobs per node (RUNNING, BE, fewer than max_preemptions preemptions), by job index."""
        raise NotImplementedError

    def running_on(self, node: int) -> frozenset[int]:  # pragma: no cover - the engines define it
        """The indices of the jobs running on ``node``."""
        raise NotImplementedError

    def queued(self, limit: int) -> tuple[list[Job], list[Job]]:
        """(TE, BE): the up-to-``limit`` oldest jobs of each class waiting in the queues now, each list in queue
        order within its class (submit time, then job index: the queue key without its class part, under either
        queue discipline), their records up to date (on the native engine, just those records).

        Waiting means PENDING, submitted and not reserved. A TE job whose plan was accepted has left its queue
        (:class:`~schedgym.sim.job.Job` ``nodes`` set while PENDING: it waits for its victims' grace periods)
        and is not listed; a preempted job is back in its queue, with its own submit time, once its grace
        period is over. The TE job of a pending request (between :meth:`advance` returning it and
        :meth:`resolve`) is still in its queue on both engines, so it is listed, as are TE jobs the pass looked
        past; so is it while the environment's native decision core has a decision in progress (the victims
        chosen so far are preempted only when the decision is resolved). Changes nothing in the simulation.

        ``limit`` is an integer >= 0 (:class:`~schedgym.errors.ConfigError` otherwise). It takes
        O(shapes + limit * log(shapes + limit)) per class (a walk of the per-shape heaps, no sort of the queues).
        Observation version 2's queue rows (:mod:`schedgym.decision.scalefree`)."""
        if not is_integer(limit) or limit < 0:
            raise ConfigError(f"Expected limit to be an integer >= 0, got {limit!r}")
        te, be = self._queued(int(limit))
        return te, be

    def _queued(self, limit: int) -> tuple[list[Job], list[Job]]:  # pragma: no cover - the engines define it
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def run(self, policy: PreemptionPolicy) -> RunResult:
        """Drive the simulation to the end with ``policy`` answering every request."""
        while (request := self.advance()) is not None:
            self.resolve(policy.decide(request))
        return self.result()

    def run_until(self, policy: PreemptionPolicy, until: float = math.inf, *, max_decisions: int | None = None) -> int:
        """Drive the simulation with ``policy`` answering requests until the workload drains, or the clock would
        pass ``until`` (as :meth:`advance` stops there), or ``policy`` has answered ``max_decisions`` requests
        (it then stops right after the last one); return the number of requests answered.

        A stop changes nothing: driving on afterwards gives what one longer run would have given.
        """
        if max_decisions is not None and max_decisions < 0:
            raise ConfigError(f"Expected max_decisions >= 0 or None, got {max_decisions}")
        n = 0
        while max_decisions is None or n < max_decisions:
            request = self.advance(until)
            if request is None:
                break
            self.resolve(policy.decide(request))
            n += 1
        return n

    def accrued_at(self, t: float, *, bounded: bool = False) -> list[float]:
        """The slowdown (``bounded``: bounded slowdown) accrued per class (TE, BE) by time ``t`` if no event
        happens before ``t``: :attr:`accrued` plus what accrues at the current rates from ``now`` to ``t``.
        Right after ``advance(until=t)`` returned None, that is what :attr:`accrued` would read at ``t``, which
        puts simulations stopped at one time on one footing. ``t`` must not be before ``now``."""
        now = self.now
        if not t >= now:
            raise IllegalDecisionError(f"Expected t >= now ({now!r}), got {t!r}")
        acc = list(self.accrued_bounded if bounded else self.accrued)
        dt = t - now
        if dt > 0:  # the engines' own accrual step (process_events_at)
            rate = self._rates(bounded)
            acc[0] += rate[0] * dt
            acc[1] += rate[1] * dt
        return acc

    def _rates(self, bounded: bool) -> tuple[float, float]:  # pragma: no cover - the engines define it
        """What accrued (``bounded``: accrued_bounded) grows by per second until the next event, (TE, BE)."""
        raise NotImplementedError

    def clone(self) -> Simulator:  # pragma: no cover - the engines define it
        """An independent simulation in exactly this state: the pending request (rebuilt on the copy's job
        records) or decision in progress, the counters, the accrued slowdown, the run segments. Driving the
        copy to the end gives what driving this one to the end the same way gives, and driving either leaves
        the other as it was. Much cheaper than pickling (see docs/engines.md)."""
        raise NotImplementedError


__all__ = [
    "ENGINES",
    "MAX_PREEMPTIONS",
    "SimConfig",
    "Simulator",
    "engine_class",
    "engine_version",
    "is_integer",
    "is_number",
    "make_simulator",
    "native_available",
    "select_engine",
]

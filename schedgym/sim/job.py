"""Jobs: the immutable description read from a trace (:class:`JobSpec`) and the simulator's
mutable runtime record (:class:`Job`)."""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, overload

import numpy as np

from schedgym.errors import ConfigError
from schedgym.limits import MAX_AMOUNT, MAX_NODES, MAX_TIME, MIN_DURATION
from schedgym.sim.resources import EPS, fits_on

# Order of the resource axes everywhere in schedgym (arrays of shape (..., 3)).
RESOURCES: tuple[str, str, str] = ("gpus", "cpus", "mem_gb")

# Seconds a preempted job keeps its resources when its trace row (or its constructor call) gives none: the
# order of the published preemption costs (7-62 s, docs/workloads.md). The trace reader uses the same value.
DEFAULT_GRACE_PERIOD = 30.0


class JobClass(enum.IntEnum):
    """Trial-and-error jobs are watched by a person; best-effort jobs are long training runs.

    The integer value is the rank in the ``priority`` queue discipline (TE first).
    """

    TE = 0
    BE = 1


class JobState(enum.IntEnum):
    """Lifecycle: NOT_SUBMITTED -> PENDING -> RUNNING -> (PREEMPTING -> PENDING)* -> COMPLETED."""

    NOT_SUBMITTED = 0
    PENDING = 1
    RUNNING = 2
    PREEMPTING = 3
    COMPLETED = 4


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job as submitted: the row of a trace. Never modified by the simulator.

    ``gpus``, ``cpus`` and ``mem_gb`` are the job's total demand; a gang job (``gang_size = k > 1``) holds
    ``1/k`` of it on each of ``k`` distinct nodes (the trace format's ``nodes`` column).

    Construction checks every field with the trace reader's rules (a :class:`~schedgym.errors.ConfigError`
    names job, field and value): ``job_id`` a non-empty string; ``submit_time``, ``gpus``, ``cpus``,
    ``mem_gb`` and ``grace_period`` finite and >= 0, and ``duration`` finite and > 0; at least one resource
    requested; ``gang_size`` an integer >= 1; ``job_class`` a :class:`JobClass` (or its value 0 or 1);
    ``restart_overhead`` None or finite and >= 0.
    Numbers of other types (``int``, numpy scalars) are stored as Python ``float`` (``int`` for
    ``gang_size``); booleans and strings are rejected.
    """

    job_id: str
    submit_time: float
    duration: float
    gpus: float
    cpus: float = 0.0
    mem_gb: float = 0.0
    gang_size: int = 1
    job_class: JobClass = JobClass.BE
    grace_period: float = DEFAULT_GRACE_PERIOD
    restart_overhead: float | None = None
    """seconds charged at the start of every run after a preemption (held resources, no progress); None: the
    simulator's ``SimConfig.restart_overhead``"""

    def __post_init__(self) -> None:
        # Runs for every job (and every dataclasses.replace), so the common case -- Python floats, an int
        # gang size, a JobClass -- costs one type test and one chained comparison per field.
        job_id = self.job_id
        if type(job_id) is not str or not job_id.strip():
            if not (isinstance(job_id, str) and job_id.strip()):
                raise ConfigError(f"Expected job_id to be a non-empty string, got {job_id!r}")
            object.__setattr__(self, "job_id", str(job_id))  # a str subclass such as numpy.str_
        # Upper bounds (schedgym.limits): the range in which the simulator's float arithmetic stays exact enough.
        v = self.submit_time
        if type(v) is not float or not 0.0 <= v <= MAX_TIME:
            _set_float(self, "submit_time", v, 0.0, MAX_TIME)
        v = self.duration
        if type(v) is not float or not MIN_DURATION <= v <= MAX_TIME:
            _set_float(self, "duration", v, MIN_DURATION, MAX_TIME)
        v = self.gpus
        if type(v) is not float or not 0.0 <= v <= MAX_AMOUNT:
            _set_float(self, "gpus", v, 0.0, MAX_AMOUNT)
        v = self.cpus
        if type(v) is not float or not 0.0 <= v <= MAX_AMOUNT:
            _set_float(self, "cpus", v, 0.0, MAX_AMOUNT)
        v = self.mem_gb
        if type(v) is not float or not 0.0 <= v <= MAX_AMOUNT:
            _set_float(self, "mem_gb", v, 0.0, MAX_AMOUNT)
        v = self.grace_period
        if type(v) is not float or not 0.0 <= v <= MAX_TIME:
            _set_float(self, "grace_period", v, 0.0, MAX_TIME)
        r = self.restart_overhead
        if r is not None and (type(r) is not float or not 0.0 <= r <= MAX_TIME):
            _set_float(self, "restart_overhead", r, 0.0, MAX_TIME)
        if self.gpus + self.cpus + self.mem_gb <= 0.0:
            raise ConfigError(f"Job {self.job_id!r} requests no resources (gpus, cpus and mem_gb are all 0)")
        k = self.gang_size
        if type(k) is not int or not 1 <= k <= MAX_NODES:
            if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
                raise ConfigError(f"Job {self.job_id!r}: expected gang_size to be an integer >= 1, got {k!r}")
            if k < 1:
                raise ConfigError(f"Job {self.job_id!r}: expected gang_size >= 1, got {k!r}")
            if k > MAX_NODES:
                raise ConfigError(
                    f"Job {self.job_id!r}: expected gang_size <= {MAX_NODES:,} (schedgym.limits.MAX_NODES), got {k!r}"
                )
            object.__setattr__(self, "gang_size", int(k))
        c = self.job_class
        if type(c) is not JobClass:
            if isinstance(c, (bool, np.bool_)) or not isinstance(c, numbers.Integral) or c not in (0, 1):
                raise ConfigError(
                    f"Job {self.job_id!r}: expected job_class to be JobClass.TE or JobClass.BE (or 0 or 1), got {c!r}"
                )
            object.__setattr__(self, "job_class", JobClass(int(c)))

    @property
    def member_demand(self) -> tuple[float, float, float]:
        """Demand on each node the job occupies."""
        k = self.gang_size
        return (self.gpus / k, self.cpus / k, self.mem_gb / k)


def _set_float(spec: JobSpec, field: str, value: object, lo: float, hi: float) -> None:
    """The slow path of :meth:`JobSpec.__post_init__` for one float field, whose range is ``[lo, hi]`` (``> 0``
    instead of ``>= 0`` for a duration): reject ``value`` with a message, or store it as a Python float (it was
    an int or a numpy scalar)."""
    object.__setattr__(spec, field, _float_value(spec.job_id, field, value, lo, hi))


def _float_value(job_id: str, field: str, value: object, lo: float, hi: float) -> float:
    """``value`` as a Python float if it is a number in ``[lo, hi]``, else JobSpec's ConfigError for job
    ``job_id``'s ``field``."""
    bound = f">= {lo:g}" if lo > 0.0 else ">= 0"
    if isinstance(value, bool) or not (
        isinstance(value, (float, int, np.floating, np.integer))
        or (isinstance(value, numbers.Real) and not isinstance(value, np.bool_))
    ):
        raise ConfigError(f"Job {job_id!r}: expected {field} to be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"Job {job_id!r}: expected {field} {bound} (finite), got {v!r}")
    if not v >= lo:
        limit = " s (schedgym.limits.MIN_DURATION)" if lo > 0.0 else ""
        raise ConfigError(f"Job {job_id!r}: expected {field} {bound}{limit}, got {v!r}")
    if not v <= hi:
        name, unit = ("MAX_TIME", " s") if hi == MAX_TIME else ("MAX_AMOUNT", "")
        raise ConfigError(f"Job {job_id!r}: expected {field} <= {hi:g}{unit} (schedgym.limits.{name}), got {v!r}")
    return v


@dataclass(slots=True, eq=False)
class Job:
    """Runtime state of one job inside a :class:`~schedgym.sim.simulator.Simulator`.

    Policies receive these objects in a :class:`~schedgym.sim.policy.PreemptionRequest`; they must treat
    them as read-only.
    """

    idx: int
    spec: JobSpec
    member: np.ndarray  # per-node demand, shape (3,)
    demand: tuple[float, float, float]  # the same as plain floats, for cheap scalar arithmetic in policies
    shape: int  # id of (class, per-node demand, nodes): jobs of one shape fit or fail together
    state: JobState = JobState.NOT_SUBMITTED
    remaining: float = 0.0  # seconds of work left, excluding restart overhead
    preemptions: int = 0
    nodes: tuple[int, ...] = ()  # where it runs, or where it is reserved while waiting for victims
    run_start: float = float("nan")  # start of the current run segment
    run_overhead: float = 0.0  # restart overhead charged at the start of the current segment
    first_start: float = float("nan")
    completion: float = float("nan")
    epoch: int = 0  # bumped whenever the job stops, so stale completion events are ignored
    grace_time: float = 0.0  # total seconds spent in PREEMPTING
    overhead_time: float = 0.0  # total seconds spent paying restart overhead
    run_time: float = 0.0  # total seconds spent RUNNING (progress + overhead)
    owed: np.ndarray | None = None  # while reserved: per chosen node, what its victims still have to release
    preempted_for: int = -1  # while PREEMPTING: the TE job its resources go to first

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def job_class(self) -> JobClass:
        return self.spec.job_class

    @property
    def gang_size(self) -> int:
        """Number of distinct nodes the job runs on (1 unless it is a gang)."""
        return self.spec.gang_size

    @property
    def grace_period(self) -> float:
        return self.spec.grace_period

    @property
    def duration(self) -> float:
        return self.spec.duration

    @property
    def submit_time(self) -> float:
        return self.spec.submit_time

    def copy(self) -> Job:
        """An independent record in the same state (``spec`` and the read-only ``member`` are shared)."""
        job = Job(*_job_fields(self))  # positional, in field order: a third of the cost of copy.copy
        if job.owed is not None:
            job.owed = job.owed.copy()  # updated in place while the job is reserved
        return job


_job_fields = attrgetter(*(f.name for f in fields(Job)))


JobColumns = dict[str, Any]
"""A workload as columns (see :func:`workload_columns`)."""

_FIELDS = ("job_id", "submit_time", "duration", "gpus", "cpus", "mem_gb", "gang_size", "job_class", "grace_period")
_FLOAT_FIELDS = ("submit_time", "duration", "gpus", "cpus", "mem_gb", "grace_period")
_INT64_MAX = int(np.iinfo(np.int64).max)
_CLASSES = (JobClass.TE, JobClass.BE)
_BOOLS = (bool, np.bool_)


class JobTable(Sequence[JobSpec]):
    """A workload's jobs as columns: a read-only sequence of :class:`JobSpec` whose specs are made only when
    someone reads them.

    Both engines accept it wherever they accept a sequence of JobSpec; the native engine is built from its
    columns without making a single per-job Python object, which is what keeps an environment's reset cheap.

    ``JobTable(job_id=..., submit_time=..., duration=..., gpus=..., ...)`` takes a sequence of ids and, for
    each other field of :class:`JobSpec`, one value per job (a numpy array or a sequence) or one value for
    all jobs (the optional fields default to JobSpec's defaults). ``restart_overhead`` is None (no job gives
    one) or one value per job, None or a number (in a numeric array, NaN stands for None). It checks them as
    building the JobSpecs one by one would: the same :class:`~schedgym.errors.ConfigError` for the same first
    job (JobSpec itself raises it), and the same stored values (Python floats and ints, JobClass members),
    only vectorised.
    :meth:`from_specs` wraps existing JobSpecs instead.

    Reading one job (``table[i]``) makes just that JobSpec; iterating, slicing (a tuple) or :attr:`specs`
    makes them all, once.
    """

    __slots__ = ("__weakref__", "_columns", "_duplicate", "_specs")
    _columns: JobColumns | None
    _duplicate: int | None
    _specs: tuple[JobSpec, ...] | None

    def __init__(
        self,
        *,
        job_id: Sequence[str],
        submit_time: Any,
        duration: Any,
        gpus: Any,
        cpus: Any = 0.0,
        mem_gb: Any = 0.0,
        gang_size: Any = 1,
        job_class: Any = JobClass.BE,
        grace_period: Any = DEFAULT_GRACE_PERIOD,
        restart_overhead: Any = None,
    ) -> None:
        if isinstance(job_id, (str, bytes)) or not isinstance(job_id, (Sequence, np.ndarray)):
            raise ConfigError(f"Expected job_id to be a sequence of strings (one per job), got {type(job_id).__name__}")
        ids = job_id if type(job_id) is tuple else tuple(job_id)
        n = len(ids)
        values = (submit_time, duration, gpus, cpus, mem_gb, gang_size, job_class, grace_period)
        given = dict(zip(_FIELDS[1:], values, strict=True))
        kinds: dict[str, str] = {}
        arrays: dict[str, np.ndarray] = {}
        for name, value in given.items():
            try:
                a = np.asarray(value)
            except (TypeError, ValueError):  # ragged nested sequences: JobSpec will say what is wrong
                a = np.empty(len(value) if isinstance(value, Sequence) else 0, dtype=object)
            kind = a.dtype.kind
            if a.ndim == 0:  # one value for every job
                given[name] = [value] * n
                a = np.full(n, a)
            elif kind in "iuf" and not isinstance(value, np.ndarray) and any(isinstance(x, _BOOLS) for x in value):
                kind = "b"  # numpy reads [1, True] as numbers; JobSpec rejects the True
            if a.ndim != 1 or len(a) != n:
                raise ConfigError(f"Expected {name} to have one value per job ({n}), got shape {np.shape(a)}")
            arrays[name], kinds[name] = a, kind
        restart, restart_given = _restart_column(restart_overhead, n)
        if n == 0 or not (
            all(kinds[name] in "iuf" for name in _FLOAT_FIELDS)
            and all(kinds[name] in "iu" for name in ("gang_size", "job_class"))
            and all(kinds[name] == "i" or int(arrays[name].max()) <= _INT64_MAX for name in ("gang_size", "job_class"))
        ):
            # Not plain numbers (bools, strings, objects), or no jobs: JobSpec accepts or rejects each value.
            self._set_specs(tuple(JobSpec(*row) for row in zip(ids, *given.values(), restart_given(), strict=True)))
            return
        floats = np.empty((len(_FLOAT_FIELDS), n))  # one row per float field, converted as float() converts
        for row, name in zip(floats, _FLOAT_FIELDS, strict=True):
            row[...] = arrays[name]
        gang, cls = arrays["gang_size"].astype(np.int64), arrays["job_class"].astype(np.int64)
        bad_id, duplicate = _check_ids(ids)
        first = min(bad_id, _first_invalid(floats, gang, cls), _first_invalid_restart(restart))
        if first < n:  # JobSpec names the problem, in its own words, from the values as given
            fields = (ids[first], *(values[first] for values in given.values()), restart_given()[first])
            JobSpec(*fields)
            raise AssertionError(f"job {first} failed the column checks but passed JobSpec's")  # pragma: no cover
        if duplicate < 0:  # str subclasses (numpy.str_): stored as str, as JobSpec does
            ids = tuple(str(x) for x in ids)
            duplicate = _first_duplicate(ids)
        self._columns = _make_columns(ids, floats, gang, cls, restart=restart)
        self._specs = None
        self._duplicate = duplicate

    @classmethod
    def _from_columns(
        cls,
        job_id: tuple[str, ...],
        floats: np.ndarray,
        gang_size: np.ndarray,
        job_class: np.ndarray,
        extremes: Extremes | None = None,
        member: np.ndarray | None = None,
        restart: np.ndarray | None = None,
    ) -> JobTable:
        """The table of columns already in its own layout: ``floats`` (float64, shape (6, n_jobs), one row per
        float field of JobSpec in its order), ``gang_size`` and ``job_class`` (int64), and ``restart`` (None, or
        float64 with NaN where a job gives no restart overhead), from now on the table's, checked as the
        constructor checks them but not copied. Invalid columns get the constructor's error. ``extremes``
        (their :func:`_extremes`) and ``member`` (the per-node demands, as :func:`_make_columns` computes them)
        save computing them again where they are known."""
        n = len(job_id)
        bad_id, duplicate = _check_ids(job_id)
        first = min(bad_id, _first_invalid(floats, gang_size, job_class, extremes), _first_invalid_restart(restart))
        if n == 0 or duplicate < 0 or first < n or (restart is not None and restart.shape != (n,)):
            s, d, g, c, m, gr = floats
            return cls(
                job_id=job_id, submit_time=s, duration=d, gpus=g, cpus=c, mem_gb=m, gang_size=gang_size,
                job_class=job_class, grace_period=gr, restart_overhead=restart,
            )  # fmt: skip
        table = cls.__new__(cls)
        table._columns = _make_columns(job_id, floats, gang_size, job_class, member, restart)
        table._specs = None
        table._duplicate = duplicate
        return table

    def _set_specs(self, specs: tuple[JobSpec, ...]) -> None:
        self._specs = specs
        self._columns = None
        self._duplicate = None

    @classmethod
    def from_specs(cls, specs: Sequence[JobSpec]) -> JobTable:
        """The table of existing JobSpecs (kept, not copied); its columns are read from them when first needed."""
        if isinstance(specs, JobTable):
            return specs
        table = cls.__new__(cls)
        table._set_specs(specs if type(specs) is tuple else tuple(specs))
        return table

    @property
    def columns(self) -> JobColumns:
        """The jobs as :func:`workload_columns` (shared, read-only arrays)."""
        if self._columns is None:
            assert self._specs is not None
            self._columns = workload_columns(self._specs)
        return self._columns

    @property
    def job_ids(self) -> tuple[str, ...]:
        """Every job's id (no JobSpec is made for them)."""
        if self._columns is None:
            assert self._specs is not None
            return tuple(s.job_id for s in self._specs)
        ids: tuple[str, ...] = self._columns["job_id"]
        return ids

    @property
    def specs(self) -> tuple[JobSpec, ...]:
        """Every job as a JobSpec (made on the first call)."""
        if self._specs is None:
            col = self._columns
            assert col is not None
            rows = zip(
                col["job_id"], col["submit"].tolist(), col["duration"].tolist(), col["gpus"].tolist(),
                col["cpus"].tolist(), col["mem_gb"].tolist(), col["gang"].tolist(),
                [_CLASSES[c] for c in col["job_class"].tolist()], col["grace"].tolist(), _restart_list(col),
                strict=True,
            )  # fmt: skip
            self._specs = tuple(JobSpec(*row) for row in rows)
        return self._specs

    def first_duplicate(self) -> int:
        """The index of the first job whose id an earlier job has, or ``len(self)`` if ids are unique."""
        if self._duplicate is None:
            self._duplicate = _first_duplicate(self.job_ids)
        return self._duplicate

    def __len__(self) -> int:
        return len(self._specs) if self._specs is not None else len(self.columns["job_id"])

    @overload
    def __getitem__(self, index: int) -> JobSpec: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[JobSpec, ...]: ...

    def __getitem__(self, index: int | slice) -> JobSpec | tuple[JobSpec, ...]:
        if self._specs is not None or isinstance(index, slice):
            return self.specs[index]
        col = self.columns
        i = range(len(col["job_id"]))[index]  # bounds and negative indices as a tuple's
        restart = col["restart"]
        r = None if restart is None or restart[i] != restart[i] else float(restart[i])
        return JobSpec(
            col["job_id"][i], float(col["submit"][i]), float(col["duration"][i]), float(col["gpus"][i]),
            float(col["cpus"][i]), float(col["mem_gb"][i]), int(col["gang"][i]), _CLASSES[int(col["job_class"][i])],
            float(col["grace"][i]), r,
        )  # fmt: skip

    def __iter__(self) -> Iterator[JobSpec]:
        return iter(self.specs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobTable):
            return NotImplemented
        a, b = self.columns, other.columns
        keys = ("submit", "duration", "gpus", "cpus", "mem_gb", "grace", "gang", "job_class")
        ra, rb = a["restart"], b["restart"]
        same_restart = (ra is None and rb is None) or (
            ra is not None and rb is not None and np.array_equal(ra, rb, equal_nan=True)
        )
        return a["job_id"] == b["job_id"] and same_restart and all(np.array_equal(a[k], b[k]) for k in keys)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JobTable(<{len(self)} jobs>)"

    def __getstate__(self) -> tuple[Any, ...]:
        return (self._columns if self._specs is None else None, self._specs)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._columns, self._specs = state
        self._duplicate = None


Extremes = tuple[list[float], list[float], float, int, int, int, int]
"""What :func:`_first_invalid` checks first: the smallest and the largest value of each float row, the smallest
total demand (gpus + cpus + mem_gb), and the smallest and largest gang size and class."""


def _extremes(floats: np.ndarray, gang: np.ndarray, cls: np.ndarray) -> Extremes:
    g, c, m = floats[2:5]
    # numpy's min and max propagate NaN (Python's do not): a NaN value makes its row's extremes NaN.
    return (
        floats.min(axis=1).tolist(), floats.max(axis=1).tolist(), float((g + c + m).min()), int(gang.min()),
        int(gang.max()), int(cls.min()), int(cls.max()),
    )  # fmt: skip


def _first_invalid(floats: np.ndarray, gang: np.ndarray, cls: np.ndarray, extremes: Extremes | None = None) -> int:
    """The first job whose numbers JobSpec would reject, or the number of jobs (``floats``: one row per field
    of ``_FLOAT_FIELDS``; ``extremes``: their :func:`_extremes`, if known)."""
    s, d, g, c, m, gr = floats
    # The common case, all valid, from a few extremes (a NaN fails every comparison).
    lo, hi, total_min, gang_min, gang_max, cls_min, cls_max = extremes or _extremes(floats, gang, cls)
    if (
        all(x >= 0.0 for x in lo)
        and hi[0] <= MAX_TIME  # submit_time
        and hi[1] <= MAX_TIME  # duration
        and hi[5] <= MAX_TIME  # grace_period
        and hi[2] <= MAX_AMOUNT  # gpus
        and hi[3] <= MAX_AMOUNT  # cpus
        and hi[4] <= MAX_AMOUNT  # mem_gb
        and lo[1] >= MIN_DURATION
        and total_min > 0.0
        and gang_min >= 1
        and gang_max <= MAX_NODES
        and 0 <= cls_min
        and cls_max <= 1
    ):
        return len(s)
    total = g + c + m  # in JobSpec's order
    ok = (
        (s >= 0.0) & (s <= MAX_TIME) & (d >= MIN_DURATION) & (d <= MAX_TIME) & (g >= 0.0) & (g <= MAX_AMOUNT)
        & (c >= 0.0) & (c <= MAX_AMOUNT) & (m >= 0.0) & (m <= MAX_AMOUNT) & (gr >= 0.0) & (gr <= MAX_TIME)
        & (total > 0.0) & (gang >= 1) & (gang <= MAX_NODES) & ((cls == 0) | (cls == 1))
    )  # fmt: skip
    return int(np.argmin(ok))


def _restart_column(value: Any, n: int) -> tuple[np.ndarray | None, Callable[[], list[Any]]]:
    """The ``restart_overhead`` argument of :class:`JobTable`: the column (None, or float64 with NaN where a
    job gives none; not checked) and a function giving the values as given, one per job (for JobSpec's
    messages and the slow path)."""
    if value is None:
        return None, lambda: [None] * n
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        if value.ndim != 1 or len(value) != n:
            raise ConfigError(f"Expected restart_overhead to have one value per job ({n}), got shape {value.shape}")
        column = np.array(value, dtype=np.float64)
        return column, lambda: [None if x != x else x for x in column.tolist()]
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        values = [value] * n  # one value for every job (JobSpec rejects a string)
    else:
        values = list(value)
        if len(values) != n:
            raise ConfigError(f"Expected restart_overhead to have one value per job ({n}), got {len(values)} values")
    column = np.empty(n)
    for i, x in enumerate(values):
        if x is None:
            column[i] = np.nan
        else:
            try:
                column[i] = _float_value("", "restart_overhead", x, 0.0, MAX_TIME)
            except ConfigError:
                column[i] = -1.0  # invalid: JobSpec names the problem (an explicit NaN included)
    return column, lambda: values


def _first_invalid_restart(restart: np.ndarray | None) -> int:
    """The first job whose restart overhead JobSpec would reject (NaN stands for none), or the number of jobs
    (for no column, a number above every job index: the callers take a minimum with the other checks)."""
    if restart is None:
        return _BIG
    bad = ~(np.isnan(restart) | ((restart >= 0.0) & (restart <= MAX_TIME)))
    return int(np.argmax(bad)) if bad.any() else len(restart)


_BIG = 2**62


def _restart_list(columns: JobColumns) -> list[float | None]:
    """The restart overhead of every job as JobSpec holds it (None for none)."""
    restart = columns["restart"]
    if restart is None:
        return [None] * len(columns["job_id"])
    return [None if x != x else x for x in restart.tolist()]


# The last ids checked and the result: a synthetic workload's ids are one cached tuple per size, checked once.
_checked_ids: tuple[tuple[Any, ...], int, int] = ((), 0, 0)


def _check_ids(ids: tuple[Any, ...]) -> tuple[int, int]:
    """``(bad, duplicate)``: the first id JobSpec would reject (not a non-empty string) or ``len(ids)``, and
    :func:`_first_duplicate` of ids that are all plain ``str`` (else -1)."""
    global _checked_ids
    last, bad, duplicate = _checked_ids
    if ids is last:
        return bad, duplicate
    n = len(ids)
    if all(type(x) is str for x in ids):
        bad = n if all(map(str.strip, ids)) else next(i for i, x in enumerate(ids) if not x.strip())
        duplicate = _first_duplicate(ids)
        _checked_ids = (ids, bad, duplicate)
        return bad, duplicate
    return next((i for i, x in enumerate(ids) if not (isinstance(x, str) and x.strip())), n), -1


def _first_duplicate(ids: Sequence[str]) -> int:
    n = len(ids)
    if len(set(ids)) == n:
        return n
    seen: set[str] = set()
    for i, job_id in enumerate(ids):
        if job_id in seen:
            return i
        seen.add(job_id)
    raise AssertionError("unreachable")  # pragma: no cover


def _make_columns(
    ids: tuple[Any, ...],
    floats: np.ndarray,
    gang: np.ndarray,
    cls: np.ndarray,
    member: np.ndarray | None = None,
    restart: np.ndarray | None = None,
) -> JobColumns:
    """The columns of a table, from its ids, its float fields (one row each, in ``_FLOAT_FIELDS`` order, owned
    by the table), its gang sizes and classes, its per-node demands (computed here if not given) and its
    restart overheads (None, or NaN where a job gives none)."""
    floats.setflags(write=False)  # shared by the table, the engines and results: nobody may change them
    if restart is not None and np.isnan(restart).all():
        restart = None  # no job gives one: the same table as one without the column
    for a in (gang, cls) if restart is None else (gang, cls, restart):
        a.setflags(write=False)
    s, d, g, c, m, gr = floats
    if member is None:
        member = np.ascontiguousarray((floats[2:5] / gang).T)  # the same IEEE divisions as JobSpec.member_demand
    member.setflags(write=False)
    return {
        "job_id": ids, "submit": s, "duration": d, "gpus": g, "cpus": c, "mem_gb": m, "grace": gr, "gang": gang,
        "job_class": cls, "member": member, "restart": restart,
    }  # fmt: skip


def workload_columns(specs: Sequence[JobSpec]) -> JobColumns:
    """The workload as columns, every spec read once: ``job_id`` (a tuple of str), ``submit``, ``duration``,
    ``gpus``, ``cpus``, ``mem_gb``, ``grace`` (float64), ``gang``, ``job_class`` (int64), ``member``, the
    per-node demand (float64, shape (n_jobs, 3)), and ``restart``: None when no job gives a restart overhead,
    else float64 with NaN for the jobs that give none (they pay ``SimConfig.restart_overhead``). The arrays are
    read-only. A :class:`JobTable` gives its own."""
    if isinstance(specs, JobTable):
        return specs.columns
    n = len(specs)
    rows = [
        (s.submit_time, s.duration, s.gpus, s.cpus, s.mem_gb, s.grace_period, s.gang_size, int(s.job_class))
        for s in specs
    ]
    table = np.array(rows, dtype=np.float64).reshape(n, 8)
    floats = np.ascontiguousarray(table[:, :6].T)
    restart = None
    if any(s.restart_overhead is not None for s in specs):
        restart = np.array([np.nan if s.restart_overhead is None else s.restart_overhead for s in specs])
    return _make_columns(
        tuple(s.job_id for s in specs),
        floats,
        table[:, 6].astype(np.int64),
        table[:, 7].astype(np.int64),
        restart=restart,
    )


def check_workload(specs: Sequence[JobSpec], capacity: np.ndarray) -> JobColumns:
    """Check a workload (JobSpecs, or a :class:`JobTable`) for either engine: job ids are unique and every
    job fits the cluster (``capacity``, shape (n_nodes, 3)) somewhere. Returns its :func:`workload_columns`.
    The first offending job (in workload order) is reported, a duplicate id before a job that can never run."""
    from schedgym.errors import ImpossibleJobError

    table = JobTable.from_specs(specs)
    columns = table.columns
    ids, member, gang = columns["job_id"], columns["member"], columns["gang"]
    n = len(ids)
    duplicate = table.first_duplicate()
    impossible = first_unplaceable(member, gang, capacity)
    if duplicate <= impossible and duplicate < n:
        raise ImpossibleJobError(f"Duplicate job_id {ids[duplicate]!r}")
    if impossible < n:
        m = member[impossible]
        top = capacity.max(axis=0)
        needs = (
            f"Job {ids[impossible]!r} can never run: it needs {int(gang[impossible])} node(s) with "
            f"gpus={m[0]:g}, cpus={m[1]:g}, mem_gb={m[2]:g} each"
        )
        largest = f"gpus={top[0]:g}, cpus={top[1]:g}, mem_gb={top[2]:g}"
        fitting = int(fits_on(capacity, m).sum())  # first_unplaceable's test
        # A gang can fail with nodes large enough, only too few of them: then the largest node is no reason.
        # The count is worded as the native engine's own message.
        if fitting:
            raise ImpossibleJobError(f"{needs}, and only {fitting} node(s) are that large")
        if (m - EPS <= top).all():  # every resource is offered by some node, never all of them by one
            raise ImpossibleJobError(f"{needs}, and no node offers all three (the most per node: {largest})")
        raise ImpossibleJobError(f"{needs}, but the largest node offers {largest}")
    return columns


def first_unplaceable(member: np.ndarray, gang: np.ndarray, capacity: np.ndarray) -> int:
    """The index of the first job that no state of the cluster can place: fewer than ``gang`` of its nodes
    (``capacity``, shape (n_nodes, 3)) fit ``member`` (per-node demands, shape (n_jobs, 3)) by
    :func:`~schedgym.sim.resources.fits_on`'s test; ``len(member)`` if every job can run."""
    n = len(member)
    if n == 0:
        return 0
    rows, counts = _node_types(capacity)
    # Nodes of one type fit or fail together: count the fitting nodes type by type, O(jobs x node types).
    inverse = None
    if len(rows) > 16:  # many node types: test each distinct demand once instead
        member, inverse = np.unique(member, axis=0, return_inverse=True)
    need = member - EPS  # fits_on's test, element for element
    fitting = np.zeros(len(member), dtype=np.int64)
    for row, count in zip(rows, counts, strict=True):
        fitting += count * (row >= need).all(axis=1)
    if inverse is not None:
        fitting = fitting[inverse.reshape(-1)]
    bad = fitting < gang
    return int(np.argmax(bad)) if bad.any() else n


_NODE_TYPES: dict[bytes, tuple[np.ndarray, list[int]]] = {}


def _node_types(capacity: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """The distinct rows of ``capacity`` and how many nodes have each (cached: a cluster rarely changes)."""
    capacity = np.ascontiguousarray(capacity, dtype=np.float64).reshape(-1, 3)
    key = capacity.tobytes()
    hit = _NODE_TYPES.get(key)
    if hit is None:
        rows, counts = np.unique(capacity, axis=0, return_counts=True)
        if len(_NODE_TYPES) >= 32:
            _NODE_TYPES.clear()
        hit = _NODE_TYPES[key] = (rows, counts.tolist())
    return hit


def build_jobs(specs: Sequence[JobSpec], capacity: np.ndarray, member: np.ndarray | None = None) -> list[Job]:
    """The runtime records of a workload, checked with :func:`check_workload` (unless ``member``, the
    per-node demands of its columns, is given). Jobs of one *shape* (class, per-node demand, gang size) fit
    or fail together; shape ids are numbered in order of first appearance."""
    if member is None:
        member = check_workload(specs, capacity)["member"]
    shapes: dict[tuple[Any, ...], int] = {}
    jobs: list[Job] = []
    for i, (spec, row) in enumerate(zip(specs, member.tolist(), strict=True)):
        demand = (row[0], row[1], row[2])
        key = (int(spec.job_class), demand, spec.gang_size)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = len(shapes)
        m = np.array(demand, dtype=np.float64)
        m.setflags(write=False)
        jobs.append(Job(idx=i, spec=spec, member=m, demand=demand, shape=shape, remaining=float(spec.duration)))
    return jobs

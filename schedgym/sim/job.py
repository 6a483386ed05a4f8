"""Jobs: the immutable description read from a trace (:class:`JobSpec`) and the simulator's
mutable runtime record (:class:`Job`)."""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedgym.errors import ConfigError

# Order of the resource axes everywhere in schedgym (arrays of shape (..., 3)).
RESOURCES: tuple[str, str, str] = ("gpus", "cpus", "mem_gb")

# Seconds a preempted job keeps its resources when its trace row (or its constructor call) gives none: the
# order of the published checkpoint costs (7-62 s). The trace reader uses the same value.
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
    requested; ``gang_size`` an integer >= 1; ``job_class`` a :class:`JobClass` (or its value 0 or 1).
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

    def __post_init__(self) -> None:
        # Runs for every job (and every dataclasses.replace), so the common case -- Python floats, an int
        # gang size, a JobClass -- costs one type test and one chained comparison per field.
        job_id = self.job_id
        if type(job_id) is not str or not job_id.strip():
            if not (isinstance(job_id, str) and job_id.strip()):
                raise ConfigError(f"Expected job_id to be a non-empty string, got {job_id!r}")
            object.__setattr__(self, "job_id", str(job_id))  # a str subclass such as numpy.str_
        v = self.submit_time
        if type(v) is not float or not 0.0 <= v < _INF:
            _set_float(self, "submit_time", v, ">= 0")
        v = self.duration
        if type(v) is not float or not 0.0 < v < _INF:
            _set_float(self, "duration", v, "> 0")
        v = self.gpus
        if type(v) is not float or not 0.0 <= v < _INF:
            _set_float(self, "gpus", v, ">= 0")
        v = self.cpus
        if type(v) is not float or not 0.0 <= v < _INF:
            _set_float(self, "cpus", v, ">= 0")
        v = self.mem_gb
        if type(v) is not float or not 0.0 <= v < _INF:
            _set_float(self, "mem_gb", v, ">= 0")
        v = self.grace_period
        if type(v) is not float or not 0.0 <= v < _INF:
            _set_float(self, "grace_period", v, ">= 0")
        if self.gpus + self.cpus + self.mem_gb <= 0.0:
            raise ConfigError(f"Job {self.job_id!r} requests no resources (gpus, cpus and mem_gb are all 0)")
        k = self.gang_size
        if type(k) is not int or k < 1:
            if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
                raise ConfigError(f"Job {self.job_id!r}: expected gang_size to be an integer >= 1, got {k!r}")
            if k < 1:
                raise ConfigError(f"Job {self.job_id!r}: expected gang_size >= 1, got {k!r}")
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


_INF = math.inf


def _set_float(spec: JobSpec, field: str, value: object, bound: str) -> None:
    """The slow path of :meth:`JobSpec.__post_init__` for one float field: reject ``value`` with a message, or
    store it as a Python float (it was an int or a numpy scalar)."""
    if isinstance(value, bool) or not (
        isinstance(value, (float, int, np.floating, np.integer))
        or (isinstance(value, numbers.Real) and not isinstance(value, np.bool_))
    ):
        raise ConfigError(f"Job {spec.job_id!r}: expected {field} to be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"Job {spec.job_id!r}: expected {field} {bound} (finite), got {v!r}")
    if not (v > 0.0 if bound == "> 0" else v >= 0.0):
        raise ConfigError(f"Job {spec.job_id!r}: expected {field} {bound}, got {v!r}")
    object.__setattr__(spec, field, v)


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


def workload_columns(specs: Sequence[JobSpec]) -> dict[str, Any]:
    """The workload as columns, every spec read once: ``job_id`` (a list), ``submit``, ``duration``,
    ``gpus``, ``cpus``, ``mem_gb``, ``grace`` (float64), ``gang``, ``job_class`` (int64), and ``member``, the
    per-node demand (float64, shape (n_jobs, 3))."""
    n = len(specs)
    rows = [
        (s.submit_time, s.duration, s.gpus, s.cpus, s.mem_gb, s.grace_period, s.gang_size, int(s.job_class))
        for s in specs
    ]
    table = np.array(rows, dtype=np.float64).reshape(n, 8)
    gang = table[:, 6].astype(np.int64)
    return {
        "job_id": [s.job_id for s in specs],
        "submit": np.ascontiguousarray(table[:, 0]),
        "duration": np.ascontiguousarray(table[:, 1]),
        "gpus": np.ascontiguousarray(table[:, 2]),
        "cpus": np.ascontiguousarray(table[:, 3]),
        "mem_gb": np.ascontiguousarray(table[:, 4]),
        "grace": np.ascontiguousarray(table[:, 5]),
        "gang": gang,
        "job_class": table[:, 7].astype(np.int64),
        "member": table[:, 2:5] / gang[:, None],  # the same IEEE divisions as JobSpec.member_demand
    }


def check_workload(specs: Sequence[JobSpec], capacity: np.ndarray) -> dict[str, Any]:
    """Check a workload for either engine: job ids are unique and every job fits the cluster (``capacity``,
    shape (n_nodes, 3)) somewhere. Returns its :func:`workload_columns`. The first offending job (in workload
    order) is reported, a duplicate id before a job that can never run."""
    from schedgym.errors import ImpossibleJobError
    from schedgym.sim.resources import fits_on

    columns = workload_columns(specs)
    ids, member, gang = columns["job_id"], columns["member"], columns["gang"]
    n = len(ids)
    duplicate = n
    if len(set(ids)) != n:  # rare: find the first repeat
        seen: set[str] = set()
        for i, job_id in enumerate(ids):
            if job_id in seen:
                duplicate = i
                break
            seen.add(job_id)
    impossible = n
    # Jobs of one shape fit or fail together: test each distinct (demand, gang size) once.
    keys = list(zip(*member.T.tolist(), gang.tolist(), strict=True)) if n else []
    ok = {
        key: key[3] <= len(capacity) and int(fits_on(capacity, np.array(key[:3])).sum()) >= key[3]
        for key in dict.fromkeys(keys)
    }
    if not all(ok.values()):
        impossible = next(i for i, key in enumerate(keys) if not ok[key])
    if duplicate <= impossible and duplicate < n:
        raise ImpossibleJobError(f"Duplicate job_id {ids[duplicate]!r}")
    if impossible < n:
        m = member[impossible]
        top = capacity.max(axis=0)
        raise ImpossibleJobError(
            f"Job {ids[impossible]!r} can never run: it needs {int(gang[impossible])} node(s) with "
            f"gpus={m[0]:g}, cpus={m[1]:g}, mem_gb={m[2]:g} each, but the largest node "
            f"offers gpus={top[0]:g}, cpus={top[1]:g}, mem_gb={top[2]:g}"
        )
    return columns


def build_jobs(specs: Sequence[JobSpec], capacity: np.ndarray, member: np.ndarray | None = None) -> list[Job]:
    """The runtime records of a workload, checked with :func:`check_workload` (unless ``member``, the
    per-node demands of its columns, is given). Jobs of one *shape* (class, per-node demand, gang size) fit
    or fail together; shape ids are numbered in order of first appearance."""
    if member is None:
        member = check_workload(specs, capacity)["member"]
    shapes: dict[tuple, int] = {}
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

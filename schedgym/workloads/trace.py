"""The trace file format: one CSV row per job.

Columns (header required, any order; a column outside this table, an empty or a repeated name is an
error, with a hint for a near miss such as ``gpu``):

================ ======== ===========================================================================
column           required meaning
================ ======== ===========================================================================
job_id           yes      unique identifier (text)
submit_time      yes      seconds, >= 0
duration         yes      seconds of work when running, > 0
gpus             yes      total GPUs, >= 0 (fractions allowed)
class            yes      ``TE`` or ``BE`` (case-insensitive)
cpus             no       total CPUs, >= 0; default 0
mem_gb           no       total memory in GB, >= 0; default 0
nodes            no       gang size k >= 1 (each node holds 1/k of the demand); default 1
grace_period     no       seconds a preempted job keeps its resources, >= 0; default 30
                          (:data:`~schedgym.sim.job.DEFAULT_GRACE_PERIOD`, as for a JobSpec built in Python)
restart_overhead no       seconds charged at each restart after a preemption, >= 0; empty or absent:
                          the simulator's ``SimConfig.restart_overhead`` (``--restart-overhead``)
================ ======== ===========================================================================

Numbers are ASCII decimal notation (``12``, ``1.5``, ``2e3``), finite, and within :mod:`schedgym.limits`:
times and grace periods at most 1e10 s, durations from 1 ms to 1e10 s, amounts at most 1e6, at most
100,000 nodes and 2,000,000 rows. A malformed file is rejected whole with a
:class:`~schedgym.errors.TraceError` naming file, line, column and value: nothing is dropped or repaired
silently.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

import numpy as np

from schedgym._atomic import atomic_open
from schedgym._csvio import CsvRows, number_problem
from schedgym.errors import ConfigError, TraceError
from schedgym.limits import MAX_NODES, check_amount, check_duration, check_time
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import DEFAULT_GRACE_PERIOD, JobClass, JobSpec, JobTable, first_unplaceable
from schedgym.sim.resources import EPS, fits_on

REQUIRED_COLUMNS = ("job_id", "submit_time", "duration", "gpus", "class")
OPTIONAL_DEFAULTS: dict[str, float] = {"cpus": 0.0, "mem_gb": 0.0, "nodes": 1, "grace_period": DEFAULT_GRACE_PERIOD}
COLUMNS = ("job_id", "submit_time", "duration", "gpus", "cpus", "mem_gb", "nodes", "class", "grace_period")
RESTART_COLUMN = "restart_overhead"
"""Optional column without a default of its own: a job that gives no value pays the simulator's overhead. Written
only when some job gives one."""


@dataclass(frozen=True)
class Workload:
    """A list of jobs and where they came from (for error messages that point into the file).

    Construction checks that ``jobs`` holds :class:`JobSpec` objects with unique ids, and that ``lines`` and
    ``measured`` (if given) have one entry per job; lists are stored as tuples. Each job has checked its own
    fields when it was built, so a workload built through the Python API obeys the trace reader's rules.

    A workload can also hold its jobs as columns (:meth:`from_table`, what the synthetic generator makes):
    then ``jobs`` is made when first read, and the simulators, which take :attr:`table`, never need it.
    """

    jobs: tuple[JobSpec, ...]
    name: str = "workload"
    path: str | None = None
    lines: tuple[int, ...] | None = None  # file line of each job, when read from a file
    measured: tuple[bool, ...] | None = None  # jobs that count in the results (None: all); the rest warm up

    def __post_init__(self) -> None:
        jobs = self.jobs
        if type(jobs) is not tuple:
            if isinstance(jobs, (str, bytes, JobSpec)) or not isinstance(jobs, (tuple, list)):
                raise ConfigError(f"Expected workload jobs to be a tuple or list of JobSpec, got {type(jobs).__name__}")
            jobs = tuple(jobs)
            object.__setattr__(self, "jobs", jobs)
        for i, job in enumerate(jobs):
            if type(job) is not JobSpec and not isinstance(job, JobSpec):
                raise ConfigError(
                    f"Workload {self.name!r}: expected job {i} to be a JobSpec, got {type(job).__name__} {job!r}"
                )
        ids = {job.job_id for job in jobs}
        if len(ids) != len(jobs):
            self._duplicate_error([job.job_id for job in jobs])
        self._check_per_job()

    @classmethod
    def from_table(
        cls,
        table: JobTable,
        name: str = "workload",
        path: str | None = None,
        lines: tuple[int, ...] | None = None,
        measured: tuple[bool, ...] | None = None,
    ) -> Workload:
        """The workload of a :class:`~schedgym.sim.job.JobTable`, checked as the constructor checks (unique
        ids, one line and one measured flag per job); its JobSpecs are made only if :attr:`jobs` is read."""
        if not isinstance(table, JobTable):
            raise ConfigError(f"Expected a JobTable, got {type(table).__name__}")
        wl = cls.__new__(cls)
        for field, value in (("name", name), ("path", path), ("lines", lines), ("measured", measured)):
            object.__setattr__(wl, field, value)
        object.__setattr__(wl, "_table", table)
        if table.first_duplicate() < len(table):
            wl._duplicate_error(table.job_ids)
        wl._check_per_job()
        return wl

    if not TYPE_CHECKING:  # hidden from the type checker, which would otherwise accept any attribute name

        def __getattr__(self, name: str) -> Any:
            # Called only for attributes not set: the jobs of a workload made from a table, on first reading.
            if name == "jobs":
                table = self.__dict__.get("_table")
                if table is not None:
                    jobs = table.specs
                    object.__setattr__(self, "jobs", jobs)
                    return jobs
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def table(self) -> JobTable:
        """The jobs as a :class:`~schedgym.sim.job.JobTable` (columns), what the simulators are built from."""
        table = self.__dict__.get("_table")
        if table is None:
            table = JobTable.from_specs(self.jobs)
            object.__setattr__(self, "_table", table)
        return table

    def _duplicate_error(self, ids: Sequence[str]) -> NoReturn:
        seen: dict[str, int] = {}
        for i, job_id in enumerate(ids):
            if job_id in seen:
                raise ConfigError(
                    f"Workload {self.name!r}: expected unique job ids, got {job_id!r} "
                    f"at positions {seen[job_id]} and {i}"
                )
            seen[job_id] = i
        raise AssertionError("no duplicate id")  # pragma: no cover

    def _check_per_job(self) -> None:
        if self.lines is not None:
            object.__setattr__(self, "lines", self._per_job("lines", self.lines, int, (int, np.integer)))
        if self.measured is not None:
            object.__setattr__(self, "measured", self._per_job("measured", self.measured, bool, (bool, np.bool_)))

    def _per_job(self, field: str, values: object, kind: type, accepted: tuple[type, ...]) -> tuple:
        """``values`` (one per job, of a type in ``accepted``) as a tuple of ``kind``, or a ConfigError."""
        if not isinstance(values, (tuple, list, np.ndarray)):
            raise ConfigError(
                f"Workload {self.name!r}: expected {field} to be None or a tuple, got {type(values).__name__}"
            )
        if len(values) != len(self):
            raise ConfigError(
                f"Workload {self.name!r}: expected {field} to have one entry per job ({len(self)}), got {len(values)}"
            )
        for v in values:
            if not isinstance(v, accepted) or (kind is int and isinstance(v, bool)):
                raise ConfigError(f"Workload {self.name!r}: expected {field} to hold {kind.__name__}s, got {v!r}")
        if type(values) is tuple and all(type(v) is kind for v in values):
            return values
        return tuple(kind(v) for v in values)

    def __len__(self) -> int:
        jobs = self.__dict__.get("jobs")
        return len(jobs) if jobs is not None else len(self.__dict__["_table"])

    def peak_demand(self, start: float = 0.0) -> np.ndarray:
        """The most GPUs, CPUs and memory (shape (3,)) the jobs would hold at once from time ``start`` on, if
        each ran from its submission for its duration without waiting: what a cluster must offer for nothing
        ever to queue. A job that ends at ``t`` frees its share before one submitted at ``t`` takes its own, as
        in the simulator."""
        col = self.table.columns
        submit, end = col["submit"], col["submit"] + col["duration"]
        amounts = np.stack([col["gpus"], col["cpus"], col["mem_gb"]], axis=1)
        times = np.concatenate([end, submit])
        deltas = np.concatenate([-amounts, amounts])
        order = np.lexsort((np.repeat([0, 1], len(submit)), times))  # at equal times, ends first
        held = np.cumsum(deltas[order], axis=0)
        at = times[order]
        # What is held at `start` (the last state before it) counts too.
        after = at >= start
        before = np.flatnonzero(~after)
        rows = held[after]
        if before.size:
            rows = np.vstack([held[before[-1]], rows])
        return rows.max(axis=0) if rows.size else np.zeros(3)

    def check_fits(self, cluster: ClusterSpec) -> None:
        """Raise a :class:`TraceError` for the first job that can never run on ``cluster``."""
        cap = cluster.capacity
        table = self.table
        columns = table.columns
        i = first_unplaceable(columns["member"], columns["gang"], cap)
        if i == len(table):
            return
        job = table[i]
        member = np.array(job.member_demand)
        fits = fits_on(cap, member)
        line = self.lines[i] if self.lines else None
        where: dict[str, Any] = dict(path=self.path, line=line) if self.path else dict(line=line)
        if job.gang_size > cluster.n_nodes:
            raise TraceError(
                f"job {job.job_id!r} needs {job.gang_size} nodes but cluster {cluster.name!r} has {cluster.n_nodes}",
                column="nodes",
                value=job.gang_size,
                **where,
            )
        for r, col in enumerate(("gpus", "cpus", "mem_gb")):
            if member[r] > cap[:, r].max() + EPS:
                raise TraceError(
                    f"job {job.job_id!r} is larger than every node of cluster {cluster.name!r} "
                    f"({col} per node: needs {member[r]:g}, largest node has {cap[:, r].max():g})",
                    column=col,
                    value=getattr(job, col),
                    **where,
                )
        raise TraceError(
            f"job {job.job_id!r} needs {job.gang_size} nodes that each offer {member.tolist()}, "
            f"and cluster {cluster.name!r} has only {int(fits.sum())}",
            column="nodes",
            value=job.gang_size,
            **where,
        )


def _number(raw: str | None, *, path: str, line: int, column: str, minimum: float, strict: bool = False) -> float:
    if raw is None or raw.strip() == "":
        raise TraceError("missing value", path=path, line=line, column=column, value=raw)
    problem = number_problem(raw)
    if problem is not None:
        raise TraceError(problem, path=path, line=line, column=column, value=raw)
    value = float(raw.strip(" \t"))
    if value < minimum or (strict and value == minimum):
        op = ">" if strict else ">="
        raise TraceError(f"expected a number {op} {minimum:g}", path=path, line=line, column=column, value=raw)
    if column == "duration":
        problem = check_duration(value)
    elif column in ("submit_time", "grace_period", RESTART_COLUMN):
        problem = check_time(value)
    elif column in ("gpus", "cpus", "mem_gb"):
        problem = check_amount(value)
    elif column == "nodes" and value > MAX_NODES:
        problem = f"expected at most {MAX_NODES:,} nodes (schedgym.limits.MAX_NODES)"
    if problem is not None:
        raise TraceError(problem, path=path, line=line, column=column, value=raw)
    return value


def load_trace(path: str | Path, name: str | None = None) -> Workload:
    """Read and validate a trace CSV (see the module docstring for the columns and
    :mod:`schedgym.limits` for the bounds on its size and values)."""
    path = str(path)
    rows = CsvRows(path, "trace", required=REQUIRED_COLUMNS, optional=(*OPTIONAL_DEFAULTS, RESTART_COLUMN))
    jobs: list[JobSpec] = []
    lines: list[int] = []
    first_line: dict[str, int] = {}
    for line, row in rows:
        job_id = row["job_id"].strip()
        if not job_id:
            raise TraceError("empty job_id", path=path, line=line, column="job_id", value=row["job_id"])
        if job_id in first_line:
            raise TraceError(
                f"duplicate job_id (first seen on line {first_line[job_id]})",
                path=path,
                line=line,
                column="job_id",
                value=job_id,
            )
        first_line[job_id] = line
        kw: dict[str, Any] = dict(path=path, line=line)
        submit = _number(row["submit_time"], column="submit_time", minimum=0.0, **kw)
        duration = _number(row["duration"], column="duration", minimum=0.0, strict=True, **kw)
        gpus = _number(row["gpus"], column="gpus", minimum=0.0, **kw)
        opt = {}
        for col in ("cpus", "mem_gb", "grace_period"):
            raw = row.get(col)
            if raw is None or raw.strip() == "":
                opt[col] = float(OPTIONAL_DEFAULTS[col])
            else:
                opt[col] = _number(raw, column=col, minimum=0.0, **kw)
        raw = row.get(RESTART_COLUMN)
        restart = None if raw is None or raw.strip() == "" else _number(raw, column=RESTART_COLUMN, minimum=0.0, **kw)
        raw_nodes = row.get("nodes")
        nodes = 1
        if raw_nodes is not None and raw_nodes.strip() != "":
            n = _number(raw_nodes, column="nodes", minimum=1.0, **kw)
            if n != int(n):
                raise TraceError("expected a whole number of nodes", column="nodes", value=raw_nodes, **kw)
            nodes = int(n)
        raw_class = row["class"].strip().upper()
        if raw_class not in ("TE", "BE"):
            raise TraceError("unknown class, expected TE or BE", column="class", value=row["class"], **kw)
        if gpus + opt["cpus"] + opt["mem_gb"] <= 0:
            raise TraceError("job requests no resources (gpus, cpus and mem_gb are all 0)", **kw)
        try:  # the checks above cover JobSpec's; this keeps the file and line should they ever differ
            job = JobSpec(
                job_id=job_id,
                submit_time=submit,
                duration=duration,
                gpus=gpus,
                cpus=opt["cpus"],
                mem_gb=opt["mem_gb"],
                gang_size=nodes,
                job_class=JobClass[raw_class],
                grace_period=opt["grace_period"],
                restart_overhead=restart,
            )
        except ConfigError as exc:
            raise TraceError(str(exc), **kw) from None
        jobs.append(job)
        lines.append(line)
    if not jobs:
        raise TraceError("the trace holds no jobs", path=path)
    return Workload(tuple(jobs), name=name or Path(path).stem, path=path, lines=tuple(lines))


def save_trace(path: str | Path, jobs: Iterable[JobSpec]) -> None:
    """Write jobs in the trace format (readable by :func:`load_trace`); ``.gz`` paths are compressed. The file
    is written atomically (see :mod:`schedgym._atomic`): on any failure nothing is left at ``path``."""
    with atomic_open(path, newline="") as fh:
        write_trace(fh, jobs)


def write_trace(fh: IO[str], jobs: Iterable[JobSpec]) -> None:
    """Write jobs in the trace format to an open text file (``newline=""``). The ``restart_overhead`` column is
    written only when some job gives one (an empty cell for the others)."""
    jobs = jobs if isinstance(jobs, Sequence) else list(jobs)
    restart = any(j.restart_overhead is not None for j in jobs)
    w = csv.writer(fh)
    w.writerow((*COLUMNS, RESTART_COLUMN) if restart else COLUMNS)
    for j in jobs:
        row = [
            j.job_id,
            repr(j.submit_time),
            repr(j.duration),
            repr(j.gpus),
            repr(j.cpus),
            repr(j.mem_gb),
            j.gang_size,
            j.job_class.name,
            repr(j.grace_period),
        ]
        if restart:
            row.append("" if j.restart_overhead is None else repr(j.restart_overhead))
        w.writerow(row)

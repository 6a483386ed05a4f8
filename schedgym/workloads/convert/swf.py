"""Standard Workload Format (SWF, Parallel Workloads Archive, version 2.2) -> the schedgym trace format.

An SWF file holds one job per line as 18 whitespace-separated numbers; lines starting with ``;`` are header
comments and blank lines are skipped; ``-1`` (any negative value) means "missing". Fields: 1 job number,
2 submit time, 3 wait time, 4 run time, 5 allocated processors, 6 average CPU time, 7 used memory (KB),
8 requested processors, 9 requested time, 10 requested memory (KB), 11 status, 12 user, 13 group,
14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time. The rules (each a parameter of
:class:`SwfRules`):

- ``submit_time`` = field 2 minus the window start (``start``, or the earliest submit time kept); the
  window ``[start, end)`` applies to field 2 and rows outside it are dropped (counted). The real wait
  (field 3) is not part of the job;
- ``duration`` = run time (field 4); a missing run time is dropped, and so is a run time of 0 (the archive
  writes 0 for jobs that ran under 0.5 s), each reason counted;
- processors = allocated processors (field 5), else requested processors (field 8, counted as changed);
  without either (or with a non-integer count) the row is dropped. ``cpus = processors``;
  ``gpus = processors * gpus_per_processor``: the default 0 makes an SWF workload CPU-only, so simulate it
  on a cluster with CPUs (set ``gpus_per_processor`` to read a processor as a share of GPUs instead);
- memory: the SWF definition gives both used memory (field 7) and requested memory (field 10) in kilobytes
  *per processor*, so ``mem_gb = value * processors / 2**20`` (1 GB = 2**20 KB). Field 7 is used when it is
  > 0, else field 10 (counted as changed), else ``mem_gb_per_processor * processors`` is imputed (counted as
  changed; most archive logs record no memory). A few archive logs note in their header that memory is per
  node or per job instead: ``mem_per_processor = False`` then takes the value as the job's total;
- ``nodes = ceil(processors / procs_per_node)``; a gang whose processors do not split evenly over its
  nodes is rounded up to the next even split (``cpus``, ``gpus`` and per-processor memory follow; counted as
  changed);
- class: TE when the job's time is at most ``te_max_duration`` and ``processors <= te_max_procs``, else BE.
  The time is the requested time (field 9: what the user expected; it falls back to the run time when
  missing) with ``te_time = "requested"``, or the run time with ``te_time = "run"``. Some logs record
  field 9 as CPU time per processor (see their header); the two agree for sequential jobs;
- grace period by class: ``grace_te`` for TE jobs, ``grace_be`` for BE jobs;
- status (field 11): 1 completed, 0 failed, 5 cancelled. A checkpointed or swapped job also has
  partial-execution lines (status 2, 3, 4) next to its summary line with the same job number: those are
  dropped (counted) and the summary line is kept. ``keep_status`` keeps only the listed statuses (e.g.
  ``(1,)``), dropping and counting the rest; the default keeps all. A job number seen again on a later kept
  line is dropped (counted);
- ``job_id`` = ``swf-<job number>``.

Errors: a broken *file* raises :class:`TraceError` naming file, line, field and value: a line without 18
fields, a field that is not an ASCII decimal number, a non-integer job number. A well-formed but unusable
*line* is dropped and counted with its reason in the :class:`ConversionReport`, and so is a job beyond
:mod:`schedgym.limits` (a submit time over 1e10 s, a run time under 1 ms or over 1e10 s, an amount over
1e6), so the output always loads with the trace reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from schedgym import limits
from schedgym._csvio import number_problem, parse_integer, read_text
from schedgym.errors import ConfigError, TraceError
from schedgym.limits import MAX_TIME
from schedgym.sim.job import JobClass, JobSpec
from schedgym.workloads.convert._rules import check_nonnegative, check_times, check_window, finish, out_of_limits
from schedgym.workloads.convert.report import ConversionReport
from schedgym.workloads.trace import Workload

FIELDS = ("job number", "submit time", "wait time", "run time", "allocated processors", "average CPU time",
          "used memory", "requested processors", "requested time", "requested memory", "status", "user",
          "group", "executable", "queue", "partition", "preceding job", "think time")  # fmt: skip
PARTIAL_STATUS = (2, 3, 4)
KB_PER_GB = 2.0**20


@dataclass(frozen=True)
class SwfRules:
    """Conversion rules for an SWF log (see the module docstring)."""

    start: float | None = None
    """window start, in seconds of submit time (None: the earliest kept job)"""
    end: float | None = None
    """window end, exclusive, in seconds of submit time (None: no end)"""
    te_max_duration: float = 900.0
    """TE jobs take at most this long (s), by te_time"""
    te_max_procs: float = 8.0
    """TE jobs use at most this many processors"""
    te_time: str = "requested"
    """time compared with te_max_duration: 'requested' (field 9, else run time) or 'run' (field 4)"""
    procs_per_node: int = 8
    """processors per node, for the gang size"""
    gpus_per_processor: float = 0.0
    """GPUs per processor (0: a CPU-only workload)"""
    mem_per_processor: bool = True
    """memory fields are per processor (the SWF definition); False: per job"""
    mem_gb_per_processor: float = 0.0
    """memory imputed per processor (GB) when neither memory field is given"""
    keep_status: tuple[int, ...] | None = None
    """statuses kept, e.g. (1,) or '1,5' (None: all; partial-execution lines 2, 3, 4 are always dropped)"""
    grace_te: float = 30.0
    """grace period of TE jobs (s)"""
    grace_be: float = 30.0
    """grace period of BE jobs (s)"""

    def __post_init__(self) -> None:
        check_nonnegative(
            self,
            ("te_max_duration", "te_max_procs", "gpus_per_processor", "mem_gb_per_processor", "grace_te", "grace_be"),
        )
        check_times(self, ("grace_te", "grace_be"))
        check_window(self)
        if (
            not isinstance(self.procs_per_node, int)
            or isinstance(self.procs_per_node, bool)
            or self.procs_per_node <= 0
        ):
            raise ConfigError(f"Expected procs_per_node > 0, got {self.procs_per_node!r}")
        if self.te_time not in ("requested", "run"):
            raise ConfigError(f"Expected te_time 'requested' or 'run', got {self.te_time!r}")
        if not isinstance(self.mem_per_processor, bool):
            raise ConfigError(f"Expected mem_per_processor to be a bool, got {self.mem_per_processor!r}")
        if self.keep_status is not None:
            object.__setattr__(self, "keep_status", _statuses(self.keep_status))


def _statuses(value: object) -> tuple[int, ...]:
    """``keep_status`` as a sorted tuple; an int or a comma-separated string (as ``--set`` passes it) is
    accepted too."""
    items: object = value
    if isinstance(value, str):
        # ASCII digits, every item (int() read '1_0' as 10 and '١' as 1; an empty item was skipped).
        numbers = [parse_integer(s) for s in value.split(",")]
        items = None if None in numbers else numbers
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    if (
        not isinstance(items, (list, tuple, set, frozenset))
        or not items
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in items)
    ):
        raise ConfigError(f"Expected keep_status to be None or a non-empty tuple of ints (e.g. '1,5'), got {value!r}")
    return tuple(sorted(set(items)))


def _parse_line(text: str, path: str, line: int) -> list[float]:
    tokens = text.split()
    if len(tokens) != len(FIELDS):
        raise TraceError(f"expected {len(FIELDS)} whitespace-separated fields, got {len(tokens)}", path=path, line=line)
    values = []
    for i, token in enumerate(tokens):
        problem = number_problem(token)
        if problem is not None:
            raise TraceError(problem, path=path, line=line, column=f"field {i + 1} ({FIELDS[i]})", value=token)
        values.append(float(token))
    if values[0] != int(values[0]):
        raise TraceError("expected an integer job number", path=path, line=line, column="field 1 (job number)",
                         value=tokens[0])  # fmt: skip
    return values


def convert_swf(path: str | Path, rules: SwfRules | None = None) -> tuple[Workload, ConversionReport]:
    """Read the SWF log at ``path`` and convert it by ``rules``."""
    rules = rules or SwfRules()
    path = str(path)
    report = ConversionReport(source=path)
    seen: set[int] = set()
    parsed: list[tuple[float, int, JobSpec]] = []  # (submit, line, job with submit_time unset)
    for line, text in enumerate(read_text(path, "SWF log").splitlines(), start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith(";"):
            continue
        report.rows += 1
        if report.rows > limits.MAX_ROWS:
            problem = f"more than {limits.MAX_ROWS:,} jobs (schedgym.limits.MAX_ROWS); split the file"
            raise TraceError(problem, path=path, line=line)
        converted = _convert_line(_parse_line(stripped, path, line), rules, seen, report, line)
        if converted is not None:
            parsed.append((converted[0], line, converted[1]))
    return finish(parsed, report, rules.start, path, Path(path).stem)


def _convert_line(
    f: list[float], rules: SwfRules, seen: set[int], report: ConversionReport, line: int
) -> tuple[float, JobSpec] | None:
    """The submit time and job (submit_time unset) of one parsed line, or None when it is dropped (the
    report says why); a kept job's number joins ``seen``."""
    number, submit, run, alloc, used_mem, req_procs, req_time, req_mem, status = (
        int(f[0]), f[1], f[3], f[4], f[6], f[7], f[8], f[9], f[10])  # fmt: skip
    reason = _skipped(number, submit, run, status, rules, seen)
    if reason is not None:
        report.drop(reason, line)
        return None
    procs = alloc if alloc > 0 else req_procs
    if procs <= 0:
        report.drop("processors missing", line)
        return None
    if procs != int(procs):
        report.drop("non-integer processor count", line)
        return None
    if alloc <= 0:
        report.change("requested processors used (allocated processors missing)", line)
    nodes = math.ceil(procs / rules.procs_per_node)
    total_procs = nodes * math.ceil(procs / nodes)
    if total_procs != procs:
        report.change("gang processors rounded up to an even split over its nodes", line)
    mem_gb = _memory_gb(used_mem, req_mem, total_procs, rules, report, line)
    limit = out_of_limits(run, total_procs * rules.gpus_per_processor, float(total_procs), mem_gb, nodes)
    if limit is not None:
        report.drop(limit, line)
        return None
    te_time = req_time if rules.te_time == "requested" and req_time > 0 else run
    te = te_time <= rules.te_max_duration and total_procs <= rules.te_max_procs
    seen.add(number)
    job = JobSpec(
        job_id=f"swf-{number}",
        submit_time=0.0,
        duration=run,
        gpus=total_procs * rules.gpus_per_processor,
        cpus=float(total_procs),
        mem_gb=mem_gb,
        gang_size=nodes,
        job_class=JobClass.TE if te else JobClass.BE,
        grace_period=rules.grace_te if te else rules.grace_be,
    )
    return submit, job


def _skipped(number: int, submit: float, run: float, status: float, rules: SwfRules, seen: set[int]) -> str | None:
    """Why a line is dropped before its resources are read (in the order the checks apply), or None."""
    if submit < 0:
        return "submit time missing"
    if submit > MAX_TIME:
        return f"submit time over {MAX_TIME:g} s (schedgym.limits.MAX_TIME)"
    if (rules.start is not None and submit < rules.start) or (rules.end is not None and submit >= rules.end):
        return "outside the time window"
    if status in PARTIAL_STATUS:
        return "partial-execution line (status 2, 3 or 4; the summary line is kept)"
    if rules.keep_status is not None and status not in rules.keep_status:
        return "status not in keep_status"
    if number in seen:
        return "duplicate job number"
    if run < 0:
        return "run time missing"
    if run == 0:
        return "run time 0 (under 0.5 s)"
    return None


def _memory_gb(
    used_mem: float, req_mem: float, total_procs: int, rules: SwfRules, report: ConversionReport, line: int
) -> float:
    """A job's memory in GB: used, else requested (per processor or per job, as ``rules`` says), else
    ``mem_gb_per_processor`` per processor; the report notes which stood in."""
    if used_mem > 0 or req_mem > 0:
        if used_mem <= 0:
            report.change("requested memory used (used memory missing)", line)
        mem_kb = used_mem if used_mem > 0 else req_mem
        return mem_kb * (total_procs if rules.mem_per_processor else 1) / KB_PER_GB
    report.change("memory missing, mem_gb_per_processor imputed", line)
    return rules.mem_gb_per_processor * total_procs

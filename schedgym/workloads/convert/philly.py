"""Microsoft Philly (as derived by the Pollux authors) -> the schedgym trace format.

Source columns: ``timestamp`` (``YYYY-MM-DD HH:MM:SS``), ``duration`` (s), ``num_gpus``, ``gpu_time``,
``cluster``. The rules (each a parameter of :class:`PhillyRules`):

- ``submit_time`` = seconds from the window start (``start``, or the first kept timestamp);
- ``duration`` as is; ``gpus = num_gpus``; ``nodes = ceil(gpus / gpus_per_node)``; a gang whose GPUs do not
  split evenly over its nodes is rounded up to the next even split (counted as changed);
- CPUs and memory are not in the trace: imputed as ``cpus_per_gpu`` and ``mem_gb_per_gpu`` per GPU;
- class: TE when ``duration <= te_max_duration`` and ``gpus <= te_max_gpus``, else BE;
- grace period by GPU count: ``grace_small`` s for 1 GPU, ``grace_medium`` s up to ``gpus_per_node``,
  ``grace_large`` s above (published preemption costs range 7-62 s: docs/workloads.md);
- rows outside ``[start, end)``, without a parsable time (ASCII digits), with a non-positive duration or
  GPU count, or beyond :mod:`schedgym.limits` (a duration under 1 ms or over 1e10 s, an amount over 1e6, a
  submission more than 1e10 s after the window start) are dropped, each reason counted;
- ``job_id`` = ``philly-<source line>``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

from schedgym._csvio import CsvRows, parse_number
from schedgym.errors import ConfigError, TraceError
from schedgym.limits import MAX_TIME
from schedgym.sim.job import JobClass, JobSpec
from schedgym.workloads.convert._rules import check_times, out_of_limits
from schedgym.workloads.convert.report import ConversionReport
from schedgym.workloads.trace import Workload

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class PhillyRules:
    """Conversion rules for the Philly trace (see the module docstring)."""

    start: str | None = None
    """window start, 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS' (None: the first job)"""
    end: str | None = None
    """window end, exclusive (None: the last job)"""
    te_max_duration: float = 900.0
    """TE jobs run at most this long (s)"""
    te_max_gpus: float = 8.0
    """TE jobs use at most this many GPUs"""
    cpus_per_gpu: float = 12.0
    """imputed CPUs per GPU"""
    mem_gb_per_gpu: float = 48.0
    """imputed memory per GPU (GB)"""
    gpus_per_node: int = 8
    """GPUs per node, for the gang size"""
    grace_small: float = 30.0
    """grace period of 1-GPU jobs (s)"""
    grace_medium: float = 60.0
    """grace period of jobs up to gpus_per_node GPUs (s)"""
    grace_large: float = 120.0
    """grace period of larger jobs (s)"""

    def __post_init__(self) -> None:
        for name in ("te_max_duration", "te_max_gpus", "cpus_per_gpu", "mem_gb_per_gpu", "grace_small",
                     "grace_medium", "grace_large"):  # fmt: skip
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"Expected {name} >= 0, got {value!r}")
        check_times(self, ("grace_small", "grace_medium", "grace_large"))
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node <= 0:
            raise ConfigError(f"Expected gpus_per_node > 0, got {self.gpus_per_node!r}")
        for name in ("start", "end"):
            if getattr(self, name) is not None:
                parse_time(getattr(self, name), name)
        if self.start and self.end and parse_time(self.start, "start") >= parse_time(self.end, "end"):
            raise ConfigError(f"Expected start < end, got {self.start!r} and {self.end!r}")


def parse_time(text: str, what: str) -> dt.datetime:
    """A rule's ``start`` or ``end``: ``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM:SS`` in ASCII digits."""
    if isinstance(text, str) and _TIMESTAMP.fullmatch(text.strip()):
        for fmt in (TIME_FORMAT, "%Y-%m-%d"):
            try:
                return dt.datetime.strptime(text.strip(), fmt)
            except ValueError:
                continue
    raise ConfigError(f"Expected {what} as 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS', got {text!r}")


def convert_philly(path: str, rules: PhillyRules | None = None) -> tuple[Workload, ConversionReport]:
    """Read the Philly CSV at ``path`` and convert it by ``rules``."""
    rules = rules or PhillyRules()
    path = str(path)
    report = ConversionReport(source=path)
    rows = CsvRows(
        path, "Philly trace", required=("timestamp", "duration", "num_gpus"), optional=("gpu_time", "cluster")
    )
    start = parse_time(rules.start, "start") if rules.start else None
    end = parse_time(rules.end, "end") if rules.end else None
    parsed: list[tuple[dt.datetime, float, float, int]] = []
    for line, row in rows:
        report.rows += 1
        t = _timestamp(row["timestamp"])
        if t is None:
            report.drop("unparsable timestamp", line)
            continue
        if (start and t < start) or (end and t >= end):
            report.drop("outside the time window", line)
            continue
        raw_duration, raw_gpus = row["duration"], row["num_gpus"]
        if (raw_duration.strip() and parse_number(raw_duration) is None) or (
            raw_gpus.strip() and parse_number(raw_gpus) is None
        ):
            report.drop("non-numeric duration or num_gpus", line)
            continue
        duration = parse_number(raw_duration) if raw_duration.strip() else None
        gpus = parse_number(raw_gpus) if raw_gpus.strip() else None
        if duration is None or not duration > 0:
            report.drop("duration missing or <= 0", line)
            continue
        if gpus is None or not gpus > 0:
            report.drop("num_gpus missing or <= 0", line)
            continue
        nodes = max(1, math.ceil(gpus / rules.gpus_per_node))
        limit = out_of_limits(duration, gpus, gpus * rules.cpus_per_gpu, gpus * rules.mem_gb_per_gpu, nodes)
        if limit is not None:
            report.drop(limit, line)
            continue
        parsed.append((t, duration, gpus, line))
    if not parsed:
        raise TraceError("no job left after conversion: " + str(report).replace("\n", "; "), path=path)
    t0 = start or min(p[0] for p in parsed)
    jobs = []
    lines = []
    late = f"submitted more than {MAX_TIME:g} s after the window start (schedgym.limits.MAX_TIME)"
    for t, duration, gpus, line in sorted(parsed, key=lambda p: (p[0], p[3])):
        submit = (t - t0).total_seconds()
        if submit > MAX_TIME:
            report.drop(late, line)
            continue
        nodes = max(1, math.ceil(gpus / rules.gpus_per_node))
        if gpus % nodes:
            gpus = float(nodes * math.ceil(gpus / nodes))
            report.change("gang GPUs rounded up to an even split over its nodes", line)
        te = duration <= rules.te_max_duration and gpus <= rules.te_max_gpus
        if gpus <= 1:
            grace = rules.grace_small
        elif gpus <= rules.gpus_per_node:
            grace = rules.grace_medium
        else:
            grace = rules.grace_large
        jobs.append(
            JobSpec(
                job_id=f"philly-{line}",
                submit_time=submit,
                duration=duration,
                gpus=gpus,
                cpus=gpus * rules.cpus_per_gpu,
                mem_gb=gpus * rules.mem_gb_per_gpu,
                gang_size=nodes,
                job_class=JobClass.TE if te else JobClass.BE,
                grace_period=grace,
            )
        )
        lines.append(line)
    report.kept = len(jobs)
    return Workload(tuple(jobs), name="philly", path=path, lines=tuple(lines)), report


_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}( [0-9]{2}:[0-9]{2}:[0-9]{2})?", re.ASCII)


def _timestamp(text: str) -> dt.datetime | None:
    """``YYYY-MM-DD HH:MM:SS`` in ASCII digits (strptime alone also takes other scripts' digits), or None."""
    text = text.strip()
    if _TIMESTAMP.fullmatch(text) is None or len(text) != 19:
        return None
    try:
        return dt.datetime.strptime(text, TIME_FORMAT)
    except ValueError:
        return None

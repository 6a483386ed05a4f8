"""Microsoft Philly (as derived by the Pollux authors) -> the schedgym trace format.

Source columns: ``timestamp`` (``YYYY-MM-DD HH:MM:SS``), ``duration`` (s), ``num_gpus``, ``gpu_time``,
``cluster``. The rules (each a parameter of :class:`PhillyRules`):

- ``submit_time`` = seconds from the window start (``start``, or the first kept timestamp);
- ``duration`` as is; ``gpus = num_gpus``; ``nodes = ceil(gpus / gpus_per_node)``; a gang whose GPUs do not
  split evenly over its nodes is rounded up to the next even split (counted as changed);
- CPUs and memory are not in the trace: imputed as ``cpus_per_gpu`` and ``mem_gb_per_gpu`` per GPU;
- class: TE when ``duration <= te_max_duration`` and ``gpus <= te_max_gpus``, else BE;
- grace period by GPU count: ``grace_small`` s for 1 GPU, ``grace_medium`` s up to ``gpus_per_node``,
  ``grace_large`` s above (published checkpoint costs range 7-62 s);
- rows outside ``[start, end)``, without a parsable time, with a non-positive duration or GPU count are
  dropped, each reason counted;
- ``job_id`` = ``philly-<source line>``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
from dataclasses import dataclass

from schedgym._csvio import read_text
from schedgym.errors import ConfigError, TraceError
from schedgym.sim.job import JobClass, JobSpec
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
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node <= 0:
            raise ConfigError(f"Expected gpus_per_node > 0, got {self.gpus_per_node!r}")
        for name in ("start", "end"):
            if getattr(self, name) is not None:
                parse_time(getattr(self, name), name)
        if self.start and self.end and parse_time(self.start, "start") >= parse_time(self.end, "end"):
            raise ConfigError(f"Expected start < end, got {self.start!r} and {self.end!r}")


def parse_time(text: str, what: str) -> dt.datetime:
    for fmt in (TIME_FORMAT, "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
    raise ConfigError(f"Expected {what} as 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS', got {text!r}")


def convert_philly(path: str, rules: PhillyRules | None = None) -> tuple[Workload, ConversionReport]:
    """Read the Philly CSV at ``path`` and convert it by ``rules``."""
    rules = rules or PhillyRules()
    report = ConversionReport(source=str(path))
    reader = csv.DictReader(io.StringIO(read_text(str(path), "Philly trace"), newline=""))
    for col in ("timestamp", "duration", "num_gpus"):
        if col not in (reader.fieldnames or []):
            raise TraceError(f"missing required column '{col}' (header is {reader.fieldnames})", path=str(path), line=1)
    start = parse_time(rules.start, "start") if rules.start else None
    end = parse_time(rules.end, "end") if rules.end else None
    parsed: list[tuple[dt.datetime, float, float, int]] = []
    for row in reader:
        report.rows += 1
        line = reader.line_num
        try:
            t = dt.datetime.strptime((row.get("timestamp") or "").strip(), TIME_FORMAT)
        except ValueError:
            report.drop("unparsable timestamp", line)
            continue
        if (start and t < start) or (end and t >= end):
            report.drop("outside the time window", line)
            continue
        try:
            duration = float(row.get("duration") or "nan")
            gpus = float(row.get("num_gpus") or "nan")
        except ValueError:
            report.drop("non-numeric duration or num_gpus", line)
            continue
        if not (math.isfinite(duration) and duration > 0):
            report.drop("duration missing or <= 0", line)
            continue
        if not (math.isfinite(gpus) and gpus > 0):
            report.drop("num_gpus missing or <= 0", line)
            continue
        parsed.append((t, duration, gpus, line))
    if not parsed:
        raise TraceError("no job left after conversion: " + str(report).replace("\n", "; "), path=str(path))
    t0 = start or min(p[0] for p in parsed)
    jobs = []
    for t, duration, gpus, line in sorted(parsed, key=lambda p: (p[0], p[3])):
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
                submit_time=(t - t0).total_seconds(),
                duration=duration,
                gpus=gpus,
                cpus=gpus * rules.cpus_per_gpu,
                mem_gb=gpus * rules.mem_gb_per_gpu,
                gang_size=nodes,
                job_class=JobClass.TE if te else JobClass.BE,
                grace_period=grace,
            )
        )
    report.kept = len(jobs)
    return Workload(tuple(jobs), name="philly", path=str(path)), report

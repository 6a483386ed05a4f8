"""What the converters share: checks of their rules and the final assembly of the workload."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from schedgym.errors import ConfigError, TraceError
from schedgym.sim.job import JobSpec
from schedgym.workloads.convert.report import ConversionReport
from schedgym.workloads.trace import Workload


def finite(value: object) -> bool:
    """A real number (not a bool) that is neither infinite nor NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_nonnegative(rules: object, names: tuple[str, ...]) -> None:
    """Every named field is a finite number >= 0."""
    for name in names:
        value = getattr(rules, name)
        if not finite(value) or value < 0:
            raise ConfigError(f"Expected {name} >= 0, got {value!r}")


def check_window(rules: Any) -> None:
    """``start`` and ``end`` are None or finite seconds, with start < end when both are set."""
    for name in ("start", "end"):
        value = getattr(rules, name)
        if value is not None and not finite(value):
            raise ConfigError(f"Expected {name} to be a finite number of seconds or None, got {value!r}")
    start, end = rules.start, rules.end
    if start is not None and end is not None and start >= end:
        raise ConfigError(f"Expected start < end, got {start!r} and {end!r}")


def finish(
    parsed: list[tuple[float, int, JobSpec]], report: ConversionReport, start: float | None, path: str, name: str
) -> tuple[Workload, ConversionReport]:
    """The converted workload from ``(time, source line, job)`` rows: ordered by time (then line), submit
    times measured from ``start`` (or the earliest row); an empty result is an error, not an empty file."""
    if not parsed:
        raise TraceError("no job left after conversion: " + str(report).replace("\n", "; "), path=path)
    t0 = start if start is not None else min(p[0] for p in parsed)
    parsed.sort(key=lambda p: (p[0], p[1]))
    jobs = tuple(replace(job, submit_time=t - t0) for t, _, job in parsed)
    report.kept = len(jobs)
    return Workload(jobs, name=name, path=path, lines=tuple(p[1] for p in parsed)), report

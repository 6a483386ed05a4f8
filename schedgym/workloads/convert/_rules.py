"""What the converters share: checks of their rules and the final assembly of the workload."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from schedgym.errors import ConfigError, TraceError
from schedgym.limits import MAX_AMOUNT, MAX_NODES, MAX_TIME, MIN_DURATION
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


def check_times(rules: object, names: tuple[str, ...]) -> None:
    """Every named field (seconds) is at most :data:`~schedgym.limits.MAX_TIME`, which the trace loader
    enforces: a converter must not write what the loader rejects."""
    for name in names:
        value = getattr(rules, name)
        if finite(value) and value > MAX_TIME:
            raise ConfigError(f"Expected {name} <= {MAX_TIME:g} s (schedgym.limits.MAX_TIME), got {value!r}")


def out_of_limits(duration: float, gpus: float, cpus: float, mem_gb: float, nodes: int) -> str | None:
    """The reason (a report line) why a converted job would break :mod:`schedgym.limits`, or None. The
    converters drop such rows and count them, so that they never write a trace the loader rejects."""
    if not duration >= MIN_DURATION:
        return f"duration under {MIN_DURATION:g} s (schedgym.limits.MIN_DURATION)"
    if not duration <= MAX_TIME:
        return f"duration over {MAX_TIME:g} s (schedgym.limits.MAX_TIME)"
    if not max(gpus, cpus, mem_gb) <= MAX_AMOUNT:
        return f"gpus, cpus or mem_gb over {MAX_AMOUNT:g} (schedgym.limits.MAX_AMOUNT)"
    if nodes > MAX_NODES:
        return f"more than {MAX_NODES:,} nodes (schedgym.limits.MAX_NODES)"
    return None


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
    late = f"submitted more than {MAX_TIME:g} s after the window start (schedgym.limits.MAX_TIME)"
    kept = []
    for t, line, job in parsed:
        if not t - t0 <= MAX_TIME:
            report.drop(late, line)
            continue
        kept.append((line, replace(job, submit_time=t - t0)))
    if not kept:
        raise TraceError("no job left after conversion: " + str(report).replace("\n", "; "), path=path)
    report.kept = len(kept)
    return Workload(tuple(j for _, j in kept), name=name, path=path, lines=tuple(ln for ln, _ in kept)), report

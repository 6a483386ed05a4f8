"""The figures a run is judged by, declared once.

A figure is one statistic of one job class's jobs (:class:`~schedgym.sim.metrics.ClassStats`), such as the
95th percentile of the TE jobs' slowdown. :data:`HEADLINE` holds the four that every tool reports and ranks
on: TE p95 (what a person waiting for a trial-and-error job sees), BE p50, BE p95 and BE p99 (what
preemption costs the best-effort jobs). The dominance verdict of ``schedgym compare`` and ``schedgym
sweep``, the sweep's table and plot, the figures of training's validation and the metrics ``schedgym tune``
ranks trials on all take them from here, so that adding or changing a figure is one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from schedgym.errors import ConfigError
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import ClassStats, RunResult

STATISTICS = tuple(f.name for f in fields(ClassStats) if f.name not in ("n_jobs", "preemptions", "grace_time"))
"""the :class:`ClassStats` fields a figure can be (``slowdown_p95``, ``wait_mean``, ...)"""


@dataclass(frozen=True)
class ClassFigure:
    """One statistic of one job class's jobs (warm-up jobs of a trace window left out by the caller)."""

    job_class: JobClass
    """whose jobs: TE or BE"""
    statistic: str
    """the :class:`ClassStats` field, also the key in :meth:`RunResult.summary` and compare's summary"""

    def __post_init__(self) -> None:
        if not isinstance(self.job_class, JobClass):
            raise ConfigError(f"Expected job_class a JobClass, got {self.job_class!r}")
        if self.statistic not in STATISTICS:
            raise ConfigError(f"Expected statistic in {list(STATISTICS)}, got {self.statistic!r}")

    @property
    def cls(self) -> str:
        """The class as a summary key: ``te`` or ``be``."""
        return self.job_class.name.lower()

    @property
    def short(self) -> str:
        """The statistic without its quantity for slowdowns and its aggregate for waits: ``p95``, ``wait``."""
        return self.statistic.removeprefix("slowdown_").removesuffix("_mean") or self.statistic

    @property
    def key(self) -> str:
        """A short identifier: ``te_p95`` (training's and tune's metric names)."""
        return f"{self.cls}_{self.short}"

    @property
    def column(self) -> str:
        """The full identifier: ``te_slowdown_p95`` (CSV columns, ratios)."""
        return f"{self.cls}_{self.statistic}"

    @property
    def label(self) -> str:
        """A column or panel title: ``TE p95``."""
        return f"{self.job_class.name} {self.short}"

    @property
    def digits(self) -> int:
        """Decimals in the tables: 2 for BE p99 (tens of units), 3 for the others (near 1)."""
        return 2 if self.statistic == "slowdown_p99" else 3

    def of(self, result: RunResult) -> float:
        """This figure of one run (NaN if the class has no jobs in it)."""
        return float(getattr(result.class_stats(self.job_class), self.statistic))

    def in_summary(self, summary: Mapping[str, Any]) -> Any:
        """This figure's entry of a summary keyed by class, then statistic (a run's :meth:`RunResult.summary`,
        a policy's entry in compare's summary, its ``ci95`` or ``paired[ref]``)."""
        return summary[self.cls][self.statistic]


TE_P95 = ClassFigure(JobClass.TE, "slowdown_p95")
BE_P50 = ClassFigure(JobClass.BE, "slowdown_p50")
BE_P95 = ClassFigure(JobClass.BE, "slowdown_p95")
BE_P99 = ClassFigure(JobClass.BE, "slowdown_p99")
HEADLINE = (TE_P95, BE_P50, BE_P95, BE_P99)
"""the four figures every tool reports, and a policy must be no worse on, and better on one, to dominate
another (issue 11's criterion)"""
HEADLINE_KEYS = tuple(f.key for f in HEADLINE)
"""``te_p95``, ``be_p50``, ``be_p95``, ``be_p99``"""


def objective(summary: Mapping[str, Any], te_weight: float = 1.0, be_weight: float = 1.0) -> float:
    """The environment's objective for one run (a :meth:`RunResult.summary`): the mean weighted slowdown per
    job, ``(te_weight * sum of TE slowdowns + be_weight * sum of BE slowdowns) / jobs``, over the jobs the
    summary counts (a trace window's warm-up jobs are not). Minus the return of an episode with the default
    reward, divided by its jobs. NaN if the run counts no job."""
    total = weighted = 0.0
    for cls, weight in (("te", te_weight), ("be", be_weight)):
        n = summary[cls]["n_jobs"]
        if n:
            total += n
            weighted += weight * summary[cls]["slowdown_mean"] * n
    return weighted / total if total else float("nan")


def headline_figures(result: RunResult) -> dict[str, float]:
    """The :data:`HEADLINE` figures of one run, by key."""
    return {f.key: f.of(result) for f in HEADLINE}


__all__ = [
    "BE_P50",
    "BE_P95",
    "BE_P99",
    "HEADLINE",
    "HEADLINE_KEYS",
    "STATISTICS",
    "TE_P95",
    "ClassFigure",
    "headline_figures",
    "objective",
]

"""Named workloads from real traces, shipped inside the package (``schedgym/data/``, see its README for
origin and licences), with train / validation / test windows by time.

A *window* is a stretch of the trace's submissions, simulated from an empty cluster after a *warm-up*
stretch before it: warm-up jobs run (so the cluster is as busy as it was) but do not count in the results.
``schedgym compare --workload philly --seeds N`` runs the first N test windows; the environment draws its
episodes from the training split.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

from schedgym.errors import ConfigError, UnknownNameError
from schedgym.workloads.trace import Workload, load_trace

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DAY = 86400.0
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class TraceWorkload:
    """A bundled converted trace and how it is cut into windows (times in days from the trace start)."""

    name: str
    file: str
    cluster: str
    splits: dict[str, tuple[float, float]]
    window_days: float
    warmup_days: float
    description: str

    def windows(self, split: str) -> list[tuple[float, float]]:
        """(start, end) in seconds of each window of ``split``, in time order."""
        if split not in self.splits:
            raise ConfigError(f"Expected split in {list(self.splits)}, got {split!r}")
        lo, hi = self.splits[split]
        out = []
        t = lo
        while t + self.window_days <= hi + 1e-9:
            out.append((t * DAY, (t + self.window_days) * DAY))
            t += self.window_days
        return out

    def window(self, split: str, index: int) -> Workload:
        """Window ``index`` of ``split``: its jobs plus the warm-up jobs before it, submit times shifted so
        that the warm-up starts at 0; ``measured`` marks the window's own jobs."""
        wins = self.windows(split)
        if not 0 <= index < len(wins):
            raise ConfigError(
                f"Workload {self.name!r} has {len(wins)} {split} windows (0..{len(wins) - 1}), got {index}"
            )
        start, end = wins[index]
        lo = max(0.0, start - self.warmup_days * DAY)
        jobs = [j for j in self.load().jobs if lo <= j.submit_time < end]
        t0 = min(j.submit_time for j in jobs)
        shifted = tuple(replace(j, submit_time=j.submit_time - t0) for j in jobs)
        measured = tuple(j.submit_time >= start for j in jobs)
        return Workload(shifted, name=f"{self.name}/{split}[{index}]", measured=measured)

    def split_jobs(self, split: str) -> Workload:
        """Every job submitted during ``split`` (for environments that cut their own episodes)."""
        lo, hi = self.splits[split]
        jobs = tuple(j for j in self.load().jobs if lo * DAY <= j.submit_time < hi * DAY)
        return Workload(jobs, name=f"{self.name}/{split}")

    def load(self) -> Workload:
        return _load(self.file)


@functools.lru_cache(maxsize=4)
def _load(file: str) -> Workload:
    return load_trace(DATA_DIR / file)


TRACE_WORKLOADS: dict[str, TraceWorkload] = {
    "philly": TraceWorkload(
        name="philly",
        file="philly.csv.gz",
        cluster="philly",
        # The converted window starts 2017-09-25: train Sep 25 - Oct 15, validation Oct 16-22, test Oct 23 - Nov 5.
        splits={"train": (0.0, 21.0), "validation": (21.0, 28.0), "test": (28.0, 42.0)},
        window_days=2.0,
        warmup_days=2.0,
        description="Microsoft Philly, 2017-09-25 to 2017-11-05, 54,784 jobs, on 64 x 8 GPUs",
    ),
    "alibaba2023": TraceWorkload(
        name="alibaba2023",
        file="alibaba2023.csv.gz",
        cluster="alibaba2023",
        # The pods alive in the trace's last 34 days (from t = 9,964,972 s): train days 0-20, validation
        # 20-24, test 24-34.
        splits={"train": (0.0, 20.0), "validation": (20.0, 24.0), "test": (24.0, 34.0)},
        window_days=2.0,
        warmup_days=2.0,
        description="Alibaba GPU trace 2023, 7,222 pods, on its own 1,213 heterogeneous nodes (6,212 GPUs)",
    ),
}


def trace_workload(name: str) -> TraceWorkload:
    try:
        return TRACE_WORKLOADS[name]
    except KeyError:
        raise UnknownNameError(f"Unknown trace workload {name!r}; expected one of {sorted(TRACE_WORKLOADS)}") from None

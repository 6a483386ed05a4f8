"""Per-job records and aggregates of a finished simulation.

Definitions (see docs/semantics.md):
- slowdown = (completion - submit) / duration
- bounded slowdown = max(1, (completion - submit) / max(duration, TAU)) with TAU = 10 s
- wait = completion - submit - run time: every second in the system without running (queued, or in a
  grace period); run time includes restart overhead
- GPU (CPU) utilisation = GPU-seconds of run segments / (cluster GPUs x makespan), where makespan runs
  from the first submission to the last completion. Grace periods do not count as useful work.
- percentiles use numpy's default (linear interpolation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

import numpy as np

from schedgym.sim.job import Job, JobClass

TAU = 10.0


class Segment(NamedTuple):
    """One uninterrupted run of one job on one node (a gang job has one segment per node per run)."""

    job: int  # job index
    node: int
    start: float
    end: float
    end_reason: str  # "completed" | "preempted"


class SegmentTable(Sequence[Segment]):
    """Run segments held as columns; a :class:`Segment` is made when one is read. A native run of 50,000
    jobs has some 60,000 segments, and most results never look at them."""

    def __init__(self, job: np.ndarray, node: np.ndarray, start: np.ndarray, end: np.ndarray, completed: np.ndarray):
        self._columns = (job, node, start, end, completed)

    @classmethod
    def from_segments(cls, segments: Sequence[Segment]) -> SegmentTable:
        """The columns of a list of :class:`Segment` (the Python engine's)."""
        return cls(
            np.array([s.job for s in segments], dtype=np.int64),
            np.array([s.node for s in segments], dtype=np.int64),
            np.array([s.start for s in segments], dtype=np.float64),
            np.array([s.end for s in segments], dtype=np.float64),
            np.array([s.end_reason == "completed" for s in segments], dtype=np.bool_),
        )

    @property
    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(job, node, start, end, completed)``, as given (a run folder stores them)."""
        return self._columns

    def __len__(self) -> int:
        return len(self._columns[0])

    @overload
    def __getitem__(self, i: int) -> Segment: ...
    @overload
    def __getitem__(self, i: slice) -> list[Segment]: ...
    def __getitem__(self, i: int | slice) -> Segment | list[Segment]:
        if isinstance(i, slice):
            return list(self)[i]
        job, node, start, end, completed = self._columns
        return Segment(int(job[i]), int(node[i]), float(start[i]), float(end[i]), _reason(bool(completed[i])))

    def __iter__(self) -> Iterator[Segment]:
        job, node, start, end, completed = (c.tolist() for c in self._columns)
        for row in zip(job, node, start, end, completed, strict=True):
            yield Segment(row[0], row[1], row[2], row[3], _reason(row[4]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SegmentTable({len(self)} segments)"


def _reason(completed: bool) -> str:
    return "completed" if completed else "preempted"


@dataclass(frozen=True, slots=True)
class ClassStats:
    """Aggregates over the jobs of one class."""

    n_jobs: int
    slowdown_p50: float
    slowdown_p95: float
    slowdown_p99: float
    slowdown_mean: float
    bounded_slowdown_p95: float
    bounded_slowdown_mean: float
    wait_mean: float
    wait_p95: float
    preemptions: int
    grace_time: float

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__slots__}


PER_JOB_ARRAYS = (
    "job_class",
    "submit",
    "duration",
    "gpus",
    "cpus",
    "first_start",
    "completion",
    "preemptions",
    "grace_time",
    "overhead_time",
    "run_time",
)
""":class:`RunResult`'s arrays indexed by job (with ``job_ids``, the per-job results)."""


@dataclass(frozen=True)
class RunResult:
    """Everything measured in one run. Arrays are indexed by job index (trace order)."""

    job_ids: list[str]
    job_class: np.ndarray
    submit: np.ndarray
    duration: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    first_start: np.ndarray
    completion: np.ndarray
    preemptions: np.ndarray
    grace_time: np.ndarray
    overhead_time: np.ndarray
    run_time: np.ndarray
    segments: Sequence[Segment]
    capacity_total: np.ndarray
    n_preemptions: int
    # Preemption requests the policy answered (offers to pending TE jobs), for the whole run even after only().
    n_requests: int
    # Set by only(): a subset keeps the utilisation of the whole run it was cut from (the utilisation of a
    # subset of jobs over their own makespan would mean nothing).
    whole_run_utilization: tuple[float, float] | None = None

    @property
    def slowdown(self) -> np.ndarray:
        out: np.ndarray = (self.completion - self.submit) / self.duration
        return out

    @property
    def bounded_slowdown(self) -> np.ndarray:
        out: np.ndarray = np.maximum(1.0, (self.completion - self.submit) / np.maximum(self.duration, TAU))
        return out

    @property
    def wait(self) -> np.ndarray:
        out: np.ndarray = self.completion - self.submit - self.run_time
        return out

    @property
    def makespan(self) -> float:
        if len(self.submit) == 0:
            return 0.0
        return float(self.completion.max() - self.submit.min())

    def _utilization(self, per_job: np.ndarray, total: float) -> float:
        span = self.makespan
        if span <= 0 or total <= 0:
            return 0.0
        return float((per_job * self.run_time).sum() / (total * span))

    @property
    def gpu_utilization(self) -> float:
        if self.whole_run_utilization is not None:
            return self.whole_run_utilization[0]
        return self._utilization(self.gpus, float(self.capacity_total[0]))

    @property
    def cpu_utilization(self) -> float:
        if self.whole_run_utilization is not None:
            return self.whole_run_utilization[1]
        return self._utilization(self.cpus, float(self.capacity_total[1]))

    def only(self, mask: np.ndarray) -> RunResult:
        """The same run restricted to the jobs where ``mask`` is True (e.g. without a warm-up period)."""
        mask = np.asarray(mask, dtype=bool)
        keep = np.flatnonzero(mask)
        new_index = {int(old): new for new, old in enumerate(keep)}
        arrays = {name: getattr(self, name)[mask] for name in PER_JOB_ARRAYS}
        segments = [s._replace(job=new_index[s.job]) for s in self.segments if s.job in new_index]
        return RunResult(
            job_ids=[self.job_ids[i] for i in keep],
            segments=segments,
            capacity_total=self.capacity_total,
            n_preemptions=int(arrays["preemptions"].sum()),
            n_requests=self.n_requests,
            whole_run_utilization=(self.gpu_utilization, self.cpu_utilization),
            **arrays,
        )

    def class_stats(self, job_class: JobClass) -> ClassStats:
        mask = self.job_class == int(job_class)
        sd = self.slowdown[mask]
        if sd.size == 0:
            nan = float("nan")
            return ClassStats(0, nan, nan, nan, nan, nan, nan, nan, nan, 0, 0.0)
        bsd = self.bounded_slowdown[mask]
        wait = self.wait[mask]
        p50, p95, p99 = np.percentile(sd, [50, 95, 99])
        return ClassStats(
            n_jobs=int(sd.size),
            slowdown_p50=float(p50),
            slowdown_p95=float(p95),
            slowdown_p99=float(p99),
            slowdown_mean=float(sd.mean()),
            bounded_slowdown_p95=float(np.percentile(bsd, 95)),
            bounded_slowdown_mean=float(bsd.mean()),
            wait_mean=float(wait.mean()),
            wait_p95=float(np.percentile(wait, 95)),
            preemptions=int(self.preemptions[mask].sum()),
            grace_time=float(self.grace_time[mask].sum()),
        )

    def summary(self) -> dict[str, Any]:
        """Aggregates as plain JSON-ready data."""
        return {
            "te": self.class_stats(JobClass.TE).as_dict(),
            "be": self.class_stats(JobClass.BE).as_dict(),
            "preemptions": self.n_preemptions,
            "requests": self.n_requests,
            "gpu_utilization": self.gpu_utilization,
            "cpu_utilization": self.cpu_utilization,
            "makespan": self.makespan,
        }


def build_result(
    jobs: list[Job], segments: list[Segment], capacity: np.ndarray, n_preemptions: int, n_requests: int
) -> RunResult:
    def col(getter: Callable[[Job], Any], dtype: type = np.float64) -> np.ndarray:
        return np.fromiter((getter(j) for j in jobs), dtype=dtype, count=len(jobs))

    return RunResult(
        job_ids=[j.spec.job_id for j in jobs],
        job_class=col(lambda j: int(j.spec.job_class), np.int64),
        submit=col(lambda j: j.spec.submit_time),
        duration=col(lambda j: j.spec.duration),
        gpus=col(lambda j: j.spec.gpus),
        cpus=col(lambda j: j.spec.cpus),
        first_start=col(lambda j: j.first_start),
        completion=col(lambda j: j.completion),
        preemptions=col(lambda j: j.preemptions, np.int64),
        grace_time=col(lambda j: j.grace_time),
        overhead_time=col(lambda j: j.overhead_time),
        run_time=col(lambda j: j.run_time),
        segments=segments,
        capacity_total=capacity.sum(axis=0),
        n_preemptions=n_preemptions,
        n_requests=n_requests,
    )

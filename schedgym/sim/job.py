"""Jobs: the immutable description read from a trace (:class:`JobSpec`) and the simulator's
mutable runtime record (:class:`Job`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

# Order of the resource axes everywhere in schedgym (arrays of shape (..., 3)).
RESOURCES: tuple[str, str, str] = ("gpus", "cpus", "mem_gb")


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
    """

    job_id: str
    submit_time: float
    duration: float
    gpus: float
    cpus: float = 0.0
    mem_gb: float = 0.0
    gang_size: int = 1
    job_class: JobClass = JobClass.BE
    grace_period: float = 0.0

    @property
    def member_demand(self) -> tuple[float, float, float]:
        """Demand on each node the job occupies."""
        k = self.gang_size
        return (self.gpus / k, self.cpus / k, self.mem_gb / k)


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
    declined_version: int = -1  # cluster version at which the policy last declined to preempt for it
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

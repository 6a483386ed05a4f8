"""The one narrow interface between the simulator and whoever decides preemptions.

In each scheduling pass the simulator offers every pending TE job that cannot be placed (and has no
reservation) to a *preemption policy*: it builds a :class:`PreemptionRequest` and expects a
:class:`PreemptionPlan` back. A baseline rule answers in-process; the Gymnasium environment instead hands
the request to an agent. Nothing here knows about gymnasium.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from schedgym.sim.job import Job


class QueueDiscipline(str, enum.Enum):
    """Order in which pending jobs are considered.

    ``fifo``: one queue by submit time. ``priority``: every TE job before every BE job, each by submit time.
    Preempted jobs keep their original submit time.
    """

    FIFO = "fifo"
    PRIORITY = "priority"


@dataclass(frozen=True, slots=True)
class PreemptionRequest:
    """What a preemption policy sees when a TE job cannot be placed.

    Attributes:
        job: the waiting TE job (read-only).
        now: simulated time (s).
        avail: per-node resources that this job could use right now, ``unused - held`` (read-only view,
            shape (n_nodes, 3): gpus, cpus, mem_gb). ``held`` are resources promised to reserved TE jobs.
        capacity: per-node capacities (read-only view, same shape).
        candidates: for each node index, the preemptible jobs that run there (RUNNING, class BE, fewer
            than ``max_preemptions`` preemptions), in order of job index. Only nodes with at least one
            candidate appear. A gang candidate appears on each of its nodes.
        capacity_rows: ``capacity`` as nested Python lists (scalar arithmetic on three numbers is
            cheaper in plain Python than in numpy).
    """

    job: Job
    now: float
    avail: np.ndarray
    capacity: np.ndarray
    candidates: dict[int, list[Job]]
    capacity_rows: list[list[float]]

    @property
    def demand(self) -> np.ndarray:
        """The waiting job's demand on each of the nodes it needs."""
        return self.job.member

    @property
    def gang_size(self) -> int:
        """Distinct nodes the waiting job needs."""
        return self.job.gang_size


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    """A policy's answer: ``nodes`` (one distinct node per gang member of the TE job) and the ``victims``
    (job indices) to preempt. The empty plan means "preempt nothing, the TE job waits".

    The simulator checks that the plan is legal: every victim is a candidate, the nodes are distinct and as
    many as the job has gang members, and once the victims are gone every node has room for the job.
    """

    nodes: tuple[int, ...] = ()
    victims: tuple[int, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.nodes


DECLINE = PreemptionPlan()


@runtime_checkable
class PreemptionPolicy(Protocol):
    """Anything that answers preemption requests. Baselines in ``baselines/`` implement it."""

    def decide(self, request: PreemptionRequest) -> PreemptionPlan:  # pragma: no cover - protocol
        ...

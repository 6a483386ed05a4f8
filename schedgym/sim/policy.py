"""The one interface between the simulator and everything that decides preemptions.

In each scheduling pass the simulator offers every pending TE job that cannot be placed (and has no
reservation) to a *preemption policy*: it builds a :class:`PreemptionRequest` and expects a
:class:`PreemptionPlan` back. Everything that acts is a :class:`Policy`: the baseline rules in
``baselines/`` and the learned agents in ``agents/`` alike, so :meth:`Simulator.run
<schedgym.sim.simulator.Simulator.run>` and the comparison harness run them the same way. The Gymnasium
environment hands the same requests to an agent one victim at a time (:mod:`schedgym.decision`).
Nothing here knows about gymnasium.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import numpy as np

from schedgym.sim.job import Job

if TYPE_CHECKING:
    from schedgym.sim.simulator import Simulator


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
        held: per-node resources set aside for reserved TE jobs (read-only view, same shape);
            ``avail + held`` is what no running or grace-period job occupies.
        queued: (TE, BE) jobs waiting, reserved TE jobs included.
        n_jobs: jobs in the whole workload (the request's ``job.idx`` and the candidates' are below it).
        max_preemptions: the simulator's cap P.
        sim: the simulation that asks (None for a request built by hand), for policies that look ahead: they
            may read it and :meth:`~schedgym.sim.simulator.Simulator.clone` it, but must not drive it (only
            the caller resolves the request). Not part of the request's equality or repr.
    """

    job: Job
    now: float
    avail: np.ndarray
    capacity: np.ndarray
    candidates: dict[int, list[Job]]
    capacity_rows: list[list[float]]
    held: np.ndarray
    queued: tuple[int, int]
    n_jobs: int
    max_preemptions: int
    sim: Simulator | None = field(default=None, compare=False, repr=False)

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
    """Anything that answers preemption requests (what :meth:`Simulator.run` needs)."""

    def decide(self, request: PreemptionRequest) -> PreemptionPlan:  # pragma: no cover - protocol
        ...


class Policy:
    """Base class of everything that acts: a queue discipline, whether it preempts, and how.

    Template method, as in stable-baselines3: :meth:`decide` is public and answers :data:`DECLINE` for a
    policy that never preempts; subclasses implement :meth:`_decide`.

    Attributes:
        name: registry name (display name of a loaded agent).
        queue: the queue discipline the policy schedules with (a learned agent: the one it was trained with).
        preempts: False for policies that never preempt (the simulator then never asks them).
    """

    name: str = "policy"
    queue: QueueDiscipline = QueueDiscipline.PRIORITY
    preempts: ClassVar[bool] = False

    def reset(self, rng: np.random.Generator | None = None) -> None:
        """Start a new run (one simulation); randomised policies draw only from ``rng``. Without one, from
        ``default_rng(0)``: a policy reset alone repeats itself, as everything else in schedgym does."""
        self.rng = rng if rng is not None else np.random.default_rng(0)

    def decide(self, request: PreemptionRequest) -> PreemptionPlan:
        """Answer one preemption request."""
        if not self.preempts:
            return DECLINE
        return self._decide(request)

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        return DECLINE

    def native_rule(self) -> tuple[str, Mapping[str, object]] | None:
        """``(name, parameters)`` of the same rule in the native engine, which then decides without calling
        Python; None (the default) if there is none: the engine asks :meth:`decide` instead. A randomised rule
        passes its numpy Generator as a parameter: the native rule draws from it what the Python rule would,
        and leaves it where the Python rule would."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

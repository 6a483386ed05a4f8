"""Non-preemptive references: ``fifo`` (the paper's baseline) and ``priority``."""

from __future__ import annotations

from baselines.base import Policy
from schedgym.sim.policy import QueueDiscipline


class Fifo(Policy):
    """One queue by submit time; never preempts. The paper's reference point."""

    name = "fifo"
    queue = QueueDiscipline.FIFO
    preempts = False


class Priority(Policy):
    """Every TE job before every BE job (each by submit time); never preempts."""

    name = "priority"
    queue = QueueDiscipline.PRIORITY
    preempts = False

"""``random``: a uniformly random feasible node, and victims in random order until the job fits."""

from __future__ import annotations

import numpy as np

from baselines.base import NodeByNodePolicy, freed
from schedgym.sim.job import Job
from schedgym.sim.policy import PreemptionRequest, QueueDiscipline
from schedgym.sim.resources import Vec, covers


class RandomPreemption(NodeByNodePolicy):
    """Priority queue; preempts at random among feasible choices. All draws come from ``reset(rng)``."""

    name = "random"
    queue = QueueDiscipline.PRIORITY

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def _evaluate_node(
        self, request: PreemptionRequest, node: int, deficit: Vec, candidates: list[Job]
    ) -> tuple[tuple, list[Job]] | None:
        victims: list[Job] = []
        for i in self.rng.permutation(len(candidates)).tolist():
            victims.append(candidates[i])
            if covers(freed(victims), deficit):
                break
        return (float(self.rng.random()),), victims

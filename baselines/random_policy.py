"""``random``: a uniformly random feasible node, and victims in random order until the job fits."""

from __future__ import annotations

import numpy as np

from baselines.base import NodeByNodePolicy, take_until_covered
from schedgym.sim.job import Job
from schedgym.sim.policy import PreemptionRequest, QueueDiscipline
from schedgym.sim.resources import Vec


class RandomPreemption(NodeByNodePolicy):
    """Priority queue; preempts at random among feasible choices. All draws come from ``reset(rng)``."""

    name = "random"
    queue = QueueDiscipline.PRIORITY

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def native_rule(self) -> tuple[str, dict[str, np.random.Generator]] | None:
        # The native rule reproduces numpy's PCG64 draws, so it stands in only for this exact class drawing from
        # exactly a PCG64 Generator; a subclass, or another generator, is asked in Python.
        if type(self) is not RandomPreemption or type(self.rng) is not np.random.Generator:
            return None
        if type(self.rng.bit_generator) is not np.random.PCG64:
            return None
        return "random", {"rng": self.rng}

    def _evaluate_node(
        self, request: PreemptionRequest, node: int, deficit: Vec, candidates: list[Job]
    ) -> tuple[tuple, list[Job]] | None:
        victims = take_until_covered((candidates[i] for i in self.rng.permutation(len(candidates)).tolist()), deficit)
        return (float(self.rng.random()),), victims

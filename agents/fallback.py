"""A learned agent that leaves small clusters to a rule.

Imitation students trained on the ``mix`` distribution of clusters were worse than fitgpp on the shift suite's
two small clusters (4 and 3 nodes) on its validation seeds, and fine elsewhere (docs/log.md, seventh
session). :class:`SmallClusterFallback` lets the rule decide on clusters of at most ``max_nodes`` nodes and
the agent on larger ones; the bundled ``dagger-mix`` is one (``agents/bundled/manifest.json``'s ``fallback``).
"""

from __future__ import annotations

import numpy as np

from schedgym.errors import SchedGymError
from schedgym.sim.policy import Policy, PreemptionPlan, PreemptionRequest


class SmallClusterFallback(Policy):
    """``rule`` decides on clusters of at most ``max_nodes`` nodes, ``agent`` on larger ones.

    The agent draws from the run's generator itself and the rule from a generator spawned from it (spawning
    does not advance it), so on a cluster larger than ``max_nodes`` this policy is the agent, run for run.
    """

    preempts = True

    def __init__(self, agent: Policy, rule: Policy, max_nodes: int, *, name: str = "fallback"):
        if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 0:
            raise SchedGymError(f"Expected max_nodes to be an integer >= 0, got {max_nodes!r}")
        if agent.queue != rule.queue:  # the simulator schedules the queue with one discipline
            raise SchedGymError(
                f"{name}: the agent queues by {agent.queue.value}, the rule {rule.name!r} by {rule.queue.value}"
            )
        self.agent, self.rule, self.max_nodes = agent, rule, max_nodes
        self.queue = agent.queue
        self.name = name

    def __repr__(self) -> str:
        return f"SmallClusterFallback(agent={self.agent!r}, rule={self.rule.name!r}, max_nodes={self.max_nodes})"

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        self.rule.reset(self.rng.spawn(1)[0])
        self.agent.reset(self.rng)

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        small = request.capacity.shape[0] <= self.max_nodes
        return (self.rule if small else self.agent).decide(request)


__all__ = ["SmallClusterFallback"]

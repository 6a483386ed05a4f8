"""A learned agent that leaves small clusters to a rule.

Imitation students trained on the ``mix`` distribution of clusters had an objective above fitgpp's on the shift
suite's 4-node cluster, and a TE p95 many times fitgpp's on its 3-node Alibaba windows, on the suite's
validation seeds (docs/log.md, seventh session; the 4-node failure was first seen on its test seeds).
:class:`SmallClusterFallback` lets the rule decide on clusters of at most ``max_nodes`` nodes and the agent on
larger ones; the bundled ``dagger-mix`` is one (``agents/bundled/manifest.json``'s ``fallback``).
"""

from __future__ import annotations

import numpy as np

from schedgym.errors import SchedGymError
from schedgym.sim.policy import Policy, PreemptionPlan, PreemptionRequest


class SmallClusterFallback(Policy):
    """``rule`` decides on clusters of at most ``max_nodes`` nodes, ``agent`` on larger ones.

    A run has one cluster, so one of the two decides all of it. Both are reset with the run's generator itself,
    so the one that decides draws what it would draw alone: this policy is the rule, run for run, on a cluster of
    at most ``max_nodes`` nodes and the agent on a larger one, provided resetting the other neither draws from
    nor spawns the generator (true of the learned agents; the rule is reset first, so a rule that spawns at
    reset, as ``lookahead`` does, is exact too).
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
        self.rule.reset(self.rng)
        self.agent.reset(self.rng)

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        small = request.capacity.shape[0] <= self.max_nodes
        return (self.rule if small else self.agent).decide(request)


__all__ = ["SmallClusterFallback"]

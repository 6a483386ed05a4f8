"""What every baseline shares: the policy interface and the per-node preemption template.

A baseline is a scheduling policy in the simulator's terms: a queue discipline (``queue``), whether it
ever preempts (``preempts``) and, if it does, how it answers a
:class:`~schedgym.sim.policy.PreemptionRequest` (``decide``).

Preemptive baselines share one template (:class:`NodeByNodePolicy`): each node is evaluated on its own
(which victims would make room there, and at what score); the ``k`` best nodes are taken for a job with
``k`` gang members, and the plan is the union of their victim sets. For a gang, nodes that already have
room cost nothing and are always preferred (a single-node job is only offered when no node has room).
Subclasses implement only ``_evaluate_node``.

Resource vectors here are plain ``(gpus, cpus, mem_gb)`` tuples (see :mod:`schedgym.sim.resources`).
"""

from __future__ import annotations

from collections.abc import Iterable

from schedgym.sim.job import Job
from schedgym.sim.policy import DECLINE, Policy, PreemptionPlan, PreemptionRequest
from schedgym.sim.resources import Vec, covers, fits_on, shortfall

__all__ = ["NodeByNodePolicy", "Policy", "freed", "prune", "take_until_covered"]


def freed(victims: list[Job]) -> Vec:
    """Per-node resources the victims free on a node they share."""
    g = c = m = 0.0
    for v in victims:  # written out: this runs for every candidate set of every decision
        d = v.demand
        g += d[0]
        c += d[1]
        m += d[2]
    return (g, c, m)


def take_until_covered(ordered: Iterable[Job], deficit: Vec) -> list[Job]:
    """Victims taken from ``ordered`` in turn until what they free covers ``deficit``."""
    victims: list[Job] = []
    for c in ordered:
        victims.append(c)
        if covers(freed(victims), deficit):
            break
    return victims


def prune(victims: list[Job], deficit: Vec) -> list[Job]:
    """Drop victims, last chosen first, that are not needed to cover ``deficit`` (fewer preemptions)."""
    kept = list(victims)
    for v in reversed(victims):
        rest = [u for u in kept if u is not v]
        if covers(freed(rest), deficit):
            kept = rest
    return kept


class NodeByNodePolicy(Policy):
    """Template for preemptive baselines: score every node independently, take the best ``k``."""

    preempts = True

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        need = request.job.demand
        k = request.gang_size
        avail = request.avail.tolist()
        feasible: list[tuple[int, Vec, list[Job]]] = []
        for n, cands in request.candidates.items():
            a = avail[n]
            if covers(a, need):
                # Room without preemption: only a gang gets here, handled below. The same test as for the
                # gang's room below, so that no node is both a room option and a preemption option.
                continue
            deficit = shortfall(a, need)
            if covers(freed(cands), deficit):
                feasible.append((n, deficit, cands))
        options: list[tuple[tuple, int, list[Job]]] = []
        if k > 1:
            # A gang may use nodes that already have room (at no cost) for some of its members.
            for n in fits_on(request.avail, request.job.member).nonzero()[0].tolist():
                options.append(((float("-inf"),), n, []))
        if len(options) + len(feasible) < k:
            # Decline before scoring anything, so that a randomised rule draws nothing for a request that
            # offers no choice (the environment declines those without asking, and must stay in step).
            return DECLINE
        for n, deficit, cands in feasible:
            evaluated = self._evaluate_node(request, n, deficit, cands)
            if evaluated is not None:
                score, node_victims = evaluated
                options.append((score, n, node_victims))
        if len(options) < k:
            return DECLINE
        options.sort(key=lambda o: (o[0], o[1]))
        chosen = options[:k]
        victims: list[int] = []
        for _, _, vs in chosen:
            for v in vs:
                if v.idx not in victims:
                    victims.append(v.idx)
        if not victims:
            return DECLINE  # room exists without preemption; the job will be placed normally
        return PreemptionPlan(nodes=tuple(n for _, n, _ in chosen), victims=tuple(victims))

    def _evaluate_node(
        self, request: PreemptionRequest, node: int, deficit: Vec, candidates: list[Job]
    ) -> tuple[tuple, list[Job]] | None:
        """Return ``(score, victims)`` for making room on ``node`` (lower score is better), or None.

        ``deficit`` (> 0 in some resource) is what the node lacks; ``candidates`` together cover it.
        """
        raise NotImplementedError

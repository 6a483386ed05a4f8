"""Whole plans as options: the option set of a preemption request, written once.

A :class:`~schedgym.sim.policy.PreemptionRequest` can be answered by many plans. The *plan option set* is the
one ``lookahead`` (:mod:`baselines.lookahead`) plays out and the plan-level action mode of the environment
(:mod:`schedgym.decision.plan_mode`) offers an agent, in this order, identical plans (as sets of nodes and
victims) listed once, the first kept:

1. wait: the empty plan (:data:`~schedgym.sim.policy.DECLINE`);
2. the plans of the given rules (by default ``fitgpp`` and ``k8s``), each asked on the request itself;
3. for a job of one node: on every node where preemption can make room, the fewest of that node's candidates
   that do (:func:`fewest_victims`). A gang is offered the rules' plans only.

Each option carries the sources that proposed it (:class:`PlanOption`), so that a plan both ``fitgpp`` and a
per-node search propose appears once and says so. Nothing here knows of gymnasium or of ``baselines``: the
rules are :class:`~schedgym.sim.policy.Policy` objects handed in (built by name through
:mod:`schedgym.registry`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from schedgym.sim.job import Job
from schedgym.sim.policy import DECLINE, Policy, PreemptionPlan, PreemptionRequest
from schedgym.sim.resources import Vec, covers, shortfall, total_demand

MAX_SUBSET_CANDIDATES = 12
"""A node with more candidates than this gets no fewest-victims option (the search tries subsets)."""

PER_NODE = "per_node"
"""The source name of a fewest-victims option (:class:`PlanOption.sources`)."""
WAIT = "wait"
"""The source name of the wait option."""


@dataclass(frozen=True, slots=True)
class PlanOption:
    """One distinct plan of a request and who proposed it: ``"wait"``, a rule's name, or ``"per_node"``."""

    plan: PreemptionPlan
    sources: frozenset[str]

    @property
    def key(self) -> tuple[frozenset[int], frozenset[int]]:
        """The plan as sets of nodes and victims: two options with one key are the same plan."""
        return plan_key(self.plan)


def plan_key(plan: PreemptionPlan) -> tuple[frozenset[int], frozenset[int]]:
    """``plan`` as sets of nodes and victims (the order in which a rule lists them does not matter)."""
    return (frozenset(plan.nodes), frozenset(plan.victims))


def plan_options(
    request: PreemptionRequest, rules: Sequence[tuple[str, Policy]], *, per_node: bool = True
) -> list[PlanOption]:
    """The distinct options of ``request`` in the order above: wait first, then each ``(name, rule)``'s plan,
    then (``per_node``, a job of one node) the fewest-victims plan of every node in node order."""
    out: list[PlanOption] = [PlanOption(DECLINE, frozenset({WAIT}))]
    where: dict[tuple[frozenset[int], frozenset[int]], int] = {plan_key(DECLINE): 0}

    def add(plan: PreemptionPlan, source: str) -> None:
        key = plan_key(plan)
        i = where.get(key)
        if i is None:
            where[key] = len(out)
            out.append(PlanOption(plan, frozenset({source})))
        else:
            out[i] = PlanOption(out[i].plan, out[i].sources | {source})

    for name, rule in rules:
        add(rule.decide(request), name)
    if per_node and request.gang_size == 1:
        for _, plan in per_node_plans(request):
            add(plan, PER_NODE)
    return out


def per_node_plans(request: PreemptionRequest) -> list[tuple[int, PreemptionPlan]]:
    """For a job of one node: ``(node, plan)`` of the fewest victims that make room on each node, in node order
    (nodes where the job fits already, or where no subset of at most :data:`MAX_SUBSET_CANDIDATES` candidates
    makes room, have none)."""
    need = request.job.demand
    avail = request.avail.tolist()
    out: list[tuple[int, PreemptionPlan]] = []
    for n, cands in request.candidates.items():
        if covers(avail[n], need):
            continue
        victims = fewest_victims(shortfall(avail[n], need), cands)
        if victims is not None:
            out.append((n, PreemptionPlan(nodes=(n,), victims=tuple(v.idx for v in victims))))
    return out


def fewest_victims(deficit: Vec, candidates: list[Job]) -> list[Job] | None:
    """The fewest ``candidates`` (a node's, by job index) whose per-node demands cover ``deficit`` there; ties to
    the shorter longest grace period, then to the lower job indices. None if they cannot, or if there are more
    than :data:`MAX_SUBSET_CANDIDATES` of them."""
    if len(candidates) > MAX_SUBSET_CANDIDATES or not covers(total_demand(v.demand for v in candidates), deficit):
        return None
    for size in range(1, len(candidates) + 1):
        best: tuple[float, tuple[int, ...]] | None = None
        chosen: tuple[Job, ...] = ()
        for subset in itertools.combinations(candidates, size):  # in lexicographic order of job index
            if covers(total_demand(v.demand for v in subset), deficit):
                key = (max(v.spec.grace_period for v in subset), tuple(v.idx for v in subset))
                if best is None or key < best:
                    best, chosen = key, subset
        if best is not None:
            return list(chosen)
    return None  # pragma: no cover - all candidates together cover the deficit


__all__ = [
    "MAX_SUBSET_CANDIDATES",
    "PER_NODE",
    "WAIT",
    "PlanOption",
    "fewest_victims",
    "per_node_plans",
    "plan_key",
    "plan_options",
]

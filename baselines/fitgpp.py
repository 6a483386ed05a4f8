"""FitGpp: our reconstruction of the preemption heuristic of Yabuuchi, Taniwaki and Omura (OpML 2019).

The paper's abstract says it preempts BE jobs selectively, preferring those "that can be, when the time
comes, resumed without much delay", to minimise re-scheduling intervals, the number of preemptions and the
time lost to preemption. Its score formula, weights and cap are not published in what we can read, so this
is a reconstruction; every choice below is a parameter.

For a TE job with per-node demand ``d`` that cannot be placed, on each node ``n``:

1. ``deficit = max(0, d - avail_n)``; the node is feasible if its candidates together cover the deficit.
2. Victims are chosen greedily (``order="fit"``): if some candidate alone covers what is still missing,
   take the one whose freed resources exceed it least (normalised L2), ties to the shorter grace period;
   otherwise take the candidate that covers most of what is missing (sum of normalised covered amounts),
   ties to the shorter grace period. With ``order="grace"`` candidates are taken by ascending grace period.
   Either way, victims that turn out to be unnecessary are then dropped (last chosen first).
3. ``fitness = || (freed - deficit) / capacity_n ||_2`` where ``freed`` counts every resource the victims
   release, on every node they occupy (a gang victim frees more than this node).
4. ``score = fitness + lam * max_grace / grace_scale`` (``rank="score"``), or the pair
   ``(max_grace, fitness)`` compared lexicographically (``rank="grace"``, the grace-period-first ablation).

Nodes are ranked by score, then by number of victims, then by node order. The cap P on preemptions per job
is the simulator's ``max_preemptions``: capped jobs are never candidates.
"""

from __future__ import annotations

import math

from baselines.base import NodeByNodePolicy, prune, take_until_covered
from schedgym.errors import ConfigError
from schedgym.sim.job import Job
from schedgym.sim.policy import PreemptionRequest, QueueDiscipline
from schedgym.sim.resources import EPS, Vec


class FitGpp(NodeByNodePolicy):
    """Fitness + grace-period preemption (reconstructed). Priority queue, preempts BE for TE.

    Args:
        lam: weight of the grace-period term (0 gives the fitness-only ablation).
        grace_scale: seconds that make the grace-period term worth 1.
        order: victim order within a node, ``"fit"`` or ``"grace"``.
        rank: node ranking, ``"score"`` or ``"grace"`` (grace period first, fitness as tie-break).
    """

    name = "fitgpp"
    queue = QueueDiscipline.PRIORITY

    def __init__(self, lam: float = 1.0, grace_scale: float = 60.0, order: str = "fit", rank: str = "score"):
        if not (math.isfinite(lam) and lam >= 0):
            raise ConfigError(f"Expected lam >= 0, got {lam!r}")
        if not (math.isfinite(grace_scale) and grace_scale > 0):
            raise ConfigError(f"Expected grace_scale > 0, got {grace_scale!r}")
        if order not in ("fit", "grace"):
            raise ConfigError(f"Expected order 'fit' or 'grace', got {order!r}")
        if rank not in ("score", "grace"):
            raise ConfigError(f"Expected rank 'score' or 'grace', got {rank!r}")
        self.lam = float(lam)
        self.grace_scale = float(grace_scale)
        self.order = order
        self.rank = rank
        self._cap_source: object = None
        self._caps: list[Vec] = []

    def native_rule(self) -> tuple[str, dict[str, float | str]] | None:
        if type(self) is not FitGpp:  # a subclass may decide otherwise: it is asked in Python
            return None
        return "fitgpp", {"lam": self.lam, "grace_scale": self.grace_scale, "order": self.order, "rank": self.rank}

    def __repr__(self) -> str:
        return f"FitGpp(lam={self.lam}, grace_scale={self.grace_scale}, order={self.order!r}, rank={self.rank!r})"

    def _evaluate_node(
        self, request: PreemptionRequest, node: int, deficit: Vec, candidates: list[Job]
    ) -> tuple[tuple, list[Job]] | None:
        if request.capacity_rows is not self._cap_source:  # normalisers, computed once per cluster
            self._cap_source = request.capacity_rows
            # Zero capacities (a node without CPUs, say) divide by 1 instead.
            self._caps = [(row[0] or 1.0, row[1] or 1.0, row[2] or 1.0) for row in request.capacity_rows]
        cap = self._caps[node]
        if self.order == "fit":
            victims = _greedy_fit(deficit, candidates, cap)
        else:
            victims = take_until_covered(sorted(candidates, key=lambda j: (j.spec.grace_period, j.idx)), deficit)
        if len(victims) > 1:
            victims = prune(victims, deficit)
        f0 = f1 = f2 = 0.0
        for v in victims:
            k = v.spec.gang_size  # a gang victim frees its share on every node it holds
            d = v.demand
            f0 += d[0] * k
            f1 += d[1] * k
            f2 += d[2] * k
        fitness = _norm((f0, f1, f2), deficit, cap)
        max_grace = victims[0].spec.grace_period if len(victims) == 1 else max(v.spec.grace_period for v in victims)
        if self.rank == "grace":
            return (max_grace, fitness, len(victims)), victims
        return (fitness + self.lam * max_grace / self.grace_scale, len(victims)), victims


def _norm(have: Vec, need: Vec, cap: Vec) -> float:
    """L2 norm of (have - need) / cap."""
    x = (have[0] - need[0]) / cap[0]
    y = (have[1] - need[1]) / cap[1]
    z = (have[2] - need[2]) / cap[2]
    return math.sqrt(x * x + y * y + z * z)


def _greedy_fit(deficit: Vec, candidates: list[Job], cap: Vec) -> list[Job]:
    pool = list(candidates)
    m0, m1, m2 = deficit
    c0, c1, c2 = cap
    chosen: list[Job] = []
    while pool and (m0 > EPS or m1 > EPS or m2 > EPS):
        # Written out by hand: this loop runs for every node of every preemption decision.
        best = None
        best_key: tuple = ()
        for c in pool:
            d0, d1, d2 = c.demand
            if d0 >= m0 - EPS and d1 >= m1 - EPS and d2 >= m2 - EPS:
                x, y, z = (d0 - m0) / c0, (d1 - m1) / c1, (d2 - m2) / c2
                key = (math.sqrt(x * x + y * y + z * z), c.spec.grace_period, c.idx)
                if best is None or key < best_key:
                    best, best_key = c, key
        if best is None:  # nobody covers the rest alone: take whoever covers most of it
            best = max(
                pool,
                key=lambda c: (
                    min(c.demand[0], m0) / c0 + min(c.demand[1], m1) / c1 + min(c.demand[2], m2) / c2,
                    -c.spec.grace_period,
                    -c.idx,
                ),
            )
        chosen.append(best)
        pool.remove(best)
        d0, d1, d2 = best.demand
        m0, m1, m2 = max(m0 - d0, 0.0), max(m1 - d1, 0.0), max(m2 - d2, 0.0)
    return chosen

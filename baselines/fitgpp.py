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

import numpy as np

from baselines.base import EPS, NodeByNodePolicy, covers, prune, total_member
from schedgym.errors import ConfigError
from schedgym.sim.job import Job
from schedgym.sim.policy import PreemptionRequest, QueueDiscipline


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

    def __repr__(self) -> str:
        return f"FitGpp(lam={self.lam}, grace_scale={self.grace_scale}, order={self.order!r}, rank={self.rank!r})"

    def _evaluate_node(
        self, request: PreemptionRequest, node: int, deficit: np.ndarray, candidates: list[Job]
    ) -> tuple[tuple, list[Job]] | None:
        cap = np.where(request.capacity[node] > 0, request.capacity[node], 1.0)
        if self.order == "fit":
            victims = _greedy_fit(deficit, candidates, cap)
        else:
            victims = []
            for c in sorted(candidates, key=lambda j: (j.spec.grace_period, j.idx)):
                victims.append(c)
                if covers(total_member(victims), deficit):
                    break
        victims = prune(victims, deficit)
        freed = np.zeros(3)
        for v in victims:
            freed += v.member * v.spec.nodes
        fitness = float(np.linalg.norm((freed - deficit) / cap))
        max_grace = max(v.spec.grace_period for v in victims)
        if self.rank == "grace":
            return (max_grace, fitness, len(victims)), victims
        return (fitness + self.lam * max_grace / self.grace_scale, len(victims)), victims


def _greedy_fit(deficit: np.ndarray, candidates: list[Job], cap: np.ndarray) -> list[Job]:
    pool = list(candidates)
    missing = deficit.copy()
    chosen: list[Job] = []
    while (missing > EPS).any() and pool:
        singles = [c for c in pool if covers(c.member, missing)]
        if singles:
            best = min(
                singles,
                key=lambda c: (float(np.linalg.norm((c.member - missing) / cap)), c.spec.grace_period, c.idx),
            )
        else:
            best = max(
                pool,
                key=lambda c: (float((np.minimum(c.member, missing) / cap).sum()), -c.spec.grace_period, -c.idx),
            )
        chosen.append(best)
        pool.remove(best)
        missing = np.maximum(missing - best.member, 0.0)
    return chosen

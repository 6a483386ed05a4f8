"""Resource vectors ``(gpus, cpus, mem_gb)``: the one tolerance and the one fit test used everywhere.

Resource amounts are floats (fractional GPUs), and sums of them accumulate rounding error, so "fits" means
"fits up to :data:`EPS`". The simulator, the baselines and the decision protocol all use these helpers.

Scalar versions work on plain tuples or lists: with three components, scalar Python is several times
faster than numpy, and they run on the simulator's hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

# Tolerance for comparing float resource amounts.
EPS = 1e-9

Vec = tuple[float, float, float]


def covers(have: Sequence[float], need: Sequence[float]) -> bool:
    """True if ``have`` is at least ``need`` in every resource (up to :data:`EPS`)."""
    return have[0] >= need[0] - EPS and have[1] >= need[1] - EPS and have[2] >= need[2] - EPS


def shortfall(have: Sequence[float], need: Sequence[float]) -> Vec:
    """What ``need`` lacks beyond ``have``, per resource (0 where ``have`` is enough): the deficit that
    preemptions must cover on a node."""
    return (max(need[0] - have[0], 0.0), max(need[1] - have[1], 0.0), max(need[2] - have[2], 0.0))


def fits_on(avail: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Per row of ``avail`` (shape (n, 3)), whether ``need`` (shape (3,)) fits there (bool, shape (n,))."""
    return np.asarray((avail >= need - EPS).all(axis=-1))


def total_demand(demands: Iterable[Sequence[float]]) -> Vec:
    """Sum of per-node demands: what jobs sharing a node free there when they go."""
    g = c = m = 0.0
    for d in demands:
        g += d[0]
        c += d[1]
        m += d[2]
    return (g, c, m)

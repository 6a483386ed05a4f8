"""Small shared fixtures. The builders themselves live in ``helpers.py`` (import them from there)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import Scripted, View, cluster, simulate

from schedgym.sim import ClusterSpec, Simulator


@pytest.fixture
def run() -> Callable[..., tuple[View, Scripted, Simulator]]:
    """``run(cluster, jobs, script=None, **SimConfig kwargs) -> (view, scripted policy, simulator)``."""

    def _run(nodes, jobs, script=None, **config):
        result, policy, sim = simulate(nodes, jobs, script, **config)
        return View(result), policy, sim

    return _run


@pytest.fixture
def one_node() -> ClusterSpec:
    """A single node with 8 GPUs (no CPUs or memory to speak of)."""
    return cluster(8)


@pytest.fixture
def two_nodes() -> ClusterSpec:
    """Two identical nodes with 8 GPUs each."""
    return cluster(8, 8)

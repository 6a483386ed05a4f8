"""Small shared fixtures. The builders themselves live in ``helpers.py`` (import them from there).

Every test module runs once per simulation engine (``native``, then ``python``): the whole suite holds both
engines to the same expectations. Where the native engine is not built, its runs are skipped, except in CI
(``CI`` set), where they fail: CI must test the engine users get.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from helpers import Scripted, View, cluster, simulate

from schedgym.sim import ClusterSpec, Simulator
from schedgym.sim.simulator import ENGINES, ENV_VAR, native_available


@pytest.fixture(scope="module", params=ENGINES, autouse=True)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine every simulation of this module's tests runs on (through ``SCHEDGYM_ENGINE``, which
    subprocesses inherit)."""
    if request.param == "native" and not native_available():
        if os.environ.get("CI"):
            pytest.fail("CI must run the native engine, but schedgym.sim._engine is not available")
        pytest.skip("the native engine is not built")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, request.param)
        yield request.param


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


@pytest.fixture
def counted(tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    """A policy ``counted``: the bundled learned agent, each build recorded (with its process id) in the file
    returned (tests/counting.py). Registered in this process only: workers learn of it from the comparison."""
    from schedgym import registry

    log = tmp_path / "builds.txt"
    log.touch()
    entry = registry.PolicyEntry("counted", "counting:counted", {"log": str(log)}, "test", True)
    monkeypatch.setitem(registry._REGISTRY, "counted", entry)
    return log

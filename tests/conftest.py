"""Small shared fixtures. The builders themselves live in ``helpers.py`` (import them from there).

Every test module runs once per simulation engine (``native``, then ``python``): the whole suite holds both
engines to the same expectations. Where the native engine is not built, its runs are skipped, except in CI
(``CI`` set), where they fail: CI must test the engine users get. ``SCHEDGYM_TEST_ENGINES=native`` (a comma-
separated subset) runs fewer: CI's second environment, whose point is Ray and an older Gymnasium, not the
engines' agreement, which the first one checks. There, only the tests marked ``ray`` or ``gymnasium`` run: the
second mark is added here to every test of a module that imports Gymnasium, stable-baselines3, sb3-contrib,
``schedgym.envs`` or ``agents`` (read from its imports, so a new module is marked without a list to keep).
"""

from __future__ import annotations

import ast
import builtins
import functools
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import Scripted, View, cluster, simulate

from schedgym.sim import ClusterSpec, Simulator
from schedgym.sim.simulator import ENGINES, ENV_VAR, native_available


def _engines_to_test() -> list[str]:
    chosen = [e for e in os.environ.get("SCHEDGYM_TEST_ENGINES", ",".join(ENGINES)).split(",") if e]
    unknown = sorted(set(chosen) - set(ENGINES))
    if unknown or not chosen:
        raise pytest.UsageError(f"SCHEDGYM_TEST_ENGINES: expected a comma-separated subset of {list(ENGINES)}")
    return chosen


_GYMNASIUM_FACING = ("gymnasium", "stable_baselines3", "sb3_contrib", "schedgym.envs", "agents")


@functools.cache
def _imports_gymnasium(path: str) -> bool:
    """Whether the test module at ``path`` imports (at any depth) one of :data:`_GYMNASIUM_FACING`."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
    return any(name == m or name.startswith(m + ".") for name in names for m in _GYMNASIUM_FACING)


# The rl extra (stable-baselines3, sb3-contrib, torch): the README's test command installs no torch (a CUDA
# download of some 3 GB on the public index), so the tests that need it are marked `rl` and skip there; CI
# installs the extra and runs them (`-m rl`).
_RL = ("stable_baselines3", "sb3_contrib", "torch")


@functools.cache
def _rl_missing() -> str | None:
    import importlib.util

    missing = [m for m in _RL if importlib.util.find_spec(m) is None]
    return ", ".join(missing) or None


@functools.cache
def _mentions_rl(path: str, name: str) -> bool:
    """Whether the test module at ``path`` imports one of :data:`_RL` at its top level (or skips without it), or
    its function ``name`` names one (a local import or an ``importorskip``)."""
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    for node in tree.body:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, (ast.Expr, ast.Assign)):
            segment = ast.get_source_segment(source, node) or ""
            names = [m for m in _RL if "importorskip" in segment and f'"{m}' in segment]
        if any(n == m or n.startswith(m + ".") for n in names for m in _RL):
            return True
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            segment = ast.get_source_segment(source, node) or ""
            return any(f"import {m}" in segment or f"from {m}" in segment or f'"{m}' in segment for m in _RL)
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _imports_gymnasium(str(item.path)):
            item.add_marker(pytest.mark.gymnasium)
        function = getattr(item, "function", None)
        if function is not None and _mentions_rl(str(item.path), function.__name__):
            item.add_marker(pytest.mark.rl)
        if item.get_closest_marker("rl") is not None and _rl_missing():
            item.add_marker(pytest.mark.skip(reason=f"needs the rl extra ({_rl_missing()} not installed)"))


@pytest.fixture(scope="module", params=_engines_to_test(), autouse=True)
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


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One small local Ray for a test module (``pytestmark = [pytest.mark.ray, pytest.mark.usefixtures(
    "local_ray")]``), which the code under test finds initialised, uses and leaves running: 2 CPUs, no
    dashboard, a 100 MB object store, no usage statistics, its temporary files under pytest's (not /tmp/ray),
    tests/ on the workers' path (for ``counting``), a token in the environment (else Ray 2.60 writes
    ``~/.ray/auth_token``), and an empty home folder of its own, yielded, which must still be empty after the
    module. Ray's driver keeps the first token it read and Ray sets RAY_AUTH_MODE and replaces ``print`` in
    this process: all are undone after, so that the next module's Ray starts afresh."""
    ray = pytest.importorskip("ray")
    from schedgym.experiments.executors import _forget_ray_token

    home = tmp_path_factory.mktemp("home")
    tests = str(Path(__file__).resolve().parent)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("matplotlib")))  # not Ray's: kept out of the check
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        mp.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
        mp.setattr(builtins, "print", builtins.print)
        mode = os.environ.get("RAY_AUTH_MODE")
        _forget_ray_token()  # an earlier module's token
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=100 * 1024 * 1024,
            logging_level="ERROR",
            _temp_dir=str(tmp_path_factory.mktemp("ray")),
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}},
        )
        try:
            yield home
        finally:
            ray.shutdown()
            if mode is None:
                os.environ.pop("RAY_AUTH_MODE", None)
            else:
                os.environ["RAY_AUTH_MODE"] = mode
            _forget_ray_token()
    assert sorted(p.name for p in home.iterdir()) == [], "Ray left files in the home folder"

"""docs/architecture.md's recipes, run as written there, and the claims they rest on.

Each code block preceded by ``<!-- recipe: NAME -->`` is executed in a fresh namespace; a recipe that no
longer works fails here, so the document cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from schedgym.decision.backend import DecisionBackend, NativeBackend, NativePlanBackend, PythonBackend
from schedgym.sim import SimConfig, Simulator
from schedgym.sim.simulator import native_available
from schedgym.workloads import generate, preset

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
_RECIPE = re.compile(r"<!-- recipe: (\w+) -->\n```python\n(.*?)\n```", re.DOTALL)


def recipes() -> dict[str, str]:
    return dict(_RECIPE.findall(DOC.read_text(encoding="utf-8")))


def test_the_document_has_a_recipe_for_each_kind_of_addition():
    assert set(recipes()) == {"rule", "feature", "workload", "command"}


@pytest.mark.parametrize("name", ["rule", "feature", "workload", "command"])
def test_recipe_runs_as_written(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name == "feature" and not native_available():
        pytest.skip("the recipe shows the native engine's refusal")
    monkeypatch.chdir(tmp_path)
    from schedgym import registry

    registry.policy_names()  # the plugins' registrations first, then a copy the recipe may add to
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    namespace: dict[str, object] = {"__name__": f"recipe_{name}"}
    exec(compile(recipes()[name], f"docs/architecture.md:{name}", "exec"), namespace)


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_both_engines_offer_the_same_simulator():
    """An engine capability is added to both engines (the recipe): their simulators' public names agree."""
    if not native_available():
        pytest.skip("the native engine is not built")
    from schedgym.sim.cluster import resolve_cluster

    cluster = resolve_cluster("paper")
    table = generate(preset("paper", n_jobs=50), cluster, np.random.default_rng(0)).table
    python = Simulator(cluster, table, SimConfig(engine="python"))
    native = Simulator(cluster, table, SimConfig(engine="native"))
    assert type(python).__name__ != type(native).__name__
    assert _public(python) == _public(native)


def test_both_backends_offer_the_same_interface():
    extra = {"core", "note_batch_step"}  # what the native batch stepper needs of a native backend
    assert _public(PythonBackend) == _public(DecisionBackend)
    assert _public(NativeBackend) - extra == _public(DecisionBackend)
    assert not getattr(PythonBackend, "__abstractmethods__", None)
    assert not getattr(NativeBackend, "__abstractmethods__", None)
    # the plan mode's native backend: its core, and the options of the decision (as PlanDecision.options)
    assert _public(NativePlanBackend) - {"core", "options"} == _public(DecisionBackend)
    assert not getattr(NativePlanBackend, "__abstractmethods__", None)

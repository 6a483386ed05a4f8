"""The layer contract (issue 20, item 1): the packages import each other one way only.

- ``schedgym`` (numpy + gymnasium) never imports ``baselines`` or ``agents``; ``baselines`` imports only
  ``schedgym``; ``agents`` imports both. What lives above ``schedgym`` reaches it by registration (the
  ``schedgym.policies`` and ``schedgym.commands`` entry points of pyproject.toml), never by a name pointing up.
- No cycle between modules of different folders: at the granularity of folders (``schedgym/sim``,
  ``schedgym/envs``, ``schedgym/experiments``, ``baselines``, ``agents``, ...) the imports form no loop. The
  modules directly in ``schedgym/`` are each a unit of their own: that folder holds both the base every
  folder uses (``errors``, ``limits``, ``_atomic``, ``_csvio``) and the top that uses every folder (``cli``,
  ``registry``, the package's ``__init__``).

An import is any ``import``/``from ... import`` at any depth (inside functions too) and any string in the code
that names a module of the three packages (``"pkg.module"`` or ``"pkg.module:attr"``: entry points given to
gymnasium or to the registry, ``importlib.import_module`` arguments). ``from pkg import module`` is an import
of ``pkg.module``; importing ``a.b.c`` is not counted as importing ``a`` and ``a.b`` (their ``__init__`` runs,
but every import would then point at every parent package)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("schedgym", "baselines", "agents")  # bottom to top: a package may import those before it only
SPLIT_ROOT = ("schedgym",)  # packages whose top-level modules are units of their own
ALLOWED_CYCLES: list[set[str]] = []
"""Cycles between folders that are known and not yet removed (each a set of units); none is left. Shrink only."""

_MODULE_STRING = re.compile(r"^(?:schedgym|baselines|agents)(?:\.[A-Za-z_]\w*)*(?::[A-Za-z_][\w.]*)?$")


def modules(root: Path, packages: tuple[str, ...] = LAYERS) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``: dotted name -> file."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every import and module-naming string of module ``name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            full = [f"{source}.{a.name}" if source else a.name for a in node.names]
            targets = [f if f in known or not source else source for f in full]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            module, colon, _ = node.value.partition(":")
            resolved = _resolve(module, known)
            # "schedgym.policies" (an entry-point group) names no module; "pkg:attr" or "pkg.mod..." does
            if resolved is not None and (colon or "." in resolved):
                targets = [resolved]
        for target in targets:
            resolved = _resolve(target, known)
            if resolved is not None and resolved != name:
                yield resolved, node.lineno


def graph(root: Path, packages: tuple[str, ...] = LAYERS) -> dict[str, dict[str, list[str]]]:
    """module -> {module it imports: ["path:line", ...]}."""
    known = modules(root, packages)
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, path in known.items():
        for target, line in imports(name, path, known):
            edges[name][target].append(f"{path.relative_to(root)}:{line}")
    return edges


def upward(edges: dict[str, dict[str, list[str]]], layers: tuple[str, ...] = LAYERS) -> list[str]:
    """Every import of a package by one below it (or beside it: two packages of one rank do not exist)."""
    rank = {package: i for i, package in enumerate(layers)}
    found = []
    for source, targets in sorted(edges.items()):
        for target, where in sorted(targets.items()):
            if rank[target.split(".")[0]] > rank[source.split(".")[0]]:
                found.append(f"{source} imports {target} ({', '.join(where)})")
    return found


def unit(module: str, path: Path, root: Path) -> str:
    """The folder of ``module`` (a module directly in a :data:`SPLIT_ROOT` package: the module itself)."""
    relative = path.relative_to(root)
    if len(relative.parts) == 2 and relative.parts[0] in SPLIT_ROOT:
        return relative.as_posix()
    return relative.parent.as_posix()


def folder_cycles(root: Path, packages: tuple[str, ...] = LAYERS) -> list[tuple[set[str], list[str]]]:
    """The strongly connected components of more than one unit in the graph of units, each with the imports
    between its units."""
    known = modules(root, packages)
    edges = graph(root, packages)
    units: dict[str, set[str]] = defaultdict(set)
    why: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source, targets in edges.items():
        a = unit(source, known[source], root)
        for target, where in targets.items():
            b = unit(target, known[target], root)
            if a != b:
                units[a].add(b)
                why[a, b].append(f"{source} -> {target} ({where[0]})")
    found = []
    for component in _components(units):
        lines = [line for (a, b), lines in sorted(why.items()) if a in component and b in component for line in lines]
        found.append((component, lines))
    return found


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one node (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    nodes = sorted(set(edges) | {b for targets in edges.values() for b in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_package_imports_one_above_it():
    found = upward(graph(ROOT))
    assert not found, "upward imports (schedgym < baselines < agents):\n" + "\n".join(found)


def test_no_cycle_between_folders():
    cycles = [(c, lines) for c, lines in folder_cycles(ROOT) if c not in ALLOWED_CYCLES]
    report = "\n".join(f"{sorted(c)}:\n  " + "\n  ".join(lines) for c, lines in cycles)
    assert not cycles, "cycles between folders:\n" + report


ENGINE_MODULES = ("schedgym.sim.native_engine", "schedgym.sim.python_engine", "schedgym.sim._engine")
"""The two engines' implementations (and the extension behind the native one)."""
BELOW_THE_ENGINE_INTERFACE = ("schedgym.sim", "schedgym.decision")
"""Where the engines may be named: the simulator picks one (``schedgym.sim.simulator.engine_class``), the
decision protocol opens one (``schedgym.decision.backend.open_backend``); everything else, the environments
included, talks to ``Simulator`` and ``DecisionBackend``."""


def engine_imports(root: Path) -> list[str]:
    known = modules(root)
    for name in ENGINE_MODULES:
        known.setdefault(name, root / (name.replace(".", "/") + ".pyi"))  # the extension: no .py file
    found = []
    for name, path in sorted(known.items()):
        if not path.exists() or path.suffix != ".py" or name.startswith(BELOW_THE_ENGINE_INTERFACE):
            continue
        for target, line in imports(name, path, known):
            if target in ENGINE_MODULES:
                found.append(f"{name} imports {target} ({path.relative_to(root)}:{line})")
    return found


def test_the_engines_stay_below_one_interface():
    found = engine_imports(ROOT)
    assert not found, "engine modules named above schedgym.sim/schedgym.decision:\n" + "\n".join(found)


def test_the_engine_contract_sees_an_engine_import(tmp_path):
    _write(
        tmp_path,
        {
            "schedgym/__init__.py": "",
            "schedgym/sim/__init__.py": "",
            "schedgym/sim/native_engine.py": "",
            "schedgym/envs/__init__.py": "",
            "schedgym/envs/env.py": "def f():\n    from schedgym.sim import _engine\n",
            "baselines/__init__.py": "",
            "agents/__init__.py": "import schedgym.sim.native_engine\n",
        },
    )
    found = engine_imports(tmp_path)
    assert [f.split(" (")[0] for f in found] == [
        "agents imports schedgym.sim.native_engine",
        "schedgym.envs.env imports schedgym.sim._engine",
    ]


def test_allowed_cycles_still_exist():
    """The allow-list only shrinks: a cycle that is gone leaves it."""
    current = [c for c, _ in folder_cycles(ROOT)]
    assert all(c in current for c in ALLOWED_CYCLES)


def private_imports(root: Path, packages: tuple[str, ...] = LAYERS) -> list[str]:
    """Every ``from module import _name`` in ``packages`` whose ``_name`` is not a module of its own (an
    extension such as ``schedgym.sim._engine``, with its ``.pyi``, is imported by its private name): a name
    another module keeps private is not used outside it; what is shared has a public name."""
    found = []
    for path in sorted(p for package in packages for p in (root / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            folder = root.joinpath(*node.module.split("."))
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and not any(folder.glob(f"{alias.name}.py*")) and not (folder / alias.name).is_dir():
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_no_module_imports_a_private_name_of_another():
    found = private_imports(ROOT)
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_the_private_import_check_sees_one(tmp_path):
    _write(
        tmp_path,
        {
            "schedgym/__init__.py": "",
            "schedgym/a.py": "def _helper(): ...\n",
            "schedgym/b.py": "from schedgym.a import _helper\nfrom schedgym import _ext\n",
            "schedgym/_ext.pyi": "",
            "baselines/__init__.py": "",
            "agents/__init__.py": "",
        },
    )
    assert private_imports(tmp_path) == ["schedgym/b.py:1: schedgym.a._helper"]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_contract_sees_upward_imports_at_any_depth(tmp_path):
    _write(
        tmp_path,
        {
            "schedgym/__init__.py": "",
            "schedgym/registry.py": "def f():\n    from agents import learned\n",
            "schedgym/cli.py": "import importlib\nx = importlib.import_module('baselines.fifo')\n",
            "schedgym/envs/__init__.py": "ENTRY = 'agents.learned:load_agent'\nGROUP = 'schedgym.policies'\n",
            "baselines/__init__.py": "",
            "baselines/fifo.py": "from .. import agents\nfrom schedgym import registry\n",
            "agents/__init__.py": "",
            "agents/learned.py": "import baselines.fifo\nimport schedgym.envs\n",
        },
    )
    found = upward(graph(tmp_path))
    assert [line.split(" (")[0] for line in found] == [
        "baselines.fifo imports agents",
        "schedgym.cli imports baselines.fifo",
        "schedgym.envs imports agents.learned",
        "schedgym.registry imports agents.learned",
    ]


def test_the_contract_sees_a_cycle_between_folders(tmp_path):
    _write(
        tmp_path,
        {
            "schedgym/__init__.py": "",
            "schedgym/errors.py": "",
            "schedgym/cli.py": "from schedgym.sim import engine\n",
            "schedgym/sim/__init__.py": "",
            "schedgym/sim/engine.py": "from schedgym import errors\ndef f():\n    from schedgym.envs import env\n",
            "schedgym/envs/__init__.py": "",
            "schedgym/envs/env.py": "from schedgym.sim.engine import f\nfrom schedgym.errors import X\n",
        },
    )
    cycles = folder_cycles(tmp_path, ("schedgym",))
    assert [c for c, _ in cycles] == [{"schedgym/sim", "schedgym/envs"}]
    assert any("schedgym.sim.engine -> schedgym.envs.env (schedgym/sim/engine.py:3)" in line for line in cycles[0][1])

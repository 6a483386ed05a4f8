"""The extension modules' stubs (``schedgym/sim/_engine.pyi``, ``schedgym/sim/_rules.pyi``,
``schedgym/workloads/_synthetic.pyi``) are what nanobind's stub generator makes of the built modules: each is
regenerated into a temporary folder and compared with the committed file. Skipped for a module that is not built
(``_synthetic`` needs numpy's random C library) or without nanobind (CI installs it, .ci/run).

After changing a binding, regenerate them (from the repository's root, with the project installed)::

    python -m nanobind.stubgen -q --exclude-values -m schedgym.sim._engine -o schedgym/sim/_engine.pyi
    python -m nanobind.stubgen -q --exclude-values -m schedgym.sim._rules -o schedgym/sim/_rules.pyi
    python -m nanobind.stubgen -q --exclude-values -m schedgym.workloads._synthetic -o schedgym/workloads/_synthetic.pyi

``--exclude-values``: a module constant's value (numpy's version in ``_synthetic``) is not part of the stub.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["schedgym.sim._engine", "schedgym.sim._rules", "schedgym.workloads._synthetic"]


@pytest.mark.parametrize("module", MODULES)
def test_the_committed_stub_is_what_stubgen_makes(module: str, tmp_path: Path) -> None:
    pytest.importorskip("nanobind.stubgen", reason="nanobind is not installed (pip install nanobind)")
    try:
        importlib.import_module(module)
    except ImportError:
        pytest.skip(f"{module} is not built")
    committed = ROOT / (module.replace(".", "/") + ".pyi")
    out = tmp_path / committed.name
    cmd = [sys.executable, "-m", "nanobind.stubgen", "-q", "--exclude-values", "-m", module, "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=tmp_path, timeout=120)
    assert committed.exists(), f"{committed.relative_to(ROOT)} is missing; generate it: {' '.join(cmd[1:-1])} -o ..."
    assert out.read_text() == committed.read_text(), (
        f"{committed.relative_to(ROOT)} is out of date with the built {module}; regenerate it "
        f"(python -m nanobind.stubgen -q --exclude-values -m {module} -o {committed.relative_to(ROOT)})"
    )

"""The third-party RL libraries, each run end to end on the environment as its documentation takes a Gymnasium
env (issue 21). Each module skips when its library is not installed; CI installs the pinned versions of
``.ci/clients.txt`` in a stage of its own and runs ``pytest -m clients``.

These tests exercise the libraries, not the engines (the rest of the suite holds both engines to the same
results), so they run on the engine users get only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from schedgym.sim.simulator import ENV_VAR, native_available


@pytest.fixture(scope="module", autouse=True)
def engine() -> Iterator[str]:
    """Replaces the suite's two-engine fixture: the native engine only (skipped where it is not built,
    failed in CI)."""
    if not native_available():
        if os.environ.get("CI"):
            pytest.fail("CI must run the native engine, but schedgym.sim._engine is not available")
        pytest.skip("the native engine is not built")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, "native")
        yield "native"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.clients)

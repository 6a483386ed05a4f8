"""A policy factory that records every build, importable by worker processes (tests/ is on their path):
``counted(log=PATH, inner=SPEC)`` appends this process's id to ``PATH`` and builds ``inner``."""

from __future__ import annotations

import os

from schedgym.registry import make_policy
from schedgym.sim.policy import Policy


def counted(log: str, inner: str = "ppo") -> Policy:
    """Build ``inner`` (by default the bundled learned agent), recording the build in ``log``."""
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return make_policy(inner)


def builds(log: str) -> dict[int, int]:
    """How many builds each process recorded in ``log``."""
    out: dict[int, int] = {}
    with open(log) as fh:
        for line in fh:
            out[int(line)] = out.get(int(line), 0) + 1
    return out


def per_seed(result) -> dict[str, list[dict]]:  # noqa: ANN001
    """Every run's summary of a comparison, by policy label, in seed order."""
    return {label: [r.summary() for r in runs] for label, runs in result.runs.items()}

"""Policy factories that fail on purpose, importable by worker processes (tests/ is on their path), for the
retry tests: ``dies_once`` ends its worker process the first time it is built anywhere (as a killed worker
or a lost node would), ``fails`` raises its own error every time it is built."""

from __future__ import annotations

import os

from schedgym.registry import make_policy
from schedgym.sim.policy import Policy


def dies_once(marker: str, inner: str = "fitgpp") -> Policy:
    """End this process abruptly unless ``marker`` exists (creating it first): the first worker to build this
    policy dies, the next builds ``inner``."""
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return make_policy(inner)
    os.close(fd)
    os._exit(17)


def fails(log: str, inner: str = "fitgpp") -> Policy:
    """Record an attempt in ``log`` and raise: a run that fails by its own error."""
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    raise RuntimeError(f"fails as asked ({inner})")

"""Stable-baselines3's ``predict`` protocol, for code that steps an environment.

``predict(observation, state=None, episode_start=None, deterministic=True) -> (action, state)`` is what SB3
models have and what :class:`~agents.heuristic.HeuristicAgent` gives any policy. Deciding itself is the
:class:`~schedgym.sim.Policy` interface, shared by rules and learned agents.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Agent(Protocol):
    """Anything with SB3's ``predict``."""

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[Any, Any]:  # pragma: no cover - protocol
        ...

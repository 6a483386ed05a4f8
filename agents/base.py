"""The one interface shared by everything that acts in the environment, heuristic or learned.

It is stable-baselines3's: ``predict(observation, state=None, episode_start=None, deterministic=True)
-> (action, state)``, so the same evaluation code runs a baseline rule and a trained policy.
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

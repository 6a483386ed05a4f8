"""Wrappers for frameworks that need the action mask elsewhere, or that cannot read it at all."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from schedgym.decision import action_index


class DictMaskObservation(gym.ObservationWrapper):
    """Put the action mask in the observation, RLlib's convention:
    ``{"observations": Box, "action_mask": Box(0, 1, (n_actions,), int8)}``."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        n = int(env.action_space.n)  # type: ignore[attr-defined]
        self.observation_space = spaces.Dict(
            {
                "observations": env.observation_space,
                "action_mask": spaces.Box(0, 1, shape=(n,), dtype=np.int8),
            }
        )

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        mask = self.env.unwrapped.action_masks().astype(np.int8)  # type: ignore[attr-defined]
        return {"observations": observation, "action_mask": mask}


class IllegalActionAsWait(gym.Wrapper):
    """For algorithms that cannot read masks (PPO, DQN): an illegal action becomes 0, "preempt nothing".

    This is explicit and counted, never silent: ``info["illegal_action"]`` is True on such a step and
    ``info["illegal_actions"]`` counts them over the episode. An action that is not an integer at all (a
    bool, 1.5, inf) is no choice of the agent's: it raises :class:`~schedgym.errors.IllegalDecisionError`.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.n_illegal = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.n_illegal = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        mask = self.env.unwrapped.action_masks()  # type: ignore[attr-defined]
        a = action_index(action)  # not an integer (True, 1.5, inf): IllegalDecisionError, not a wait
        illegal = not (0 <= a < len(mask) and mask[a])
        if illegal:
            self.n_illegal += 1
            a = 0
        obs, reward, terminated, truncated, info = self.env.step(a)
        info["illegal_action"] = illegal
        info["illegal_actions"] = self.n_illegal
        return obs, reward, terminated, truncated, info

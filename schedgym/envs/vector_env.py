"""N preemption environments stepped together: ``gymnasium.make_vec(id, num_envs=N,
vectorization_mode="vector_entry_point")``.

Gymnasium 1.x semantics: actions, observations, rewards and flags are batched; an episode that ends at one
step is reset at the next step of that sub-environment (``AutoresetMode.NEXT_STEP``: that step's action is
ignored, its reward is 0 and the observation is the new episode's first); ``info`` holds arrays with their
``_name`` masks. :meth:`PreemptionVectorEnv.action_masks` gives every sub-environment's legal actions
(shape ``(num_envs, max_candidates + 1)``), which sb3-contrib's MaskablePPO reads through
:class:`agents.vec_env.SB3VecEnv`.

The sub-environments are stepped one after the other in this process; with the native engine each step is
mostly compiled code.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from schedgym.envs.config import EnvConfig
from schedgym.envs.preemption_env import PreemptionEnv
from schedgym.errors import ConfigError


class PreemptionVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` :class:`PreemptionEnv` with one configuration (``config`` and keyword overrides, as for
    the single environment); ``max_episode_steps`` truncates each sub-environment's episodes."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        config: EnvConfig | None = None,
        max_episode_steps: int | None = None,
        **overrides: Any,
    ):
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise ConfigError(f"Expected num_envs to be an integer >= 1, got {num_envs!r}")
        if max_episode_steps is not None and (not isinstance(max_episode_steps, int) or max_episode_steps < 1):
            raise ConfigError(f"Expected max_episode_steps to be an integer >= 1 or None, got {max_episode_steps!r}")
        self.envs = [PreemptionEnv(config, **overrides) for _ in range(int(num_envs))]
        self.num_envs = int(num_envs)
        self.max_episode_steps = max_episode_steps
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = spaces.Discrete(first.config.max_candidates + 1)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._steps = np.zeros(self.num_envs, dtype=np.int64)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-environment: ``seed`` an int (sub-environment ``i`` gets ``seed + i``), a list of
        seeds, or None; ``options`` go to every sub-environment."""
        super().reset(seed=int(seed) if isinstance(seed, (int, np.integer)) else None)
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ConfigError(f"Expected {self.num_envs} seeds, got {len(seeds)}")
        observations: list[np.ndarray] = []
        infos: dict[str, Any] = {}
        for i, (env, s) in enumerate(zip(self.envs, seeds, strict=True)):
            obs, info = env.reset(seed=s, options=options)
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        self._autoreset[:] = False
        self._steps[:] = 0
        return np.stack(observations), infos

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ConfigError(f"Expected actions of shape ({self.num_envs},), got {actions.shape}")
        observations = []
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if self._autoreset[i]:  # the episode ended at the previous step: this step resets it
                obs, info = env.reset()
                self._steps[i] = 0
            else:
                obs, rewards[i], terminated[i], truncated[i], info = env.step(int(actions[i]))
                self._steps[i] += 1
                if self.max_episode_steps is not None and self._steps[i] >= self.max_episode_steps:
                    truncated[i] = not terminated[i]
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        self._autoreset = terminated | truncated
        return np.stack(observations), rewards, terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """Legal actions of every sub-environment (bool, shape ``(num_envs, max_candidates + 1)``); a
        sub-environment about to be reset allows only 0."""
        masks = np.stack([env.action_masks() for env in self.envs])
        if self._autoreset.any():
            masks[self._autoreset] = False
            masks[self._autoreset, 0] = True
        return masks

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


__all__ = ["PreemptionVectorEnv"]

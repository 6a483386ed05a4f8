"""A :class:`~schedgym.envs.vector_env.PreemptionVectorEnv` as a stable-baselines3 ``VecEnv``, so that
sb3-contrib's MaskablePPO trains on it (it reads the masks through ``env_method("action_masks")``).

The two libraries reset finished episodes differently: Gymnasium 1.x resets a sub-environment at its next
step (``NEXT_STEP``), stable-baselines3 at once, handing the final observation over in
``info["terminal_observation"]``. This adapter does the latter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

from schedgym.envs.vector_env import PreemptionVectorEnv


class SB3VecEnv(VecEnv):
    """stable-baselines3's vectorised-environment interface over a :class:`PreemptionVectorEnv`."""

    def __init__(self, venv: PreemptionVectorEnv):
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions = np.zeros(venv.num_envs, dtype=np.int64)

    def reset(self) -> VecEnvObs:
        seeds = [None if s is None else int(s) for s in self._seeds]
        options = self._options[0] if self._options and self._options[0] else None
        obs, infos = self.venv.reset(seed=seeds, options=options)
        self.reset_infos = _split(infos, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
        dones = terminated | truncated
        out_infos = _split(infos, self.num_envs)
        for i in np.flatnonzero(dones).tolist():
            out_infos[i]["terminal_observation"] = obs[i].copy()
            out_infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            # stable-baselines3 expects the next episode's first observation now, not at the next step.
            obs[i], self.reset_infos[i] = self.venv.reset_sub_env(i)
        return obs, rewards.astype(np.float32), dones, out_infos

    def action_masks(self) -> np.ndarray:
        return self.venv.action_masks()

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self.venv.envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self.venv.envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> list:
        if method_name == "action_masks":  # what MaskablePPO asks for: all masks in one call
            masks = self.venv.action_masks()
            return [masks[i] for i in self._get_indices(indices)]
        return [getattr(self.venv.envs[i], method_name)(*method_args, **kwargs) for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]


def _split(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Every sub-environment's info out of Gymnasium's batched info dict (keys absent where their ``_key``
    mask says so), each array read once rather than once per sub-environment."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        present = infos.get(f"_{key}")
        values = _split(value, n) if isinstance(value, dict) else list(value)
        for i, info in enumerate(out):
            if present is None or present[i]:
                info[key] = values[i]
    return out


__all__ = ["SB3VecEnv"]

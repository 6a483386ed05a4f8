"""Training with RLlib (the ``rllib`` extra: ``pip install 'schedgym[rllib]'``): the environment as RLlib reads
it and a masked PPO module; the trainer, ``schedgym train --algo rllib_ppo``, is :mod:`agents.rllib_train`.

- :func:`make_env` is the environment creator: a registered ``schedgym/`` environment whose observation is
  RLlib's ``{"observations": Box, "action_mask": Box(0, 1)}`` (:class:`~schedgym.envs.DictMaskObservation`)
  and whose rewards are multiplied by ``reward_scale`` (:class:`ScaleReward`). :func:`register_envs`
  registers it with RLlib under every id of :data:`schedgym.ENV_IDS`, so that
  ``PPOConfig().environment("schedgym/Preemption-v1", env_config={"reward_scale": 1e-3, "n_jobs": 500})``
  works in any process of a Ray cluster.
- :class:`~schedgym.rllib.module.MaskedPPOTorchRLModule` is PPO's default actor-critic with the illegal
  actions' logits set to :data:`MASKED_LOGIT` in every forward pass; its value function reads the
  observations only.
- :func:`agents.rllib_train.train_rllib` is the ``rllib_ppo`` branch of ``schedgym train``; it saves an
  RLlib checkpoint and the actor's weights as ``.npz`` (:mod:`agents.rllib_export`), which
  ``schedgym compare`` evaluates in numpy like any saved agent (``NAME:RUN_DIR/model.npz``).

This module imports neither Ray nor torch; :mod:`schedgym.rllib.module` and :mod:`agents.rllib_train` do,
and :func:`import_rllib` says how to install them when they are missing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from schedgym.errors import ConfigError

RLLIB_INSTALL_HINT = "pip install 'schedgym[rllib]'"

DEFAULT_ENV_ID = "schedgym/Preemption-v1"

DEFAULT_REWARD_SCALE = 1e-3
"""Rewards are multiplied by this. RLlib's PPO clips the value function's squared error at ``vf_clip_param``
(10) and then passes it no gradient: on ``schedgym/Preemption-v1`` (1,000 jobs) returns lie between about
-2,000 and -1,350 (5th-95th percentile of a random legal policy) and discounted returns (gamma 0.99) between
-1,400 and -180, so unscaled the value loss sits at the clip and the critic learns nothing. Times 1e-3 the
discounted returns are -1.4 to -0.2, and even an untrained critic's squared error stays below 10. For larger
episodes (``PreemptionLarge-v1``: returns near -6,500) a smaller scale (3e-4) keeps them in that range."""

MASKED_LOGIT = -1e8
"""the logit of an illegal action: sb3-contrib's MaskableCategorical uses the same value
(agents/inference.py HUGE_NEG); its probability is 0 in float32 and, unlike -inf, it makes no NaN in the
entropy or the KL divergence"""


NPZ_FORMAT = "schedgym-rllib-actor/1"
"""the ``format`` entry of an exported actor (:mod:`agents.rllib_export`, read by agents/inference.py)"""


def import_rllib() -> Any:
    """The ``ray`` module with RLlib and torch importable, or a :class:`ConfigError` saying how to install
    them (one line at the command line)."""
    try:
        import ray
        import ray.rllib  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        missing = "torch" if getattr(exc, "name", "") == "torch" else "Ray RLlib"
        raise ConfigError(f"--algo rllib_ppo needs {missing}, which is not installed: {RLLIB_INSTALL_HINT}") from None
    return ray


def check_reward_scale(value: object) -> float:
    """``value`` as a float if it is a finite number > 0, else :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"Expected reward_scale to be a finite number > 0, got {value!r}")
    return float(value)


class ScaleReward(gym.RewardWrapper):
    """Rewards multiplied by ``scale`` (training only: evaluation reports unscaled returns)."""

    def __init__(self, env: gym.Env, scale: float):
        super().__init__(env)
        self.scale = check_reward_scale(scale)

    def reward(self, reward: Any) -> float:
        return float(reward) * self.scale


def make_env(env_config: Mapping[str, Any] | None = None, *, env_id: str = DEFAULT_ENV_ID) -> gym.Env:
    """The environment creator RLlib calls in each env runner: ``gym.make(env_id, **env_config)`` (every
    :class:`~schedgym.envs.EnvConfig` field, and ``max_episode_steps``) with the action mask in a Dict
    observation and the rewards times ``env_config["reward_scale"]`` (default :data:`DEFAULT_REWARD_SCALE`).
    ``env_config`` may be RLlib's ``EnvContext`` (a dict); only its keys are read."""
    import schedgym  # noqa: F401  (registers the ids with gymnasium)
    from schedgym.envs.wrappers import DictMaskObservation

    if not str(env_id).startswith("schedgym/") or env_id not in gym.registry:
        raise ConfigError(f"Expected a registered schedgym/ environment id, got {env_id!r}")
    kwargs = dict(env_config or {})
    scale = check_reward_scale(kwargs.pop("reward_scale", DEFAULT_REWARD_SCALE))
    env = gym.make(env_id, **kwargs)
    return DictMaskObservation(ScaleReward(env, scale))


def register_envs() -> list[str]:
    """Register :func:`make_env` with RLlib (Ray Tune's registry, which Ray shares with every worker) under
    each id of :data:`schedgym.ENV_IDS`; return the ids. Needs Ray."""
    import schedgym

    import_rllib()
    from ray.tune.registry import register_env

    for env_id in schedgym.ENV_IDS:
        # A partial of a module-level function pickles by reference: workers import it from schedgym.
        register_env(env_id, functools.partial(make_env, env_id=env_id))
    return list(schedgym.ENV_IDS)


def __getattr__(name: str) -> Any:
    # The module class needs torch and Ray at import time; this package does not.
    if name == "MaskedPPOTorchRLModule":
        import_rllib()
        from schedgym.rllib.module import MaskedPPOTorchRLModule

        return MaskedPPOTorchRLModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_ENV_ID",
    "DEFAULT_REWARD_SCALE",
    "MASKED_LOGIT",
    "NPZ_FORMAT",
    "RLLIB_INSTALL_HINT",
    "MaskedPPOTorchRLModule",
    "ScaleReward",
    "check_reward_scale",
    "import_rllib",
    "make_env",
    "register_envs",
]

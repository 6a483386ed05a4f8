"""What ``schedgym train --algo rllib_ppo`` gives RLlib of a :class:`agents.train_config.TrainConfig`: the PPO
settings and the rollout size (which the configuration's checks read too). No Ray import: a configuration is
checked before Ray starts.

PPO's settings are stable-baselines3's MaskablePPO defaults where RLlib's differ (10 epochs, GAE lambda 0.95,
clip 0.2, value loss weight 0.5, gradient norm 0.5, no KL penalty), so that the two trainers run the same
algorithm on the same settings (benchmarks/bench_rllib.py compares them)."""

from __future__ import annotations

from typing import Any

RLLIB_ALGO = "rllib_ppo"
MAX_ENV_RUNNERS = 256
"""env runners (one Ray actor, one CPU each) at most"""
MAX_ENV_RUNNER_RESTARTS = 1000
"""restarts of one env runner at most (RLlib's own default)"""
CLUSTER_ENV_RUNNER_RESTARTS = 3
"""restarts of each env runner when ``max_env_runner_restarts`` is not given and training runs on a cluster
(``address``): there nodes leave; on the local Ray of one run none, so that every run reproduces its seed"""
RESTART_DELAY_S = 1.0
"""seconds an env runner whose environment raised waits before its process exits to be restarted (RLlib's
default is 60, a pause for the error to reach the log; a killed process or a lost node restarts without it)"""

PPO_FIXED: dict[str, Any] = {
    "num_epochs": 10,
    "lambda_": 0.95,
    "clip_param": 0.2,
    "vf_clip_param": 10.0,  # RLlib's default; the rewards are scaled to stay under it (DEFAULT_REWARD_SCALE)
    "vf_loss_coeff": 0.5,
    "grad_clip": 0.5,
    "use_kl_loss": False,
}
"""PPO settings TrainConfig has no field for: MaskablePPO's defaults (RLlib's own differ: 30 epochs, lambda 1,
clip 0.3, value weight 1, no gradient clipping, a KL penalty)"""


def rollout_size(config: Any) -> int:
    """Environment steps sampled per PPO update: ``n_steps`` in each of ``n_envs`` environments of each env
    runner (of the training process when there are none), as stable-baselines3's ``n_steps * n_envs``."""
    return int(config.model.n_steps * config.common.n_envs * max(1, config.rllib.num_env_runners))


def ppo_settings(config: Any) -> dict[str, Any]:
    """The settings ``PPOConfig`` gets from ``config`` (recorded in the run's .json)."""
    model = config.model
    lr: Any = model.learning_rate
    if model.lr_schedule == "linear":  # RLlib interpolates [[step, lr], ...] over sampled environment steps
        lr = [[0, model.learning_rate], [config.common.total_timesteps, 0.0]]
    return {
        "env_runners": {
            "num_env_runners": config.rllib.num_env_runners,
            "num_envs_per_env_runner": config.common.n_envs,
        },
        "training": {
            "train_batch_size_per_learner": rollout_size(config),
            "minibatch_size": model.batch_size,
            "lr": lr,
            "gamma": model.gamma,
            "entropy_coeff": model.ent_coef,
            **PPO_FIXED,
        },
        "model_config": {"fcnet_hiddens": [int(h) for h in model.net_arch], "fcnet_activation": "tanh"},
        "fault_tolerance": fault_tolerance(env_runner_restarts(config)),
        "reward_scale": float(config.rllib.reward_scale),
        "seed": config.common.seed,
    }


def env_runner_restarts(config: Any) -> int:
    """How often each env runner may be restarted: ``max_env_runner_restarts``, or when it is not given
    :data:`CLUSTER_ENV_RUNNER_RESTARTS` on a cluster (``address``) and 0 on a local Ray."""
    given = config.rllib.max_env_runner_restarts
    if given is not None:
        return int(given)
    return CLUSTER_ENV_RUNNER_RESTARTS if config.rllib.address is not None else 0


def fault_tolerance(restarts: int) -> dict[str, Any]:
    """RLlib's ``fault_tolerance`` settings for ``restarts`` restarts of each env runner: Ray restarts the
    actor of a lost env runner (its process killed, its node gone) or of one whose environment raised, and
    RLlib syncs the learner's weights to it before it samples again; training goes on meanwhile with the
    samples of the others. 0: a failed env runner fails the run (RLlib's ``restart_failed_env_runners=False``
    and no ``ignore_env_runner_failures``), the only setting under which every run reproduces its seed."""
    return {
        "restart_failed_env_runners": restarts > 0,
        "max_num_env_runner_restarts": restarts,
        "delay_between_env_runner_restarts_s": RESTART_DELAY_S,
    }


__all__ = [
    "CLUSTER_ENV_RUNNER_RESTARTS",
    "MAX_ENV_RUNNERS",
    "MAX_ENV_RUNNER_RESTARTS",
    "PPO_FIXED",
    "RESTART_DELAY_S",
    "RLLIB_ALGO",
    "env_runner_restarts",
    "fault_tolerance",
    "ppo_settings",
    "rollout_size",
]

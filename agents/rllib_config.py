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
        "reward_scale": float(config.rllib.reward_scale),
        "seed": config.common.seed,
    }


__all__ = ["MAX_ENV_RUNNERS", "PPO_FIXED", "RLLIB_ALGO", "ppo_settings", "rollout_size"]

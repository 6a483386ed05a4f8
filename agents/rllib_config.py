"""What ``schedgym train --algo rllib_ppo`` reads of :class:`agents.train.TrainConfig`: the checks of its
RLlib fields, and the PPO settings it gives RLlib. No Ray import: a configuration is checked before Ray starts.

PPO's settings are stable-baselines3's MaskablePPO defaults where RLlib's differ (10 epochs, GAE lambda 0.95,
clip 0.2, value loss weight 0.5, gradient norm 0.5, no KL penalty), so that the two trainers run the same
algorithm on the same settings (benchmarks/bench_rllib.py compares them)."""

from __future__ import annotations

from typing import Any

from schedgym.errors import ConfigError
from schedgym.rllib import DEFAULT_REWARD_SCALE, check_reward_scale

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


def check_rllib_fields(config: Any) -> None:
    """Check the RLlib fields of a TrainConfig (``num_env_runners``, ``address``, ``reward_scale``), that
    they are left alone by the stable-baselines3 algorithms, and that ``rllib_ppo`` is not asked for what it
    does not do (the row policy, imitation, several workloads at once, a vec_env)."""
    runners = config.num_env_runners
    if not isinstance(runners, int) or isinstance(runners, bool) or not 0 <= runners <= MAX_ENV_RUNNERS:
        raise ConfigError(f"Expected num_env_runners from 0 to {MAX_ENV_RUNNERS}, got {runners!r}")
    address = config.address
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise ConfigError(f"Expected address 'auto' or HOST:PORT of a Ray cluster, got {address!r}")
    check_reward_scale(config.reward_scale)
    if config.algo != RLLIB_ALGO:
        given = [
            name
            for name, unset in (("num_env_runners", runners == 0), ("address", address is None),
                                ("reward_scale", config.reward_scale == DEFAULT_REWARD_SCALE))
            if not unset
        ]  # fmt: skip
        if given:
            verb = "apply" if len(given) > 1 else "applies"
            raise ConfigError(f"{' and '.join(given)} {verb} to algo {RLLIB_ALGO}, not {config.algo}")
        return
    if config.policy != "mlp":
        raise ConfigError(f"policy {config.policy!r} needs maskable_ppo or ppo; {RLLIB_ALGO} trains PPO's MLP")
    if config.imitate is not None:
        raise ConfigError(f"imitate needs maskable_ppo or ppo, not {RLLIB_ALGO}")
    if config.workloads:
        raise ConfigError(f"workloads (several at once) need a stable-baselines3 algorithm, not {RLLIB_ALGO}")
    if config.vec_env != "auto":
        raise ConfigError(f"vec_env is for the stable-baselines3 algorithms; {RLLIB_ALGO} steps RLlib's env runners")
    if config.batch_size > rollout_size(config):
        raise ConfigError(
            f"Expected batch_size <= n_steps * n_envs * max(1, num_env_runners) = {rollout_size(config)} (the "
            f"samples of one update), got {config.batch_size}"
        )


def rollout_size(config: Any) -> int:
    """Environment steps sampled per PPO update: ``n_steps`` in each of ``n_envs`` environments of each env
    runner (of the training process when there are none), as stable-baselines3's ``n_steps * n_envs``."""
    return int(config.n_steps * config.n_envs * max(1, config.num_env_runners))


def ppo_settings(config: Any) -> dict[str, Any]:
    """The settings ``PPOConfig`` gets from ``config`` (recorded in the run's .json)."""
    lr: Any = config.learning_rate
    if config.lr_schedule == "linear":  # RLlib interpolates [[step, lr], ...] over sampled environment steps
        lr = [[0, config.learning_rate], [config.total_timesteps, 0.0]]
    return {
        "env_runners": {"num_env_runners": config.num_env_runners, "num_envs_per_env_runner": config.n_envs},
        "training": {
            "train_batch_size_per_learner": rollout_size(config),
            "minibatch_size": config.batch_size,
            "lr": lr,
            "gamma": config.gamma,
            "entropy_coeff": config.ent_coef,
            **PPO_FIXED,
        },
        "model_config": {"fcnet_hiddens": [int(h) for h in config.net_arch], "fcnet_activation": "tanh"},
        "reward_scale": float(config.reward_scale),
        "seed": config.seed,
    }


__all__ = ["MAX_ENV_RUNNERS", "PPO_FIXED", "RLLIB_ALGO", "check_rllib_fields", "ppo_settings", "rollout_size"]

"""RLlib's PPO on the environment as RLlib's documentation takes a masked env: its own example module
``ActionMaskingTorchRLModule`` on the ``observation="dict"`` option, the environment named by its id with the
``schedgym:`` prefix (so that the remote env runner, a fresh process, imports schedgym itself) and made by
Gymnasium's ``make_vec`` through the native vector entry point (``gym_env_vectorize_mode``). Nothing of
schedgym's own RLlib support (``schedgym.rllib``) is used. Runs in CI's Ray environment."""

from __future__ import annotations

import math
import sys

import pytest

pytest.importorskip("ray.rllib")
pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

import ray  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.callbacks.callbacks import RLlibCallback  # noqa: E402
from ray.rllib.core.rl_module.rl_module import RLModuleSpec  # noqa: E402
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule  # noqa: E402

ID = "schedgym:schedgym/Preemption-v1"

# The callback below travels to the env runner by value: this test folder is not on the workers' path.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class CountIllegalActions(RLlibCallback):
    """Each finished episode's count of illegal actions (``info["illegal_actions"]`` of the ``illegal_action=
    "wait"`` option, which takes them as waits instead of raising), summed over the run."""

    def on_episode_end(self, *, episode, metrics_logger, **kwargs):  # noqa: ANN001, ANN201
        metrics_logger.log_value("illegal_actions", episode.get_infos(-1)["illegal_actions"], reduce="sum")
        metrics_logger.log_value("finished_episodes", 1, reduce="sum")


def test_rllib_ppo_with_its_action_masking_module_on_a_remote_vector_env_runner(tmp_path, monkeypatch):
    # An Algorithm built outside Tune makes an (empty) log folder under ~/ray_results: RLlib's own habit, kept
    # out of the home folder here, as CI checks that the tests leave nothing there.
    from ray.tune.trainable import trainable

    monkeypatch.setattr(trainable, "DEFAULT_STORAGE_PATH", str(tmp_path))
    config = (
        PPOConfig()
        .environment(ID, env_config={"observation": "dict", "illegal_action": "wait", "n_jobs": 400})
        .env_runners(
            num_env_runners=1,
            num_envs_per_env_runner=2,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=256,
        )
        .training(train_batch_size_per_learner=512, minibatch_size=128, num_epochs=1)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ActionMaskingTorchRLModule, model_config={"head_fcnet_hiddens": [32]}
            )
        )
        .callbacks(CountIllegalActions)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        for _ in range(2):
            result = algo.train()
    finally:
        algo.stop()
    runners = result["env_runners"]
    assert runners["num_env_steps_sampled_lifetime"] >= 1024
    assert runners["num_episodes_lifetime"] >= 1 and runners["finished_episodes"] >= 1
    assert runners["episode_len_mean"] > 5  # decisions in an episode of 400 jobs, not one-step episodes
    assert math.isfinite(runners["episode_return_mean"])
    assert runners["illegal_actions"] == 0  # the module masked every decision

"""Tianshou 2 takes the environment its documented way, a ``DummyVectorEnv`` of ``gym.make`` environments, with
its Collector and DQN.

Tianshou's Q-learning policies read the legal actions from ``batch.obs.mask`` and give the network
``batch.obs.obs`` (``DiscreteQLearningPolicy.forward`` and ``add_exploration_noise`` in 2.0.1; its own
``PettingZooEnv`` renames PettingZoo's ``action_mask`` to ``mask`` the same way). The environment's
``observation="dict"`` uses RLlib's names, ``observations`` and ``action_mask``, so a Tianshou user renames the
two keys with a Gymnasium wrapper, the place Tianshou's documentation gives for changing what an environment
returns (:func:`tianshou_env`, the snippet of docs/clients.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

torch = pytest.importorskip("torch")
pytest.importorskip("tianshou")

from tianshou.algorithm import DQN  # noqa: E402
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy  # noqa: E402
from tianshou.algorithm.optim import AdamOptimizerFactory  # noqa: E402
from tianshou.data import Collector, CollectStats, VectorReplayBuffer  # noqa: E402
from tianshou.data.buffer.buffer_base import MalformedBufferError  # noqa: E402
from tianshou.env import DummyVectorEnv  # noqa: E402
from tianshou.trainer import OffPolicyTrainerParams  # noqa: E402
from tianshou.utils.net.common import Net  # noqa: E402

import schedgym  # noqa: E402, F401  (registers the environments)

ID = "schedgym/Preemption-v1"
SMALL = {"n_jobs": 200, "load": 2.0}
"""about 13 decisions an episode, most of them with several preemptions legal: many short episodes, and a mask
that matters"""


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    # the CI machine's cores are shared; a tiny MLP gains nothing from more threads
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tianshou_env(**kwargs) -> gym.Env:
    """The environment with the mask where Tianshou looks: ``{"obs": the features, "mask": the legal actions}``."""
    env = gym.make(ID, observation="dict", **kwargs)
    inner = env.observation_space
    return gym.wrappers.TransformObservation(
        env,
        lambda o: {"obs": o["observations"], "mask": o["action_mask"] > 0},
        spaces.Dict({"obs": inner["observations"], "mask": spaces.Box(0, 1, inner["action_mask"].shape, bool)}),
    )


def _q_policy(env: gym.Env, eps: float = 0.0) -> DiscreteQLearningPolicy:
    net = Net(state_shape=env.observation_space["obs"].shape, action_shape=int(env.action_space.n), hidden_sizes=[64])
    return DiscreteQLearningPolicy(model=net, action_space=env.action_space, eps_training=eps, eps_inference=0.0)


@pytest.mark.parametrize("info, fails", [("flat", False), ("full", True)])
def test_the_buffer_stores_the_flat_info_without_nan(info, fails):
    # The info="full" control is what Tianshou met before info was flat: te_job_id is None between decisions.
    envs = DummyVectorEnv([lambda: gym.make(ID, observation="dict", info=info, **SMALL) for _ in range(2)])
    envs.seed(0)
    probe = gym.make(ID, observation="dict", **SMALL)
    policy = DiscreteQLearningPolicy(model=torch.nn.Identity(), action_space=probe.action_space)
    collector = Collector(policy, envs, VectorReplayBuffer(2000, 2), raise_on_nan_in_buffer=True)
    collector.reset()
    if fails:
        with pytest.raises(MalformedBufferError, match="NaN"):
            collector.collect(n_step=200, random=True)
        return
    stats = collector.collect(n_step=200, random=True)  # random: the live action space samples legal actions
    assert stats.n_collected_steps == 200 and stats.n_collected_episodes >= 5
    assert np.isfinite(stats.returns).all()
    assert collector.buffer.info.action_mask.dtype == bool


def test_the_dict_observation_needs_the_rename_for_tianshou():
    # why tianshou_env exists: without the rename the whole dict reaches the network, and no mask is read
    envs = DummyVectorEnv([lambda: gym.make(ID, observation="dict", **SMALL)])
    probe = tianshou_env(**SMALL)
    collector = Collector(_q_policy(probe), envs)
    collector.reset()
    with pytest.raises(TypeError, match="action_mask"):
        collector.collect(n_step=10)


def test_dqn_trains_on_the_renamed_dict_observation_with_legal_actions_only():
    torch.manual_seed(0)
    np.random.seed(0)  # Tianshou's epsilon-greedy draws from numpy's global generator
    # illegal_action="wait" lets the run finish and count what raising would report at the first one
    train_envs = DummyVectorEnv([lambda: tianshou_env(illegal_action="wait", **SMALL) for _ in range(3)])
    test_envs = DummyVectorEnv([lambda: tianshou_env(illegal_action="wait", **SMALL) for _ in range(2)])
    train_envs.seed(0)
    test_envs.seed(100)
    probe = tianshou_env(**SMALL)
    # epsilon 0.3: the exploration's random actions must be legal too (add_exploration_noise reads obs.mask)
    algorithm = DQN(
        policy=_q_policy(probe, eps=0.3),
        optim=AdamOptimizerFactory(lr=1e-3),
        gamma=0.9,
        target_update_freq=100,
    )
    buffer = VectorReplayBuffer(6000, len(train_envs))
    train_collector = Collector[CollectStats](
        algorithm, train_envs, buffer, exploration_noise=True, raise_on_nan_in_buffer=True
    )
    test_collector = Collector[CollectStats](algorithm, test_envs, raise_on_nan_in_buffer=True)
    train_collector.reset()
    test_collector.reset()
    train_collector.collect(n_step=240, random=True)
    result = algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=train_collector,
            test_collector=test_collector,
            max_epochs=1,
            epoch_num_steps=2400,
            collection_step_num_env_steps=30,
            update_step_num_gradient_steps_per_sample=0.2,
            test_step_num_episodes=4,
            batch_size=64,
            show_progress=False,
            verbose=False,
        )
    )

    assert result.train_step >= 2400 and result.update_step > 0
    assert result.train_episode >= 60  # about 13 steps an episode
    assert result.test_episode >= 4
    assert np.isfinite([result.best_reward, result.best_reward_std]).all() and result.best_reward < 0
    stored = buffer.sample_indices(0)
    assert len(stored) == len(buffer) >= 2400
    acts = buffer.act[stored]
    assert int((acts != 0).sum()) >= 500  # preemptions were chosen, so the mask mattered
    assert bool(buffer.obs.mask[stored, acts].all())
    assert int(buffer.info.illegal_actions[stored].max()) == 0
    assert np.isfinite(buffer.rew[stored]).all()
    assert int(buffer.terminated[stored].sum()) >= 60

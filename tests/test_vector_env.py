"""The vector environment: gymnasium.make_vec with the vector entry point, Gymnasium 1.x autoreset, masks, and
the stable-baselines3 adapter MaskablePPO trains on."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import schedgym  # noqa: F401  (registers the ids)
from schedgym.envs import PreemptionEnv
from schedgym.envs.vector_env import PreemptionVectorEnv
from schedgym.errors import ConfigError

ID = "schedgym/Preemption-v0"
SMALL = {"n_jobs": 120, "max_candidates": 8}


def make(num_envs: int = 3, **kwargs) -> PreemptionVectorEnv:
    env = gym.make_vec(ID, num_envs=num_envs, vectorization_mode="vector_entry_point", **{**SMALL, **kwargs})
    assert isinstance(env, PreemptionVectorEnv)
    return env


def legal(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(m)) for m in masks])


def test_make_vec_builds_the_vector_env_with_batched_spaces():
    env = make(4)
    assert env.num_envs == 4
    assert env.observation_space.shape == (4, *env.single_observation_space.shape)
    assert env.action_space.shape == (4,)
    assert env.max_episode_steps == gym.spec(ID).max_episode_steps
    obs, info = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape and obs.dtype == np.float32
    assert env.action_masks().shape == (4, SMALL["max_candidates"] + 1)


def test_sub_environments_step_exactly_like_single_environments():
    """Sub-environment i, reset with seed + i, follows the single environment reset with that seed, through
    episode ends and Gymnasium's next-step autoreset."""
    venv = make(3)
    singles = [PreemptionEnv(**SMALL) for _ in range(3)]
    obs, _ = venv.reset(seed=10)
    single_obs = [e.reset(seed=10 + i)[0] for i, e in enumerate(singles)]
    np.testing.assert_array_equal(obs, np.stack(single_obs))
    rng = np.random.default_rng(0)
    pending_reset = [False] * 3
    ends = 0
    for _ in range(150):
        actions = legal(venv.action_masks(), rng)
        obs, rewards, terminated, truncated, _ = venv.step(actions)
        for i, e in enumerate(singles):
            if pending_reset[i]:
                expected, _ = e.reset()  # autoreset: no seed, continues the env's generator
                assert rewards[i] == 0.0 and not terminated[i] and not truncated[i]
                pending_reset[i] = False
            else:
                expected, r, term, trunc, _ = e.step(int(actions[i]))
                assert rewards[i] == r and terminated[i] == term and truncated[i] == trunc
                pending_reset[i] = term or trunc
                ends += int(term or trunc)
            np.testing.assert_array_equal(obs[i], expected)
    assert ends > 0, "the test should cross episode ends"


def test_masks_of_a_sub_environment_about_to_reset_allow_only_zero():
    venv = make(2)
    venv.reset(seed=0)
    venv._autoreset[1] = True
    masks = venv.action_masks()
    assert masks[1].tolist() == [True] + [False] * SMALL["max_candidates"]


def test_max_episode_steps_truncates_sub_environments():
    venv = make(2, max_episode_steps=2, n_jobs=1000)
    venv.reset(seed=0)
    _, _, term1, trunc1, _ = venv.step(np.zeros(2, dtype=int))
    assert not trunc1.any() and not term1.all(), "the episodes must outlast one step for this test"
    _, _, term2, trunc2, _ = venv.step(np.zeros(2, dtype=int))
    for i in range(2):
        if not term1[i]:  # still running after two steps: truncated unless it ended by itself
            assert term2[i] != trunc2[i]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_num_envs_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="num_envs"):
        PreemptionVectorEnv(num_envs=bad, **SMALL)


def test_maskable_ppo_trains_on_the_adapter():
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    from agents.vec_env import SB3VecEnv

    venv = SB3VecEnv(make(2))
    assert is_masking_supported(venv)
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (2, *venv.observation_space.shape)
    assert get_action_masks(venv).shape == (2, SMALL["max_candidates"] + 1)
    model = MaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=32, seed=0, device="cpu")
    model.learn(64)
    assert model.num_timesteps >= 64


def test_the_adapter_resets_at_once_and_keeps_the_final_observation():
    pytest.importorskip("stable_baselines3")
    from agents.vec_env import SB3VecEnv

    venv = SB3VecEnv(make(2))
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    seen_end = False
    for _ in range(200):
        venv.step_async(legal(venv.action_masks(), rng))
        obs, rewards, dones, infos = venv.step_wait()
        for i in np.flatnonzero(dones):
            seen_end = True
            assert "terminal_observation" in infos[i]
            assert not venv.venv._autoreset[i]  # already reset: no next-step reset pending
        if seen_end:
            break
    assert seen_end

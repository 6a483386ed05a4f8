"""The vector environment: gymnasium.make_vec with the vector entry point, Gymnasium 1.x autoreset, masks, and
the stable-baselines3 adapter MaskablePPO trains on."""

from __future__ import annotations

import copy
import os
import pickle
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import schedgym  # noqa: F401  (registers the ids)
from schedgym.decision.batch import NativeBatch, PythonBatch
from schedgym.envs import PreemptionEnv
from schedgym.envs.vector_env import PreemptionVectorEnv
from schedgym.errors import ConfigError, IllegalDecisionError

ID = "schedgym/Preemption-v1"
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

    venv = SB3VecEnv(make(2, n_threads=2, **LOCKSTEP))
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


# ----------------------------------------------------------------------------------------------------------
# Lockstep against single environments (the native batch stepper on the native engine, the per-environment
# loop on the Python engine)
# ----------------------------------------------------------------------------------------------------------


class Singles:
    """N single environments driven as the vector environment's sub-environments should be: seeds
    ``seed + i``, next-step autoreset, ``max_episode_steps`` truncation; their results batched with Gymnasium's
    own ``_add_info``."""

    def __init__(self, venv: PreemptionVectorEnv, n: int, max_episode_steps: int | None = None, **kwargs: Any):
        self.venv = venv
        self.envs = [PreemptionEnv(**{**SMALL, **kwargs}) for _ in range(n)]
        self.max_episode_steps = max_episode_steps
        self.pending = [False] * n
        self.steps = [0] * n

    def reset(self, seed: int) -> tuple[np.ndarray, dict]:
        infos: dict = {}
        observations = []
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=seed + i)
            observations.append(obs)
            infos = self.venv._add_info(infos, info, i)
        self.pending = [False] * len(self.envs)
        self.steps = [0] * len(self.envs)
        return np.stack(observations), infos

    def masks(self) -> np.ndarray:
        masks = np.stack([env.action_masks() for env in self.envs])
        for i, pending in enumerate(self.pending):
            if pending:
                masks[i] = False
                masks[i, 0] = True
        return masks

    def step(self, actions: np.ndarray) -> tuple:
        n = len(self.envs)
        observations = []
        rewards = np.zeros(n)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        infos: dict = {}
        for i, env in enumerate(self.envs):
            if self.pending[i]:
                obs, info = env.reset()
                self.steps[i] = 0
            else:
                obs, rewards[i], terminated[i], truncated[i], info = env.step(int(actions[i]))
                self.steps[i] += 1
                if self.max_episode_steps is not None and self.steps[i] >= self.max_episode_steps:
                    truncated[i] = not terminated[i]
            self.pending[i] = bool(terminated[i] or truncated[i])
            observations.append(obs)
            infos = self.venv._add_info(infos, info, i)
        return np.stack(observations), rewards, terminated, truncated, infos


def assert_same_infos(got: dict, expected: dict, where: str) -> None:
    assert list(got) == list(expected), where
    for key, value in expected.items():
        if isinstance(value, dict):
            assert_same_infos(got[key], value, f"{where}, {key}")
        else:
            assert got[key].dtype == value.dtype, f"{where}, {key}: {got[key].dtype} != {value.dtype}"
            assert got[key].shape == value.shape, f"{where}, {key}"
            assert got[key].tolist() == value.tolist(), f"{where}, {key}"


# Large enough that most episodes offer decisions, several of them preemptions, small enough to end often.
LOCKSTEP = {"n_jobs": 300}


def run_lockstep(
    n: int, seed: int, n_steps: int, n_threads: int | None = None, max_episode_steps: int | None = None, **kwargs
) -> tuple[int, int, int]:
    """Step a vector environment and its single twins with the same random legal actions, comparing everything;
    returns how many episodes ended, how many steps preempted someone and how many offered a choice."""
    kwargs = {**LOCKSTEP, **kwargs}
    venv = PreemptionVectorEnv(n, max_episode_steps=max_episode_steps, n_threads=n_threads, **{**SMALL, **kwargs})
    singles = Singles(venv, n, max_episode_steps, **kwargs)
    obs, info = venv.reset(seed=seed)
    expected_obs, expected_info = singles.reset(seed)
    assert obs.tolist() == expected_obs.tolist()
    assert_same_infos(info, expected_info, "reset")
    rng = np.random.default_rng(seed)
    ends = preempting = choices = 0
    preemptions = info["preemptions"]
    for t in range(n_steps):
        masks = venv.action_masks()
        assert masks.tolist() == singles.masks().tolist(), f"masks before step {t}"
        actions = legal(masks, rng)
        got = venv.step(actions)
        expected = singles.step(actions)
        where = f"step {t}"
        assert got[0].dtype == np.float32 and got[0].tolist() == expected[0].tolist(), where
        assert venv.observation_space.contains(got[0]), where
        for g, e in zip(got[1:4], expected[1:4], strict=True):
            assert g.dtype == e.dtype and g.tolist() == e.tolist(), where
        assert_same_infos(got[4], expected[4], where)
        ends += int((got[2] | got[3]).sum())
        preempting += int((got[4]["preemptions"] > preemptions).sum())
        preemptions = got[4]["preemptions"]
        choices += int((got[4]["n_candidates"] > 0).sum())
    for mine, twin in zip(venv.envs, singles.envs, strict=True):  # the sub-environments' own state follows
        assert (mine.n_steps, mine.n_decisions, mine.sim.now) == (twin.n_steps, twin.n_decisions, twin.sim.now)
    return ends, preempting, choices


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_sub_environments_match_single_environments_in_lockstep(seed):
    ends, preempting, choices = run_lockstep(4, seed, 120, n_threads=2)
    assert ends > 20 and preempting > 10 and choices > 100, "the test should cross episode ends and real decisions"


@pytest.mark.parametrize("n_threads", [1, 3, 8])
def test_results_do_not_depend_on_the_number_of_threads(n_threads, engine):
    if engine == "python":
        pytest.skip("on the Python engine the sub-environments are stepped one by one, without threads")
    ends, preempting, _ = run_lockstep(6, 7, 60, n_threads=n_threads)
    assert ends > 0 and preempting > 0


def test_lockstep_with_truncation_bounded_reward_and_weights():
    kwargs = {"reward": "bounded_slowdown", "te_weight": 2.0, "be_weight": 0.5, "preemption_cost": 0.25}
    ends, preempting, _ = run_lockstep(3, 11, 80, n_threads=2, max_episode_steps=6, **kwargs)
    assert ends > 10 and preempting > 0


@pytest.mark.parametrize(
    "asking",
    # (SMALL's max_candidates is the victim mode's: the plan mode refuses it, so it goes back to the default)
    [
        {"action_mode": "plan", "observation_version": 2, "max_candidates": 16},
        {"observation_version": 2, "queue_rows": 2},
    ],
    ids=["plan", "victim-v2"],
)
def test_lockstep_in_the_plan_mode_and_with_observation_version_2(asking):
    ends, preempting, choices = run_lockstep(3, 5, 60, n_threads=2, **asking)
    assert ends > 3 and preempting > 5 and choices > 30


def test_the_native_engine_steps_in_one_batch(engine):
    venv = make(3)
    venv.reset(seed=0)
    assert isinstance(venv._batch, NativeBatch if engine == "native" else PythonBatch)
    if engine == "native":
        assert 1 <= venv._batch.stepper.n_threads <= 3


def test_action_masks_after_an_autoreset_are_the_new_episodes():
    venv = make(2, n_jobs=30)
    singles = Singles(venv, 2, n_jobs=30)
    venv.reset(seed=4)
    singles.reset(4)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        actions = legal(venv.action_masks(), rng)
        _, _, terminated, truncated, _ = venv.step(actions)
        singles.step(actions)
        masks = venv.action_masks()
        for i in np.flatnonzero(terminated | truncated):
            assert masks[i].tolist() == [True] + [False] * SMALL["max_candidates"]
        was_ending = terminated | truncated
        actions = legal(masks, rng)
        venv.step(actions)
        singles.step(actions)
        for i in np.flatnonzero(was_ending):  # just reset: the fresh episode's mask, and it can be stepped
            assert venv.action_masks()[i].tolist() == singles.envs[i].action_masks().tolist()
            checked += 1
    assert checked > 0


def test_illegal_action_raises_before_any_sub_environment_steps():
    venv = make(3, **LOCKSTEP)
    venv.reset(seed=0)
    masks = venv.action_masks()
    i = int(np.argmax(masks.sum(axis=1)))  # a sub-environment with a choice
    actions = np.zeros(3, dtype=np.int64)
    actions[i] = SMALL["max_candidates"] + 1
    steps = [env.n_steps for env in venv.envs]
    with pytest.raises(IllegalDecisionError, match=rf"Sub-environment {i}: Action {SMALL['max_candidates'] + 1} is"):
        venv.step(actions)
    assert [env.n_steps for env in venv.envs] == steps
    assert venv.action_masks().tolist() == masks.tolist()


def test_integral_float_actions_are_accepted_and_others_raise():
    venv = make(2, **LOCKSTEP)
    twin = make(2, **LOCKSTEP)
    seed = next(s for s in range(20) if venv.reset(seed=s)[1]["n_candidates"].min() > 0)  # both have a choice
    twin.reset(seed=seed)
    with pytest.raises(IllegalDecisionError, match="Expected an integer action, got 0.5"):
        venv.step(np.array([0.0, 0.5]))
    a = venv.step(np.array([0.0, 1.0]))
    b = twin.step(np.array([0, 1]))
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


def test_returned_arrays_are_fresh():
    venv = make(2)
    obs, info = venv.reset(seed=0)
    rng = np.random.default_rng(0)
    kept = []
    for _ in range(5):
        out = venv.step(legal(venv.action_masks(), rng))
        kept.append((out, copy.deepcopy(out)))
        masks = venv.action_masks()
        masks[:] = False  # a caller's array: writing to it changes nothing else
    for out, snapshot in kept:
        assert out[0].tolist() == snapshot[0].tolist()
        assert out[1].tolist() == snapshot[1].tolist()
        assert out[4]["action_mask"].tolist() == snapshot[4]["action_mask"].tolist()
    assert venv.action_masks()[:, 0].all()


def test_n_threads_must_be_a_positive_integer():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="n_threads"):
            PreemptionVectorEnv(num_envs=2, n_threads=bad, **SMALL)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_vector_env_copies_continue_identically(how):
    venv = make(3, **LOCKSTEP)
    venv.reset(seed=5)
    rng = np.random.default_rng(5)
    for _ in range(7):
        venv.step(legal(venv.action_masks(), rng))
    twin = pickle.loads(pickle.dumps(venv)) if how == "pickle" else copy.deepcopy(venv)
    assert twin._autoreset.tolist() == venv._autoreset.tolist()
    for t in range(40):
        masks = venv.action_masks()
        assert twin.action_masks().tolist() == masks.tolist(), f"step {t}"
        actions = legal(masks, rng)
        a, b = venv.step(actions), twin.step(actions)
        for x, y in zip(a[:4], b[:4], strict=True):
            assert x.tolist() == y.tolist(), f"step {t}"
        assert_same_infos(a[4], b[4], f"step {t}")


def test_sub_environments_driven_from_outside_are_followed():
    """A sub-environment reset or stepped directly (env_method, a user) continues from its new state."""
    venv = make(2, **LOCKSTEP)
    twin = PreemptionEnv(**{**SMALL, **LOCKSTEP})
    venv.reset(seed=0)
    venv.envs[1].reset(seed=42)
    twin.reset(seed=42)
    assert venv.action_masks()[1].tolist() == twin.action_masks().tolist()
    a = int(np.flatnonzero(twin.action_masks())[-1])
    venv.envs[1].step(a)
    twin.step(a)
    rng = np.random.default_rng(0)
    for _ in range(3):
        actions = legal(venv.action_masks(), rng)
        obs, rewards, terminated, _, info = venv.step(actions)
        expected, reward, term, _, expected_info = twin.step(int(actions[1]))
        assert obs[1].tolist() == expected.tolist() and rewards[1] == reward and terminated[1] == term
        assert info["decisions"][1] == expected_info["decisions"]
        if term:
            break


def test_the_adapter_matches_stable_baselines3s_own_vec_env_over_single_environments():
    """SB3VecEnv over the vector environment gives what DummyVecEnv gives over single environments: the same
    observations (the next episode's first at once), rewards, dones, final observations and masks."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from agents.vec_env import SB3VecEnv

    kwargs = {**SMALL, **LOCKSTEP}
    mine = SB3VecEnv(make(3, n_threads=2, **LOCKSTEP))
    theirs = DummyVecEnv([lambda: PreemptionEnv(**kwargs) for _ in range(3)])
    for venv in (mine, theirs):
        venv.seed(3)
    assert mine.reset().tolist() == theirs.reset().tolist()
    rng = np.random.default_rng(3)
    ends = 0
    for t in range(80):
        masks = mine.env_method("action_masks")
        assert [m.tolist() for m in masks] == [m.tolist() for m in theirs.env_method("action_masks")], f"step {t}"
        actions = legal(np.stack(masks), rng)
        got, expected = mine.step(actions), theirs.step(actions)
        for g, e in zip(got[:3], expected[:3], strict=True):
            assert g.dtype == e.dtype and g.tolist() == e.tolist(), f"step {t}"
        for i in np.flatnonzero(got[2]):
            ends += 1
            assert got[3][i]["terminal_observation"].tolist() == expected[3][i]["terminal_observation"].tolist()
    assert ends > 3


def test_the_batch_stepper_checks_its_arrays_and_its_calls(engine):
    if engine == "python":
        pytest.skip("the batch stepper is the native engine's")
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    venv = make(2)
    venv.reset(seed=0)
    batch = venv._batch
    arrays = {name: getattr(batch, name) for name in ("actions", "skip", "obs", "mask", "reward", "parts")}
    arrays.update({name: getattr(batch, name) for name in ("terminated", "resolved", "sim_time", "interval")})
    arrays.update({name: getattr(batch, name) for name in ("te_job", "n_candidates", "preemptions", "decisions")})
    arrays["last_accrued"] = batch.last_accrued
    settings = {"te_weight": 1.0, "be_weight": 1.0, "preemption_cost": 0.0, "bounded": False, "threads": 1}
    m = SMALL["max_candidates"]
    _engine.BatchStepper(2, m, **settings, arrays=arrays)  # the arrays as the vector environment makes them
    with pytest.raises(ValueError, match=r"Expected obs to have shape \(2, "):
        _engine.BatchStepper(2, m, **settings, arrays={**arrays, "obs": batch.obs[:, :-1].copy()})
    with pytest.raises(ValueError, match="Missing batch array 'mask'"):
        _engine.BatchStepper(2, m, **settings, arrays={k: v for k, v in arrays.items() if k != "mask"})
    with pytest.raises(TypeError, match="Expected obs to be a C-contiguous numpy array of float32"):
        _engine.BatchStepper(2, m, **settings, arrays={**arrays, "obs": batch.obs.astype(np.float64)})
    with pytest.raises(RuntimeError, match="finish"):
        batch.stepper.finish()
    batch.skip[:] = True  # a step that steps nobody
    batch.stepper.begin()
    with pytest.raises(RuntimeError, match="begin"):
        batch.stepper.begin()
    batch.stepper.finish()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_steps_and_closes_a_vector_env_it_inherited():
    """The child has the parent's memory but not its worker threads: it steps alone, and closing the vector
    environment (which stops the workers in the parent) neither waits for them nor aborts."""
    venv = make(3, n_threads=2, **LOCKSTEP)
    venv.reset(seed=0)
    venv.step(np.zeros(3, dtype=np.int64))
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, never return into pytest
        code = 1
        try:
            for _ in range(10):
                venv.step(np.zeros(3, dtype=np.int64))
            venv.close()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    venv.step(np.zeros(3, dtype=np.int64))  # the parent's workers are still there
    venv.close()

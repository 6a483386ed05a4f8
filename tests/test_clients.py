"""What third-party RL libraries rely on when they take the environment unchanged (issue 21)."""

from __future__ import annotations

import base64
import copy
import json
import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import schedgym  # noqa: F401  (registers the environments)
from schedgym.envs import PreemptionEnv
from schedgym.errors import SchedGymError

ID = "schedgym/Preemption-v1"


# ----------------------------------------------------------------------------------------------------------
# 1. An unknown keyword argument is a TypeError worded as Python words it (TorchRL probes with frameskip)


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: PreemptionEnv(**kw),
        lambda **kw: gym.make(ID, **kw),
        lambda **kw: gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", **kw),
    ],
    ids=["class", "make", "make_vec"],
)
def test_an_unknown_keyword_is_a_type_error_saying_unexpected_keyword_argument(make):
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'") as exc:
        make(frameskip=4)
    assert isinstance(exc.value, SchedGymError)  # still one line on the command line


def test_several_unknown_keywords_are_all_named():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'a' \(unknown: \['a', 'b'\]\)"):
        PreemptionEnv(b=1, a=2)


def test_a_simulator_rule_given_flat_gets_the_hint():
    with pytest.raises(TypeError, match=r"sim=\{'max_preemptions': \.\.\.\}"):
        PreemptionEnv(max_preemptions=2)


# ----------------------------------------------------------------------------------------------------------
# 4. The action space pickles as a plain Discrete, without the environment


def _stepped_env(steps: int = 20) -> gym.Env:
    env = gym.make(ID)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return env


def test_the_action_space_pickles_as_a_plain_discrete_of_the_same_size():
    env = _stepped_env()
    space = env.action_space
    data = pickle.dumps(space)
    assert b"schedgym" not in data and len(data) < 2_000  # it was 111 KB: the env and its simulator
    plain = pickle.loads(data)
    assert type(plain) is spaces.Discrete and plain == spaces.Discrete(space.n)
    twin = copy.deepcopy(space)
    assert type(twin) is spaces.Discrete
    # the same generator state: both draw the same unmasked sequence
    assert [int(twin.sample()) for _ in range(8)] == [int(spaces.Discrete.sample(space)) for _ in range(8)]


def test_a_copied_environment_samples_legal_actions_of_its_own_decision():
    env = _stepped_env()
    for twin in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        raw = twin.unwrapped
        assert raw.action_space._mask_fn.__self__ is raw  # bound to the copy, not to the original
        for _ in range(30):
            a = int(twin.action_space.sample())
            assert raw.action_masks()[a]
            _, _, terminated, truncated, _ = twin.step(a)
            if terminated or truncated:
                break


def test_a_saved_sb3_model_holds_no_schedgym_object():
    save_util = pytest.importorskip("stable_baselines3.common.save_util")
    env = _stepped_env()
    text = save_util.data_to_json({"action_space": env.action_space, "observation_space": env.observation_space})
    for entry in json.loads(text).values():  # SB3 stores each space cloudpickled (beside a readable summary)
        assert b"schedgym" not in base64.b64decode(entry[":serialized:"])
    loaded = save_util.json_to_data(text)
    assert loaded["action_space"] == spaces.Discrete(env.action_space.n)
    assert np.array_equal(loaded["observation_space"].high, env.observation_space.high)


# ----------------------------------------------------------------------------------------------------------
# 3. The vector environment's three autoreset modes, in lockstep with Gymnasium's own SyncVectorEnv


class _Truncate(gym.Wrapper):
    """The vector environment's truncation rule: after ``limit`` steps, unless the episode terminated."""

    def __init__(self, env: gym.Env, limit: int | None):
        super().__init__(env)
        self.limit, self.t = limit, 0

    def reset(self, **kwargs):
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        return obs, reward, terminated, self.limit is not None and self.t >= self.limit and not terminated, info


def _same(got, expected, where: str) -> None:
    if isinstance(expected, tuple):
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            _same(g, e, f"{where} [{i}]")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), where
        for key in expected:
            _same(got[key], expected[key], f"{where}, {key}")
    else:
        got, expected = np.asarray(got), np.asarray(expected)
        assert got.dtype == expected.dtype and got.shape == expected.shape, where
        if expected.dtype == object and any(isinstance(e, (np.ndarray, dict)) for e in expected):  # final_obs
            for i, (g, e) in enumerate(zip(got, expected, strict=True)):
                assert (g is None) == (e is None), f"{where}[{i}]"
                if e is not None:
                    _same(g, e, f"{where}[{i}]")
        else:
            assert got.tolist() == expected.tolist(), where


MODES = {"next-step": AutoresetMode.NEXT_STEP, "same-step": AutoresetMode.SAME_STEP, "disabled": AutoresetMode.DISABLED}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("limit", [None, 7])
def test_every_autoreset_mode_steps_as_gymnasiums_sync_vector_env(mode, limit):
    from gymnasium.vector import SyncVectorEnv

    kwargs = {"n_jobs": 60, "max_candidates": 4}
    n = 3
    # (the vector entry point takes its arguments as keywords: Gymnasium refuses vector_kwargs there)
    venv = gym.make_vec(ID, num_envs=n, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs)
    venv.unwrapped.max_episode_steps = limit
    ref = SyncVectorEnv(
        [lambda: _Truncate(PreemptionEnv(**kwargs), limit) for _ in range(n)], autoreset_mode=MODES[mode]
    )
    assert venv.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"] == MODES[mode]
    _same(venv.reset(seed=3), ref.reset(seed=3), "reset")
    rng = np.random.default_rng(0)
    ends = 0
    for t in range(50):
        masks = np.stack([e.unwrapped.action_masks() for e in ref.envs])
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        got, expected = venv.step(actions), ref.step(actions)
        _same(got, expected, f"step {t}")
        ended = got[2] | got[3]
        ends += int(ended.sum())
        if mode == "disabled" and ended.any():
            with pytest.raises(SchedGymError, match="reset_mask"):
                venv.step(actions)
            _same(venv.reset(options={"reset_mask": ended}), ref.reset(options={"reset_mask": ended}), f"mask {t}")
    assert ends >= 5, "the test should cross several episode ends"


def test_an_unknown_autoreset_mode_is_refused():
    with pytest.raises(SchedGymError, match="autoreset_mode"):
        gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", autoreset_mode="x")


# ----------------------------------------------------------------------------------------------------------
# 5. The vector environment renders and samples legal actions


def _venv(**kwargs):
    return gym.make_vec(ID, num_envs=3, vectorization_mode="vector_entry_point", n_jobs=100, **kwargs)


def test_the_vector_env_samples_only_legal_actions():
    venv = _venv()
    venv.reset(seed=0)
    venv.action_space.seed(1)
    preempting = 0
    for _ in range(60):
        masks = venv.unwrapped.action_masks()
        actions = venv.action_space.sample()
        assert masks[np.arange(3), actions].all(), (actions, masks)
        preempting += int((actions > 0).sum())
        venv.step(actions)
    assert preempting > 0, "the samples should include preemptions"


def test_the_vector_action_space_pickles_as_a_plain_multidiscrete():
    venv = _venv()
    venv.reset(seed=0)
    data = pickle.dumps(venv.action_space)
    assert b"schedgym" not in data
    assert type(pickle.loads(data)) is spaces.MultiDiscrete
    assert pickle.loads(data) == venv.action_space


@pytest.mark.parametrize("mode", ["rgb_array", "ansi"])
def test_the_vector_env_renders_every_sub_environment(mode):
    venv = _venv(render_mode=mode)
    assert venv.render_mode == mode and mode in venv.metadata["render_modes"]
    venv.reset(seed=0)
    frames = venv.render()
    assert isinstance(frames, tuple) and len(frames) == 3
    singles = [PreemptionEnv(n_jobs=100, render_mode=mode) for _ in range(3)]
    for i, env in enumerate(singles):
        env.reset(seed=i)
        expected = env.render()
        if mode == "rgb_array":
            assert frames[i].shape == expected.shape and frames[i].dtype == np.uint8
            assert np.array_equal(frames[i], expected)
        else:
            assert frames[i] == expected


# ----------------------------------------------------------------------------------------------------------
# 2. info holds flat numbers of a fixed type and shape for the whole episode

FLAT = {
    "sim_time": float,
    "interval": float,
    "te_job": int,
    "n_candidates": int,
    "decisions": int,
    "preemptions": int,
    "reward_te": float,
    "reward_be": float,
    "reward_preemption": float,
}


def test_info_is_flat_numbers_of_one_type_for_the_whole_episode():
    env = gym.make(ID, n_jobs=80)
    _, info = env.reset(seed=0)
    env.action_space.seed(0)
    seen_end = False
    for _ in range(2_000):
        assert set(info) == {*FLAT, "action_mask"}, sorted(info)
        for key, kind in FLAT.items():
            assert type(info[key]) is kind, (key, info[key])
        assert info["action_mask"].dtype == np.bool_ and info["action_mask"].shape == (env.action_space.n,)
        if info["te_job"] < 0:
            assert info["te_job"] == -1 and info["n_candidates"] == 0
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        assert reward == info["reward_te"] + info["reward_be"] + info["reward_preemption"]
        if terminated:
            seen_end = True
            assert info["te_job"] == -1 and type(info["te_job"]) is int  # not None at the end
            break
    assert seen_end


def test_full_info_adds_the_job_name_and_the_parts_dict():
    env = PreemptionEnv(n_jobs=80, info="full")
    _, info = env.reset(seed=0)
    assert info["te_job_id"] == (env.backend.job_name() if info["te_job"] >= 0 else None)
    assert info["reward_parts"] == {"te_slowdown": 0.0, "be_slowdown": 0.0, "preemption": 0.0}
    with pytest.raises(SchedGymError, match="info 'flat' or 'full'"):
        PreemptionEnv(info="rich")


# ----------------------------------------------------------------------------------------------------------
# 7. The documented names are reachable from a plain `import schedgym`, the ids from any process


def test_the_subpackages_are_reachable_after_a_plain_import():
    code = (
        "import schedgym\n"
        "assert 'schedgym.envs' not in __import__('sys').modules  # loaded on first use only\n"
        "print(schedgym.envs.IllegalActionAsWait.__name__, schedgym.registry.policy_names()[:1])\n"
        "try:\n    schedgym.nope\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].startswith("IllegalActionAsWait [")
    assert "has no attribute 'nope'" in out


# Gymnasium 1.x has no plugin entry points (1.0 removed them), so a process that has not imported schedgym
# knows no schedgym id; "schedgym:ID" makes Gymnasium import the package first, in whatever process reads it.

FRESH = "import sys\nimport gymnasium as gym\n"


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FRESH + code], capture_output=True, text=True, timeout=120)


def test_a_fresh_process_makes_the_environments_by_the_module_prefix():
    code = (
        "assert 'schedgym' not in sys.modules\n"
        "env = gym.make('schedgym:schedgym/Preemption-v1', n_jobs=40)\n"
        "obs, info = env.reset(seed=0)\n"
        "vec = gym.make_vec('schedgym:schedgym/PreemptionLarge-v1', 2, vectorization_mode='vector_entry_point')\n"
        "print(type(env.unwrapped).__name__, env.spec.id, env.spec.max_episode_steps)\n"
        "print(type(vec).__name__, vec.num_envs)\n"
    )
    done = _fresh_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["PreemptionEnv", "schedgym/Preemption-v1", "20000", "PreemptionVectorEnv", "2"]


def test_a_fresh_process_without_the_prefix_is_told_the_namespace_is_unknown():
    done = _fresh_python("gym.make('schedgym/Preemption-v1')\n")
    assert done.returncode != 0 and "NamespaceNotFound: Namespace schedgym not found" in done.stderr


def test_spawned_async_workers_find_the_environment_by_the_module_prefix():
    # Gymnasium's AsyncVectorEnv with the spawn context: each worker is a fresh interpreter that unpickles the
    # env factory, which carries only the id.
    venv = gym.make_vec(
        "schedgym:schedgym/Preemption-v1",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"context": "spawn"},
        n_jobs=40,
    )
    try:
        obs, info = venv.reset(seed=[0, 1])
        assert obs.shape[0] == 2 and info["action_mask"].shape == (2, venv.single_action_space.n)
        obs, reward, *_ = venv.step(np.zeros(2, dtype=np.int64))
        assert np.isfinite(reward).all()
    finally:
        venv.close()


# ----------------------------------------------------------------------------------------------------------
# 6. For clients that cannot mask: an illegal action taken as a wait, as an env option


def test_an_illegal_action_is_taken_as_a_wait_and_counted():
    kwargs = {"n_jobs": 120, "max_candidates": 4}
    env, twin = PreemptionEnv(illegal_action="wait", **kwargs), PreemptionEnv(**kwargs)
    _, info = env.reset(seed=1)
    twin.reset(seed=1)
    assert info["illegal_actions"] == 0
    rng = np.random.default_rng(0)
    illegal = 0
    for _ in range(400):
        action = int(rng.integers(kwargs["max_candidates"] + 1))  # blind: often illegal
        legal = bool(env.action_masks()[action])
        illegal += not legal
        got = env.step(action)
        expected = twin.step(action if legal else 0)
        assert np.array_equal(got[0], expected[0]) and got[1:4] == expected[1:4]
        assert got[4]["illegal_actions"] == illegal
        if got[2]:
            break
    assert illegal > 0
    if got[2]:
        env.reset(seed=2)
    with pytest.raises(SchedGymError, match="integer action"):  # not an integer: still an error
        env.step(1.5)


def test_the_checkers_accept_the_wait_option():
    from gymnasium.utils.env_checker import check_env

    check_env(gym.make(ID, illegal_action="wait", n_jobs=100).unwrapped)
    with pytest.raises(SchedGymError, match="illegal_action 'raise' or 'wait'"):
        PreemptionEnv(illegal_action="ignore")


@pytest.mark.parametrize("mode", ["next-step", "same-step"])
def test_the_vector_env_takes_illegal_actions_as_waits_as_its_sub_environments_do(mode):
    from gymnasium.vector import SyncVectorEnv

    kwargs = {"n_jobs": 60, "max_candidates": 4, "illegal_action": "wait"}
    venv = gym.make_vec(ID, num_envs=3, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs)
    ref = SyncVectorEnv([lambda: PreemptionEnv(**kwargs) for _ in range(3)], autoreset_mode=MODES[mode])
    _same(venv.reset(seed=5), ref.reset(seed=5), "reset")
    rng = np.random.default_rng(1)
    for t in range(40):
        actions = rng.integers(kwargs["max_candidates"] + 1, size=3)  # blind
        _same(venv.step(actions), ref.step(actions), f"step {t}")
    _same(venv.step(list(actions)), ref.step(list(actions)), "a list of actions")


def test_the_dict_observation_carries_the_mask_and_passes_the_checkers():
    from gymnasium.utils.env_checker import check_env

    env = PreemptionEnv(observation="dict", n_jobs=100)
    assert isinstance(env.observation_space, spaces.Dict)
    assert set(env.observation_space.spaces) == {"observations", "action_mask"}
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert np.array_equal(obs["action_mask"], info["action_mask"].astype(np.float32))
    flat = PreemptionEnv(n_jobs=100)
    assert np.array_equal(obs["observations"], flat.reset(seed=0)[0])
    check_env(PreemptionEnv(observation="dict", n_jobs=100))
    sb3 = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3.check_env(PreemptionEnv(observation="dict", n_jobs=100), warn=False)
    with pytest.raises(SchedGymError, match="observation 'flat' or 'dict'"):
        PreemptionEnv(observation="tuple")


@pytest.mark.parametrize("mode", ["next-step", "same-step", "disabled"])
def test_the_vector_env_batches_the_dict_observation_as_sync_vector_env(mode):
    from gymnasium.vector import SyncVectorEnv

    kwargs = {"n_jobs": 60, "max_candidates": 4, "observation": "dict", "illegal_action": "wait"}
    venv = gym.make_vec(ID, num_envs=3, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs)
    ref = SyncVectorEnv([lambda: PreemptionEnv(**kwargs) for _ in range(3)], autoreset_mode=MODES[mode])
    assert venv.observation_space == ref.observation_space
    _same(venv.reset(seed=2), ref.reset(seed=2), "reset")
    rng = np.random.default_rng(3)
    for t in range(40):
        actions = rng.integers(kwargs["max_candidates"] + 1, size=3)
        got, expected = venv.step(actions), ref.step(actions)
        _same(got, expected, f"step {t}")
        if mode == "disabled" and (got[2] | got[3]).any():
            mask = got[2] | got[3]
            _same(venv.reset(options={"reset_mask": mask}), ref.reset(options={"reset_mask": mask}), f"mask {t}")


# ----------------------------------------------------------------------------------------------------------
# Every combination of the options passes Gymnasium's and stable-baselines3's checkers, without warnings


@pytest.mark.parametrize("observation", ["flat", "dict"])
@pytest.mark.parametrize("illegal_action", ["raise", "wait"])
@pytest.mark.parametrize("info", ["flat", "full"])
def test_every_combination_of_the_client_options_passes_both_checkers(observation, illegal_action, info):
    import warnings

    from gymnasium.utils.env_checker import check_env

    sb3 = pytest.importorskip("stable_baselines3.common.env_checker")
    options = {"observation": observation, "illegal_action": illegal_action, "info": info, "n_jobs": 400}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(ID, **options).unwrapped)
        sb3.check_env(gym.make(ID, **options).unwrapped, warn=True)

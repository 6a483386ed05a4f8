"""What third-party RL libraries rely on when they take the environment unchanged (issue 21)."""

from __future__ import annotations

import base64
import copy
import json
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

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

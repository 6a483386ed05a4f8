"""The environment on ``workload="mix"``: a training level per episode, its cluster changing between episodes,
fixed spaces, deterministic from reset's seed on either engine (the autouse ``engine`` fixture)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from schedgym.envs import PreemptionEnv
from schedgym.errors import ConfigError
from schedgym.sim.simulator import native_available


def _legal(mask: np.ndarray, rng: np.random.Generator) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def _rollout(env: PreemptionEnv, seed: int, steps: int = 60) -> tuple[int, list[float]]:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards = []
    for _ in range(steps):
        _, r, term, _, _ = env.step(_legal(env.action_masks(), rng))
        rewards.append(r)
        if term:
            break
    return env.cluster.n_nodes, rewards


def test_mix_passes_check_env():
    check_env(gym.make("schedgym/Preemption-v1", workload="mix").unwrapped, skip_render_check=True)


def test_mix_changes_cluster_between_episodes_with_fixed_spaces():
    env = gym.make("schedgym/Preemption-v1", workload="mix", max_candidates=8)
    shapes, sizes = set(), set()
    for seed in range(8):
        obs, _ = env.reset(seed=seed)
        assert env.observation_space.contains(obs)
        u = env.unwrapped
        sizes.add(u.cluster.n_nodes)
        shapes.add(tuple(u.cluster.capacity[0]))
        assert u.cluster.name.startswith("mix[")
    assert len(sizes) > 1 and len(shapes) > 1


def test_mix_same_seed_same_episode():
    a, b = PreemptionEnv(workload="mix"), PreemptionEnv(workload="mix")
    assert _rollout(a, 3) == _rollout(b, 3)


@pytest.mark.parametrize("num_levels", [None, 3])
def test_reset_draws_its_level_as_imitation_does(num_levels):
    """agents.train records a teacher on draw_train_level_seed's levels "as reset draws them": the same rule."""
    from gymnasium.utils import seeding

    from schedgym.workloads.distribution import draw_train_level_seed

    env = PreemptionEnv(workload="mix", num_levels=num_levels)
    for seed in range(5):
        env.reset(seed=seed)
        assert env.cluster.name == f"mix[{draw_train_level_seed(seeding.np_random(seed)[0], num_levels)}]"


def test_mix_num_levels_restricts_training_levels():
    env = PreemptionEnv(workload="mix", num_levels=2)
    names = set()
    for seed in range(10):
        env.reset(seed=seed)
        names.add(env.cluster.name)
    assert names <= {"mix[1000000]", "mix[1000001]"}


def test_mix_workload_seed_is_the_level_seed():
    env = PreemptionEnv(workload="mix")
    env.reset(seed=0, options={"workload_seed": 7})
    assert env.cluster.name == "mix[7]"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workload": "paper", "num_levels": 3}, "num_levels applies to workload 'mix', got workload 'paper'"),
        ({"workload": "mix", "num_levels": 0}, "Expected num_levels to be an integer >= 1, got 0"),
        ({"workload": "mix", "load": 0.5}, "'mix' draws its load per level"),
        # Ignored silently before: the episodes were training levels on their own clusters all the same.
        (
            {"workload": "mix", "cluster": "small"},
            "Expected no cluster with workload 'mix' (each level draws its own), got cluster 'small'",
        ),
        ({"workload": "mix", "split": "test"}, "got split 'test' for 'mix'; 'mix' episodes are training levels"),
    ],
)
def test_mix_bad_arguments(kwargs, message):
    with pytest.raises(ConfigError) as err:
        PreemptionEnv(**kwargs)
    assert message in str(err.value)


def test_mix_on_the_large_id_is_refused_through_gym_make():
    # PreemptionLarge-v1 sets cluster 'large', which a mix level would have replaced without a word.
    with pytest.raises(ConfigError, match="got cluster 'large' \\(if the environment id sets it, pass cluster=None\\)"):
        gym.make("schedgym/PreemptionLarge-v1", workload="mix")
    gym.make("schedgym/PreemptionLarge-v1", workload="mix", cluster=None).close()  # as the message says
    gym.make("schedgym/Preemption-v1", workload="mix").close()  # sets no cluster


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workload": "paper", "split": "validation"}, "'paper' draws every episode afresh"),
        ({"workload": "realistic", "split": "test"}, "'realistic' draws every episode afresh"),
    ],
)
def test_split_is_refused_where_there_is_no_split(kwargs, message):
    # A synthetic workload's episodes are the same fresh draws whatever the split: `split="test"` trained on
    # training draws without a word.
    with pytest.raises(ConfigError) as err:
        PreemptionEnv(**kwargs)
    assert str(err.value).startswith("split applies to bundled trace workloads (alibaba2023, philly), got split ")
    assert message in str(err.value)
    PreemptionEnv(workload="philly", split="test", n_jobs=50).close()  # a bundled trace has splits
    PreemptionEnv(workload="paper", split="train").close()  # the default is every workload's


def test_a_trace_file_refuses_a_split(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,duration,gpus,class\na,0,10,1,TE\nb,5,100,2,BE\n")
    with pytest.raises(ConfigError, match="are windows of the whole file, whatever the split"):
        PreemptionEnv(trace=str(path), split="validation", cluster="small", n_jobs=2)
    env = PreemptionEnv(trace=str(path), cluster="small", n_jobs=2)  # the same trace without a split runs
    env.reset(seed=0)
    env.close()


@pytest.mark.parametrize("workload", ["realistic", "philly", "mix"])
def test_a_trace_file_refuses_a_workload_beside_it(tmp_path, workload):
    """The trace file is the workload: a workload named beside it was dropped without a word."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,duration,gpus,class\na,0,10,1,TE\nb,5,100,2,BE\n")
    with pytest.raises(ConfigError) as err:
        PreemptionEnv(trace=str(path), workload=workload, cluster="small", n_jobs=2)
    assert str(err.value) == (
        f"Expected no workload with trace (episodes are windows of the trace file), got workload {workload!r} and "
        f"trace {str(path)!r}; pass one of them"
    )
    PreemptionEnv(trace=str(path), workload="paper", cluster="small", n_jobs=2).close()  # the default passes


def test_mix_vector_env_matches_single_envs():
    envs = gym.make_vec("schedgym/Preemption-v1", num_envs=2, vectorization_mode="vector_entry_point", workload="mix")
    try:
        obs, _ = envs.reset(seed=11)
        singles = [PreemptionEnv(workload="mix") for _ in range(2)]
        single_obs = [e.reset(seed=11 + i)[0] for i, e in enumerate(singles)]
        rng = np.random.default_rng(0)
        for _ in range(40):
            masks = envs.action_masks()
            np.testing.assert_array_equal(obs, np.stack(single_obs))
            actions = np.array([_legal(m, rng) for m in masks])
            obs, rewards, term, _, _ = envs.step(actions)
            stepped = [e.step(int(a)) for e, a in zip(singles, actions, strict=True)]
            np.testing.assert_array_equal(rewards, [s[1] for s in stepped])
            single_obs = [s[0] for s in stepped]
            if term.any():
                break
    finally:
        envs.close()


def test_mix_vector_env_steps_across_episodes_on_changing_clusters():
    # The batch (native or Python) takes each sub-environment's new backend, on its new cluster, at autoreset.
    envs = gym.make_vec("schedgym/Preemption-v1", num_envs=2, vectorization_mode="vector_entry_point", workload="mix")
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        ends, names = 0, set()
        for _ in range(600):
            actions = np.array([_legal(m, rng) for m in envs.action_masks()])
            obs, _, term, _, _ = envs.step(actions)
            assert envs.observation_space.contains(obs)
            ends += int(term.sum())
            names |= {e.cluster.name for e in envs.unwrapped.envs}
        assert ends >= 2 and len(names) >= 3
    finally:
        envs.close()


@pytest.mark.skipif(not native_available(), reason="the native engine is not built")
def test_mix_episode_is_engine_independent():
    py = PreemptionEnv(workload="mix", sim={"engine": "python"})
    nat = PreemptionEnv(workload="mix", sim={"engine": "native"})
    assert _rollout(py, 5, steps=200) == _rollout(nat, 5, steps=200)
    assert py.sim.engine == "python" and nat.sim.engine == "native"

"""The Gymnasium environment (``schedgym.envs.PreemptionEnv``): API conformance, vectorisation, copying,
determinism, masks, rewards, episode ends, reset options, configuration, candidate semantics on hand-built
workloads, rendering, wrappers and a MaskablePPO smoke run.

The class docstring of ``PreemptionEnv`` is the specification tested here.
"""

from __future__ import annotations

import copy
import functools
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import gymnasium.utils.env_checker as gym_env_checker
import numpy as np
import pytest
from helpers import be, te

import schedgym
from schedgym.decision.features import CANDIDATE_FEATURES as CANDIDATE_FEATURE_LIST
from schedgym.decision.features import CLUSTER_FEATURES as CLUSTER_FEATURE_LIST
from schedgym.decision.features import JOB_FEATURES, names
from schedgym.envs import (
    DictMaskObservation,
    EnvConfig,
    IllegalActionAsWait,
    PreemptionEnv,
)
from schedgym.errors import ConfigError, IllegalDecisionError, SchedGymError
from schedgym.experiments.compare import CompareConfig, load_workloads
from schedgym.sim import JobClass, JobSpec, JobState, SimConfig, cluster_preset
from schedgym.workloads import Workload, generate, preset, save_trace

try:  # the rl extra; the README's test command installs no torch, and these tests then skip (conftest.py)
    from stable_baselines3.common import env_checker as sb3_env_checker
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
except ImportError:
    sb3_env_checker = DummyVecEnv = SubprocVecEnv = None

ENV_IDS = sorted(schedgym.ENV_IDS)
MAIN_ID = "schedgym/Preemption-v1"
TE_FEATURES = names(JOB_FEATURES)
CLUSTER_FEATURES = names(CLUSTER_FEATURE_LIST)
CANDIDATE_FEATURES = names(CANDIDATE_FEATURE_LIST)
N_HEAD = len(TE_FEATURES) + len(CLUSTER_FEATURES)  # 20
N_ROW = len(CANDIDATE_FEATURES)  # 13
CONTINUING = TE_FEATURES.index("continuing")  # 7
VICTIMS_CHOSEN = TE_FEATURES.index("victims_chosen")  # 6
MISSING_GPUS = TE_FEATURES.index("missing_gpus")  # 8
FITS_ALONE = CANDIDATE_FEATURES.index("fits_alone")  # 7

# A default-config episode of 1,000 jobs with seed 1 has dozens of decisions (a few ms each).
BUSY = dict(n_jobs=1000)
BUSY_SEED = 1


# ----------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------


def legal_actions(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask)


def pick(rng: np.random.Generator, mask: np.ndarray, p_wait: float = 0.2) -> int:
    """A random legal action, preferring victims (so that plans complete and jobs get preempted)."""
    legal = legal_actions(mask)
    if len(legal) == 1 or rng.random() < p_wait:
        return int(rng.choice(legal))
    return int(rng.choice(legal[1:]))


def run_episode(env: PreemptionEnv, seed: int, action_seed: int = 0, options: dict | None = None):
    """Reset, then act with random legal actions until the end. Returns (rewards, infos)."""
    obs, info = env.reset(seed=seed, options=options)
    assert env.pending_request is not None, "test workload must have at least one decision"
    rng = np.random.default_rng(action_seed)
    rewards, infos = [], []
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(pick(rng, info["action_mask"]))
        assert not truncated
        rewards.append(reward)
        infos.append(info)
    return rewards, infos


def write_cluster(tmp_path: Path, *gpus: float, name: str = "tiny") -> str:
    """A cluster CSV with one node per argument (that many GPUs, 64 CPUs, 512 GB)."""
    path = tmp_path / f"{name}.csv"
    rows = ["name,gpus,cpus,mem_gb"] + [f"n{i},{g},64,512" for i, g in enumerate(gpus)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def full_nodes_workload(
    n_nodes: int, *, big_node: bool = False, te_gpus: float = 4.0, te_nodes: int = 1, te_duration: float = 100
) -> Workload:
    """Each of ``n_nodes`` 8-GPU nodes filled by four 2-GPU BE jobs at t=0 (b0-b3 on node 0, b4-b7 on node 1,
    ...: best fit, ties to the lower node), optionally one more node filled by an 8-GPU BE job ``big``; a TE
    job ``t`` arrives at t=10. BE durations differ so that they complete one at a time."""
    jobs = [be(f"b{i}", 0, 1000 * (i + 1), 2, grace=5) for i in range(4 * n_nodes)]
    if big_node:
        jobs.append(be("big", 0, 50_000, 8, grace=5))
    jobs.append(te("t", 10, te_duration, te_gpus, gang_size=te_nodes))
    return Workload(tuple(jobs), name="full-nodes")


def row_ids(env: PreemptionEnv) -> list[tuple[str, int]]:
    return [(job.job_id, node) for job, node in env.candidate_rows]


# ----------------------------------------------------------------------------------------------------------
# API conformance: env checkers, gymnasium.make, vectorisation
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env_passes_without_warnings(env_id):
    env = gym.make(env_id).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_env_checker.check_env(env)


@pytest.mark.rl
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_check_env_passes_without_warnings(env_id):
    env = gym.make(env_id).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_env_checker.check_env(env, warn=True)


def test_gymnasium_make_with_module_prefix_works_in_a_fresh_interpreter():
    code = (
        "import gymnasium, numpy as np\n"
        "env = gymnasium.make('schedgym:schedgym/Preemption-v1')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert env.observation_space.contains(obs)\n"
        "obs, r, term, trunc, info = env.step(0)\n"
        "print(type(env.unwrapped).__name__, env.spec.max_episode_steps)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["PreemptionEnv", str(schedgym.ENV_IDS[MAIN_ID][1])]


def test_registered_ids_use_their_registered_arguments():
    for env_id, (kwargs, steps) in schedgym.ENV_IDS.items():
        env = gym.make(env_id)
        assert env.spec.max_episode_steps == steps
        for key, value in kwargs.items():
            assert getattr(env.unwrapped.config, key) == value
        env.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_steps_with_legal_actions_from_info_mask(mode):
    envs = gym.make_vec(MAIN_ID, num_envs=4, vectorization_mode=mode)
    try:
        obs, info = envs.reset(seed=0)
        rng = np.random.default_rng(0)
        n_actions = schedgym.ENV_IDS[MAIN_ID][0]["max_candidates"] + 1
        for _ in range(6):
            masks = info["action_mask"]
            assert masks.shape == (4, n_actions) and masks.dtype == bool
            assert masks[:, 0].all()
            actions = np.array([pick(rng, m) for m in masks])
            obs, rewards, terminated, truncated, info = envs.step(actions)
            assert obs.shape == (4, *envs.single_observation_space.shape)
            assert envs.observation_space.contains(obs)
            assert np.all(rewards <= 0)
    finally:
        envs.close()


def test_sync_and_async_vector_envs_agree():
    results = []
    for mode in ("sync", "async"):
        envs = gym.make_vec(MAIN_ID, num_envs=2, vectorization_mode=mode)
        try:
            obs, info = envs.reset(seed=3)
            rng = np.random.default_rng(1)
            trace = [obs]
            for _ in range(4):
                obs, rewards, *_, info = envs.step(np.array([pick(rng, m) for m in info["action_mask"]]))
                trace += [obs, rewards]
            results.append(trace)
        finally:
            envs.close()
    for a, b in zip(*results, strict=True):
        assert np.array_equal(a, b)


@pytest.mark.rl
@pytest.mark.parametrize("vec_cls", [DummyVecEnv, SubprocVecEnv], ids=["dummy", "subproc"])
def test_sb3_vec_envs_step_with_legal_actions_from_env_method(vec_cls):
    # "schedgym:" makes gymnasium import schedgym (and so register the ids) in a fresh worker process
    venv = vec_cls([functools.partial(gym.make, f"schedgym:{MAIN_ID}") for _ in range(2)])
    try:
        venv.seed(0)
        venv.reset()
        rng = np.random.default_rng(0)
        for _ in range(5):
            masks = venv.env_method("action_masks")
            assert len(masks) == 2 and all(m[0] for m in masks)
            obs, rewards, dones, infos = venv.step(np.array([pick(rng, m) for m in masks]))
            assert obs.shape == (2, *venv.observation_space.shape)
            for m, info, done in zip(venv.env_method("action_masks"), infos, dones, strict=True):
                if not done:  # after an auto-reset, info is the finished episode's
                    assert np.array_equal(m, info["action_mask"])
    finally:
        venv.close()


# ----------------------------------------------------------------------------------------------------------
# Copying and determinism
# ----------------------------------------------------------------------------------------------------------


def _assert_continues_identically(env: PreemptionEnv, twin: PreemptionEnv, seed: int) -> int:
    rng = np.random.default_rng(seed)
    terminated, steps = False, 0
    while not terminated:
        a = pick(rng, env.action_masks())
        o1, r1, terminated, _, i1 = env.step(a)
        o2, r2, t2, _, i2 = twin.step(a)
        assert np.array_equal(o1, o2), f"observations differ at step {steps}"
        assert r1 == r2 and terminated == t2 and i1["sim_time"] == i2["sim_time"], f"step {steps}"
        steps += 1
    assert np.array_equal(env.sim.result().completion, twin.sim.result().completion)
    return steps


def _mid_episode_env() -> PreemptionEnv:
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    for _ in range(3):
        env.step(1)
    return env


def test_env_pickles_and_deep_copies_mid_episode():
    env = _mid_episode_env()
    for twin in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        assert isinstance(twin, PreemptionEnv)
        assert twin.sim is not env.sim
        assert np.array_equal(twin.action_masks(), env.action_masks())
        assert row_ids(twin) == row_ids(env)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copied_env_continues_identically_mid_episode(how):
    env = _mid_episode_env()
    twin = pickle.loads(pickle.dumps(env)) if how == "pickle" else copy.deepcopy(env)
    _assert_continues_identically(env, twin, seed=0)


def test_env_pickled_before_reset_runs_identically():
    env = PreemptionEnv(**BUSY)
    twin = pickle.loads(pickle.dumps(env))
    obs1, _ = env.reset(seed=BUSY_SEED)
    obs2, _ = twin.reset(seed=BUSY_SEED)
    assert np.array_equal(obs1, obs2)
    assert _assert_continues_identically(env, twin, seed=0) > 3


def _rollout(seed: int, action_seed: int, n_steps: int = 25):
    env = PreemptionEnv(**BUSY)
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(action_seed)
    out = [(obs, 0.0, info["sim_time"], info["action_mask"])]
    for _ in range(n_steps):
        obs, reward, terminated, _, info = env.step(pick(rng, info["action_mask"]))
        out.append((obs, reward, info["sim_time"], info["action_mask"]))
        if terminated:
            break
    return out, env


def test_same_seed_gives_identical_rollouts():
    a, env_a = _rollout(seed=7, action_seed=11)
    b, env_b = _rollout(seed=7, action_seed=11)
    assert len(a) == len(b) > 5
    for (o1, r1, t1, m1), (o2, r2, t2, m2) in zip(a, b, strict=True):
        assert np.array_equal(o1, o2)
        assert r1 == r2
        assert t1 == t2
        assert np.array_equal(m1, m2)
    assert [j.spec for j in env_a.sim.jobs] == [j.spec for j in env_b.sim.jobs]


def test_different_seeds_give_different_workloads_and_observations():
    a, env_a = _rollout(seed=7, action_seed=11, n_steps=0)
    b, env_b = _rollout(seed=8, action_seed=11, n_steps=0)
    assert [j.spec for j in env_a.sim.jobs] != [j.spec for j in env_b.sim.jobs]
    assert not np.array_equal(a[0][0], b[0][0])


def test_reset_without_seed_continues_the_seeded_stream():
    env1, env2 = PreemptionEnv(**BUSY), PreemptionEnv(**BUSY)
    env1.reset(seed=5)
    env2.reset(seed=5)
    o1, _ = env1.reset()
    o2, _ = env2.reset()
    assert np.array_equal(o1, o2)
    assert [j.spec for j in env1.sim.jobs] == [j.spec for j in env2.sim.jobs]


# ----------------------------------------------------------------------------------------------------------
# Observations, masks, actions
# ----------------------------------------------------------------------------------------------------------


def test_observations_are_fresh_float32_arrays_inside_the_space():
    env = PreemptionEnv(**BUSY)
    obs, info = env.reset(seed=BUSY_SEED)
    rng = np.random.default_rng(0)
    previous = obs
    assert obs.dtype == np.float32 and obs.shape == env.observation_space.shape
    assert env.observation_space.contains(obs)
    terminated = False
    while not terminated:
        obs, _, terminated, _, info = env.step(pick(rng, info["action_mask"]))
        assert obs is not previous
        assert not np.shares_memory(obs, previous)
        assert obs.dtype == np.float32
        assert env.observation_space.contains(obs), obs
        previous = obs


def test_observation_at_the_end_is_all_zeros():
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    terminated = False
    while not terminated:
        obs, _, terminated, _, info = env.step(0)
    assert not obs.any()
    assert info["te_job"] == -1 and info["n_candidates"] == 0


def test_illegal_action_raises_naming_the_action_and_the_legal_set():
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    rng = np.random.default_rng(0)
    # find a decision with fewer rows than max_candidates, so that an in-space action is illegal
    while len(env.candidate_rows) >= env.config.max_candidates:
        env.step(pick(rng, env.action_masks()))
    n = len(env.candidate_rows)
    legal = list(range(n + 1))
    assert legal_actions(env.action_masks()).tolist() == legal
    for bad in (n + 1, env.config.max_candidates, -1):
        with pytest.raises(IllegalDecisionError) as exc:
            env.step(bad)
        assert f"Action {bad}" in str(exc.value)
        assert str(legal) in str(exc.value)


@pytest.mark.parametrize("bad", [1.5, "1", None])
def test_non_integer_action_raises(bad):
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    with pytest.raises(IllegalDecisionError, match="integer"):
        env.step(bad)


def test_illegal_action_leaves_the_env_unchanged():
    env, twin = PreemptionEnv(**BUSY), PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    twin.reset(seed=BUSY_SEED)
    with pytest.raises(IllegalDecisionError):
        env.step(env.config.max_candidates + 5)
    assert env.n_steps == 0
    assert _assert_continues_identically(env, twin, seed=2) > 0


def test_numpy_integer_actions_are_accepted():
    env, twin = PreemptionEnv(**BUSY), PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    twin.reset(seed=BUSY_SEED)
    o1, r1, *_ = env.step(np.int64(1))
    o2, r2, *_ = twin.step(np.array(1))
    assert np.array_equal(o1, o2) and r1 == r2


def test_masks_have_the_documented_shape_and_agree_with_info():
    env = PreemptionEnv(**BUSY)
    obs, info = env.reset(seed=BUSY_SEED)
    rng = np.random.default_rng(0)
    terminated = False
    while True:
        mask = env.action_masks()
        assert mask.shape == (env.config.max_candidates + 1,) and mask.dtype == bool
        assert mask[0]
        assert np.array_equal(info["action_mask"], mask)
        # legal actions are exactly 0 and the rows present
        assert mask.sum() == 1 + len(env.candidate_rows) == 1 + info["n_candidates"]
        assert mask[: 1 + len(env.candidate_rows)].all()
        # valid flags of the observation's rows agree with the mask
        valid = obs[N_HEAD::N_ROW]
        assert np.array_equal(valid == 1.0, mask[1:])
        if terminated:
            break
        obs, _, terminated, _, info = env.step(pick(rng, mask))


def test_action_space_sample_draws_only_legal_actions():
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    env.action_space.seed(0)
    terminated, seen = False, set()
    while not terminated:
        mask = env.action_masks()
        samples = [int(env.action_space.sample()) for _ in range(20)]
        assert all(mask[a] for a in samples), (samples, legal_actions(mask))
        seen.update(samples)
        _, _, terminated, _, _ = env.step(samples[0])
    assert len(seen) > 2  # not stuck on 0


def test_action_space_sample_with_explicit_mask_behaves_as_discrete():
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    only_last = np.zeros(env.action_space.n, dtype=np.int8)
    only_last[-1] = 1
    assert all(int(env.action_space.sample(mask=only_last)) == env.action_space.n - 1 for _ in range(5))


# ----------------------------------------------------------------------------------------------------------
# Rewards
# ----------------------------------------------------------------------------------------------------------


def test_return_equals_minus_the_sum_of_slowdowns():
    env = PreemptionEnv(**BUSY)
    rewards, _ = run_episode(env, seed=BUSY_SEED)
    result = env.sim.result()
    assert result.n_preemptions > 0  # the rollout exercised preemptions
    assert sum(rewards) == pytest.approx(-result.slowdown.sum(), rel=1e-9)


def test_reset_reward_parts_are_zero_and_first_step_counts_the_time_before_it():
    env = PreemptionEnv(**BUSY)
    _, info = env.reset(seed=BUSY_SEED)
    assert (info["reward_te"], info["reward_be"], info["reward_preemption"]) == (0.0, 0.0, 0.0)
    assert info["sim_time"] > 0
    accrued = sum(env.sim.accrued)
    _, reward, *_ = env.step(0)
    assert accrued > 0
    assert reward <= -accrued


def test_weighted_return_equals_minus_weighted_slowdowns():
    env = PreemptionEnv(**BUSY, te_weight=2.0, be_weight=0.5)
    rewards, infos = run_episode(env, seed=BUSY_SEED)
    r = env.sim.result()
    is_te = r.job_class == int(JobClass.TE)
    expected = -(2.0 * r.slowdown[is_te].sum() + 0.5 * r.slowdown[~is_te].sum())
    assert sum(rewards) == pytest.approx(expected, rel=1e-9)
    assert sum(i["reward_te"] for i in infos) == pytest.approx(-2.0 * r.slowdown[is_te].sum())
    assert sum(i["reward_be"] for i in infos) == pytest.approx(-0.5 * r.slowdown[~is_te].sum())


def test_preemption_cost_sums_to_minus_cost_times_preemptions():
    c = 0.75
    env = PreemptionEnv(**BUSY, preemption_cost=c)
    rewards, infos = run_episode(env, seed=BUSY_SEED)
    r = env.sim.result()
    assert r.n_preemptions > 0
    assert sum(i["reward_preemption"] for i in infos) == pytest.approx(-c * r.n_preemptions, rel=1e-12)
    assert sum(rewards) == pytest.approx(-r.slowdown.sum() - c * r.n_preemptions, rel=1e-9)
    # per step: minus c per job preempted at this step
    counts = np.diff([0] + [i["preemptions"] for i in infos])
    assert [i["reward_preemption"] for i in infos] == pytest.approx(list(-c * counts))


def test_reward_parts_sum_to_the_reward_every_step():
    env = PreemptionEnv(**BUSY, te_weight=3.0, be_weight=0.25, preemption_cost=1.5, info="full")
    rewards, infos = run_episode(env, seed=BUSY_SEED)
    for reward, info in zip(rewards, infos, strict=True):
        parts = info["reward_parts"]
        assert set(parts) == {"te_slowdown", "be_slowdown", "preemption"}
        assert list(parts.values()) == [info["reward_te"], info["reward_be"], info["reward_preemption"]]
        assert all(v <= 0 for v in parts.values())
        assert reward == pytest.approx(sum(parts.values()), rel=1e-12, abs=1e-12)


def test_bounded_slowdown_return():
    env = PreemptionEnv(**BUSY, reward="bounded_slowdown")
    rewards, _ = run_episode(env, seed=BUSY_SEED)
    r = env.sim.result()
    expected = -((r.completion - r.submit) / np.maximum(r.duration, 10.0)).sum()
    assert sum(rewards) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("reward", ["slowdown", "bounded_slowdown"])
def test_bounded_slowdown_differs_for_short_jobs(tmp_path, reward):
    # declining every time, the TE job (4 s of work) waits from t=10 until b0 and b1 have completed (t=2000),
    # then runs: 1994 s in the system
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), reward=reward)
    env.reset(options={"workload": full_nodes_workload(2, te_duration=4)})
    rewards = []
    terminated = False
    while not terminated:
        _, r, terminated, _, _ = env.step(0)
        rewards.append(r)
    result = env.sim.result()
    t = result.job_ids.index("t")
    assert result.completion[t] == 2004.0
    be_sum = sum(result.slowdown[:t])  # BE durations are >= 1000 s: both variants agree on them
    te_term = 1994 / 4 if reward == "slowdown" else 1994 / 10
    assert sum(rewards) == pytest.approx(-(be_sum + te_term), rel=1e-9)


# ----------------------------------------------------------------------------------------------------------
# Episode end
# ----------------------------------------------------------------------------------------------------------


def test_episode_terminates_and_a_further_step_raises():
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    terminated = truncated = False
    while not terminated:
        _, _, terminated, truncated, info = env.step(0)
        assert not truncated
    assert env.sim.done
    assert env.pending_request is None
    with pytest.raises(SchedGymError, match="reset"):
        env.step(0)


def test_step_before_reset_raises():
    with pytest.raises(SchedGymError, match="reset"):
        PreemptionEnv(**BUSY).step(0)


def test_make_with_max_episode_steps_truncates():
    env = gym.make(MAIN_ID, max_episode_steps=3)
    env.reset(seed=BUSY_SEED)
    flags = [env.step(0)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_registered_env_terminates_not_truncates():
    env = gym.make(MAIN_ID)
    env.reset(seed=BUSY_SEED)
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, _ = env.step(0)
    assert terminated and not truncated


def test_episode_ends_even_without_any_decision_possible(tmp_path):
    # one TE job on an empty cluster: it starts at once, no decision is ever needed
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8))
    wl = Workload((te("t", 0, 100, 4),))
    obs, info = env.reset(options={"workload": wl})
    assert env.pending_request is None
    assert info["action_mask"].tolist() == [True] + [False] * env.config.max_candidates
    assert not obs.any()


def test_episode_without_decision_ends_with_the_first_step(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8))
    wl = Workload((te("t", 0, 100, 4), be("b", 50, 200, 2)))
    env.reset(options={"workload": wl})
    assert env.pending_request is None
    obs, reward, terminated, truncated, info = env.step(0)
    assert terminated and not truncated
    assert reward == pytest.approx(-2.0)  # each job's slowdown is 1, all paid out at this step
    assert info["reward_te"] == pytest.approx(-1.0)
    assert env.n_steps == 1 and not obs.any()
    with pytest.raises(SchedGymError, match="reset"):
        env.step(0)


def test_episode_without_decision_accepts_only_action_zero(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8))
    env.reset(options={"workload": Workload((te("t", 0, 100, 4),))})
    with pytest.raises(IllegalDecisionError):
        env.step(1)
    _, _, terminated, _, _ = env.step(0)
    assert terminated


# ----------------------------------------------------------------------------------------------------------
# Reset options and traces
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 3])
def test_workload_seed_gives_the_compare_workload(seed):
    n = 300
    env = PreemptionEnv(n_jobs=n)
    env.reset(options={"workload_seed": seed})
    workloads = load_workloads(CompareConfig(seeds=1, first_seed=seed, n_jobs=n), cluster_preset("paper"))
    direct = generate(
        preset("paper", n_jobs=n), cluster_preset("paper"), np.random.default_rng(np.random.SeedSequence([seed, 0]))
    )
    specs = [j.spec for j in env.sim.jobs]
    assert specs == list(workloads[0].jobs)
    assert specs == list(direct.jobs)


def test_workload_seed_ignores_the_reset_seed():
    env = PreemptionEnv(n_jobs=200)
    env.reset(seed=1, options={"workload_seed": 4})
    a = [j.spec for j in env.sim.jobs]
    env.reset(seed=2, options={"workload_seed": 4})
    assert [j.spec for j in env.sim.jobs] == a


@pytest.mark.parametrize("bad", [-1, "abc", None, 1.5])
def test_bad_workload_seed_raises_schedgym_error(bad):
    env = PreemptionEnv(n_jobs=50)
    with pytest.raises(SchedGymError, match="workload_seed"):
        env.reset(options={"workload_seed": bad})


def test_workload_option_pins_a_hand_made_workload(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), info="full")
    wl = full_nodes_workload(2)
    env.reset(seed=123, options={"workload": wl})
    assert [j.spec for j in env.sim.jobs] == list(wl.jobs)
    assert env.pending_request is not None and env.pending_request.job.job_id == "t"


def test_workload_option_must_be_a_workload():
    env = PreemptionEnv(n_jobs=10)
    with pytest.raises(SchedGymError, match="Workload"):
        env.reset(options={"workload": [te("t", 0, 10, 1)]})


def test_workload_option_that_cannot_fit_raises(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8))
    with pytest.raises(SchedGymError):
        env.reset(options={"workload": Workload((te("huge", 0, 10, 16),))})


def test_unknown_reset_option_raises():
    env = PreemptionEnv(n_jobs=10)
    with pytest.raises(SchedGymError, match="workload_sed"):
        env.reset(options={"workload_sed": 1})


def _trace(tmp_path: Path, n: int = 10) -> str:
    jobs = [
        JobSpec(f"j{i}", 100.0 + 7.0 * i, 50.0 + i, 1.0 + (i % 4), job_class=JobClass.TE if i % 3 == 0 else JobClass.BE)
        for i in range(n)
    ]
    path = tmp_path / "trace.csv"
    save_trace(path, jobs)
    return str(path)


def test_trace_window_start_picks_the_window_and_shifts_submit_times(tmp_path):
    env = PreemptionEnv(EnvConfig(trace=_trace(tmp_path), n_jobs=4))
    env.reset(options={"window_start": 3})
    jobs = [j.spec for j in env.sim.jobs]
    assert [j.job_id for j in jobs] == ["j3", "j4", "j5", "j6"]
    assert [j.submit_time for j in jobs] == [0.0, 7.0, 14.0, 21.0]
    assert [j.duration for j in jobs] == [53.0, 54.0, 55.0, 56.0]


def test_trace_window_drawn_at_random_is_a_valid_window(tmp_path):
    env = PreemptionEnv(EnvConfig(trace=_trace(tmp_path), n_jobs=4))
    starts = set()
    for seed in range(12):
        env.reset(seed=seed)
        ids = [int(j.job_id[1:]) for j in env.sim.jobs]
        assert ids == list(range(ids[0], ids[0] + 4)) and 0 <= ids[0] <= 6
        assert env.sim.jobs[0].submit_time == 0.0
        starts.add(ids[0])
    assert len(starts) > 1


def test_trace_shorter_than_n_jobs_uses_the_whole_trace(tmp_path):
    env = PreemptionEnv(EnvConfig(trace=_trace(tmp_path, n=5), n_jobs=50))
    env.reset(seed=0)
    assert [j.job_id for j in env.sim.jobs] == [f"j{i}" for i in range(5)]


@pytest.mark.parametrize("bad", [7, -1, 100, "2", 1.0])
def test_bad_window_start_raises(tmp_path, bad):
    env = PreemptionEnv(EnvConfig(trace=_trace(tmp_path), n_jobs=4))
    with pytest.raises(SchedGymError, match="window_start"):
        env.reset(options={"window_start": bad})


# ----------------------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, shown",
    [
        ("n_jobs", 0, "0"),
        ("n_jobs", 2.5, "2.5"),
        ("max_candidates", 0, "0"),
        ("max_preemptions", -1, "-1"),
        ("queue", "x", "'x'"),
        ("placement", "worst-fit", "'worst-fit'"),
        ("reward", "x", "'x'"),
        ("backfill", 1, "1"),
        ("te_weight", -1.0, "-1.0"),
        ("be_weight", -0.5, "-0.5"),
        ("preemption_cost", -2.0, "-2.0"),
        ("restart_overhead", -1.0, "-1.0"),
        ("estimate_noise", float("nan"), "nan"),
        ("te_weight", float("inf"), "inf"),
        ("workload", "nope", "'nope'"),
    ],
)
def test_bad_config_values_raise_config_error_with_expected_and_actual(field, value, shown):
    kwargs = {"sim": {field: value}} if field in SimConfig.__dataclass_fields__ else {field: value}
    with pytest.raises(ConfigError) as exc:
        EnvConfig(**kwargs)
    msg = str(exc.value)
    assert "Expected" in msg and field in msg, msg
    assert f"got {shown}" in msg, msg
    with pytest.raises(ConfigError):  # the same through the environment's keyword overrides
        PreemptionEnv(**kwargs)


def test_unknown_env_argument_raises():
    with pytest.raises(SchedGymError, match="n_job"):
        PreemptionEnv(n_job=10)
    with pytest.raises(SchedGymError, match="n_job"):
        gym.make(MAIN_ID, n_job=10)


def test_overrides_replace_config_fields():
    env = PreemptionEnv(EnvConfig(n_jobs=10, max_candidates=3), max_candidates=5)
    assert env.config.n_jobs == 10 and env.config.max_candidates == 5
    assert env.action_space.n == 6
    assert env.observation_space.shape == (N_HEAD + N_ROW * 5,)


def test_unknown_cluster_raises():
    with pytest.raises(SchedGymError, match="nosuchcluster"):
        PreemptionEnv(cluster="nosuchcluster")


# ----------------------------------------------------------------------------------------------------------
# Candidate semantics on hand-built workloads
# ----------------------------------------------------------------------------------------------------------


def test_first_decision_rows_are_round_robin_over_nodes(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), info="full")
    obs, info = env.reset(options={"workload": full_nodes_workload(2)})
    assert info["te_job_id"] == "t" and info["sim_time"] == 10.0
    expected = [("b0", 0), ("b4", 1), ("b1", 0), ("b5", 1), ("b2", 0), ("b6", 1), ("b3", 0), ("b7", 1)]
    assert row_ids(env) == expected
    assert obs[CONTINUING] == 0.0 and obs[VICTIMS_CHOSEN] == 0.0
    assert obs[MISSING_GPUS] == 0.0  # no target yet
    # each row: valid, 2 GPUs of 8, no room on its node yet, does not fit alone
    for i in range(len(expected)):
        row = obs[N_HEAD + N_ROW * i : N_HEAD + N_ROW * (i + 1)]
        assert row[0] == 1.0 and row[1] == pytest.approx(0.25) and row[4] == 0.0 and row[FITS_ALONE] == 0.0
    assert not obs[N_HEAD + N_ROW * len(expected) :].any()  # padding rows are all zeros


def test_one_victim_continues_the_attempt_on_that_node_only(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), info="full")
    env.reset(options={"workload": full_nodes_workload(2)})
    obs, reward, terminated, truncated, info = env.step(2)  # b4 on node 1
    assert not terminated
    assert info["te_job_id"] == "t" and info["sim_time"] == 10.0 and info["interval"] == 0.0
    assert obs[CONTINUING] == 1.0
    assert obs[VICTIMS_CHOSEN] == pytest.approx(1 / env.config.max_candidates)
    assert obs[MISSING_GPUS] == pytest.approx(2 / 8)  # node 1 has 2 of the 4 GPUs now
    assert [v.job_id for v in env.chosen_victims] == ["b4"]
    assert row_ids(env) == [("b5", 1), ("b6", 1), ("b7", 1)]
    assert all(obs[N_HEAD + N_ROW * i + FITS_ALONE] == 1.0 for i in range(3))
    # nobody is preempted before the set is complete
    assert info["preemptions"] == 0 and env.sim.n_preemptions == 0
    assert env.sim.jobs[4].state == JobState.RUNNING
    # the first step pays for the time before the first decision: 8 BE jobs for 10 s; nobody preempted yet
    assert reward == pytest.approx(-sum(10 / (1000 * (i + 1)) for i in range(8)))
    assert info["reward_preemption"] == 0.0


def test_second_victim_completes_the_plan_and_preempts_both(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), preemption_cost=10.0)
    env.reset(options={"workload": full_nodes_workload(2)})
    env.step(2)  # b4 on node 1
    obs, reward, terminated, truncated, info = env.step(2)  # now rows are b5, b6, b7: b6
    assert info["reward_preemption"] == -20.0
    assert info["preemptions"] == 2
    # no other decision: t starts after the 5 s grace period on node 1 and the workload drains
    assert terminated and not truncated
    r = env.sim.result()
    idx = {jid: i for i, jid in enumerate(r.job_ids)}
    assert r.preemptions.tolist() == [0, 0, 0, 0, 1, 0, 1, 0, 0]
    assert r.first_start[idx["t"]] == 15.0 and r.completion[idx["t"]] == 115.0
    t_segments = [s for s in r.segments if s.job == idx["t"]]
    assert [s.node for s in t_segments] == [1]


def test_choosing_zero_mid_attempt_preempts_nobody(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), info="full")
    env.reset(options={"workload": full_nodes_workload(2)})
    env.step(2)  # b4
    obs, reward, terminated, truncated, info = env.step(0)
    assert env.sim.n_preemptions == 0 and info["preemptions"] == 0
    # b0 completed at t=1000; every other BE job still runs, never preempted
    states = [j.state for j in env.sim.jobs if j.job_id.startswith("b")]
    assert states == [JobState.COMPLETED] + [JobState.RUNNING] * 7
    assert all(j.preemptions == 0 for j in env.sim.jobs)
    # the TE job is offered again once b0 completes (t=1000): a fresh attempt, nobody chosen
    assert not terminated
    assert info["te_job_id"] == "t" and info["sim_time"] == 1000.0
    assert env.chosen_victims == []
    assert obs[CONTINUING] == 0.0
    assert row_ids(env)[:2] == [("b1", 0), ("b4", 1)]


def test_declining_at_once_also_preempts_nobody_and_reoffers_later(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), info="full")
    env.reset(options={"workload": full_nodes_workload(2)})
    _, reward, terminated, _, info = env.step(0)
    assert info["sim_time"] == 1000.0 and info["te_job_id"] == "t"
    # 9 jobs in the system from their arrival until t=1000; t's slowdown grows 1/100 per second from t=10
    be_rate = sum(1 / (1000 * (i + 1)) for i in range(8))
    assert info["reward_te"] == pytest.approx(-990 / 100)
    assert info["reward_be"] == pytest.approx(-be_rate * 1000)
    assert reward == pytest.approx(-990 / 100 - be_rate * 1000)


def test_max_candidates_cut_keeps_every_nodes_first_candidates(tmp_path):
    path = write_cluster(tmp_path, 8, 8, 8)
    wl = full_nodes_workload(2, big_node=True)
    full = PreemptionEnv(cluster=path)
    full.reset(options={"workload": wl})
    order = [("b0", 0), ("b4", 1), ("big", 2), ("b1", 0), ("b5", 1), ("b2", 0), ("b6", 1), ("b3", 0), ("b7", 1)]
    assert row_ids(full) == order
    for m in (1, 2, 4, 5, 8):
        env = PreemptionEnv(cluster=path, max_candidates=m)
        obs, info = env.reset(options={"workload": wl})
        assert row_ids(env) == order[:m]
        assert info["n_candidates"] == m
        assert env.action_masks().all()
        assert obs.shape == (N_HEAD + N_ROW * m,)
        assert all(obs[N_HEAD + N_ROW * i] == 1.0 for i in range(m))


def test_big_candidate_fits_alone(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8, 8))
    obs, _ = env.reset(options={"workload": full_nodes_workload(2, big_node=True)})
    fits = [obs[N_HEAD + N_ROW * i + FITS_ALONE] for i in range(len(env.candidate_rows))]
    assert fits == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # choosing it resolves the plan at once
    _, _, _, _, info = env.step(3)
    assert info["preemptions"] == 1


def test_gang_te_job_needs_victims_on_two_nodes(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), info="full")
    obs, _ = env.reset(options={"workload": full_nodes_workload(2, te_gpus=8, te_nodes=2)})
    assert obs[TE_FEATURES.index("gang")] == 1.0  # 2 nodes of 2
    assert len(env.candidate_rows) == 8
    env.step(1)  # b0, node 0
    _, _, _, _, info = env.step(1)  # b1, node 0: node 0 now has room for its member
    assert info["preemptions"] == 0 and [v.job_id for v in env.chosen_victims] == ["b0", "b1"]
    assert {node for _, node in env.candidate_rows} == {1}
    env.step(1)  # b4
    _, _, terminated, _, info = env.step(1)  # b5: the plan is complete
    assert info["preemptions"] == 4
    assert terminated
    r = env.sim.result()
    t = r.job_ids.index("t")
    assert sorted(s.node for s in r.segments if s.job == t) == [0, 1]
    assert r.first_start[t] == 15.0


# ----------------------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------------------


def test_render_ansi_shows_the_decision(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), render_mode="ansi")
    env.reset(options={"workload": full_nodes_workload(2)})
    text = env.render()
    assert isinstance(text, str)
    assert "decision: TE t" in text
    assert "b0 on node 0" in text and "b7 on node 1" in text
    env.step(1)
    assert "chosen ['b0']" in env.render()


def test_render_rgb_array_is_an_image():
    env = PreemptionEnv(**BUSY, render_mode="rgb_array")
    env.reset(seed=BUSY_SEED)
    img = env.render()
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8
    assert img.ndim == 3 and img.shape[2] == 3 and img.shape[0] > 0 and img.shape[1] > 0


def test_render_at_the_end_of_an_episode(tmp_path):
    env = PreemptionEnv(cluster=write_cluster(tmp_path, 8, 8), render_mode="ansi")
    env.reset(options={"workload": full_nodes_workload(2)})
    env.step(3)
    env.step(1)
    assert "episode over" in env.render()


@pytest.mark.parametrize("mode", ["human", "rgb", ""])
def test_bad_render_mode_raises(mode):
    with pytest.raises(SchedGymError, match="render_mode"):
        PreemptionEnv(render_mode=mode)


def test_render_without_mode_warns_and_returns_none():
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None


# ----------------------------------------------------------------------------------------------------------
# Wrappers
# ----------------------------------------------------------------------------------------------------------


def test_dict_mask_observation_space_and_values():
    env = DictMaskObservation(PreemptionEnv(**BUSY))
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"observations", "action_mask"}
    assert space["action_mask"].shape == (env.unwrapped.config.max_candidates + 1,)
    obs, info = env.reset(seed=BUSY_SEED)
    assert space.contains(obs)
    assert np.array_equal(obs["action_mask"], info["action_mask"].astype(np.int8))
    obs, *_, info = env.step(1)
    assert space.contains(obs)
    assert np.array_equal(obs["action_mask"].astype(bool), env.unwrapped.action_masks())


def test_dict_mask_observation_passes_gymnasium_check_env():
    env = DictMaskObservation(PreemptionEnv(**BUSY))
    expected = ("is different from the unwrapped version", "Not able to test alternative render modes")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_env_checker.check_env(env)
    unexpected = [str(w.message) for w in caught if not any(e in str(w.message) for e in expected)]
    assert unexpected == []


def test_illegal_action_as_wait_maps_to_zero_and_counts():
    env = IllegalActionAsWait(PreemptionEnv(**BUSY))
    twin = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    twin.reset(seed=BUSY_SEED)
    n = env.action_space.n
    rng = np.random.default_rng(0)
    while len(env.unwrapped.candidate_rows) >= n - 1:  # need an in-space illegal action
        a = pick(rng, env.unwrapped.action_masks())
        env.step(a)
        twin.step(a)
    o1, r1, *_, info = env.step(n - 1)
    o2, r2, *_ = twin.step(0)
    assert np.array_equal(o1, o2) and r1 == r2
    assert info["illegal_action"] is True and info["illegal_actions"] == 1
    o1, r1, *_, info = env.step(0)
    twin.step(0)
    assert info["illegal_action"] is False and info["illegal_actions"] == 1
    _, _, *_, info = env.step(-3)
    assert info["illegal_action"] is True and info["illegal_actions"] == 2
    env.reset(seed=BUSY_SEED)
    _, _, *_, info = env.step(0)
    assert info["illegal_actions"] == 0


# ----------------------------------------------------------------------------------------------------------
# Learning smoke test
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.rl
def test_maskable_ppo_learns_a_few_steps():
    import torch
    from sb3_contrib import MaskablePPO

    env = PreemptionEnv(**BUSY)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only add overhead (and contention on shared CI boxes)
    try:
        model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0)
        model.learn(128)
    finally:
        torch.set_num_threads(threads)
    assert model.num_timesteps >= 128
    obs, _ = env.reset(seed=BUSY_SEED)
    action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
    assert env.action_masks()[int(action)]


def test_observation_doc_is_generated_from_the_schema():
    from pathlib import Path

    from schedgym.decision.features import observation_doc

    doc = Path(__file__).resolve().parent.parent / "docs" / "observation.md"
    assert doc.read_text() == observation_doc(), "run: python -m schedgym.decision.features > docs/observation.md"


def test_the_builder_fills_exactly_the_declared_features():
    """The schema is the only layout: the builder's named values are exactly the declared names, in order."""
    env = PreemptionEnv(n_jobs=300)
    env.reset(seed=0)
    assert env.backend.encoder.head_names == TE_FEATURES + CLUSTER_FEATURES
    assert env.backend.encoder.row_names == CANDIDATE_FEATURES
    assert env.observation_space.shape == (N_HEAD + N_ROW * env.config.max_candidates,)
    assert PreemptionEnv.__doc__ is not None and "`remaining_estimate`" in PreemptionEnv.__doc__

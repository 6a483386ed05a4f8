"""Agents: baseline rules acting through the environment (``agents.HeuristicAgent``) make exactly the decisions
they make inside the simulator (``schedgym.experiments.run_policy``), and share SB3's ``predict`` interface."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import be, play_episode, te

from agents import Agent, HeuristicAgent
from schedgym.envs import PreemptionEnv
from schedgym.errors import SchedGymError
from schedgym.experiments import run_policy
from schedgym.registry import make_policy
from schedgym.sim import cluster_preset, resolve_cluster
from schedgym.sim.metrics import RunResult
from schedgym.workloads import Workload, generate, preset

POLICIES = ["fitgpp", "k8s", "random", "fitgpp-gracefirst", "fifo", "priority"]
N_JOBS = 2000
SEEDS = [0, 1]


def play(agent: HeuristicAgent, env: PreemptionEnv, obs: np.ndarray) -> int:
    """Let the agent act until the episode ends; returns the number of steps."""
    steps, _ = play_episode(env, obs, lambda o: agent.predict(o)[0])
    return steps


def through_env(name: str, seed: int, n_jobs: int = N_JOBS) -> tuple[RunResult, int]:
    env = PreemptionEnv(n_jobs=n_jobs, max_candidates=400, sim={"queue": make_policy(name).queue.value})
    obs, _ = env.reset(options={"workload_seed": seed})
    agent = HeuristicAgent(name, env, rng=np.random.default_rng(np.random.SeedSequence([seed, 1])))
    steps = play(agent, env, obs)
    return env.sim.result(), steps


def in_simulator(name: str, seed: int, n_jobs: int = N_JOBS) -> RunResult:
    cluster = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=n_jobs), cluster, np.random.default_rng(np.random.SeedSequence([seed, 0])))
    return run_policy(make_policy(name), cluster, wl, rng=np.random.default_rng(np.random.SeedSequence([seed, 1])))


def assert_same_run(a: RunResult, b: RunResult) -> None:
    assert a.job_ids == b.job_ids
    assert np.array_equal(a.completion, b.completion)
    assert np.array_equal(a.first_start, b.first_start)
    assert np.array_equal(a.preemptions, b.preemptions)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", POLICIES)
def test_agent_through_env_matches_run_policy(name, seed):
    via_env, steps = through_env(name, seed)
    direct = in_simulator(name, seed)
    assert_same_run(via_env, direct)
    assert steps > 0
    if make_policy(name).preempts:
        assert direct.n_preemptions > 0  # the comparison covered preemption decisions
    else:
        assert via_env.n_preemptions == 0


def test_agent_matches_run_policy_under_fifo_queue_for_a_preemptive_rule():
    # run_policy's queue override and the env's queue option must agree for a rule run out of its queue
    seed, n = 2, 1000
    env = PreemptionEnv(n_jobs=n, max_candidates=400, sim={"queue": "fifo"})
    obs, _ = env.reset(options={"workload_seed": seed})
    agent = HeuristicAgent("fitgpp", env, rng=np.random.default_rng(np.random.SeedSequence([seed, 1])))
    play(agent, env, obs)
    cluster = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=n), cluster, np.random.default_rng(np.random.SeedSequence([seed, 0])))
    direct = run_policy(make_policy("fitgpp"), cluster, wl, queue="fifo")
    assert_same_run(env.sim.result(), direct)


def test_predict_returns_an_int_and_passes_the_state_through():
    env = PreemptionEnv(n_jobs=1000, max_candidates=400)
    obs, _ = env.reset(options={"workload_seed": 1})
    agent = HeuristicAgent("fitgpp", env)
    state = object()
    action, out_state = agent.predict(obs, state=state, episode_start=np.array([True]), deterministic=True)
    assert type(action) is int
    assert out_state is state
    assert env.action_masks()[action]
    assert action >= 1  # fitgpp preempts when it can


def test_heuristic_agent_satisfies_the_agent_protocol():
    env = PreemptionEnv(n_jobs=100)
    agent = HeuristicAgent("k8s", env)
    assert isinstance(agent, Agent)
    assert not isinstance(object(), Agent)


def test_agent_accepts_a_policy_object_and_reports_its_queue():
    env = PreemptionEnv(n_jobs=100)
    assert HeuristicAgent(make_policy("fifo"), env).queue == "fifo"
    assert HeuristicAgent("fitgpp", env).queue == "priority"


def test_predict_at_the_end_of_an_episode_returns_zero():
    env = PreemptionEnv(n_jobs=1000, max_candidates=400)
    obs, _ = env.reset(options={"workload_seed": 1})
    agent = HeuristicAgent("k8s", env)
    play(agent, env, obs)
    action, _ = agent.predict(np.zeros(env.observation_space.shape, dtype=np.float32))
    assert action == 0


def test_agent_works_through_a_wrapper():
    import gymnasium as gym

    env = gym.make("schedgym/Preemption-v1", max_candidates=400)  # TimeLimit, OrderEnforcing, env checker
    obs, _ = env.reset(options={"workload_seed": 0})
    agent = HeuristicAgent("fitgpp", env, rng=np.random.default_rng(np.random.SeedSequence([0, 1])))
    play_episode(env, obs, lambda o: agent.predict(o)[0])
    assert_same_run(env.unwrapped.sim.result(), in_simulator("fitgpp", 0, n_jobs=1000))


def test_agent_replays_a_multi_victim_plan_one_row_at_a_time(tmp_path):
    env = PreemptionEnv(cluster=_two_full_nodes(tmp_path), max_candidates=16)
    obs, info = env.reset(options={"workload": _full_nodes_workload()})
    agent = HeuristicAgent("k8s", env)
    # k8s: two victims on either node; the node whose earliest victim started latest is node 1 (started at t=5);
    # it reprieves the earliest-started first, so the victims are b6 and b7
    a1, _ = agent.predict(obs)
    assert env.candidate_rows[a1 - 1][0].job_id in ("b6", "b7")
    obs, *_, info = env.step(a1)
    assert info["preemptions"] == 0 and env.backend.job_name() == "t" and info["te_job"] == env.backend.job
    a2, _ = agent.predict(obs)
    assert {env.chosen_victims[0].job_id, env.candidate_rows[a2 - 1][0].job_id} == {"b6", "b7"}
    _, _, terminated, _, info = env.step(a2)
    assert info["preemptions"] == 2 and terminated


def _two_full_nodes(tmp_path: Path) -> str:
    path = tmp_path / "two.csv"
    path.write_text("name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,8,64,512\n")
    return str(path)


def _full_nodes_workload() -> Workload:
    # b0-b3 fill node 0 at t=0, b4-b7 fill node 1 at t=5; a 4-GPU TE job arrives at t=10
    jobs = [be(f"b{i}", 0, 1000 * (i + 1), 2, grace=5) for i in range(4)]
    jobs += [be(f"b{i}", 5, 1000 * (i + 1), 2, grace=5) for i in range(4, 8)]
    jobs.append(te("t", 10, 100, 4))
    return Workload(tuple(jobs))


def test_too_few_candidate_rows_raise_asking_for_more_max_candidates(tmp_path):
    # with one row, only b0 (node 0) is listed, but k8s wants b6/b7 on node 1
    env = PreemptionEnv(cluster=_two_full_nodes(tmp_path), max_candidates=1)
    obs, _ = env.reset(options={"workload": _full_nodes_workload()})
    assert [j.job_id for j, _ in env.candidate_rows] == ["b0"]
    agent = HeuristicAgent("k8s", env)
    with pytest.raises(SchedGymError, match="max_candidates") as exc:
        agent.predict(obs)
    assert "raise max_candidates" in str(exc.value) and "(now 1)" in str(exc.value)


def test_small_max_candidates_suffices_when_the_plan_is_listed(tmp_path):
    # the same workload with every candidate listed: the agent finds its victims' rows
    env = PreemptionEnv(cluster=_two_full_nodes(tmp_path), max_candidates=8)
    obs, _ = env.reset(options={"workload": _full_nodes_workload()})
    agent = HeuristicAgent("k8s", env)
    play(agent, env, obs)
    direct = run_policy(make_policy("k8s"), resolve_cluster(env.config.cluster), _full_nodes_workload())
    assert_same_run(env.sim.result(), direct)


def _gang_decline_workload() -> Workload:
    """Node 0 holds four 2-GPU BE jobs, node 1 an 8-GPU TE job. A 2-node gang TE job cannot get room on node 1,
    so its requests offer no choice; a 4-GPU TE job then needs two of node 0's BE jobs."""
    jobs = [be(f"b{i}", 0, 1000 * (i + 1), 2, grace=5) for i in range(4)]
    jobs.append(te("t_big", 0, 5000, 8))
    jobs.append(te("gang", 10, 100, 8, gang_size=2))
    jobs.append(te("t2", 20, 100, 4))
    return Workload(tuple(jobs))


def test_random_agent_matches_run_policy_when_a_gang_request_offers_no_choice(tmp_path):
    cluster = _two_full_nodes(tmp_path)
    wl = _gang_decline_workload()
    mismatches = 0
    for seed in range(6):
        env = PreemptionEnv(cluster=cluster, max_candidates=16)
        obs, _ = env.reset(options={"workload": wl})
        agent = HeuristicAgent("random", env, rng=np.random.default_rng(seed))
        play(agent, env, obs)
        direct = run_policy(make_policy("random"), resolve_cluster(cluster), wl, rng=np.random.default_rng(seed))
        a, b = env.sim.result(), direct
        mismatches += not (np.array_equal(a.completion, b.completion) and np.array_equal(a.preemptions, b.preemptions))
    assert mismatches == 0


@pytest.mark.parametrize("name", ["fitgpp", "k8s", "fitgpp-gracefirst"])
def test_deterministic_rules_match_run_policy_when_a_gang_request_offers_no_choice(tmp_path, name):
    cluster = _two_full_nodes(tmp_path)
    wl = _gang_decline_workload()
    env = PreemptionEnv(cluster=cluster, max_candidates=16)
    obs, _ = env.reset(options={"workload": wl})
    play(HeuristicAgent(name, env), env, obs)
    assert_same_run(env.sim.result(), run_policy(make_policy(name), resolve_cluster(cluster), wl))

"""Property tests of the environment: random configurations, small workloads, random legal actions.

Whatever the agent does (as long as it is legal), the simulator's invariants hold, every decision offers a
non-empty mask with 0 legal, every observation is inside the observation space, the episode terminates
within a bound, and the undiscounted return is minus the weighted slowdowns and preemption costs.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from schedgym.envs import EnvConfig, PreemptionEnv
from schedgym.sim import JobClass
from schedgym.sim.metrics import TAU
from schedgym.workloads import generate, preset

SCALE = float(os.environ.get("SCHEDGYM_PROPERTY_SCALE", "1"))
ENV_SETTINGS = settings(
    max_examples=max(1, int(25 * SCALE)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TOL = 1e-6
STEP_BOUND = 20  # steps per job


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory) -> dict[str, str]:
    d: Path = tmp_path_factory.mktemp("clusters")
    files = {
        # two identical nodes
        "two": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,8,64,512\n",
        # heterogeneous: a half-size node that only small jobs fit
        "mixed": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,4,32,256\nn2,8,64,512\n",
    }
    out = {}
    for name, text in files.items():
        path = d / f"{name}.csv"
        path.write_text(text)
        out[name] = str(path)
    return out


@st.composite
def setups(draw):
    """(config kwargs, hot workload parameters or None, reset seed, action seed, p_wait)."""
    kwargs = dict(
        cluster=draw(st.sampled_from(["small", "two", "mixed"])),
        n_jobs=draw(st.integers(30, 120)),
        max_candidates=draw(st.integers(1, 8)),
        sim=dict(
            # 0 (nothing is ever preemptible, so no decision) is valid but kept rare; hypothesis favours endpoints
            max_preemptions=draw(st.integers(0, 11).map(lambda i: (1, 2, 3, 1, 2, 3, 0, 1, 2, 3, 1, 2)[i])),
            restart_overhead=draw(st.sampled_from([0.0, 0.0, 5.0, 60.0])),
            queue=draw(st.sampled_from(["fifo", "priority"])),
            backfill=draw(st.booleans()),
            placement=draw(st.sampled_from(["best-fit", "first-fit"])),
        ),
        estimate_noise=draw(st.sampled_from([0.0, 0.3, 1.5])),
        reward=draw(st.sampled_from(["slowdown", "bounded_slowdown"])),
        te_weight=draw(st.sampled_from([1.0, 2.0, 0.0])),
        be_weight=draw(st.sampled_from([1.0, 0.5, 0.0])),
        preemption_cost=draw(st.sampled_from([0.0, 0.0, 0.5])),
    )
    # "hot" (most examples): a heavily loaded workload with shorter BE jobs, so that small episodes have many
    # decisions; otherwise the preset workload drawn by reset(seed) (often with no decision at this size)
    hot = None
    if draw(st.sampled_from([True, True, True, False])):
        hot = dict(
            load=draw(st.sampled_from([3.0, 6.0, 2.0, 4.0])),
            te_fraction=draw(st.sampled_from([0.5, 0.3, 0.7])),
            be_duration_median=draw(st.sampled_from([900.0, 3600.0])),
            be_duration_min=draw(st.sampled_from([600.0, 5.0])),
            te_duration_min=draw(st.sampled_from([60.0, 1.0])),
            grace_min=draw(st.sampled_from([5.0, 0.0])),
        )
    seed = draw(st.integers(0, 2**31 - 1))
    action_seed = draw(st.integers(0, 2**31 - 1))
    p_wait = draw(st.sampled_from([0.0, 0.2, 0.6]))
    return kwargs, hot, seed, action_seed, p_wait


def make_env(cluster_files: dict[str, str], kwargs: dict, hot: dict | None, seed: int):
    kwargs = dict(kwargs)
    kwargs["cluster"] = cluster_files.get(kwargs["cluster"], kwargs["cluster"])
    env = PreemptionEnv(EnvConfig(**kwargs))
    options = None
    if hot is not None:
        synth = replace(preset("paper", n_jobs=kwargs["n_jobs"]), **hot)
        wl = generate(synth, env.cluster, np.random.default_rng(seed))
        options = {"workload": wl}
    return env, options


def check_free(env: PreemptionEnv) -> None:
    free, cap = env.sim.unused, env.sim.capacity
    assert (free >= -1e-9).all(), free
    assert (free <= cap + 1e-9).all(), (free, cap)


def check_decision(env: PreemptionEnv, obs: np.ndarray, info: dict) -> None:
    mask = info["action_mask"]
    assert mask.dtype == bool and mask.shape == (env.config.max_candidates + 1,)
    assert mask[0] and mask.any()
    assert np.array_equal(mask, env.action_masks())
    assert obs.dtype == np.float32
    assert env.observation_space.contains(obs), obs
    assert np.isfinite(info["reward_te"])


def check_result(env: PreemptionEnv) -> None:
    sim = env.sim
    assert sim.done
    assert np.allclose(sim.unused, sim.capacity), "resources leaked at the end"
    r = sim.result()
    specs = [j.spec for j in sim.jobs]
    segs = defaultdict(list)
    for s in r.segments:
        segs[s.job].append(s)
    for i, spec in enumerate(specs):
        k = spec.gang_size
        assert math.isfinite(r.completion[i]), f"{spec.job_id} never completed"
        completed = [s for s in segs[i] if s.end_reason == "completed"]
        # exactly one completed run: one segment on each of k distinct nodes, ending at the completion
        assert len(completed) == k and len({s.node for s in completed}) == k, completed
        assert all(s.end == r.completion[i] for s in completed)
        assert r.completion[i] - spec.submit_time >= spec.duration - TOL
        assert r.first_start[i] >= spec.submit_time - TOL
        # per node, run segments add up to the work plus restart overheads
        per_run = sum(s.end - s.start for s in segs[i]) / k
        assert per_run == pytest.approx(spec.duration + r.overhead_time[i], abs=TOL)
        assert r.preemptions[i] <= env.config.sim.max_preemptions
        if spec.job_class == JobClass.TE:
            assert r.preemptions[i] == 0


def expected_return(env: PreemptionEnv) -> float:
    r = env.sim.result()
    c = env.config
    in_system = r.completion - r.submit
    per_job = in_system / r.duration if c.reward == "slowdown" else in_system / np.maximum(r.duration, TAU)
    is_te = r.job_class == int(JobClass.TE)
    return -(c.te_weight * per_job[is_te].sum() + c.be_weight * per_job[~is_te].sum()) - c.preemption_cost * (
        r.n_preemptions
    )


@ENV_SETTINGS
@given(setup=setups())
def test_random_legal_play_keeps_the_invariants(cluster_files, setup):
    kwargs, hot, seed, action_seed, p_wait = setup
    env, options = make_env(cluster_files, kwargs, hot, seed)
    obs, info = env.reset(seed=seed, options=options)
    n_jobs = len(env.sim.jobs)
    check_decision(env, obs, info)
    check_free(env)
    event(f"hot workload: {hot is not None}")
    if env.pending_request is None:
        event("no decision: the first step ends the episode")
    rng = np.random.default_rng(action_seed)
    total, steps = 0.0, 0
    terminated = False
    while not terminated:
        legal = np.flatnonzero(info["action_mask"])
        a = int(rng.choice(legal)) if len(legal) == 1 or rng.random() < p_wait else int(rng.choice(legal[1:]))
        obs, reward, terminated, truncated, info = env.step(a)
        steps += 1
        assert not truncated
        check_decision(env, obs, info)
        check_free(env)
        parts = (info["reward_te"], info["reward_be"], info["reward_preemption"])
        assert reward == pytest.approx(sum(parts), rel=1e-12, abs=1e-12)
        total += reward
        assert steps <= STEP_BOUND * n_jobs, "the episode does not end"
    assert env.pending_request is None and not obs.any()
    event(f"steps: {'1-4' if steps < 5 else '5-19' if steps < 20 else '20+'}")
    event(f"preempted: {env.sim.n_preemptions > 0}")
    check_result(env)
    assert total == pytest.approx(expected_return(env), rel=1e-9, abs=1e-9)


@ENV_SETTINGS
@given(setup=setups())
def test_candidate_rows_are_legal_preemptions(cluster_files, setup):
    """Every row is a running, preemptible BE job on the node it is listed for, a feasible node for the TE
    job; rows are distinct, and an attempt in progress only lists nodes the TE job can still use."""
    kwargs, hot, seed, action_seed, p_wait = setup
    env, options = make_env(cluster_files, kwargs, hot, seed)
    obs, info = env.reset(seed=seed, options=options)
    if env.pending_request is None:
        return
    rng = np.random.default_rng(action_seed)
    n_jobs = len(env.sim.jobs)
    terminated, steps = False, 0
    while not terminated:
        req = env.pending_request
        rows = env.candidate_rows
        assert 1 <= len(rows) <= env.config.max_candidates
        assert len(set((j.idx, n) for j, n in rows)) == len(rows)
        chosen = {v.idx for v in env.chosen_victims}
        for job, node in rows:
            assert job.job_class == JobClass.BE
            assert job.preemptions < env.config.sim.max_preemptions
            assert node in job.nodes
            assert job.idx not in chosen
            assert job in req.candidates[node]
        if chosen and req.job.gang_size == 1:
            target = env.chosen_victims[0].nodes
            assert all(node in target for _, node in rows)
        legal = np.flatnonzero(info["action_mask"])
        a = int(rng.choice(legal)) if rng.random() < p_wait else int(rng.choice(legal[1:]))
        obs, _, terminated, _, info = env.step(a)
        steps += 1
        assert steps <= STEP_BOUND * n_jobs

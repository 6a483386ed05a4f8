"""Test helpers: job/cluster builders, a scripted preemption policy, a run helper and a per-job result view.

Hand-computed tests use GPU-only jobs (cpus = mem_gb = 0) on nodes with 8 GPUs unless they test another
resource, so that the arithmetic in their comments stays short.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from schedgym.sim import (
    DECLINE,
    ClusterSpec,
    JobClass,
    JobSpec,
    NodeSpec,
    PreemptionPlan,
    PreemptionRequest,
    SimConfig,
    Simulator,
)
from schedgym.sim.metrics import RunResult

TE, BE = JobClass.TE, JobClass.BE


def te(job_id: str, submit: float, duration: float, gpus: float, **kw) -> JobSpec:
    return JobSpec(job_id, float(submit), float(duration), float(gpus), job_class=TE, **kw)


def be(job_id: str, submit: float, duration: float, gpus: float, grace: float = 0.0, **kw) -> JobSpec:
    return JobSpec(job_id, float(submit), float(duration), float(gpus), job_class=BE, grace_period=float(grace), **kw)


def cluster(*gpus: float, cpus: float = 0.0, mem_gb: float = 0.0) -> ClusterSpec:
    """One node per argument, named n0, n1, ... with that many GPUs."""
    return ClusterSpec(tuple(NodeSpec(f"n{i}", float(g), cpus, mem_gb) for i, g in enumerate(gpus)))


def fit_vs_grace_jobs(grace_big: float, grace_small: float) -> list[JobSpec]:
    """Two 8-GPU nodes. At 0 (best fit): "big" (8 GPUs) -> n0; "s1" (4) -> n1; "s2" (4) -> n1. "t" (TE, 4 GPUs)
    at 10 finds no room: on n0 it must preempt big (frees 8 for a deficit of 4), on n1 one of s1/s2 (frees
    exactly 4)."""
    return [
        be("big", 0, 1000, 8, grace=grace_big),
        be("s1", 0, 1000, 4, grace=grace_small),
        be("s2", 0, 1000, 4, grace=grace_small),
        te("t", 10, 100, 4),
    ]


def in_node_jobs() -> list[JobSpec]:
    """One 16-GPU node running "v2" (2 GPUs, grace 5), "v4" (4 GPUs, grace 50), "v8" (8 GPUs, grace 20): 2 GPUs
    free. "t" (TE, 5 GPUs) at 10 has a deficit of 5 - 2 = 3."""
    return [
        be("v2", 0, 1000, 2, grace=5),
        be("v4", 0, 1000, 4, grace=50),
        be("v8", 0, 1000, 8, grace=20),
        te("t", 10, 100, 5),
    ]


@st.composite
def small_workloads(draw) -> tuple[ClusterSpec, list[JobSpec]]:
    """A heterogeneous cluster of 1-5 nodes (fractional GPUs or not, nodes without CPUs or memory) and 5-40 jobs
    that each fit on some node: gangs, both classes, equal submit times, a few grace periods."""
    n = draw(st.integers(1, 5))
    fractional = draw(st.booleans())
    gpu_sizes = [0.7, 1.0, 1.5, 2.5] if fractional else [1.0, 2.0, 4.0, 8.0]
    nodes = tuple(
        NodeSpec(
            f"n{i}",
            draw(st.sampled_from(gpu_sizes)),
            draw(st.sampled_from([0.0, 4.0, 16.0])),  # 0: a node without CPUs (capacity normaliser 1.0)
            draw(st.sampled_from([0.0, 32.0, 64.0])),
        )
        for i in range(n)
    )
    cl = ClusterSpec(nodes)
    cap = cl.capacity
    fractions = st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0])
    jobs = []
    for i in range(draw(st.integers(5, 40))):
        host = cap[draw(st.integers(0, n - 1))]
        member = tuple(float(host[r] * draw(fractions)) for r in range(3))
        if sum(member) <= 0:
            member = (float(host[0]) * 0.5, float(host[1]) * 0.5, float(host[2]) * 0.5)
        k = draw(st.integers(1, min(3, n)))
        if int((cap >= np.array(member) - 1e-9).all(axis=1).sum()) < k:
            k = 1  # the host node always fits one member
        jobs.append(
            JobSpec(
                job_id=f"j{i}",
                submit_time=float(draw(st.integers(0, 60))),
                duration=float(draw(st.sampled_from([1, 5, 10, 20, 50, 200]))),
                gpus=member[0] * k,
                cpus=member[1] * k,
                mem_gb=member[2] * k,
                gang_size=k,
                job_class=JobClass.TE if draw(st.integers(0, 2)) == 0 else JobClass.BE,
                grace_period=float(draw(st.sampled_from([0, 1, 3, 10, 10, 25]))),
            )
        )
    return cl, jobs


@dataclass
class Seen:
    """What a scripted policy saw in one request (copied: the request's arrays are live views)."""

    job_id: str
    now: float
    avail: np.ndarray
    candidates: dict[int, list[str]]


@dataclass
class Scripted:
    """Answers requests from a script.

    ``script`` maps the requesting job's id to a plan given as ``(nodes, victim job ids)``; victim ids are
    turned into job indices through the simulator. Requests not in the script (or asked a second time) are
    declined. Every request is recorded in ``seen``.
    """

    script: dict[str, tuple[Sequence[int], Sequence[str]]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def decide(self, request: PreemptionRequest) -> PreemptionPlan:
        jid = request.job.job_id
        self.seen.append(
            Seen(
                jid,
                request.now,
                np.array(request.avail, copy=True),
                {n: [j.job_id for j in js] for n, js in request.candidates.items()},
            )
        )
        if jid not in self.script:
            return DECLINE
        nodes, victims = self.script.pop(jid)
        return PreemptionPlan(nodes=tuple(nodes), victims=tuple(self.index[v] for v in victims))


def simulate(
    nodes: ClusterSpec,
    jobs: Sequence[JobSpec],
    script: dict[str, tuple[Sequence[int], Sequence[str]]] | None = None,
    **config,
) -> tuple[RunResult, Scripted, Simulator]:
    sim = Simulator(nodes, jobs, SimConfig(**config))
    policy = Scripted(dict(script or {}), index={j.job_id: i for i, j in enumerate(jobs)})
    result = sim.run(policy)
    return result, policy, sim


class View:
    """Per-job access to a RunResult by job id: ``v["a"].completion``, ``v.segments("a")``."""

    def __init__(self, result: RunResult):
        self.result = result
        self._idx = {jid: i for i, jid in enumerate(result.job_ids)}

    def __getitem__(self, job_id: str) -> _JobView:
        return _JobView(self.result, self._idx[job_id])

    def segments(self, job_id: str) -> list[tuple[int, float, float, str]]:
        """(node, start, end, end_reason) of the job, ordered by start time, then node."""
        i = self._idx[job_id]
        segs = [(s.node, s.start, s.end, s.end_reason) for s in self.result.segments if s.job == i]
        return sorted(segs, key=lambda s: (s[1], s[0]))


class _JobView:
    _FIELDS = (
        "submit",
        "duration",
        "first_start",
        "completion",
        "preemptions",
        "grace_time",
        "overhead_time",
        "run_time",
        "slowdown",
        "bounded_slowdown",
        "wait",
    )

    def __init__(self, result: RunResult, i: int):
        self._r, self._i = result, i

    def __getattr__(self, name: str):
        if name not in self._FIELDS:
            raise AttributeError(name)
        return getattr(self._r, name)[self._i].item()


def play_episode(env, obs: np.ndarray, act) -> tuple[int, float]:  # noqa: ANN001
    """Step ``env`` with ``act(obs) -> action`` from ``obs`` until the episode ends (it must not be truncated).

    The one loop the tests use to drive an environment with an agent; returns (steps, summed reward). An
    episode with no decision pending is over already: no step is taken.
    """
    steps, total = 0, 0.0
    if env.unwrapped.pending_request is None:
        return steps, total
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        assert not truncated, "the episode was truncated before the workload drained"
        steps += 1
        total += float(reward)
    return steps, total


def schedgym_command() -> str:
    """The ``schedgym`` command installed beside this interpreter: its launcher takes Ctrl-C and SIGTERM from
    its first line, which ``python -m schedgym.cli`` does not. A test that needs it is skipped without it."""
    exe = Path(sys.executable).parent / "schedgym"
    if not exe.exists():
        pytest.skip("the schedgym command (its launcher) is not installed beside this Python")
    return str(exe)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m schedgym.cli ARGS`` in a fresh interpreter, as a user's shell would."""
    return subprocess.run(
        [sys.executable, "-m", "schedgym.cli", *args], capture_output=True, text=True, timeout=timeout
    )


# A training run small enough for a test (schedgym train's TrainConfig fields): two evaluations, no logs.
TINY = dict(
    total_timesteps=128,
    n_envs=1,
    vec_env="dummy",
    n_steps=64,
    batch_size=32,
    eval_freq=64,
    n_eval_workloads=1,
    env_kwargs={"n_jobs": 150},
    tensorboard=False,
    progress=False,
)

# One RLlib PPO update of 64 steps in minibatches of 32, evaluated once on one validation workload.
TINY_RLLIB = dict(
    algo="rllib_ppo",
    total_timesteps=64,
    n_envs=1,
    n_steps=64,
    batch_size=32,
    eval_freq=64,
    n_eval_workloads=1,
    env_kwargs={"n_jobs": 100, "cluster": "small"},
    progress=False,
)


def acts_like_sb3(net, model, env, seeds) -> int:  # noqa: ANN001
    """Play whole episodes of ``env`` (one per seed) with the numpy network ``net``, checking every action
    against the SB3 ``model``'s deterministic ``predict`` with the same mask; return the steps played."""
    steps = 0
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            mask = env.unwrapped.action_masks()
            action = net.act(obs, mask)
            assert action == model.predict(obs, action_masks=mask, deterministic=True)[0], (seed, steps)
            obs, _, terminated, truncated, _ = env.step(action)
            done, steps = terminated or truncated, steps + 1
    return steps


def run_python_without_ray_settings(
    args: Sequence[str], *, home: object, cwd: object, timeout: float, **env: str
) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh interpreter as a user would start it: none of this process's ``RAY_``
    variables (the tests' Ray token among them), usage statistics off, ``home`` as the home folder (for the
    caller to check it stays empty), and ``env`` on top."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    clean.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", **env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=clean, cwd=cwd)

"""Run one policy on one workload: the glue between a policy object and the simulator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from schedgym.errors import SchedGymError
from schedgym.registry import make_policy
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.metrics import RunResult
from schedgym.sim.policy import QueueDiscipline
from schedgym.sim.simulator import SimConfig, Simulator
from schedgym.workloads.trace import Workload


def run_policy(
    policy: Any,
    cluster: ClusterSpec,
    workload: Workload,
    config: SimConfig | None = None,
    *,
    rng: np.random.Generator | None = None,
    queue: QueueDiscipline | str | None = None,
) -> RunResult:
    """Simulate ``workload`` on ``cluster`` with ``policy`` deciding preemptions.

    The queue discipline is the policy's own (``policy.queue``) unless ``queue`` overrides it; every other
    rule comes from ``config``. ``rng`` seeds randomised policies through ``policy.reset(rng)``.
    """
    config = config if config is not None else SimConfig()
    config = replace(config, queue=queue if queue is not None else policy.queue)
    policy.reset(rng if rng is not None else np.random.default_rng(0))
    sim = Simulator(cluster, workload.jobs, config, preemption=bool(policy.preempts))
    return sim.run(policy)


def run_agent(agent: Any, env: Any, workload: Workload, seed: int = 0) -> RunResult:
    """Run an agent with SB3's ``predict`` through ``env`` on the pinned ``workload`` until it drains.

    ``seed`` seeds the environment's reset (its only randomness is the remaining-work estimate noise).
    """
    obs, info = env.reset(seed=seed, options={"workload": workload})
    done = False
    while not done:
        action, _ = agent.predict(obs, deterministic=True)
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    sim = env.unwrapped.sim
    if not sim.done:
        raise SchedGymError(
            f"the episode was truncated after {env.unwrapped.n_steps} steps before the workload drained; "
            "raise max_episode_steps"
        )
    return sim.result()


def make_runner(spec: str, cluster: str, config: SimConfig | None = None) -> Callable[..., RunResult]:
    """``run(workload, rng, seed) -> RunResult`` for a registry spec: a rule runs inside the simulator, a
    learned agent through the environment (loaded once, reused for every workload).

    The simulator rules of ``config`` apply to both; a learned agent keeps the queue discipline it was
    trained with.
    """
    config = config if config is not None else SimConfig()
    obj = make_policy(spec)
    if getattr(obj, "kind", "rule") == "agent":
        env = obj.make_env(
            cluster=cluster,
            backfill=config.backfill,
            placement=config.placement,
            max_preemptions=config.max_preemptions,
            restart_overhead=config.restart_overhead,
            max_episode_steps=10**9,  # an evaluation episode ends when the workload drains
        )
        agent = obj.agent(env)

        def run_learned(workload: Workload, rng: np.random.Generator, seed: int = 0) -> RunResult:
            return run_agent(agent, env, workload, seed=seed)

        return run_learned
    resolved = resolve_cluster(cluster)

    def run_rule(workload: Workload, rng: np.random.Generator, seed: int = 0) -> RunResult:
        return run_policy(obj, resolved, workload, config, rng=rng)

    return run_rule

"""Run policies on workloads: the one rollout loop.

``schedgym compare``, training's periodic evaluation and the tests all run a policy (rule or learned agent)
through :func:`run_policy` with the seed's generator (:func:`run_rng`); a run of one policy on one workload
with one seed, warm-up jobs left out (:func:`~schedgym.experiments.evaluation.evaluate_policy`), is the unit
of every comparison and of every validation.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from schedgym.envs.config import EnvConfig
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import RunResult
from schedgym.sim.policy import Policy, QueueDiscipline
from schedgym.sim.simulator import SimConfig, Simulator
from schedgym.workloads.trace import Workload


def run_policy(
    policy: Policy,
    cluster: ClusterSpec,
    workload: Workload,
    config: SimConfig | None = None,
    *,
    rng: np.random.Generator | None = None,
    queue: QueueDiscipline | str | None = None,
) -> RunResult:
    """Simulate ``workload`` on ``cluster`` with ``policy`` deciding preemptions; every job counts.

    The queue discipline is the policy's own (``policy.queue``) unless ``queue`` overrides it; every other
    rule comes from ``config``. ``rng`` seeds the run through ``policy.reset(rng)`` (randomised rules, and a
    learned agent's duration-estimate noise).
    """
    config = config if config is not None else SimConfig()
    config = replace(config, queue=queue if queue is not None else policy.queue)
    policy.reset(rng if rng is not None else np.random.default_rng(0))
    sim = Simulator(cluster, workload.table, config, preemption=bool(policy.preempts))
    return sim.run(policy)


def run_rng(seed: int) -> np.random.Generator:
    """The policy's generator for seed ``seed`` (independent of the workload's, ``SeedSequence([seed, 0])``)."""
    return np.random.default_rng(np.random.SeedSequence([seed, 1]))


def measured(result: RunResult, workload: Workload) -> RunResult:
    """The jobs of ``result`` that count for ``workload`` (all, unless it marks a warm-up)."""
    if workload.measured is None:
        return result
    return result.only(np.array(workload.measured))


def episode_return(result: RunResult, config: EnvConfig) -> float:
    """The undiscounted return the environment configured by ``config`` gives for the run ``result`` (all its
    jobs, warm-up included): minus the weighted sum of job slowdowns, minus the preemption cost."""
    slowdown = result.slowdown if config.reward == "slowdown" else result.bounded_slowdown
    te = float(slowdown[result.job_class == int(JobClass.TE)].sum())
    be = float(slowdown[result.job_class == int(JobClass.BE)].sum())
    return -(config.te_weight * te + config.be_weight * be) - config.preemption_cost * result.n_preemptions


__all__ = ["episode_return", "measured", "run_policy", "run_rng"]

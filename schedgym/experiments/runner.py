"""Run one policy on one workload: the glue between a policy object and the simulator."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from schedgym.sim.cluster import ClusterSpec
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

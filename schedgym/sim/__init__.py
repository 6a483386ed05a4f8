"""The cluster simulator. It imports nothing from gymnasium: the environment wraps it."""

from schedgym.sim.cluster import (
    CLUSTER_PRESETS,
    ClusterSpec,
    NodeSpec,
    cluster_preset,
    load_cluster_csv,
    resolve_cluster,
)
from schedgym.sim.job import RESOURCES, Job, JobClass, JobSpec, JobState, JobTable
from schedgym.sim.metrics import TAU, ClassStats, RunResult, Segment
from schedgym.sim.policy import (
    DECLINE,
    Policy,
    PreemptionPlan,
    PreemptionPolicy,
    PreemptionRequest,
    QueueDiscipline,
)
from schedgym.sim.simulator import SimConfig, Simulator

__all__ = [
    "CLUSTER_PRESETS",
    "DECLINE",
    "RESOURCES",
    "TAU",
    "ClassStats",
    "ClusterSpec",
    "Job",
    "JobClass",
    "JobSpec",
    "JobState",
    "JobTable",
    "NodeSpec",
    "Policy",
    "PreemptionPlan",
    "PreemptionPolicy",
    "PreemptionRequest",
    "QueueDiscipline",
    "RunResult",
    "Segment",
    "SimConfig",
    "Simulator",
    "cluster_preset",
    "load_cluster_csv",
    "resolve_cluster",
]

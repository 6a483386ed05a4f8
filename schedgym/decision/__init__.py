"""How an agent takes the simulator's preemption decisions: the observation schema and the victim-by-victim
protocol. Gymnasium-free: the environment and learned agents deciding inside the simulator share it.
"""

from schedgym.decision.features import (
    CANDIDATE_FEATURES,
    CLUSTER_FEATURES,
    JOB_FEATURES,
    Feature,
    observation_size,
    observation_table,
    squash,
)
from schedgym.decision.stepwise import DecisionEncoder, StepwiseDecision

__all__ = [
    "CANDIDATE_FEATURES",
    "CLUSTER_FEATURES",
    "JOB_FEATURES",
    "DecisionEncoder",
    "Feature",
    "StepwiseDecision",
    "observation_size",
    "observation_table",
    "squash",
]

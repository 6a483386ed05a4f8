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
from schedgym.decision.stepwise import DecisionEncoder, StepwiseDecision, action_index, check_action

__all__ = [
    "CANDIDATE_FEATURES",
    "CLUSTER_FEATURES",
    "JOB_FEATURES",
    "DecisionEncoder",
    "Feature",
    "StepwiseDecision",
    "action_index",
    "check_action",
    "observation_size",
    "observation_table",
    "squash",
]

"""The Gymnasium environment. It wraps :mod:`schedgym.sim` and only translates between the two."""

from schedgym.envs.config import EnvConfig
from schedgym.envs.preemption_env import (
    CANDIDATE_FEATURES,
    CLUSTER_FEATURES,
    TE_FEATURES,
    MaskedDiscrete,
    PreemptionEnv,
)
from schedgym.envs.wrappers import DictMaskObservation, IllegalActionAsWait

__all__ = [
    "CANDIDATE_FEATURES",
    "CLUSTER_FEATURES",
    "TE_FEATURES",
    "DictMaskObservation",
    "EnvConfig",
    "IllegalActionAsWait",
    "MaskedDiscrete",
    "PreemptionEnv",
]

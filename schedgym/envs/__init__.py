"""The Gymnasium environment. It wraps :mod:`schedgym.sim` and only translates between the two; the decision
protocol and the observation schema it uses live in :mod:`schedgym.decision`."""

from schedgym.envs.config import EnvConfig
from schedgym.envs.preemption_env import MaskedDiscrete, PreemptionEnv
from schedgym.envs.wrappers import DictMaskObservation, IllegalActionAsWait

__all__ = [
    "DictMaskObservation",
    "EnvConfig",
    "IllegalActionAsWait",
    "MaskedDiscrete",
    "PreemptionEnv",
]

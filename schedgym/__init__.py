"""schedgym: preemptive job scheduling on deep-learning clusters, as a simulator and a Gymnasium environment.

Layout: ``schedgym.sim`` (the simulator, no gymnasium), ``schedgym.workloads`` (traces and synthetic
generators), ``schedgym.registry`` (policy names), ``schedgym.experiments`` (comparisons); the baseline
policies live in the top-level ``baselines`` package and learned agents in ``agents``.
"""

from schedgym.errors import SchedGymError

__version__ = "0.1.0"

__all__ = ["SchedGymError", "__version__"]

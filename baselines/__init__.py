"""Baseline policies: FIFO, priority, FitGpp (the paper's heuristic, reconstructed), Kubernetes-like, random, and
lookahead (plays out each option on a copy of the simulation).

Resolve them by name through :func:`schedgym.registry.make_policy` (``"fifo"``, ``"fitgpp"``, ...).
"""

from baselines.base import NodeByNodePolicy, Policy
from baselines.fifo import Fifo, Priority
from baselines.fitgpp import FitGpp
from baselines.k8s import K8s
from baselines.lookahead import Lookahead
from baselines.random_policy import RandomPreemption

__all__ = ["Fifo", "FitGpp", "K8s", "Lookahead", "NodeByNodePolicy", "Policy", "Priority", "RandomPreemption"]

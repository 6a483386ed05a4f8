"""Baseline policies: FIFO, priority, FitGpp (the paper's heuristic, reconstructed), Kubernetes-like and random.

Resolve them by name through :func:`schedgym.registry.make_policy` (``"fifo"``, ``"fitgpp"``, ...).
"""

from baselines.base import NodeByNodePolicy, Policy
from baselines.fifo import Fifo, Priority
from baselines.fitgpp import FitGpp
from baselines.k8s import K8s
from baselines.random_policy import RandomPreemption

__all__ = ["Fifo", "FitGpp", "K8s", "NodeByNodePolicy", "Policy", "Priority", "RandomPreemption"]

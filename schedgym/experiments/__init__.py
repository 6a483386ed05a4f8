"""Experiments: running policies on workloads and comparing them on identical traces."""

from schedgym.experiments.compare import CompareConfig, ComparisonResult, run_comparison
from schedgym.experiments.runner import run_policy

__all__ = ["CompareConfig", "ComparisonResult", "run_comparison", "run_policy"]

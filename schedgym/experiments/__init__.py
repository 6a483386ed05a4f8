"""Experiments: running policies on workloads (:mod:`.runner`), comparing them on identical workloads
(:mod:`.compare`), their statistics (:mod:`.stats`) and reports (:mod:`.report`)."""

from schedgym.experiments.compare import CompareConfig, ComparisonResult, run_comparison
from schedgym.experiments.runner import evaluate_run, run_policy

__all__ = ["CompareConfig", "ComparisonResult", "evaluate_run", "run_comparison", "run_policy"]

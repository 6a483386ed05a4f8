"""Experiments: running policies on workloads (:mod:`.runner`), evaluating them (:mod:`.evaluation`, by the
figures of :mod:`.figures`), comparing them on identical workloads (:mod:`.compare`) and over a grid of
settings (:mod:`.sweep`), where the runs execute (:mod:`.executors`), their statistics (:mod:`.stats`),
reports (:mod:`.report`) and plots (:mod:`.plotting`)."""

from schedgym.experiments.compare import CompareConfig, ComparisonResult, run_comparison
from schedgym.experiments.evaluation import RunEvaluation, evaluate_policy
from schedgym.experiments.figures import HEADLINE, ClassFigure
from schedgym.experiments.runner import run_policy

__all__ = [
    "HEADLINE",
    "ClassFigure",
    "CompareConfig",
    "ComparisonResult",
    "RunEvaluation",
    "evaluate_policy",
    "run_comparison",
    "run_policy",
]

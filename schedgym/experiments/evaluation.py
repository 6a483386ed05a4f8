"""Evaluate a policy on workloads: the one evaluation every tool calls.

``schedgym compare`` and ``schedgym sweep`` (each run of their executors), training's periodic validation
(stable-baselines3 and RLlib alike) and so ``schedgym tune``'s trials all evaluate through
:func:`evaluate_policy`: a policy on each workload with that workload's seed (:func:`~.runner.run_rng`), the
simulator's rules given, warm-up jobs left out of the figures. One function, so that a figure training
reports on its validation workloads is the figure ``schedgym compare`` would report on the same workload
and seed, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schedgym.envs.config import EnvConfig
from schedgym.errors import ConfigError
from schedgym.experiments.figures import HEADLINE, ClassFigure
from schedgym.experiments.runner import episode_return, measured, run_policy, run_rng
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.metrics import RunResult
from schedgym.sim.policy import Policy
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.trace import Workload


@dataclass(frozen=True)
class RunEvaluation:
    """One run of a policy on one workload with one seed."""

    seed: int
    """the seed of the policy's generator (:func:`~.runner.run_rng`)"""
    result: RunResult
    """the measured jobs only (a trace window's warm-up jobs ran, but do not count)"""
    episode_return: float | None
    """the undiscounted return the environment would give for the run, all jobs counted (None: no
    environment configuration was given)"""
    n_illegal: int
    """actions the policy chose that were not allowed (a learned agent's count; 0 for a rule)"""

    def figures(self, figures: Sequence[ClassFigure] = HEADLINE) -> dict[str, float]:
        """The run's ``figures`` (by default the headline four), by key (``te_p95``, ...)."""
        return {f.key: f.of(self.result) for f in figures}


def evaluate_policy(
    policy: Policy,
    cluster: ClusterSpec,
    workloads: Sequence[Workload],
    seeds: Sequence[int] | None = None,
    sim: SimConfig | None = None,
    *,
    env: EnvConfig | None = None,
    estimate_noise: float | None = None,
) -> list[RunEvaluation]:
    """Run ``policy`` on each of ``workloads`` on ``cluster``, workload ``i`` with seed ``seeds[i]`` (default
    ``i``), under the simulator's rules ``sim`` (its queue replaced by the policy's own); the policy is reset
    before every run. ``env``: also give each run's return under that environment configuration.
    ``estimate_noise``: the workloads' own duration-estimate noise (a ``mix`` level's, which the environment
    uses on that level), given for these runs to a policy that builds noisy estimates (one with an
    ``estimate_noise`` attribute: a learned agent) and restored afterwards; None: the policy's own."""
    seeds = list(range(len(workloads))) if seeds is None else list(seeds)
    if len(seeds) != len(workloads):
        raise ConfigError(f"Expected one seed per workload ({len(workloads)}), got {len(seeds)}")
    own = getattr(policy, "estimate_noise", None)
    if estimate_noise is not None and own is not None:
        policy.estimate_noise = estimate_noise  # type: ignore[attr-defined]
    out = []
    try:
        for workload, seed in zip(workloads, seeds, strict=True):
            full = run_policy(policy, cluster, workload, sim, rng=run_rng(seed))
            out.append(
                RunEvaluation(
                    seed=seed,
                    result=measured(full, workload),
                    episode_return=None if env is None else episode_return(full, env),
                    n_illegal=int(getattr(policy, "n_illegal", 0)),  # counted per run, reset with the policy
                )
            )
    finally:
        if estimate_noise is not None and own is not None:  # the worker keeps the policy for other workloads
            policy.estimate_noise = own  # type: ignore[attr-defined]
    return out


def per_run(evaluations: Sequence[RunEvaluation], figures: Sequence[ClassFigure] = HEADLINE) -> dict[str, list[float]]:
    """The runs' values side by side, as training keeps them: ``return`` (NaN where none was computed),
    ``illegal`` and each figure's key -> one value per run, in the runs' order."""
    out: dict[str, list[float]] = {
        "return": [float("nan") if e.episode_return is None else e.episode_return for e in evaluations],
        "illegal": [e.n_illegal for e in evaluations],
    }
    for f in figures:
        out[f.key] = [f.of(e.result) for e in evaluations]
    return out


__all__ = ["RunEvaluation", "evaluate_policy", "per_run"]

"""Baseline policies: FIFO, priority, FitGpp (the paper's heuristic, reconstructed), Kubernetes-like, random, and
lookahead (plays out each option on a copy of the simulation).

Resolve them by name through :func:`schedgym.registry.make_policy` (``"fifo"``, ``"fitgpp"``, ...): :func:`register`
registers them, called by the registry on first use (the ``schedgym.policies`` entry point in pyproject.toml).
"""

from baselines.base import NodeByNodePolicy, Policy
from baselines.fifo import Fifo, Priority
from baselines.fitgpp import FitGpp
from baselines.k8s import K8s
from baselines.lookahead import Lookahead
from baselines.random_policy import RandomPreemption


def register() -> None:
    """Register the rules with :mod:`schedgym.registry` (the ``schedgym.policies`` entry point ``baselines``)."""
    from schedgym.registry import register_policy

    register_policy("fifo", "baselines.fifo:Fifo", description="FIFO queue, never preempts (the paper's reference)")
    register_policy("priority", "baselines.fifo:Priority", description="TE before BE, never preempts")
    register_policy("fitgpp", "baselines.fitgpp:FitGpp", description="FitGpp (reconstructed): fitness + grace period")
    register_policy(
        "fitgpp-fitness", "baselines.fitgpp:FitGpp", kwargs={"lam": 0.0}, description="FitGpp ablation: fitness only"
    )
    register_policy(
        "fitgpp-gracefirst",
        "baselines.fitgpp:FitGpp",
        kwargs={"order": "grace", "rank": "grace"},
        description="FitGpp ablation: grace period first, fitness as tie-break",
    )
    register_policy("k8s", "baselines.k8s:K8s", description="Kubernetes default: fewest victims, newest first")
    register_policy(
        "random", "baselines.random_policy:RandomPreemption", description="random feasible node and victims"
    )
    # The reference plays each option out to the end of the workload: on the validation seeds of `paper` a 6 h
    # horizon gave the least TE and BE p95 but a BE p99 30 worse than fitgpp's (a preempted long job's delay falls
    # beyond 6 h), while the whole horizon was better than fitgpp on BE p95 and p99 (docs/lookahead.md).
    register_policy(
        "lookahead",
        "baselines.lookahead:Lookahead",
        kwargs={"horizon": None},
        description="tries waiting and the rules' plans on clones of the simulation played to the end; "
        "least slowdown wins",
    )
    # Charging 10 (slowdown units) per preemption: on the paper validation seeds this was the variant that was
    # no worse than k8s on the BE median while keeping most of the gain on BE p95 and p99 (docs/lookahead.md).
    register_policy(
        "lookahead-pc10",
        "baselines.lookahead:Lookahead",
        kwargs={"horizon": None, "preemption_cost": 10.0},
        description="lookahead charging 10 per preemption: fewer, better-chosen preemptions",
    )
    # Never waiting when it can serve the request (wait=False), and charging 10 per preemption: on the paper
    # validation seeds it dominated both fitgpp and k8s, and an agent taught by it does not have to guess when
    # to wait, which depends on a future its observation does not show (docs/lookahead.md).
    register_policy(
        "lookahead-nowait-pc10",
        "baselines.lookahead:Lookahead",
        kwargs={"horizon": None, "preemption_cost": 10.0, "wait": False},
        description="lookahead-pc10 that always serves a request it can: chooses only how, never whether",
    )
    register_policy(
        "lookahead-6h",
        "baselines.lookahead:Lookahead",
        kwargs={"horizon": 6 * 3600.0},
        description="lookahead with a 6 h horizon: about 8x cheaper, and blind to delays that end later",
    )


__all__ = [
    "Fifo",
    "FitGpp",
    "K8s",
    "Lookahead",
    "NodeByNodePolicy",
    "Policy",
    "Priority",
    "RandomPreemption",
    "register",
]

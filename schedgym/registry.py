"""Name -> policy registry, so that the CLI, the comparison harness and (later) the environment resolve
``fifo``, ``fitgpp`` or ``ppo:path/to/model.zip`` alike.

A spec string is ``NAME`` or ``NAME:ARG``; ``ARG`` is handed to the factory as its ``arg`` keyword (used by
learned agents for a model path). Entry points are strings (``"module:attr"``), imported on first use,
as in ``gymnasium.register``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedgym.errors import UnknownNameError


@dataclass(frozen=True)
class PolicyEntry:
    """One registered policy: where to find it, default keyword arguments, a one-line description."""

    name: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    takes_arg: bool = False  # True if NAME:ARG is meaningful


_REGISTRY: dict[str, PolicyEntry] = {}


def register_policy(
    name: str,
    entry_point: str | Callable[..., Any],
    *,
    kwargs: dict[str, Any] | None = None,
    description: str = "",
    takes_arg: bool = False,
) -> None:
    """Register a policy factory under ``name`` (re-registering the same name replaces it)."""
    if not name or ":" in name:
        raise ValueError(f"Policy names must be non-empty and contain no ':', got {name!r}")
    _REGISTRY[name] = PolicyEntry(name, entry_point, dict(kwargs or {}), description, takes_arg)


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def policy_entry(name: str) -> PolicyEntry:
    base = name.split(":", 1)[0]
    try:
        return _REGISTRY[base]
    except KeyError:
        raise UnknownNameError(f"Unknown policy {base!r}; registered policies are {policy_names()}") from None


def _load(entry_point: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(entry_point):
        return entry_point
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


def make_policy(spec: str, **overrides: Any) -> Any:
    """Build the policy named by ``spec`` (``NAME`` or ``NAME:ARG``) with its registered kwargs."""
    entry = policy_entry(spec)
    base, sep, arg = spec.partition(":")
    kwargs = {**entry.kwargs, **overrides}
    if sep:
        if not entry.takes_arg:
            raise UnknownNameError(f"Policy {base!r} takes no ':argument', got {spec!r}")
        kwargs["arg"] = arg
    return _load(entry.entry_point)(**kwargs)


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
register_policy("random", "baselines.random_policy:RandomPreemption", description="random feasible node and victims")
# Learned agents: ``ppo`` alone is the bundled agent; ``NAME:PATH`` loads a model saved by ``schedgym train``
# (its algorithm is read from the .json beside it, so the three names are interchangeable with a path).
for _name in ("ppo", "maskable_ppo", "dqn"):
    register_policy(
        _name,
        "agents.learned:saved_agent",
        kwargs={"name": _name},
        description="learned agent (stable-baselines3); NAME:PATH for a saved model",
        takes_arg=True,
    )

"""Name -> policy registry, so that the CLI, the comparison harness and training resolve ``fifo``,
``fitgpp``, ``ppo`` or ``mine:path/to/model.zip`` alike. Every name gives a
:class:`~schedgym.sim.policy.Policy`, rule or learned agent.

A spec string is ``NAME`` (a registered policy) or ``NAME:PATH``: the agent saved at ``PATH`` by
``schedgym train``, shown as ``NAME`` (any name that is not a registered rule; its algorithm is read from
the ``.json`` beside the model). Entry points are strings (``"module:attr"``), imported on first use, as in
``gymnasium.register``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedgym.errors import UnknownNameError
from schedgym.sim.policy import Policy


@dataclass(frozen=True)
class PolicyEntry:
    """One registered policy: where to find it, default keyword arguments, a one-line description."""

    name: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    learned: bool = False  # a learned agent (its name may also label a saved one: NAME:PATH)


_REGISTRY: dict[str, PolicyEntry] = {}


def register_policy(
    name: str,
    entry_point: str | Callable[..., Any],
    *,
    kwargs: dict[str, Any] | None = None,
    description: str = "",
    learned: bool = False,
) -> None:
    """Register a policy factory under ``name`` (re-registering the same name replaces it)."""
    if not name or ":" in name:
        raise ValueError(f"Policy names must be non-empty and contain no ':', got {name!r}")
    _REGISTRY[name] = PolicyEntry(name, entry_point, dict(kwargs or {}), description, learned)


def policy_names() -> list[str]:
    """Registered names (each works alone); ``NAME:PATH`` works besides, for any name that is not a rule."""
    return sorted(_REGISTRY)


def policy_entry(name: str) -> PolicyEntry:
    """The registered entry of ``name`` (``NAME`` of ``NAME:PATH`` too)."""
    base = name.split(":", 1)[0]
    try:
        return _REGISTRY[base]
    except KeyError:
        raise UnknownNameError(
            f"Unknown policy {base!r}; registered policies are {policy_names()}, or NAME:PATH for a saved agent"
        ) from None


def check_spec(spec: str) -> str:
    """Check ``spec`` without building anything (fails fast, before minutes of simulation); return its label."""
    base, sep, path = spec.partition(":")
    if not sep:
        policy_entry(base)
        return base
    if not base or not path:
        raise UnknownNameError(f"Expected NAME:PATH with a name and a model path, got {spec!r}")
    entry = _REGISTRY.get(base)
    if entry is not None and not entry.learned:
        raise UnknownNameError(f"{base!r} is a rule; a saved agent needs another name, e.g. mine:{path}")
    return base


def _load(entry_point: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(entry_point):
        return entry_point
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


def make_policy(spec: str, **overrides: Any) -> Policy:
    """Build the policy named by ``spec``: ``NAME`` with its registered kwargs, or ``NAME:PATH`` (a saved agent)."""
    label = check_spec(spec)
    _, sep, path = spec.partition(":")
    if sep:
        load_agent = _load("agents.learned:load_agent")
        return load_agent(path, name=label)
    entry = _REGISTRY[label]
    return _load(entry.entry_point)(**{**entry.kwargs, **overrides})


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
# The reference plays each option out to the end of the workload: on the validation seeds of `paper` a 6 h
# horizon gave the least TE and BE p95 but a BE p99 30 worse than fitgpp's (a preempted long job's delay falls
# beyond 6 h), while the whole horizon was better than fitgpp on BE p95 and p99 (docs/lookahead.md).
register_policy(
    "lookahead",
    "baselines.lookahead:Lookahead",
    kwargs={"horizon": None},
    description="tries waiting and the rules' plans on clones of the simulation played to the end; least slowdown wins",
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


def _register_bundled() -> None:
    """The bundled learned agents, one per entry of agents/bundled/manifest.json (:mod:`agents.manifest`: their
    names and descriptions; their files are checked against their SHA-256 sums when an agent is made)."""
    # Imported here, once the functions above exist: importing the agents package imports this module.
    from agents.manifest import read_manifest

    for agent in read_manifest().values():
        register_policy(
            agent.name,
            "agents.learned:bundled_agent",
            kwargs={"name": agent.name},
            description=agent.description,
            learned=True,
        )


_register_bundled()

"""Name -> policy registry, so that the CLI, the comparison harness and training resolve ``fifo``,
``fitgpp``, ``ppo`` or ``mine:path/to/model.zip`` alike. Every name gives a
:class:`~schedgym.sim.policy.Policy`, rule or learned agent.

A spec string is ``NAME`` (a registered policy) or ``NAME:PATH``: the agent saved at ``PATH`` by
``schedgym train``, shown as ``NAME`` (any name that is not a registered rule; its algorithm is read from
the ``.json`` beside the model). Entry points are strings (``"module:attr"``), imported on first use, as in
``gymnasium.register``.

The registry names no policy itself: the packages above schedgym register theirs (``baselines`` its rules,
``agents`` the bundled agents and the loader of ``NAME:PATH``) through the ``schedgym.policies`` entry-point
group of their distribution's metadata (``pyproject.toml``), each entry a function called with no argument
on the registry's first use, as pytest loads its plugins. :func:`register_policy` and
:func:`register_agent_loader` are the explicit calls those functions make, and anyone may make them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Callable, Sequence
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
    files: tuple[str, ...] = ()  # files whose contents make the policy (a bundled agent's): a kept grid's
    # identity covers their sha256, so that a run folder is not resumed with other weights


_REGISTRY: dict[str, PolicyEntry] = {}
_AGENT_LOADER: list[Callable[..., Policy]] = []  # the loader of NAME:PATH, when one is registered

ENTRY_POINT_GROUP = "schedgym.policies"
"""the entry-point group whose functions register policies (``baselines:register``, ``agents:register``)"""

_plugins_loaded = False


def _load_plugins() -> None:
    """Call every registration function of the :data:`ENTRY_POINT_GROUP` group once, before the registry's
    first use: a policy registered explicitly afterwards replaces a plugin's of the same name."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True  # first: a registration function registers through this module
    seen = set()
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        if (ep.name, ep.value) not in seen:  # a distribution found twice on the path lists its entries twice
            seen.add((ep.name, ep.value))
            ep.load()()


def register_policy(
    name: str,
    entry_point: str | Callable[..., Any],
    *,
    kwargs: dict[str, Any] | None = None,
    description: str = "",
    learned: bool = False,
    files: Sequence[str | os.PathLike[str]] = (),
) -> None:
    """Register a policy factory under ``name`` (re-registering the same name replaces it). ``files``: the
    files whose contents make the policy, e.g. a bundled agent's weights (:attr:`PolicyEntry.files`)."""
    if not name or ":" in name:
        raise ValueError(f"Policy names must be non-empty and contain no ':', got {name!r}")
    _load_plugins()
    paths = tuple(os.fspath(f) for f in files)
    _REGISTRY[name] = PolicyEntry(name, entry_point, dict(kwargs or {}), description, learned, paths)


def register_agent_loader(loader: Callable[..., Policy]) -> None:
    """Register the loader of ``NAME:PATH``: ``loader(path, name=NAME)`` gives the agent saved at ``path``."""
    _load_plugins()
    _AGENT_LOADER[:] = [loader]


def policy_names() -> list[str]:
    """Registered names (each works alone); ``NAME:PATH`` works besides, for any name that is not a rule."""
    _load_plugins()
    return sorted(_REGISTRY)


def policy_entry(name: str) -> PolicyEntry:
    """The registered entry of ``name`` (``NAME`` of ``NAME:PATH`` too)."""
    base = name.split(":", 1)[0]
    _load_plugins()
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
    _load_plugins()
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
        if not _AGENT_LOADER:
            raise UnknownNameError(f"{spec!r}: no loader of saved agents is registered (the agents package)")
        return _AGENT_LOADER[0](path, name=label)
    entry = _REGISTRY[label]
    return _load(entry.entry_point)(**{**entry.kwargs, **overrides})

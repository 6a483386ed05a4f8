"""The actor of a :class:`~schedgym.rllib.module.MaskedPPOTorchRLModule` as plain arrays (``.npz``), so that
``schedgym compare`` evaluates it in numpy (:func:`agents.inference.load_rllib_network`) without Ray or torch
and without unpickling anything.

The ``.npz`` holds ``format`` (:data:`~schedgym.rllib.NPZ_FORMAT`), ``weight{i}`` ``(out, in)`` and ``bias{i}``
``(out,)`` for each Linear layer of the actor (the actor encoder's, then the policy head's) in order, and
``activations``: the torch.nn class name of the activation after each layer ('' for none).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from schedgym._atomic import atomic_open, os_errors_surface
from schedgym.errors import ConfigError
from schedgym.rllib import NPZ_FORMAT

# torch.nn activations numpy evaluates (agents/inference.py _ACTIVATIONS), with the arguments it assumes
_ACTIVATION_ARGS = {"Tanh": {}, "ReLU": {}, "Sigmoid": {}, "ELU": {"alpha": 1.0}, "LeakyReLU": {"negative_slope": 0.01}}


def _actor_sequentials(module: Any) -> list[tuple[str, Any]]:
    """(state-dict prefix, nn.Sequential) of the actor's networks: PPO's default module keeps a separate
    actor encoder (``vf_share_layers`` False), then the policy head."""
    try:
        return [
            ("encoder.actor_encoder.net.mlp", module.encoder.actor_encoder.net.mlp),
            ("pi.net.mlp", module.pi.net.mlp),
        ]
    except AttributeError:
        raise ConfigError(
            "cannot export the module's actor: expected PPO's default MLP actor encoder and policy head "
            "(model_config with vf_share_layers False and no CNN or LSTM)"
        ) from None


def actor_arrays(module: Any, weights: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The ``.npz`` content of ``module``'s actor; the parameter values come from ``weights`` (a state dict,
    e.g. the learner's ``get_weights``) when given, else from the module itself."""
    import torch

    state = dict(weights) if weights is not None else module.state_dict()
    names: list[str] = []
    activations: list[str] = []
    for prefix, sequential in _actor_sequentials(module):
        for index, layer in enumerate(sequential):
            if isinstance(layer, torch.nn.Linear):
                names.append(f"{prefix}.{index}")
                activations.append("")
                continue
            kind = type(layer).__name__
            expected = _ACTIVATION_ARGS.get(kind)
            if (
                expected is None
                or not names
                or activations[-1]
                or any(getattr(layer, k, v) != v for k, v in expected.items())
            ):
                raise ConfigError(
                    f"cannot export the module's actor: {prefix}.{index} is {layer!r}; expected Linear layers, "
                    f"each followed by at most one of {', '.join(_ACTIVATION_ARGS)} with default arguments"
                )
            activations[-1] = kind
    out: dict[str, np.ndarray] = {"format": np.array(NPZ_FORMAT), "activations": np.array(activations)}
    for i, name in enumerate(names):
        for part in ("weight", "bias"):
            value = state[f"{name}.{part}"]
            if isinstance(value, torch.Tensor):
                value = value.detach().cpu().numpy()
            out[f"{part}{i}"] = np.asarray(value, dtype=np.float32)
    return out


def save_actor(path: str | Path, module: Any, weights: Mapping[str, Any] | None = None) -> None:
    """Write :func:`actor_arrays` to ``path`` (a ``.npz``), atomically."""
    arrays = actor_arrays(module, weights)
    with atomic_open(path, "wb") as fh, os_errors_surface():  # a full disk: one line, not zipfile's error
        np.savez(fh, **arrays)  # type: ignore[arg-type]


__all__ = ["actor_arrays", "save_actor"]

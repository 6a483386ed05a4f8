"""A masked PPO RLModule for RLlib's new API stack (needs Ray RLlib and torch: the ``rllib`` extra).

Built on ``DefaultPPOTorchRLModule``, the base RLlib's own PPO uses (``PPOTorchRLModule``, which RLlib's
action-masking example extends, is a deprecated alias of it in Ray 2.60). The networks are PPO's defaults
(``model_config``: ``fcnet_hiddens``, ``fcnet_activation``, ...) built for the ``observations`` part of the
Dict observation; the mask is applied to their output, never fed to them.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns

from schedgym.rllib import MASKED_LOGIT

OBSERVATIONS, ACTION_MASK = "observations", "action_mask"


class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
    """PPO's default actor-critic on a ``{"observations": Box, "action_mask": Box(0, 1)}`` observation
    (:func:`schedgym.rllib.make_env`). In every forward pass (exploration, inference, training) the logits
    of the actions whose mask is 0 are :data:`~schedgym.rllib.MASKED_LOGIT`, so they are never sampled, never
    the deterministic choice, and carry no probability in PPO's loss. The value function reads the
    observations only.

    The module declares (and checkpoints) the Dict observation space; its networks are built for the Box
    inside it."""

    def __init__(self, *, observation_space: Any = None, action_space: Any = None, **kwargs: Any):
        if not (
            isinstance(observation_space, spaces.Dict) and set(observation_space.spaces) == {OBSERVATIONS, ACTION_MASK}
        ):
            raise ValueError(
                f"Expected a Dict observation space with keys {OBSERVATIONS!r} and {ACTION_MASK!r} "
                f"(schedgym.rllib.make_env), got {observation_space!r}"
            )
        super().__init__(observation_space=observation_space[OBSERVATIONS], action_space=action_space, **kwargs)
        self.observation_space = observation_space

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        inner, mask = _split(batch)
        return _mask_logits(super()._forward(inner, **kwargs), mask)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        inner, mask = _split(batch)
        return _mask_logits(super()._forward_train(inner, **kwargs), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        if embeddings is None:  # given embeddings come from _forward_train, already of the observations
            batch, _ = _split(batch)
        return super().compute_values(batch, embeddings)


def _split(batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """A shallow copy of ``batch`` whose observation is the ``observations`` part, and the mask. The caller's
    batch is left as it is: RLlib passes the same batch to ``compute_values`` and ``forward_train``."""
    obs = batch[Columns.OBS]
    return {**batch, Columns.OBS: obs[OBSERVATIONS]}, obs[ACTION_MASK]


def _mask_logits(out: dict[str, Any], mask: Any) -> dict[str, Any]:
    logits = out[Columns.ACTION_DIST_INPUTS]
    # mask > 0.5 reads the environment's int8 mask and a float copy of it alike.
    out[Columns.ACTION_DIST_INPUTS] = torch.where(mask > 0.5, logits, torch.full_like(logits, MASKED_LOGIT))
    return out


__all__ = ["MaskedPPOTorchRLModule"]

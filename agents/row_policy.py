"""The row scorer: a permutation-aware actor-critic policy for stable-baselines3 (``schedgym train --policy rows``).

The observation is a head (the waiting TE job and the cluster, :data:`~schedgym.decision.features.N_HEAD`
features) followed by ``max_candidates`` candidate rows of :data:`ROW_WIDTH` features, zero-padded, each
starting with its ``valid`` flag; action 0 preempts nothing and action ``i`` preempts row ``i - 1``. An MLP
over the flat vector has to learn the same row-scoring function once per row position, and rarely does:
behaviour cloning of ``fitgpp`` with 64 rows stays far from its labels. Here every row is scored by one
network instead:

- actor: ``h_i = MLP_row([head, row_i])`` for every row, with the same weights; ``logit_i = w . h_i + b``;
  ``logit_0 = MLP_stop([head, pooled(h)])``, where ``pooled(h)`` is the mean and the elementwise maximum of
  ``h_i`` over the valid rows, and their number / ``max_candidates``;
- critic: the same structure with its own weights, ``value = v . MLP_value([head, pooled(g)])`` with
  ``g_i = MLP_row'([head, row_i])``. Actor and critic share nothing (as SB3's default MLP policy), so the
  value loss cannot pull on the scoring function, and imitation (which fits the actor only) leaves the
  critic as it was.

So permuting the valid rows permutes ``logit_1..n`` alike and leaves ``logit_0`` and the value unchanged,
and padding rows (``valid`` = 0) influence nothing: they are left out of the pooling and their logits are
:data:`PADDING_LOGIT`, whatever their features (masks make them illegal as well; for PPO, which reads no
masks, this keeps it from choosing them).

Every MLP has the hidden layers of ``net_arch`` (a list, or ``dict(pi=..., vf=...)``) and ``activation_fn``
after each. The policy reuses SB3's machinery: the module below takes the place of ``mlp_extractor``, its
actor output *is* the logits (``action_net`` is the identity), and ``value_net`` is SB3's. The numpy
evaluation in :mod:`agents.inference` (:class:`~agents.inference.RowScorerNetwork`) mirrors
:meth:`RowScorer.forward_actor` and reads the parameters by the names given here.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from schedgym.decision.features import CANDIDATE_FEATURES, N_HEAD

ROW_WIDTH = len(CANDIDATE_FEATURES)
"""features per candidate row; the first is ``valid``"""
PADDING_LOGIT = -1e8
"""the logit of a padding row: sb3-contrib's masked-out value, so that masking changes nothing more"""


def rows_of(n_inputs: int) -> int:
    """The number of candidate rows of an observation of ``n_inputs`` features (ValueError if none fits)."""
    n_rows, rest = divmod(n_inputs - N_HEAD, ROW_WIDTH)
    if n_inputs <= N_HEAD or rest:
        raise ValueError(f"Expected an observation of {N_HEAD} + {ROW_WIDTH} * max_candidates features, got {n_inputs}")
    return n_rows


def _mlp(n_in: int, hidden: list[int], activation_fn: type[nn.Module]) -> nn.Sequential:
    """Linear layers with an activation after each, like SB3's ``MlpExtractor`` (Linear at even indices)."""
    layers: list[nn.Module] = []
    for n_out in hidden:
        layers += [nn.Linear(n_in, n_out), activation_fn()]
        n_in = n_out
    return nn.Sequential(*layers)


def _pool(h: th.Tensor, valid: th.Tensor, n_rows: int) -> th.Tensor:
    """``[mean, max, count / n_rows]`` of the row embeddings ``h`` (batch, rows, dim) over the valid rows;
    mean and max are 0 when no row is valid. Padding rows take no part."""
    weight = valid.unsqueeze(-1).to(h.dtype)
    count = weight.sum(dim=1)  # (batch, 1)
    mean = (h * weight).sum(dim=1) / count.clamp(min=1.0)
    top = h.masked_fill(~valid.unsqueeze(-1), -th.inf).amax(dim=1)
    top = th.where(count > 0, top, th.zeros_like(top))
    return th.cat([mean, top, count / n_rows], dim=-1)


class RowScorer(nn.Module):
    """Takes the place of SB3's ``mlp_extractor``: ``forward_actor`` gives the logits (batch, 1 + rows),
    ``forward_critic`` the latent the value head reads.

    Parameter names (read by :mod:`agents.inference`): ``actor_rows`` (the row MLP), ``row_out`` (its score),
    ``actor_stop`` and ``stop_out`` (the "preempt nothing" logit), ``critic_rows`` and ``critic``."""

    def __init__(self, n_inputs: int, net_arch: list[int] | dict[str, list[int]], activation_fn: type[nn.Module]):
        super().__init__()
        self.n_rows = rows_of(n_inputs)
        pi, vf = (net_arch["pi"], net_arch["vf"]) if isinstance(net_arch, dict) else (net_arch, net_arch)
        pi, vf = list(pi), list(vf)
        if not pi or not vf:
            raise ValueError(f"Expected at least one hidden layer for the row scorer, got net_arch={net_arch!r}")
        self.actor_rows = _mlp(N_HEAD + ROW_WIDTH, pi, activation_fn)
        self.row_out = nn.Linear(pi[-1], 1)
        self.actor_stop = _mlp(N_HEAD + 2 * pi[-1] + 1, pi, activation_fn)
        self.stop_out = nn.Linear(pi[-1], 1)
        self.critic_rows = _mlp(N_HEAD + ROW_WIDTH, vf, activation_fn)
        self.critic = _mlp(N_HEAD + 2 * vf[-1] + 1, vf, activation_fn)
        self.latent_dim_pi = 1 + self.n_rows  # read by SB3; the actor's "latent" is the logits
        self.latent_dim_vf = vf[-1]

    def _split(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """``(head, [head, row_i] for every row, valid)``."""
        head = features[:, :N_HEAD]
        rows = features[:, N_HEAD:].reshape(len(features), self.n_rows, ROW_WIDTH)
        pairs = th.cat([head.unsqueeze(1).expand(-1, self.n_rows, -1), rows], dim=-1)
        return head, pairs, rows[..., 0] > 0.5

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        head, pairs, valid = self._split(features)
        h = self.actor_rows(pairs)
        row_logits = self.row_out(h).squeeze(-1)
        row_logits = th.where(valid, row_logits, th.full_like(row_logits, PADDING_LOGIT))
        stop = self.stop_out(self.actor_stop(th.cat([head, _pool(h, valid, self.n_rows)], dim=-1)))
        return th.cat([stop, row_logits], dim=-1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        head, pairs, valid = self._split(features)
        g = self.critic_rows(pairs)
        return self.critic(th.cat([head, _pool(g, valid, self.n_rows)], dim=-1))

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


class _RowScorerMixin:
    """What both policies change in SB3's actor-critic: the extractor, and the heads it makes unnecessary."""

    mlp_extractor: Any  # a RowScorer where SB3 declares its MlpExtractor
    action_net: Any

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = RowScorer(self.features_dim, self.net_arch, self.activation_fn)  # type: ignore[attr-defined]

    def _build(self, lr_schedule: Any) -> None:
        # As SB3's _build, for a discrete action per row and "preempt nothing" only.
        space = self.action_space  # type: ignore[attr-defined]
        self._build_mlp_extractor()
        if not isinstance(space, spaces.Discrete) or int(space.n) != self.mlp_extractor.latent_dim_pi:
            raise ValueError(f"Expected Discrete({self.mlp_extractor.latent_dim_pi}) actions, got {space}")
        self.action_net = nn.Identity()  # the extractor's actor output are the logits already
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:  # type: ignore[attr-defined]
            # SB3's gains: sqrt(2) for hidden layers, 0.01 for the logits (a near-uniform start), 1 for the value.
            for module, gain in (
                (self.mlp_extractor, np.sqrt(2)),
                (self.mlp_extractor.row_out, 0.01),
                (self.mlp_extractor.stop_out, 0.01),
                (self.value_net, 1.0),
            ):
                module.apply(partial(self.init_weights, gain=gain))  # type: ignore[attr-defined]
        self.optimizer = self.optimizer_class(  # type: ignore[attr-defined]
            self.parameters(),  # type: ignore[attr-defined]
            lr=lr_schedule(1),
            **self.optimizer_kwargs,  # type: ignore[attr-defined]
        )


class MaskableRowScorerPolicy(_RowScorerMixin, MaskableActorCriticPolicy):
    """The row scorer for sb3-contrib's MaskablePPO (``MaskablePPO(MaskableRowScorerPolicy, env)``)."""


class RowScorerPolicy(_RowScorerMixin, ActorCriticPolicy):
    """The row scorer for stable-baselines3's PPO (no masks: padding rows still get :data:`PADDING_LOGIT`)."""


POLICIES: dict[str, type] = {"maskable_ppo": MaskableRowScorerPolicy, "ppo": RowScorerPolicy}
"""the row-scorer policy class of each algorithm that can use it"""

__all__ = [
    "PADDING_LOGIT",
    "POLICIES",
    "ROW_WIDTH",
    "MaskableRowScorerPolicy",
    "RowScorer",
    "RowScorerPolicy",
    "rows_of",
]

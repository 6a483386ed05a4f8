"""Imitation of any registered policy before reinforcement learning: ``schedgym train --imitate NAME``.

A rule answers a whole request with a plan; an agent answers one victim at a time (:mod:`schedgym.decision`).
:class:`ImitationRecorder` runs inside :meth:`Simulator.run <schedgym.sim.simulator.Simulator.run>` like a
:class:`~agents.learned.LearnedPolicy`: at each request it asks the *expert* for its plan, then walks the
victim-by-victim protocol, labelling each step with the action that follows the expert's plan
(:func:`expert_action`) and recording the observation and mask the agent would see. So the expert needs
nothing but the :class:`~schedgym.sim.policy.Policy` interface: a rule, ``lookahead`` (which plays out
clones of the simulation the request carries, ``request.sim``) or a saved agent.

Which action is taken at each step: the expert's (behaviour cloning, round 0), or in later rounds (DAgger,
Ross et al. 2011) the learner's with probability ``1 - 0.5 ** round``, so that the learner is also taught in
the states its own mistakes lead to. Labels are always the expert's.

:func:`pretrain` then fits the policy network of a stable-baselines3 model to the labels by maximum
likelihood (the masked distribution for MaskablePPO). The ``imitation`` package was not used: its DAgger
expects an expert that maps observations to actions, and these experts need the simulator's state.

Where the expert's victim is not among the rows (each node shows its candidates in job order, round-robin,
cut after ``max_candidates`` rows: with 16 feasible nodes and 16 rows only each node's first), the label is
a row on the expert's node, or 0 if there is none (:func:`expert_action`; counted in
:attr:`ImitationRecorder.n_unmatched`). A larger ``max_candidates`` shows more of each node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedgym.decision import DecisionEncoder
from schedgym.sim.job import Job
from schedgym.sim.policy import DECLINE, Policy, PreemptionPlan, PreemptionRequest


def expert_action(plan: PreemptionPlan, rows: list[tuple[Job, int]], chosen: list[Job]) -> tuple[int, bool]:
    """The action that follows ``plan`` in a decision with candidate ``rows`` after ``chosen`` victims, and
    whether it is exact: 0 for an empty plan; else the first row holding a victim of the plan not chosen yet,
    preferring one on the plan's nodes (exact); else the first row on one of the plan's nodes (not exact: a
    victim the plan does not name, but room on the node the expert chose, after which the decision narrows to
    that node and shows more of its jobs); else 0 (not exact)."""
    if plan.is_empty:
        return 0, True
    left = set(plan.victims) - {v.idx for v in chosen}
    nodes = set(plan.nodes)
    on_victim = on_node = 0
    for i, (job, node) in enumerate(rows):
        if job.idx in left:
            if node in nodes:
                return i + 1, True
            on_victim = on_victim or i + 1
        elif node in nodes:
            on_node = on_node or i + 1
    if on_victim:
        return on_victim, True
    return on_node, False


@dataclass
class Demonstrations:
    """Recorded steps: observations (float32), action masks (bool) and the expert's actions (int64)."""

    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.actions)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.stack(self.obs), np.stack(self.masks), np.asarray(self.actions, dtype=np.int64)


class ImitationRecorder(Policy):
    """Decides as ``expert`` (or, with probability ``1 - beta`` per step, as ``learner``) through the
    victim-by-victim protocol, recording the expert's label for every step into ``demos``."""

    preempts = True

    def __init__(
        self,
        expert: Policy,
        demos: Demonstrations,
        *,
        max_candidates: int,
        estimate_noise: float,
        learner: Any = None,
        beta: float = 1.0,
    ):
        self.expert = expert
        self.demos = demos
        self.max_candidates = max_candidates
        self.estimate_noise = estimate_noise
        self.learner = learner  # anything with act(observation, mask) -> int
        self.beta = beta
        self.queue = expert.queue  # the expert's queue discipline: its plans assume it
        self.name = f"imitate:{expert.name}"
        self.n_unmatched = 0
        self._encoder: DecisionEncoder | None = None

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        expert_rng, self._encoder_rng, self._mix_rng = self.rng.spawn(3)
        self.expert.reset(expert_rng)
        self._encoder = None

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        if self._encoder is None:
            self._encoder = DecisionEncoder.for_run(
                request, max_candidates=self.max_candidates, estimate_noise=self.estimate_noise, rng=self._encoder_rng
            )
        plan = self.expert.decide(request)
        decision = self._encoder.begin(request)
        if not decision.offers_choice:
            return DECLINE  # the agent is not asked either
        while True:
            obs, mask = decision.observe(), decision.mask()
            label, exact = expert_action(plan, decision.rows, decision.chosen)
            if not exact:
                self.n_unmatched += 1
            self.demos.obs.append(obs)
            self.demos.masks.append(mask)
            self.demos.actions.append(label)
            action = label
            if self.learner is not None and self._mix_rng.random() >= self.beta:
                action = int(self.learner.act(obs, mask))
                if not (0 <= action < len(mask) and mask[action]):
                    action = 0
            result = decision.choose(action)
            if result is not None:
                return result


def pretrain(
    model: Any,
    demos: Demonstrations,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    maskable: bool,
    seed: int,
) -> dict[str, float]:
    """Fit ``model.policy`` (stable-baselines3, an actor-critic) to the demonstrations by maximum likelihood;
    return the final loss and the share of steps where the greedy action equals the label."""
    import torch

    obs, masks, actions = demos.arrays()
    policy = model.policy
    policy.set_training_mode(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    gen = np.random.default_rng(seed)
    obs_t = torch.as_tensor(obs)
    masks_t = torch.as_tensor(masks)
    act_t = torch.as_tensor(actions)
    n = len(actions)
    loss_value = float("nan")
    for _ in range(epochs):
        order = torch.as_tensor(gen.permutation(n))
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            kwargs = {"action_masks": masks_t[idx]} if maskable else {}
            _, log_prob, _ = policy.evaluate_actions(obs_t[idx], act_t[idx], **kwargs)
            loss = -log_prob.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_value = float(loss.detach())
    policy.set_training_mode(False)
    with torch.no_grad():
        dist = policy.get_distribution(obs_t, **({"action_masks": masks_t} if maskable else {}))
        greedy = dist.get_actions(deterministic=True).numpy()
    return {"loss": loss_value, "agreement": float((greedy == actions).mean()), "decisions": float(n)}


__all__ = ["Demonstrations", "ImitationRecorder", "expert_action", "pretrain"]

"""A lean masked PPO on the plan mode, from random weights: ``python -m agents.lean_ppo --out DIR``
(docs/lean_ppo.md).

CleanRL-style, one file read top to bottom, its configuration one frozen dataclass (:class:`LeanPPOConfig`).
No teacher and no imitation: the network starts from random weights (or, with ``init="fitgpp"``, at fitgpp's
choice) and learns from the environment's reward only (``schedgym/PreemptionPlan-v1``: minus the slowdown
every job accrues, so an episode's return is minus the total slowdown; the options ``te_weight``,
``preemption_cost`` and the tail term reshape the training reward, never validation's objective).
``wait=False`` keeps the policy from waiting while a plan is offered, in training and in the written agent.

- **The policy** scores every option row of a request with one small shared network and takes a softmax over
  the legal rows (``info["action_mask"]``): ``score_i = w . z_i + v . tanh(W [head, context, z_i] + b)``,
  with ``z_i`` the standardised row and ``context`` the mean of the legal standardised rows. It is
  permutation-equivariant over the options and is exactly :class:`agents.evolve.PlanScoreNetwork` with
  ``hidden`` units, so the trained agent is exported to numpy and loaded by ``mine:DIR/agent.npz``
  (:func:`agents.learned.load_agent`, algorithm ``lean_ppo``) and acts greedily there. The rows are
  standardised by statistics of the rows a uniformly random legal policy meets (no rule is consulted).
- **The input-driven baseline** (Mao et al., ICLR 2019): each update plays ``rollouts_per_seed`` episodes on
  each of ``seeds_per_update`` fresh training workloads. The baseline of a decision at simulated time ``t``
  is the mean, over the *other* rollouts of the same workload, of their return-to-go at ``t``, interpolated
  linearly between their decision times (:func:`input_driven_baseline`). There is no value network: the
  baseline plays the value's part in GAE (:func:`gae`; with ``gamma = gae_lambda = 1`` the advantage is the
  return-to-go minus the baseline).
- **Throughput**: episodes are played on a :class:`~schedgym.envs.vector_env.PreemptionVectorEnv` of
  ``num_envs`` sub-environments (with ``workers`` > 1, each worker process on its own), the actions of all of them
  sampled from one batched numpy scoring of the current weights; torch (one thread) runs only the PPO update.

Model selection: every ``validate_every`` updates the greedy policy is played on validation workloads (seeds
from 100,000), and the weights of the lowest mean objective (mean slowdown per job, TE and BE weighted 1) are
written, or with ``select="dominance"`` those of the fewest figures above the rules' (:func:`selection_key`).
Training workloads are seeds from 1,000,000; the test seeds 0-99,999 are never played. The output folder gets
``agent.npz``, ``agent.json`` and ``training.json`` as one set. Everything is a function of the
configuration (torch's initial weights and the sampling generator are seeded by ``seed``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents.evolve import (
    ENV_ID,
    FIGURES,
    PLAN_WIDTH,
    QUEUE_WIDTH,
    ROW_NAMES,
    TRAIN_SEED0,
    VALIDATION_SEED0,
    EvolveConfig,
    PlanScoreNetwork,
    add_config_options,
    check_counts,
    check_episode_workload,
    check_plot,
    check_reals,
    config_command,
    legal_rows,
    play,
    pool_context,
    rule_figures,
    write_agent,
)
from agents.evolve import plot_training as _plot_curve
from schedgym._optional import raise_if_interrupted
from schedgym.decision.features import N_HEAD_V2
from schedgym.errors import ConfigError, SchedGymError

ALGO = "lean_ppo"
"""the algorithm name in ``agent.json`` (:data:`agents.learned.LEAN_PPO`)"""
INITS = ("random", "fitgpp")
"""the starting weights :class:`LeanPPOConfig` offers"""
SELECTIONS = ("objective", "dominance")
"""the checkpoint selections :class:`LeanPPOConfig` offers"""
STATS_SEED0 = 2_000_000
"""workloads whose rows a random policy meets give the row statistics: seeds 2,000,000, ... (neither the
training, the validation nor the test range)"""


# ---------------------------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class LeanPPOConfig:
    """The training run (``python -m agents.lean_ppo --help`` gives each as an option)."""

    workload: str = "paper"
    """synthetic workload preset of the episodes, or ``mix`` (each workload seed a level of that distribution,
    on its own cluster; ``n_jobs`` and ``estimate_noise`` are then the level's)"""
    n_jobs: int = 5000
    """jobs per episode (compare's 5,000 for ``paper``)"""
    estimate_noise: float = 0.3
    """sigma of the lognormal duration-estimate error, as the environment's"""
    te_weight: float = 1.0
    """weight of TE jobs' accrued slowdown in the training reward (the environment's ``te_weight``); validation
    and the written agent's objective weigh every job 1"""
    preemption_cost: float = 0.0
    """slowdown charged per preemption in the training reward (the environment's ``preemption_cost``; as
    ``lookahead-nowait-pc10`` charges 10 in its score); validation and the written agent's objective do not"""
    tail_weight: float = 0.0
    """weight of the tail term in the training reward (0: none): each job is charged the part of its slowdown
    above its class's threshold (``te_tail``, ``be_tail``), accrued in time as the slowdown is
    (:func:`tail_rewards`); validation and the written agent's objective are unchanged"""
    te_tail: float = 1.05
    """slowdown above which a TE job's slowdown is charged by the tail term (fitgpp's validation TE p95: 1.047)"""
    be_tail: float = 50.0
    """slowdown above which a BE job's slowdown is charged by the tail term (fitgpp's validation BE p99: 53.4)"""
    hidden: int = 16
    """tanh units of the shared row network"""
    updates: int = 120
    """PPO updates (each on freshly played episodes)"""
    seeds_per_update: int = 16
    """training workloads per update, fresh each update"""
    rollouts_per_seed: int = 4
    """episodes played on each workload of an update (the input-driven baseline needs at least 2)"""
    num_envs: int = 8
    """sub-environments of the vector environment the episodes are played on"""
    n_threads: int = 1
    """threads the vector environment may step its sub-environments on (its ``n_threads``)"""
    workers: int = 1
    """processes playing an update's episodes (a share of its workloads each, on their own vector
    environments; 1: none); the result does not depend on it"""
    learning_rate: float = 0.003
    """Adam's step size"""
    epochs: int = 4
    """passes over an update's decisions"""
    minibatch_size: int = 1024
    """decisions per gradient step"""
    clip: float = 0.2
    """PPO's clipping of the probability ratio"""
    entropy_coef: float = 0.01
    """weight of the policy's entropy (over the legal rows) in the loss"""
    gamma: float = 1.0
    """discount per decision (1: the return is minus the total slowdown, as evaluated)"""
    gae_lambda: float = 1.0
    """GAE's lambda over the input-driven baseline (1: return-to-go minus baseline)"""
    max_grad_norm: float = 0.5
    """gradient norm clip"""
    stats_seeds: int = 4
    """workloads a uniformly random legal policy plays to standardise the rows"""
    validation_seeds: int = 40
    """validation workloads (seeds 100,000, ...)"""
    validate_every: int = 5
    """updates between validations (and after the last); the written weights are the validated best"""
    seed: int = 0
    """seeds torch's initial weights and the action-sampling generator"""
    wait: bool = True
    """``--no-wait``: the policy never waits while a plan is offered (row 0 is legal only when it is the only
    legal row), in training and in the written agent, as ``lookahead-nowait-pc10`` and ``dagger-nowait`` do"""
    read_queue: bool = False
    """``--read-queue``: the tanh units also read the observation's queue rows (the oldest waiting TE and BE
    jobs), not only the request, the cluster and the options (``reads_queue`` in ``agent.json``'s network)"""
    init: str = "random"
    """the starting weights: ``random`` (torch's, seeded by ``seed``) or ``fitgpp``: the row of fitgpp's plan
    scores ``init_margin`` above every other and the tanh units' output weights are 0, so the greedy policy at
    update 0 is fitgpp (wait where fitgpp proposes nothing) and the sampled one explores around it (a warm
    start from the rule imitation converges to: docs/log.md; no teacher is consulted during training)"""
    init_margin: float = 4.0
    """``init="fitgpp"``: the score margin of fitgpp's row (with 17 legal rows, 4 gives it probability 0.77)"""
    select: str = "objective"
    """which validated weights are written: ``objective`` (the lowest mean objective) or ``dominance`` (among
    those whose objective is at or below at least one rule's, the fewest of the four figures above either rule's
    validation mean, ties to the lower objective: :func:`selection_key`)"""

    def __post_init__(self) -> None:
        counts = ("n_jobs", "hidden", "updates", "seeds_per_update", "num_envs", "n_threads", "workers", "epochs",
                  "minibatch_size", "stats_seeds", "validation_seeds", "validate_every")  # fmt: skip
        check_counts(self, counts, 1)
        if not isinstance(self.rollouts_per_seed, int) or self.rollouts_per_seed < 2:
            raise ConfigError(f"Expected rollouts_per_seed >= 2 (the baseline is the others'), got "
                              f"{self.rollouts_per_seed!r}")  # fmt: skip
        check_counts(self, ("seed",), 0)
        check_reals(self, ("learning_rate", "clip", "max_grad_norm", "init_margin"), strict=True)
        for name in ("wait", "read_queue"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"Expected {name} True or False, got {getattr(self, name)!r}")
        for name, allowed in (("init", INITS), ("select", SELECTIONS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"Expected {name} one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        check_reals(self, ("entropy_coef", "tail_weight"), strict=False)
        check_episode_workload(self.workload)  # before env_config(), which takes a trace
        for name in ("te_tail", "be_tail"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 1 <= value < float("inf")):
                raise ConfigError(f"Expected {name} >= 1 (a slowdown), got {value!r}")
        self.env_config()  # the environment's own rules for the fields it takes (workload, noise, weight, cost)
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= 1):
                raise ConfigError(f"Expected 0 < {name} <= 1, got {value!r}")

    def env_config(self, **base: Any) -> Any:
        """The :class:`~schedgym.envs.EnvConfig` of the training episodes over ``base`` (the id's own kwargs)."""
        from schedgym.envs.config import EnvConfig

        return EnvConfig(**{**base, "workload": self.workload, "n_jobs": self.n_jobs,
                            "estimate_noise": self.estimate_noise, "te_weight": self.te_weight,
                            "preemption_cost": self.preemption_cost})  # fmt: skip

    def tail(self) -> tuple[float, float, float] | None:
        """``(tail_weight, te_tail, be_tail)`` for :func:`play_episodes`, or None without a tail term."""
        return (self.tail_weight, self.te_tail, self.be_tail) if self.tail_weight > 0 else None

    def training(self, update: int) -> list[int]:
        at = TRAIN_SEED0 + update * self.seeds_per_update
        return list(range(at, at + self.seeds_per_update))

    def validation(self) -> list[int]:
        return list(range(VALIDATION_SEED0, VALIDATION_SEED0 + self.validation_seeds))

    def evolve_config(self) -> EvolveConfig:
        """The episode settings in the form :func:`agents.evolve.play` reads (greedy validation episodes)."""
        return EvolveConfig(workload=self.workload, n_jobs=self.n_jobs, estimate_noise=self.estimate_noise, workers=1)

    def command(self) -> str:
        return config_command(self, "agents.lean_ppo")


# ---------------------------------------------------------------------------------------------- advantages
def returns_to_go(rewards: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``G_k = r_k + gamma G_{k+1}``, ``G`` after the last decision 0."""
    out = np.empty(len(rewards), dtype=np.float64)
    acc = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        acc = float(rewards[k]) + gamma * acc
        out[k] = acc
    return out


def input_driven_baseline(times: Sequence[np.ndarray], togo: Sequence[np.ndarray], ends: Sequence[float]
                          ) -> list[np.ndarray]:  # fmt: skip
    """The input-driven baseline of every decision of ``K`` rollouts on one workload (Mao et al., ICLR 2019).

    Rollout ``j`` decided at simulated times ``times[j]`` (non-decreasing) with returns-to-go ``togo[j]`` and
    ended at ``ends[j]``. Its return-to-go as a function of time is the linear interpolation of the points
    ``(times[j][k], togo[j][k])`` and ``(ends[j], 0)``, constant before its first decision. The baseline of
    rollout ``i``'s decision ``k`` is the mean over ``j != i`` of that function at ``times[i][k]``."""
    n = len(times)
    if n < 2:
        raise ValueError(f"Expected at least 2 rollouts of a workload, got {n}")
    curves = []
    for t, g, end in zip(times, togo, ends, strict=True):
        curves.append((np.append(np.asarray(t, np.float64), float(end)), np.append(np.asarray(g, np.float64), 0.0)))
    out = []
    for i in range(n):
        at = np.asarray(times[i], np.float64)
        total = np.zeros(len(at))
        for j in range(n):
            if j != i:
                total += np.interp(at, *curves[j])
        out.append(total / (n - 1))
    return out


def gae(rewards: np.ndarray, values: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates of one whole episode, ``values`` the baseline at each decision and 0
    after the last: ``delta_k = r_k + gamma V_{k+1} - V_k``, ``A_k = delta_k + gamma lam A_{k+1}``."""
    out = np.empty(len(rewards), dtype=np.float64)
    acc = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        nxt = float(values[k + 1]) if k + 1 < len(rewards) else 0.0
        delta = float(rewards[k]) + gamma * nxt - float(values[k])
        acc = delta + gamma * lam * acc
        out[k] = acc
    return out


# ---------------------------------------------------------------------------------------------- the network
def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise_if_interrupted(exc)  # Ctrl-C while torch's extensions initialised: not a missing extra
        raise SchedGymError("agents.lean_ppo trains with torch: pip install 'schedgym[rl]'") from None
    torch.set_num_threads(1)
    return torch


def make_module(hidden: int, head: int = N_HEAD_V2) -> Any:
    """The torch twin of :class:`agents.evolve.PlanScoreNetwork` with ``hidden`` units reading ``head`` values
    before the context (its ``head_width``; random weights from torch's generator)."""
    torch = _torch()
    nn = torch.nn

    class RowScorer(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(PLAN_WIDTH, 1, bias=False)
            self.fixed = nn.Linear(head + PLAN_WIDTH, hidden)  # head and context: the same for every row
            self.row = nn.Linear(PLAN_WIDTH, hidden, bias=False)
            self.out = nn.Linear(hidden, 1, bias=False)

        def forward(self, head: Any, rows: Any, mask: Any) -> Any:
            """Scores (B, P) of standardised rows (B, P, F) with the head (B, H); illegal rows -inf."""
            m = mask.unsqueeze(-1).to(rows.dtype)
            context = (rows * m).sum(1) / m.sum(1).clamp(min=1.0)
            fixed = self.fixed(torch.cat([head, context], dim=1)).unsqueeze(1)
            score = self.linear(rows).squeeze(-1) + self.out(torch.tanh(self.row(rows) + fixed)).squeeze(-1)
            return score.masked_fill(~mask, float("-inf"))

        def flat_params(self) -> np.ndarray:
            """The parameters in :class:`PlanScoreNetwork`'s order: w, W over [head, context, row], b, v."""
            with torch.no_grad():
                w = self.linear.weight.reshape(-1)
                big = torch.cat([self.fixed.weight, self.row.weight], dim=1).reshape(-1)
                parts = [w, big, self.fixed.bias, self.out.weight.reshape(-1)]
                return torch.cat(parts).double().numpy().copy()

    return RowScorer()


def masked_log_probs(scores: Any, actions: Any) -> tuple[Any, Any]:
    """``(log pi(action), entropy)`` per row of ``scores`` (B, P) whose illegal options are -inf: a softmax
    over the legal options only."""
    torch = _torch()
    logp = torch.log_softmax(scores, dim=1)
    chosen = logp.gather(1, actions.unsqueeze(1)).squeeze(1)
    p = logp.exp()
    entropy = -(p * torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp))).sum(1)
    return chosen, entropy


def batch_scores(network: PlanScoreNetwork, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """:meth:`PlanScoreNetwork.scores` of a batch (N, obs) at once (the same numbers, row by row)."""
    mask = legal_rows(mask, network.wait)
    head, rows = split(obs, network.max_plans, network.queue_rows, head=network.head_width)
    rows = (rows - network.row_mean) / network.row_scale
    p, h, at = network.params, network.hidden, network.head_width + PLAN_WIDTH
    score = rows @ p[:PLAN_WIDTH]
    if h:
        n_in = network.head_width + 2 * PLAN_WIDTH
        w = p[PLAN_WIDTH : PLAN_WIDTH + h * n_in].reshape(h, n_in)
        b = p[PLAN_WIDTH + h * n_in : PLAN_WIDTH + h * n_in + h]
        v = p[PLAN_WIDTH + h * n_in + h :]
        m = mask[:, :, None]
        context = (rows * m).sum(1) / np.maximum(m.sum(1), 1)
        fixed = np.concatenate([head, context], axis=1) @ w[:, :at].T + b
        score = score + np.tanh(rows @ w[:, at:].T + fixed[:, None, :]) @ v
    return np.where(mask, score, -np.inf)


def split(obs: np.ndarray, max_plans: int, queue_rows: int, dtype: Any = np.float64, head: int = N_HEAD_V2
          ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(head (N, ``head``: 21, or more with the queue rows), plan rows (N, max_plans, F)) of a batch of
    plan-mode observations, as ``dtype``."""
    obs = np.asarray(obs, dtype=dtype)
    rows = obs[:, N_HEAD_V2 + 2 * queue_rows * QUEUE_WIDTH :].reshape(len(obs), max_plans, PLAN_WIDTH)
    return obs[:, :head], rows


# ---------------------------------------------------------------------------------------------- episodes
def make_vec_env(config: LeanPPOConfig) -> Any:
    """The vector environment of ``num_envs`` plan-mode sub-environments. Next-step autoreset: an ended
    sub-environment is given its next workload by :func:`play_episodes` at once, which drops the pending
    reset (so no workload is drawn in vain while episodes are left to play)."""
    import gymnasium as gym

    import schedgym  # noqa: F401  (registers the environments)
    from schedgym.envs.vector_env import PreemptionVectorEnv

    spec = gym.spec(ENV_ID)
    env_config = config.env_config(**spec.kwargs)
    venv = PreemptionVectorEnv(config.num_envs, env_config, max_episode_steps=spec.max_episode_steps,
                               n_threads=config.n_threads, autoreset_mode="next-step")  # fmt: skip
    venv.reset(seed=0)
    return venv


@dataclass
class Episode:
    """One played episode: per decision the observation, mask, action and simulated time, and the reward that
    followed (arrays, one row per decision); ``end`` the simulated time it ended."""

    seed: int
    obs: np.ndarray
    mask: np.ndarray
    action: np.ndarray
    time: np.ndarray
    reward: np.ndarray
    end: float


def tail_rewards(bounds: np.ndarray, submit: np.ndarray, duration: np.ndarray, completion: np.ndarray,
                 threshold: np.ndarray) -> np.ndarray:  # fmt: skip
    """Minus the tail slowdown the jobs accrue in each interval ``[bounds[k], bounds[k + 1])``.

    A job's slowdown at time ``t`` in the system is ``(t - submit) / duration``; the part above its
    ``threshold`` accrues at ``1 / duration`` per second from ``submit + threshold * duration`` until it
    completes, so a job's total is ``max(0, slowdown - threshold)``, as the reward accrues the slowdown itself.
    Computed as a piecewise linear function of time (its slope changes at each job's start and end of
    accrual), evaluated at ``bounds``: ``O((jobs + intervals) log)``."""
    start = submit + threshold * duration
    charged = completion > start
    inv = 1.0 / duration[charged]
    t = np.concatenate([start[charged], completion[charged]])
    if len(t) == 0:
        return np.zeros(len(bounds) - 1)
    order = np.argsort(t, kind="stable")
    t, change = t[order], np.concatenate([inv, -inv])[order]
    slope = np.cumsum(change)  # the accrual rate after each event
    accrued = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(t))])  # the total at each event
    at = np.maximum(np.searchsorted(t, bounds, side="right") - 1, 0)  # the last event at or before each bound
    total = np.where(bounds >= t[0], accrued[at] + slope[at] * (bounds - t[at]), 0.0)
    return -np.diff(total)


def play_episodes(venv: Any, network: PlanScoreNetwork, seeds: Sequence[int], rngs: Sequence[np.random.Generator],
                  tail: tuple[float, float, float] | None = None) -> tuple[list[Episode], int]:  # fmt: skip
    """Play every workload of ``seeds`` (``reset(seed=s, options={"workload_seed": s})``) to its end on
    ``venv``, episode ``j`` sampling each action from the softmax of ``network``'s scores over the legal rows
    with the generator ``rngs[j]`` (Gumbel-max), so an episode is a function of (weights, seed, generator),
    whichever sub-environment plays it. ``tail``: ``(weight, te_tail, be_tail)`` adds the tail term
    (:func:`tail_rewards`) to the rewards, from the finished episode's jobs. Returns the episodes in the order
    of ``seeds`` and the number of steps taken by sub-environments with nothing left to play (not training
    steps)."""
    n = venv.num_envs
    queue = list(enumerate(seeds))[::-1]
    logs: list[dict[str, list[Any]]] = [{"obs": [], "mask": [], "action": [], "time": [], "reward": []} for _ in seeds]
    ends = [0.0] * len(seeds)
    extra: list[Any] = [0.0] * len(seeds)  # each episode's tail term per step (none: 0)
    current: list[int | None] = [None] * n
    obs = np.zeros((n, *venv.single_observation_space.shape), dtype=np.float32)
    mask = np.zeros((n, network.max_plans), dtype=bool)
    now = np.zeros(n)
    # Each episode's Gumbel noise, drawn 256 decisions at a time: the same numbers as one draw per decision.
    noise = [np.empty((0, network.max_plans))] * len(seeds)
    used = [0] * len(seeds)

    def start(i: int) -> None:
        index, seed = queue.pop()
        o, info = venv.reset_sub_env(i, seed=seed, options={"workload_seed": seed})
        obs[i], mask[i], now[i] = o, info["action_mask"], info["sim_time"]
        current[i] = index

    for i in range(n):
        if queue:
            start(i)
    idle_steps = 0
    while any(c is not None for c in current):
        scores = batch_scores(network, obs, mask)
        actions = np.zeros(n, dtype=np.int64)
        for i, index in enumerate(current):
            if index is None:
                actions[i] = int(np.argmax(mask[i]))  # an idle sub-environment: any legal row
                idle_steps += 1
                continue
            if used[index] == len(noise[index]):
                noise[index], used[index] = rngs[index].gumbel(size=(256, network.max_plans)), 0
            actions[i] = int(np.argmax(scores[i] + noise[index][used[index]]))
            used[index] += 1
            log = logs[index]
            log["obs"].append(obs[i].copy())
            # the rows the policy chose among; copied, since mask[i] (returned as is when waiting is allowed)
            # is overwritten by the next step
            log["mask"].append(legal_rows(mask[i], network.wait).copy())
            log["action"].append(actions[i])
            log["time"].append(now[i])
        o, r, term, trunc, info = venv.step(actions)
        obs[:], mask[:], now[:] = o, info["action_mask"], info["sim_time"]
        for i, index in enumerate(current):
            if index is None:
                continue
            logs[index]["reward"].append(float(r[i]))
            if term[i] or trunc[i]:
                ends[index] = float(now[i])  # next-step autoreset: the ended episode's last info
                if tail is not None:  # before the sub-environment is given its next workload
                    extra[index] = tail[0] * _tail_of(venv.envs[i].sim.result(), logs[index]["time"], ends[index],
                                                      tail[1:])  # fmt: skip
                current[i] = None
                if queue:
                    start(i)
    episodes = [
        Episode(seed, np.array(log["obs"]), np.array(log["mask"]), np.array(log["action"], dtype=np.int64),
                np.array(log["time"], dtype=np.float64),
                np.array(log["reward"], dtype=np.float64) + tail_part, end)
        for seed, log, end, tail_part in zip(seeds, logs, ends, extra, strict=True)
    ]  # fmt: skip
    return episodes, idle_steps


def _tail_of(result: Any, times: list[float], end: float, thresholds: tuple[float, float]) -> np.ndarray:
    """The tail term (unweighted) of each step of a finished episode: its decisions at ``times``, its end. As the
    environment's reward does, the first step takes what accrued since the episode began and the last what
    accrued until the workload drained, so the episode's sum is minus every job's excess."""
    from schedgym.sim.job import JobClass

    threshold = np.where(result.job_class == JobClass.TE, *thresholds)
    bounds = np.append(np.asarray(times, dtype=np.float64), end)
    bounds[0] = min(bounds[0], 0.0)
    return tail_rewards(bounds, result.submit, result.duration, result.completion, threshold)


_WORKER: dict[str, Any] = {}


def _worker_play(job: tuple[LeanPPOConfig, PlanScoreNetwork, list[int], list[Any]]) -> tuple[list[Episode], int]:
    """:func:`play_episodes` in a worker process, on its own vector environment (built once)."""
    config, network, seeds, rng_seeds = job
    if _WORKER.get("config") != config:
        _WORKER.update(config=config, venv=make_vec_env(config))
    rngs = [np.random.default_rng(s) for s in rng_seeds]
    return play_episodes(_WORKER["venv"], network, seeds, rngs, config.tail())


def play_update(config: LeanPPOConfig, venv: Any, pool: Any, network: PlanScoreNetwork, update: int
                ) -> tuple[list[Episode], int]:  # fmt: skip
    """The episodes of update ``update`` (``rollouts_per_seed`` on each of its workloads, consecutive), episode
    ``j`` sampled with the generator seeded ``[seed, update, j]``; on ``pool``'s workers (a share of the
    workloads each) if there is one. The result is the same with or without workers."""
    seeds = [s for s in config.training(update - 1) for _ in range(config.rollouts_per_seed)]
    rng_seeds = [[config.seed, update, j] for j in range(len(seeds))]
    if pool is None:
        return play_episodes(venv, network, seeds, [np.random.default_rng(s) for s in rng_seeds], config.tail())
    k, w = config.rollouts_per_seed, config.workers
    groups = len(seeds) // k
    cuts = [k * (groups * i // w) for i in range(w + 1)]
    jobs = [(config, network, seeds[a:b], rng_seeds[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    episodes: list[Episode] = []
    idle = 0
    for part, n_idle in pool.map(_worker_play, jobs):
        episodes.extend(part)
        idle += n_idle
    return episodes, idle


def advantages(episodes: Sequence[Episode], config: LeanPPOConfig) -> list[np.ndarray]:
    """GAE over the input-driven baseline for every episode; the episodes of one workload are consecutive."""
    out: list[np.ndarray] = []
    k = config.rollouts_per_seed
    for at in range(0, len(episodes), k):
        group = episodes[at : at + k]
        assert len({e.seed for e in group}) == 1
        togo = [returns_to_go(e.reward, config.gamma) for e in group]
        base = input_driven_baseline([e.time for e in group], togo, [e.end for e in group])
        out.extend(gae(e.reward, b, config.gamma, config.gae_lambda) for e, b in zip(group, base, strict=True))
    return out


def row_statistics(config: LeanPPOConfig, venv: Any) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (1 where it is 0) of every row feature over the legal rows met by a
    uniformly random legal policy on ``stats_seeds`` workloads (seeds from 2,000,000): no rule is consulted.
    The random policy may wait whatever ``config.wait`` says: the statistics only scale the inputs, and
    keeping them independent of the option keeps every earlier run's weights what they were."""
    shown = venv.envs[0].config
    zero = PlanScoreNetwork(shown.max_plans, shown.queue_rows, 0, np.zeros(PLAN_WIDTH), np.zeros(PLAN_WIDTH),
                            np.ones(PLAN_WIDTH))  # fmt: skip
    seeds = list(range(STATS_SEED0, STATS_SEED0 + config.stats_seeds))
    rngs = [np.random.default_rng([config.seed, 0, j]) for j in range(len(seeds))]
    episodes, _ = play_episodes(venv, zero, seeds, rngs)  # all scores 0: uniform over the legal rows
    data = np.concatenate([split(e.obs, zero.max_plans, zero.queue_rows)[1][e.mask] for e in episodes])
    mean, std = data.mean(axis=0), data.std(axis=0)
    return mean, np.where(std > 1e-9, std, 1.0)


# ---------------------------------------------------------------------------------------------- training
def ppo_update(
    module: Any,
    optimizer: Any,
    network: PlanScoreNetwork,
    episodes: Sequence[Episode],
    adv: Sequence[np.ndarray],
    config: LeanPPOConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``epochs`` passes of clipped PPO over the decisions of ``episodes`` (advantages normalised over the
    update); the decisions with one legal row carry no gradient and are left out."""
    torch = _torch()
    obs = np.concatenate([e.obs for e in episodes])
    mask = np.concatenate([e.mask for e in episodes])
    actions = np.concatenate([e.action for e in episodes])
    a = np.concatenate(adv)
    keep = mask.sum(1) > 1
    obs, mask, actions, a = obs[keep], mask[keep], actions[keep], a[keep]
    if len(a) < 2:
        return {"decisions": float(len(a))}
    a = (a - a.mean()) / (a.std() + 1e-8)
    head, rows = split(obs, network.max_plans, network.queue_rows, np.float32, network.head_width)  # torch: float32
    rows = (rows - network.row_mean.astype(np.float32)) / network.row_scale.astype(np.float32)
    t_head = torch.as_tensor(head, dtype=torch.float32)
    t_rows = torch.as_tensor(rows, dtype=torch.float32)
    t_mask = torch.as_tensor(mask)
    t_act = torch.as_tensor(actions, dtype=torch.int64)
    t_adv = torch.as_tensor(a, dtype=torch.float32)
    with torch.no_grad():
        old_logp, _ = masked_log_probs(module(t_head, t_rows, t_mask), t_act)
    n = len(a)
    stats: dict[str, list[float]] = {"loss": [], "entropy": [], "clipfrac": [], "approx_kl": []}
    for _ in range(config.epochs):
        order = torch.as_tensor(rng.permutation(n))
        for at in range(0, n, config.minibatch_size):
            idx = order[at : at + config.minibatch_size]
            logp, entropy = masked_log_probs(module(t_head[idx], t_rows[idx], t_mask[idx]), t_act[idx])
            log_ratio = logp - old_logp[idx]
            ratio = log_ratio.exp()
            pg = torch.max(-t_adv[idx] * ratio, -t_adv[idx] * ratio.clamp(1 - config.clip, 1 + config.clip)).mean()
            loss = pg - config.entropy_coef * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), config.max_grad_norm)
            optimizer.step()
            with torch.no_grad():
                stats["loss"].append(float(loss))
                stats["entropy"].append(float(entropy.mean()))
                stats["clipfrac"].append(float(((ratio - 1).abs() > config.clip).float().mean()))
                stats["approx_kl"].append(float(((ratio - 1) - log_ratio).mean()))
    out = {k: float(np.mean(v)) for k, v in stats.items()}
    out["decisions"] = float(n)
    return out


def validate(config: LeanPPOConfig, network: PlanScoreNetwork) -> dict[str, float]:
    """The greedy policy's mean figures over the validation workloads (in the environment)."""
    runs = [play(config.evolve_config(), network, s) for s in config.validation()]
    return {k: float(np.mean([r[k] for r in runs])) for k in ("objective", *FIGURES, "preemptions")}


def train(config: LeanPPOConfig, out: Path | None = None, log: Any = print, plot: Path | None = None) -> dict[str, Any]:
    """Train; write the chosen network, its description and the curve to ``out`` and the training figure to
    ``plot`` (as one set)."""
    torch = _torch()
    torch.manual_seed(config.seed)
    t_start = time.perf_counter()
    venv = make_vec_env(config)
    shown = venv.envs[0].config
    row_mean, row_scale = row_statistics(config, venv)
    base = PlanScoreNetwork(shown.max_plans, shown.queue_rows, config.hidden, np.zeros(0), row_mean, row_scale,
                            config.wait, config.read_queue)  # fmt: skip
    module = initial_module(config, row_scale, base.head_width)
    optimizer = torch.optim.Adam(module.parameters(), lr=config.learning_rate, eps=1e-5)
    rng = np.random.default_rng([config.seed, 0])

    rules = validation_rules(config)
    curve: list[dict[str, Any]] = []
    best: tuple[tuple[float, ...], np.ndarray, int] | None = None
    steps = idle = 0
    seconds = {"rollout": 0.0, "update": 0.0, "validation": 0.0}

    def checkpoint(update: int, params: np.ndarray) -> None:
        nonlocal best
        t0 = time.perf_counter()
        point: dict[str, Any] = {"update": update, "steps": steps, **validate(config, base.with_params(params))}
        seconds["validation"] += time.perf_counter() - t0
        point["objective_minus_fitgpp"] = point["objective"] - rules["fitgpp"]["objective"]
        point["objective_minus_k8s"] = point["objective"] - rules["k8s"]["objective"]
        curve.append(point)
        key = selection_key(point, rules, config.select)
        if best is None or key < best[0]:
            best = (key, params.copy(), update)
        log(f"update {update:4d}  steps {steps:9,d}  validation objective {point['objective']:.4f} "
            f"({point['objective_minus_fitgpp']:+.4f} vs fitgpp, {point['objective_minus_k8s']:+.4f} vs k8s)  "
            f"preemptions {point['preemptions']:.0f}  {time.perf_counter() - t_start:.0f} s")  # fmt: skip

    checkpoint(0, module.flat_params())
    with contextlib.ExitStack() as stack:
        pool = _pool(stack, config.workers)
        for update in range(1, config.updates + 1):
            network = base.with_params(module.flat_params())
            t0 = time.perf_counter()
            episodes, n_idle = play_update(config, venv, pool, network, update)
            t1 = time.perf_counter()
            stats = ppo_update(module, optimizer, network, episodes, advantages(episodes, config), config, rng)
            t2 = time.perf_counter()
            seconds["rollout"] += t1 - t0
            seconds["update"] += t2 - t1
            steps += sum(len(e.action) for e in episodes)
            idle += n_idle
            if update % 5 == 0 or update == 1:
                returns = [float(e.reward.sum()) for e in episodes]
                log(f"update {update:4d}  mean return {np.mean(returns):10.1f}  entropy {stats.get('entropy', 0):.3f}  "
                    f"kl {stats.get('approx_kl', 0):.4f}  clip {stats.get('clipfrac', 0):.3f}  "
                    f"{steps / (seconds['rollout'] + seconds['update']):,.0f} steps/s")  # fmt: skip
            if update % config.validate_every == 0 or update == config.updates:
                checkpoint(update, module.flat_params())
    venv.close()
    assert best is not None
    _, params, chosen = best
    train_seconds = seconds["rollout"] + seconds["update"]
    report = {
        "config": dataclasses.asdict(config),
        "command": config.command(),
        "network": base.spec(),
        "chosen_update": chosen,
        "validation_objective": next(p["objective"] for p in curve if p["update"] == chosen),
        "steps": steps,
        "idle_steps": idle,
        "seconds": {k: round(v, 1) for k, v in seconds.items()} | {"total": round(time.perf_counter() - t_start, 1)},
        "steps_per_second": round(steps / train_seconds, 1) if train_seconds else None,
        "validation_rules": rules,
        "curve": curve,
    }
    if out is not None:
        chosen_network = base.with_params(params)
        also = None if plot is None else lambda: plot_training(report, plot)
        write_agent(out, chosen_network, agent_meta(chosen_network, report), report, also)
    return report


def initial_module(config: LeanPPOConfig, row_scale: np.ndarray, head: int = N_HEAD_V2) -> Any:
    """The network training starts from (:func:`make_module` reading ``head`` values before the context, then
    :func:`warm_start` for ``init="fitgpp"``)."""
    module = make_module(config.hidden, head)
    if config.init == "fitgpp":
        warm_start(module, row_scale, config.init_margin)
    return module


def warm_start(module: Any, row_scale: np.ndarray, margin: float) -> None:
    """Set ``module`` (:func:`make_module`) to fitgpp's choice: the linear score reads only the row's
    ``by_fitgpp`` flag (standardised, so its weight is ``margin`` times the flag's scale) and the tanh units'
    output weights are 0; their input weights keep torch's random values, so they are not stuck at a saddle."""
    torch = _torch()
    at = ROW_NAMES.index("by_fitgpp")
    with torch.no_grad():
        module.linear.weight.zero_()
        module.linear.weight[0, at] = margin * float(row_scale[at])
        module.out.weight.zero_()


def dominated_figures(point: dict[str, Any], rules: dict[str, dict[str, float]]) -> int:
    """How many of the four figures of a validation ``point`` are above the better rule's validation mean (for
    each figure the lower of the rules' means)."""
    return sum(point[k] > min(r[k] for r in rules.values()) for k in FIGURES)


def selection_key(point: dict[str, Any], rules: dict[str, dict[str, float]], select: str) -> tuple[float, ...]:
    """The order of validated checkpoints (lowest first) for ``select`` (:data:`SELECTIONS`). ``dominance``
    ranks the checkpoints whose objective is at or below at least one rule's before all others (a policy that
    gives up the mean for the tails, as random weights that never wait do, is not what it looks for; if no
    checkpoint qualifies, the others are still ranked), then by :func:`dominated_figures`, then by the
    objective."""
    if select == "dominance":
        worse = point["objective"] > max(r["objective"] for r in rules.values())
        return (float(worse), float(dominated_figures(point, rules)), point["objective"])
    return (point["objective"],)


def validation_rules(config: LeanPPOConfig) -> dict[str, dict[str, float]]:
    """fitgpp's and k8s's mean figures on the validation workloads (the curve's horizontal lines)."""
    evolve_config = config.evolve_config()
    seeds = config.validation()
    return {name: {k: float(np.mean([r[k] for r in runs])) for k in ("objective", *FIGURES, "preemptions")}
            for name, runs in (("fitgpp", rule_figures(evolve_config, "fitgpp", seeds)),
                               ("k8s", rule_figures(evolve_config, "k8s", seeds)))}  # fmt: skip


def _pool(stack: contextlib.ExitStack, workers: int) -> Any:
    """A pool of ``workers`` processes that play an update's workloads, or None for one process."""
    if workers <= 1:
        return None
    return stack.enter_context(pool_context().Pool(workers))


# ---------------------------------------------------------------------------------------------- outputs
def agent_meta(network: PlanScoreNetwork, report: dict[str, Any]) -> dict[str, Any]:
    """``agent.json``: what :func:`agents.learned.load_agent` reads (algorithm, environment, network) and how the
    agent was made."""
    config = report["config"]
    return {
        "algo": ALGO,
        "env_id": ENV_ID,
        "env_kwargs": {k: config[k] for k in ("workload", "n_jobs", "estimate_noise")},
        "network": network.spec(),
        "train_config": config,
        "train_command": report["command"],
        "chosen_update": report["chosen_update"],
        "validation": next(p for p in report["curve"] if p["update"] == report["chosen_update"]),
    }


def plot_training(report: dict[str, Any], path: Path) -> None:
    """The training figure (:func:`agents.evolve.plot_training`) against environment steps."""
    workload = report["config"]["workload"]
    title = f"agents.lean_ppo on {workload}"
    _plot_curve(report, path, x="steps", checkpoint="update", label="trained policy", title=title)


def parse_args(argv: Sequence[str] | None) -> tuple[LeanPPOConfig, Path, Path | None]:
    """The configuration from the command line: one ``--option`` per field of :class:`LeanPPOConfig`."""
    parser = argparse.ArgumentParser(prog="python -m agents.lean_ppo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder (agent.npz, agent.json, training.json)")
    parser.add_argument("--plot", type=Path, default=None, help="also write the training figure here (.png, .svg)")
    add_config_options(parser, LeanPPOConfig)
    ns = vars(parser.parse_args(argv))
    out, plot = ns.pop("out"), ns.pop("plot")
    return LeanPPOConfig(**ns), out, plot


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agents.lean_ppo``: exit 0, 2 on a user error, 130 on Ctrl-C."""
    from schedgym._atomic import check_output_dir

    try:
        config, out, plot = parse_args(argv)
        check_output_dir("--out", out)
        if plot is not None:
            check_plot("--plot", plot, out)
        train(config, out, log=lambda line: print(line, flush=True), plot=plot)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SchedGymError as exc:
        print(f"schedgym: error: {exc}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "ALGO",
    "Episode",
    "LeanPPOConfig",
    "advantages",
    "batch_scores",
    "gae",
    "input_driven_baseline",
    "main",
    "make_module",
    "masked_log_probs",
    "play_episodes",
    "ppo_update",
    "returns_to_go",
    "train",
]

if __name__ == "__main__":
    raise SystemExit(main())

"""Imitating ``lookahead-nowait-pc10`` in the plan mode: ``python -m agents.plan_imitation --out DIR``.

Reads top to bottom: record, fit, report.

1. **Record.** :class:`PlanRecorder` is a :class:`~schedgym.decision.plan_mode.PlanPolicy`: inside the
   simulator (:func:`~schedgym.experiments.runner.run_policy`) it sees every request as the environment
   ``schedgym/PreemptionPlan-v1`` shows it (observation version 2, the same estimate noise, drawn from the
   run's generator as :class:`~schedgym.decision.plan_mode.PlanEncoder` draws it) and, at each request that
   offers a choice, stores the observation, the mask and the teacher's row (:meth:`PlanDecision.index_of` of
   the teacher's plan). It acts as the teacher (behaviour cloning) or, with probability ``1 - 0.5 ** round``
   per request, as the student (DAgger, as :mod:`agents.imitation` does for the victim mode); labels are
   always the teacher's. Workloads are the ones ``schedgym compare`` runs for a seed
   (:meth:`WorkloadSource.seeded <schedgym.workloads.source.WorkloadSource.seeded>`, the policy's generator
   :func:`~schedgym.experiments.runner.run_rng`), from disjoint seed ranges: training seeds from 1,000,000
   (the project's train range), validation seeds from 100,000 (its validation range); never the test seeds.
2. **Fit.** The student is a row scorer (:class:`PlanScorer`): one MLP gives every option row ``i`` the logit
   ``f([head, queue rows (flat), context, row_i])``, where ``context`` is the mean, minimum and maximum of each
   row feature over the request's legal rows (so that a row can be scored against the others); illegal rows
   get :data:`MASKED_LOGIT`. Cross-entropy of the masked softmax to the teacher's row (the decisions where the
   teacher leaves fitgpp's plan optionally weighted up: ``deviation_weight``).
3. **Report.** On the validation seeds (the decisions along the teacher's own trajectory): the teacher's
   choices by kind (fitgpp's plan, else k8s's, else a per-node plan only), options per request, the student's
   agreement overall and where the teacher does not take fitgpp's plan, the same for always taking fitgpp's
   row; then the student as a policy (:class:`PlanStudent`, numpy only) against fitgpp, k8s and the teacher:
   mean slowdown per job, per seed and paired differences (mean ± 95% CI).

The output folder gets ``student.npz`` (the weights), ``student.json`` (the network's and the run's
configuration) and ``report.json``, written as one set.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents import strict_json
from schedgym.decision.features import N_HEAD_V2, PLAN_FEATURES, QUEUE_FEATURES
from schedgym.decision.plan_mode import PlanDecision, PlanPolicy
from schedgym.decision.plans import PER_NODE
from schedgym.errors import ConfigError, SchedGymError
from schedgym.sim.policy import Policy
from schedgym.workloads.synthetic import PRESETS

PLAN_WIDTH = len(PLAN_FEATURES)
"""features per option row; the first is ``valid``"""
QUEUE_WIDTH = len(QUEUE_FEATURES)
"""features per queue row"""
MASKED_LOGIT = -1e8
"""the logit of an illegal row"""
KINDS = ("fitgpp", "k8s", PER_NODE)
"""what the teacher's choice is, in this order of precedence (an option both rules propose counts as fitgpp's)"""
TRAIN_SEED0 = 1_000_000
"""training workloads are seeds 1,000,000, 1,000,001, ... (the train range of the project's seeds)"""
VALIDATION_SEED0 = 100_000
"""validation workloads are seeds 100,000, ... (test seeds, 0-99,999, are never used here)"""


# ---------------------------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class PlanImitationConfig:
    """One run: what is recorded, how the student is fitted, what is reported."""

    out: str = "runs/plan-imitation"
    """output folder (student.npz, student.json, report.json)"""
    teacher: str = "lookahead-nowait-pc10"
    """the registered policy to imitate; its plans must be plan-mode options"""
    workload: str = "paper"
    """synthetic workload preset"""
    cluster: str = "paper"
    """cluster preset"""
    n_jobs: int = 2000
    """jobs per workload"""
    n_train: int = 200
    """training workloads: seeds first_train_seed, first_train_seed + 1, ..."""
    first_train_seed: int = TRAIN_SEED0
    """first training seed (>= 1,000,000)"""
    n_val: int = 3
    """validation workloads: seeds first_val_seed, ..."""
    first_val_seed: int = VALIDATION_SEED0
    """first validation seed (100,000..999,999)"""
    max_plans: int = 24
    """option rows per observation, as the environment's"""
    queue_rows: int = 4
    """queue rows per job class, as the environment's"""
    estimate_noise: float = 0.3
    """sigma of the lognormal duration-estimate error, as the environment's"""
    hidden: tuple[int, ...] = (64, 64)
    """hidden layers of the row MLP (ReLU after each)"""
    context: bool = True
    """give each row the mean, min and max of the legal rows' features"""
    epochs: int = 30
    """passes over the demonstrations per round"""
    batch_size: int = 256
    """decisions per gradient step"""
    learning_rate: float = 1e-3
    """Adam's learning rate"""
    weight_decay: float = 1e-3
    """AdamW's weight decay"""
    deviation_weight: float = 1.0
    """weight in the loss of the decisions where the teacher does not take fitgpp's plan (1: plain likelihood)"""
    rounds: int = 1
    """recording rounds: 1 is behaviour cloning; round r > 0 lets the student act with probability 1 - 0.5**r"""
    seed: int = 0
    """seeds torch and the DAgger coin flips"""
    workers: int = 1
    """processes recording training workloads"""
    cache: str = ""
    """folder keeping the teacher's recorded decisions (round 0) per seed range, reused when present ("": none)"""
    evaluate: bool = True
    """also run the student as a policy on the validation seeds against fitgpp, k8s and the teacher"""

    def __post_init__(self) -> None:
        for name in ("n_jobs", "n_train", "n_val", "max_plans", "epochs", "batch_size", "rounds", "workers"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigError(f"Expected {name} to be an integer >= 1, got {value!r}")
        if self.max_plans < 2:
            raise ConfigError(f"Expected max_plans >= 2 (wait and one plan), got {self.max_plans!r}")
        # Its workloads are seeded synthetic draws (WorkloadSource.seeded).
        if not isinstance(self.workload, str) or self.workload not in PRESETS:
            raise ConfigError(
                f"Expected workload to be a synthetic preset ({', '.join(sorted(PRESETS))}), got {self.workload!r}"
            )
        if not _is_int(self.queue_rows) or self.queue_rows < 0:
            raise ConfigError(f"Expected queue_rows to be an integer >= 0, got {self.queue_rows!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ConfigError(f"Expected seed to be an integer >= 0, got {self.seed!r}")
        if not _is_int(self.first_train_seed) or self.first_train_seed < TRAIN_SEED0:
            raise ConfigError(f"Expected first_train_seed >= {TRAIN_SEED0:,}, got {self.first_train_seed!r}")
        if not _is_int(self.first_val_seed) or not (
            VALIDATION_SEED0 <= self.first_val_seed and self.first_val_seed + self.n_val <= TRAIN_SEED0
        ):
            raise ConfigError(
                f"Expected validation seeds within {VALIDATION_SEED0:,}..{TRAIN_SEED0 - 1:,}, got first_val_seed "
                f"{self.first_val_seed!r} and n_val {self.n_val!r}"
            )
        if not (isinstance(self.estimate_noise, (int, float)) and 0 <= self.estimate_noise < 10):
            raise ConfigError(f"Expected 0 <= estimate_noise < 10, got {self.estimate_noise!r}")
        if not self.hidden or not all(_is_int(h) and h >= 1 for h in self.hidden):
            raise ConfigError(f"Expected hidden to be one or more layer widths >= 1, got {self.hidden!r}")
        if not (isinstance(self.deviation_weight, (int, float)) and 0 < self.deviation_weight <= 100):
            raise ConfigError(f"Expected 0 < deviation_weight <= 100, got {self.deviation_weight!r}")
        for name in ("learning_rate", "weight_decay"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 <= value < 1) or (name == "learning_rate" and value == 0):
                raise ConfigError(f"Expected 0 < {name} < 1 (weight_decay may be 0), got {value!r}")

    @property
    def train_seeds(self) -> list[int]:
        return list(range(self.first_train_seed, self.first_train_seed + self.n_train))

    @property
    def val_seeds(self) -> list[int]:
        return list(range(self.first_val_seed, self.first_val_seed + self.n_val))


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------- recording
@dataclass
class PlanDemos:
    """Recorded decisions: observation (float32), mask (bool), the teacher's row, the kind of that row
    (index into :data:`KINDS`), fitgpp's row (-1: none), and the workload seed."""

    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    fitgpp_rows: list[int] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.labels)

    def extend(self, other: PlanDemos) -> None:
        for f in dataclasses.fields(self):
            getattr(self, f.name).extend(getattr(other, f.name))

    def arrays(self) -> dict[str, np.ndarray]:
        if not self.labels:
            raise SchedGymError("no decisions were recorded (no request offered a choice)")
        return {
            "obs": np.stack(self.obs).astype(np.float32),
            "masks": np.stack(self.masks),
            "labels": np.asarray(self.labels, dtype=np.int64),
            "kinds": np.asarray(self.kinds, dtype=np.int64),
            "fitgpp_rows": np.asarray(self.fitgpp_rows, dtype=np.int64),
            "seeds": np.asarray(self.seeds, dtype=np.int64),
        }


def kind_of(sources: frozenset[str]) -> int:
    """The index in :data:`KINDS` of an option proposed by ``sources`` (fitgpp's flag first, then k8s's)."""
    for i, kind in enumerate(KINDS):
        if kind in sources:
            return i
    raise SchedGymError(f"Expected a plan of fitgpp, k8s or a per-node search, got one by {sorted(sources)}")


class PlanRecorder(PlanPolicy):
    """Decides as ``teacher`` (or, with probability ``1 - beta`` per request, as ``learner``) in the plan mode,
    recording the teacher's row of every request that offers a choice into ``demos``.

    The teacher decides on the request itself (it reads ``request.sim`` as it does anywhere), so with
    ``beta = 1`` the run is the teacher's own, decision for decision."""

    def __init__(
        self,
        teacher: Policy,
        demos: PlanDemos,
        *,
        seed: int = 0,
        mix_seed: int = 0,
        learner: Any = None,
        beta: float = 1.0,
        max_plans: int = 24,
        queue_rows: int = 4,
        estimate_noise: float = 0.3,
    ) -> None:
        self.teacher = teacher
        self.demos = demos
        self.seed = seed
        self.mix_seed = mix_seed
        self.learner = learner  # anything with act(observation, mask) -> int
        self.beta = beta
        self.queue = teacher.queue  # the teacher's plans assume its queue discipline
        self.name = f"record:{teacher.name}"
        super().__init__(max_plans=max_plans, queue_rows=queue_rows, estimate_noise=estimate_noise)

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        # Spawning leaves self.rng's stream as it is: the estimate factors the encoder draws from it are the
        # ones a PlanStudent run with the same generator draws. The coin flips are apart from both.
        self.teacher.reset(self.rng.spawn(1)[0])
        self._mix_rng = np.random.default_rng(np.random.SeedSequence([self.mix_seed, self.seed]))

    def choose(self, decision: PlanDecision) -> int:
        plan = self.teacher.decide(decision.request)
        label = decision.index_of(plan)
        if label is None:
            raise SchedGymError(
                f"the teacher's plan {plan} is not among the {len(decision.options)} options shown "
                f"(max_plans {self.max_plans}): raise max_plans"
            )
        obs, mask = decision.observe(), decision.mask()
        d = self.demos
        d.obs.append(obs)
        d.masks.append(mask)
        d.labels.append(label)
        d.kinds.append(kind_of(decision.options[label].sources))
        d.fitgpp_rows.append(next((i for i, o in enumerate(decision.options) if "fitgpp" in o.sources), -1))
        d.seeds.append(self.seed)
        if self.learner is not None and self._mix_rng.random() >= self.beta:
            action = int(self.learner.act(obs, mask))
            return action if 0 <= action < len(mask) and mask[action] else label
        return label


def record(
    config: PlanImitationConfig, seeds: Sequence[int], *, learner: Any = None, beta: float = 1.0, round_: int = 0
) -> PlanDemos:
    """The teacher's decisions on the workloads of ``seeds`` (each run with the generator compare gives its
    seed), acting as described in :class:`PlanRecorder`."""
    from schedgym.experiments.runner import run_policy, run_rng
    from schedgym.registry import make_policy
    from schedgym.sim.cluster import resolve_cluster
    from schedgym.workloads.source import WorkloadSource

    cluster = resolve_cluster(config.cluster)
    source = WorkloadSource(config.workload, n_jobs=config.n_jobs)
    demos = PlanDemos()
    for seed in seeds:
        recorder = PlanRecorder(
            make_policy(config.teacher),
            demos,
            seed=seed,
            mix_seed=config.seed * 1000 + round_,
            learner=learner,
            beta=beta,
            max_plans=config.max_plans,
            queue_rows=config.queue_rows,
            estimate_noise=config.estimate_noise,
        )
        run_policy(recorder, cluster, source.seeded(seed, cluster), rng=run_rng(seed))
    return demos


def _record_job(args: tuple[PlanImitationConfig, list[int], Any, float, int]) -> PlanDemos:
    config, seeds, learner, beta, round_ = args
    return record(config, seeds, learner=learner, beta=beta, round_=round_)


def record_parallel(
    config: PlanImitationConfig, seeds: Sequence[int], *, learner: Any = None, beta: float = 1.0, round_: int = 0
) -> PlanDemos:
    """:func:`record` split over ``config.workers`` processes; the same decisions in the same order."""
    seeds = list(seeds)
    if config.workers == 1 or len(seeds) < 2:
        return record(config, seeds, learner=learner, beta=beta, round_=round_)
    from concurrent.futures import ProcessPoolExecutor

    chunks = [seeds[i :: config.workers] for i in range(config.workers)]
    with ProcessPoolExecutor(config.workers) as pool:
        parts = list(pool.map(_record_job, [(config, c, learner, beta, round_) for c in chunks]))
    by_seed: dict[int, PlanDemos] = {}
    for part in parts:
        for i, s in enumerate(part.seeds):
            one = by_seed.setdefault(s, PlanDemos())
            for f in dataclasses.fields(PlanDemos):
                getattr(one, f.name).append(getattr(part, f.name)[i])
    out = PlanDemos()
    for s in seeds:
        if s in by_seed:
            out.extend(by_seed[s])
    return out


def record_cached(config: PlanImitationConfig, seeds: Sequence[int]) -> PlanDemos:
    """:func:`record_parallel` of the teacher alone, kept in ``config.cache`` under a name that holds everything
    the recording depends on, and read from there when present."""
    seeds = list(seeds)
    if not config.cache:
        return record_parallel(config, seeds)
    key = (f"{config.teacher}_{config.workload}_{config.cluster}_{config.n_jobs}jobs_seeds{seeds[0]}-{seeds[-1]}_"
           f"plans{config.max_plans}_queue{config.queue_rows}_noise{config.estimate_noise}")  # fmt: skip
    path = Path(config.cache) / f"{key}.npz"
    names = [f.name for f in dataclasses.fields(PlanDemos)]
    if path.is_file():
        with np.load(path, allow_pickle=False) as data:
            if list(data["seed_list"]) == seeds:
                return PlanDemos(**{n: list(data[n]) for n in names})
    demos = record_parallel(config, seeds)
    from schedgym._atomic import atomic_open

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as f:
        np.savez(f, seed_list=np.asarray(seeds), **demos.arrays())  # type: ignore[arg-type]
    return demos


# ---------------------------------------------------------------------------------------------- the student
def split_observation(obs: np.ndarray, max_plans: int, queue_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(head, queue, rows)`` of a batch of plan-mode observations: (n, 21), (n, 2 * queue_rows * 11), (n,
    max_plans, 22). ValueError if the width is not the plan mode's for these row counts."""
    n_queue = 2 * queue_rows * QUEUE_WIDTH
    expected = N_HEAD_V2 + n_queue + max_plans * PLAN_WIDTH
    if obs.shape[-1] != expected:
        raise ValueError(f"Expected plan-mode observations of {expected} features, got {obs.shape[-1]}")
    head = obs[:, :N_HEAD_V2]
    queue = obs[:, N_HEAD_V2 : N_HEAD_V2 + n_queue]
    rows = obs[:, N_HEAD_V2 + n_queue :].reshape(len(obs), max_plans, PLAN_WIDTH)
    return head, queue, rows


def row_inputs(obs: np.ndarray, mask: np.ndarray, max_plans: int, queue_rows: int, context: bool) -> np.ndarray:
    """The scorer's input of every row (n, max_plans, width), in numpy: [head, queue, context, row_i]; the
    torch module builds the same from the same formula (:meth:`PlanScorer.inputs`)."""
    head, queue, rows = split_observation(obs, max_plans, queue_rows)
    n = len(obs)
    parts = [np.broadcast_to(head[:, None], (n, max_plans, head.shape[1])),
             np.broadcast_to(queue[:, None], (n, max_plans, queue.shape[1]))]  # fmt: skip
    if context:
        legal = mask[..., None]
        count = np.maximum(mask.sum(axis=1), 1)[:, None]
        mean = np.where(legal, rows, 0.0).sum(axis=1) / count
        low = np.where(legal, rows, np.inf).min(axis=1)
        high = np.where(legal, rows, -np.inf).max(axis=1)
        ctx = np.concatenate([mean, low, high], axis=1)
        ctx = np.where(np.isfinite(ctx), ctx, 0.0)
        parts.append(np.broadcast_to(ctx[:, None], (n, max_plans, ctx.shape[1])))
    parts.append(rows)
    return np.concatenate(parts, axis=-1)


def input_width(queue_rows: int, context: bool) -> int:
    """Features per row the scorer reads."""
    return N_HEAD_V2 + 2 * queue_rows * QUEUE_WIDTH + (3 * PLAN_WIDTH if context else 0) + PLAN_WIDTH


@dataclass(frozen=True, eq=False)
class PlanScorerNetwork:
    """The student's forward pass in numpy (float64): ``layers`` as (weight, bias), ReLU after every layer but
    the last (width 1, the logit). Illegal rows get :data:`MASKED_LOGIT`."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    max_plans: int
    queue_rows: int
    context: bool

    def logits(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Logits (n, max_plans) of a batch of observations and masks."""
        x = row_inputs(np.asarray(obs, dtype=np.float64), np.asarray(mask, dtype=bool), self.max_plans,
                       self.queue_rows, self.context)  # fmt: skip
        for i, (w, b) in enumerate(self.layers):
            x = x @ w.T + b
            if i < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        return np.where(mask, x[..., 0], MASKED_LOGIT)

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """The legal row of the highest logit (the first on a tie)."""
        return int(np.argmax(self.logits(obs[None], mask[None])[0]))

    def save(self, path: Path) -> None:
        """The weights as an ``.npz`` (``layer{i}.weight``, ``layer{i}.bias``), written atomically."""
        from schedgym._atomic import atomic_open

        arrays = {}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"layer{i}.weight"], arrays[f"layer{i}.bias"] = w, b
        with atomic_open(path, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]

    def spec(self) -> dict[str, Any]:
        """What :meth:`load` needs besides the weights."""
        return {"max_plans": self.max_plans, "queue_rows": self.queue_rows, "context": self.context,
                "hidden": [len(b) for _, b in self.layers[:-1]], "activation": "ReLU"}  # fmt: skip

    @classmethod
    def load(cls, npz: str | Path, spec: dict[str, Any]) -> PlanScorerNetwork:
        """The network saved by :meth:`save` at ``npz``, described by ``spec``; ValueError for an array that is
        not of real floats (float64 of a complex array would drop its imaginary part with only a warning)."""
        with np.load(npz, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        odd = [f"{name} is {a.dtype}" for name, a in arrays.items() if a.dtype.kind != "f"]
        if odd:
            raise ValueError(f"{npz}: expected arrays of real floats; {', '.join(odd)}")
        n = len(arrays) // 2
        layers = tuple((arrays[f"layer{i}.weight"].astype(np.float64), arrays[f"layer{i}.bias"].astype(np.float64))
                       for i in range(n))  # fmt: skip
        return cls(layers, int(spec["max_plans"]), int(spec["queue_rows"]), bool(spec["context"]))


class PlanStudent(PlanPolicy):
    """A fitted student acting in the plan mode inside the simulator (numpy only): the legal row of the
    highest logit of ``network``."""

    name = "plan-student"

    def __init__(self, network: PlanScorerNetwork, *, estimate_noise: float = 0.3) -> None:
        self.network = network
        super().__init__(max_plans=network.max_plans, queue_rows=network.queue_rows, estimate_noise=estimate_noise)

    def choose(self, decision: PlanDecision) -> int:
        return self.network.act(decision.observe(), decision.mask())

    @classmethod
    def load(cls, folder: str | Path) -> PlanStudent:
        """The student saved in ``folder`` (``student.npz`` and ``student.json``)."""
        folder = Path(folder)
        meta = strict_json.loads((folder / "student.json").read_text(encoding="utf-8"))
        network = PlanScorerNetwork.load(folder / "student.npz", meta["network"])
        return cls(network, estimate_noise=float(meta["config"]["estimate_noise"]))


def make_scorer(config: PlanImitationConfig) -> Any:
    """The torch module (:class:`PlanScorer`), built with torch's generator seeded from ``config.seed``."""
    import torch
    from torch import nn

    class PlanScorer(nn.Module):
        """``logit_i = MLP([head, queue, context, row_i])`` with one MLP for every row; illegal rows
        :data:`MASKED_LOGIT`. :class:`PlanScorerNetwork` is the same computation in numpy."""

        shift: torch.Tensor
        scale: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            n_in = input_width(config.queue_rows, config.context)
            for n_out in config.hidden:
                layers += [nn.Linear(n_in, n_out), nn.ReLU()]
                n_in = n_out
            layers.append(nn.Linear(n_in, 1))
            self.mlp = nn.Sequential(*layers)
            width = input_width(config.queue_rows, config.context)
            # Inputs are standardised (set_scale) before the first layer: the plan features that tell options
            # apart (freed GPUs, surplus, starts) vary by a few hundredths, the flags by 1.
            self.register_buffer("shift", torch.zeros(width))
            self.register_buffer("scale", torch.ones(width))

        def set_scale(self, x: torch.Tensor, mask: torch.Tensor) -> None:
            """Standardise with the mean and standard deviation of the legal rows' inputs ``x`` (n, rows, w)."""
            legal = x[mask]
            self.shift.copy_(legal.mean(dim=0))
            self.scale.copy_(legal.std(dim=0).clamp(min=1e-3))

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            logits = self.mlp((x - self.shift) / self.scale).squeeze(-1)
            return logits.masked_fill(~mask, MASKED_LOGIT)

        def numpy(self) -> PlanScorerNetwork:
            """The same network in numpy, the standardisation folded into the first layer."""
            linears = [m for m in self.mlp if isinstance(m, nn.Linear)]
            layers = [(m.weight.detach().double().numpy().copy(), m.bias.detach().double().numpy().copy())
                      for m in linears]  # fmt: skip
            shift, scale = self.shift.double().numpy(), self.scale.double().numpy()
            w, b = layers[0]
            layers[0] = (w / scale, b - (w / scale) @ shift)
            return PlanScorerNetwork(tuple(layers), config.max_plans, config.queue_rows, config.context)

    torch.manual_seed(config.seed)
    return PlanScorer()


def fit(model: Any, config: PlanImitationConfig, data: dict[str, np.ndarray], round_: int) -> dict[str, float]:
    """Fit ``model`` to the recorded decisions by cross-entropy of the masked softmax to the teacher's row;
    return the final training loss and agreement."""
    import torch

    x = torch.as_tensor(row_inputs(data["obs"], data["masks"], config.max_plans, config.queue_rows,
                                   config.context), dtype=torch.float32)  # fmt: skip
    mask = torch.as_tensor(data["masks"])
    y = torch.as_tensor(data["labels"])
    weight = torch.as_tensor(np.where(data["kinds"] == KINDS.index("fitgpp"), 1.0, config.deviation_weight),
                             dtype=torch.float32)  # fmt: skip
    if round_ == 0:
        model.set_scale(x, mask)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    gen = np.random.default_rng(np.random.SeedSequence([config.seed, 3, round_]))
    n = len(y)
    model.train()
    loss_value = float("nan")
    for _ in range(config.epochs):
        order = torch.as_tensor(gen.permutation(n))
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            losses = torch.nn.functional.cross_entropy(model(x[idx], mask[idx]), y[idx], reduction="none")
            loss = (losses * weight[idx]).sum() / weight[idx].sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_value = float(loss.detach())
    model.eval()
    with torch.no_grad():
        agree = float((model(x, mask).argmax(dim=1) == y).double().mean())
    return {"loss": loss_value, "agreement": agree, "decisions": float(n)}


# ---------------------------------------------------------------------------------------------- reporting
def agreement(choices: np.ndarray, data: dict[str, np.ndarray]) -> dict[str, float]:
    """Share of decisions where ``choices`` equal the teacher's rows: overall, and where the teacher does
    not take fitgpp's plan."""
    hit = choices == data["labels"]
    other = data["kinds"] != KINDS.index("fitgpp")
    return {
        "overall": float(hit.mean()),
        "not_fitgpp": float(hit[other].mean()) if other.any() else float("nan"),
        "n": int(len(hit)),
        "n_not_fitgpp": int(other.sum()),
    }


def teacher_profile(data: dict[str, np.ndarray]) -> dict[str, Any]:
    """The teacher's choices by kind and the options per request (legal rows, wait included)."""
    n = len(data["labels"])
    counts = np.bincount(data["kinds"], minlength=len(KINDS))
    legal = data["masks"].sum(axis=1)
    return {
        "requests": n,
        "kinds": {k: {"n": int(c), "share": float(c / n)} for k, c in zip(KINDS, counts, strict=True)},
        "options_per_request": float(legal.mean()),
        "plans_per_request": float(legal.mean() - 1),
    }


def slowdown_per_job(result: Any) -> float:
    """(sum of every job's slowdown) / jobs: the weighted slowdown per job with TE and BE weights 1."""
    return float(result.slowdown.sum() / len(result.slowdown))


def evaluate_as_policy(student: PlanStudent, config: PlanImitationConfig) -> dict[str, Any]:
    """The student, fitgpp, k8s and the teacher on the validation seeds (``evaluate_policy``, seeded as
    compare seeds them): per seed the slowdown per job and preemptions, the means, and the student's paired
    differences to each (mean, 95% CI half-width)."""
    from schedgym.experiments.evaluation import evaluate_policy
    from schedgym.experiments.stats import ci95, mean, paired
    from schedgym.registry import make_policy
    from schedgym.sim.cluster import resolve_cluster
    from schedgym.workloads.source import WorkloadSource

    cluster = resolve_cluster(config.cluster)
    source = WorkloadSource(config.workload, n_jobs=config.n_jobs)
    seeds = config.val_seeds
    workloads = [source.seeded(s, cluster) for s in seeds]
    policies: dict[str, Policy] = {"student": student}
    for name in ("fitgpp", "k8s", config.teacher):
        policies[name] = make_policy(name)
    out: dict[str, Any] = {"seeds": seeds, "policies": {}}
    per: dict[str, list[float]] = {}
    for name, policy in policies.items():
        t0 = time.perf_counter()
        runs = evaluate_policy(policy, cluster, workloads, seeds)
        per[name] = [slowdown_per_job(r.result) for r in runs]
        out["policies"][name] = {
            "slowdown_per_job": per[name],
            "mean": mean(per[name]),
            "ci95": ci95(per[name]),
            "preemptions": [r.result.n_preemptions for r in runs],
            "seconds": time.perf_counter() - t0,
        }
    out["student_minus"] = {name: paired(per["student"], per[name]) for name in policies if name != "student"}
    return out


# ---------------------------------------------------------------------------------------------- the run
def run(config: PlanImitationConfig) -> dict[str, Any]:
    """Record, fit and report (:mod:`agents.plan_imitation`); write the outputs; return the report."""
    import torch

    from schedgym._atomic import atomic_open, output_set

    torch.set_num_threads(1)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    val = record_cached(config, config.val_seeds).arrays()
    timings["record_validation_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    demos = record_cached(config, config.train_seeds)
    timings["record_train_s"] = time.perf_counter() - t0
    print(f"recorded {len(demos):,} training decisions on {config.n_train} workloads, "
          f"{len(val['labels']):,} validation decisions on {config.n_val}", flush=True)  # fmt: skip

    model = make_scorer(config)
    rounds = []
    for r in range(config.rounds):
        if r > 0:
            t0 = time.perf_counter()
            demos.extend(record_parallel(config, config.train_seeds, learner=model.numpy(), beta=0.5**r, round_=r))
            timings[f"record_round{r}_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        stats: dict[str, Any] = dict(fit(model, config, demos.arrays(), r))
        stats["fit_seconds"] = time.perf_counter() - t0
        net = model.numpy()
        stats["validation"] = agreement(net.logits(val["obs"], val["masks"]).argmax(axis=1), val)
        rounds.append({"round": r, **stats})
        print(f"round {r}: {int(stats['decisions']):,} decisions, loss {stats['loss']:.3f}, training agreement "
              f"{stats['agreement']:.1%}, validation agreement {stats['validation']['overall']:.1%} "
              f"(not fitgpp: {stats['validation']['not_fitgpp']:.1%})", flush=True)  # fmt: skip

    net = model.numpy()
    fitgpp_rows = np.where(val["fitgpp_rows"] >= 0, val["fitgpp_rows"], 0)
    report: dict[str, Any] = {
        "config": dataclasses.asdict(config),
        "train_seeds": [config.train_seeds[0], config.train_seeds[-1]],
        "val_seeds": config.val_seeds,
        "teacher": teacher_profile(val),
        "teacher_train": teacher_profile(demos.arrays()),
        "rounds": rounds,
        "agreement": {
            "student": agreement(net.logits(val["obs"], val["masks"]).argmax(axis=1), val),
            "always_fitgpp": agreement(fitgpp_rows, val),
        },
    }
    if config.evaluate:
        t0 = time.perf_counter()
        report["policy"] = evaluate_as_policy(PlanStudent(net, estimate_noise=config.estimate_noise), config)
        timings["evaluate_s"] = time.perf_counter() - t0
    timings["total_s"] = time.perf_counter() - t_start
    report["timings"] = timings

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"network": net.spec(), "config": dataclasses.asdict(config), "teacher": config.teacher}
    with output_set():
        net.save(out / "student.npz")
        with atomic_open(out / "student.json") as f:
            json.dump(meta, f, indent=2)
        with atomic_open(out / "report.json") as f:
            json.dump(_finite(report), f, indent=2)
    return report


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def format_report(report: dict[str, Any]) -> str:
    """The report as text."""
    from schedgym.experiments.report import format_interval

    t = report["teacher"]
    lines = [f"validation seeds {report['val_seeds'][0]}-{report['val_seeds'][-1]}: {t['requests']} requests with "
             f"a choice, {t['options_per_request']:.2f} options per request (wait included; "
             f"{t['plans_per_request']:.2f} plans)", "teacher's choices:"]  # fmt: skip
    for kind, c in t["kinds"].items():
        lines.append(f"  {kind:<9} {c['n']:>6}  {c['share']:.1%}")
    lines.append("agreement with the teacher     overall   not fitgpp's plan")
    for who, a in report["agreement"].items():
        lines.append(f"  {who:<28} {a['overall']:>7.1%}   {a['not_fitgpp']:>7.1%}  (n = {a['n']}, {a['n_not_fitgpp']})")
    if "policy" in report:
        p = report["policy"]
        lines.append("mean slowdown per job (TE and BE weight 1), per seed; preemptions")
        for name, v in p["policies"].items():
            per = ", ".join(f"{x:.4f}" for x in v["slowdown_per_job"])
            lines.append(f"  {name:<22} {format_interval(v['mean'], v['ci95'], 4)}  [{per}]  {v['preemptions']}")
        for name, d in p["student_minus"].items():
            lines.append(f"  student minus {name:<22} {format_interval(d['mean'], d['ci95'], 4, signed=True)}")
    lines.append(f"timings: {', '.join(f'{k} {v:.0f}' for k, v in report['timings'].items())}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> PlanImitationConfig:
    """The configuration from the command line: one ``--option`` per field of :class:`PlanImitationConfig`."""
    from schedgym._fielddocs import field_docs

    docs = field_docs(PlanImitationConfig)
    parser = argparse.ArgumentParser(prog="python -m agents.plan_imitation", description=__doc__.splitlines()[0])
    for f in dataclasses.fields(PlanImitationConfig):
        flag = "--" + f.name.replace("_", "-")
        helptext = docs.get(f.name, "")
        if f.type in ("bool", bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=helptext)
        elif f.name == "hidden":
            parser.add_argument(
                flag, default=",".join(map(str, PlanImitationConfig.hidden)), help=helptext + " (comma-separated)"
            )
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default, help=helptext)
    ns = vars(parser.parse_args(argv))
    try:
        ns["hidden"] = tuple(int(h) for h in str(ns["hidden"]).split(","))
    except ValueError:
        parser.error(f"--hidden: expected comma-separated integers, got {ns['hidden']!r}")
    return PlanImitationConfig(**ns)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agents.plan_imitation``: exit 0, 2 on a configuration error, 130 on Ctrl-C."""
    try:
        config = parse_args(argv)
        report = run(config)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SchedGymError as exc:
        print(f"plan_imitation: error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    return 0


__all__ = [
    "KINDS",
    "PlanDemos",
    "PlanImitationConfig",
    "PlanRecorder",
    "PlanScorerNetwork",
    "PlanStudent",
    "agreement",
    "evaluate_as_policy",
    "fit",
    "make_scorer",
    "record",
    "record_cached",
    "record_parallel",
    "row_inputs",
    "run",
    "teacher_profile",
]

if __name__ == "__main__":
    raise SystemExit(main())

"""Searching a plan-mode policy without a teacher: ``python -m agents.evolve --out DIR`` (docs/evolve.md).

The policy (:class:`PlanScoreNetwork`) scores every option row of a ``schedgym/PreemptionPlan-v1`` request and
takes the legal row of the highest score. Its parameters are searched on whole episodes, with no teacher:

- ``--method coordinate``: each generation tries every single-weight move of the linear part against the
  current weights on the same fresh training workloads and keeps the best if it beats them;
- ``--method es``: OpenAI's evolution strategies (Salimans et al., 2017): ``population`` antithetic pairs of
  Gaussian noise, centred ranks, an Adam step.

The return of a preemption decision depends mostly on the workload that follows, not on the decision (Mao et
al., ICLR 2019). Every candidate of a generation is played on the *same* workloads (``reset(seed=...)``
replays a workload exactly) and judged against fitgpp's and k8s's figures on them, so the workloads' own
variance cancels: the input-driven baseline, taken per episode. The search optimises what the project
evaluates (:func:`fitness`): the objective relative to fitgpp's, minus ``tail_weight`` times each headline
figure's relative excess over the better rule's. Training workloads are seeds from 1,000,000, fresh each
generation; the checkpoint written is the one of the best validation fitness (seeds from 100,000); the test
seeds 0-99,999 are never seen.

The network starts as fitgpp (only ``by_fitgpp`` weighs: fitgpp's plan scores highest, ties go to row 0, wait,
as fitgpp declines). Everything is a pure function of the configuration: the noise comes from one generator
seeded by ``seed``, the process pool returns results in submission order, and an episode is a pure function of
(parameters, workload seed). The output folder gets ``agent.npz`` and ``agent.json`` (``mine:DIR/agent.npz``
loads them, :func:`agents.learned.load_agent`) and ``training.json`` (the validation curve), as one set.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedgym.decision.features import N_HEAD_V2, PLAN_FEATURES, QUEUE_FEATURES
from schedgym.decision.plan_mode import PlanDecision, PlanPolicy
from schedgym.errors import ConfigError, SchedGymError
from schedgym.sim.policy import QueueDiscipline

PLAN_WIDTH = len(PLAN_FEATURES)
QUEUE_WIDTH = len(QUEUE_FEATURES)
ROW_NAMES = tuple(f.name for f in PLAN_FEATURES)
TRAIN_SEED0 = 1_000_000
"""training workloads: seeds 1,000,000, 1,000,001, ... (the project's train range)"""
VALIDATION_SEED0 = 100_000
"""validation workloads: seeds 100,000, ... (test seeds, 0-99,999, are never used here)"""
FIGURES = ("te_p95", "be_p50", "be_p95", "be_p99")
ENV_ID = "schedgym/PreemptionPlan-v1"


# ---------------------------------------------------------------------------------------------- the network
@dataclass(frozen=True, eq=False)
class PlanScoreNetwork:
    """``score_i = w . row_i + v . tanh(W [head, context, row_i] + b)`` for every option row ``i``; the legal
    row of the highest score is taken (the first on a tie). ``context`` is the mean of each row feature over
    the legal rows. With ``hidden`` 0 the score is linear in the row.

    The parameters are one flat float64 vector (:meth:`n_params`, :meth:`with_params`), the form the search
    perturbs."""

    max_plans: int
    queue_rows: int
    hidden: int
    params: np.ndarray
    row_mean: np.ndarray
    """per row feature: the mean over the legal rows of fitgpp's requests on training workloads"""
    row_scale: np.ndarray
    """per row feature: the standard deviation there (1 where it is 0): scores read standardised rows, so that
    one step of the search means as much for every feature"""
    wait: bool = True
    """False: row 0 (wait) is never taken while another row is legal (as ``lookahead``'s ``wait=False``); the
    network then scores and normalises over the other legal rows only (:func:`legal_rows`)"""
    reads_queue: bool = False
    """True: the tanh units also read the observation's queue rows (the oldest waiting TE and BE jobs, as they
    stand), between the head and the context; the request alone does not show the jobs a plan's victims
    would wait behind"""

    @property
    def head_width(self) -> int:
        """Observation values the tanh units read before the context (:meth:`head_width_of`)."""
        return self.head_width_of(self.queue_rows, self.reads_queue)

    @staticmethod
    def head_width_of(queue_rows: int, reads_queue: bool) -> int:
        """The head, and the ``queue_rows`` rows of each class if ``reads_queue``."""
        return N_HEAD_V2 + (2 * queue_rows * QUEUE_WIDTH if reads_queue else 0)

    @staticmethod
    def n_params(hidden: int, head: int) -> int:
        """Parameters of a network with ``hidden`` units reading ``head`` values before the context
        (:attr:`head_width`)."""
        n_in = head + 2 * PLAN_WIDTH
        return PLAN_WIDTH + (hidden * n_in + hidden + hidden if hidden else 0)

    @classmethod
    def fitgpp(cls, max_plans: int, queue_rows: int, hidden: int, row_mean: np.ndarray, row_scale: np.ndarray
               ) -> PlanScoreNetwork:  # fmt: skip
        """The network that takes fitgpp's plan whenever fitgpp proposes one, else waits (the row of fitgpp's
        plan scores 1 above every other; ties go to row 0, wait)."""
        params = np.zeros(cls.n_params(hidden, N_HEAD_V2))
        at = ROW_NAMES.index("by_fitgpp")
        params[at] = row_scale[at]
        return cls(max_plans, queue_rows, hidden, params, np.asarray(row_mean, float), np.asarray(row_scale, float))

    def with_params(self, params: np.ndarray) -> PlanScoreNetwork:
        return dataclasses.replace(self, params=np.asarray(params, dtype=np.float64))

    def scores(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Scores (max_plans,) of one observation; illegal rows -inf."""
        mask = legal_rows(mask, self.wait)
        n_queue = 2 * self.queue_rows * QUEUE_WIDTH
        width = self.head_width  # once: this runs at every decision
        head = obs[:width].astype(np.float64)
        rows = obs[N_HEAD_V2 + n_queue :].reshape(self.max_plans, PLAN_WIDTH).astype(np.float64)
        rows = (rows - self.row_mean) / self.row_scale
        p = self.params
        score = rows @ p[:PLAN_WIDTH]
        if self.hidden:
            h, n_in = self.hidden, width + 2 * PLAN_WIDTH
            at = PLAN_WIDTH
            w = p[at : at + h * n_in].reshape(h, n_in)
            at += h * n_in
            b = p[at : at + h]
            v = p[at + h : at + 2 * h]
            legal = rows[mask]
            context = legal.mean(axis=0) if len(legal) else np.zeros(PLAN_WIDTH)
            fixed = w[:, : width + PLAN_WIDTH] @ np.concatenate([head, context]) + b
            score = score + np.tanh(rows @ w[:, width + PLAN_WIDTH :].T + fixed) @ v
        return np.where(mask, score, -np.inf)

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        return int(np.argmax(self.scores(obs, mask)))

    def arrays(self) -> dict[str, np.ndarray]:
        """What ``agent.npz`` holds."""
        return {"params": self.params, "row_mean": self.row_mean, "row_scale": self.row_scale}

    def spec(self) -> dict[str, Any]:
        """What ``agent.json`` holds of the network besides the arrays."""
        spec: dict[str, Any] = {"max_plans": self.max_plans, "queue_rows": self.queue_rows, "hidden": self.hidden}
        if not self.wait:  # only then: the description of every network that may wait is what it was
            spec["wait"] = False
        if self.reads_queue:  # only then: agent.json of every network that does not read the queue is unchanged
            spec["reads_queue"] = True
        return spec

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], spec: dict[str, Any]) -> PlanScoreNetwork:
        """The network of :meth:`arrays` and :meth:`spec`; ValueError if they do not fit together."""
        sizes: list[int] = []
        for key in ("hidden", "max_plans", "queue_rows"):
            value = spec.get(key)
            if not isinstance(value, int) or isinstance(value, bool):  # int() made 16.5 or "16" 16
                raise ValueError(f"expected hidden, max_plans and queue_rows to be integers, got {spec!r}")
            sizes.append(value)
        hidden, max_plans, queue_rows = sizes
        if hidden < 0 or max_plans < 2 or queue_rows < 0:
            raise ValueError(f"bad network description {spec!r}")
        wait, reads_queue = spec.get("wait", True), spec.get("reads_queue", False)
        if not isinstance(wait, bool) or not isinstance(reads_queue, bool):
            raise ValueError(f"expected wait and reads_queue true or false, got {wait!r} and {reads_queue!r}")
        if reads_queue and (hidden == 0 or queue_rows == 0):  # the queue would be read by nothing, or be empty
            raise ValueError(f"reads_queue needs hidden units and queue rows, got {spec!r}")
        head = cls.head_width_of(queue_rows, reads_queue)
        # Converted to float64 below: a complex array would lose its imaginary part (a warning, not an error),
        # a bool or integer one would pass as numbers it was not saved as.
        dtypes = {key: np.asarray(arrays[key]).dtype for key in ("params", "row_mean", "row_scale")}
        odd = [f"{key} is {dtype}" for key, dtype in dtypes.items() if dtype.kind != "f"]
        if odd:
            raise ValueError(f"expected arrays of real floats; {', '.join(odd)}")
        params = np.asarray(arrays["params"], dtype=np.float64)
        row_mean = np.asarray(arrays["row_mean"], dtype=np.float64)
        row_scale = np.asarray(arrays["row_scale"], dtype=np.float64)
        shapes = (params.shape, row_mean.shape, row_scale.shape)
        if shapes != ((cls.n_params(hidden, head),), (PLAN_WIDTH,), (PLAN_WIDTH,)):
            raise ValueError(f"expected {cls.n_params(hidden, head)} parameters and {PLAN_WIDTH} row statistics")
        if not (np.isfinite(params).all() and np.isfinite(row_mean).all() and (row_scale > 0).all()):
            raise ValueError("parameters must be finite and row scales positive")
        return cls(max_plans, queue_rows, hidden, params, row_mean, row_scale, wait, reads_queue)


def legal_rows(mask: np.ndarray, wait: bool = True) -> np.ndarray:
    """The rows a network may take of the environment's ``mask`` (one request (P,) or a batch (N, P)): all of
    them, or without ``wait`` row 0 dropped wherever another row is legal (a request that offers only wait
    keeps it)."""
    mask = np.asarray(mask, dtype=bool)
    if wait:
        return mask
    out = mask.copy()
    out[..., 0] &= ~mask[..., 1:].any(axis=-1)
    return out


class EvolvedPolicy(PlanPolicy):
    """A :class:`PlanScoreNetwork` deciding inside the simulator (``compare``, ``mine:DIR/agent.npz``), numpy
    only, as the environment ``schedgym/PreemptionPlan-v1`` it was searched on shows each request."""

    name = "evolved"

    def __init__(
        self,
        network: PlanScoreNetwork,
        *,
        estimate_noise: float = 0.3,
        name: str = "evolved",
        queue: QueueDiscipline = QueueDiscipline.PRIORITY,
    ) -> None:
        self.network = network
        self.name = name
        self.queue = queue  # the environment's, where the scores were searched
        super().__init__(max_plans=network.max_plans, queue_rows=network.queue_rows, estimate_noise=estimate_noise)

    def __repr__(self) -> str:
        return f"EvolvedPolicy(name={self.name!r}, hidden={self.network.hidden})"

    def choose(self, decision: PlanDecision) -> int:
        return self.network.act(decision.observe(), decision.mask())


def load_evolved(path: Path, meta: dict[str, Any], config: Any, *, name: str) -> EvolvedPolicy:
    """The agent of ``path`` (``agent.npz``) described by ``meta`` (its ``agent.json``, read by
    :func:`agents.learned.load_agent`) for the environment configuration ``config``; a file that is not one is
    a :class:`SchedGymError`."""
    from agents.inference import read_npz

    arrays = read_npz(path, "an agent saved by 'python -m agents.evolve'")
    spec = meta.get("network")
    try:
        if not isinstance(spec, dict):
            raise ValueError("no network description")
        network = PlanScoreNetwork.from_arrays(arrays, spec)
    except (KeyError, TypeError, ValueError, ConfigError) as exc:
        raise SchedGymError(f"{path}: not an agent saved by 'python -m agents.evolve' ({exc})") from None
    if config.action_mode != "plan" or (network.max_plans, network.queue_rows) != (config.max_plans, config.queue_rows):
        raise SchedGymError(
            f"{path}: the network reads {network.max_plans} plan rows and {network.queue_rows} queue rows, but its "
            f"environment ({meta.get('env_id')}) shows {config.max_plans} and {config.queue_rows}"
        )
    return EvolvedPolicy(network, estimate_noise=config.estimate_noise, name=name, queue=config.sim.queue)


# ---------------------------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class EvolveConfig:
    """The search (``python -m agents.evolve --help`` gives each as an option)."""

    method: str = "coordinate"
    """``coordinate`` (single-weight moves of the linear part) or ``es`` (OpenAI evolution strategies)"""
    workload: str = "paper"
    """synthetic workload preset of the episodes, or ``mix`` (each workload seed a level of that distribution,
    on its own cluster; ``n_jobs`` and ``estimate_noise`` are then the level's)"""
    n_jobs: int = 5000
    """jobs per episode (compare's 5,000 for ``paper``)"""
    estimate_noise: float = 0.3
    """sigma of the lognormal duration-estimate error, as the environment's"""
    hidden: int = 0
    """tanh units of the optional non-linear part (0: linear; moved by ``es`` only)"""
    generations: int = 10
    """search steps"""
    population: int = 16
    """``es``: antithetic pairs per generation"""
    sigma: float = 0.5
    """``coordinate``: the small move, in units of the starting ``by_fitgpp`` weight (the large one is 4x);
    ``es``: the noise's standard deviation"""
    learning_rate: float = 0.03
    """``es``: Adam's step size"""
    seeds_per_generation: int = 32
    """training workloads per generation, fresh each generation, shared by its candidates"""
    validation_seeds: int = 20
    """validation workloads (seeds 100,000, ...)"""
    validate_every: int = 1
    """generations between validations; the checkpoint written is the validated one of the best fitness"""
    tail_weight: float = 0.3
    """weight of the headline figures' excess over the better rule's in the fitness (:func:`fitness`)"""
    seed: int = 0
    """seeds ``es``'s noise and the hidden part's initial weights"""
    workers: int = 2
    """processes playing episodes (1: none)"""

    def __post_init__(self) -> None:
        if self.method not in ("es", "coordinate"):
            raise ConfigError(f"Expected method 'es' or 'coordinate', got {self.method!r}")
        check_counts(self, ("n_jobs", "generations", "population", "seeds_per_generation", "validation_seeds",
                            "validate_every", "workers"), 1)  # fmt: skip
        check_counts(self, ("hidden", "seed"), 0)
        check_reals(self, ("sigma", "learning_rate"), strict=True)
        check_reals(self, ("tail_weight", "estimate_noise"), strict=False)
        check_episode_workload(self.workload)

    def validation(self) -> list[int]:
        return list(range(VALIDATION_SEED0, VALIDATION_SEED0 + self.validation_seeds))

    def training(self, generation: int) -> list[int]:
        at = TRAIN_SEED0 + generation * self.seeds_per_generation
        return list(range(at, at + self.seeds_per_generation))

    def command(self) -> str:
        return config_command(self, "agents.evolve")


def check_episode_workload(workload: object) -> None:
    """``workload`` a synthetic preset or ``mix``, else a ConfigError naming it (for this module's and
    :mod:`agents.lean_ppo`'s configurations)."""
    from schedgym.workloads.named import TRACE_WORKLOADS
    from schedgym.workloads.source import MIX
    from schedgym.workloads.synthetic import PRESETS

    # Episodes are replayed by workload seed (reset's options["workload_seed"]), which only a synthetic draw or
    # a mix level has: refused here, a trace would fail at the first reset on an option the user never set.
    if isinstance(workload, str) and (workload in PRESETS or workload == MIX):
        return
    what = ", a bundled trace" if workload in TRACE_WORKLOADS else ""
    raise ConfigError(
        f"Expected workload to be a synthetic preset ({', '.join(sorted(PRESETS))}) or {MIX!r}, got {workload!r}{what}"
    )


def check_counts(config: object, names: Sequence[str], minimum: int) -> None:
    """Each of ``config``'s fields ``names`` an int (not a bool) of at least ``minimum``, else a ConfigError."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"Expected {name} >= {minimum}, got {value!r}")


def check_reals(config: object, names: Sequence[str], *, strict: bool) -> None:
    """Each of ``config``'s fields ``names`` a finite number ``> 0`` (``strict``) or ``>= 0``."""
    for name in names:
        value = getattr(config, name)
        if not (isinstance(value, (int, float)) and np.isfinite(value) and (value > 0 if strict else value >= 0)):
            raise ConfigError(f"Expected {name} {'>' if strict else '>='} 0, got {value!r}")


def config_command(config: Any, module: str) -> str:
    """The command line of ``python -m module`` that makes ``config``: its fields that differ from the
    defaults, as options."""
    defaults = type(config)()
    parts = [f"python -m {module} --out DIR"]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if value != getattr(defaults, f.name):
            option = f.name.replace("_", "-")
            if _is_flag(f):
                parts.append(f"--{option}" if value else f"--no-{option}")
            else:
                parts.append(f"--{option} {value}")
    return " ".join(parts)


def _is_flag(f: dataclasses.Field[Any]) -> bool:
    """A boolean field of a configuration dataclass: an option ``--name`` / ``--no-name``."""
    return str(f.type) == "bool"


def add_config_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--option`` per field of the configuration dataclass ``cls``, its docstring as help."""
    from schedgym._fielddocs import field_docs

    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if _is_flag(f):  # --name / --no-name
            parser.add_argument("--" + f.name.replace("_", "-"), action=argparse.BooleanOptionalAction,
                                default=f.default, help=docs.get(f.name, ""))  # fmt: skip
            continue
        kind = {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default, help=docs.get(f.name, ""))


# ---------------------------------------------------------------------------------------------- episodes
_WORKER: dict[str, Any] = {}


def _env(config: EvolveConfig) -> Any:
    key = (config.workload, config.n_jobs, config.estimate_noise)
    if _WORKER.get("key") != key:
        import gymnasium as gym

        import schedgym  # noqa: F401  (registers the environments)

        env = gym.make(ENV_ID, workload=config.workload, n_jobs=config.n_jobs,
                       estimate_noise=config.estimate_noise).unwrapped  # fmt: skip
        _WORKER.update(key=key, env=env)
    return _WORKER["env"]


def figures_of(result: Any) -> dict[str, float]:
    """The objective (mean slowdown per job) and the four headline figures of one run."""
    from schedgym.experiments.figures import headline_figures

    out = {"objective": float(result.slowdown.sum() / len(result.slowdown))}
    out.update(headline_figures(result))
    out["preemptions"] = float(result.n_preemptions)
    return out


def play(config: EvolveConfig, network: PlanScoreNetwork, seed: int) -> dict[str, float]:
    """One episode of ``network`` on workload ``seed`` in the environment (on the native engine when it is
    built), with the environment's own estimate noise drawn from ``reset(seed=seed)``."""
    return figures_of(_episode(config, seed, network.act))


def _episode(config: EvolveConfig, seed: int, act: Any) -> Any:
    """Play workload ``seed`` to its end in the environment, ``act(observation, mask)`` choosing each row; the
    run's result."""
    env = _env(config)
    obs, info = env.reset(seed=seed, options={"workload_seed": seed})
    done = False
    while not done:
        obs, _, term, trunc, info = env.step(act(obs, info["action_mask"]))
        done = term or trunc
    return env.sim.result()


def pool_context() -> Any:
    """Where worker processes come from: a fork server, preloaded with this module, where there is one, else
    spawn. Never a plain fork: the parent may run threads (Ray's, torch's), and a child forked while one of
    them held a lock waits for it forever (a CI run hung so in this module's tests)."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        return ctx
    return mp.get_context("spawn")


def _play_job(args: tuple[EvolveConfig, PlanScoreNetwork, int]) -> dict[str, float]:
    return play(*args)


def rule_figures(config: EvolveConfig, name: str, seeds: Sequence[int]) -> list[dict[str, float]]:
    """A rule's figures on ``seeds`` (the simulator, the same workloads as :func:`play`)."""
    from schedgym.experiments.runner import run_policy, run_rng
    from schedgym.registry import make_policy
    from schedgym.workloads.source import WorkloadSource

    env = _env(config)
    source = WorkloadSource(config.workload, n_jobs=config.n_jobs)
    out = []
    for s in seeds:
        if source.kind == "mix":  # the level's own cluster and jobs, as the environment's reset pins them
            cluster, workload, _ = source.mix_level(s)
        else:
            cluster = env.cluster
            workload = source.seeded(s, cluster)
        out.append(figures_of(run_policy(make_policy(name), cluster, workload, env.config.sim, rng=run_rng(s))))
    return out


def fitness(runs: Sequence[dict[str, float]], fitgpp: Sequence[dict[str, float]], k8s: Sequence[dict[str, float]],
            tail_weight: float) -> float:  # fmt: skip
    """Higher is better: minus the mean objective of ``runs`` relative to fitgpp's on the same workloads, minus
    ``tail_weight`` times the relative excess of each headline figure's mean over the better rule's mean."""

    def avg(xs: Sequence[dict[str, float]], key: str) -> float:
        return float(np.mean([x[key] for x in xs]))

    value = -avg(runs, "objective") / avg(fitgpp, "objective")
    for key in FIGURES:
        ref = min(avg(fitgpp, key), avg(k8s, key))
        if ref > 0:
            value -= tail_weight * max(0.0, avg(runs, key) / ref - 1.0)
    return value


def row_statistics(config: EvolveConfig, seeds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (1 where it is 0) of every row feature over the legal rows of the requests
    fitgpp meets on ``seeds`` in the environment."""
    shown = _env(config).config  # the environment's row counts
    fitgpp = PlanScoreNetwork.fitgpp(shown.max_plans, shown.queue_rows, 0, np.zeros(PLAN_WIDTH), np.ones(PLAN_WIDTH))
    n_rows = fitgpp.max_plans * PLAN_WIDTH
    rows = []

    def act(obs: np.ndarray, mask: np.ndarray) -> int:
        rows.append(obs[-n_rows:].reshape(fitgpp.max_plans, PLAN_WIDTH)[mask])
        return fitgpp.act(obs, mask)

    for seed in seeds:
        _episode(config, seed, act)
    data = np.concatenate(rows).astype(np.float64)
    mean, std = data.mean(axis=0), data.std(axis=0)
    return mean, np.where(std > 1e-9, std, 1.0)


def centred_ranks(x: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(x))
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    return ranks / (len(x) - 1) - 0.5


# ---------------------------------------------------------------------------------------------- the search
class _Search:
    """The state of one search: the pool, the rules' figures per workload (cached), the validation curve."""

    def __init__(self, config: EvolveConfig, network: PlanScoreNetwork, pool: Any, log: Any) -> None:
        self.config, self.network, self.pool, self.log = config, network, pool, log
        self.rules: dict[int, tuple[dict[str, float], dict[str, float]]] = {}
        self.curve: list[dict[str, Any]] = []
        self.best: tuple[float, np.ndarray, int] | None = None
        self.episodes = 0
        self.t0 = time.perf_counter()

    def references(self, seeds: Sequence[int]) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
        """fitgpp's and k8s's figures on ``seeds``."""
        missing = [s for s in seeds if s not in self.rules]
        if missing:
            both = zip(rule_figures(self.config, "fitgpp", missing), rule_figures(self.config, "k8s", missing),
                       strict=True)  # fmt: skip
            self.rules.update(zip(missing, both, strict=True))
        return [self.rules[s][0] for s in seeds], [self.rules[s][1] for s in seeds]

    def play(self, candidates: Sequence[np.ndarray], seeds: Sequence[int]) -> list[list[dict[str, float]]]:
        """Every candidate on every seed, in order (the pool returns results in submission order)."""
        jobs = [(self.config, self.network.with_params(p), s) for p in candidates for s in seeds]
        if self.pool is None:
            flat = [_play_job(job) for job in jobs]
        else:
            flat = self.pool.map(_play_job, jobs, chunksize=max(1, len(jobs) // (4 * self.config.workers)))
        self.episodes += len(jobs)
        n = len(seeds)
        return [flat[i * n : (i + 1) * n] for i in range(len(candidates))]

    def fitness(self, candidates: Sequence[np.ndarray], seeds: Sequence[int]) -> np.ndarray:
        fitgpp, k8s = self.references(seeds)
        return np.array([fitness(runs, fitgpp, k8s, self.config.tail_weight) for runs in self.play(candidates, seeds)])

    def validate(self, generation: int, params: np.ndarray) -> None:
        seeds = self.config.validation()
        runs = self.play([params], seeds)[0]
        fitgpp, k8s = self.references(seeds)
        fit = fitness(runs, fitgpp, k8s, self.config.tail_weight)
        seconds = time.perf_counter() - self.t0
        point: dict[str, Any] = {"generation": generation, "episodes": self.episodes, "seconds": round(seconds, 1),
                                 "fitness": fit}  # fmt: skip
        for key in ("objective", *FIGURES, "preemptions"):
            point[key] = float(np.mean([r[key] for r in runs]))
            point[f"{key}_minus_fitgpp"] = point[key] - float(np.mean([f[key] for f in fitgpp]))
        self.curve.append(point)
        if self.best is None or fit > self.best[0]:
            self.best = (fit, params.copy(), generation)
        self.log(f"gen {generation:4d}  validation fitness {fit:+.4f}  objective {point['objective']:.4f} "
                 f"({point['objective_minus_fitgpp']:+.4f} vs fitgpp)  te_p95 {point['te_p95_minus_fitgpp']:+.3f} "
                 f"be_p50 {point['be_p50_minus_fitgpp']:+.3f} be_p95 {point['be_p95_minus_fitgpp']:+.3f} "
                 f"be_p99 {point['be_p99_minus_fitgpp']:+.3f}  {seconds:.0f} s")  # fmt: skip

    def rule_means(self) -> dict[str, dict[str, float]]:
        """The rules' mean figures on the validation seeds (the training figure's horizontal lines)."""
        fitgpp, k8s = self.references(self.config.validation())
        keys = ("objective", *FIGURES, "preemptions")
        return {name: {k: float(np.mean([r[k] for r in runs])) for k in keys}
                for name, runs in (("fitgpp", fitgpp), ("k8s", k8s))}  # fmt: skip


def search(config: EvolveConfig, out: Path | None = None, plot: Path | None = None, log: Any = print) -> dict[str, Any]:
    """Run the search; write the chosen network, its description and the curve to ``out`` (as one set)."""
    rng = np.random.default_rng(config.seed)
    row_mean, row_scale = row_statistics(config, config.training(0))
    shown = _env(config).config  # the environment's row counts
    network = PlanScoreNetwork.fitgpp(shown.max_plans, shown.queue_rows, config.hidden, row_mean, row_scale)
    theta = network.params.copy()
    if config.hidden:  # break the symmetry of the hidden units; v stays 0 so the start is still fitgpp
        n_in = N_HEAD_V2 + 2 * PLAN_WIDTH
        theta[PLAN_WIDTH : PLAN_WIDTH + config.hidden * n_in] = rng.normal(0.0, n_in**-0.5, config.hidden * n_in)
    with contextlib.ExitStack() as stack:
        pool = None
        if config.workers > 1:
            pool = stack.enter_context(pool_context().Pool(config.workers))
        state = _Search(config, network, pool, log)
        state.validate(0, theta)
        fixed = [i for i in range(PLAN_WIDTH) if row_scale[i] == 1.0]  # constant features (row_statistics)
        moves = coordinate_steps(config, theta, rng, state.fitness, fixed) if config.method == "coordinate" else (
            es_steps(config, theta, rng, state.fitness))  # fmt: skip
        for gen, params in moves:
            if gen % config.validate_every == 0 or gen == config.generations:
                state.validate(gen, params)
        rules = state.rule_means()
    assert state.best is not None
    fit, params, generation = state.best
    chosen = network.with_params(params)
    report = {
        "config": dataclasses.asdict(config),
        "command": config.command(),
        "network": chosen.spec(),
        "chosen_generation": generation,
        "validation_fitness": fit,
        "episodes": state.episodes,
        "seconds": round(time.perf_counter() - state.t0, 1),
        "validation_rules": rules,
        "curve": state.curve,
    }
    if out is not None:
        write(out, chosen, report, plot)
    return report


def es_steps(config: EvolveConfig, theta: np.ndarray, rng: np.random.Generator, fit: Any) -> Any:
    """OpenAI-ES: ``population`` antithetic pairs, centred ranks, an Adam step up the estimated gradient; yields
    (generation, parameters) after every step."""
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    for gen in range(1, config.generations + 1):
        eps = rng.standard_normal((config.population, len(theta)))
        candidates = [theta + config.sigma * e for e in eps] + [theta - config.sigma * e for e in eps]
        ranks = centred_ranks(fit(candidates, config.training(gen - 1)))
        grad = (ranks[: config.population] - ranks[config.population :]) @ eps / (2 * config.population * config.sigma)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        theta = theta + config.learning_rate * (m / (1 - 0.9**gen)) / (np.sqrt(v / (1 - 0.999**gen)) + 1e-8)
        yield gen, theta


def coordinate_steps(
    config: EvolveConfig, theta: np.ndarray, rng: np.random.Generator, fit: Any, fixed: Sequence[int] = ()
) -> Any:
    """Coordinate search: each generation tries, on fresh training workloads, every single-weight move of the
    linear part by +-``sigma`` and +-4 ``sigma`` (times the starting weight of ``by_fitgpp``) against the
    current parameters on the same workloads, and takes the best move if it beats them; yields (generation,
    parameters) after every generation. The weights of ``fixed`` features (constant on the training workloads,
    where a move changes no decision) are not moved."""
    del rng  # deterministic: the moves are enumerated
    unit = float(theta[ROW_NAMES.index("by_fitgpp")])
    for gen in range(1, config.generations + 1):
        candidates = [theta]
        for i in range(PLAN_WIDTH):
            if i in fixed:
                continue
            for step in (-4.0, -1.0, 1.0, 4.0):
                moved = theta.copy()
                moved[i] += step * config.sigma * unit
                candidates.append(moved)
        values = fit(candidates, config.training(gen - 1))
        best = int(np.argmax(values))  # the first on a tie: the current parameters
        theta = candidates[best]
        yield gen, theta


def agent_meta(network: PlanScoreNetwork, report: dict[str, Any]) -> dict[str, Any]:
    """``agent.json``: what :func:`agents.learned.load_agent` reads (algorithm, environment, network) and how the
    agent was made."""
    config = report["config"]
    return {
        "algo": "evolved",
        "env_id": ENV_ID,
        "env_kwargs": {
            "workload": config["workload"],
            "n_jobs": config["n_jobs"],
            "estimate_noise": config["estimate_noise"],
        },  # fmt: skip
        "network": network.spec(),
        "train_config": config,
        "train_command": report["command"],
        "chosen_generation": report["chosen_generation"],
        "validation_fitness": report["validation_fitness"],
        "validation": next(p for p in report["curve"] if p["generation"] == report["chosen_generation"]),
    }


def write(out: Path, network: PlanScoreNetwork, report: dict[str, Any], plot: Path | None = None) -> None:
    """``agent.npz``, ``agent.json``, ``training.json`` in ``out`` (and the training figure at ``plot``), as one
    set: all of them or none."""
    also = None if plot is None else lambda: plot_training(report, plot)
    write_agent(out, network, agent_meta(network, report), report, also)


def write_agent(
    out: Path, network: PlanScoreNetwork, meta: dict[str, Any], report: dict[str, Any], also: Any = None
) -> None:
    """A searched or trained plan-scoring agent's set: ``agent.npz`` (``network``), ``agent.json`` (``meta``,
    what :func:`agents.learned.load_agent` reads), ``training.json`` (``report``) in ``out``, and what
    ``also()`` writes, all of them or none."""
    from schedgym._atomic import atomic_open, make_output_dir, output_set

    with output_set():
        make_output_dir(out)
        with atomic_open(out / "agent.npz", "wb") as f:
            np.savez(f, **network.arrays())  # type: ignore[arg-type]
        with atomic_open(out / "agent.json") as f:
            f.write(json.dumps(meta, indent=1) + "\n")
        with atomic_open(out / "training.json") as f:
            f.write(json.dumps(report, indent=1) + "\n")
        if also is not None:
            also()


def plot_training(
    report: dict[str, Any],
    path: Path,
    *,
    x: str = "episodes",
    checkpoint: str = "generation",
    label: str = "searched policy",
    title: str | None = None,
) -> None:
    """The training figure: the validation objective and the four headline figures against ``x`` (a key of the
    curve's points: training episodes here, environment steps for :mod:`agents.lean_ppo`), the rules' means on
    the same validation workloads as horizontal lines, the chosen checkpoint marked (the point whose
    ``checkpoint`` key, a generation or an update, is ``report["chosen_" + checkpoint]``)."""
    from schedgym.experiments.plotting import new_figure, save_figure

    curve, rules = report["curve"], report["validation_rules"]
    keys = ("objective", *FIGURES)
    titles = {"objective": "objective (mean slowdown per job)", "te_p95": "TE p95 slowdown",
              "be_p50": "BE p50 slowdown", "be_p95": "BE p95 slowdown", "be_p99": "BE p99 slowdown"}  # fmt: skip
    config = report["config"]
    if title is None:
        title = f"agents.evolve ({config['method']}) on {config['workload']}"

    def draw() -> Any:
        fig = new_figure((11.0, 6.5))
        xs = [p[x] for p in curve]
        chosen = next(p for p in curve if p[checkpoint] == report[f"chosen_{checkpoint}"])
        for i, key in enumerate(keys):
            ax = fig.add_subplot(2, 3, i + 1)
            ax.plot(xs, [p[key] for p in curve], marker="o", ms=3, color="C0", label=label)
            ax.plot([chosen[x]], [chosen[key]], marker="*", ms=12, color="C3", ls="", label="chosen")
            for j, (name, values) in enumerate(rules.items()):
                ax.axhline(values[key], color=f"C{j + 1}", ls="--", lw=1, label=name)
            ax.set_title(titles[key], fontsize=9)
            ax.set_xlabel(f"training {x}", fontsize=8)
            ax.tick_params(labelsize=7)
        handles, labels = fig.axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower right", bbox_to_anchor=(0.95, 0.15), fontsize=9)
        fig.suptitle(f"{title}: validation means over {config['validation_seeds']} workloads", fontsize=10)
        fig.tight_layout()
        return fig

    save_figure(path, draw, dpi=110)


def check_plot(option: str, path: Path, out: Path) -> None:
    """:class:`SchedGymError` unless the training figure can be written at ``path``, checked before training
    rather than after it: a figure's name, matplotlib, and a writable place (inside the output folder
    ``out``, which the run makes, or beside it)."""
    from schedgym._atomic import check_output_path
    from schedgym.experiments.plotting import check_figure_name

    check_figure_name(option, path)
    if path.parent.resolve() != out.resolve():  # out itself is checked (and made) as the output folder
        check_output_path(option, path)


def parse_args(argv: Sequence[str] | None) -> tuple[EvolveConfig, Path, Path | None]:
    """The configuration from the command line: one ``--option`` per field of :class:`EvolveConfig`."""
    parser = argparse.ArgumentParser(prog="python -m agents.evolve", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder (agent.npz, agent.json, training.json)")
    parser.add_argument("--plot", type=Path, default=None, help="also write the training figure here (.png, .svg)")
    add_config_options(parser, EvolveConfig)
    ns = vars(parser.parse_args(argv))
    out, plot = ns.pop("out"), ns.pop("plot")
    return EvolveConfig(**ns), out, plot


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agents.evolve``: exit 0, 2 on a user error, 130 on Ctrl-C."""
    from schedgym._atomic import check_output_dir

    try:
        config, out, plot = parse_args(argv)
        check_output_dir("--out", out)
        if plot is not None:
            check_plot("--plot", plot, out)
        search(config, out, plot, log=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SchedGymError as exc:
        print(f"schedgym: error: {exc}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "EvolveConfig",
    "EvolvedPolicy",
    "PlanScoreNetwork",
    "coordinate_steps",
    "es_steps",
    "fitness",
    "legal_rows",
    "load_evolved",
    "main",
    "play",
    "search",
]

if __name__ == "__main__":
    raise SystemExit(main())

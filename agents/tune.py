"""Search training hyperparameters on Ray Tune: ``schedgym tune`` (the ``tune`` extra).

Reads top to bottom: the search space (what can be searched, and the ``FIELD=KIND:VALUES`` syntax), the
configuration, the trials drawn from it, the trainable that runs one trial in a Ray worker, the run, and its
outputs (the ranked table, the JSON, the ``schedgym train`` command that reproduces the best trial).

Each trial is one :func:`agents.train.train` run whose every validation evaluation is reported to Tune
(:func:`ray.tune.report`). Trials are ranked on the validation figures (slowdown percentiles by class, or
their unweighted ``objective``), never on returns, whose scale changes with the reward weights being searched.

Determinism: the trials' configurations are drawn here, before Tune starts, from ``--seed`` (numpy), and
trial ``i`` trains with seed ``--seed + i``; the same command draws the same trials and, with ``--scheduler
fifo``, gets the same figures, on one machine or a cluster. Under ``asha`` which trials stop early can
depend on the order in which concurrent trials report.

Failures: a trial whose worker process or node is lost is started again by Tune (``max_failures``), from the
beginning, since the trainable saves no checkpoint; it reports the same figures. A trial that fails by its own
error is not trained again: its retries raise the recorded error (:data:`FAILED_FILE`).

Ray is imported only inside the functions that run the search (:func:`import_tune`); everything up to
:func:`plan_trials` works without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import itertools
import json
import math
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.train import TrainConfig, new_run_dir
from schedgym._atomic import atomic_open
from schedgym._csvio import parse_bool, parse_integer, parse_number
from schedgym._fielddocs import option_fields
from schedgym.cli import int_type
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.figures import BE_P95, HEADLINE_KEYS, TE_P95
from schedgym.limits import MAX_SEED

TUNE_INSTALL_HINT = "pip install 'schedgym[tune]'"
DISTRIBUTIONS = ("choice", "grid", "uniform", "loguniform", "randint")
"""``choice``: one of the values, drawn per trial; ``grid``: every value (the trials are the grid times
``num_samples``); ``uniform`` and ``loguniform``: a number from LOW to HIGH (numbers fields); ``randint``: an
integer from LOW to HIGH, both included (integer fields)"""
METRICS = ("objective", *HEADLINE_KEYS)
"""what trials are ranked on (lower is better): a validation figure, or ``objective``, the mean of the TE and
BE 95th-percentile slowdowns"""
SCHEDULERS = ("fifo", "asha")
"""``fifo``: every trial trains to the end; ``asha``: Tune's ASHA stops trials whose figure is in the worse
part at an evaluation"""
MAX_TRIALS = 10_000
MAX_CHOICES = 1_000
MAX_FAILURES = 100
"""retries of one trial at most (Tune's ``FailureConfig(max_failures=...)``; its -1, for ever, is not offered)"""
FAILED_FILE = "trial_error.txt"
"""in a trial's folder: the error that ended an attempt of the trial by its own fault, which a retry raises
again instead of training again"""

# --- what can be searched

_TASK = (
    "it defines the task and its validation workloads, which every trial must share to be ranked on them; "
    "set it for every trial with --env-kwargs"
)
_MEASURE = "it sets how trials are measured, which must be the same for every trial; set it with its own option"
NOT_SEARCHABLE = {
    "env_id": "the environment is the task, the same for every trial",
    "env_kwargs": "search its fields one by one as env.FIELD (env.preemption_cost, ...)",
    "workloads": _TASK.replace("--env-kwargs", "--workloads"),
    "seed": "trial i trains with --seed + i",
    "total_timesteps": "it is every trial's budget (ASHA's max_t); set it with --total-timesteps",
    "eval_freq": _MEASURE,
    "n_eval_workloads": _MEASURE,
    "eval_baselines": _MEASURE,
    "run_dir": "set --run-dir",
    "tensorboard": "it changes no result; set it with --tensorboard or --no-tensorboard",
    "progress": "trials show no progress bar",
    "torch_threads": "every trial trains with one torch thread (it requests one CPU)",
    "address": "it says where the trials' training runs, not what it is: tune's own --address places the trials",
    "max_env_runner_restarts": "it says how training survives a lost env runner, not what it trains",
}
"""TrainConfig fields that are never searched, and why"""
ENV_SEARCHABLE = ("max_candidates", "reward", "te_weight", "be_weight", "preemption_cost")
"""EnvConfig fields searchable as ``env.FIELD``: the agent's view and its reward. The others (workload,
cluster, n_jobs, load, sim, estimate_noise, ...) define the task and its validation workloads."""

_TYPES = {
    "float": "float",
    "int": "int",
    "bool": "bool",
    "str": "str",
    "str | None": "name_or_none",
    "tuple[int, ...]": "layers",
}
"""a dataclass field's annotation -> the kind of value its search takes"""
_DESCRIBE = {
    "float": "a number",
    "int": "an integer",
    "bool": "true or false",
    "str": "a name",
    "name_or_none": "a name or none",
    "layers": "layer sizes joined by x, such as 64x64",
}


def searchable_fields() -> dict[str, str]:
    """Every searchable name (a TrainConfig field, or ``env.`` and an EnvConfig field) -> the kind of its
    values (float, int, bool, str, name_or_none, layers)."""
    from schedgym.envs import EnvConfig

    out = {}
    for f, _ in option_fields(TrainConfig):
        kind = _TYPES.get(str(f.type))
        if f.name not in NOT_SEARCHABLE and kind is not None:
            out[f.name] = kind
    types = {f.name: str(f.type) for f in dataclasses.fields(EnvConfig)}
    for name in ENV_SEARCHABLE:
        out[f"env.{name}"] = _TYPES[types[name]]
    return out


def _field_kind(name: str) -> str:
    """The kind of ``name``'s values, or a :class:`ConfigError` saying why it cannot be searched."""
    from schedgym.envs import EnvConfig

    fields = searchable_fields()
    if name in fields:
        return fields[name]
    if name in NOT_SEARCHABLE:
        raise ConfigError(f"{name} cannot be searched: {NOT_SEARCHABLE[name]}")
    env_fields = [f.name for f in dataclasses.fields(EnvConfig)]
    if name.startswith("env.") and name[4:] in env_fields:
        raise ConfigError(f"{name} cannot be searched: {_TASK}")
    known = [*fields, *NOT_SEARCHABLE, *(f"env.{n}" for n in env_fields)]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"unknown field {name!r}{hint}; searchable: {', '.join(fields)}")


def _parse_value(kind: str, text: str) -> Any:
    text = text.strip()
    value: Any = None
    if kind == "float":
        value = parse_number(text)
    elif kind == "int":
        value = parse_integer(text)
    elif kind == "bool":
        value = parse_bool(text)
    elif kind == "name_or_none" and text.lower() in ("none", "null"):
        return None
    elif kind in ("str", "name_or_none"):
        value = text or None
    elif kind == "layers":
        sizes = [parse_integer(x) for x in text.split("x")]
        if 1 <= len(sizes) <= 64 and all(v is not None and 1 <= v <= 1_000_000 for v in sizes):
            value = tuple(sizes)
    if value is None:
        raise ConfigError(f"Expected {_DESCRIBE[kind]}, got {text!r}")
    return value


def _show(value: Any) -> str:
    """A value as written in a search or a table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)):
        return "x".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Search:
    """One searched field: ``name`` (``learning_rate``, or ``env.preemption_cost`` for an EnvConfig field),
    its distribution ``kind`` (one of :data:`DISTRIBUTIONS`) and ``values`` (the choices, or LOW and HIGH)."""

    name: str
    kind: str
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        field_kind = _field_kind(self.name)
        if self.kind not in DISTRIBUTIONS:
            close = difflib.get_close_matches(str(self.kind), DISTRIBUTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"Expected a distribution in {list(DISTRIBUTIONS)}, got {self.kind!r}{hint}")
        object.__setattr__(self, "values", tuple(self.values))
        if self.kind in ("choice", "grid"):
            if not 1 <= len(self.values) <= MAX_CHOICES:
                raise ConfigError(f"Expected 1 to {MAX_CHOICES} values, got {len(self.values)}")
            if len(set(self.values)) != len(self.values):
                hint = (
                    " (a value of net_arch is its layer sizes joined by x: 64x64,128x128)"
                    if field_kind == "layers"
                    else ""
                )
                raise ConfigError(f"Expected distinct values, got {','.join(map(_show, self.values))}{hint}")
            return
        wanted = "int" if self.kind == "randint" else "float"
        if field_kind != wanted:
            other = {"int": "randint or choice", "float": "uniform, loguniform or choice"}.get(field_kind, "choice")
            raise ConfigError(
                f"{self.kind} applies to fields that take {_DESCRIBE[wanted]}; "
                f"{self.name} takes {_DESCRIBE[field_kind]}: use {other}"
            )
        if len(self.values) != 2:
            raise ConfigError(f"Expected {self.kind}:LOW,HIGH (two values), got {len(self.values)} values")
        number, what = (int, "integers") if self.kind == "randint" else ((int, float), "numbers")
        if not all(isinstance(v, number) and not isinstance(v, bool) and math.isfinite(v) for v in self.values):
            raise ConfigError(f"Expected LOW and HIGH to be finite {what}, got {self.values!r}")
        low, high = self.values
        if not low < high:
            raise ConfigError(f"Expected LOW < HIGH, got {_show(low)},{_show(high)}")
        if self.kind == "loguniform" and not low > 0:
            raise ConfigError(f"Expected loguniform's LOW > 0, got {_show(low)}")

    @property
    def text(self) -> str:
        """As written on the command line: ``learning_rate=loguniform:0.0001,0.001``."""
        return f"{self.name}={self.kind}:{','.join(_show(v) for v in self.values)}"

    def draw(self, rng: np.random.Generator) -> Any:
        """One value for a trial (``grid`` is not drawn: every value is used)."""
        if self.kind == "choice":
            return self.values[int(rng.integers(len(self.values)))]
        low, high = self.values
        if self.kind == "uniform":
            return float(rng.uniform(low, high))
        if self.kind == "loguniform":
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        if self.kind == "randint":
            return int(rng.integers(low, high + 1))
        raise AssertionError(f"{self.kind} is not drawn")


def parse_search(spec: str) -> Search:
    """``FIELD=KIND:VALUES`` (``learning_rate=loguniform:1e-4,1e-3``, ``env.reward=choice:slowdown,
    bounded_slowdown``, ``net_arch=grid:64x64,128x128``) as a :class:`Search`; a :class:`ConfigError`
    naming the spec otherwise."""
    try:
        name, sep, rest = spec.partition("=")
        kind, sep2, values = rest.partition(":")
        if not (sep and sep2 and name.strip() and kind.strip() and values.strip()):
            raise ConfigError("Expected FIELD=KIND:VALUES, such as learning_rate=loguniform:1e-4,1e-3")
        name, kind = name.strip(), kind.strip()
        field_kind = _field_kind(name)
        texts = tuple(values.split(","))
        fits = (
            kind in ("choice", "grid")
            or {"uniform": "float", "loguniform": "float", "randint": "int"}.get(kind) == field_kind
        )
        # Values are read only where the distribution fits the field; otherwise Search says why it does not.
        return Search(name, kind, tuple(_parse_value(field_kind, t) for t in texts) if fits else texts)
    except ConfigError as exc:
        raise ConfigError(f"--search {spec!r}: {exc}") from None


# --- the configuration and its trials


TUNE_SETS = ("run_dir", "progress", "torch_threads")
"""TrainConfig fields tune sets for every trial (:func:`trial_kwargs`): never given by the user"""
_SEED_HELP = "the first trial's seed (trial i trains with seed + i), and the seed of the draws"


@dataclass(frozen=True)
class TuneConfig:
    """Everything one search depends on. ``search`` holds :class:`Search` objects; their text
    (``FIELD=KIND:VALUES``, :func:`parse_search`) is read as well. ``schedgym tune`` offers one option per
    field (the ``train`` field: one per TrainConfig option, as ``schedgym train`` does, but those tune sets
    or has itself)."""

    search: tuple[Search, ...] = field(
        default=(), metadata={"cli": {"action": "append", "metavar": "FIELD=KIND:VALUES", "default": []}}
    )
    """a searched field, KIND one of choice, grid, uniform, loguniform, randint: learning_rate=loguniform:1e-4,1e-3,
    ent_coef=choice:0,0.01, env.preemption_cost=uniform:0,5, net_arch=grid:64x64,128x128, n_steps=randint:256,1024
    (both bounds included); repeat for each field (docs/tune.md lists the fields); none: trials that differ only
    in their seed"""
    num_samples: int = field(default=8, metadata={"cli": {"type": int_type(1, MAX_TRIALS)}})
    """trials drawn, times every combination of the grid fields"""
    max_concurrent: int | None = field(default=None, metadata={"cli": {"type": int_type(1, 4096)}})
    """trials at once (None: as many as the Ray cluster has CPUs; each trial requests one)"""
    metric: str = field(default="objective", metadata={"cli": {"choices": METRICS}})
    """what trials are ranked on, lower is better: a validation slowdown figure, or objective = (te_p95 + be_p95) / 2"""
    scheduler: str = field(default="fifo", metadata={"cli": {"choices": SCHEDULERS}})
    """fifo (every trial trains to the end) or asha (stops the worse trials at their evaluations)"""
    address: str | None = field(default=None, metadata={"cli": {"metavar": "auto|HOST:PORT"}})
    """the running Ray cluster to use ('auto': the one 'ray start --head' started on this machine, or HOST:PORT);
    None starts a local Ray for this search and stops it after"""
    max_failures: int = field(default=2, metadata={"cli": {"type": int_type(0, MAX_FAILURES), "metavar": "N"}})
    """times a trial whose worker process or node was lost is started again, from the beginning (trials keep no
    checkpoint; with the same seed it reports the same figures); a trial failing by its own error is not trained
    again; 0: a lost trial stays failed"""
    run_dir: str = "runs"
    """where the search is written: {run_dir}/tune__{env_id with / as _}__{seed}__{timestamp}/ with Tune's
    results, each trial's training run and tune.json"""
    train: Mapping[str, Any] = field(
        default_factory=dict,
        metadata={"cli": {"options": TrainConfig, "skip": TUNE_SETS, "helps": {"seed": _SEED_HELP}}},
    )
    """TrainConfig fields every trial shares (``seed``: the first trial's; trial i trains with seed + i)"""

    def __post_init__(self) -> None:
        object.__setattr__(self, "train", dict(self.train))
        searches = (parse_search(s) if isinstance(s, str) else s for s in self.search)  # the command line's text
        object.__setattr__(self, "search", tuple(searches))
        forced = sorted(set(TUNE_SETS) & set(self.train))
        if forced:
            raise ConfigError(f"Expected no {', '.join(forced)} among the trials' TrainConfig fields (tune sets them)")
        self._check_own_fields()
        base = self.base()
        if self.n_trials > MAX_TRIALS:
            raise ConfigError(f"Expected at most {MAX_TRIALS:,} trials (num_samples x the grid), got {self.n_trials:,}")
        common = base.common
        if common.seed + self.n_trials - 1 > MAX_SEED:
            raise ConfigError(
                f"Expected seed + trials - 1 <= {MAX_SEED}, got seed {common.seed} and {self.n_trials} trials"
            )
        if self.scheduler == "asha" and not 0 < common.eval_freq < common.total_timesteps:
            raise ConfigError(
                "Expected eval_freq from 1 to total_timesteps - 1 with scheduler asha (ASHA stops trials at their "
                f"evaluations), got eval_freq {common.eval_freq} and total_timesteps {common.total_timesteps}"
            )
        for search in self.search:  # every value a trial could take is checked now, drawn or not
            for value in search.values:
                try:
                    TrainConfig.of(**trial_kwargs(self.train, {search.name: value}, common.seed, self.run_dir))
                except ConfigError as exc:
                    raise ConfigError(f"--search {search.text!r}: {exc}") from None

    def _check_own_fields(self) -> None:
        for name in ("num_samples", "max_concurrent"):
            value = getattr(self, name)
            if value is None and name == "max_concurrent":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"Expected {name} > 0, got {value!r}")
        failures = self.max_failures
        if not isinstance(failures, int) or isinstance(failures, bool) or not 0 <= failures <= MAX_FAILURES:
            raise ConfigError(f"Expected max_failures from 0 to {MAX_FAILURES}, got {failures!r}")
        if self.metric not in METRICS:
            raise ConfigError(f"Expected metric in {list(METRICS)}, got {self.metric!r}")
        if self.scheduler not in SCHEDULERS:
            raise ConfigError(f"Expected scheduler in {list(SCHEDULERS)}, got {self.scheduler!r}")
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise ConfigError(f"Expected a Ray address ('auto' or HOST:PORT), got {self.address!r}")
        if not isinstance(self.run_dir, str) or not self.run_dir.strip():
            raise ConfigError(f"Expected run_dir to name a directory, got {self.run_dir!r}")
        if not all(isinstance(s, Search) for s in self.search):
            raise ConfigError(f"Expected search to hold Search objects (parse_search), got {self.search!r}")
        names = [s.name for s in self.search]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"Expected each field searched once, got {', '.join(twice)} more than once")

    def base(self) -> TrainConfig:
        """The shared TrainConfig (validated), as trial 0 would get it without its searched values."""
        known = TrainConfig.option_names()
        for key in self.train:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"Expected TrainConfig fields in train, got {key!r}{hint}")
        return TrainConfig.of(**trial_kwargs(self.train, {}, self.train.get("seed", 0), self.run_dir))

    @property
    def n_trials(self) -> int:
        return self.num_samples * math.prod(len(s.values) for s in self.search if s.kind == "grid")


@dataclass(frozen=True)
class Trial:
    """One trial: its ``index`` (its place in the draw), its training ``seed``, and its searched values."""

    index: int
    seed: int
    params: dict[str, Any]


def trial_kwargs(train: Mapping[str, Any], params: Mapping[str, Any], seed: int, run_dir: str) -> dict[str, Any]:
    """A trial's TrainConfig keyword arguments: the shared ``train`` fields with the searched ``params``
    (``env.FIELD`` into ``env_kwargs``), its seed, one torch thread, no progress bar, its own ``run_dir``."""
    kwargs = {**train, "seed": seed, "torch_threads": 1, "progress": False, "run_dir": run_dir}
    env = dict(kwargs.get("env_kwargs") or {})
    for name, value in params.items():
        if name.startswith("env."):
            env[name[4:]] = value
        else:
            kwargs[name] = value
    kwargs["env_kwargs"] = env
    return kwargs


_DRAWS = 0x7475  # apart from the training seeds: the draws do not share a stream with trial 0's training


def plan_trials(config: TuneConfig) -> list[Trial]:
    """Every trial of ``config``, drawn from its seed: for each of ``num_samples`` samples, every combination
    of the ``grid`` fields (in the order of the search), the other fields drawn in that order. Each trial's
    TrainConfig is checked, so that no trial fails on its configuration after the search started."""
    base = config.base()
    rng = np.random.default_rng(np.random.SeedSequence([base.common.seed, _DRAWS]))
    grids = [s for s in config.search if s.kind == "grid"]
    trials: list[Trial] = []
    for _ in range(config.num_samples):
        for combo in itertools.product(*(g.values for g in grids)):
            fixed = dict(zip((g.name for g in grids), combo, strict=True))
            params = {s.name: fixed[s.name] if s.kind == "grid" else s.draw(rng) for s in config.search}
            index = len(trials)
            trial = Trial(index, base.common.seed + index, params)
            try:
                TrainConfig.of(**trial_kwargs(config.train, params, trial.seed, config.run_dir))
            except ConfigError as exc:
                shown = ", ".join(f"{k}={_show(v)}" for k, v in params.items())
                raise ConfigError(f"trial {index} ({shown}): {exc}") from None
            trials.append(trial)
    return trials


def check_experts(config: TuneConfig, trials: Sequence[Trial]) -> None:
    """Read every saved agent (``imitate`` ``NAME:PATH``) a trial would imitate, once each, before Ray or any
    trial starts: a missing or damaged file is one line now, not an error in every trial after the set-up."""
    from agents.train import load_expert

    shared = config.train.get("imitate")
    specs = {t.params.get("imitate", shared) for t in trials}
    for spec in sorted(s for s in specs if isinstance(s, str) and ":" in s):
        load_expert(spec)


# --- one trial, in a Ray worker


def validation_figures(stats: Mapping[str, Any]) -> dict[str, float]:
    """The :data:`METRICS` of one evaluation (:func:`agents.train.train`'s statistics): each figure the mean
    over the training workloads (NaN if a workload has none), and ``objective`` = (te_p95 + be_p95) / 2."""
    per = [w["figures"] for w in stats["workloads"].values()]
    figures = {f: float(np.mean([p[f] for p in per])) for f in HEADLINE_KEYS}
    return {"objective": (figures[TE_P95.key] + figures[BE_P95.key]) / 2, **figures}


def run_trial(config: dict[str, Any], train: dict[str, Any], root: str) -> None:
    """Tune's trainable: train trial ``config["trial"]`` into ``{root}/trials/{index:03d}/``, reporting every
    evaluation's validation figures (and the return, for information) to Tune."""
    from ray import tune

    from agents.train import train as train_run

    trial = config["trial"]
    run_dir = Path(root) / "trials" / f"{trial['index']:03d}"
    _start_attempt(run_dir)
    reported = []

    def report(stats: dict[str, Any]) -> None:
        metrics = {**validation_figures(stats), "timesteps": int(stats["timesteps"]), "score": stats["score"]}
        metrics.update(mean_return=stats["mean_return"], final=bool(stats.get("final", False)))
        reported.append(metrics)
        tune.report(metrics)

    train_config = TrainConfig.of(**trial_kwargs(train, trial["params"], trial["seed"], str(run_dir)))
    # What training prints goes to the trial's folder, not between the driver's lines. Opened and closed by the
    # thread that trains, the file stays open as long as that thread may print (Tune's log_to_file closes its
    # streams when it stops a trial, while the thread can still be finishing an evaluation).
    try:
        with open(run_dir / "train.log", "w", encoding="utf-8") as log, contextlib.redirect_stdout(log):
            train_run(train_config, on_evaluation=report)
        if not reported:  # an algorithm whose training never calls on_evaluation cannot be ranked
            raise SchedGymError(f"trial {trial['index']}: training reported no validation evaluation")
    except Exception as exc:
        if not _lost_worker(exc):
            _record_failure(run_dir, exc)
        raise


def _start_attempt(run_dir: Path) -> None:
    """Make the trial's folder ready for an attempt. An earlier attempt that failed by its own error left
    :data:`FAILED_FILE`: that error is raised again, since training again would fail the same way (Tune's
    ``max_failures`` retries every failure). An earlier attempt whose worker or node was lost left an
    unfinished run: it is removed, and the trial trains from the beginning (it keeps no checkpoint)."""
    import shutil

    failed = run_dir / FAILED_FILE
    if failed.is_file():
        recorded = failed.read_text(encoding="utf-8").strip()
        raise SchedGymError(f"{recorded} (an earlier attempt's own error: raised again without training)")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)


def _lost_worker(exc: BaseException) -> bool:
    """Whether ``exc`` says a Ray process or node this trial used was lost (retried), not that the trial
    failed by itself (not retried)."""
    from ray import exceptions

    lost = (
        exceptions.RayActorError,
        exceptions.WorkerCrashedError,
        exceptions.NodeDiedError,
        exceptions.ObjectLostError,
        exceptions.LocalRayletDiedError,
    )
    return isinstance(exc, lost)


def _record_failure(run_dir: Path, exc: BaseException) -> None:
    """:data:`FAILED_FILE` with the error's last line (its type too, but for schedgym's own one-line errors),
    written atomically; if it cannot be written (a full disk), a retry trains again."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    if not isinstance(exc, SchedGymError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    with contextlib.suppress(OSError, SchedGymError), atomic_open(run_dir / FAILED_FILE) as fh:
        fh.write(text + "\n")


# --- the search


@dataclass(frozen=True)
class TrialOutcome:
    """What became of one trial: ``status`` finished (trained to the end), stopped (by ASHA) or error;
    its last reported figures (NaN where none) at ``timesteps``; its training run folder and final model
    where they are on this machine."""

    trial: Trial
    status: str
    figures: dict[str, float]
    timesteps: int | None
    run_dir: str | None = None
    model: str | None = None
    error: str | None = None
    retries: int = 0
    """times Tune started the trial again after a failure (its figures are the last attempt's)"""


@dataclass(frozen=True)
class TuneResult:
    """A finished search: its configuration, folder, and outcomes ranked best first (finished trials by the
    metric, then those ASHA stopped, then failures; NaN last in each)."""

    config: TuneConfig
    run_dir: Path
    outcomes: list[TrialOutcome]
    seconds: float

    @property
    def best(self) -> TrialOutcome | None:
        """The best trial that trained to the end with a finite metric."""
        for outcome in self.outcomes:
            if outcome.status == "finished" and math.isfinite(outcome.figures[self.config.metric]):
                return outcome
        return None


def import_tune() -> tuple[Any, Any]:
    """``ray`` and ``ray.tune``, or a :class:`ConfigError` saying how to install them; the training
    packages are checked too (the trials need them)."""
    import importlib.util

    try:
        import ray
        from ray import tune
    except ImportError:
        raise ConfigError(f"schedgym tune needs Ray Tune, which is not installed ({TUNE_INSTALL_HINT})") from None
    for module in ("torch", "stable_baselines3", "sb3_contrib"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"schedgym tune trains with {module}, which is not installed ({TUNE_INSTALL_HINT})")
    return ray, tune


def run_tune(config: TuneConfig, log: Callable[[str], None] = print) -> TuneResult:
    """Run the search on Ray Tune (a local Ray started and stopped here, or ``config.address``'s cluster;
    a Ray this process already initialised is used as it is) and write ``tune.json`` in its folder."""
    from agents.train import remove_empty_dirs
    from schedgym.experiments.executors import ExecutorConfig, ray_session

    trials = plan_trials(config)
    check_experts(config, trials)
    ray, tune = import_tune()
    base = config.base()
    t0 = time.perf_counter()
    with ray_session(ray, ExecutorConfig(kind="ray", address=config.address)):
        root = _new_run_dir(config, base)
        try:
            grid, retries = _fit(tune, config, base, trials, root, log)
            outcomes = collect_outcomes(config, trials, grid, root, retries)
        except BaseException:
            remove_empty_dirs(root)  # a search that failed before writing anything leaves no empty folder
            raise
    result = TuneResult(config, root, outcomes, time.perf_counter() - t0)
    write_json(root / "tune.json", result)
    return result


def _new_run_dir(config: TuneConfig, base: TrainConfig) -> Path:
    """Create the search's folder, ``{run_dir}/tune__{env}__{seed}__{time}`` (``-2``, ``-3``, ... appended as
    :func:`agents.train.new_run_dir` does)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    stem = Path(config.run_dir).resolve() / f"tune__{base.common.env_id.replace('/', '_')}__{base.common.seed}__{stamp}"
    return new_run_dir(stem)[0]


def _trial_dirname(trial: Any) -> str:
    return f"trial_{trial.config['trial']['index']:03d}"


def _fit(
    tune: Any, config: TuneConfig, base: TrainConfig, trials: Sequence[Trial], root: Path, log: Callable
) -> tuple[Any, dict[int, int]]:
    """Tune's ResultGrid of the trials, and how often each trial was started again (trial index -> count)."""
    import os

    scheduler = None
    if config.scheduler == "asha":
        from ray.tune.schedulers import ASHAScheduler

        # max_t beyond the last evaluation (SB3 rounds the steps up to whole rollouts): a trial that trains to the
        # end finishes by itself; ASHA stops a trial at max_t before its final evaluation otherwise.
        common = base.common
        end = common.total_timesteps + base.model.n_steps * common.n_envs + 1
        scheduler = ASHAScheduler(time_attr="timesteps", max_t=end, grace_period=common.eval_freq)
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, train=dict(config.train), root=str(root)), {"cpu": 1}
    )
    space = [{"index": t.index, "seed": t.seed, "params": t.params} for t in trials]
    progress = _progress(tune, config.metric, len(trials), log)
    tuner = tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(space)},
        tune_config=tune.TuneConfig(
            metric=config.metric,
            mode="min",
            num_samples=1,  # the trials are drawn already: one Tune trial per element of the grid
            max_concurrent_trials=config.max_concurrent,
            scheduler=scheduler,
            trial_dirname_creator=_trial_dirname,
        ),
        run_config=tune.RunConfig(
            name="tune",
            storage_path=str(root),  # not ~/ray_results
            verbose=0,
            # Tune starts a failed trial again; without a checkpoint (run_trial saves none) from the beginning.
            failure_config=tune.FailureConfig(max_failures=config.max_failures),
            callbacks=[progress],
        ),
    )
    # Tune's newer console output prints a banner even at verbose 0; the older one stays quiet there, and
    # our callback says what happens.
    saved = os.environ.get("RAY_AIR_NEW_OUTPUT")
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    try:
        return tuner.fit(), progress.retries
    finally:
        if saved is None:
            os.environ.pop("RAY_AIR_NEW_OUTPUT", None)
        else:
            os.environ["RAY_AIR_NEW_OUTPUT"] = saved


def _progress(tune: Any, metric: str, n: int, log: Callable[[str], None]) -> Any:
    """A Tune callback printing one line per trial that ends."""

    class Progress(tune.Callback):
        def __init__(self) -> None:
            self.ended = 0
            self.retries: dict[int, int] = {}
            """trial index -> times Tune started it again"""

        def _line(self, trial: Any, what: str) -> None:
            self.ended += 1
            last = trial.last_result or {}
            value = last.get(metric)
            shown = f", {metric} {value:.3f} at {last.get('timesteps', 0):,} steps" if value is not None else ""
            log(f"trial {trial.config['trial']['index']} {what}{shown} ({self.ended} of {n} ended)")

        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self._line(trial, "finished" if (trial.last_result or {}).get("final") else "stopped")

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self._line(trial, "failed")

        def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            index = trial.config["trial"]["index"]
            self.retries[index] = self.retries.get(index, 0) + 1
            log(f"trial {index} failed; starting it again from the beginning (retry {self.retries[index]})")

    return Progress()


_STATUS_ORDER = {"finished": 0, "stopped": 1, "error": 2}


def collect_outcomes(
    config: TuneConfig,
    trials: Sequence[Trial],
    results: Any,
    root: Path,
    retries: Mapping[int, int] | None = None,
) -> list[TrialOutcome]:
    """Each trial's outcome from Tune's ``results`` (a ResultGrid: objects with ``config``, ``metrics`` and
    ``error``), ranked as :class:`TuneResult` says; a trial's run folder is looked up under ``root``;
    ``retries``: how often Tune started each trial again (trial index -> count)."""
    by_index = {t.index: t for t in trials}
    outcomes = []
    for result in results:
        trial = by_index[result.config["trial"]["index"]]
        metrics = result.metrics or {}
        figures = {m: float(metrics.get(m, math.nan)) for m in METRICS}
        error = None
        if result.error is not None:
            lines = [line.strip() for line in str(result.error).splitlines() if line.strip()]
            error = lines[-1] if lines else type(result.error).__name__
        # Tune marks a trial ASHA stopped "done" too: "final" says the trial reported its final evaluation.
        status = "error" if error else ("finished" if metrics.get("final") else "stopped")
        runs = sorted(p for p in (root / "trials" / f"{trial.index:03d}").glob("*") if p.is_dir())
        run_dir = runs[0] if len(runs) == 1 else None  # absent on this machine if another node trained it
        model = run_dir / "model.zip" if run_dir is not None and (run_dir / "model.zip").is_file() else None
        steps = metrics.get("timesteps")
        outcomes.append(
            TrialOutcome(
                trial,
                status,
                figures,
                int(steps) if steps is not None else None,
                str(run_dir) if run_dir else None,
                str(model) if model else None,
                error,
                (retries or {}).get(trial.index, 0),
            )
        )

    def rank(o: TrialOutcome) -> tuple:
        value = o.figures[config.metric]
        return (
            _STATUS_ORDER[o.status],
            not math.isfinite(value),
            value if math.isfinite(value) else 0.0,
            o.trial.index,
        )

    return sorted(outcomes, key=rank)


# --- outputs


def train_command(kwargs: Mapping[str, Any]) -> str:
    """The ``schedgym train`` command that trains with these TrainConfig keyword arguments: every field that
    differs from its default (but ``run_dir`` and ``progress``, which change no result)."""
    args = ["schedgym", "train"]
    for f, _ in option_fields(TrainConfig):
        if f.name in ("run_dir", "progress") or f.name not in kwargs:
            continue
        value = kwargs[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]
        if value == default or (isinstance(default, tuple) and tuple(value) == default):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, dict):  # env_kwargs, as --env-kwargs reads it
            args.append(f"{flag}={json.dumps(value, separators=(',', ':'))}")
        elif isinstance(value, (tuple, list)):
            args.append(f"{flag}={','.join(str(v) for v in value)}")
        else:
            args.append(f"{flag}={value!r}" if isinstance(value, float) else f"{flag}={value}")
    return shlex.join(args)


def best_command(result: TuneResult) -> str | None:
    """The ``schedgym train`` command that reproduces the best trial (None if no trial finished)."""
    best = result.best
    if best is None:
        return None
    config = result.config
    kwargs = trial_kwargs(config.train, best.trial.params, best.trial.seed, config.run_dir)
    return train_command(kwargs)


def _number(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "-"


def format_table(result: TuneResult) -> str:
    """The trials ranked best first: their searched values and validation figures."""
    config = result.config
    names = [s.name for s in config.search]
    header = ["rank", "trial", "seed", *names, *METRICS, "steps", "status"]
    rows = []
    for rank, o in enumerate(result.outcomes, 1):
        values = [f"{v:.4g}" if isinstance(v, float) else _show(v) for v in (o.trial.params[n] for n in names)]
        figures = [_number(o.figures[m]) for m in METRICS]
        steps = f"{o.timesteps:,}" if o.timesteps is not None else "-"
        rows.append([str(rank), str(o.trial.index), str(o.trial.seed), *values, *figures, steps, o.status])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"ranked on {config.metric} (lower is better; objective = (te_p95 + be_p95) / 2), validation figures:"]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    for o in result.outcomes:
        if o.error:
            lines.append(f"trial {o.trial.index} failed: {o.error}")
    return "\n".join(lines)


def to_json(result: TuneResult) -> dict[str, Any]:
    """The search as JSON-ready data (NaN and infinities as null)."""
    from agents.train import finite

    config = result.config
    best = result.best
    data = {
        "metric": config.metric,
        "mode": "min",
        "objective": "(te_p95 + be_p95) / 2 of the validation workloads",
        "scheduler": config.scheduler,
        "num_samples": config.num_samples,
        "max_failures": config.max_failures,
        "search": [s.text for s in config.search],
        "train_config": dict(config.train),
        "run_dir": str(result.run_dir),
        "seconds": result.seconds,
        "trials": [
            {
                "rank": rank,
                "index": o.trial.index,
                "seed": o.trial.seed,
                "status": o.status,
                "params": o.trial.params,
                "timesteps": o.timesteps,
                "figures": o.figures,
                "run_dir": o.run_dir,
                "model": o.model,
                "error": o.error,
                "retries": o.retries,
            }
            for rank, o in enumerate(result.outcomes, 1)
        ],
        "best": None
        if best is None
        else {
            "index": best.trial.index,
            "seed": best.trial.seed,
            "params": best.trial.params,
            "figures": best.figures,
            "model": best.model,
            "command": best_command(result),
        },
    }
    return finite(data)


def write_json(path: str | Path, result: TuneResult) -> None:
    """:func:`to_json`, written atomically."""
    text = json.dumps(to_json(result), indent=2, allow_nan=False) + "\n"
    with atomic_open(path) as fh:
        fh.write(text)


__all__ = [
    "DISTRIBUTIONS",
    "METRICS",
    "SCHEDULERS",
    "Search",
    "Trial",
    "TrialOutcome",
    "TuneConfig",
    "TuneResult",
    "best_command",
    "check_experts",
    "collect_outcomes",
    "format_table",
    "import_tune",
    "parse_search",
    "plan_trials",
    "run_trial",
    "run_tune",
    "searchable_fields",
    "to_json",
    "train_command",
    "trial_kwargs",
    "validation_figures",
    "write_json",
]

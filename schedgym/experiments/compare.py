"""Compare policies on identical workloads, the way the paper compares FitGpp with FIFO.

Each seed is one workload (see :class:`~schedgym.workloads.source.WorkloadSource`: an independent synthetic
draw, a test window of a bundled trace, or a replayed trace file), and every policy runs on that same
workload with the same seed. Top-level figures are means over seeds; ratios are taken to FIFO's means.
Statistics live in :mod:`schedgym.experiments.stats`, the table and files in
:mod:`schedgym.experiments.report`.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, overload

from schedgym import limits
from schedgym.errors import ConfigError
from schedgym.experiments import stats
from schedgym.experiments.executors import ExecutorConfig, RunOutcome, make_tasks, new_context, run_tasks
from schedgym.experiments.figures import HEADLINE
from schedgym.experiments.runstore import open_store
from schedgym.registry import check_spec
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.metrics import RunResult
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.distribution import MIX as MIX_DISTRIBUTION
from schedgym.workloads.distribution import draw_level, level_seed
from schedgym.workloads.source import WorkloadSource
from schedgym.workloads.synthetic import PRESETS, check_overrides, preset
from schedgym.workloads.trace import Workload

CLASS_FIELDS = ("slowdown_p50", "slowdown_p95", "slowdown_p99", "slowdown_mean", "wait_mean")
TOP_FIELDS = ("preemptions", "requests", "gpu_utilization")  # requests: preemption requests answered
PAIRED_REFERENCES = ("fitgpp", "k8s", "fifo")
EVALUATION_SPLITS = ("test", "validation")
"""the splits compare evaluates on (the training split is the environment's)"""
VERDICT_REFERENCES = ("fitgpp", "k8s")
"""the preemptive rules every policy is judged against, each taken alone"""


def dominance(paired: dict[str, Any]) -> str:
    """The verdict of one policy's paired differences to another (``ComparisonResult.summary()``'s
    ``paired[ref]``) over the headline figures (:data:`~schedgym.experiments.figures.HEADLINE`: issue 11's
    criterion), lower being better: ``"dominates"`` (no figure worse, at least one better), ``"dominated"``
    (the reverse), ``"equal"`` (none differs) or ``"mixed"``. A figure is better or worse when the 95% CI of
    the paired difference excludes 0; without an interval, never."""
    better = worse = 0
    for figure in HEADLINE:
        d = figure.in_summary(paired)
        mean, half = d["mean"], d["ci95"]
        if math.isnan(mean) or math.isnan(half):
            continue
        better += mean + half < 0
        worse += mean - half > 0
    if better and not worse:
        return "dominates"
    if worse and not better:
        return "dominated"
    return "equal" if not better else "mixed"


def _check_policies(policies: Sequence[str]) -> None:
    """At least one, each known (now, not after the simulation), no two with one label."""
    if not policies:
        raise ConfigError("Expected at least one policy, got none")
    labels = [check_spec(p) for p in policies]
    if len(set(labels)) != len(labels):
        dup = next(lb for lb in labels if labels.count(lb) > 1)
        raise ConfigError(
            f"Expected distinct policies, got {list(policies)}: two are labelled {dup!r} "
            "(give a saved agent its own NAME:PATH)"
        )


@dataclass(frozen=True)
class CompareConfig:
    """What to compare, on what."""

    policies: tuple[str, ...] = ("fifo", "priority", "k8s", "fitgpp", "ppo", "lean-ppo")
    """policy specs, resolved through the registry (``NAME`` or ``NAME:PATH``)"""
    workload: str | None = "paper"
    """synthetic preset or bundled trace; with ``trace``, None or the default (another name is refused: the
    trace would win without a word)"""
    trace: str | None = None
    """path to a trace CSV; every seed then replays the same trace"""
    cluster: str | None = None
    """cluster preset name or path to a cluster CSV (None: the workload's own, 'paper' for synthetic ones)"""
    seeds: int = 0
    """number of workloads (seeds first_seed, first_seed+1, ...); 0: 20, or every test window of a bundled
    trace that has fewer"""
    first_seed: int = 0
    """first seed"""
    n_jobs: int | None = None
    """jobs per synthetic workload (None: the preset's)"""
    load: float | None = None
    """offered GPU load of a synthetic workload (None: the preset's)"""
    sim: SimConfig = field(default_factory=SimConfig)
    """simulator rules; its ``queue`` is replaced by each policy's own"""
    synthetic: tuple[tuple[str, Any], ...] = ()
    """other fields of a synthetic workload's preset replaced, ``(field, value)`` pairs of
    :class:`~schedgym.workloads.synthetic.SyntheticConfig` (a mapping is taken too; ``n_jobs`` and ``load`` are
    the fields above); checked with the workload (:class:`~schedgym.workloads.source.WorkloadSource`)"""

    split: str = "test"
    """which evaluation workloads seed ``i`` is: ``test`` (the default, what results are reported on) or
    ``validation`` (for model selection: synthetic seed 100,000 + ``i``, a bundled trace's validation window
    ``i``, ``mix`` level 100,000 + ``i``; docs/workloads.md)"""

    def __post_init__(self) -> None:
        if self.split not in EVALUATION_SPLITS:
            raise ConfigError(f"Expected split in {list(EVALUATION_SPLITS)}, got {self.split!r}")
        if self.trace is not None and self.workload not in (None, "paper"):
            raise ConfigError(
                f"Expected no workload with trace (every seed replays the trace file), got workload "
                f"{self.workload!r} and trace {self.trace!r}; pass one of them"
            )
        _check_policies(self.policies)
        # Checked here, before the source is made, so that the message names the option (--load) and the
        # workload's own reason; the source's check would say the same without the option's name.
        kind = WorkloadSource(workload=self.workload, trace=self.trace).kind if self.load is not None else None
        if kind is not None and kind != "synthetic":
            why = "'mix' draws its load per level" if kind == "mix" else f"{self.trace or self.workload!r} is a trace"
            raise ConfigError(f"--load applies to synthetic workloads ({', '.join(sorted(PRESETS))}); {why}")
        # first_seed first: the default seed count is the windows left after it.
        if not isinstance(self.first_seed, int) or isinstance(self.first_seed, bool) or self.first_seed < 0:
            raise ConfigError(f"Expected first_seed >= 0, got {self.first_seed!r}")
        if self.seeds == 0 and not isinstance(self.seeds, bool):
            available_windows = self.source.n_evaluation(self.split) if self.trace is None and self.workload else None
            if available_windows is not None and self.first_seed >= available_windows:
                # Otherwise the default would be 0 seeds and the error "Expected seeds > 0", which the user
                # never gave.
                raise ConfigError(
                    f"Workload {self.workload!r} has {available_windows} {self.split} windows (0 to "
                    f"{available_windows - 1}); --first-seed {self.first_seed} is past them"
                )
            default = 20 if available_windows is None else min(20, available_windows - self.first_seed)
            object.__setattr__(self, "seeds", default)
        if not isinstance(self.seeds, int) or isinstance(self.seeds, bool) or self.seeds < 1:
            raise ConfigError(f"Expected seeds > 0, got {self.seeds!r}")
        if self.seeds > limits.MAX_SEEDS:
            raise ConfigError(
                f"Expected at most {limits.MAX_SEEDS:,} seeds (schedgym.limits.MAX_SEEDS), got {self.seeds}"
            )
        if self.first_seed + self.seeds - 1 > limits.MAX_SEED:
            raise ConfigError(
                f"Expected seeds within 0..{limits.MAX_SEED} (schedgym.limits.MAX_SEED), got first seed "
                f"{self.first_seed} and {self.seeds} seeds"
            )
        if self.n_jobs is not None and (
            not isinstance(self.n_jobs, int) or isinstance(self.n_jobs, bool) or not 1 <= self.n_jobs <= limits.MAX_JOBS
        ):
            raise ConfigError(
                f"Expected n_jobs from 1 to {limits.MAX_JOBS:,} (schedgym.limits.MAX_JOBS), got {self.n_jobs!r}"
            )
        if self.trace is None and self.workload is None:
            raise ConfigError("Expected a workload name or a trace path")
        if self.trace is not None and self.split != "test":
            raise ConfigError(f"--split {self.split} applies to named workloads; a trace file is replayed whole")
        object.__setattr__(self, "synthetic", check_overrides(self.synthetic))  # hashable, whatever was given
        source = self.source  # checks the workload name, n_jobs, load and the synthetic overrides
        if source.kind == "mix":
            if self.cluster is not None:
                raise ConfigError("--cluster does not apply to 'mix': each level draws its own cluster")
            if self.n_jobs is not None:
                raise ConfigError("--jobs does not apply to 'mix': each level draws its own n_jobs")
            level_seed(self.split, self.first_seed + self.seeds - 1)  # within the split's levels
            check_total_jobs(self.seeds, MIX_DISTRIBUTION.n_jobs[1], len(self.policies))
        if self.n_jobs is not None and source.kind != "synthetic":
            raise ConfigError(
                f"--jobs applies to synthetic workloads; {source.name!r} is a trace (cut the file, or use its windows)"
            )
        check_runs(len(self.policies), 1, self.seeds)
        if source.kind == "synthetic":
            check_total_jobs(
                self.seeds,
                self.n_jobs if self.n_jobs is not None else preset(source.name).n_jobs,
                len(self.policies),
            )
        available = source.n_evaluation(self.split)
        if available is not None and self.first_seed + self.seeds > available:
            raise ConfigError(
                f"Workload {self.workload!r} has {available} {self.split} windows; "
                f"--first-seed {self.first_seed} --seeds {self.seeds} asks for more"
            )

    @property
    def source(self) -> WorkloadSource:
        return WorkloadSource(
            workload=self.workload,
            trace=self.trace,
            n_jobs=self.n_jobs,
            load=self.load,
            synthetic=self.synthetic,
        )

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))

    @property
    def labels(self) -> list[str]:
        """The policies' display names (``NAME`` of ``NAME:PATH``), in order."""
        return [check_spec(p) for p in self.policies]


@dataclass
class ComparisonResult:
    """Per policy (by label), per seed results, and the JSON-ready summary."""

    config: CompareConfig
    cluster: ClusterSpec
    workload_name: str
    runs: dict[str, list[RunResult]]
    wall_time: dict[str, float]
    workloads_vary: bool = True
    """False when every seed replays the same trace: only a policy's own randomness varies its figures"""

    def summary(self) -> dict[str, Any]:
        """``{"policies": {NAME: {"te": {...}, "be": {...}, "preemptions", "requests", "gpu_utilization", "ci95",
        "paired", "wall_time_s", "per_seed"}}, "workload", "cluster", "seeds", "sim", "workloads_vary"}``."""
        out: dict[str, Any] = {}
        for name, runs in self.runs.items():
            per_seed = []
            for seed, r in zip(self.config.seed_list, runs, strict=True):
                s = r.summary()
                s["seed"] = seed
                per_seed.append(s)
            entry: dict[str, Any] = {}
            for cls in ("te", "be"):
                entry[cls] = {f: stats.mean([s[cls][f] for s in per_seed]) for f in CLASS_FIELDS}
                entry[cls]["n_jobs"] = stats.mean([s[cls]["n_jobs"] for s in per_seed])
            for f in TOP_FIELDS:
                entry[f] = stats.mean([s[f] for s in per_seed])
            entry["ci95"] = {
                **{cls: {f: self._ci([s[cls][f] for s in per_seed]) for f in CLASS_FIELDS} for cls in ("te", "be")},
                **{f: self._ci([s[f] for s in per_seed]) for f in TOP_FIELDS},
            }
            entry["wall_time_s"] = self.wall_time[name]
            entry["per_seed"] = per_seed
            out[name] = entry
        for name, entry in out.items():
            entry["paired"] = {
                ref: self._paired(entry["per_seed"], out[ref]["per_seed"])
                for ref in PAIRED_REFERENCES
                if ref in out and ref != name
            }
        return {
            "workload": self.workload_name,
            "cluster": self.cluster.name,
            "seeds": self.config.seed_list,
            "workloads_vary": self.workloads_vary,
            # The rules; not the engine, which does not change the results.
            "sim": {
                k: (v.value if hasattr(v, "value") else v) for k, v in asdict(self.config.sim).items() if k != "engine"
            },
            "policies": out,
        }

    def _ci(self, values: list[float]) -> float:
        # A replayed trace gives every seed the same jobs: a deterministic policy's figures are then identical
        # and an interval of 0 would read as certainty about a population that was never sampled. Report
        # none; a randomised policy's own spread is still a genuine interval.
        vals = stats.finite(values)
        if not self.workloads_vary and (vals.size == 0 or (vals == vals[0]).all()):
            return float("nan")
        return stats.ci95(values)

    def _paired(self, mine: list[dict], ref: list[dict]) -> dict[str, Any]:
        def diff(a: list[float], b: list[float]) -> dict[str, float]:
            d = stats.paired(a, b)
            if not self.workloads_vary:
                d["ci95"] = self._ci([x - y for x, y in zip(a, b, strict=True)])
            return d

        out: dict[str, Any] = {}
        for cls in ("te", "be"):
            out[cls] = {f: diff([s[cls][f] for s in mine], [s[cls][f] for s in ref]) for f in CLASS_FIELDS}
        for f in TOP_FIELDS:
            out[f] = diff([s[f] for s in mine], [s[f] for s in ref])
        return out

    def ratios(self, reference: str = "fifo") -> dict[str, dict[str, float]]:
        """Each policy's mean figures divided by ``reference``'s (NaN where the reference is 0)."""
        summ = self.summary()["policies"]
        if reference not in summ:
            return {}
        ref = summ[reference]
        out = {}
        for name, entry in summ.items():
            row = {}
            for cls in ("te", "be"):
                for f in CLASS_FIELDS:
                    row[f"{cls}_{f}"] = _ratio(entry[cls][f], ref[cls][f])
            for f in TOP_FIELDS:
                row[f] = _ratio(entry[f], ref[f])
            out[name] = row
        return out


class SummarisedRun:
    """A finished run reduced to its summary, for grids that keep no per-job results (sweep, suite);
    :class:`ComparisonResult` reads it as it reads a :class:`RunResult` (through ``summary()``, a fresh copy
    each time, as RunResult gives)."""

    __slots__ = ("_summary",)

    def __init__(self, result: RunResult | SummarisedRun):
        self._summary = result.summary()

    @classmethod
    def from_summary(cls, summary: dict) -> SummarisedRun:
        """A run known by its summary alone (a sweep's kept run, :mod:`schedgym.experiments.runstore`)."""
        run = cls.__new__(cls)
        run._summary = copy.deepcopy(summary)
        return run

    def summary(self) -> dict:
        return copy.deepcopy(self._summary)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def check_total_jobs(seeds: int, jobs_per_workload: int, policies: int = 1) -> None:
    """Every run's per-job results are kept for the report: bound policies x seeds x jobs by
    :data:`~schedgym.limits.MAX_TOTAL_JOBS` before anything runs."""
    total = policies * seeds * jobs_per_workload
    if total > limits.MAX_TOTAL_JOBS:
        runs = f"{policies:,} policies x {seeds:,} seeds" if policies > 1 else f"{seeds:,} seeds"
        raise ConfigError(
            f"{runs} of {jobs_per_workload:,} jobs make {total:,} job results, more than "
            f"{limits.MAX_TOTAL_JOBS:,} (schedgym.limits.MAX_TOTAL_JOBS); use fewer seeds, jobs or policies"
        )


def check_runs(policies: int, settings: int, seeds: int) -> None:
    """Bound the runs of a comparison or sweep (policies x settings x seeds) by
    :data:`~schedgym.limits.MAX_RUNS`, from the counts alone: before any grid or task list is built."""
    total = policies * settings * seeds
    if total > limits.MAX_RUNS:
        grid = f" x {settings:,} settings" if settings > 1 else ""
        raise ConfigError(
            f"{policies:,} policies{grid} x {seeds:,} seeds make {total:,} runs, more than {limits.MAX_RUNS:,} "
            "(schedgym.limits.MAX_RUNS); use fewer seeds, settings or policies"
        )


class SeedWorkloads(Sequence[Workload]):
    """The test workload of every seed (see :class:`WorkloadSource`), built when it is asked for, so that
    only the workload being simulated is in memory. A replayed trace is read and checked once, at
    construction, and shared by every seed."""

    def __init__(self, config: CompareConfig, cluster: ClusterSpec):
        self.config, self.cluster = config, cluster
        self.source = config.source
        self.seeds = config.seed_list
        self._file: Workload | None = None
        if self.source.kind == "file":
            self._file = self.source.evaluation("test", 0, cluster)
            check_total_jobs(len(self.seeds), len(self._file), len(config.policies))

    def __len__(self) -> int:
        return len(self.seeds)

    @overload
    def __getitem__(self, index: int) -> Workload: ...

    @overload
    def __getitem__(self, index: slice) -> list[Workload]: ...

    def __getitem__(self, index: int | slice) -> Workload | list[Workload]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        seed = self.seeds[index]  # raises IndexError as a list does
        split = self.config.split
        if self._file is not None and split == "test":
            return self._file
        if self.source.kind == "mix":
            return self.source.mix_level(level_seed(split, seed))[1]
        return self.source.evaluation(split, seed, self.cluster, count=self.seeds[-1] + 1)

    def cluster_at(self, index: int) -> ClusterSpec:
        """The cluster seed ``index``'s workload runs on: a ``mix`` level's own, else the comparison's."""
        if self.source.kind == "mix":
            return draw_level(MIX_DISTRIBUTION, level_seed(self.config.split, self.seeds[index])).cluster
        return self.cluster

    def estimate_noise_at(self, index: int) -> float | None:
        """The duration-estimate noise of seed ``index``'s workload: a ``mix`` level's own (the environment
        uses it on that level), else None (each policy's own)."""
        if self.source.kind == "mix":
            return draw_level(MIX_DISTRIBUTION, level_seed(self.config.split, self.seeds[index])).estimate_noise
        return None


def load_workloads(config: CompareConfig, cluster: ClusterSpec) -> SeedWorkloads:
    """The test workload of every seed, each built when it is needed (see :class:`SeedWorkloads`)."""
    return SeedWorkloads(config, cluster)


def run_comparison(
    config: CompareConfig,
    *,
    executor: ExecutorConfig | str = "serial",
    progress: bool | None = None,
    on_run: Callable[[str, int, RunResult], None] | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> ComparisonResult:
    """Run every policy on every seed's workload. ``executor``: where the runs execute, an
    :class:`~schedgym.experiments.executors.ExecutorConfig` or its kind (``"serial"``, ``"process"``,
    ``"ray"``); it changes the time taken, never the results. ``progress``: None shows a bar (counting
    finished runs) on a terminal only. ``on_run(label, seed, result)`` is called in this process after each
    run (used to write per-run logs); with a parallel executor, in the order the runs finish. ``run_dir``:
    a run folder (:mod:`schedgym.experiments.runstore`) that keeps each run as it finishes; a new one, or
    with ``resume`` the one a previous call of this comparison left, whose runs are not run again (``on_run``
    is called for them too)."""
    if isinstance(executor, str):
        executor = ExecutorConfig(kind=executor)
    source = config.source
    cluster = resolve_cluster(config.cluster if config.cluster is not None else source.default_cluster)
    workloads = load_workloads(config, cluster)  # a trace file is read and checked now, before any policy is built
    labels = config.labels
    tasks = make_tasks(config.policies, labels, config.seed_list)
    wall = {label: 0.0 for label in labels}
    bar = progress_bar(len(tasks), progress)

    def finished(outcome: RunOutcome) -> None:
        task = outcome.task
        wall[task.label] += outcome.wall_time
        if on_run is not None:
            on_run(task.label, task.seed, outcome.result)
        if bar is not None:
            bar.set_postfix_str(f"seed {task.seed} {task.label}")
            bar.update(1)

    context = new_context(config, cluster)
    store = open_store(run_dir, resume, "compare", context, len(tasks), keep="result")
    try:
        # Policies are built once per worker (a learned agent's network is loaded once), reset before every run.
        outcomes = run_tasks(executor, context, tasks, finished, workloads, store)
    finally:
        if bar is not None:
            bar.close()
    runs: dict[str, list[RunResult]] = {label: [] for label in labels}
    for outcome in outcomes:  # seed-major, so each policy's list is in seed order
        runs[outcome.task.label].append(outcome.result)
    name = workloads[0].name if source.kind == "file" else source.name
    if config.load is not None:
        name = f"{name} (load {config.load:g})"
    if config.split != "test":
        name = f"{name} ({config.split})"
    if config.synthetic:
        changed = (f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.synthetic)
        name = f"{name} ({', '.join(changed)})"
    return ComparisonResult(config, reported_cluster(source, cluster), name, runs, wall, workloads_vary=source.varies)


def reported_cluster(source: WorkloadSource, cluster: ClusterSpec) -> ClusterSpec:
    """The cluster a result of ``source`` names: ``cluster``, the one its runs were set up with, except for
    ``mix``, whose every seed ran on its own level's cluster, so that the result names none of them (compare
    and sweep label the same runs alike)."""
    if source.kind == "mix":
        return ClusterSpec(cluster.nodes, name="mix (each level its own)")
    return cluster


def progress_bar(total: int, progress: bool | None):  # noqa: ANN201
    """A tqdm bar of ``total`` runs for compare and sweep, or None: ``progress`` False, or tqdm (the ``cli``
    extra) not installed. ``progress`` None shows it on a terminal only."""
    if progress is False:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is an optional extra ("cli"); without it there is simply no bar
        return None
    return tqdm(total=total, unit="run", desc="simulating", disable=None if progress is None else False)


__all__ = [
    "CLASS_FIELDS",
    "PAIRED_REFERENCES",
    "dominance",
    "TOP_FIELDS",
    "CompareConfig",
    "ComparisonResult",
    "ExecutorConfig",
    "SummarisedRun",
    "progress_bar",
    "reported_cluster",
    "run_comparison",
]

"""Suites: fixed sets of workloads on which policies are compared, to see whether a policy carries over.

A policy tuned or trained on ``paper`` may break on another cluster, load or trace, as an operator would try
it on their own. The ``shifts`` suite (:data:`SUITES`) runs ``schedgym compare`` on each of its workloads, the
same seeds for every policy, and reports per workload and policy the environment's objective (the mean
weighted slowdown per job with ``te_weight`` and ``be_weight`` 1, :func:`~schedgym.experiments.figures.objective`)
with its paired differences to fitgpp and k8s, and the Pareto verdicts against fitgpp and k8s on the four
headline figures (:func:`~schedgym.experiments.compare.dominance`)::

    schedgym compare --suite shifts --policies fitgpp,k8s,fifo,lookahead --markdown shifts.md

Each entry is declared as data (:class:`SuiteEntry`); a workload's seeds are compare's test seeds (a bundled
trace's test windows, as many as it has up to the seed count).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from schedgym._atomic import atomic_open
from schedgym.errors import ConfigError
from schedgym.experiments import stats
from schedgym.experiments.compare import (
    CompareConfig,
    ComparisonResult,
    SummarisedRun,
    dominance,
    progress_bar,
)
from schedgym.experiments.executors import ExecutorConfig, RunSetting, RunTask, execute, grid_context
from schedgym.experiments.figures import objective
from schedgym.experiments.report import format_interval, json_ready
from schedgym.sim.cluster import resolve_cluster
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.source import WorkloadSource
from schedgym.workloads.synthetic import preset

REFERENCES = ("fitgpp", "k8s")
"""the rules every policy of a suite is judged against"""


@dataclass(frozen=True)
class SuiteEntry:
    """One workload of a suite: what ``schedgym compare`` runs for it (None: compare's default)."""

    name: str
    """its row label"""
    what: str
    """what it tests"""
    workload: str = "paper"
    cluster: str | None = None
    n_jobs: int | None = None
    load: float | None = None
    synthetic: tuple[tuple[str, Any], ...] = ()
    """fields of the synthetic preset replaced (:attr:`CompareConfig.synthetic`)"""

    def config(
        self,
        policies: Sequence[str],
        seeds: int,
        sim: SimConfig,
        max_jobs: int | None = None,
        split: str = "test",
        first_seed: int = 0,
    ) -> CompareConfig:
        """The comparison of ``policies`` on this workload: ``seeds`` seeds of ``split`` (``test``, or
        ``validation`` for model selection) from ``first_seed`` on, or fewer where a bundled trace has fewer
        windows there; ``max_jobs`` caps a synthetic workload's jobs (a quick look)."""
        source = WorkloadSource(workload=self.workload)
        available = source.n_evaluation(split)
        if first_seed and available is not None:
            raise ConfigError(f"{self.name}: a trace has its {available} {split} windows, no seeds beyond them")
        n_jobs = self.n_jobs
        if max_jobs is not None and source.kind == "synthetic":
            n_jobs = min(n_jobs if n_jobs is not None else preset(self.workload).n_jobs, max_jobs)
        return CompareConfig(
            policies=tuple(policies),
            workload=self.workload,
            cluster=self.cluster,
            seeds=seeds if available is None else min(seeds, available),
            n_jobs=n_jobs,
            load=self.load,
            sim=sim,
            synthetic=self.synthetic,
            split=split,
            first_seed=first_seed,
        )


SUITES: dict[str, tuple[SuiteEntry, ...]] = {
    "shifts": (
        SuiteEntry("paper", "the training distribution of the bundled agents: 16 x 8 GPUs, load 1.0"),
        SuiteEntry(
            "realistic",
            "the same jobs, with grace periods and restart overheads that grow with a job's GPUs "
            "(7 s at 1 GPU to 60 s at 16)",
            workload="realistic",
        ),
        SuiteEntry("paper load 0.8", "less contention", load=0.8),
        SuiteEntry("paper load 1.2", "more contention: queues grow", load=1.2),
        SuiteEntry("paper 4 nodes", "a small cluster (4 x 8 GPUs): few nodes to choose from", cluster="small"),
        SuiteEntry("paper 64 nodes", "a large cluster (64 x 8 GPUs), arrivals scaled with it", cluster="large"),
        SuiteEntry("paper 20,000 jobs", "workloads four times as long: delays that surface late", n_jobs=20_000),
        SuiteEntry(
            "paper TE x3",
            "TE jobs three times as long (the load kept, so fewer arrivals)",
            # paper's TE durations (median 900 s, clipped to [60, 3600] s) times 3
            synthetic=(("te_duration_median", 2700.0), ("te_duration_min", 180.0), ("te_duration_max", 10800.0)),
        ),
        SuiteEntry("philly", "Philly's test windows on its own cluster", workload="philly"),
        SuiteEntry(
            "alibaba contended",
            "Alibaba 2023's test windows on 3 of its nodes (18 GPUs), where they contend",
            workload="alibaba2023",
            cluster="alibaba2023-contended",
        ),
    ),
}


@dataclass(frozen=True)
class SuiteRow:
    """One policy on one workload: its objective (mean and 95% CI over seeds), the paired differences of its
    objective to each reference (mean and CI half-width; NaN without the reference or a second seed), and
    its verdicts against each reference ("" for the reference itself or without it)."""

    entry: str
    policy: str
    seeds: int
    objective: float
    objective_ci95: float
    diff: dict[str, tuple[float, float]]
    verdict: dict[str, str]


@dataclass
class SuiteResult:
    """A suite's comparisons, one per entry, in order (each :meth:`ComparisonResult.summary`, per seed
    included: a suite keeps no per-job results), and their wall time in seconds."""

    name: str
    entries: tuple[SuiteEntry, ...]
    comparisons: list[dict[str, Any]]
    wall_time: float

    def rows(self) -> list[SuiteRow]:
        """Every (workload, policy), workloads in the suite's order, policies in the command's."""
        out = []
        for entry, comparison in zip(self.entries, self.comparisons, strict=True):
            summary = comparison["policies"]
            per_policy = {name: [objective(s) for s in e["per_seed"]] for name, e in summary.items()}
            for name, e in summary.items():
                values = per_policy[name]
                diff, verdict = {}, {}
                for ref in REFERENCES:
                    if ref not in per_policy or ref == name:
                        diff[ref], verdict[ref] = (math.nan, math.nan), ""
                        continue
                    d = stats.paired(values, per_policy[ref])
                    diff[ref] = (d["mean"], d["ci95"])
                    verdict[ref] = dominance(e["paired"][ref]) if len(values) > 1 else ""
                out.append(
                    SuiteRow(
                        entry=entry.name,
                        policy=name,
                        seeds=len(values),
                        objective=stats.mean(values),
                        objective_ci95=stats.ci95(values),
                        diff=diff,
                        verdict=verdict,
                    )
                )
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the suite, its wall time, each entry's comparison summary, and the table's rows."""
        return {
            "suite": self.name,
            "wall_time_s": self.wall_time,
            "entries": [
                {"name": e.name, "what": e.what, "comparison": c}
                for e, c in zip(self.entries, self.comparisons, strict=True)
            ],
            "rows": [
                {
                    "workload": r.entry,
                    "policy": r.policy,
                    "seeds": r.seeds,
                    "objective": r.objective,
                    "objective_ci95": r.objective_ci95,
                    **{f"diff_vs_{ref}": r.diff[ref][0] for ref in REFERENCES},
                    **{f"diff_vs_{ref}_ci95": r.diff[ref][1] for ref in REFERENCES},
                    **{f"vs_{ref}": r.verdict[ref] for ref in REFERENCES},
                }
                for r in self.rows()
            ],
        }


def suite_entries(name: str, first_seed: int = 0) -> tuple[SuiteEntry, ...]:
    """The entries of suite ``name`` (ConfigError naming the suites if there is none); from a ``first_seed``
    other than 0, its synthetic ones only: a trace has no workloads beyond its windows."""
    try:
        entries = SUITES[name]
    except KeyError:
        raise ConfigError(f"Unknown suite {name!r}; expected one of {sorted(SUITES)}") from None
    if first_seed:
        entries = tuple(e for e in entries if WorkloadSource(workload=e.workload).kind == "synthetic")
    return entries


def suite_configs(
    name: str,
    policies: Sequence[str],
    *,
    seeds: int = 20,
    sim: SimConfig | None = None,
    max_jobs: int | None = None,
    split: str = "test",
    first_seed: int = 0,
) -> list[CompareConfig]:
    """Every entry's comparison on ``split`` from ``first_seed`` (:func:`suite_entries`), checked before
    anything runs (unknown policies, limits)."""
    sim = sim if sim is not None else SimConfig()
    return [e.config(policies, seeds, sim, max_jobs, split, first_seed) for e in suite_entries(name, first_seed)]


def suite_tasks(configs: Sequence[CompareConfig]) -> list[RunTask]:
    """Every (workload, seed, policy) run of a suite, workload-major, then seed-major as in a comparison;
    :attr:`RunTask.setting` is the workload's place in the suite. Each workload has its own seeds (a trace
    has as many windows as it has), which :func:`~schedgym.experiments.executors.make_tasks` (one seed list
    for every setting) cannot express."""
    tasks: list[RunTask] = []
    for k, config in enumerate(configs):
        for seed_index, seed in enumerate(config.seed_list):
            for label, spec in zip(config.labels, config.policies, strict=True):
                tasks.append(RunTask(len(tasks), label, spec, seed_index, seed, k))
    return tasks


def run_suite(
    name: str,
    policies: Sequence[str],
    *,
    seeds: int = 20,
    sim: SimConfig | None = None,
    max_jobs: int | None = None,
    split: str = "test",
    executor: ExecutorConfig | str = "serial",
    progress: bool | None = None,
    clock: Callable[[], float] | None = None,
    first_seed: int = 0,
) -> SuiteResult:
    """Run suite ``name``: ``schedgym compare`` of ``policies`` on each workload (see :func:`suite_configs`),
    on the ``split`` seeds (``validation``: to choose among agents without looking at the test seeds) from
    ``first_seed`` on (other than 0: fresh seeds of the synthetic workloads, the traces left out).
    Every (workload, seed, policy) run is one task of one grid (:func:`suite_tasks`), so a parallel executor
    starts once and keeps its workers busy across workloads; it changes the time taken, never the results.
    ``progress``: None shows a bar on a terminal only."""
    import time

    if isinstance(executor, str):
        executor = ExecutorConfig(kind=executor)
    clock = clock if clock is not None else time.perf_counter
    configs = suite_configs(name, policies, seeds=seeds, sim=sim, max_jobs=max_jobs, split=split, first_seed=first_seed)
    start = clock()
    clusters = [resolve_cluster(c.cluster if c.cluster is not None else c.source.default_cluster) for c in configs]
    tasks = suite_tasks(configs)
    context = grid_context(configs[0].policies, [RunSetting(c, cl) for c, cl in zip(configs, clusters, strict=True)])
    kept: list[SummarisedRun | None] = [None] * len(tasks)
    wall = [dict.fromkeys(c.labels, 0.0) for c in configs]
    bar = progress_bar(len(tasks), progress)
    try:
        with contextlib.closing(execute(executor, context, tasks)) as finished:
            for outcome in finished:
                task = outcome.task
                kept[task.index] = SummarisedRun(outcome.result)  # no per-job results are kept
                wall[task.setting][task.label] += outcome.wall_time
                if bar is not None:
                    bar.set_postfix_str(f"{configs[task.setting].source.name} seed {task.seed} {task.label}")
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    summaries = []
    for k, (config, cluster) in enumerate(zip(configs, clusters, strict=True)):
        runs: dict[str, list[Any]] = {label: [] for label in config.labels}
        for task in tasks:  # in task order: each policy's list in seed order
            if task.setting == k:
                runs[task.label].append(kept[task.index])
        source = config.source
        comparison = ComparisonResult(config, cluster, source.name, runs, wall[k], source.varies)
        summaries.append(comparison.summary())
    entries = suite_entries(name, first_seed)
    if split != "test":  # the rows say which seeds ran, as compare's workload name does
        entries = tuple(replace(e, name=f"{e.name} ({split})") for e in entries)
    if first_seed:
        entries = tuple(replace(e, name=f"{e.name} (seeds {first_seed}-{first_seed + seeds - 1})") for e in entries)
    if max_jobs is not None:  # the rows say what ran
        entries = tuple(
            replace(e, name=f"{e.name} (capped at {c.n_jobs:,} jobs)")
            if c.n_jobs is not None and c.n_jobs != e.n_jobs
            else e
            for e, c in zip(entries, configs, strict=True)
        )
    return SuiteResult(name, entries, summaries, clock() - start)


def write_markdown(path: str, result: SuiteResult) -> None:
    """:func:`markdown_table` into ``path`` (written whole, then renamed into place)."""
    text = markdown_table(result)
    with atomic_open(path) as fh:
        fh.write(text)


def write_json(path: str, result: SuiteResult) -> None:
    """:meth:`SuiteResult.summary` as strict JSON (NaN as null), written whole."""
    text = json.dumps(json_ready(result.summary()), indent=2, allow_nan=False) + "\n"
    with atomic_open(path) as fh:
        fh.write(text)


def write_plot(path: str, result: SuiteResult) -> None:
    """Each policy's objective per workload, with 95% CIs (needs matplotlib)."""
    from schedgym.experiments.plotting import save_figure, suite_figure

    save_figure(path, lambda: suite_figure(result), dpi=120)


def _diff_cell(mean: float, half: float) -> str:
    return format_interval(mean, half, signed=True, missing="")


def markdown_table(result: SuiteResult) -> str:
    """One Markdown table: per workload and policy, the objective, its paired differences to fitgpp and k8s,
    and the verdicts against them (better objective = lower)."""
    head = ["workload", "policy", "seeds", "objective", *(f"vs {r}" for r in REFERENCES)]
    head += [f"verdict vs {r}" for r in REFERENCES]
    lines = [
        "| " + " | ".join(head) + " |",
        "|---|---|---:|---:|" + "---:|" * len(REFERENCES) + "---|" * len(REFERENCES),
    ]
    for r in result.rows():
        cells = [r.entry, f"`{r.policy}`", str(r.seeds), format_interval(r.objective, r.objective_ci95)]
        cells += [_diff_cell(*r.diff[ref]) for ref in REFERENCES]
        cells += [r.verdict[ref] for ref in REFERENCES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_table(result: SuiteResult) -> str:
    """The table for the terminal: the same columns as :func:`markdown_table`, aligned."""
    head = ["workload", "policy", "seeds", "objective", *(f"vs {r}" for r in REFERENCES)]
    head += [f"verdict vs {r}" for r in REFERENCES]
    rows = [head]
    for r in result.rows():
        cells = [r.entry, r.policy, str(r.seeds), format_interval(r.objective, r.objective_ci95)]
        cells += [_diff_cell(*r.diff[ref]) for ref in REFERENCES]
        cells += [r.verdict[ref] for ref in REFERENCES]
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    out.insert(1, "-" * len(out[0]))
    out.append(
        f"\nobjective: mean slowdown per job (te_weight = be_weight = 1), mean ± 95% CI over seeds; vs: paired "
        f"difference (lower is better); verdict: TE p95, BE p50, BE p95, BE p99 paired. "
        f"Suite {result.name!r} ran in {result.wall_time:.0f} s."
    )
    return "\n".join(out)


__all__ = [
    "REFERENCES",
    "SUITES",
    "SuiteEntry",
    "SuiteResult",
    "SuiteRow",
    "format_table",
    "markdown_table",
    "run_suite",
    "write_json",
    "write_markdown",
    "write_plot",
    "suite_configs",
    "suite_entries",
    "suite_tasks",
]

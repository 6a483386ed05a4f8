"""Sweep simulator and workload settings: every combination of the swept values x policies x seeds.

A sweep is a grid of comparisons. Each *setting* (one value of every swept field) is a comparison of its
own (:class:`~schedgym.experiments.compare.CompareConfig`: the same policies, the same seeds), and each
setting's figures, confidence intervals and paired differences are those
:class:`~schedgym.experiments.compare.ComparisonResult` computes. What can be swept (:func:`sweepable`):

- the simulator's rules, fields of :class:`~schedgym.sim.simulator.SimConfig` (``max_preemptions``,
  ``restart_overhead``, ``backfill``, ``placement``; not ``queue``, which is each policy's own, nor
  ``engine``, which changes no result);
- the workload as ``schedgym compare`` chooses it: ``workload``, ``cluster``, ``n_jobs`` (``--jobs``) and
  ``load``;
- any scalar field of the synthetic workload's preset (:class:`~schedgym.workloads.synthetic.SyntheticConfig`:
  ``te_fraction``, ``be_duration_median``, ``grace_median``, ...). Its table fields (``te_gpus``,
  ``grace_median_by_gpus``, ...) take Python values only (:class:`SweepConfig`), not command-line text.

The runs, one per (seed, setting, policy), go to any executor
(:mod:`~schedgym.experiments.executors`): a worker builds each policy once and keeps it for every setting.
Of each run the sweep keeps its summary (:meth:`~schedgym.sim.metrics.RunResult.summary`), not its per-job
results, so a grid's memory grows with its runs, not with their jobs.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import difflib
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from schedgym._atomic import atomic_open
from schedgym._csvio import parse_bool, parse_integer, parse_number
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments import stats
from schedgym.experiments.compare import (
    PAIRED_REFERENCES,
    VERDICT_REFERENCES,
    CompareConfig,
    ComparisonResult,
    SummarisedRun,
    check_runs,
    dominance,
    progress_bar,
    reported_cluster,
)
from schedgym.experiments.executors import ExecutorConfig, RunOutcome, RunSetting, execute, grid_context, make_tasks
from schedgym.experiments.figures import HEADLINE, ClassFigure
from schedgym.experiments.report import format_interval, json_ready
from schedgym.experiments.runstore import open_store
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import RunResult
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.synthetic import OVERRIDABLE, SyntheticConfig

DEFAULT_POLICIES = ("fifo", "fitgpp", "k8s")
"""what a sweep runs unless told: the non-preemptive reference and the two preemptive rules"""
MAX_SETTINGS = 10_000
"""Settings (combinations of swept values) in one sweep, checked before any is built."""

SIM_FIELDS = ("backfill", "max_preemptions", "placement", "restart_overhead")
"""the :class:`SimConfig` fields a sweep can vary"""
WORKLOAD_FIELDS = ("cluster", "load", "n_jobs", "workload")
"""the :class:`CompareConfig` fields that choose the workload, as ``schedgym compare``'s options do"""
SYNTHETIC_FIELDS = OVERRIDABLE
"""the synthetic preset's other fields (``n_jobs`` and ``load`` go through :data:`WORKLOAD_FIELDS`)"""
_NOT_SWEPT = {
    "queue": "the queue discipline is each policy's own (fifo or priority)",
    "engine": "the engine changes no result (set SCHEDGYM_ENGINE to choose it)",
    "trace": "a trace file is the workload itself: give it with --trace",
    "policies": "policies are swept by --policies",
    "seeds": "seeds are swept by --seeds and --first-seed",
    "first_seed": "seeds are swept by --seeds and --first-seed",
}
# The CSV's figures: of a class (ClassFigure), or of the whole run (a top-level summary field).
_CSV_FIGURES: tuple[ClassFigure | str, ...] = (
    *(
        ClassFigure(job_class, f)
        for job_class in (JobClass.TE, JobClass.BE)
        for f in ("slowdown_p50", "slowdown_p95", "slowdown_p99", "wait_mean")
    ),
    "preemptions",
    "gpu_utilization",
)
_CSV_DIFFS: tuple[ClassFigure | str, ...] = (*HEADLINE, "preemptions")


def _csv_name(figure: ClassFigure | str) -> str:
    return figure if isinstance(figure, str) else figure.column


def _entry(summary: dict[str, Any], figure: ClassFigure | str) -> Any:
    """``figure``'s entry of a summary keyed by class then statistic, or by top-level field."""
    return summary[figure] if isinstance(figure, str) else figure.in_summary(summary)


def _field_types() -> dict[str, str]:
    types: dict[str, str] = {}
    for cls, names in ((SimConfig, SIM_FIELDS), (CompareConfig, WORKLOAD_FIELDS), (SyntheticConfig, SYNTHETIC_FIELDS)):
        for f in dataclasses.fields(cls):
            if f.name in names:
                types[f.name] = str(f.type)
    return types


_TYPES = _field_types()


def sweepable() -> list[str]:
    """Every field a sweep can vary, sorted."""
    return sorted(_TYPES)


def _kind(name: str) -> str:
    """``bool``, ``int``, ``float``, ``str`` or ``table`` (a tuple of pairs): how a field's text is read."""
    type_text = _TYPES[name].replace(" | None", "")
    return "table" if type_text.startswith("tuple") else type_text


def check_field(name: str) -> None:
    """Raise a one-line :class:`ConfigError` unless ``name`` can be swept, naming the known fields and the
    nearest one."""
    if name in _TYPES:
        return
    if name in _NOT_SWEPT:
        raise ConfigError(f"{name!r} cannot be swept: {_NOT_SWEPT[name]}")
    close = difflib.get_close_matches(name, sweepable(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"Expected a field to sweep, got {name!r}{hint}; known fields: {', '.join(sweepable())}")


def parse_value(name: str, text: str) -> Any:
    """The value of field ``name`` written as ``text`` (the field's type: ``true``/``false`` for a bool, ASCII
    decimal numbers, a string as it is). Ranges are left to the configuration's own checks."""
    check_field(name)
    kind = _kind(name)
    raw = text.strip()
    value: Any = None
    if kind == "table":
        raise ConfigError(
            f"{name!r} is a table of (GPUs, value) pairs, which --set cannot write; sweep it from Python "
            "(schedgym.experiments.sweep.SweepConfig)"
        )
    if kind == "bool":
        value = parse_bool(raw)
    elif kind == "int":
        value = parse_integer(raw)
    elif kind == "float":
        value = parse_number(raw)
    elif raw:
        value = raw
    if value is None:
        expected = {"bool": "true or false", "int": "an integer", "float": "a finite number", "str": "a name"}[kind]
        raise ConfigError(f"Expected {name} to be {expected} (ASCII), got {text!r}")
    return value


def parse_set(text: str) -> tuple[str, tuple[Any, ...]]:
    """``FIELD=v1,v2,...`` (one ``--set``) as the field and its values."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(f"--set {text!r}: expected FIELD=v1,v2,...")
    try:
        check_field(name)
        items = values.split(",")
        if not values.strip() or any(not item.strip() for item in items):
            raise ConfigError(f"Expected a comma-separated list of values, got {values!r}")
        return name, tuple(parse_value(name, item) for item in items)
    except ConfigError as exc:
        raise ConfigError(f"--set {text!r}: {exc}") from None


# --------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Setting:
    """One combination of swept values and the comparison that runs it."""

    values: tuple[tuple[str, Any], ...]
    """(field, value) of every swept field, in the sweep's order"""
    config: CompareConfig

    @property
    def label(self) -> str:
        return " ".join(f"{name}={show_value(value)}" for name, value in self.values)


def show_value(value: Any) -> str:
    """A swept value as the table, the plot and the messages show it (``0.9``, ``true``, ``paper``)."""
    return f"{value:g}" if isinstance(value, float) else str(value).lower() if isinstance(value, bool) else str(value)


def _setting(base: CompareConfig, values: Sequence[tuple[str, Any]]) -> CompareConfig:
    sim_changes = {name: v for name, v in values if name in SIM_FIELDS}
    workload_changes = {name: v for name, v in values if name in WORKLOAD_FIELDS}
    synthetic = dict(base.synthetic)
    synthetic.update((name, v) for name, v in values if name in SYNTHETIC_FIELDS)
    kwargs = {f.name: getattr(base, f.name) for f in dataclasses.fields(CompareConfig)}
    kwargs.update(workload_changes)
    kwargs["sim"] = replace(base.sim, **sim_changes)
    kwargs["synthetic"] = tuple(synthetic.items())
    return CompareConfig(**kwargs)


@dataclass(frozen=True)
class SweepConfig:
    """What to sweep: the comparison every setting starts from (``base``: policies, workload, seeds,
    simulator rules) and, per swept field, its values (``grid``). The settings are the Cartesian product of
    the values, the first field varying slowest."""

    base: CompareConfig = field(default_factory=lambda: CompareConfig(policies=DEFAULT_POLICIES))
    grid: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def __post_init__(self) -> None:
        if not self.grid:
            raise ConfigError("Expected at least one field to sweep (--set FIELD=v1,v2,...), got none")
        names = [name for name, _ in self.grid]
        for name, values in self.grid:
            check_field(name)
            if names.count(name) > 1:
                raise ConfigError(f"Expected each field swept once, got {name!r} {names.count(name)} times")
            if not isinstance(values, tuple) or not values:
                raise ConfigError(f"Expected at least one value of {name}, got {values!r}")
            if any(a == b for a, b in itertools.combinations(values, 2)):
                raise ConfigError(f"Expected distinct values of {name}, got {[show_value(v) for v in values]}")
        count = math.prod(len(values) for _, values in self.grid)
        check_runs(len(self.base.policies), count, self.base.seeds)  # before a grid of 10**8 runs is built
        if count > MAX_SETTINGS:
            raise ConfigError(
                f"Expected at most {MAX_SETTINGS:,} settings (schedgym.experiments.sweep.MAX_SETTINGS), got "
                f"{' x '.join(str(len(v)) for _, v in self.grid)} = {count:,}"
            )
        settings = []
        for combination in itertools.product(*([(name, v) for v in values] for name, values in self.grid)):
            try:
                settings.append(Setting(tuple(combination), _setting(self.base, combination)))
            except (ConfigError, TypeError) as exc:
                raise ConfigError(_blame(combination, exc)) from None
        object.__setattr__(self, "_settings", tuple(settings))

    @property
    def fields(self) -> list[str]:
        return [name for name, _ in self.grid]

    @property
    def settings(self) -> tuple[Setting, ...]:
        """Every combination of the swept values, the first field varying slowest."""
        return cast("tuple[Setting, ...]", self.__dict__["_settings"])

    @property
    def labels(self) -> list[str]:
        return self.base.labels


def _blame(combination: Sequence[tuple[str, Any]], exc: Exception) -> str:
    """The message of a setting that cannot be made, naming the whole combination: a value may be wrong only
    with another (``grace_min=200`` with ``grace_max=100``, not with 300)."""
    return " ".join(f"{n}={show_value(v)}" for n, v in combination) + f": {_sentence(exc)}"


def _sentence(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --------------------------------------------------------------------------------------------- running
@dataclass
class SweepResult:
    """Every setting's :class:`ComparisonResult` (in the order of :attr:`SweepConfig.settings`)."""

    config: SweepConfig
    comparisons: list[ComparisonResult]

    def summary(self) -> dict[str, Any]:
        """``{"fields", "grid", "policies", "seeds", "references", "settings": [{"values", "workload",
        "cluster", "seeds", "workloads_vary", "sim", "policies": {NAME: {...compare's entry..., "verdicts"}}}]}``:
        each setting's entry is :meth:`ComparisonResult.summary`'s, with each policy's verdicts against the
        references (:data:`~schedgym.experiments.compare.VERDICT_REFERENCES` that were run)."""
        cached = self.__dict__.get("_summary")
        if cached is None:
            labels = self.config.labels
            references = [r for r in VERDICT_REFERENCES if r in labels]
            settings = []
            for setting, comparison in zip(self.config.settings, self.comparisons, strict=True):
                entry = {"values": dict(setting.values), **comparison.summary()}
                multi_seed = len(entry["seeds"]) > 1
                for name, e in entry["policies"].items():
                    e["verdicts"] = {
                        ref: dominance(e["paired"][ref]) for ref in references if ref != name and multi_seed
                    }
                settings.append(entry)
            cached = {
                "fields": self.config.fields,
                "grid": {name: list(values) for name, values in self.config.grid},
                "policies": labels,
                "seeds": self.config.base.seed_list,
                "references": references,
                "settings": settings,
            }
            self.__dict__["_summary"] = cached
        return copy.deepcopy(cached)


def run_sweep(
    config: SweepConfig,
    *,
    executor: ExecutorConfig | str = "serial",
    progress: bool | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> SweepResult:
    """Run every policy on every seed under every setting. ``executor`` changes where the runs execute and
    how fast, never the results; ``progress``: None shows a bar (counting finished runs) on a terminal only.
    Every setting's cluster is resolved and its first workload built and checked before any run.
    ``run_dir`` and ``resume``: a run folder that keeps each run's summary as it finishes, as for
    :func:`~schedgym.experiments.compare.run_comparison`."""
    if isinstance(executor, str):
        executor = ExecutorConfig(kind=executor)
    from schedgym.experiments.compare import load_workloads

    settings = config.settings
    clusters: dict[str | None, ClusterSpec] = {}
    run_settings = []
    checked: set[Any] = set()
    for s in settings:
        source = s.config.source
        name = s.config.cluster if s.config.cluster is not None else source.default_cluster
        if name not in clusters:
            clusters[name] = resolve_cluster(name)
        cluster = clusters[name]
        key = (source, cluster)
        if key not in checked:  # a trace file read and checked, a synthetic workload drawn and fitted
            checked.add(key)
            try:
                load_workloads(s.config, cluster)[0]
            except SchedGymError as exc:
                raise SchedGymError(f"setting {s.label}: {_sentence(exc)}") from None
        run_settings.append(RunSetting(s.config, cluster))
    labels = config.labels
    seeds = config.base.seed_list
    tasks = make_tasks(config.base.policies, labels, seeds, len(run_settings))
    context = grid_context(config.base.policies, run_settings)
    store = open_store(run_dir, resume, "sweep", context, len(tasks), keep="summary")
    kept: list[SummarisedRun | None] = [None] * len(tasks)
    wall = [dict.fromkeys(labels, 0.0) for _ in settings]
    bar = progress_bar(len(tasks), progress)
    try:
        with contextlib.closing(execute(executor, context, tasks, store=store)) as finished:
            for outcome in finished:
                _keep(outcome, kept, wall)
                if bar is not None:
                    task = outcome.task
                    bar.set_postfix_str(f"seed {task.seed} {settings[task.setting].label} {task.label}")
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    comparisons = []
    for k, (s, rs) in enumerate(zip(settings, run_settings, strict=True)):
        runs: dict[str, list[Any]] = {label: [] for label in labels}
        for task in tasks:  # in task order: each policy's list in seed order
            if task.setting == k:
                runs[task.label].append(kept[task.index])
        source = s.config.source
        comparisons.append(
            ComparisonResult(
                s.config,
                reported_cluster(source, rs.cluster),
                source.name,
                cast("dict[str, list[RunResult]]", runs),
                wall[k],
                source.varies,
            )
        )
    return SweepResult(config, comparisons)


def _keep(outcome: RunOutcome, kept: list[SummarisedRun | None], wall: list[dict[str, float]]) -> None:
    task = outcome.task
    kept[task.index] = SummarisedRun(outcome.result)
    wall[task.setting][task.label] += outcome.wall_time


# --------------------------------------------------------------------------------------------- reports
def _columns(header: list[str], rows: list[list[str]], left: int) -> list[str]:
    """``header`` and ``rows`` as aligned text: the first ``left`` columns left-aligned, the rest right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    head = line(header)
    return [head, "-" * len(head), *(line(r) for r in rows)]


def format_table(result: SweepResult) -> str:
    """The on-screen table: per setting and policy, the means ± 95% CI over seeds of TE p95, BE p50, BE p95
    and BE p99, preemptions and the verdicts against fitgpp and k8s; then, per reference, the paired
    differences to it on the same workloads."""
    summary = result.summary()
    fields = summary["fields"]
    seeds = summary["seeds"]
    lines = [
        f"sweep of {', '.join(fields)}: {_count(len(summary['settings']), 'setting')} x "
        f"{_count(len(summary['policies']), 'policy', 'policies')} x {_count(len(seeds), 'seed')} "
        f"({seeds[0]}..{seeds[-1]}){unswept(result)} "
        "(slowdown percentiles; means ± 95% CI over seeds)",
    ]
    if len(seeds) > 1 and not all(entry["workloads_vary"] for entry in summary["settings"]):
        lines.append(
            "note: every seed replays the same trace, so intervals are reported only where a policy's own "
            "randomness varies its figures"
        )
    refs = summary["references"] if len(seeds) > 1 else []
    header = [*fields, "policy", *(f.label for f in HEADLINE), "preempt", *(f"vs {r}" for r in refs)]
    rows = []
    for entry in summary["settings"]:
        values = [show_value(entry["values"][f]) for f in fields]
        for name, e in entry["policies"].items():
            cells = [format_interval(f.in_summary(e), f.in_summary(e["ci95"]), f.digits) for f in HEADLINE]
            verdicts = [e["verdicts"].get(r, "") for r in refs]
            rows.append([*values, name, *cells, f"{e['preemptions']:.1f}", *verdicts])
    lines += _columns(header, rows, len(fields) + 1)
    for ref in refs:
        lines += [
            "",
            f"paired difference to {ref}, same workloads (mean ± 95% CI over seeds; verdict over these four)",
        ]
        rows = []
        for entry in summary["settings"]:
            values = [show_value(entry["values"][f]) for f in fields]
            for name, e in entry["policies"].items():
                if ref not in e["paired"]:
                    continue
                p = e["paired"][ref]
                cells = [
                    format_interval(f.in_summary(p)["mean"], f.in_summary(p)["ci95"], signed=True) for f in HEADLINE
                ]
                rows.append([*values, name, *cells, e["verdicts"][ref]])
        lines += _columns([*fields, "policy", *(f.label for f in HEADLINE), "verdict"], rows, len(fields) + 1)
    return "\n".join(lines)


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def unswept(result: SweepResult) -> str:
    """``, workload W, cluster C`` for what the sweep does not vary (empty if it varies both)."""
    fields, first = result.config.fields, result.summary()["settings"][0]
    shown = [f"{what} {first[what]}" for what in ("workload", "cluster") if what not in fields]
    return ", " + ", ".join(shown) if shown else ""


def write_json(path: str | Path, result: SweepResult) -> None:
    """:meth:`SweepResult.summary` as strict JSON (NaN as null), written whole, then renamed into place. An
    infinite figure, which the input limits should make impossible, is an error and no file is written."""
    payload = json_ready(result.summary())
    try:
        text = json.dumps(payload, indent=2, allow_nan=False) + "\n"  # in full before the file is opened
    except ValueError:
        raise SchedGymError(f"cannot write {path}: a figure is not a finite number, and JSON has no infinity") from None
    with atomic_open(path) as fh:
        fh.write(text)


def csv_header(result: SweepResult) -> list[str]:
    """The columns of :func:`write_csv`."""
    summary = result.summary()
    labels = summary["policies"]
    header = [*summary["fields"], "policy", "n_seeds"]
    for figure in _CSV_FIGURES:
        name = _csv_name(figure)
        header += [name, f"{name}_ci95"]
    for ref in (r for r in PAIRED_REFERENCES if r in labels):
        for figure in _CSV_DIFFS:
            name = _csv_name(figure)
            header += [f"diff_vs_{ref}_{name}", f"diff_vs_{ref}_{name}_ci95"]
    header += [f"verdict_vs_{ref}" for ref in summary["references"]]
    return header


def write_csv(path: str | Path, result: SweepResult) -> None:
    """One row per setting and policy: the swept values, the policy, the number of seeds, the means and 95%
    CI half-widths of the figures, the paired differences (mean and CI half-width) to each of fitgpp, k8s and
    fifo that was run, and the verdicts against fitgpp and k8s. An empty cell: no value (the reference
    itself, a class without jobs, an interval from one seed)."""
    summary = result.summary()
    labels = summary["policies"]
    paired_refs = [r for r in PAIRED_REFERENCES if r in labels]

    def cell(x: float) -> str | float:
        return "" if math.isnan(x) else x

    rows = []
    for entry in summary["settings"]:
        for name, e in entry["policies"].items():
            row: list[Any] = [_csv_value(entry["values"][f]) for f in summary["fields"]]
            row += [name, len(e["per_seed"])]
            for figure in _CSV_FIGURES:
                row += [cell(_entry(e, figure)), cell(_entry(e["ci95"], figure))]
            for ref in paired_refs:
                p = e["paired"].get(ref)
                for figure in _CSV_DIFFS:
                    d = None if p is None else _entry(p, figure)
                    row += ["", ""] if d is None else [cell(d["mean"]), cell(d["ci95"])]
            row += [e["verdicts"].get(ref, "") for ref in summary["references"]]
            rows.append(row)
    with atomic_open(path, newline="") as fh:
        w = csv.writer(fh)
        w.writerow(csv_header(result))
        w.writerows(rows)


def _csv_value(value: Any) -> Any:
    # Floats as Python writes them (every digit kept), booleans as --set reads them.
    return str(value).lower() if isinstance(value, bool) else value


def marginal(result: SweepResult, name: str, figure: ClassFigure) -> dict[str, list[tuple[float, float]]]:
    """What the plot draws for swept field ``name``: per policy, for each of its values (in the sweep's
    order), the mean and 95% CI half-width over seeds of ``figure`` averaged, seed by
    seed, over the settings with that value (over every value of the other swept fields). Without intervals
    when every seed replays the same trace."""
    summary = result.summary()
    values = dict(result.config.grid)[name]
    varies = all(s["workloads_vary"] for s in summary["settings"])
    out: dict[str, list[tuple[float, float]]] = {}
    for label in summary["policies"]:
        points = []
        for value in values:
            per_setting = [
                [figure.in_summary(s) for s in entry["policies"][label]["per_seed"]]
                for entry in summary["settings"]
                if entry["values"][name] == value
            ]
            with np.errstate(all="ignore"):
                arr = np.array(per_setting, dtype=float)
                counts = (~np.isnan(arr)).sum(axis=0)
                per_seed = np.where(counts > 0, np.nansum(arr, axis=0) / np.maximum(counts, 1), np.nan).tolist()
            points.append((stats.mean(per_seed), stats.ci95(per_seed) if varies else float("nan")))
        out[label] = points
    return out


def write_plot(path: str | Path, result: SweepResult) -> None:
    """How each figure moves along each swept field: one column of panels per field, one panel per figure
    (TE p95, BE p50, BE p95, BE p99), the field's values on x, a line per policy with 95% CI error bars;
    other swept fields averaged (:func:`marginal`). Needs matplotlib; written whole, then renamed."""
    # Imported here: the plotting module draws from this one's results (and matplotlib is an extra).
    from schedgym.experiments.plotting import save_figure, sweep_figure

    save_figure(path, lambda: sweep_figure(result), dpi=110)


__all__ = [
    "DEFAULT_POLICIES",
    "MAX_SETTINGS",
    "SIM_FIELDS",
    "SYNTHETIC_FIELDS",
    "WORKLOAD_FIELDS",
    "Setting",
    "SweepConfig",
    "SweepResult",
    "check_field",
    "csv_header",
    "format_table",
    "marginal",
    "parse_set",
    "parse_value",
    "run_sweep",
    "show_value",
    "sweepable",
    "unswept",
    "write_csv",
    "write_json",
    "write_plot",
]

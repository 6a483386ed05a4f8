"""Compare policies on identical workloads, the way the paper compares FitGpp with FIFO.

Each seed is one independently generated workload (or the trace itself), and every policy runs on that
same workload. Top-level figures are means over seeds; ratios are taken to FIFO's means.
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.runner import make_runner
from schedgym.registry import policy_entry
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import RunResult
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.named import TRACE_WORKLOADS
from schedgym.workloads.synthetic import PRESETS, generate, preset
from schedgym.workloads.trace import Workload, load_trace

CLASS_FIELDS = ("slowdown_p50", "slowdown_p95", "slowdown_p99", "slowdown_mean", "wait_mean")
TOP_FIELDS = ("preemptions", "gpu_utilization")
PAIRED_REFERENCES = ("fitgpp", "fifo")

# Two-sided 95% quantiles of Student's t by degrees of freedom (a degree of freedom between two entries
# takes the lower one's, which is conservative); beyond 120, the normal 1.96.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}  # fmt: skip


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval with ``df`` degrees of freedom."""
    if df < 1:
        return float("nan")
    if df > 120:
        return 1.96
    return _T975[max(k for k in _T975 if k <= df)]


def ci95(values: list[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (t distribution); NaN for fewer than 2."""
    vals = np.array([v for v in values if not (isinstance(v, float) and math.isnan(v))], dtype=float)
    if vals.size < 2:
        return float("nan")
    return float(t975(vals.size - 1) * vals.std(ddof=1) / math.sqrt(vals.size))


def _paired(mine: list[dict], ref: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cls in ("te", "be"):
        out[cls] = {}
        for f in CLASS_FIELDS:
            d = [a[cls][f] - b[cls][f] for a, b in zip(mine, ref, strict=True)]
            out[cls][f] = {"mean": _mean(d), "ci95": ci95(d)}
    for f in TOP_FIELDS:
        d = [a[f] - b[f] for a, b in zip(mine, ref, strict=True)]
        out[f] = {"mean": _mean(d), "ci95": ci95(d)}
    return out


@dataclass(frozen=True)
class CompareConfig:
    """What to compare, on what."""

    policies: tuple[str, ...] = ("fifo", "priority", "k8s", "fitgpp", "ppo")
    """policy specs, resolved through the registry"""
    workload: str | None = "paper"
    """synthetic preset name (ignored when ``trace`` is set)"""
    trace: str | None = None
    """path to a trace CSV; every seed then replays the same trace"""
    cluster: str | None = None
    """cluster preset name or path to a cluster CSV (None: the workload's own, 'paper' for synthetic ones)"""
    seeds: int = 5
    """number of workloads (seeds first_seed, first_seed+1, ...)"""
    first_seed: int = 0
    n_jobs: int | None = None
    """jobs per synthetic workload (None: the preset's)"""
    sim: SimConfig = field(default_factory=SimConfig)
    """simulator rules; its ``queue`` is replaced by each policy's own"""

    def __post_init__(self) -> None:
        if not self.policies:
            raise ConfigError("Expected at least one policy, got none")
        if len(set(self.policies)) != len(self.policies):
            raise ConfigError(f"Policies must be distinct, got {list(self.policies)}")
        for p in self.policies:
            policy_entry(p)  # unknown names fail now, not after minutes of simulation
        if not isinstance(self.seeds, int) or self.seeds <= 0:
            raise ConfigError(f"Expected seeds > 0, got {self.seeds!r}")
        if self.first_seed < 0:
            raise ConfigError(f"Expected first_seed >= 0, got {self.first_seed!r}")
        if self.n_jobs is not None and self.n_jobs <= 0:
            raise ConfigError(f"Expected jobs > 0, got {self.n_jobs!r}")
        if self.trace is None and self.workload is None:
            raise ConfigError("Expected a workload name or a trace path")
        known = sorted(PRESETS) + sorted(TRACE_WORKLOADS)
        if self.trace is None and self.workload not in known:
            raise ConfigError(f"Unknown workload {self.workload!r}; expected one of {known} (or --trace PATH)")


@dataclass
class ComparisonResult:
    """Per policy, per seed results, and the JSON-ready summary."""

    config: CompareConfig
    cluster: ClusterSpec
    workload_name: str
    runs: dict[str, list[RunResult]]
    wall_time: dict[str, float]

    def summary(self) -> dict[str, Any]:
        """``{"policies": {NAME: {"te": {...}, "be": {...}, "preemptions", "gpu_utilization", "per_seed"}}}``."""
        out: dict[str, Any] = {}
        for name, runs in self.runs.items():
            per_seed = []
            for i, r in enumerate(runs):
                s = r.summary()
                s["seed"] = self.config.first_seed + i
                per_seed.append(s)
            entry: dict[str, Any] = {}
            for cls in ("te", "be"):
                entry[cls] = {f: _mean([s[cls][f] for s in per_seed]) for f in CLASS_FIELDS}
                entry[cls]["n_jobs"] = _mean([s[cls]["n_jobs"] for s in per_seed])
            for f in TOP_FIELDS:
                entry[f] = _mean([s[f] for s in per_seed])
            entry["ci95"] = {
                **{cls: {f: ci95([s[cls][f] for s in per_seed]) for f in CLASS_FIELDS} for cls in ("te", "be")},
                **{f: ci95([s[f] for s in per_seed]) for f in TOP_FIELDS},
            }
            entry["wall_time_s"] = self.wall_time[name]
            entry["per_seed"] = per_seed
            out[name] = entry
        for name, entry in out.items():
            # Paired differences (this policy minus the reference, seed by seed, same workload): the noise
            # of the workload cancels, so these intervals are far tighter than those of the means.
            entry["paired"] = {
                ref: _paired(entry["per_seed"], out[ref]["per_seed"])
                for ref in PAIRED_REFERENCES
                if ref in out and ref != name
            }
        return {
            "workload": self.workload_name,
            "cluster": self.cluster.name,
            "seeds": [self.config.first_seed + i for i in range(self.config.seeds)],
            "sim": {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(self.config.sim).items()},
            "policies": out,
        }

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


def _mean(values: list[float]) -> float:
    vals = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(vals)) if vals else float("nan")


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def default_cluster(config: CompareConfig) -> str:
    if config.cluster is not None:
        return config.cluster
    if config.trace is None and config.workload in TRACE_WORKLOADS:
        return TRACE_WORKLOADS[config.workload].cluster
    return "paper"


def load_workloads(config: CompareConfig, cluster: ClusterSpec) -> tuple[str, list[Workload]]:
    """The workload of every seed. Synthetic: one independent draw per seed. A named trace workload: test
    window ``first_seed + i`` for seed ``i``. A trace file: the trace itself for every seed."""
    if config.trace is not None:
        wl = load_trace(config.trace)
        if config.n_jobs is not None:
            raise ConfigError("--jobs applies to synthetic workloads only; cut the trace file instead")
        wl.check_fits(cluster)
        return wl.name, [wl] * config.seeds
    assert config.workload is not None
    if config.workload in TRACE_WORKLOADS:
        if config.n_jobs is not None:
            raise ConfigError(f"--jobs applies to synthetic workloads; {config.workload!r} is cut into time windows")
        tw = TRACE_WORKLOADS[config.workload]
        available = len(tw.windows("test"))
        if config.first_seed + config.seeds > available:
            raise ConfigError(
                f"Workload {config.workload!r} has {available} test windows; "
                f"--first-seed {config.first_seed} --seeds {config.seeds} asks for more"
            )
        windows = [tw.window("test", config.first_seed + i) for i in range(config.seeds)]
        for wl in windows:
            wl.check_fits(cluster)
        return config.workload, windows
    overrides = {"n_jobs": config.n_jobs} if config.n_jobs is not None else {}
    synth = preset(config.workload, **overrides)
    workloads = []
    for i in range(config.seeds):
        seed = config.first_seed + i
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
        wl = generate(synth, cluster, rng, name=config.workload)
        wl.check_fits(cluster)
        workloads.append(wl)
    return config.workload, workloads


def run_comparison(
    config: CompareConfig, *, progress: bool | None = None, log_dir: str | None = None
) -> ComparisonResult:
    """Run every policy on every seed's workload. ``progress``: None shows a bar on a terminal only."""
    cluster_name = default_cluster(config)
    cluster = resolve_cluster(cluster_name)
    name, workloads = load_workloads(config, cluster)
    policies = {spec: make_runner(spec, cluster_name, config.sim) for spec in config.policies}
    runs: dict[str, list[RunResult]] = {p: [] for p in policies}
    wall = {p: 0.0 for p in policies}
    bar = _progress_bar(len(workloads) * len(policies), progress)
    try:
        for i, wl in enumerate(workloads):
            seed = config.first_seed + i
            for spec, run in policies.items():
                if bar is not None:
                    bar.set_postfix_str(f"seed {seed} {spec}")
                rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
                t0 = time.perf_counter()
                result = run(wl, rng, seed)
                if wl.measured is not None:  # leave out the warm-up jobs
                    result = result.only(np.array(wl.measured))
                wall[spec] += time.perf_counter() - t0
                runs[spec].append(result)
                if log_dir is not None:
                    write_logs(Path(log_dir) / _safe(spec) / f"seed{seed}", result)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return ComparisonResult(config, cluster, name, runs, wall)


def _safe(spec: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in spec)


def _progress_bar(total: int, progress: bool | None):  # noqa: ANN202
    if progress is False:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is an optional extra ("cli"); without it there is simply no bar
        return None
    return tqdm(total=total, unit="run", desc="simulating", disable=None if progress is None else False)


def write_logs(directory: Path, result: RunResult) -> None:
    """Write ``jobs.csv`` and ``segments.csv`` for one run."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        slowdown = result.slowdown
        with open(directory / "jobs.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(
                ["job_id", "class", "submit_time", "duration", "first_start", "completion", "preemptions", "slowdown"]
            )
            for i, jid in enumerate(result.job_ids):
                w.writerow(
                    [
                        jid,
                        JobClass(int(result.job_class[i])).name,
                        repr(float(result.submit[i])),
                        repr(float(result.duration[i])),
                        repr(float(result.first_start[i])),
                        repr(float(result.completion[i])),
                        int(result.preemptions[i]),
                        repr(float(slowdown[i])),
                    ]
                )
        with open(directory / "segments.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["job_id", "node", "start", "end", "end_reason"])
            for s in result.segments:
                w.writerow([result.job_ids[s.job], s.node, repr(s.start), repr(s.end), s.end_reason])
    except OSError as exc:
        raise SchedGymError(f"cannot write logs to {directory}: {exc.strerror}") from None


_TABLE_COLUMNS = (  # (header, class or None, field, width, decimals)
    ("TE p50", "te", "slowdown_p50", 8, 3),
    ("TE p95", "te", "slowdown_p95", 8, 3),
    ("TE p99", "te", "slowdown_p99", 8, 3),
    ("TE wait", "te", "wait_mean", 9, 0),
    ("BE p50", "be", "slowdown_p50", 8, 3),
    ("BE p95", "be", "slowdown_p95", 8, 3),
    ("BE p99", "be", "slowdown_p99", 8, 3),
    ("BE wait", "be", "wait_mean", 9, 0),
    ("preempt", None, "preemptions", 8, 1),
    ("GPU util", None, "gpu_utilization", 8, 3),
)


def format_table(result: ComparisonResult) -> str:
    """The on-screen table: means, ratios to FIFO (when run), paired differences to FitGpp (when run)."""
    summary = result.summary()
    summ = {_display(name): e for name, e in summary["policies"].items()}
    width = max([18, *(len(n) for n in summ)])
    head = f"{'policy':<{width}} " + " ".join(f"{h:>{w}}" for h, _, _, w, _ in _TABLE_COLUMNS)
    cfg = result.config
    lines = [
        f"workload {result.workload_name}, cluster {result.cluster.name}, "
        f"seeds {cfg.first_seed}..{cfg.first_seed + cfg.seeds - 1} "
        "(slowdown percentiles, mean wait in s; means over seeds)",
        head,
        "-" * len(head),
    ]
    for name, e in summ.items():
        cells = [e[c][f] if c else e[f] for _, c, f, _, _ in _TABLE_COLUMNS]
        lines.append(_row(name, cells, [(w, d) for _, _, _, w, d in _TABLE_COLUMNS], width))
    ratios = result.ratios("fifo")
    if ratios:
        lines += ["", "ratio to fifo", head, "-" * len(head)]
        for name, r in ((_display(n), r) for n, r in ratios.items()):
            cells = [r[f"{c}_{f}"] if c else r[f] for _, c, f, _, _ in _TABLE_COLUMNS]
            lines.append(_row(name, cells, [(w, 3) for _, _, _, w, _ in _TABLE_COLUMNS], width))
    if cfg.seeds > 1 and any("fitgpp" in e["paired"] for e in summ.values()):
        lines += ["", "paired difference to fitgpp, same workloads (mean +- 95% CI over seeds)"]
        keys = [("TE p95", "te", "slowdown_p95"), ("BE p50", "be", "slowdown_p50"), ("BE p95", "be", "slowdown_p95")]
        lines.append(f"{'policy':<{width}} " + " ".join(f"{k:>19}" for k, _, _ in keys))
        for name, e in summ.items():
            if "fitgpp" not in e["paired"]:
                continue
            p = e["paired"]["fitgpp"]
            cells = [f"{p[c][f]['mean']:+.3f} +- {p[c][f]['ci95']:.3f}" for _, c, f in keys]
            lines.append(f"{name:<{width}} " + " ".join(f"{c:>19}" for c in cells))
    return "\n".join(lines)


def _display(name: str, limit: int = 32) -> str:
    """A policy name short enough for the table (a NAME:PATH spec keeps its start and its end)."""
    return name if len(name) <= limit else f"{name[:12]}...{name[-(limit - 15) :]}"


def _row(name: str, values: list[float], formats: list[tuple[int, int]], width: int = 18) -> str:
    cells = [f"{'-':>{w}}" if math.isnan(v) else f"{v:>{w}.{d}f}" for v, (w, d) in zip(values, formats, strict=True)]
    return f"{name:<{width}} " + " ".join(cells)


def _nan_to_none(obj: Any) -> Any:
    # Strict JSON has no NaN; a class with no jobs (a trace without TE jobs, say) reports null instead.
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_none(v) for v in obj]
    return obj


def write_json(path: str, result: ComparisonResult) -> None:
    try:
        with open(path, "w") as fh:
            json.dump(_nan_to_none(result.summary()), fh, indent=2, allow_nan=False)
            fh.write("\n")
    except OSError as exc:
        raise SchedGymError(f"cannot write {path}: {exc.strerror}") from None


def write_csv(path: str, result: ComparisonResult) -> None:
    """One row per policy and figure: mean over seeds, 95% CI bounds, number of seeds, and the paired
    difference to fitgpp and fifo (mean and CI half-width) where those were run."""
    summ = result.summary()["policies"]
    header = ["policy", "class", "metric", "mean", "ci95_low", "ci95_high", "n_seeds"]
    for ref in PAIRED_REFERENCES:
        header += [f"diff_vs_{ref}", f"diff_vs_{ref}_ci95"]
    rows = []
    for name, e in summ.items():
        figures = [(cls, f, e[cls][f], e["ci95"][cls][f]) for cls in ("te", "be") for f in CLASS_FIELDS]
        figures += [("all", f, e[f], e["ci95"][f]) for f in TOP_FIELDS]
        for cls, f, mean, half in figures:
            row = [name, cls, f, mean, mean - half, mean + half, len(e["per_seed"])]
            for ref in PAIRED_REFERENCES:
                p = e["paired"].get(ref)
                d = (p[f] if cls == "all" else p[cls][f]) if p else None
                row += [d["mean"], d["ci95"]] if d else ["", ""]
            rows.append(row)
    try:
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
    except OSError as exc:
        raise SchedGymError(f"cannot write {path}: {exc.strerror}") from None


def write_plot(path: str, result: ComparisonResult) -> None:
    """Slowdown CDFs per class (all seeds pooled) and a TE-p95 vs BE-p95 scatter with 95% CIs."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SchedGymError("--plot needs matplotlib: pip install 'schedgym[plot]'") from None
    summ = result.summary()["policies"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, cls, label in ((axes[0], JobClass.TE, "TE"), (axes[1], JobClass.BE, "BE")):
        for name, runs in result.runs.items():
            sd = np.sort(np.concatenate([r.slowdown[r.job_class == int(cls)] for r in runs]))
            if sd.size:
                ax.plot(sd, np.arange(1, sd.size + 1) / sd.size, label=name)
        ax.set_xscale("log")
        ax.set_xlabel(f"{label} slowdown")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"{label} slowdown CDF")
        ax.grid(True, alpha=0.3)
    ax = axes[2]
    for name, e in summ.items():
        ax.errorbar(
            e["te"]["slowdown_p95"],
            e["be"]["slowdown_p95"],
            xerr=np.nan_to_num(e["ci95"]["te"]["slowdown_p95"]),
            yerr=np.nan_to_num(e["ci95"]["be"]["slowdown_p95"]),
            fmt="o",
            capsize=3,
            label=name,
        )
    ax.set_xscale("log")
    ax.set_xlabel("TE slowdown p95")
    ax.set_ylabel("BE slowdown p95")
    ax.set_title("p95 per policy (mean, 95% CI over seeds)")
    ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"workload {result.workload_name}, cluster {result.cluster.name}, {result.config.seeds} seeds")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise SchedGymError(f"cannot write {path}: {exc.strerror}") from None
    except ValueError as exc:  # matplotlib's answer to a file type it does not write
        raise SchedGymError(f"cannot write {path}: {exc}") from None
    finally:
        plt.close(fig)

"""What a comparison reports: the on-screen table, JSON, CSV, a plot, and per-run logs.

Every file is written atomically (to a temporary name beside it, then renamed), so a failed write leaves no
partial file where a reader expects a complete one.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from schedgym.errors import SchedGymError
from schedgym.experiments.compare import CLASS_FIELDS, PAIRED_REFERENCES, TOP_FIELDS, ComparisonResult
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import RunResult


@contextlib.contextmanager
def atomic_open(path: str | Path, newline: str | None = None) -> Iterator[IO[str]]:
    """Open a temporary file beside ``path`` for writing; rename it to ``path`` only if the block succeeds."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise SchedGymError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", newline=newline, encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise SchedGymError(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_logs(directory: Path, result: RunResult) -> None:
    """Write ``jobs.csv`` and ``segments.csv`` for one run."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SchedGymError(f"cannot write logs to {directory}: {exc.strerror}") from None
    slowdown = result.slowdown
    with atomic_open(directory / "jobs.csv", newline="") as fh:
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
    with atomic_open(directory / "segments.csv", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["job_id", "node", "start", "end", "end_reason"])
        for s in result.segments:
            w.writerow([result.job_ids[s.job], s.node, repr(s.start), repr(s.end), s.end_reason])


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
    ]
    if not result.workloads_vary and cfg.seeds > 1:
        lines.append(
            "note: every seed replays the same trace, so intervals are reported only where a policy's own "
            "randomness varies its figures"
        )
    lines += [head, "-" * len(head)]
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
            cells = [_pm(p[c][f]["mean"], p[c][f]["ci95"]) for _, c, f in keys]
            lines.append(f"{name:<{width}} " + " ".join(f"{c:>19}" for c in cells))
    return "\n".join(lines)


def _pm(mean: float, half: float) -> str:
    """``+0.012 +- 0.003``, or the mean alone when there is no interval."""
    return f"{mean:+.3f}" if math.isnan(half) else f"{mean:+.3f} +- {half:.3f}"


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
    with atomic_open(path) as fh:
        json.dump(_nan_to_none(result.summary()), fh, indent=2, allow_nan=False)
        fh.write("\n")


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
    with atomic_open(path, newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


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

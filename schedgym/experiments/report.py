"""What a comparison reports: the on-screen table, JSON, CSV, Markdown, a plot (drawn by
:mod:`schedgym.experiments.plotting`), and per-run logs.

Every file is written atomically (to a temporary name beside it, then renamed), so a failed write leaves no
partial file where a reader expects a complete one.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from schedgym._atomic import atomic_open, make_output_dir
from schedgym.errors import SchedGymError
from schedgym.experiments.compare import (
    CLASS_FIELDS,
    PAIRED_REFERENCES,
    TOP_FIELDS,
    VERDICT_REFERENCES,
    ComparisonResult,
    dominance,
)
from schedgym.experiments.figures import HEADLINE
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import RunResult


def write_logs(directory: Path, result: RunResult) -> None:
    """Write ``jobs.csv`` and ``segments.csv`` for one run (inside an :func:`~schedgym._atomic.output_set`,
    the folders created are removed again if the set fails)."""
    make_output_dir(directory)
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
    """The on-screen table: means, ratios to FIFO (when run), paired differences to fitgpp and to k8s (when
    run) with the dominance verdict (:func:`~schedgym.experiments.compare.dominance`)."""
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
    for ref in VERDICT_REFERENCES:
        if cfg.seeds < 2 or not any(ref in e["paired"] for e in summ.values()):
            continue
        lines += [
            "",
            f"paired difference to {ref}, same workloads (mean ± 95% CI over seeds; verdict over these four)",
        ]
        # The columns of the figures the verdict judges.
        lines.append(f"{'policy':<{width}} " + " ".join(f"{f.label:>19}" for f in HEADLINE) + "  verdict")
        for name, e in summ.items():
            if ref not in e["paired"]:
                continue
            p = e["paired"][ref]
            cells = [format_interval(f.in_summary(p)["mean"], f.in_summary(p)["ci95"], signed=True) for f in HEADLINE]
            lines.append(f"{name:<{width}} " + " ".join(f"{c:>19}" for c in cells) + f"  {dominance(p)}")
    return "\n".join(lines)


def format_interval(mean: float, half: float, digits: int = 3, *, signed: bool = False, missing: str = "-") -> str:
    """``0.012 ± 0.003`` (``+0.012 ± 0.003`` when ``signed``), the mean alone when there is no interval (a
    NaN half-width: one seed has none), ``missing`` when there is no mean. Every table and log line of an
    interval is written by this function."""
    if math.isnan(mean):
        return missing
    sign = "+" if signed else ""
    text = f"{mean:{sign}.{digits}f}"
    return text if math.isnan(half) else f"{text} ± {half:.{digits}f}"


def _display(name: str, limit: int = 32) -> str:
    """A policy name short enough for the table (a NAME:PATH spec keeps its start and its end)."""
    return name if len(name) <= limit else f"{name[:12]}...{name[-(limit - 15) :]}"


def _row(name: str, values: list[float], formats: list[tuple[int, int]], width: int = 18) -> str:
    cells = [f"{'-':>{w}}" if math.isnan(v) else f"{v:>{w}.{d}f}" for v, (w, d) in zip(values, formats, strict=True)]
    return f"{name:<{width}} " + " ".join(cells)


def json_ready(obj: Any) -> Any:
    """``obj`` for strict JSON: NaN (a class without jobs, an interval from one seed) becomes null, tuples
    lists, numpy scalars Python ones, keys strings. Infinities are left for the writer to refuse."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_ready(obj.item())
    return obj


def _non_finite(obj: Any, where: str = "") -> str | None:
    """The place of the first infinite number in ``obj`` (NaN was already turned into null), or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return where or "the top level"
    if isinstance(obj, dict):
        items: Any = ((f"{where}.{k}" if where else str(k), v) for k, v in obj.items())
    elif isinstance(obj, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for place, value in items:
        found = _non_finite(value, place)
        if found is not None:
            return found
    return None


def write_json(path: str, result: ComparisonResult) -> None:
    """The summary as strict JSON: NaN (a class without jobs) becomes null; an infinite figure, which the
    input limits (schedgym.limits) should make impossible, is an error naming where it is, and no file is
    written."""
    payload = json_ready(result.summary())
    place = _non_finite(payload)
    if place is not None:
        raise SchedGymError(f"cannot write {path}: {place} is not a finite number, and JSON has no infinity")
    text = json.dumps(payload, indent=2, allow_nan=False) + "\n"  # in full before the file is opened
    with atomic_open(path) as fh:
        fh.write(text)


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


def markdown_table(result: ComparisonResult) -> str:
    """The results as a Markdown table: per policy, the mean and 95% CI over seeds of TE p95, BE p50, BE p95
    and BE p99 and the mean preemptions, then the verdict of its paired differences to fitgpp and to k8s
    (:func:`~schedgym.experiments.compare.dominance`) where those were run."""
    summ = result.summary()["policies"]
    refs = [r for r in VERDICT_REFERENCES if r in summ and result.config.seeds > 1]
    head = ["policy", *(f.label for f in HEADLINE), "preemptions", *(f"vs {r}" for r in refs)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, e in summ.items():
        cells = [f"`{_display(name)}`"]
        for f in HEADLINE:
            cells.append(format_interval(f.in_summary(e), f.in_summary(e["ci95"]), f.digits))
        cells.append(f"{e['preemptions']:.1f}")
        cells += ["" if r == name else dominance(e["paired"][r]) for r in refs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(path: str, result: ComparisonResult) -> None:
    """:func:`markdown_table` into ``path`` (written whole, then renamed into place)."""
    text = markdown_table(result)
    with atomic_open(path) as fh:
        fh.write(text)


def write_plot(path: str, result: ComparisonResult) -> None:
    """Slowdown tails per class (all seeds pooled) and a TE-p95 vs BE-p99 scatter with 95% CIs.

    The image goes to a temporary file beside ``path`` first and is renamed to it once complete."""
    # Imported here: the plotting module draws from compare's and sweep's results (and matplotlib is an extra).
    from schedgym.experiments.plotting import comparison_figure, save_figure

    save_figure(path, lambda: comparison_figure(result), dpi=120)

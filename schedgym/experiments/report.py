"""What a comparison reports: the on-screen table, JSON, CSV, a plot, and per-run logs.

Every file is written atomically (to a temporary name beside it, then renamed), so a failed write leaves no
partial file where a reader expects a complete one.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from schedgym._atomic import atomic_open, make_output_dir
from schedgym.errors import SchedGymError
from schedgym.experiments.compare import (
    CLASS_FIELDS,
    DOMINANCE_FIGURES,
    PAIRED_REFERENCES,
    TOP_FIELDS,
    VERDICT_REFERENCES,
    ComparisonResult,
    dominance,
)
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


# The figures the verdict judges, as (column title, class, field): "TE p95", "BE p50", "BE p95", "BE p99".
_VERDICT_COLUMNS = tuple((f"{cls.upper()} {f.removeprefix('slowdown_')}", cls, f) for cls, f in DOMINANCE_FIGURES)


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
    keys = _VERDICT_COLUMNS
    for ref in VERDICT_REFERENCES:
        if cfg.seeds < 2 or not any(ref in e["paired"] for e in summ.values()):
            continue
        lines += [
            "",
            f"paired difference to {ref}, same workloads (mean +- 95% CI over seeds; verdict over these four)",
        ]
        lines.append(f"{'policy':<{width}} " + " ".join(f"{k:>19}" for k, _, _ in keys) + "  verdict")
        for name, e in summ.items():
            if ref not in e["paired"]:
                continue
            p = e["paired"][ref]
            cells = [_pm(p[c][f]["mean"], p[c][f]["ci95"]) for _, c, f in keys]
            lines.append(f"{name:<{width}} " + " ".join(f"{c:>19}" for c in cells) + f"  {dominance(p)}")
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
    figures = _VERDICT_COLUMNS
    head = ["policy", *(f for f, _, _ in figures), "preemptions", *(f"vs {r}" for r in refs)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, e in summ.items():
        cells = [f"`{_display(name)}`"]
        for _, cls, f in figures:
            digits = 3 if f != "slowdown_p99" else 2
            mean, half = e[cls][f], e["ci95"][cls][f]
            cells.append(
                "-"
                if math.isnan(mean)
                else f"{mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")
            )
        cells.append(f"{e['preemptions']:.1f}")
        cells += ["" if r == name else dominance(e["paired"][r]) for r in refs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(path: str, result: ComparisonResult) -> None:
    """:func:`markdown_table` into ``path`` (written whole, then renamed into place)."""
    text = markdown_table(result)
    with atomic_open(path) as fh:
        fh.write(text)


# How the plot shows slowdowns. A slowdown is at least 1 and most jobs sit at 1 (they never waited), so a CDF
# of slowdown spends its height on jobs that tell the policies apart not at all, and squeezes the differences
# into the band 0.8-1.0 (on a log x axis starting at 1 it also squeezes TE's whole 1.0-1.3 range into a
# sliver). The CDF panels therefore show the complementary CDF -- the fraction of jobs whose slowdown exceeds
# x -- on log-log axes, with x placed by its excess x - 1 (time queued or preempted per unit of run time) and
# labelled in slowdown. The log y axis spreads the tail from "how many jobs waited at all" (the curve's left
# end) down to the single worst job (1/n, marked), so p95 and p99 are read where a curve crosses the 0.05 and
# 0.01 lines; the log excess axis spreads a TE tail that ends at 1.3 as clearly as a BE tail that reaches 300.
# Excess slowdowns below EXCESS_FLOOR (0.1% of run time, mostly rounding) count as no delay.
EXCESS_FLOOR = 1e-3
_LABEL_LIMIT = 20
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
LINESTYLES = ("-", "--", "-.", ":")


def plot_labels(names: list[str]) -> list[str]:
    """Labels of at most ``_LABEL_LIMIT`` characters (start and end of a long one), kept distinct."""
    keep = (_LABEL_LIMIT - 1) // 2
    short = [n if len(n) <= _LABEL_LIMIT else f"{n[:keep]}\u2026{n[-(_LABEL_LIMIT - 1 - keep) :]}" for n in names]
    return [s if short.count(s) == 1 else f"{s[: _LABEL_LIMIT - 3]}#{i}" for i, s in enumerate(short)]


def slowdown_axis(axis: Any, lo: float, hi: float) -> None:
    """A log axis of excess slowdown ``x - 1`` over ``[lo, hi]``, its ticks placed at round slowdowns and
    labelled with the slowdown itself (1.001, 1.01, 1.1, 2, 10, 100, ...; more of them over a short range)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
    ticks: list[float] = []
    for mantissas in (tuple(range(1, 10)), (1, 2, 3, 5), (1, 3), (1, 2)):  # the finest with at most 8 ticks
        ticks = []
        for k in decades:
            for m in mantissas:
                # slowdown 1 + m 10^k below 2, m 10^k from 2 on; the coarsest set takes 2 from the (1, 2) pair
                excess = m * 10.0**k if k < 0 else m * 10.0**k - 1
                if lo <= excess <= hi and (mantissas != (1, 2) or m == 1 or k == 0):
                    ticks.append(excess)
        if len(ticks) <= 8:
            break
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{1 + x:.6g}"))
    axis.set_minor_formatter(NullFormatter())


def _tail(slowdown: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The complementary CDF as a post-step curve: excess slowdowns from ``EXCESS_FLOOR`` on, and the
    fraction of all jobs whose slowdown exceeds each."""
    excess = np.sort(slowdown[slowdown - 1 > EXCESS_FLOOR] - 1)
    m = excess.size
    x = np.concatenate([[EXCESS_FLOOR], excess])
    y = np.arange(m, -1, -1) / slowdown.size
    return x, y


def _place_labels(fig: Any, ax: Any, points: list[tuple[str, float, float, Any]]) -> None:
    """Annotate each scatter point with its label, at the first nearby offset where the text stays inside the
    axes and clear of the other points and labels (a thin leader line joins a label set further away)."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()  # lays the figure out, so that positions in pixels are final
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken = []
    for _, x, y, _ in points:
        px, py = ax.transData.transform((x, y))
        taken.append(Bbox.from_extents(px - 5, py - 5, px + 5, py + 5))
    directions = [(1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0)]
    candidates = [(r * dx, r * dy) for r in (5, 12, 22, 34) for dx, dy in directions]

    def align(dx: float, dy: float) -> dict[str, str]:
        return {
            "ha": "left" if dx > 0 else "right" if dx < 0 else "center",
            "va": "bottom" if dy > 0 else "top" if dy < 0 else "center",
        }

    text_style = {"fontsize": 8, "bbox": {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}}
    for label, x, y, color in points:
        chosen = candidates[0]
        for dx, dy in candidates:
            probe = ax.annotate(
                label, (x, y), xytext=(dx, dy), textcoords="offset points", **align(dx, dy), **text_style
            )
            box = probe.get_window_extent(renderer)
            probe.remove()
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(t) for t in taken):
                chosen = (dx, dy)
                break
        far = max(abs(chosen[0]), abs(chosen[1])) > 5  # a leader line joins a label set further away
        ann = ax.annotate(
            label,
            (x, y),
            xytext=chosen,
            textcoords="offset points",
            color=color,
            arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6, "shrinkA": 0, "shrinkB": 4} if far else None,
            **align(*chosen),
            **text_style,
        )
        taken.append(ann.get_window_extent(renderer))


def outside_legends() -> bool:
    """Whether this matplotlib places a figure legend "outside" the panels (3.7 and later)."""
    import matplotlib

    major, minor = (int("".join(c for c in p if c.isdigit()) or 0) for p in matplotlib.__version__.split(".")[:2])
    return (major, minor) >= (3, 7)


# The scatter's axes: the TE figure every preempting rule gets near 1, and the BE tail where their victim
# choices differ most (class key, field, label).
_SCATTER = (("te", "slowdown_p95", "TE slowdown p95"), ("be", "slowdown_p99", "BE slowdown p99"))


def _plot_figure(result: ComparisonResult) -> Any:
    """The comparison's figure: TE and BE slowdown tails (all seeds pooled) and a TE-p95 vs BE-p99 scatter
    with 95% CIs, one colour, line style and marker per policy, and one legend below the panels."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    names = list(result.runs)
    labels = dict(zip(names, plot_labels(names), strict=True))
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    style: dict[str, dict[str, Any]] = {
        name: {
            "color": cmap(i % cmap.N),
            "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)],
        }
        for i, name in enumerate(names)
    }
    # Not pyplot: a figure of its own with an Agg canvas draws headless and leaves the caller's backend alone.
    fig = Figure(figsize=(15, 5.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    for ax, cls in ((axes[0], JobClass.TE), (axes[1], JobClass.BE)):
        pooled = {
            n: np.concatenate([r.slowdown[r.job_class == int(cls)] for r in runs]) for n, runs in result.runs.items()
        }
        n_jobs = max(sd.size for sd in pooled.values())
        pooled_note = ", seeds pooled" if result.config.seeds > 1 else ""
        ax.set_title(f"{cls.name} jobs: slowdown tail ({n_jobs} jobs{pooled_note})")
        if n_jobs == 0:
            ax.text(0.5, 0.5, f"no {cls.name} jobs", transform=ax.transAxes, ha="center", va="center")
            ax.set_axis_off()
            continue
        undelayed = []
        top = EXCESS_FLOOR * 10
        for name, sd in pooled.items():
            x, y = _tail(sd)
            if x.size == 1:
                undelayed.append(labels[name])
                continue
            st = style[name]
            ax.plot(x, y, drawstyle="steps-post", color=st["color"], linestyle=st["linestyle"], lw=1.6)
            ax.plot(x[-1], y[-2], marker=st["marker"], color=st["color"], ms=6, ls="none")  # the worst job
            top = max(top, float(x[-1]))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(EXCESS_FLOOR, top * 1.6)
        ax.set_ylim(0.6 / n_jobs, 1.0)
        slowdown_axis(ax.xaxis, EXCESS_FLOOR, top * 1.6)
        for frac, tag in ((0.05, "p95"), (0.01, "p99")):
            if frac > 0.6 / n_jobs:
                ax.axhline(frac, color="0.45", lw=0.8, ls=":")
                ax.text(1.01, frac, tag, transform=ax.get_yaxis_transform(), fontsize=8, color="0.35", va="center")
        if undelayed:
            ax.text(
                0.02, 0.02, "no job delayed: " + ", ".join(undelayed), transform=ax.transAxes, fontsize=8, va="bottom"
            )
        ax.set_xlabel(f"{cls.name} slowdown x  (log scale of x \u2212 1)")
        ax.set_ylabel(f"fraction of {cls.name} jobs with slowdown > x")
        ax.grid(True, which="major", alpha=0.3)

    ax = axes[2]
    summ = result.summary()["policies"]
    points = []
    spans: dict[str, list[tuple[float, float, float]]] = {"te": [], "be": []}  # (mean, CI low, CI high)
    for name, e in summ.items():
        means = [e[k][f] for k, f, _ in _SCATTER]
        if any(math.isnan(m) for m in means):  # a class without jobs has no percentiles
            continue
        xy, err = [], []
        for (key, fig_name, _), mean in zip(_SCATTER, means, strict=True):
            v = max(mean - 1, EXCESS_FLOOR)
            half = float(np.nan_to_num(e["ci95"][key][fig_name]))
            lo, hi = max(v - half, EXCESS_FLOOR), v + half
            xy.append(v)
            err.append([[v - lo], [hi - v]])
            spans[key].append((v, lo, hi))
        st = style[name]
        ax.errorbar(
            xy[0],
            xy[1],
            xerr=err[0],
            yerr=err[1],
            fmt=st["marker"],
            color=st["color"],
            ms=7,
            capsize=3,
            elinewidth=1,
            label=labels[name],
        )
        points.append((labels[name], xy[0], xy[1], st["color"]))
    for key, axis in (("te", ax.xaxis), ("be", ax.yaxis)):
        if spans[key]:
            # Every interval in view, except that one reaching more than a decade past the points (a wide CI
            # from few seeds, whose low end on a log axis is 0) runs off the edge rather than squash them.
            vals = [v for v, _, _ in spans[key]]
            lo = max(min(lo for _, lo, _ in spans[key]), min(vals) / 10)
            hi = min(max(hi for _, _, hi in spans[key]), max(vals) * 10)
        else:
            lo, hi = EXCESS_FLOOR, 1.0
        span = math.log10(hi / lo)
        pad = max(0.12 * span, 0.15, (0.6 - span) / 2)  # decades: at least 0.6 in view, for two ticks or more
        lo, hi = max(lo / 10**pad, EXCESS_FLOOR / 1.2), hi * 10**pad
        if key == "te":
            ax.set_xscale("log")
            ax.set_xlim(lo, hi)
        else:
            ax.set_yscale("log")
            ax.set_ylim(lo, hi)
        slowdown_axis(axis, lo, hi)
    ax.set_xlabel(f"{_SCATTER[0][2]}  (log scale of it \u2212 1)")
    ax.set_ylabel(f"{_SCATTER[1][2]}  (log scale of it \u2212 1)")
    ax.set_title("per policy: " + ("mean and 95% CI over seeds" if result.config.seeds > 1 else "one seed, no CI"))
    ax.grid(True, which="major", alpha=0.3)
    if not points:
        ax.text(0.5, 0.5, "needs both TE and BE jobs", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()

    handles = [Line2D([], [], lw=1.6, markersize=7, label=labels[n], **style[n]) for n in names]
    cfg = result.config
    seeds = f"{cfg.seeds} seed" + ("s" if cfg.seeds > 1 else "")
    if cfg.seeds > 1:
        seeds += f" ({cfg.first_seed}\u2013{cfg.first_seed + cfg.seeds - 1})"
    if not result.workloads_vary:
        seeds += ", every seed replaying the same trace"
    fig.suptitle(f"Slowdown by policy \u2014 workload {result.workload_name}, cluster {result.cluster.name}, {seeds}")
    legend = {"handles": handles, "ncol": min(len(handles), 8), "title": "policy", "frameon": False, "fontsize": 9}
    if outside_legends():
        fig.legend(loc="outside lower center", **legend)  # the layout makes room for it below the panels
    else:  # hang it below the figure; write_plot's savefig(bbox_inches="tight") keeps it in the file
        fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), **legend)
    _place_labels(fig, ax, points)
    return fig


def write_plot(path: str, result: ComparisonResult) -> None:
    """Slowdown tails per class (all seeds pooled) and a TE-p95 vs BE-p99 scatter with 95% CIs.

    The image goes to a temporary file beside ``path`` first and is renamed to it once complete."""
    save_figure(path, lambda: _plot_figure(result), dpi=120)


def save_figure(path: str | Path, draw: Callable[[], Any], dpi: int) -> None:
    """Write the figure ``draw()`` makes to ``path`` (its suffix the format) atomically, for compare's and
    sweep's plots: matplotlib missing and a format it cannot write are one-line errors, checked before
    anything is drawn."""
    try:
        import matplotlib
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise SchedGymError("--plot needs matplotlib: pip install 'schedgym[plot]'") from None
    target = Path(path)
    fmt = target.suffix[1:].lower() or matplotlib.rcParams["savefig.format"]
    if fmt not in FigureCanvasBase.get_supported_filetypes():  # before drawing anything
        raise SchedGymError(f"cannot write {path}: matplotlib does not write .{fmt} files (use .png, .pdf or .svg)")
    fig = None
    try:
        # matplotlib warns as it fails (a full disk while it writes): the one line below says what went wrong.
        with atomic_open(target, "wb") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig = draw()
            fig.savefig(fh, format=fmt, dpi=dpi, bbox_inches=None if outside_legends() else "tight")
    except ValueError as exc:  # matplotlib's answer to a file type it cannot write after all
        raise SchedGymError(f"cannot write {path}: {exc}") from None
    finally:
        if fig is not None:
            fig.clear()

"""The plots of ``schedgym compare`` and ``schedgym sweep`` (matplotlib, the ``plot`` extra).

:func:`comparison_figure` draws a comparison: each class's slowdown tail (all seeds pooled) and a scatter of
TE p95 against BE p99 with 95% CIs. :func:`sweep_figure` draws a sweep: each headline figure
(:data:`~schedgym.experiments.figures.HEADLINE`) against each swept field, a line per policy. Both give a
policy the same colour, line style and marker (:func:`policy_styles`), put slowdowns on the same axis
(:func:`slowdown_axis`) and one legend below the panels (:func:`figure_legend`); :func:`save_figure` writes
either atomically. Figures are made without pyplot: each has an Agg canvas of its own, draws headless and
leaves the caller's backend alone.

How slowdowns are shown. A slowdown is at least 1 and most jobs sit at 1 (they never waited), so a CDF of
slowdown spends its height on jobs that tell the policies apart not at all, and squeezes the differences
into the band 0.8-1.0 (on a log x axis starting at 1 it also squeezes TE's whole 1.0-1.3 range into a
sliver). The tail panels therefore show the complementary CDF -- the fraction of jobs whose slowdown exceeds
x -- on log-log axes, with x placed by its excess x - 1 (time queued or preempted per unit of run time) and
labelled in slowdown. The log y axis spreads the tail from "how many jobs waited at all" (the curve's left
end) down to the single worst job (1/n, marked), so p95 and p99 are read where a curve crosses the 0.05 and
0.01 lines; the log excess axis spreads a TE tail that ends at 1.3 as clearly as a BE tail that reaches 300.
Excess slowdowns below :data:`EXCESS_FLOOR` (0.1% of run time, mostly rounding) count as no delay.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from schedgym._atomic import atomic_open, is_stream
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.compare import ComparisonResult
from schedgym.experiments.figures import BE_P99, HEADLINE, TE_P95, ClassFigure
from schedgym.experiments.suite import SuiteResult
from schedgym.experiments.sweep import SweepResult, marginal, show_value, unswept
from schedgym.sim.job import JobClass

EXCESS_FLOOR = 1e-3
"""excess slowdowns (slowdown - 1) below this count as no delay, and log axes of excess start here"""
LABEL_LIMIT = 20
"""characters of a policy's label in a legend or beside a point"""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
LINESTYLES = ("-", "--", "-.", ":")
SCATTER = (TE_P95, BE_P99)
"""the comparison scatter's axes: the TE figure every preempting rule gets near 1, and the BE tail where
their victim choices differ most"""


# --- shared by both plots


def plot_labels(names: list[str]) -> list[str]:
    """Labels of at most :data:`LABEL_LIMIT` characters (start and end of a long one), kept distinct."""
    keep = (LABEL_LIMIT - 1) // 2
    short = [n if len(n) <= LABEL_LIMIT else f"{n[:keep]}\u2026{n[-(LABEL_LIMIT - 1 - keep) :]}" for n in names]
    return [s if short.count(s) == 1 else f"{s[: LABEL_LIMIT - 3]}#{i}" for i, s in enumerate(short)]


def policy_styles(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each policy's ``color``, ``linestyle`` and ``marker``, by its place in ``names``: the same policy list
    looks the same in the comparison's plot and the sweep's."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {
        name: {
            "color": cmap(i % cmap.N),
            "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)],
        }
        for i, name in enumerate(names)
    }


def new_figure(figsize: tuple[float, float]) -> Any:
    """A matplotlib figure with an Agg canvas of its own and a constrained layout."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def outside_legends() -> bool:
    """Whether this matplotlib places a figure legend "outside" the panels (3.7 and later)."""
    import matplotlib

    major, minor = (int("".join(c for c in p if c.isdigit()) or 0) for p in matplotlib.__version__.split(".")[:2])
    return (major, minor) >= (3, 7)


def figure_legend(fig: Any, handles: list[Any], labels: list[str]) -> None:
    """One legend of the policies below the panels."""
    legend = {"ncol": min(len(handles), 8), "title": "policy", "frameon": False, "fontsize": 9}
    if outside_legends():
        fig.legend(handles, labels, loc="outside lower center", **legend)  # the layout makes room below the panels
    else:  # hang it below the figure; save_figure's savefig(bbox_inches="tight") keeps it in the file
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), **legend)


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


FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
"""the formats ``--plot`` writes"""


def check_figure_name(flag: str, path: str | Path) -> None:
    """:class:`ConfigError` unless ``path`` names a figure ``--plot`` can write (a .png, .pdf or .svg file, or
    a device or FIFO without a suffix, written as PNG) and matplotlib is installed: checked before the work
    whose figure it is (a training run that ends in a refused figure would lose its other outputs with it,
    as they are written as one set)."""
    suffix = Path(path).suffix.lower()
    if suffix not in FIGURE_SUFFIXES and not (suffix == "" and is_stream(path)):
        raise ConfigError(
            f"{flag} {str(path)!r}: expected a .png, .pdf or .svg file name (or a device or FIFO, written as PNG)"
        )
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(f"{flag} needs matplotlib: pip install 'schedgym[plot]'") from None


def save_figure(path: str | Path, draw: Callable[[], Any], dpi: int) -> None:
    """Write the figure ``draw()`` makes to ``path`` (its suffix the format) atomically, for compare's and
    sweep's plots: matplotlib missing and a format it cannot write are one-line errors, checked before
    anything is drawn."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise SchedGymError("--plot needs matplotlib: pip install 'schedgym[plot]'") from None
    target = Path(path)
    fmt = target.suffix[1:].lower() or "png"  # no suffix: a device or FIFO (check_figure_name)
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


# --- the comparison's plot


def comparison_figure(result: ComparisonResult) -> Any:
    """The comparison's figure: TE and BE slowdown tails (all seeds pooled) and a TE-p95 vs BE-p99 scatter
    with 95% CIs, one colour, line style and marker per policy, and one legend below the panels."""
    from matplotlib.lines import Line2D

    names = list(result.runs)
    labels = dict(zip(names, plot_labels(names), strict=True))
    style = policy_styles(names)
    fig = new_figure((15, 5.4))
    axes = fig.subplots(1, 3)
    for ax, cls in ((axes[0], JobClass.TE), (axes[1], JobClass.BE)):
        _tail_panel(ax, result, cls, style, labels)
    points = _scatter_panel(axes[2], result, style, labels)
    handles = [Line2D([], [], lw=1.6, markersize=7, label=labels[n], **style[n]) for n in names]
    fig.suptitle(_comparison_title(result))
    figure_legend(fig, handles, [labels[n] for n in names])
    _place_labels(fig, axes[2], points)
    return fig


def _comparison_title(result: ComparisonResult) -> str:
    cfg = result.config
    seeds = f"{cfg.seeds} seed" + ("s" if cfg.seeds > 1 else "")
    if cfg.seeds > 1:
        seeds += f" ({cfg.first_seed}\u2013{cfg.first_seed + cfg.seeds - 1})"
    if not result.workloads_vary:
        seeds += ", every seed replaying the same trace"
    return f"Slowdown by policy \u2014 workload {result.workload_name}, cluster {result.cluster.name}, {seeds}"


def _tail(slowdown: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The complementary CDF as a post-step curve: excess slowdowns from ``EXCESS_FLOOR`` on, and the
    fraction of all jobs whose slowdown exceeds each."""
    excess = np.sort(slowdown[slowdown - 1 > EXCESS_FLOOR] - 1)
    m = excess.size
    x = np.concatenate([[EXCESS_FLOOR], excess])
    y = np.arange(m, -1, -1) / slowdown.size
    return x, y


def _tail_panel(
    ax: Any, result: ComparisonResult, cls: JobClass, style: dict[str, dict[str, Any]], labels: dict[str, str]
) -> None:
    """One class's slowdown tail per policy, all seeds pooled, the worst job marked."""
    pooled = {n: np.concatenate([r.slowdown[r.job_class == int(cls)] for r in runs]) for n, runs in result.runs.items()}
    n_jobs = max(sd.size for sd in pooled.values())
    pooled_note = ", seeds pooled" if result.config.seeds > 1 else ""
    ax.set_title(f"{cls.name} jobs: slowdown tail ({n_jobs} jobs{pooled_note})")
    if n_jobs == 0:
        ax.text(0.5, 0.5, f"no {cls.name} jobs", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()
        return
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
        ax.text(0.02, 0.02, "no job delayed: " + ", ".join(undelayed), transform=ax.transAxes, fontsize=8, va="bottom")
    ax.set_xlabel(f"{cls.name} slowdown x  (log scale of x \u2212 1)")
    ax.set_ylabel(f"fraction of {cls.name} jobs with slowdown > x")
    ax.grid(True, which="major", alpha=0.3)


def _scatter_panel(
    ax: Any, result: ComparisonResult, style: dict[str, dict[str, Any]], labels: dict[str, str]
) -> list[tuple[str, float, float, Any]]:
    """Each policy's :data:`SCATTER` figures (as excess over 1) with their 95% CIs; the points to label."""
    points = []
    spans: list[list[tuple[float, float, float]]] = [[], []]  # per axis: (mean, CI low, CI high)
    for name, e in result.summary()["policies"].items():
        means = [f.in_summary(e) for f in SCATTER]
        if any(math.isnan(m) for m in means):  # a class without jobs has no percentiles
            continue
        xy, err = [], []
        for k, (figure, mean) in enumerate(zip(SCATTER, means, strict=True)):
            v = max(mean - 1, EXCESS_FLOOR)
            half = float(np.nan_to_num(figure.in_summary(e["ci95"])))
            lo, hi = max(v - half, EXCESS_FLOOR), v + half
            xy.append(v)
            err.append([[v - lo], [hi - v]])
            spans[k].append((v, lo, hi))
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
    for k, axis in enumerate((ax.xaxis, ax.yaxis)):
        lo, hi = _scatter_limits(spans[k])
        if k == 0:
            ax.set_xscale("log")
            ax.set_xlim(lo, hi)
        else:
            ax.set_yscale("log")
            ax.set_ylim(lo, hi)
        slowdown_axis(axis, lo, hi)
    x_figure, y_figure = SCATTER
    ax.set_xlabel(f"{_slowdown_label(x_figure)}  (log scale of it \u2212 1)")
    ax.set_ylabel(f"{_slowdown_label(y_figure)}  (log scale of it \u2212 1)")
    ax.set_title("per policy: " + ("mean and 95% CI over seeds" if result.config.seeds > 1 else "one seed, no CI"))
    ax.grid(True, which="major", alpha=0.3)
    if not points:
        ax.text(0.5, 0.5, "needs both TE and BE jobs", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()
    return points


def _slowdown_label(figure: ClassFigure) -> str:
    """``TE slowdown p95``."""
    return f"{figure.job_class.name} slowdown {figure.short}"


def _scatter_limits(spans: list[tuple[float, float, float]]) -> tuple[float, float]:
    """One log axis of the scatter, in excess slowdown: every interval in view, except that one reaching
    more than a decade past the points (a wide CI from few seeds, whose low end on a log axis is 0) runs off
    the edge rather than squash them; at least 0.6 decades, for two ticks or more."""
    if spans:
        vals = [v for v, _, _ in spans]
        lo = max(min(lo for _, lo, _ in spans), min(vals) / 10)
        hi = min(max(hi for _, _, hi in spans), max(vals) * 10)
    else:
        lo, hi = EXCESS_FLOOR, 1.0
    span = math.log10(hi / lo)
    pad = max(0.12 * span, 0.15, (0.6 - span) / 2)
    return max(lo / 10**pad, EXCESS_FLOOR / 1.2), hi * 10**pad


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


# --- the sweep's plot


def sweep_figure(result: SweepResult) -> Any:
    """The sweep's figure: one column of panels per swept field, one row per headline figure, the field's
    values on x and a line per policy with 95% CI error bars, other swept fields averaged
    (:func:`~schedgym.experiments.sweep.marginal`)."""
    summary = result.summary()
    names = summary["policies"]
    labels = dict(zip(names, plot_labels(names), strict=True))
    style = policy_styles(names)
    fields = result.config.fields
    fig = new_figure((max(4.6 * len(fields), 6.0), 2.7 * len(HEADLINE) + 1.3))
    axes = np.atleast_2d(fig.subplots(len(HEADLINE), len(fields), squeeze=False))
    for j, name in enumerate(fields):
        values = dict(result.config.grid)[name]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        x = np.array(values, dtype=float) if numeric else np.arange(len(values), dtype=float)
        order = np.argsort(x, kind="stable")  # a line runs left to right whatever order the values were given in
        for i, figure in enumerate(HEADLINE):
            ax = axes[i, j]
            lines = {label: [points[o] for o in order] for label, points in marginal(result, name, figure).items()}
            if not _sweep_panel(ax, x[order], lines, style, labels):
                ax.text(0.5, 0.5, f"no {figure.cls.upper()} jobs", transform=ax.transAxes, ha="center", va="center")
                ax.set_axis_off()
                continue
            ax.set_xticks(x[order], [show_value(values[o]) for o in order])
            if j == 0:
                ax.set_ylabel(f"{figure.label} slowdown")
            if i == 0:
                ax.set_title(name)
            if i == len(HEADLINE) - 1:
                ax.set_xlabel(name)
    seeds = summary["seeds"]
    others = "; other swept fields averaged" if len(fields) > 1 else ""
    where = " on" + unswept(result).removeprefix(",") if unswept(result) else ""
    fig.suptitle(f"Sweep{where}: mean over seeds {seeds[0]}\u2013{seeds[-1]} with 95% CI{others}")
    handles, legend_labels = axes[0, 0].get_legend_handles_labels()
    figure_legend(fig, handles, legend_labels)
    return fig


def _sweep_panel(
    ax: Any,
    x: np.ndarray,
    lines: dict[str, list[tuple[float, float]]],
    style: dict[str, dict[str, Any]],
    labels: dict[str, str],
) -> bool:
    """One figure along one swept field (values ``x``, ascending): each policy's (mean, CI half-width) per
    value as a line with error bars. False, and the panel left blank, when the class has no jobs."""
    means = np.array([[m for m, _ in pts] for pts in lines.values()])
    halves = np.nan_to_num(np.array([[h for _, h in pts] for pts in lines.values()]))
    if np.isnan(means).all():
        return False
    span = float(x.max() - x.min()) if len(x) > 1 and x.max() > x.min() else 1.0
    # Slowdowns are >= 1, and where the policies differ by orders of magnitude in their excess over 1 (fifo's
    # TE p95 of 25 against fitgpp's 1.04) a linear axis flattens all but one line: there the excess goes on a
    # log axis labelled in slowdown, as in the comparison's plot. Where it spans less than a decade (BE p95
    # from 9 to 14), a linear axis shows the differences.
    excess = np.maximum(means - 1, EXCESS_FLOOR)
    log = bool(np.nanmax(excess) > 10 * np.nanmin(excess))
    if log:
        y, lo, hi = excess, np.maximum(excess - halves, EXCESS_FLOOR), np.maximum(excess + halves, EXCESS_FLOOR)
    else:
        y, lo, hi = means, means - halves, means + halves
    for k, label in enumerate(lines):
        offset = (k - (len(lines) - 1) / 2) * 0.015 * span  # apart, so that error bars do not overlap
        ax.errorbar(
            x + offset,
            y[k],
            yerr=[y[k] - lo[k], hi[k] - y[k]],
            ms=5,
            capsize=3,
            lw=1.4,
            label=labels[label],
            **style[label],
        )
    bottom, top = _view(y, lo, hi, log)
    if log:
        ax.set_yscale("log")
        slowdown_axis(ax.yaxis, bottom, top)
    ax.set_ylim(bottom, top)
    ax.grid(True, which="major", alpha=0.3)
    return True


def _view(y: np.ndarray, lo: np.ndarray, hi: np.ndarray, log: bool) -> tuple[float, float]:
    """A panel's y range: every point, and every interval unless it reaches further past the points than
    their own spread (a wide interval from few seeds then runs off the edge rather than flatten the lines).
    ``log``: ranges in decades."""

    def t(v: np.ndarray) -> np.ndarray:
        return np.log10(v) if log else v

    ty, tlo, thi = t(y), t(lo), t(hi)
    ymin, ymax = float(np.nanmin(ty)), float(np.nanmax(ty))
    spread = max(ymax - ymin, 0.3 if log else max(0.05 * abs(ymax), 1e-3))
    low = max(float(np.nanmin(tlo)), ymin - spread)
    high = min(float(np.nanmax(thi)), ymax + spread)
    pad = 0.08 * (high - low)
    low, high = low - pad, high + pad
    return (10**low, 10**high) if log else (low, high)


# --- the suite's plot


def suite_figure(result: SuiteResult) -> Any:
    """One panel per workload of a suite: each policy's objective (mean slowdown per job) with its 95% CI, the
    references' means as vertical lines, one colour and marker per policy."""
    from matplotlib.lines import Line2D

    rows = result.rows()
    names = list(dict.fromkeys(r.policy for r in rows))
    labels = dict(zip(names, plot_labels(names), strict=True))
    style = policy_styles(names)
    entries = list(dict.fromkeys(r.entry for r in rows))
    n_cols = min(5, len(entries))
    n_rows = math.ceil(len(entries) / n_cols)
    fig = new_figure((3.4 * n_cols, 2.2 + 0.28 * len(names) * n_rows))
    axes = np.atleast_1d(fig.subplots(n_rows, n_cols, squeeze=False)).ravel()
    for ax, entry in zip(axes, entries, strict=False):
        mine = [r for r in rows if r.entry == entry]
        for y, r in enumerate(mine):
            st = style[r.policy]
            half = 0.0 if math.isnan(r.objective_ci95) else r.objective_ci95
            ax.errorbar(r.objective, y, xerr=half, color=st["color"], marker=st["marker"], ms=5, capsize=2, lw=1.2)
            if r.policy in ("fitgpp", "k8s"):
                ax.axvline(r.objective, color=st["color"], lw=0.8, ls=":")
        ax.set_yticks(range(len(mine)), [labels[r.policy] for r in mine], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(entry, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in axes[len(entries) :]:
        ax.set_axis_off()
    handles = [Line2D([], [], lw=1.2, markersize=6, label=labels[n], **style[n]) for n in names]
    fig.suptitle(f"Suite {result.name!r}: mean slowdown per job (lower is better), 95% CIs over seeds")
    figure_legend(fig, handles, [labels[n] for n in names])
    return fig


__all__ = [
    "EXCESS_FLOOR",
    "LABEL_LIMIT",
    "LINESTYLES",
    "MARKERS",
    "SCATTER",
    "comparison_figure",
    "figure_legend",
    "new_figure",
    "outside_legends",
    "plot_labels",
    "policy_styles",
    "save_figure",
    "slowdown_axis",
    "suite_figure",
    "sweep_figure",
]

"""The comparison plot: written as PNG and SVG, legend clear of the data, scatter points labelled."""

from __future__ import annotations

import dataclasses
import os
import stat
import threading

import pytest

pytest.importorskip("matplotlib")

from matplotlib.text import Annotation  # noqa: E402

from schedgym.errors import ConfigError, SchedGymError  # noqa: E402
from schedgym.experiments.compare import CompareConfig, ComparisonResult, run_comparison  # noqa: E402
from schedgym.experiments.plotting import check_figure_name, comparison_figure, plot_labels  # noqa: E402
from schedgym.experiments.report import write_plot  # noqa: E402

LONG = "mine:/home/someone/experiments/2024-06-01/run-with-a-long-name/best_model.zip"


@pytest.fixture(scope="module")
def result() -> ComparisonResult:
    return run_comparison(CompareConfig(policies=("fifo", "fitgpp"), seeds=2, n_jobs=200), progress=False)


def _renamed(result: ComparisonResult, old: str, new: str) -> ComparisonResult:
    def rename(d: dict) -> dict:
        return {new if k == old else k: v for k, v in d.items()}

    return dataclasses.replace(result, runs=rename(result.runs), wall_time=rename(result.wall_time))


def test_writes_png_and_svg(result, tmp_path):
    png, svg = tmp_path / "cmp.png", tmp_path / "cmp.svg"
    write_plot(str(png), result)
    write_plot(str(svg), result)
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "<svg" in svg.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp.png", "cmp.svg"]  # no temporary file left


def test_a_fifo_without_a_suffix_gets_a_png_and_stays_a_fifo(result, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    check_figure_name("--plot", fifo)  # a device or FIFO has no suffix to choose the format: PNG
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_plot(str(fifo), result)
    reader.join(timeout=30)
    assert got and got[0].startswith(b"\x89PNG\r\n\x1a\n")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_a_file_without_a_figure_suffix_is_refused_before_any_work(tmp_path):
    for name in ("cmp", "cmp.txt"):
        with pytest.raises(ConfigError, match="expected a .png, .pdf or .svg file name"):
            check_figure_name("--plot", tmp_path / name)


def test_unknown_file_type_is_an_error_and_leaves_nothing(result, tmp_path):
    with pytest.raises(SchedGymError, match="cannot write"):
        write_plot(str(tmp_path / "cmp.xyz"), result)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_folder_is_an_error(result, tmp_path):
    with pytest.raises(SchedGymError, match="cannot write"):
        write_plot(str(tmp_path / "missing" / "cmp.png"), result)


def test_one_legend_outside_every_axes_and_labelled_scatter_points(result):
    fig = comparison_figure(_renamed(result, "fitgpp", LONG))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[0] == "fifo" and len(labels) == 2
    assert len(labels[1]) <= 20 and labels[1].startswith("mine:") and labels[1].endswith(".zip")
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()

    scatter = fig.axes[2]
    annotations = [t for t in scatter.texts if isinstance(t, Annotation)]
    assert len(scatter.containers) == 2
    for container in scatter.containers:
        (x, y) = container.lines[0].get_xydata()[0]
        matching = [a for a in annotations if a.get_text() == container.get_label()]
        assert len(matching) == 1, container.get_label()
        assert matching[0].xy == pytest.approx((x, y))
    assert {c.get_label() for c in scatter.containers} == set(labels)


def test_short_labels_stay_distinct():
    names = ["fifo", LONG, LONG.replace("mine", "mind")]
    short = plot_labels(names)
    assert short[0] == "fifo"
    assert all(len(s) <= 20 for s in short) and len(set(short)) == 3


def _sweep():
    from schedgym.experiments.sweep import SweepConfig, run_sweep

    base = CompareConfig(policies=("fifo", "fitgpp"), seeds=2, n_jobs=200, cluster="small")
    return run_sweep(SweepConfig(base, (("max_preemptions", (1, 2)),)), progress=False)


def test_a_policy_looks_the_same_in_the_comparison_and_the_sweep_plot(result):
    """Both plots take each policy's colour, line style and marker from plotting.policy_styles."""
    from matplotlib.colors import to_rgba

    from schedgym.experiments.plotting import policy_styles, sweep_figure

    styles = policy_styles(["fifo", "fitgpp"])
    assert styles["fifo"]["color"] != styles["fitgpp"]["color"]
    scatter = comparison_figure(result).axes[2].containers
    panel = sweep_figure(_sweep()).axes[0].containers
    for drawn in (scatter, panel):
        assert [c.get_label() for c in drawn] == ["fifo", "fitgpp"]
        for container in drawn:
            line, style = container.lines[0], styles[container.get_label()]
            assert to_rgba(line.get_color()) == to_rgba(style["color"])
            assert line.get_marker() == style["marker"]
    assert [c.lines[0].get_linestyle() for c in panel] == [styles[n]["linestyle"] for n in ("fifo", "fitgpp")]


def test_the_sweep_plot_has_a_row_per_headline_figure(tmp_path):
    from schedgym.experiments.figures import HEADLINE
    from schedgym.experiments.plotting import save_figure, sweep_figure

    swept = _sweep()
    fig = sweep_figure(swept)
    assert [ax.get_ylabel() for ax in fig.axes] == [f"{f.label} slowdown" for f in HEADLINE]
    save_figure(tmp_path / "sweep.png", lambda: sweep_figure(swept), dpi=50)
    assert (tmp_path / "sweep.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

"""Every table and log line writes a mean and its 95% interval with one function; one value has no interval."""

from __future__ import annotations

import math

import pytest

from schedgym.experiments.report import format_interval


@pytest.mark.parametrize(
    ("args", "kwargs", "text"),
    [
        ((1.04567, 0.00312), {}, "1.046 ± 0.003"),
        ((0.012, 0.003), {"signed": True}, "+0.012 ± 0.003"),
        ((-0.012, 0.003), {"signed": True}, "-0.012 ± 0.003"),
        ((47.912, 6.61, 2), {}, "47.91 ± 6.61"),
        ((1.04567, math.nan), {}, "1.046"),  # one seed: no interval, not "± nan"
        ((0.5, math.nan), {"signed": True}, "+0.500"),
        ((math.nan, 0.1), {}, "-"),
        ((math.nan, math.nan), {"signed": True, "missing": ""}, ""),
    ],
)
def test_format_interval(args, kwargs, text):
    assert format_interval(*args, **kwargs) == text


def test_training_log_has_no_nan_interval_with_one_validation_workload():
    # `schedgym train --n-eval-workloads 1` printed "± nan" for every paired difference.
    train = pytest.importorskip("agents.train")
    stats = {
        "score": -1.0,
        "workloads": {
            "paper": {
                "mean_return": -12.0,
                "figures": {"te_p95": 1.05},
                "minus": {"fitgpp": {"te_p95": {"mean": -0.01, "ci95": math.nan}}},
            }
        },
    }
    text = train.format_evaluation(stats, ("fitgpp",))
    assert "nan" not in text
    assert "minus fitgpp: te_p95 -0.010" in text


def test_compare_table_shows_a_missing_figure_as_a_dash(tmp_path, capsys):
    # A trace without TE jobs has no TE p95: its paired difference is NaN, shown as "-" (it was "+nan").
    from schedgym.cli import main

    trace = tmp_path / "be_only.csv"
    rows = [f"b{i},{60 * i},{3600 + 60 * i},{1 + i % 4},BE" for i in range(40)]
    trace.write_text("job_id,submit_time,duration,gpus,class\n" + "\n".join(rows) + "\n")
    argv = ["compare", "--trace", str(trace), "--cluster", "small", "--policies", "fitgpp,k8s", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "nan" not in out
    paired = out[out.index("paired difference to fitgpp") :].splitlines()
    assert paired[2].split()[:2] == ["k8s", "-"]  # after the title and the header: k8s, its TE p95 cell

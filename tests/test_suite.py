"""The shift suite (schedgym/experiments/suite.py, ``schedgym compare --suite``): its entries, the objective by
hand, a small suite end to end in Python and through the command line, the same results on two executors,
its outputs, and the options it refuses."""

from __future__ import annotations

import json
import math

import pytest
from helpers import run_cli

from schedgym.cli import main
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, dominance, run_comparison
from schedgym.experiments.figures import objective
from schedgym.experiments.suite import SUITES, markdown_table, run_suite, suite_configs


def test_the_shifts_suite_is_what_the_docs_say():
    entries = {e.name: e for e in SUITES["shifts"]}
    assert list(entries) == [
        "paper",
        "realistic",
        "paper load 0.8",
        "paper load 1.2",
        "paper 4 nodes",
        "paper 64 nodes",
        "paper 20,000 jobs",
        "paper TE x3",
        "philly",
        "alibaba contended",
    ]
    assert entries["paper load 1.2"].load == 1.2
    assert entries["paper 4 nodes"].cluster == "small"
    assert entries["paper 64 nodes"].cluster == "large"
    assert entries["paper 20,000 jobs"].n_jobs == 20_000
    assert entries["paper TE x3"].te_duration_scale == 3.0
    assert (entries["alibaba contended"].workload, entries["alibaba contended"].cluster) == (
        "alibaba2023",
        "alibaba2023-contended",
    )
    configs = suite_configs("shifts", ("fitgpp",), seeds=20)
    assert [c.seeds for c in configs] == [20] * 8 + [7, 5]  # the traces have 7 and 5 test windows


def test_the_objective_by_hand():
    # 3 TE jobs with mean slowdown 2 and 1 BE job with slowdown 6: (3 * 2 + 1 * 6) / 4 = 3; with te_weight 2:
    # (2 * 6 + 6) / 4 = 4.5. No job: NaN.
    summary = {"te": {"n_jobs": 3, "slowdown_mean": 2.0}, "be": {"n_jobs": 1, "slowdown_mean": 6.0}}
    assert objective(summary) == 3.0
    assert objective(summary, te_weight=2.0) == 4.5
    empty = {"te": {"n_jobs": 0, "slowdown_mean": math.nan}, "be": {"n_jobs": 0, "slowdown_mean": math.nan}}
    assert math.isnan(objective(empty))


def test_the_objective_is_minus_an_episodes_return_per_job():
    import gymnasium as gym

    import schedgym  # noqa: F401

    env = gym.make("schedgym/Preemption-v1", n_jobs=200)
    obs, info = env.reset(options={"workload_seed": 3})
    total, done = 0.0, env.unwrapped.pending_request is None
    while not done:
        obs, reward, terminated, truncated, info = env.step(0)
        total += reward
        done = terminated or truncated
    summary = env.unwrapped.sim.result().summary()
    assert objective(summary) == pytest.approx(-total / 200, rel=1e-9)


def test_a_small_suite_matches_compare_on_each_workload():
    result = run_suite("shifts", ("fitgpp", "k8s", "fifo"), seeds=2, max_jobs=150)
    rows = result.rows()
    assert len(rows) == 3 * len(SUITES["shifts"])
    # The first entry is compare's paper workload, capped at 150 jobs: the same figures as compare itself.
    alone = run_comparison(CompareConfig(policies=("fitgpp", "k8s", "fifo"), seeds=2, n_jobs=150)).summary()
    first = {r.policy: r for r in rows[:3]}
    for name in ("fitgpp", "k8s", "fifo"):
        values = [objective(s) for s in alone["policies"][name]["per_seed"]]
        assert first[name].objective == pytest.approx(sum(values) / 2, rel=1e-12)
    assert first["fifo"].verdict["fitgpp"] == dominance(alone["policies"]["fifo"]["paired"]["fitgpp"])
    assert first["fitgpp"].verdict["fitgpp"] == "" and math.isnan(first["fitgpp"].diff["fitgpp"][0])
    assert rows[0].entry == "paper (150 jobs)"  # the rows say what ran
    assert rows[-1].entry == "alibaba contended"  # traces keep their windows
    table = markdown_table(result)
    assert table.count("\n") == 2 + len(rows)


def test_the_executor_changes_nothing(engine):
    if engine == "python":
        pytest.skip("the executors are engine-blind; the engines' agreement is tested elsewhere")
    serial = run_suite("shifts", ("fitgpp", "k8s"), seeds=2, max_jobs=100)
    process = run_suite("shifts", ("fitgpp", "k8s"), seeds=2, max_jobs=100, executor="process")
    strip = [{k: v for k, v in vars(r).items()} for r in serial.rows()]
    assert [{k: v for k, v in vars(r).items()} for r in process.rows()] == strip


def test_the_command_writes_its_outputs_together(tmp_path):
    md, js, png = tmp_path / "s.md", tmp_path / "s.json", tmp_path / "s.png"
    pytest.importorskip("matplotlib")
    code = main(
        [
            "compare", "--suite", "shifts", "--policies", "fitgpp,k8s", "--seeds", "2", "--jobs", "100",
            "--markdown", str(md), "--json", str(js), "--plot", str(png), "--no-progress",
        ]
    )  # fmt: skip
    assert code == 0
    assert md.read_text().startswith("| workload | policy | seeds | objective |")
    payload = json.loads(js.read_text())
    assert payload["suite"] == "shifts" and len(payload["entries"]) == len(SUITES["shifts"])
    assert {r["policy"] for r in payload["rows"]} == {"fitgpp", "k8s"}
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "nope"], "Unknown suite 'nope'"),
        (["--suite", "shifts", "--workload", "realistic"], "--workload does not apply to --suite"),
        (["--suite", "shifts", "--cluster", "small"], "--cluster does not apply to --suite"),
        (["--suite", "shifts", "--load", "0.5"], "--load does not apply to --suite"),
        (["--suite", "shifts", "--csv", "x.csv"], "--csv does not apply to --suite"),
        (["--suite", "shifts", "--policies", "nosuch"], "nosuch"),
    ],
)
def test_bad_suite_options_are_one_line_errors(args, message):
    done = run_cli("compare", *args, "--seeds", "2", "--jobs", "50")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("schedgym: error:") and message in lines[0], done.stderr


def test_te_duration_scale_is_checked():
    with pytest.raises(ConfigError, match="te_duration_scale"):
        CompareConfig(policies=("fitgpp",), te_duration_scale=0.0)
    with pytest.raises(ConfigError, match="synthetic"):
        CompareConfig(policies=("fitgpp",), workload="philly", te_duration_scale=2.0)

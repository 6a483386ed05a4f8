"""``schedgym sweep``: the grid of settings x policies x seeds, what a setting changes, the outputs, the errors,
and the process executor's results (Ray's are in test_sweep_ray.py)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import replace

import numpy as np
import pytest
from counting import builds

from schedgym.cli import main
from schedgym.errors import ConfigError
from schedgym.experiments import sweep
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.executors import ExecutorConfig, make_tasks
from schedgym.experiments.figures import BE_P95
from schedgym.experiments.sweep import (
    SweepConfig,
    marginal,
    parse_set,
    run_sweep,
)
from schedgym.sim.simulator import SimConfig

BASE = CompareConfig(policies=("fifo", "fitgpp", "k8s"), seeds=3, n_jobs=200, cluster="small")
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


def exit_status(argv: list[str]) -> int:
    """main()'s status, whether it returns it (a ConfigError) or exits with it (an argparse error)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def without_wall_time(summary: dict) -> dict:
    for setting in summary["settings"]:
        for entry in setting["policies"].values():
            assert entry.pop("wall_time_s") >= 0
    return summary


def no_constant(name: str) -> None:
    raise ValueError(f"{name} in strict JSON")


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """One small sweep through the command line with every output, shared by the tests below."""
    out = tmp_path_factory.mktemp("sweep")
    paths = {kind: out / f"sweep.{kind}" for kind in ("json", "csv", "png")}
    argv = [
        "sweep",
        "--set",
        "max_preemptions=0,1,2",
        "--set",
        "load=0.9,1.1",
        *SMALL_ARGS,
        "--json",
        str(paths["json"]),
        "--csv",
        str(paths["csv"]),
        "--plot",
        str(paths["png"]),
    ]
    return main(argv), paths


# ---------------------------------------------------------------------------------------------- the grid
def test_settings_are_the_cartesian_product_first_field_slowest():
    config = SweepConfig(BASE, (("max_preemptions", (1, 2)), ("load", (0.9, 1.0, 1.1))))
    assert [s.values for s in config.settings] == [
        (("max_preemptions", m), ("load", x)) for m in (1, 2) for x in (0.9, 1.0, 1.1)
    ]
    assert [(s.config.sim.max_preemptions, s.config.load) for s in config.settings] == [
        (m, x) for m in (1, 2) for x in (0.9, 1.0, 1.1)
    ]


def test_tasks_are_seed_major_then_setting_then_policy():
    tasks = make_tasks(["fifo", "k8s"], ["fifo", "k8s"], [7, 8], n_settings=2)
    assert [(t.seed, t.setting, t.label) for t in tasks] == [
        (s, k, p) for s in (7, 8) for k in (0, 1) for p in ("fifo", "k8s")
    ]
    assert [t.index for t in tasks] == list(range(8))


def test_cli_exits_zero_and_runs_every_combination_policy_and_seed(cli_run):
    status, paths = cli_run
    assert status == 0
    data = json.loads(paths["json"].read_text())
    combos = [(s["values"]["max_preemptions"], s["values"]["load"]) for s in data["settings"]]
    assert combos == [(m, x) for m in (0, 1, 2) for x in (0.9, 1.1)]
    for setting in data["settings"]:
        assert list(setting["policies"]) == ["fifo", "fitgpp", "k8s"]
        for entry in setting["policies"].values():
            assert [s["seed"] for s in entry["per_seed"]] == [0, 1, 2]


def test_json_is_strict_and_says_what_was_swept(cli_run):
    _, paths = cli_run
    data = json.loads(paths["json"].read_text(), parse_constant=no_constant)  # no NaN, no Infinity
    assert data["fields"] == ["max_preemptions", "load"]
    assert data["grid"] == {"max_preemptions": [0, 1, 2], "load": [0.9, 1.1]}
    assert data["policies"] == ["fifo", "fitgpp", "k8s"] and data["seeds"] == [0, 1, 2]
    assert data["references"] == ["fitgpp", "k8s"]
    setting = data["settings"][-1]
    assert setting["sim"]["max_preemptions"] == 2 and setting["cluster"] == "small"
    assert set(setting["policies"]["fifo"]["paired"]) == {"fitgpp", "k8s"}
    assert set(setting["policies"]["fifo"]["verdicts"]) == {"fitgpp", "k8s"}
    assert set(setting["policies"]["fitgpp"]["verdicts"]) == {"k8s"}


def test_csv_has_one_row_per_setting_and_policy_with_figures_and_differences(cli_run):
    _, paths = cli_run
    with open(paths["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 * 3
    assert list(rows[0])[:4] == ["max_preemptions", "load", "policy", "n_seeds"]
    for column in ("te_slowdown_p95", "be_slowdown_p99_ci95", "diff_vs_fitgpp_be_slowdown_p95", "verdict_vs_k8s"):
        assert column in rows[0]
    assert [(r["max_preemptions"], r["load"], r["policy"]) for r in rows[:4]] == [
        ("0", "0.9", "fifo"),
        ("0", "0.9", "fitgpp"),
        ("0", "0.9", "k8s"),
        ("0", "1.1", "fifo"),
    ]
    fitgpp = rows[1]
    assert fitgpp["diff_vs_fitgpp_te_slowdown_p95"] == "" and fitgpp["verdict_vs_fitgpp"] == ""  # itself
    assert float(rows[0]["diff_vs_fitgpp_te_slowdown_p95"]) == pytest.approx(
        float(rows[0]["te_slowdown_p95"]) - float(fitgpp["te_slowdown_p95"])
    )


def test_plot_is_a_png(cli_run):
    _, paths = cli_run
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_prints_the_table_and_the_paired_differences(capsys):
    assert main(["sweep", "--set", "restart_overhead=0,60", "--policies", "fitgpp,k8s", *SMALL_ARGS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sweep of restart_overhead: 2 settings x 2 policies x 3 seeds (0..2)")
    assert "paired difference to fitgpp" in out and "paired difference to k8s" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["0"], ["60"])]
    assert [(r[0], r[1]) for r in rows[:4]] == [("0", "fitgpp"), ("0", "k8s"), ("60", "fitgpp"), ("60", "k8s")]


# ------------------------------------------------------------------------------------ what a setting does
def test_max_preemptions_zero_gives_no_preemptions():
    result = run_sweep(SweepConfig(BASE, (("max_preemptions", (0, 1)),)), progress=False)
    zero, one = (c.summary()["policies"]["fitgpp"]["per_seed"] for c in result.comparisons)
    assert [s["preemptions"] for s in zero] == [0, 0, 0]
    assert sum(s["preemptions"] for s in one) > 0


def test_a_setting_runs_what_compare_runs_with_the_same_options():
    config = SweepConfig(BASE, (("max_preemptions", (2,)), ("load", (1.2,)), ("placement", ("first-fit",))))
    swept = run_sweep(config, progress=False).comparisons[0].summary()
    sim = SimConfig(max_preemptions=2, placement="first-fit")
    compared = run_comparison(replace(BASE, load=1.2, sim=sim), progress=False).summary()
    for name in BASE.policies:
        assert swept["policies"][name]["per_seed"] == compared["policies"][name]["per_seed"]


def test_a_synthetic_preset_field_changes_the_workload():
    result = run_sweep(SweepConfig(BASE, (("te_fraction", (0.1, 0.6)),)), progress=False)
    te_jobs = [[s["te"]["n_jobs"] for s in c.summary()["policies"]["fifo"]["per_seed"]] for c in result.comparisons]
    assert all(few < many for few, many in zip(*te_jobs, strict=True))
    assert all(20 - 15 < n < 20 + 15 for n in te_jobs[0])  # about 10% of 200 jobs


def test_workload_and_cluster_can_be_swept():
    config = SweepConfig(replace(BASE, cluster=None), (("workload", ("paper", "realistic")), ("cluster", ("small",))))
    result = run_sweep(config, progress=False)
    summaries = [c.summary() for c in result.comparisons]
    assert [(s["workload"], s["cluster"]) for s in summaries] == [("paper", "small"), ("realistic", "small")]
    # realistic's preemptions cost restart overheads: fitgpp's runs differ
    paper, realistic = (s["policies"]["fitgpp"]["per_seed"] for s in summaries)
    assert paper != realistic


def test_a_mix_sweep_names_the_cluster_as_compare_does(tmp_path, capsys):
    # Each mix level runs on its own cluster: the sweep named the 'paper' cluster its settings were set up with.
    path = tmp_path / "sw.json"
    argv = ["sweep", "--workload", "mix", "--set", "max_preemptions=1,2", "--seeds", "1", "--policies", "fifo"]
    assert main([*argv, "--no-progress", "--json", str(path)]) == 0
    compared = run_comparison(CompareConfig(policies=("fifo",), workload="mix", seeds=1), progress=False)
    assert compared.cluster.name == "mix (each level its own)"
    assert [s["cluster"] for s in json.loads(path.read_text())["settings"]] == [compared.cluster.name] * 2
    assert f"workload mix, cluster {compared.cluster.name} (" in capsys.readouterr().out


def test_marginal_averages_the_other_fields_seed_by_seed():
    result = run_sweep(SweepConfig(BASE, (("max_preemptions", (0, 1)), ("load", (0.9, 1.1)))), progress=False)
    summary = result.summary()
    per_seed = {
        (s["values"]["max_preemptions"], s["values"]["load"]): [
            r["be"]["slowdown_p95"] for r in s["policies"]["fitgpp"]["per_seed"]
        ]
        for s in summary["settings"]
    }
    expected = (np.array(per_seed[(1, 0.9)]) + np.array(per_seed[(1, 1.1)])) / 2
    mean, half = marginal(result, "max_preemptions", BE_P95)["fitgpp"][1]
    assert mean == pytest.approx(expected.mean())
    assert half == pytest.approx(4.3027 * expected.std(ddof=1) / np.sqrt(3), rel=1e-4)  # t(0.975, 2 df)
    assert half > 0


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "max_preemption=1,2"], "got 'max_preemption' (did you mean 'max_preemptions'?); known fields: "),
        (["--set", "max_preemptions=a"], "Expected max_preemptions to be an integer (ASCII), got 'a'"),
        (["--set", "max_preemptions=-1"], "max_preemptions=-1: Expected max_preemptions >= 0, got -1"),
        (["--set", "load=0.9,11"], "load=11: Expected 0.01 <= load < 10, got 11.0"),
        (["--set", "load="], "--set 'load=': Expected a comma-separated list of values, got ''"),
        (["--set", "load=1,,2"], "Expected a comma-separated list of values, got '1,,2'"),
        (["--set", "load"], "--set 'load': expected FIELD=v1,v2,..."),
        (["--set", "load=1,1.0"], "Expected distinct values of load"),
        (["--set", "load=1", "--set", "load=2"], "Expected each field swept once, got 'load' 2 times"),
        (["--set", "queue=fifo"], "'queue' cannot be swept"),
        (["--set", "te_gpus=1"], "'te_gpus' is a table"),
        (["--set", "grace_min=200", "--set", "grace_max=100"], "grace_min=200 grace_max=100: Expected 0 <= grace_min"),
        (["--set", "te_fraction=0.5", "--workload", "philly"], "te_fraction applies to synthetic workloads"),
        (
            ["--set", "load=0.5,0.6", "--workload", "mix"],
            "load=0.5: --load applies to synthetic workloads (paper, realistic); 'mix' draws its load per level",
        ),
        (
            ["--set", "load=0.5,0.6", "--workload", "philly"],
            "load=0.5: --load applies to synthetic workloads (paper, realistic); 'philly' is a trace",
        ),
        (["--set", "cluster=nope"], "Unknown cluster 'nope'"),
        (["--max-preemptions", "2", "--set", "max_preemptions=1,2"], "--max-preemptions and --set max_preemptions"),
        # given at its default value, it was dropped without a word until 2026-12-05
        (["--max-preemptions", "1", "--set", "max_preemptions=0,2"], "--max-preemptions and --set max_preemptions"),
        (["--placement", "best-fit", "--set", "placement=first-fit"], "--placement and --set placement"),
        ([], "Expected at least one --set FIELD=v1,v2,..."),
        (["--set", "load=1", "--json", "/nonexistent-dir/x.json"], "the directory '/nonexistent-dir' does not exist"),
        (["--set", "load=1", "--plot", "x.txt"], "expected a .png, .pdf or .svg file name"),
        (["--set", "load=1", "--workers", "2"], "--workers applies to --executor process or ray, not serial"),
    ],
)
def test_bad_sweeps_are_one_line_errors(args, message, capsys):
    base = ["--seeds", "2", "--no-progress"] + ([] if "--workload" in args else ["--jobs", "100"])
    assert exit_status(["sweep", *args, *base]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("schedgym: error: ") and captured.err.count("\n") == 1, captured.err
    assert message in captured.err, captured.err
    assert captured.out == ""  # nothing ran


def test_an_output_path_is_checked_before_anything_runs(tmp_path, capsys):
    json_path = tmp_path / "out.json"
    argv = ["sweep", "--set", "load=1", *SMALL_ARGS, "--json", str(json_path), "--csv", str(tmp_path)]
    assert exit_status(argv) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not json_path.exists()


def test_parse_set_reads_each_type():
    assert parse_set("backfill=true,no") == ("backfill", (True, False))
    assert parse_set(" restart_overhead = 0, 60 ") == ("restart_overhead", (0.0, 60.0))
    assert parse_set("placement=first-fit,best-fit") == ("placement", ("first-fit", "best-fit"))
    assert parse_set("n_jobs=100") == ("n_jobs", (100,))


def test_too_many_settings_are_refused_before_any_is_built():
    grid = tuple((name, tuple(range(1, 23))) for name in ("max_preemptions", "n_jobs", "te_grace"))
    with pytest.raises(ConfigError, match="Expected at most 10,000 settings"):
        SweepConfig(BASE, grid)


# ---------------------------------------------------------------------------------------------- executors
class Bar:
    """A stand-in for tqdm that records what the sweep tells it."""

    def __init__(self, total: int):
        self.total, self.n, self.closed = total, 0, False

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix_str(self, text: str) -> None:
        self.last = text

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("kind", ["serial", "process"])
def test_the_progress_bar_counts_finished_runs(kind, monkeypatch):
    bars: list[Bar] = []
    monkeypatch.setattr(sweep, "progress_bar", lambda total, progress: bars.append(Bar(total)) or bars[-1])
    config = SweepConfig(BASE, (("max_preemptions", (0, 1)), ("load", (0.9, 1.0, 1.1))))
    run_sweep(config, executor=ExecutorConfig(kind, workers=2 if kind == "process" else None))
    assert [(b.total, b.n, b.closed) for b in bars] == [(6 * 3 * 3, 6 * 3 * 3, True)]


def test_process_gives_the_serial_results_and_builds_each_policy_once_per_worker(counted):
    config = SweepConfig(
        replace(BASE, policies=("fifo", "counted")), (("max_preemptions", (0, 1)), ("restart_overhead", (0.0, 30.0)))
    )
    serial = without_wall_time(run_sweep(config, progress=False).summary())
    assert builds(str(counted)) == {os.getpid(): 1}  # once in this process, for all four settings
    counted.write_text("")
    parallel = without_wall_time(
        run_sweep(config, executor=ExecutorConfig("process", workers=2), progress=False).summary()
    )
    assert json.dumps(parallel) == json.dumps(serial)  # the same keys in the same order, the same figures
    per_process = builds(str(counted))
    assert os.getpid() not in per_process and 1 <= len(per_process) <= 2
    assert set(per_process.values()) == {1}


def test_cli_process_json_equals_serial_but_wall_times(tmp_path):
    argv = ["sweep", "--set", "max_preemptions=1,2", "--set", "te_fraction=0.2,0.4", *SMALL_ARGS]
    assert main([*argv, "--json", str(tmp_path / "serial.json")]) == 0
    assert main([*argv, "--executor", "process", "--workers", "2", "--json", str(tmp_path / "process.json")]) == 0
    serial, process = (
        without_wall_time(json.loads((tmp_path / n).read_text())) for n in ("serial.json", "process.json")
    )
    assert process == serial

"""The ``schedgym`` command line, end to end."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys

import pytest
from helpers import run_cli

from schedgym.cli import main

CLASS_KEYS = {"slowdown_p50", "slowdown_p95", "slowdown_p99", "slowdown_mean", "wait_mean"}
JOBS_HEADER = ["job_id", "class", "submit_time", "duration", "first_start", "completion", "preemptions", "slowdown"]
SEGMENTS_HEADER = ["job_id", "node", "start", "end", "end_reason"]


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory):
    """One small synthetic comparison shared by the tests below (main() called in-process)."""
    out = tmp_path_factory.mktemp("cli")
    json_path, log_dir = out / "out.json", out / "logs"
    argv = [
        "compare",
        "--policies",
        "fifo,fitgpp",
        "--seeds",
        "2",
        "--jobs",
        "200",
        "--cluster",
        "small",
        "--json",
        str(json_path),
        "--log-dir",
        str(log_dir),
        "--no-progress",
    ]
    return main(argv), json_path, log_dir


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_compare_exits_zero_and_prints_a_table(compare_run, capsys):
    status, json_path, _ = compare_run
    assert status == 0
    assert json_path.exists()


def test_compare_json_schema(compare_run):
    _, json_path, _ = compare_run
    data = json.loads(json_path.read_text())
    assert set(data["policies"]) == {"fifo", "fitgpp"}
    for name, entry in data["policies"].items():
        for cls in ("te", "be"):
            assert CLASS_KEYS <= set(entry[cls]), (name, cls, entry[cls])
            for key in CLASS_KEYS:
                value = entry[cls][key]
                assert value is None or (isinstance(value, (int, float)) and math.isfinite(value))
        assert isinstance(entry["preemptions"], (int, float))
        assert 0.0 < entry["gpu_utilization"] <= 1.0
        assert len(entry["per_seed"]) == 2
        assert [s["seed"] for s in entry["per_seed"]] == [0, 1]
        # The top-level figures are means over the seeds.
        pre = [s["preemptions"] for s in entry["per_seed"]]
        assert entry["preemptions"] == pytest.approx(sum(pre) / 2)
        p95 = [s["te"]["slowdown_p95"] for s in entry["per_seed"]]
        assert entry["te"]["slowdown_p95"] == pytest.approx(sum(p95) / 2)
    assert data["policies"]["fifo"]["preemptions"] == 0
    # Both policies saw the same workloads: the same number of jobs of each class per seed.
    for i in range(2):
        f, g = data["policies"]["fifo"]["per_seed"][i], data["policies"]["fitgpp"]["per_seed"][i]
        assert (f["te"]["n_jobs"], f["be"]["n_jobs"]) == (g["te"]["n_jobs"], g["be"]["n_jobs"])
        assert f["te"]["n_jobs"] + f["be"]["n_jobs"] == 200


def test_compare_writes_logs_per_policy_and_seed(compare_run):
    _, _, log_dir = compare_run
    for policy in ("fifo", "fitgpp"):
        for seed in (0, 1):
            d = log_dir / policy / f"seed{seed}"
            jobs = read_csv(d / "jobs.csv")
            segments = read_csv(d / "segments.csv")
            assert jobs[0] == JOBS_HEADER
            assert segments[0] == SEGMENTS_HEADER
            assert len(jobs) == 1 + 200
            ids = {row[0] for row in jobs[1:]}
            assert len(ids) == 200
            completed = [row for row in segments[1:] if row[4] == "completed"]
            assert {row[0] for row in completed} == ids
            for row in jobs[1:]:
                assert row[1] in ("TE", "BE")
                assert float(row[5]) >= float(row[2]) + float(row[3]) - 1e-6  # completion >= submit + duration
            if policy == "fifo":
                assert all(row[4] == "completed" for row in segments[1:])


def test_logs_agree_with_json(compare_run):
    _, json_path, log_dir = compare_run
    data = json.loads(json_path.read_text())
    for seed in (0, 1):
        rows = read_csv(log_dir / "fitgpp" / f"seed{seed}" / "jobs.csv")[1:]
        assert sum(int(r[6]) for r in rows) == data["policies"]["fitgpp"]["per_seed"][seed]["preemptions"]


def test_table_on_stdout(tmp_path, capsys):
    status = main(
        ["compare", "--policies", "fifo,k8s", "--seeds", "1", "--jobs", "50", "--cluster", "small", "--no-progress"]
    )
    assert status == 0
    out = capsys.readouterr().out
    assert "fifo" in out and "k8s" in out
    assert "ratio to fifo" in out


def write_trace(tmp_path, text):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_trace_replay(tmp_path, capsys):
    path = write_trace(
        tmp_path,
        "job_id,submit_time,duration,gpus,class,grace_period\nb1,0,1000,8,BE,10\nt1,100,100,8,TE,0\n",
    )
    out_json = tmp_path / "o.json"
    status = main(
        [
            "compare",
            "--trace",
            str(path),
            "--cluster",
            "small",
            "--policies",
            "fifo,fitgpp",
            "--seeds",
            "1",
            "--json",
            str(out_json),
            "--no-progress",
        ]
    )
    assert status == 0
    data = json.loads(out_json.read_text())
    assert data["workload"] == "trace"
    # On the 4-node "small" cluster the TE job fits on a free node: nobody waits, nobody is preempted.
    assert data["policies"]["fitgpp"]["preemptions"] == 0
    assert data["policies"]["fifo"]["te"]["wait_mean"] == 0.0


@pytest.mark.parametrize("workload", [None, "paper", "realistic", "philly"])
def test_a_workload_named_beside_a_trace_is_refused_not_dropped(tmp_path, workload):
    # The trace wins: CompareConfig(workload="realistic", trace=...) replayed the trace without a word until
    # 2026-12-05 (the command line cannot say both: --workload and --trace exclude each other).
    from schedgym.errors import ConfigError
    from schedgym.experiments.compare import CompareConfig

    path = write_trace(tmp_path, "job_id,submit_time,duration,gpus,class,grace_period\nb1,0,1000,8,BE,10\n")
    if workload in (None, "paper"):  # the default passes: a dataclass cannot tell it from an omitted one
        CompareConfig(policies=("fifo",), workload=workload, trace=str(path), cluster="small", seeds=1)
        return
    with pytest.raises(ConfigError, match=f"Expected no workload with trace .* got workload '{workload}'"):
        CompareConfig(policies=("fifo",), workload=workload, trace=str(path), cluster="small", seeds=1)


def test_trace_replay_with_preemption_on_a_custom_cluster(tmp_path):
    # One-node cluster from a CSV: the TE job preempts b1 (grace 10) under fitgpp and waits for it under fifo.
    cl = tmp_path / "one.csv"
    cl.write_text("name,gpus,cpus,mem_gb\nonly,8,64,512\n")
    path = write_trace(
        tmp_path, "job_id,submit_time,duration,gpus,class,grace_period\nb1,0,1000,8,BE,10\nt1,100,100,8,TE,0\n"
    )
    out_json = tmp_path / "o.json"
    status = main(
        [
            "compare",
            "--trace",
            str(path),
            "--cluster",
            str(cl),
            "--policies",
            "fifo,fitgpp",
            "--seeds",
            "1",
            "--json",
            str(out_json),
            "--no-progress",
        ]
    )
    assert status == 0
    pol = json.loads(out_json.read_text())["policies"]
    # fitgpp: b1 preempted at 100, t1 runs [110, 210): TE wait 10. fifo: t1 runs [1000, 1100): wait 900.
    assert pol["fitgpp"]["preemptions"] == 1
    assert pol["fitgpp"]["te"]["wait_mean"] == pytest.approx(10.0)
    assert pol["fifo"]["te"]["wait_mean"] == pytest.approx(900.0)
    # A class without jobs would be NaN: here both classes exist, so every figure is a number.
    assert pol["fifo"]["be"]["slowdown_p50"] == pytest.approx(1.0)


def test_json_uses_null_for_a_class_without_jobs(tmp_path):
    path = write_trace(tmp_path, "job_id,submit_time,duration,gpus,class\nb1,0,10,1,BE\n")
    out_json = tmp_path / "o.json"
    assert (
        main(
            [
                "compare",
                "--trace",
                str(path),
                "--cluster",
                "small",
                "--policies",
                "fifo",
                "--seeds",
                "1",
                "--json",
                str(out_json),
                "--no-progress",
            ]
        )
        == 0
    )
    text = out_json.read_text()
    assert "NaN" not in text
    assert json.loads(text)["policies"]["fifo"]["te"]["slowdown_p50"] is None


# ----------------------------------------------------------------------------------------------------------
# User errors: one line on stderr, status 2, no traceback
# ----------------------------------------------------------------------------------------------------------


def assert_one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("schedgym: error:"), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_malformed_trace_subprocess(tmp_path):
    path = write_trace(tmp_path, "job_id,submit_time,duration,gpus,class\na,0,100,1,BE\nb,0,-5,1,BE\n")
    proc = run_cli("compare", "--trace", str(path), "--policies", "fifo", "--seeds", "1", "--no-progress")
    assert proc.returncode == 2, proc.stderr
    line = assert_one_line_error(proc.stderr)
    assert f"{path}:3" in line
    assert "duration" in line and "'-5'" in line


@pytest.mark.parametrize(
    ("trace_text", "needle"),
    [
        ("job_id,submit_time,gpus,class\na,0,1,BE\n", ":1"),  # missing column
        ("job_id,submit_time,duration,gpus,class\na,0,10,1,QQ\n", ":2"),  # unknown class
        ("job_id,submit_time,duration,gpus,class\na,0,10,99,BE\n", ":2"),  # larger than every node
        ("", ":1"),  # empty file
    ],
)
def test_malformed_trace_in_process(tmp_path, capsys, trace_text, needle):
    path = write_trace(tmp_path, trace_text)
    status = main(
        ["compare", "--trace", str(path), "--cluster", "small", "--policies", "fifo", "--seeds", "1", "--no-progress"]
    )
    assert status == 2
    line = assert_one_line_error(capsys.readouterr().err)
    assert f"{path}{needle}" in line


def test_non_utf8_trace_exits_2(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("job_id,submit_time,duration,gpus,class\nj\u00e9,0,10,1,BE\n".encode("latin-1"))
    proc = run_cli(
        "compare", "--trace", str(path), "--cluster", "small", "--policies", "fifo", "--seeds", "1", "--no-progress"
    )
    assert proc.returncode == 2, proc.stderr
    assert str(path) in assert_one_line_error(proc.stderr)


def test_missing_trace_file(tmp_path, capsys):
    status = main(["compare", "--trace", str(tmp_path / "nope.csv"), "--policies", "fifo", "--no-progress"])
    assert status == 2
    assert "nope.csv" in assert_one_line_error(capsys.readouterr().err)


def test_unknown_policy(capsys):
    status = main(["compare", "--policies", "fifo,nosuchpolicy", "--seeds", "1", "--jobs", "10", "--no-progress"])
    assert status == 2
    line = assert_one_line_error(capsys.readouterr().err)
    assert "nosuchpolicy" in line and "fitgpp" in line


def test_unknown_cluster(capsys):
    status = main(
        ["compare", "--cluster", "nosuch", "--policies", "fifo", "--seeds", "1", "--jobs", "10", "--no-progress"]
    )
    assert status == 2
    assert "nosuch" in assert_one_line_error(capsys.readouterr().err)


def test_jobs_with_trace_is_rejected(tmp_path, capsys):
    path = write_trace(tmp_path, "job_id,submit_time,duration,gpus,class\na,0,10,1,BE\n")
    status = main(
        ["compare", "--trace", str(path), "--jobs", "5", "--cluster", "small", "--policies", "fifo", "--no-progress"]
    )
    assert status == 2
    assert "--jobs" in assert_one_line_error(capsys.readouterr().err)


def test_load_sets_the_synthetic_workloads_offered_load(tmp_path, capsys):
    out = {}
    for load in (None, "0.5"):
        path = tmp_path / f"load{load}.json"
        argv = ["compare", "--policies", "fifo", "--seeds", "1", "--jobs", "300", "--cluster", "small", "--no-progress"]
        status = main([*argv, "--json", str(path), *(["--load", load] if load else [])])
        assert status == 0
        out[load] = json.loads(path.read_text())
    assert out["0.5"]["workload"] == "paper (load 0.5)" and out[None]["workload"] == "paper"
    # Half the load: the same jobs arrive twice as far apart, so the last arrival comes later.
    assert (
        out["0.5"]["policies"]["fifo"]["per_seed"][0]["makespan"]
        > out[None]["policies"]["fifo"]["per_seed"][0]["makespan"]
    )
    assert "workload paper (load 0.5)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "--trace", ""],
        ["sweep", "--set", "load=1", "--trace", " "],
        ["trace", "convert", "--format", "swf", "", "o"],
    ],
)
def test_an_empty_input_path_is_one_line_naming_the_option(capsys, argv):
    # It was "cannot open trace: No such file or directory", naming neither the option nor a path.
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "expected a file name, got" in assert_one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("value", ["0", "10", "-1", "abc", "1e400", "nan", "1_0", "\u0661", "5e-324", "0.00999"])
def test_bad_load_is_a_one_line_error(capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--load", value.encode().decode("unicode_escape"), "--policies", "fifo", "--no-progress"])
    assert exc.value.code == 2
    line = assert_one_line_error(capsys.readouterr().err)
    assert "--load" in line and "from 0.01 to below 10" in line


def test_load_with_a_trace_is_rejected(tmp_path, capsys):
    path = write_trace(tmp_path, "job_id,submit_time,duration,gpus,class\na,0,10,1,BE\n")
    for source in (["--trace", str(path)], ["--workload", "philly"]):
        status = main(
            ["compare", *source, "--load", "1.1", "--cluster", "small", "--policies", "fifo", "--no-progress"]
        )
        assert status == 2
        line = assert_one_line_error(capsys.readouterr().err)
        assert "--load applies to synthetic workloads" in line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "Workload 'philly' has 7 test windows (0 to 6); --first-seed 50 is past them"),
        (
            ["--split", "validation"],
            "Workload 'philly' has 3 validation windows (0 to 2); --first-seed 50 is past them",
        ),
    ],
)
def test_first_seed_past_a_traces_windows_names_them(extra, message, capsys):
    # Without --seeds the default count was the windows left after --first-seed, 0 here, and the error
    # "Expected seeds > 0, got 0" named an option the user never gave.
    status = main(["compare", "--workload", "philly", "--first-seed", "50", *extra, "--no-progress"])
    assert status == 2
    assert assert_one_line_error(capsys.readouterr().err) == f"schedgym: error: {message}"


def test_contended_alibaba_cluster_by_name(tmp_path):
    path = tmp_path / "out.json"
    argv = ["compare", "--workload", "alibaba2023", "--cluster", "alibaba2023-contended", "--policies", "fifo"]
    status = main([*argv, "--seeds", "1", "--json", str(path), "--no-progress"])
    assert status == 0
    data = json.loads(path.read_text())
    assert data["cluster"] == "alibaba2023-contended"
    # Test window 0 peaks at 39.8 GPUs on a cluster of 18: jobs queue.
    assert data["policies"]["fifo"]["te"]["wait_mean"] > 60


def test_duplicate_policy(capsys):
    status = main(["compare", "--policies", "fifo,fifo", "--seeds", "1", "--jobs", "10", "--no-progress"])
    assert status == 2
    assert "distinct" in assert_one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "--seeds", "0"],
        ["compare", "--jobs", "-3"],
        ["compare", "--restart-overhead", "-1"],
        ["compare", "--max-preemptions", "x"],
        ["compare", "--placement", "worst-fit"],
        ["compare", "--workload", "other", "--trace", "t.csv"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_arguments_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "error:" in err


@pytest.mark.parametrize(
    ("argv", "option", "values"),
    [
        (["compare", "--json", "a.json", "--json", "b.json"], "compare: argument --json", "('a.json', then 'b.json')"),
        (["compare", "--csv=a.csv", "--cs", "b.csv"], "compare: argument --csv", "('a.csv', then 'b.csv')"),
        (["compare", "--first-seed", "2", "--first-seed", "3"], "compare: argument --first-seed", "(2, then 3)"),
        (["sweep", "--set", "load=1", "--plot", "a.png", "--plot", "b.png"], "sweep: argument --plot", "('a.png',"),
        (["trace", "convert", "--format", "swf", "--format", "swf", "i", "o"], "trace convert: argument --format", ""),
        (["train", "--seed", "1", "--seed", "2", "--algo", "none"], "train: argument --seed", "(1, then 2)"),
    ],
)
def test_an_option_given_twice_is_refused(tmp_path, capsys, monkeypatch, argv, option, values):
    # argparse lets the last value win: --json a.json --json b.json wrote b.json alone, silently. (The
    # arguments are small, or end in an error, so that the old code, which runs them, fails fast.)
    monkeypatch.chdir(tmp_path)
    small = ["--policies", "fifo", "--seeds", "1", "--jobs", "20", "--cluster", "small", "--no-progress"]
    try:
        status = main([*argv, *small] if argv[0] in ("compare", "sweep") else argv)
    except SystemExit as exc:  # argparse's errors
        status = exc.code
    assert status == 2
    line = assert_one_line_error(capsys.readouterr().err)
    assert line.startswith(f"schedgym: error: {option}: given twice {values}"), line
    assert line.endswith("; give it once"), line
    assert list(tmp_path.iterdir()) == []


def test_options_given_once_and_repeatable_options_still_parse():
    from schedgym.cli import build_parser

    args = build_parser().parse_args(["sweep", "--set", "load=1", "--set", "n_jobs=5", "--json", "a.json"])
    assert args.grid == ["load=1", "n_jobs=5"] and args.json == "a.json"
    assert not any(name.startswith("_schedgym") for name in vars(args))  # nothing of the check is left


@pytest.mark.parametrize("policies", ["fifo,,fitgpp", "fifo,", ",fifo"])
def test_an_empty_policy_name_is_refused(tmp_path, capsys, policies):
    # The empty name was skipped: 'fifo,,fitgpp' compared two policies where the user may have meant three.
    argv = ["compare", "--policies", policies, "--seeds", "1", "--jobs", "20", "--cluster", "small", "--no-progress"]
    assert main([*argv, "--json", str(tmp_path / "out.json")]) == 2
    line = assert_one_line_error(capsys.readouterr().err)
    assert line == f"schedgym: error: --policies {policies!r}: expected comma-separated names, got an empty one"
    assert list(tmp_path.iterdir()) == []


def test_unwritable_json_path(tmp_path, capsys):
    status = main(
        [
            "compare",
            "--policies",
            "fifo",
            "--seeds",
            "1",
            "--jobs",
            "10",
            "--cluster",
            "small",
            "--json",
            str(tmp_path / "no" / "such" / "dir" / "o.json"),
            "--no-progress",
        ]
    )
    assert status == 2
    captured = capsys.readouterr()
    assert "does not exist" in assert_one_line_error(captured.err)
    assert captured.out == ""  # refused before simulating, not after


@pytest.mark.parametrize("plot", ["p.unknownext", "noext", "."])
def test_bad_plot_path_is_refused_before_simulating(tmp_path, capsys, plot):
    status = main(["compare", "--policies", "fifo", "--seeds", "1", "--jobs", "10", "--plot", str(tmp_path / plot)])
    assert status == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--plot" in assert_one_line_error(captured.err)


def test_unknown_workload_lists_every_workload(capsys):
    assert main(["compare", "--workload", "nosuch", "--policies", "fifo", "--no-progress"]) == 2
    line = assert_one_line_error(capsys.readouterr().err)
    assert "paper" in line and "philly" in line and "alibaba2023" in line


def test_rule_flags_reach_the_simulator(tmp_path):
    # --max-preemptions 0 turns preemption off even for fitgpp.
    out_json = tmp_path / "o.json"
    assert (
        main(
            [
                "compare",
                "--policies",
                "fitgpp",
                "--seeds",
                "1",
                "--jobs",
                "150",
                "--cluster",
                "small",
                "--max-preemptions",
                "0",
                "--no-backfill",
                "--placement",
                "first-fit",
                "--restart-overhead",
                "5",
                "--json",
                str(out_json),
                "--no-progress",
            ]
        )
        == 0
    )
    data = json.loads(out_json.read_text())
    assert data["policies"]["fitgpp"]["preemptions"] == 0
    assert data["sim"] == {
        "queue": "priority",
        "backfill": False,
        "placement": "first-fit",
        "max_preemptions": 0,
        "restart_overhead": 5.0,
    }


def test_first_seed_selects_the_same_workload(compare_run, tmp_path):
    # Seed s is the same workload whatever the first seed: --first-seed 1 --seeds 1 reproduces seed 1 of the
    # shared two-seed run exactly.
    _, json_path, log_dir = compare_run
    out_json, logs = tmp_path / "o.json", tmp_path / "logs"
    assert (
        main(
            [
                "compare",
                "--policies",
                "fifo,fitgpp",
                "--first-seed",
                "1",
                "--seeds",
                "1",
                "--jobs",
                "200",
                "--cluster",
                "small",
                "--json",
                str(out_json),
                "--log-dir",
                str(logs),
                "--no-progress",
            ]
        )
        == 0
    )
    one = json.loads(out_json.read_text())["policies"]
    both = json.loads(json_path.read_text())["policies"]
    for name in ("fifo", "fitgpp"):
        a, b = one[name]["per_seed"][0], both[name]["per_seed"][1]
        assert a["seed"] == b["seed"] == 1
        assert a["te"] == b["te"] and a["be"] == b["be"] and a["preemptions"] == b["preemptions"]
        assert read_csv(logs / name / "seed1" / "segments.csv") == read_csv(log_dir / name / "seed1" / "segments.csv")


# ----------------------------------------------------------------------------------------------------------
# The comparison harness behind the CLI
# ----------------------------------------------------------------------------------------------------------


def test_comparison_ratios_and_table(tmp_path):
    from schedgym.experiments import CompareConfig, run_comparison
    from schedgym.experiments.report import format_table

    cl = tmp_path / "one.csv"
    cl.write_text("name,gpus,cpus,mem_gb\nonly,8,64,512\n")
    trace = write_trace(
        tmp_path, "job_id,submit_time,duration,gpus,class,grace_period\nb1,0,1000,8,BE,10\nt1,100,100,8,TE,0\n"
    )
    result = run_comparison(
        CompareConfig(policies=("fifo", "fitgpp"), workload=None, trace=str(trace), cluster=str(cl), seeds=1),
        progress=False,
    )
    # fifo:   b1 [0, 1000); t1 [1000, 1100).  TE slowdown (1100 - 100) / 100 = 10; BE slowdown 1.
    #         GPU utilisation = (8 * 1000 + 8 * 100) / (8 * 1100) = 1.
    # fitgpp: b1 [0, 100) preempted, released at 110; t1 [110, 210); b1 [210, 1110).
    #         TE slowdown 110 / 100 = 1.1, wait 10; BE slowdown 1110 / 1000 = 1.11;
    #         GPU utilisation = 8800 / (8 * 1110).
    r = result.ratios("fifo")["fitgpp"]
    assert r["te_slowdown_p50"] == pytest.approx(1.1 / 10)
    assert r["te_wait_mean"] == pytest.approx(10 / 900)
    assert r["be_slowdown_p50"] == pytest.approx(1.11)
    assert r["gpu_utilization"] == pytest.approx(1100 / 1110)
    assert math.isnan(r["preemptions"])  # fifo has 0 preemptions: no ratio
    assert result.ratios("nosuch") == {}
    table = format_table(result)
    assert "ratio to fifo" in table
    fitgpp_ratio_row = table.splitlines()[-1]
    assert fitgpp_ratio_row.startswith("fitgpp") and " - " in f"{fitgpp_ratio_row} "


def test_output_cut_short_by_the_reader_is_not_a_traceback():
    # `schedgym compare | head -1`: the pipe closes early; the command must not print a traceback.
    proc = subprocess.run(
        f"{sys.executable} -m schedgym.cli compare --policies fifo,priority --jobs 200 --seeds 1 --no-progress"
        " | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.startswith("workload paper")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_intervals_print_as_plus_minus_where_the_terminal_lacks_it(encoding):
    """Tables print ``mean ± half``; a stdout that cannot encode ``±`` gets ``+-``, not a traceback."""
    argv = ["compare", "--policies", "fitgpp,k8s", "--jobs", "200", "--seeds", "2", "--no-progress"]
    proc = subprocess.run(
        [sys.executable, "-m", "schedgym.cli", *argv],
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONIOENCODING": encoding},
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode(encoding)
    paired = out[out.index("paired difference to k8s") :]
    assert ("±" in paired) == (encoding == "utf-8") and ("+-" in paired) == (encoding == "ascii"), paired


def test_train_help_lists_every_option(capsys):
    """argparse expands %-formats in help texts; a docstring with "i % n" (workloads) once broke --help."""
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--policy POLICY" in out and "workloads[i % len(workloads)]" in out


def _failing_import(cause: BaseException | None):  # noqa: ANN202
    def write(path, result) -> None:  # noqa: ANN001
        raise ImportError("initialization failed") from cause

    return write


def test_ctrl_c_while_an_extension_initialises_is_an_interrupt(tmp_path, capsys, monkeypatch):
    """Ctrl-C during an extension module's initialisation (matplotlib's, imported by --plot) surfaces as an
    ImportError caused by the KeyboardInterrupt: one line, status 130, no outputs; another ImportError is not."""
    import schedgym.experiments.report as report

    argv = ["compare", "--policies", "fifo", "--jobs", "200", "--seeds", "1", "--no-progress"]
    outputs = ["--csv", str(tmp_path / "a.csv"), "--json", str(tmp_path / "a.json")]
    monkeypatch.setattr(report, "write_json", _failing_import(KeyboardInterrupt()))
    assert main([*argv, *outputs]) == 130
    assert capsys.readouterr().err == "schedgym: interrupted\n"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(report, "write_json", _failing_import(None))
    with pytest.raises(ImportError, match="initialization failed"):
        main([*argv, *outputs])
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_a_class_is_built_is_an_interrupt(tmp_path, capsys, monkeypatch):
    """Ctrl-C while an imported module builds a class (matplotlib's axes, by --plot) surfaces as a RuntimeError
    whose context is the KeyboardInterrupt: one line, status 130, no outputs, and the half-built objects'
    failures at collection are not printed; a RuntimeError of its own still raises."""
    import schedgym.experiments.report as report

    def interrupted(path, result) -> None:  # noqa: ANN001
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Error calling __set_name__") from None

    def broken(path, result) -> None:  # noqa: ANN001
        raise RuntimeError("a bug")

    argv = ["compare", "--policies", "fifo", "--jobs", "200", "--seeds", "1", "--no-progress"]
    outputs = ["--csv", str(tmp_path / "a.csv"), "--json", str(tmp_path / "a.json")]
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # main() replaces it on Ctrl-C
    monkeypatch.setattr(report, "write_json", interrupted)
    hook, errors = sys.unraisablehook, (sys.stdout.errors, sys.stderr.errors)
    assert main([*argv, *outputs]) == 130
    assert capsys.readouterr().err == "schedgym: interrupted\n"
    assert list(tmp_path.iterdir()) == []
    # main(argv) in a Python process puts back what it changed for the command's exit
    assert sys.unraisablehook is hook and (sys.stdout.errors, sys.stderr.errors) == errors != ("schedgym-plain",) * 2
    monkeypatch.setattr(sys, "argv", ["schedgym", *argv, *outputs])
    assert main() == 130  # as the command: silenced until the interpreter exits
    assert capsys.readouterr().err == "schedgym: interrupted\n"
    sys.unraisablehook(None)  # prints nothing
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(report, "write_json", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main([*argv, *outputs])


def test_compares_default_policies_are_compare_configs():
    from schedgym.cli import build_parser
    from schedgym.experiments.compare import CompareConfig

    assert build_parser().parse_args(["compare"]).policies == ",".join(CompareConfig().policies)

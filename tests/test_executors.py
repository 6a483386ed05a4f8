"""``compare --executor``: the process pool (and Ray, when installed) gives the serial results, in the serial
order, building each policy once per worker."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from counting import builds, per_seed

from schedgym.cli import main
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.executors import ExecutorConfig, make_tasks

SMALL = dict(seeds=3, n_jobs=200, cluster="small")
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


def without_wall_time(path: Path) -> dict:
    data = json.loads(path.read_text())
    for entry in data["policies"].values():
        assert entry.pop("wall_time_s") >= 0
    return data


def test_tasks_are_seed_major():
    tasks = make_tasks(["fifo", "x:m.zip"], ["fifo", "x"], [5, 6])
    assert [(t.index, t.seed, t.label) for t in tasks] == [(0, 5, "fifo"), (1, 5, "x"), (2, 6, "fifo"), (3, 6, "x")]
    assert [t.seed_index for t in tasks] == [0, 0, 1, 1]


def test_process_gives_the_serial_results_and_builds_each_policy_once_per_worker(counted):
    config = CompareConfig(policies=("fifo", "fitgpp", "k8s", "counted"), seeds=4, n_jobs=200, cluster="small")
    serial = run_comparison(config, progress=False)
    assert builds(str(counted)) == {os.getpid(): 1}  # serial: once in this process
    counted.write_text("")
    finished = []
    parallel = run_comparison(
        config,
        executor=ExecutorConfig("process", workers=2),
        progress=False,
        on_run=lambda label, seed, result: finished.append((seed, label)),
    )
    assert per_seed(parallel) == per_seed(serial)
    assert list(parallel.runs) == list(serial.runs) == ["fifo", "fitgpp", "k8s", "counted"]
    assert sorted(finished) == sorted((s, p) for s in range(4) for p in parallel.runs)  # every run, once
    # 16 runs, 4 of them "counted", on 2 workers: each worker that ran it built it once.
    per_process = builds(str(counted))
    assert os.getpid() not in per_process and 1 <= len(per_process) <= 2
    assert set(per_process.values()) == {1}
    assert parallel.summary()["seeds"] == [0, 1, 2, 3]


def test_cli_process_json_equals_serial_but_wall_times(tmp_path):
    argv = ["compare", "--policies", "fifo,fitgpp,ppo", *SMALL_ARGS]
    assert main([*argv, "--json", str(tmp_path / "serial.json")]) == 0
    assert main([*argv, "--executor", "process", "--workers", "2", "--json", str(tmp_path / "process.json")]) == 0
    serial, process = without_wall_time(tmp_path / "serial.json"), without_wall_time(tmp_path / "process.json")
    assert json.dumps(process) == json.dumps(serial)  # the same keys in the same order, the same figures


def test_a_missing_model_fails_in_one_line_under_process(capsys, tmp_path):
    argv = ["compare", "--policies", f"fifo,mine:{tmp_path / 'none.zip'}", "--executor", "process", *SMALL_ARGS]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("schedgym: error: No model at") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "argument --workers: expected an integer from 1"),
        (["--workers", "2"], "--workers applies to --executor process or ray, not serial"),
        (["--address", "auto"], "--address applies to --executor ray, not serial"),
        (["--executor", "process", "--address", "auto"], "--address applies to --executor ray, not process"),
        (["--executor", "threads"], "argument --executor: invalid choice: 'threads'"),
        (["--retries", "2"], "--retries applies to --executor process or ray, not serial"),
        (["--batch", "2"], "--batch applies to --executor process or ray, not serial"),
        (["--executor", "process", "--retries", "-1"], "argument --retries: expected an integer from 0"),
        (["--executor", "process", "--batch", "0"], "argument --batch: expected an integer from 1"),
        (["--run-dir", "a", "--resume", "a"], "argument --resume: not allowed with argument --run-dir"),
    ],
)
def test_bad_executor_options_are_one_line_errors(args, message, capsys):
    assert exit_status(["compare", *args, *SMALL_ARGS]) == 2
    err = capsys.readouterr().err
    assert err.startswith("schedgym: error: ") and message in err and err.count("\n") == 1, err


def exit_status(argv: list[str]) -> int:
    """main()'s status, whether it returns it (a ConfigError) or exits with it (an argparse error)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def test_executor_ray_without_ray_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # import ray raises ImportError
    assert main(["compare", "--executor", "ray", *SMALL_ARGS]) == 2
    err = capsys.readouterr().err
    assert err == "schedgym: error: --executor ray needs Ray, which is not installed: pip install 'schedgym[ray]'\n"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(kind="dask"), "Expected executor in ['serial', 'process', 'ray'], got 'dask'"),
        (dict(kind="process", workers=0), "Expected workers > 0, got 0"),
        (dict(kind="ray", address=" "), "Expected a Ray address"),
    ],
)
def test_executor_config_checks(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ExecutorConfig(**kwargs)

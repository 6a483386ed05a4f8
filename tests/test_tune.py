"""``schedgym tune`` on Ray Tune (the ``tune`` extra): a two-trial search with tiny training, ranked on a
validation figure, its JSON, where it writes, that the best trial's ``schedgym train`` command gives the
figures the trial reported, and that a trial whose worker process is killed is trained again to the same
figures (a trial failing by its own error is not). Skipped where Ray Tune is not installed. The search-space
syntax and the command line's errors are tests/test_tune_search.py (no Ray)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray.tune")
pytest.importorskip("sb3_contrib")

from helpers import run_python_without_ray_settings  # noqa: E402

from agents.train import TrainConfig, train  # noqa: E402
from agents.tune import FAILED_FILE, METRICS, TuneConfig, run_trial  # noqa: E402
from schedgym.cli import build_parser, main  # noqa: E402
from schedgym.errors import ConfigError, SchedGymError  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

# Tiny training (tests/helpers.py's TINY) on a loaded workload, so that trials differ in their figures.
TINY_ARGS = [
    "--total-timesteps", "128", "--n-envs", "1", "--vec-env", "dummy", "--n-steps", "64", "--batch-size", "32",
    "--eval-freq", "64", "--n-eval-workloads", "1", "--env-kwargs", '{"n_jobs": 150, "load": 1.6}', "--no-tensorboard",
]  # fmt: skip
"""(``TINY_ARGS[2:]`` is all but its --total-timesteps, for a test that sets its own: an option is given once.)"""


@pytest.fixture(scope="module", autouse=True)
def engine():
    """Overrides conftest's per-engine fixture: training is held to both engines elsewhere; here Tune runs."""
    yield "native"


@pytest.fixture(scope="module")
def home(local_ray) -> Path:
    """The home folder of this process and of the module's Ray (conftest's local_ray): it must stay empty."""
    return local_ray


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[int, str, dict, Path]:
    """``schedgym tune`` over two learning rates (a grid: one trial each), ranked on BE p99: its status,
    its printed output, its --json and the run folder."""
    out = tmp_path_factory.mktemp("tune")
    argv = [
        "tune", "--search", "learning_rate=grid:0.0003,0.001", "--num-samples", "1", "--metric", "be_p99",
        "--run-dir", str(out / "runs"), "--json", str(out / "tune.json"), *TINY_ARGS,
    ]  # fmt: skip
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(argv)

    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} in the JSON")

    data = json.loads((out / "tune.json").read_text(), parse_constant=no_constant) if status == 0 else {}
    (root,) = (out / "runs").iterdir()
    return status, printed.getvalue(), data, root


def test_two_trials_are_ranked_on_the_metric_in_well_formed_json(searched):
    status, _, data, _ = searched
    assert status == 0
    assert data["metric"] == "be_p99" and data["mode"] == "min"
    trials = data["trials"]
    assert [t["rank"] for t in trials] == [1, 2]
    assert sorted(t["params"]["learning_rate"] for t in trials) == [0.0003, 0.001]
    assert sorted(t["seed"] for t in trials) == [0, 1]
    assert all(t["status"] == "finished" and t["timesteps"] == 128 for t in trials)
    assert all(set(t["figures"]) == set(METRICS) for t in trials)
    values = [t["figures"]["be_p99"] for t in trials]
    assert values[0] < values[1]  # distinct, so the order is the metric's and not the trials'
    assert data["best"]["index"] == trials[0]["index"]


def test_the_table_lists_the_trials_best_first_and_the_command(searched):
    _, printed, data, _ = searched
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["rank", "trial", "seed"])
    assert [int(lines[header + k].split()[1]) for k in (1, 2)] == [t["index"] for t in data["trials"]]
    assert f"  {data['best']['command']}" in lines


def test_each_trial_reports_every_evaluation_and_the_final_one_last(searched):
    *_, root = searched
    for trial in ("trial_000", "trial_001"):
        reports = [json.loads(line) for line in (root / "tune" / trial / "result.json").read_text().splitlines()]
        # eval_freq 64 over 128 steps: two evaluations during training, then the final one
        assert [(r["timesteps"], r["final"]) for r in reports] == [(64, False), (128, False), (128, True)]


def test_everything_is_written_in_the_run_dir_and_nothing_in_the_home_folder(searched, home):
    *_, data, root = searched
    assert Path(data["run_dir"]) == root
    assert (root / "tune.json").is_file() and (root / "tune" / "trial_000").is_dir()  # Tune's storage
    for trial in data["trials"]:
        assert Path(trial["model"]).is_file() and Path(trial["model"]).is_relative_to(root / "trials")
    assert list(home.iterdir()) == []


def test_the_best_command_reproduces_the_trials_figures_in_this_process(searched, tmp_path):
    *_, data, _ = searched
    best = data["best"]
    assert figures_of_the_command(best["command"], tmp_path) == {f: best["figures"][f] for f in FIGURES}
    assert all(t["retries"] == 0 for t in data["trials"]) and data["max_failures"] == 2


FIGURES = ("te_p95", "be_p50", "be_p95", "be_p99")


def figures_of_the_command(command: str, run_dir: Path) -> dict[str, float]:
    """The final validation figures of ``schedgym train ...`` (``command``) trained in this process."""
    args = build_parser().parse_args(shlex.split(command)[1:])
    config = TrainConfig.of(**{name: getattr(args, name) for name in TrainConfig.option_names()})
    run = train(config.replace(run_dir=str(run_dir), progress=False))
    final = json.loads((run / "model.json").read_text())["final_evaluation"]
    return {f: final["figures"][f] for f in FIGURES}  # exactly: same seed, same result, any executor


def kill_the_process_writing(pattern: str, root: Path, killed: list[int], timeout: float = 300.0) -> None:
    """SIGKILL the process that has the first file matching ``root.glob(pattern)`` open, once (its pid to
    ``killed``): a trial's worker, found by the log its training writes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not killed:
        for path in root.glob(pattern):
            for fds in Path("/proc").glob("[0-9]*/fd"):
                with contextlib.suppress(OSError):
                    if any(os.readlink(fd) == str(path) for fd in fds.iterdir()):
                        os.kill(int(fds.parent.name), signal.SIGKILL)
                        killed.append(int(fds.parent.name))
                        return
        time.sleep(0.01)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the trial's process through /proc")
def test_a_trial_whose_worker_process_is_killed_is_trained_again_to_the_same_figures(tmp_path):
    runs = tmp_path / "runs"
    killed: list[int] = []
    killer = threading.Thread(
        target=kill_the_process_writing, args=("*/trials/000/train.log", runs, killed), daemon=True
    )
    killer.start()
    argv = [
        "tune", "--num-samples", "1", "--max-failures", "1", "--run-dir", str(runs),
        "--json", str(tmp_path / "t.json"), *TINY_ARGS[2:], "--total-timesteps", "256",
    ]  # fmt: skip
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(argv)
    killer.join(timeout=1)
    assert killed and killed[0] != os.getpid()
    data = json.loads((tmp_path / "t.json").read_text())
    (trial,) = data["trials"]
    assert status == 0, printed.getvalue()
    assert (trial["status"], trial["timesteps"], trial["retries"]) == ("finished", 256, 1)
    assert "trial 0 failed; starting it again from the beginning (retry 1)" in printed.getvalue()
    # Trained again from the beginning (no checkpoint), with its seed: the figures of an uninterrupted run.
    assert figures_of_the_command(data["best"]["command"], tmp_path / "again") == {
        f: trial["figures"][f] for f in FIGURES
    }
    (run,) = [p for p in Path(trial["run_dir"]).parent.iterdir() if p.is_dir()]  # the killed attempt's is gone
    assert Path(trial["model"]).is_file() and Path(trial["model"]).is_relative_to(run)


@pytest.mark.parametrize("value", [-1, 101, True, 1.5])
def test_max_failures_is_checked(value):
    with pytest.raises(ConfigError, match=f"Expected max_failures from 0 to 100, got {value!r}"):
        TuneConfig(train={"total_timesteps": 64}, max_failures=value)


def test_a_bad_max_failures_is_one_line_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "--max-failures", "101", "--run-dir", str(tmp_path), *TINY_ARGS])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == "schedgym: error: tune: argument --max-failures: expected an integer from 0 to 100, in ASCII " \
        "digits, got '101'\n"  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_a_trials_own_error_is_raised_again_by_its_retry_without_training(tmp_path, monkeypatch):
    import agents.train

    calls = []

    def failing(config: TrainConfig, on_evaluation=None) -> None:  # noqa: ANN001
        calls.append(config.common.seed)
        raise ValueError("a bad value")

    monkeypatch.setattr(agents.train, "train", failing)
    trial = {"trial": {"index": 4, "seed": 7, "params": {}}}
    with pytest.raises(ValueError, match="a bad value"):
        run_trial(trial, train={"total_timesteps": 64}, root=str(tmp_path))
    assert (tmp_path / "trials" / "004" / FAILED_FILE).read_text() == "ValueError: a bad value\n"
    with pytest.raises(SchedGymError, match=r"^ValueError: a bad value \(an earlier attempt's own error"):
        run_trial(trial, train={"total_timesteps": 64}, root=str(tmp_path))
    assert calls == [7]  # trained once


def test_a_trial_whose_worker_was_lost_trains_again_in_an_emptied_folder(tmp_path, monkeypatch):
    import ray.exceptions

    import agents.train

    leftover = tmp_path / "trials" / "000" / "run_of_the_lost_attempt"
    leftover.mkdir(parents=True)

    def lost(config: TrainConfig, on_evaluation=None) -> None:  # noqa: ANN001
        assert not leftover.exists()
        raise ray.exceptions.WorkerCrashedError()

    monkeypatch.setattr(agents.train, "train", lost)
    with pytest.raises(ray.exceptions.WorkerCrashedError):
        run_trial({"trial": {"index": 0, "seed": 0, "params": {}}}, train={"total_timesteps": 64}, root=str(tmp_path))
    assert not (tmp_path / "trials" / "000" / FAILED_FILE).exists()  # a retry trains again


@pytest.mark.slow
def test_asha_stops_some_trials_and_ranks_the_finished_first(tmp_path):
    argv = [
        "tune", "--search", "learning_rate=loguniform:1e-4,1e-3", "--num-samples", "6", "--scheduler", "asha",
        "--run-dir", str(tmp_path), "--json", str(tmp_path / "t.json"), *TINY_ARGS[2:], "--total-timesteps", "512",
    ]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    statuses = [t["status"] for t in json.loads((tmp_path / "t.json").read_text())["trials"]]
    assert "finished" in statuses and "stopped" in statuses, statuses
    assert statuses == sorted(statuses, key=["finished", "stopped"].index)


@pytest.mark.slow
def test_cli_starts_and_stops_its_own_ray_leaving_the_home_folder_empty(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    done = run_python_without_ray_settings(
        ["-m", "schedgym.cli", "tune", "--search", "ent_coef=choice:0,0.01", "--num-samples", "2",
         "--run-dir", str(tmp_path / "runs"), *TINY_ARGS],
        home=home, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "best: trial" in done.stdout
    assert list(home.iterdir()) == []

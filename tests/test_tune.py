"""``schedgym tune`` on Ray Tune (the ``tune`` extra): a two-trial search with tiny training, ranked on a
validation figure, its JSON, where it writes, and that the best trial's ``schedgym train`` command gives the
figures the trial reported. Skipped where Ray Tune is not installed. The search-space syntax and the command
line's errors are tests/test_tune_search.py (no Ray)."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest

pytest.importorskip("ray.tune")
pytest.importorskip("sb3_contrib")

from helpers import run_python_without_ray_settings  # noqa: E402

from agents.train import TrainConfig, train  # noqa: E402
from agents.tune import METRICS  # noqa: E402
from schedgym.cli import build_parser, main  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

# Tiny training (tests/helpers.py's TINY) on a loaded workload, so that trials differ in their figures.
TINY_ARGS = [
    "--total-timesteps", "128", "--n-envs", "1", "--vec-env", "dummy", "--n-steps", "64", "--batch-size", "32",
    "--eval-freq", "64", "--n-eval-workloads", "1", "--env-kwargs", '{"n_jobs": 150, "load": 1.6}', "--no-tensorboard",
]  # fmt: skip


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
    args = build_parser().parse_args(shlex.split(best["command"])[1:])
    config = TrainConfig.of(**{name: getattr(args, name) for name in TrainConfig.option_names()})
    run_dir = train(config.replace(run_dir=str(tmp_path), progress=False))
    final = json.loads((run_dir / "model.json").read_text())["final_evaluation"]
    figures = {f: final["figures"][f] for f in ("te_p95", "be_p50", "be_p95", "be_p99")}
    assert figures == {f: best["figures"][f] for f in figures}  # exactly: same seed, same result, any executor


@pytest.mark.slow
def test_asha_stops_some_trials_and_ranks_the_finished_first(tmp_path):
    argv = [
        "tune", "--search", "learning_rate=loguniform:1e-4,1e-3", "--num-samples", "6", "--scheduler", "asha",
        "--run-dir", str(tmp_path), "--json", str(tmp_path / "t.json"), *TINY_ARGS, "--total-timesteps", "512",
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

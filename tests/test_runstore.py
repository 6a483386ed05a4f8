"""Run folders (``--run-dir`` / ``--resume``, schedgym.experiments.runstore) and retries of runs whose worker
died (the process executor's; Ray's are in tests/test_executors_ray.py and tests/test_ray_cluster.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import pytest
from counting import per_seed

from schedgym import registry
from schedgym.cli import main
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments import executors
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.executors import ExecutorConfig, batch_size, batches, make_tasks
from schedgym.experiments.runstore import first_difference
from schedgym.experiments.sweep import SweepConfig, run_sweep

SMALL = dict(seeds=3, n_jobs=200, cluster="small")
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


def _register(monkeypatch: pytest.MonkeyPatch, name: str, entry_point: str, **kwargs: str) -> None:
    entry = registry.PolicyEntry(name, entry_point, kwargs, "test", True)
    monkeypatch.setitem(registry._REGISTRY, name, entry)


@pytest.fixture
def runs_counted(monkeypatch):  # noqa: ANN001, ANN201
    """The tasks run in this process (serial executor), by index."""
    ran: list[int] = []
    real = executors.Worker.run

    def run(self, task):  # noqa: ANN001, ANN202
        ran.append(task.index)
        return real(self, task)

    monkeypatch.setattr(executors.Worker, "run", run)
    return ran


def test_a_kept_comparison_resumes_with_only_the_missing_runs(tmp_path, runs_counted):
    config = CompareConfig(policies=("fifo", "fitgpp", "k8s"), **SMALL)
    plain = run_comparison(config, progress=False)
    folder = tmp_path / "run"
    kept = run_comparison(config, progress=False, run_dir=folder)
    units = sorted((folder / "units").iterdir())
    assert [p.name for p in units] == [f"u{i:07d}.npz" for i in range(9)]
    assert per_seed(kept) == per_seed(plain)
    for gone in (units[1], units[5], units[8]):
        gone.unlink()
    runs_counted.clear()
    seen = []
    resumed = run_comparison(
        config, progress=False, run_dir=folder, resume=True, on_run=lambda label, seed, r: seen.append((seed, label))
    )
    assert runs_counted == [1, 5, 8]  # only what was missing
    assert sorted(seen) == sorted((s, p) for s in range(3) for p in ("fifo", "fitgpp", "k8s"))  # logs: every run
    assert per_seed(resumed) == per_seed(plain)
    for label in plain.runs:  # every per-job array and segment read back exactly
        for a, b in zip(plain.runs[label], resumed.runs[label], strict=True):
            assert a.job_ids == b.job_ids and list(a.segments) == list(b.segments)
            assert all((getattr(a, f) == getattr(b, f)).all() for f in ("completion", "first_start", "run_time"))
    assert resumed.wall_time["fifo"] == kept.wall_time["fifo"]  # a kept run keeps the time it took


def test_a_kept_sweep_resumes_with_only_the_missing_runs(tmp_path, runs_counted):
    config = SweepConfig(CompareConfig(policies=("fitgpp", "k8s"), **SMALL), (("load", (0.9, 1.1)),))
    plain = run_sweep(config, progress=False)
    folder = tmp_path / "run"
    run_sweep(config, progress=False, run_dir=folder)
    (folder / "units" / "u0000003.json").unlink()
    runs_counted.clear()
    resumed = run_sweep(config, progress=False, run_dir=folder, resume=True)
    assert runs_counted == [3]

    def strip(summary):  # noqa: ANN001, ANN202
        for setting in summary["settings"]:
            for entry in setting["policies"].values():
                entry.pop("wall_time_s")
        return summary

    assert strip(resumed.summary()) == strip(plain.summary())


def test_cli_sweep_interrupted_then_resumed_writes_the_uninterrupted_outputs(tmp_path, engine):
    """SIGINT in the middle: exit 130, no outputs, the finished runs kept; --resume then writes the outputs
    an uninterrupted run writes (byte for byte, the measured wall times aside)."""
    if engine != "native":
        pytest.skip("the command's interruption does not depend on the engine; 240 Python-engine runs take minutes")
    grid = ["sweep", "--set", "load=0.8,0.9,1.0,1.1", "--policies", "fifo,fitgpp,k8s", "--seeds", "20", "--no-progress"]
    out = tmp_path / "resumed"
    outputs = (Path(f"{out}.json"), Path(f"{out}.csv"))
    for attempt in range(3):
        # On a loaded machine the whole sweep (about a second) can finish before this process, polling, sees
        # 20 runs kept. Only an attempt whose outputs were whole (they are written as one set) before the
        # signal was sent is tried again, in a new folder; any other must end with 130.
        folder = tmp_path / f"run{attempt}"
        cmd = [sys.executable, "-m", "schedgym.cli", *grid, "--run-dir", str(folder)]
        proc = subprocess.Popen([*cmd, "--json", f"{out}.json", "--csv", f"{out}.csv"], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list((folder / "units").glob("u*.json"))) < 20:
            time.sleep(0.05)
        finished = all(path.exists() for path in outputs)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if not finished:
            break
        for path in outputs:
            path.unlink()
    assert proc.returncode == 130, err.decode()
    assert err.decode().strip() == "schedgym: interrupted"
    kept = len(list((folder / "units").glob("u*.json")))
    assert 20 <= kept <= 240, kept  # all 240 if the signal landed after the last run, before the outputs
    assert not Path(str(out) + ".json").exists() and not Path(str(out) + ".csv").exists()
    assert main([*grid, "--resume", str(folder), "--json", str(out) + ".json", "--csv", str(out) + ".csv"]) == 0
    plain = tmp_path / "plain"
    assert main([*grid, "--json", str(plain) + ".json", "--csv", str(plain) + ".csv"]) == 0
    assert Path(str(out) + ".csv").read_bytes() == Path(str(plain) + ".csv").read_bytes()
    a, b = (json.loads(Path(str(p) + ".json").read_text()) for p in (out, plain))
    for data in (a, b):
        for setting in data["settings"]:
            for entry in setting["policies"].values():
                entry.pop("wall_time_s")
    assert a == b


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (["--policies", "fifo,k8s"], "policies[0] is 'fitgpp' there, 'fifo' here"),
        (["--seeds", "4"], "seeds is [0, 1, 2] there, [0, 1, 2, 3] here"),
        (["--first-seed", "2"], "seeds[0] is 0 there, 2 here"),
        (["--load", "1.1"], "settings[0].config.load is null there, 1.1 here"),
        (["--max-preemptions", "2"], "settings[0].config.sim.max_preemptions is 1 there, 2 here"),
    ],
)
def test_resuming_another_grid_is_refused_naming_what_differs(tmp_path, capsys, change, names):
    base = ["compare", "--policies", "fitgpp,k8s", *SMALL_ARGS]
    assert main([*base, "--run-dir", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    argv = list(base)
    option, value = change
    if option in argv:  # changed in place: an option given twice is refused before the grid is compared
        argv[argv.index(option) + 1] = value
    else:
        argv += change
    assert main([*argv, "--resume", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"schedgym: error: --resume {tmp_path / 'run'}: the folder holds")
    assert names in err, err


def test_resuming_under_another_engine_or_agent_file_is_refused(tmp_path, capsys, monkeypatch, engine):
    agent = tmp_path / "agent.zip"
    bundled = Path(__file__).parent.parent / "agents" / "bundled"
    agent.write_bytes((bundled / "ppo_paper.zip").read_bytes())
    (tmp_path / "agent.json").write_bytes((bundled / "ppo_paper.json").read_bytes())
    base = ["compare", "--policies", f"fitgpp,mine:{agent}", *SMALL_ARGS]
    assert main([*base, "--run-dir", str(tmp_path / "run")]) == 0
    other = "python" if engine == "native" else "native"
    monkeypatch.setenv("SCHEDGYM_ENGINE", other)
    capsys.readouterr()
    assert main([*base, "--resume", str(tmp_path / "run")]) == 2
    assert "engine is" in capsys.readouterr().err
    monkeypatch.setenv("SCHEDGYM_ENGINE", engine)
    with open(agent, "ab") as fh:
        fh.write(b"\0")  # another file at the same path
    assert main([*base, "--resume", str(tmp_path / "run")]) == 2
    assert "agent files" in capsys.readouterr().err


def test_resuming_after_a_registered_name_changed_its_files_or_arguments_is_refused(tmp_path, capsys, monkeypatch):
    """A bundled agent re-bundled between the interruption and --resume (its name unchanged) must not mix
    old and new runs: the identity covers each registered policy's entry point, arguments and files."""
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"one")
    entry = registry.PolicyEntry("mine", "baselines.fitgpp:FitGpp", {}, "test", False, (str(weights),))
    monkeypatch.setitem(registry._REGISTRY, "mine", entry)
    base = ["compare", "--policies", "fifo,mine", *SMALL_ARGS]
    assert main([*base, "--run-dir", str(tmp_path / "run")]) == 0
    weights.write_bytes(b"two")
    capsys.readouterr()
    assert main([*base, "--resume", str(tmp_path / "run")]) == 2
    assert "registered policies.mine.files.weights.bin is" in capsys.readouterr().err
    weights.write_bytes(b"one")
    monkeypatch.setitem(registry._REGISTRY, "mine", dataclasses.replace(entry, kwargs={"max_preemptions": 2}))
    assert main([*base, "--resume", str(tmp_path / "run")]) == 2
    assert "registered policies.mine.kwargs" in capsys.readouterr().err
    monkeypatch.setitem(registry._REGISTRY, "mine", entry)
    assert main([*base, "--resume", str(tmp_path / "run")]) == 0


def test_a_policy_registered_as_a_partial_or_an_instance_keeps_and_resumes_its_grid(tmp_path, monkeypatch):
    # The identity named a callable by its __qualname__, which a functools.partial lacks: a traceback.
    import functools

    class Factory:
        def __call__(self):  # noqa: ANN204
            return registry.make_policy("fitgpp")

    for name, factory in (("partial", functools.partial(registry.make_policy, "fifo")), ("instance", Factory())):
        monkeypatch.setitem(registry._REGISTRY, name, registry.PolicyEntry(name, factory))
        base = ["compare", "--policies", name, *SMALL_ARGS]
        assert main([*base, "--run-dir", str(tmp_path / name)]) == 0
        assert main([*base, "--resume", str(tmp_path / name)]) == 0  # the same identity in a second reading


def test_a_first_run_that_cannot_be_kept_leaves_no_run_folder(tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise SchedGymError("cannot write u0000000.npz: No space left on device")

    monkeypatch.setattr(np, "savez", full)
    assert main(["compare", "--policies", "fifo", *SMALL_ARGS, "--run-dir", str(tmp_path / "run")]) == 2
    assert "No space left on device" in capsys.readouterr().err and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("setup", "flag", "message"),
    [
        ("grid", "--run-dir", "the folder holds a grid: resume it with --resume"),
        ("other", "--run-dir", "the folder is not empty"),
        ("file", "--run-dir", "not a folder"),
        ("file", "--resume", "not a folder"),
        ("none", "--resume", "no such folder (start one with --run-dir)"),
        ("other", "--resume", "not a run folder (no grid.json)"),
        ("broken", "--resume", "not a finished run"),
        ("stranger", "--resume", "not a run of this grid"),
        ("copied", "--resume", "u0000002.npz: not a finished run (the run of index 0, not 2)"),
        ("fifo unit", "--resume", "it is a FIFO (named pipe), not a regular file); delete it"),
        ("fifo grid", "--resume", "grid.json: unreadable (cannot read grid.json: it is a FIFO"),
    ],
)
def test_bad_run_folders_are_one_line_errors(tmp_path, capsys, setup, flag, message):
    base = ["compare", "--policies", "fitgpp", *SMALL_ARGS]
    folder = tmp_path / "run"
    if setup in ("grid", "broken", "stranger", "fifo unit", "fifo grid", "copied"):
        assert main([*base, "--run-dir", str(folder)]) == 0
    if setup.startswith("fifo"):  # read, a FIFO without a writer would block for ever
        name = folder / ("grid.json" if setup == "fifo grid" else "units/u0000001.npz")
        name.unlink()
        os.mkfifo(name)
    if setup == "broken":
        (folder / "units" / "u0000001.npz").write_bytes(b"not a zip")
    if setup == "copied":  # another seed's run under this one's name: its figures would have been reported
        shutil.copy(folder / "units" / "u0000000.npz", folder / "units" / "u0000002.npz")
    if setup == "stranger":
        (folder / "units" / "u0000099.npz").write_bytes(b"")
    if setup == "other":
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
    if setup == "file":
        folder.write_text("a file")
    capsys.readouterr()
    assert main([*base, flag, str(folder), "--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("schedgym: error:") and message in err, err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("agent", ["missing", "fifo"])
def test_a_grid_that_fails_before_its_first_run_leaves_no_run_folder(tmp_path, capsys, agent):
    """A model that is not there (or a FIFO, which the grid's identity read for ever until 2026-12-05):
    one line, and no run folder holding nothing to resume; a folder that was there empty stays, empty."""
    path = tmp_path / "agent.zip"
    if agent == "fifo":
        os.mkfifo(path)
    base = ["compare", "--policies", f"fifo,mine:{path}", *SMALL_ARGS]
    assert main([*base, "--run-dir", str(tmp_path / "new" / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("No model at" if agent == "missing" else "it is a FIFO") in err, err
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert main([*base, "--run-dir", str(tmp_path / "empty")]) == 2
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize("flag", ["--run-dir", "--resume"])
@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_run_folder_name_is_refused(tmp_path, capsys, monkeypatch, flag, name):
    # Path("") is the current folder: an empty name must not make it the run folder.
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "--policies", "fitgpp", *SMALL_ARGS, flag, name]) == 2
    assert capsys.readouterr().err == f"schedgym: error: {flag} needs a folder name, got {name!r}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_file_a_killed_run_left_is_ignored(tmp_path):
    base = ["compare", "--policies", "fitgpp", *SMALL_ARGS]
    folder = tmp_path / "run"
    assert main([*base, "--run-dir", str(folder)]) == 0
    (folder / "units" / "u0000001.npz").rename(folder / "units" / ".u0000001.npz.0123456789ab.tmp")
    assert main([*base, "--resume", str(folder)]) == 0
    assert (folder / "units" / "u0000001.npz").exists()


def test_run_dir_does_not_apply_to_a_suite(capsys, tmp_path):
    assert main(["compare", "--suite", "shifts", "--run-dir", str(tmp_path / "r")]) == 2
    assert "--run-dir does not apply to --suite" in capsys.readouterr().err


def test_first_difference_names_the_path():
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == ("a[1].b", 2, 3)
    assert first_difference({"a": [1, 2]}, {"a": [1]}) == ("a", [1, 2], [1])
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ("b", None, 2)
    assert first_difference({"a": 1}, {"a": 1}) is None


def test_batches_are_consecutive_and_cover_every_task():
    tasks = make_tasks(["fifo", "k8s"], ["fifo", "k8s"], list(range(10)))
    chunks = batches(tasks, 3)
    assert [len(c) for c in chunks] == [3, 3, 3, 3, 3, 3, 2]
    assert [t for c in chunks for t in c] == tasks
    assert batch_size(20_000, 2) == 64 and batch_size(140, 2) == 8 and batch_size(5, 4) == 1


def test_a_worker_process_that_dies_is_replaced_and_the_results_are_the_serial_ones(tmp_path, monkeypatch):
    _register(monkeypatch, "dies", "faults:dies_once", marker=str(tmp_path / "died"))
    config = CompareConfig(policies=("fifo", "dies", "k8s"), **SMALL)
    serial = run_comparison(CompareConfig(policies=("fifo", "fitgpp", "k8s"), **SMALL), progress=False)
    parallel = run_comparison(config, executor=ExecutorConfig("process", workers=2, batch=2), progress=False)
    assert (tmp_path / "died").exists()  # a worker did die
    expected = per_seed(serial)
    expected["dies"] = expected.pop("fitgpp")
    assert per_seed(parallel) == {k: expected[k] for k in ("fifo", "dies", "k8s")}


def test_a_pool_found_broken_when_more_batches_are_sent_is_replaced(monkeypatch):
    """A worker that dies while the consumer handles outcomes (writing a run folder) breaks the pool before
    the next submit(): that submit's BrokenProcessPool is the same lost pool, retried (until 2026-12-05 it
    ended the command with a traceback)."""
    submits = []

    class BreaksOnce(ProcessPoolExecutor):
        def submit(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            submits.append(1)
            if len(submits) == 5:  # the first submit after the first four batches, when one has finished
                raise BrokenProcessPool("A child process terminated abruptly")
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(executors, "ProcessPoolExecutor", BreaksOnce)
    config = CompareConfig(policies=("fifo", "k8s"), **SMALL)
    parallel = run_comparison(config, executor=ExecutorConfig("process", workers=2, batch=1), progress=False)
    assert len(submits) > 6  # a second pool ran what was left
    assert per_seed(parallel) == per_seed(run_comparison(config, progress=False))


def test_without_retries_a_dead_worker_ends_the_grid_in_one_line(tmp_path, monkeypatch):
    _register(monkeypatch, "dies", "faults:dies_once", marker=str(tmp_path / "died"))
    config = CompareConfig(policies=("fifo", "dies"), **SMALL)
    with pytest.raises(SchedGymError, match=r"a worker process died 1 times .* \(--retries 0\)"):
        run_comparison(config, executor=ExecutorConfig("process", workers=2, retries=0), progress=False)


def test_a_run_that_fails_by_its_own_error_is_not_retried(tmp_path, monkeypatch):
    log = tmp_path / "attempts"
    _register(monkeypatch, "fails", "faults:fails", log=str(log))
    config = CompareConfig(policies=("fails",), seeds=1, n_jobs=200, cluster="small")
    with pytest.raises(RuntimeError, match="fails as asked"):
        run_comparison(config, executor=ExecutorConfig("process", workers=1, retries=5), progress=False)
    assert len(log.read_text().splitlines()) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(kind="process", retries=-1), "retries from 0 to 1000"),
        (dict(kind="process", batch=0), "batch from 1 to 100000"),
        (dict(kind="serial", batch=4), "--batch applies to --executor process or ray"),
    ],
)
def test_retry_and_batch_options_are_checked(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ExecutorConfig(**kwargs)


def test_the_process_executor_cleans_up_nothing_it_should_keep(tmp_path):
    """A kept grid run on the process executor: the folder holds every run and resumes with nothing to run."""
    base = ["compare", "--policies", "fitgpp,k8s", *SMALL_ARGS, "--executor", "process", "--workers", "2"]
    assert main([*base, "--run-dir", str(tmp_path / "run"), "--json", str(tmp_path / "a.json")]) == 0
    assert len(os.listdir(tmp_path / "run" / "units")) == 6
    assert main([*base, "--resume", str(tmp_path / "run"), "--json", str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()  # nothing ran again

"""``compare --executor ray`` (the ``ray`` extra): the serial results, in the serial order, each policy built
once per Ray worker process. Skipped where Ray is not installed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

from counting import builds, per_seed  # noqa: E402
from helpers import run_python_without_ray_settings, schedgym_command  # noqa: E402

from schedgym.cli import main  # noqa: E402
from schedgym.experiments.compare import CompareConfig, run_comparison  # noqa: E402

TESTS = Path(__file__).resolve().parent
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


def test_ray_gives_the_serial_results_and_builds_each_policy_once_per_worker(counted):
    config = CompareConfig(policies=("fifo", "fitgpp", "counted"), seeds=4, n_jobs=200, cluster="small")
    serial = run_comparison(config, progress=False)
    counted.write_text("")
    distributed = run_comparison(config, executor="ray", progress=False)
    assert per_seed(distributed) == per_seed(serial)
    assert list(distributed.runs) == ["fifo", "fitgpp", "counted"]
    per_process = builds(str(counted))
    assert os.getpid() not in per_process and set(per_process.values()) == {1}, per_process


def test_cli_ray_json_equals_serial_but_wall_times(tmp_path):
    argv = ["compare", "--policies", "fifo,k8s,ppo", *SMALL_ARGS]
    assert main([*argv, "--json", str(tmp_path / "serial.json")]) == 0
    assert main([*argv, "--executor", "ray", "--json", str(tmp_path / "ray.json")]) == 0
    files = []
    for name in ("serial.json", "ray.json"):
        data = json.loads((tmp_path / name).read_text())
        for entry in data["policies"].values():
            entry.pop("wall_time_s")
        files.append(json.dumps(data))
    assert files[0] == files[1]
    assert ray.is_initialized()  # the caller's Ray is left running


def test_a_missing_model_fails_in_one_line_under_ray(capsys, tmp_path):
    argv = ["compare", "--policies", f"fifo,mine:{tmp_path / 'none.zip'}", "--executor", "ray", *SMALL_ARGS]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("schedgym: error: No model at") and err.count("\n") == 1, err


@pytest.mark.slow
def test_cli_starts_and_stops_its_own_ray_leaving_the_home_folder_empty(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    done = run_python_without_ray_settings(
        ["-m", "schedgym.cli", "compare", "--policies", "fifo,fitgpp", "--executor", "ray", "--workers", "2",
         *SMALL_ARGS],
        home=home, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no Ray warnings (token authentication's included)
    assert "fitgpp" in done.stdout
    assert list(home.iterdir()) == []


@pytest.mark.slow
def test_a_cluster_refusing_the_driver_without_its_token_is_one_line_exit_2(tmp_path):
    address = ray.get_runtime_context().gcs_address  # this module's Ray, as another process reaches it
    done = run_python_without_ray_settings(
        ["-m", "schedgym.cli", "compare", "--executor", "ray", "--address", address, *SMALL_ARGS],
        home=tmp_path,
        cwd=tmp_path,
        timeout=300,
        RAY_AUTH_MODE="token",
    )
    assert done.returncode == 2
    assert done.stderr.startswith("schedgym: error: --address") and "RAY_AUTH_TOKEN" in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def _register(monkeypatch: pytest.MonkeyPatch, name: str, entry_point: str, **kwargs: str) -> None:
    from schedgym import registry

    monkeypatch.setitem(registry._REGISTRY, name, registry.PolicyEntry(name, entry_point, kwargs, "test", True))


def test_a_ray_worker_that_dies_is_retried_with_the_serial_results(tmp_path, monkeypatch):
    """The first worker to build ``dies`` ends its process (as a killed worker would): Ray runs its batch
    again elsewhere, and the results are the serial ones."""
    from schedgym.experiments.executors import ExecutorConfig

    _register(monkeypatch, "dies", "faults:dies_once", marker=str(tmp_path / "died"))
    serial = run_comparison(CompareConfig(policies=("fifo", "fitgpp"), seeds=4, n_jobs=200, cluster="small"))
    config = CompareConfig(policies=("fifo", "dies"), seeds=4, n_jobs=200, cluster="small")
    distributed = run_comparison(config, executor=ExecutorConfig("ray", batch=2), progress=False)
    assert (tmp_path / "died").exists()
    expected = per_seed(serial)
    expected["dies"] = expected.pop("fitgpp")
    assert per_seed(distributed) == expected


def test_without_retries_a_dead_ray_worker_ends_the_grid_in_one_line(tmp_path, monkeypatch):
    from schedgym.errors import SchedGymError
    from schedgym.experiments.executors import ExecutorConfig

    _register(monkeypatch, "dies", "faults:dies_once", marker=str(tmp_path / "died"))
    config = CompareConfig(policies=("fifo", "dies"), seeds=2, n_jobs=200, cluster="small")
    with pytest.raises(SchedGymError, match=r"Ray lost runs \d+\.\.\d+ 1 times \(.*\); --retries 0"):
        run_comparison(config, executor=ExecutorConfig("ray", retries=0), progress=False)


def test_a_run_failing_by_its_own_error_is_not_retried_on_ray(tmp_path, monkeypatch):
    from schedgym.experiments.executors import ExecutorConfig

    log = tmp_path / "attempts"
    _register(monkeypatch, "fails", "faults:fails", log=str(log))
    config = CompareConfig(policies=("fails",), seeds=1, n_jobs=200, cluster="small")
    with pytest.raises(Exception, match="fails as asked"):
        run_comparison(config, executor=ExecutorConfig("ray", retries=5), progress=False)
    assert len(log.read_text().splitlines()) == 1


def test_sigterm_to_the_command_stops_its_own_ray_and_cleans_up(tmp_path):
    """SIGTERM to the ``schedgym`` command (``kill PID``) while its local Ray runs: the one line, 143, and
    nothing of its outputs. Ray's init and shutdown each replaced the command's SIGTERM handler (the command
    then ended 1 or -15, leaving per-seed log folders); schedgym puts it back."""
    command = schedgym_command()  # SIGTERM is taken by the launcher, not by python -m schedgym.cli
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0")
    argv = [
        "compare", "--policies", "fifo,fitgpp,k8s", "--seeds", "400", "--jobs", "3000", "--no-progress",
        "--executor", "ray", "--workers", "2", "--json", str(out / "o.json"), "--log-dir", str(out / "logs"),
    ]  # fmt: skip
    proc = subprocess.Popen([str(command), *argv], stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not (out / "logs").exists():  # runs are finishing: Ray is up
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()  # and its Ray, which ends with it
        raise
    assert (proc.returncode, err) == (143, "schedgym: terminated\n")
    assert list(out.iterdir()) == []

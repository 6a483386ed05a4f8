"""``schedgym sweep --executor ray`` (the ``ray`` extra): the serial results, in the serial order, each policy
built once per Ray worker process whatever the setting. Skipped where Ray is not installed."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")

from counting import builds  # noqa: E402

from schedgym.cli import main  # noqa: E402
from schedgym.experiments.compare import CompareConfig  # noqa: E402
from schedgym.experiments.executors import _forget_ray_token  # noqa: E402
from schedgym.experiments.sweep import SweepConfig, run_sweep  # noqa: E402

TESTS = Path(__file__).resolve().parent
BASE = CompareConfig(policies=("fifo", "fitgpp"), seeds=3, n_jobs=200, cluster="small")
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


@pytest.fixture(scope="module", autouse=True)
def local_ray(tmp_path_factory):
    """One small local Ray for the module: 2 CPUs, no dashboard, a 100 MB object store, no usage statistics,
    its temporary files under pytest's tmp folder (not /tmp/ray), a token in the environment (else Ray 2.60
    writes ~/.ray/auth_token), tests/ on the workers' path (for ``counting``). run_sweep finds it initialised,
    uses it and leaves it running. Ray's driver keeps the first token it read in the process, and Ray sets
    RAY_AUTH_MODE in it: both are undone after, so that another module's Ray starts afresh."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        mp.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
        mode = os.environ.get("RAY_AUTH_MODE")
        _forget_ray_token()  # an earlier module's token
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=100 * 1024 * 1024,
            logging_level="ERROR",
            _temp_dir=str(tmp_path_factory.mktemp("ray")),
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}},
        )
        try:
            yield
        finally:
            ray.shutdown()
            if mode is None:
                os.environ.pop("RAY_AUTH_MODE", None)
            else:
                os.environ["RAY_AUTH_MODE"] = mode
            _forget_ray_token()


def without_wall_time(summary: dict) -> dict:
    for setting in summary["settings"]:
        for entry in setting["policies"].values():
            entry.pop("wall_time_s")
    return summary


def test_ray_gives_the_serial_results_and_builds_each_policy_once_per_worker(counted):
    config = SweepConfig(
        replace(BASE, policies=("fifo", "counted")), (("max_preemptions", (0, 1)), ("load", (0.9, 1.1)))
    )
    serial = without_wall_time(run_sweep(config, progress=False).summary())
    counted.write_text("")
    distributed = without_wall_time(run_sweep(config, executor="ray", progress=False).summary())
    assert json.dumps(distributed) == json.dumps(serial)  # the same keys in the same order, the same figures
    per_process = builds(str(counted))  # 12 runs of "counted" over 4 settings
    assert os.getpid() not in per_process and set(per_process.values()) == {1}, per_process


def test_cli_ray_json_equals_serial_but_wall_times(tmp_path):
    argv = ["sweep", "--set", "restart_overhead=0,60", "--set", "te_fraction=0.2,0.4", *SMALL_ARGS]
    assert main([*argv, "--json", str(tmp_path / "serial.json")]) == 0
    assert main([*argv, "--executor", "ray", "--json", str(tmp_path / "ray.json")]) == 0
    serial, distributed = (json.loads((tmp_path / f).read_text()) for f in ("serial.json", "ray.json"))
    assert without_wall_time(distributed) == without_wall_time(serial)
    assert ray.is_initialized()  # the caller's Ray is left running


TWO_SWEEPS = """
import json
from schedgym.experiments.compare import CompareConfig
from schedgym.experiments.sweep import SweepConfig, run_sweep

def figures(result):
    summary = result.summary()
    for setting in summary["settings"]:
        for entry in setting["policies"].values():
            entry.pop("wall_time_s")
    return json.dumps(summary)

config = SweepConfig(CompareConfig(policies=("fifo", "fitgpp"), seeds=2, n_jobs=200, cluster="small"),
                     (("max_preemptions", (0, 1)),))
serial = figures(run_sweep(config, progress=False))
for _ in range(2):  # each starts and stops a local Ray of its own
    assert figures(run_sweep(config, executor="ray", progress=False)) == serial
print("ok")
"""


@pytest.mark.slow
def test_two_sweeps_in_one_process_each_start_their_own_ray_leaving_the_home_folder_empty(tmp_path, tmp_path_factory):
    """Ray 2.60's driver keeps the first token it reads: a second local Ray with a new token refused it until
    the executor kept one token per process and made the driver read it again."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # Ray's session files in a short folder of pytest's: its socket paths must stay under 108 bytes.
    env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=str(tmp_path_factory.mktemp("r")))
    done = subprocess.run(
        [sys.executable, "-c", TWO_SWEEPS], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert list(home.iterdir()) == []

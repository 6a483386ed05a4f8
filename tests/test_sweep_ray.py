"""``schedgym sweep --executor ray`` (the ``ray`` extra): the serial results, in the serial order, each policy
built once per Ray worker process whatever the setting. Skipped where Ray is not installed."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]
ray = pytest.importorskip("ray")

from counting import builds  # noqa: E402
from helpers import run_python_without_ray_settings  # noqa: E402

from schedgym.cli import main  # noqa: E402
from schedgym.experiments.compare import CompareConfig  # noqa: E402
from schedgym.experiments.sweep import SweepConfig, run_sweep  # noqa: E402

TESTS = Path(__file__).resolve().parent
BASE = CompareConfig(policies=("fifo", "fitgpp"), seeds=3, n_jobs=200, cluster="small")
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


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
import builtins
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
printer = builtins.print
for _ in range(2):  # each starts and stops a local Ray of its own
    assert figures(run_sweep(config, executor="ray", progress=False)) == serial
    assert builtins.print is printer  # Ray's shutdown replaces it; the executor puts it back
print("ok")
"""


@pytest.mark.slow
def test_two_sweeps_in_one_process_each_start_their_own_ray_leaving_the_home_folder_empty(tmp_path, tmp_path_factory):
    """Ray 2.60's driver keeps the first token it reads: a second local Ray with a new token refused it until
    the executor kept one token per process and made the driver read it again. Its shutdown leaves a print
    of its own in builtins, which cloudpickle then refuses to pickle: the executor puts print back."""
    home = tmp_path / "home"
    home.mkdir()
    # Ray's session files in a short folder of pytest's: its socket paths must stay under 108 bytes.
    done = run_python_without_ray_settings(
        ["-c", TWO_SWEEPS], home=home, cwd=tmp_path, timeout=600, RAY_TMPDIR=str(tmp_path_factory.mktemp("r"))
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert list(home.iterdir()) == []

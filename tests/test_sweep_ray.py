"""``schedgym sweep --executor ray`` (the ``ray`` extra): the serial results, in the serial order, each policy
built once per Ray worker process whatever the setting. Skipped where Ray is not installed."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")

from counting import builds  # noqa: E402

from schedgym.cli import main  # noqa: E402
from schedgym.experiments.compare import CompareConfig  # noqa: E402
from schedgym.experiments.sweep import SweepConfig, run_sweep  # noqa: E402

TESTS = Path(__file__).resolve().parent
BASE = CompareConfig(policies=("fifo", "fitgpp"), seeds=3, n_jobs=200, cluster="small")
SMALL_ARGS = ["--seeds", "3", "--jobs", "200", "--cluster", "small", "--no-progress"]


@pytest.fixture(scope="module", autouse=True)
def local_ray(tmp_path_factory):
    """One small local Ray for the module: 2 CPUs, no dashboard, a 100 MB object store, no usage statistics,
    its temporary files under pytest's tmp folder (not /tmp/ray), a token in the environment (else Ray 2.60
    writes ~/.ray/auth_token), tests/ on the workers' path (for ``counting``). run_sweep finds it initialised,
    uses it and leaves it running."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        mp.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
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

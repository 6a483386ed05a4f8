"""compare and sweep on a two-node Ray cluster (issue 25): a head and a second node, each started with ``ray
start`` on ports of its own, one CPU and a 100 MB object store each, an empty home folder, token
authentication; the commands reach it by ``--address`` from another process, as a user's would. A worker
process killed, or the second node killed, in the middle of a sweep: the grid completes with the serial
results. A Ctrl-C (SIGINT) in the middle of a kept sweep on the cluster, then ``--resume``: the outputs of an
uninterrupted run."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")  # a dependency of Ray's

pytestmark = [pytest.mark.ray]

GRID = ["sweep", "--set", "load=0.8,0.9,1.0,1.1", "--policies", "fifo,fitgpp,k8s", "--seeds", "20", "--no-progress"]
START_TIMEOUT = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    """the environment of a process that uses the cluster (its token, usage statistics off, a home of its own)"""
    nodes: list[subprocess.Popen]
    tmp: Path

    def start_node(self, head: bool = False) -> subprocess.Popen:
        """``ray start --block`` in a session of its own: killing its process group ends the node whole."""
        home = Path(tempfile.mkdtemp(dir=self.tmp, prefix="home"))
        common = ["--num-cpus", "1", "--object-store-memory", str(100 * 1024 * 1024), "--block"]
        common += ["--dashboard-agent-listen-port", str(_free_port()), "--metrics-export-port", str(_free_port())]
        if head:
            port = int(self.address.rpartition(":")[2])
            argv = ["--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", str(self.tmp / "r")]
            argv += ["--ray-client-server-port", str(_free_port())]
        else:
            argv = ["--address", self.address]
        node = subprocess.Popen(
            [shutil.which("ray") or "ray", "start", *argv, *common],
            env={**self.env, "HOME": str(home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.nodes.append(node)
        return node

    def wait_for_nodes(self, n: int) -> None:
        code = (
            "import ray, sys\n"
            f"ray.init(address={self.address!r}, logging_level='ERROR')\n"
            "print(len([n for n in ray.nodes() if n['Alive']]))\n"
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            argv = [sys.executable, "-c", code]
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
            if done.returncode == 0 and done.stdout.strip() == str(n):
                return
            time.sleep(1)
        pytest.fail(f"the test cluster did not reach {n} nodes")

    def kill(self, node: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)
        node.wait(timeout=30)
        self.nodes.remove(node)


@pytest.fixture(scope="module")
def cluster(engine: str) -> Iterator[Cluster]:
    if engine != "native":
        pytest.skip("the cluster's grids run on the native engine; the engines' agreement is tested elsewhere")
    # A short folder: Ray's socket paths under it must stay within the 107 bytes of a Unix socket's name.
    tmp = Path(tempfile.mkdtemp(prefix="sgray", dir="/tmp"))
    token = secrets.token_hex(32)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "HOME": str(tmp / "driver-home"),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }
    (tmp / "driver-home").mkdir()
    c = Cluster(f"127.0.0.1:{_free_port()}", env, [], tmp)
    try:
        c.start_node(head=True)
        c.start_node()
        c.wait_for_nodes(2)
        yield c
    finally:
        for node in reversed(c.nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        for node in c.nodes:
            try:
                node.wait(timeout=5)  # a test cluster: nothing to save, no reason to wait long
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.pid, signal.SIGKILL)
        assert not list((tmp / "driver-home").iterdir()), "the commands left files in the home folder"
        shutil.rmtree(tmp, ignore_errors=True)


def _cli(cluster: Cluster, *argv: str, **kwargs) -> subprocess.Popen:  # noqa: ANN003
    return subprocess.Popen(
        [sys.executable, "-m", "schedgym.cli", *argv], env=cluster.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, **kwargs,
    )  # fmt: skip


def _without_wall_times(path: Path) -> dict:
    data = json.loads(path.read_text())
    for setting in data.get("settings", [data]):
        for entry in setting["policies"].values():
            entry.pop("wall_time_s")
    return data


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The grid's JSON, run serially in this process's environment."""
    from schedgym.cli import main

    out = tmp_path_factory.mktemp("serial") / "serial.json"
    assert main([*GRID, "--json", str(out), "--csv", str(out.with_suffix(".csv"))]) == 0
    return out


def _units(folder: Path) -> int:
    return len(list((folder / "units").glob("u*.json")))


def _wait_for_units(folder: Path, n: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while _units(folder) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_compare_and_sweep_by_address_give_the_serial_results(cluster, serial, tmp_path):
    out = tmp_path / "ray.json"
    proc = _cli(cluster, *GRID, "--executor", "ray", "--address", cluster.address, "--json", str(out))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert _without_wall_times(out) == _without_wall_times(serial)
    policies = ["compare", "--policies", "fitgpp,k8s", "--seeds", "4", "--no-progress", "--executor", "ray"]
    proc = _cli(cluster, *policies, "--address", cluster.address, "--json", str(tmp_path / "c.json"))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    from schedgym.cli import main

    assert main([*policies[:-2], "--json", str(tmp_path / "s.json")]) == 0
    assert _without_wall_times(tmp_path / "c.json") == _without_wall_times(tmp_path / "s.json")


def _worker_running_a_batch() -> psutil.Process | None:
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if cmdline and cmdline[0].startswith("ray::run_batch"):
            return p
    return None


def test_a_killed_worker_process_is_replaced_and_the_grid_completes(cluster, serial, tmp_path):
    folder, out = tmp_path / "run", tmp_path / "ray.json"
    argv = [*GRID, "--executor", "ray", "--address", cluster.address, "--batch", "4"]
    proc = _cli(cluster, *argv, "--run-dir", str(folder), "--json", str(out))
    _wait_for_units(folder, 20, proc)
    victim = None
    while victim is None and proc.poll() is None:
        victim = _worker_running_a_batch()
    assert victim is not None, "no worker was running a batch"
    victim.kill()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert _without_wall_times(out) == _without_wall_times(serial)


def test_a_lost_node_s_runs_are_run_again_on_the_other(cluster, serial, tmp_path):
    folder, out = tmp_path / "run", tmp_path / "ray.json"
    second = cluster.nodes[-1]
    argv = [*GRID, "--executor", "ray", "--address", cluster.address, "--batch", "4"]
    proc = _cli(cluster, *argv, "--run-dir", str(folder), "--json", str(out))
    _wait_for_units(folder, 20, proc)
    cluster.kill(second)  # the node's raylet, its object store and its workers, at once
    assert _units(folder) < 240, "the grid ended before the node was lost"
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert _without_wall_times(out) == _without_wall_times(serial)
    cluster.start_node()  # for the tests after this one
    cluster.wait_for_nodes(2)


def test_sigint_then_resume_on_the_cluster_gives_the_uninterrupted_outputs(cluster, serial, tmp_path):
    folder, out = tmp_path / "run", tmp_path / "ray"
    argv = [*GRID, "--executor", "ray", "--address", cluster.address, "--batch", "4"]
    outputs = ["--json", f"{out}.json", "--csv", f"{out}.csv"]
    proc = _cli(cluster, *argv, "--run-dir", str(folder), *outputs)
    _wait_for_units(folder, 20, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "schedgym: interrupted", err
    assert 20 <= _units(folder) < 240 and not Path(f"{out}.json").exists()
    proc = _cli(cluster, *argv, "--resume", str(folder), *outputs)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert Path(f"{out}.csv").read_bytes() == serial.with_suffix(".csv").read_bytes()
    assert _without_wall_times(Path(f"{out}.json")) == _without_wall_times(serial)

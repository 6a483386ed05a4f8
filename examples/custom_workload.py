"""A workload of your own: a trace written as CSV, read back, and both rules run on it; then the same
jobs as an episode of the Gymnasium environment.

A trace is a CSV with the columns ``job_id, submit_time, duration, gpus, class`` (``TE`` or ``BE``) and,
optionally, ``cpus``, ``mem_gb``, ``nodes``, ``grace_period`` and ``restart_overhead``
(docs/guide/workloads.md). ``schedgym compare --trace FILE`` runs the same comparison from the command line.

    python examples/custom_workload.py [--out trace.csv]
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

import schedgym  # noqa: F401  (registers the environments)
from schedgym.experiments import run_policy
from schedgym.registry import make_policy
from schedgym.sim import cluster_preset
from schedgym.workloads import load_trace


def write_trace(path: Path, n_jobs: int, seed: int) -> None:
    """A burst of long 8-GPU BE jobs, then short 1-GPU TE jobs arriving every minute: TE jobs must preempt."""
    rng = np.random.default_rng(seed)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["job_id", "submit_time", "duration", "gpus", "class", "grace_period"])
        for i in range(n_jobs):
            if i < n_jobs // 2:
                out.writerow([i, i, float(rng.uniform(3600, 7200)), 8, "BE", 30])
            else:
                out.writerow([i, 60 * i, float(rng.uniform(60, 600)), 1, "TE", 30])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the trace (default: a temporary file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.out or Path(tmp) / "trace.csv"
        write_trace(path, n_jobs=64, seed=0)
        cluster = cluster_preset("small")
        workload = load_trace(path)
        for name in ("fifo", "fitgpp"):
            result = run_policy(make_policy(name), cluster, workload, rng=np.random.default_rng(0))
            te = result.summary()["te"]
            print(f"{name:>6}: TE slowdown p95 {te['slowdown_p95']:.2f}, preemptions {result.summary()['preemptions']}")
        env = gym.make("schedgym/Preemption-v1", cluster="small")
        obs, info = env.reset(options={"workload": workload})
        steps, done = 0, False
        while not done:  # preempt the first candidate every time
            action = 1 if info["action_mask"][1] else 0
            obs, reward, terminated, truncated, info = env.step(action)
            steps, done = steps + 1, terminated or truncated
        print(f"environment: {steps} decisions on the same jobs")


if __name__ == "__main__":
    main()

"""Simulator throughput: simulated jobs per second, and how time per job scales with queue length.

Usage:
    python benchmarks/bench_simulator.py                 # the README figures (50,000-job paper workload)
    python benchmarks/bench_simulator.py --jobs 20000 --repeats 1 --policies fifo,fitgpp

Each measurement builds a fresh Simulator and runs it to the end (construction and result assembly
included; workload generation excluded). The best of ``--repeats`` runs is reported, as timeit does, since
noise on a shared machine only ever adds time. The scaling table raises the offered load so that the queue
grows; if a pass rescanned the whole queue, microseconds per job would grow with the mean queue length.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time

import numpy as np

from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.simulator import SimConfig
from schedgym.workloads import generate, preset


def measure(policy_name: str, workload, cluster, repeats: int, engine: str) -> tuple[float, object]:  # noqa: ANN001
    best = float("inf")
    result = None
    config = SimConfig(engine=engine)
    for _ in range(repeats):
        policy = make_policy(policy_name)
        gc.collect()  # not the previous run's garbage: a run of the Python engine leaves 100,000s of objects
        t0 = time.perf_counter()
        result = run_policy(policy, cluster, workload, config, rng=np.random.default_rng(0))
        best = min(best, time.perf_counter() - t0)
    return best, result


def mean_queued(result) -> float:  # noqa: ANN001
    """Mean number of jobs waiting (queued or in grace), by Little's law: total wait / makespan."""
    return float(result.wait.sum() / result.makespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--policies", default="fifo,priority,k8s,fitgpp,random")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this core (Linux)")
    parser.add_argument("--no-scaling", action="store_true", help="skip the queue-length scaling table")
    parser.add_argument(
        "--engines", default="python,native", help="engines to measure side by side, in one run (default: both)"
    )
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    cluster = cluster_preset("paper")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, pinned={args.cpu}")

    t0 = time.perf_counter()
    workload = generate(preset("paper", n_jobs=args.jobs), cluster, np.random.default_rng(args.seed))
    print(f"generated {args.jobs} paper jobs in {time.perf_counter() - t0:.2f} s\n")
    engines = args.engines.split(",")
    print(
        f"| policy | engine | jobs | seconds (best of {args.repeats}) | jobs/s | us/job | vs python | mean queued "
        "| preemptions |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.policies.split(","):
        python_seconds = None
        for engine in engines:
            seconds, result = measure(name, workload, cluster, args.repeats, engine)
            if engine == "python":
                python_seconds = seconds
            ratio = f"{python_seconds / seconds:.1f}x" if python_seconds else "-"
            print(
                f"| {name} | {engine} | {args.jobs} | {seconds:.2f} | {args.jobs / seconds:,.0f} "
                f"| {1e6 * seconds / args.jobs:.1f} | {ratio} | {mean_queued(result):.1f} | {result.n_preemptions} |"
            )

    if args.no_scaling:
        return
    print("\nScaling: 20,000 paper jobs at rising load (queue grows), fifo and fitgpp")
    print("| load | policy | engine | us/job | mean queued |")
    print("|---:|---|---|---:|---:|")
    for load in (0.9, 1.0, 1.1, 1.3):
        wl = generate(preset("paper", n_jobs=20_000, load=load), cluster, np.random.default_rng(args.seed))
        for name in ("fifo", "fitgpp"):
            for engine in engines:
                seconds, result = measure(name, wl, cluster, max(1, args.repeats - 1), engine)
                print(f"| {load} | {name} | {engine} | {1e6 * seconds / len(wl):.1f} | {mean_queued(result):.0f} |")


if __name__ == "__main__":
    main()

"""How the simulator scales: time per job from 10,000 to 1,000,000 jobs, and from 16 to 1,024 nodes.

Usage:
    python benchmarks/bench_scaling.py --cpu 1                 # README figures (native engine)
    python benchmarks/bench_scaling.py --engine python --max-jobs 100000

Each row is one run of ``run_policy`` on a ``paper`` workload (generation excluded, ``Simulator``
construction and result assembly included) in a fresh process, so that its peak memory (``ru_maxrss`` of
that process, the interpreter and the workload's ``JobSpec`` objects included) is its own. The node
scaling keeps the offered load at 1.0: the workload's arrival rate grows with the cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def one_run(engine: str, policy: str, n_jobs: int, n_nodes: int, seed: int) -> dict:
    import resource

    import numpy as np

    from schedgym.experiments.runner import run_policy
    from schedgym.registry import make_policy
    from schedgym.sim.cluster import ClusterSpec
    from schedgym.sim.simulator import SimConfig
    from schedgym.workloads import generate, preset

    cluster = ClusterSpec.homogeneous(n_nodes, 8, 64, 512, name=f"{n_nodes}x8")
    workload = generate(preset("paper", n_jobs=n_jobs), cluster, np.random.default_rng(seed))
    t0 = time.perf_counter()
    result = run_policy(make_policy(policy), cluster, workload, SimConfig(engine=engine), rng=np.random.default_rng(0))
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"seconds": seconds, "peak_mb": peak_mb, "preemptions": result.n_preemptions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", default="native", choices=("native", "python"))
    parser.add_argument("--policies", default="fifo,fitgpp")
    parser.add_argument("--max-jobs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu", type=int, default=None, help="pin the runs to this core (Linux)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one run, JSON on stdout
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    if args.one:
        engine, policy, n_jobs, n_nodes = args.one.split(",")
        print(json.dumps(one_run(engine, policy, int(n_jobs), int(n_nodes), args.seed)))
        return

    def run(policy: str, n_jobs: int, n_nodes: int) -> dict:
        cmd = [
            sys.executable,
            __file__,
            "--one",
            f"{args.engine},{policy},{n_jobs},{n_nodes}",
            "--seed",
            str(args.seed),
        ]
        if args.cpu is not None:
            cmd += ["--cpu", str(args.cpu)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    print(f"engine {args.engine}; paper workload, load 1.0")
    print("\n| jobs | nodes | policy | seconds | jobs/s | us/job | peak memory (MB) | preemptions |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    sizes = [n for n in (10_000, 100_000, 1_000_000) if n <= args.max_jobs]
    for n_jobs in sizes:
        for policy in args.policies.split(","):
            r = run(policy, n_jobs, 16)
            print(
                f"| {n_jobs:,} | 16 | {policy} | {r['seconds']:.2f} | {n_jobs / r['seconds']:,.0f} "
                f"| {1e6 * r['seconds'] / n_jobs:.2f} | {r['peak_mb']:.0f} | {r['preemptions']:,} |",
                flush=True,
            )
    for n_nodes in (16, 64, 256, 1024):
        n_jobs = min(100_000, args.max_jobs)
        for policy in args.policies.split(","):
            r = run(policy, n_jobs, n_nodes)
            print(
                f"| {n_jobs:,} | {n_nodes:,} | {policy} | {r['seconds']:.2f} | {n_jobs / r['seconds']:,.0f} "
                f"| {1e6 * r['seconds'] / n_jobs:.2f} | {r['peak_mb']:.0f} | {r['preemptions']:,} |",
                flush=True,
            )


if __name__ == "__main__":
    main()

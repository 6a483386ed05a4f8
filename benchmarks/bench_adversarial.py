"""Cost on an adversarial workload: K identical TE jobs at t = 0 on the ``small`` cluster (issue 10, item 5).

Every job asks for a whole 8-GPU node for 600 s, so four run at a time and the other K - 4 queue, all of one
shape, with no BE job to preempt. Before the simulator offered a declined shape again only when something
that could help had changed, every completion re-offered every queued TE job: K = 500 made 31,000 requests
and fitgpp took 55.9 s at K = 1,000. The cost should now grow like fifo's, linearly in K, for every rule.

Usage:
    python benchmarks/bench_adversarial.py --cpu 1                       # both engines, K up to 10,000
    python benchmarks/bench_adversarial.py --engine python --ks 250,1000

Each row is one ``run_policy`` (``Simulator`` construction and result assembly included): wall time,
``RunResult.n_requests`` (preemption requests made to the policy) and both per job. ``tests/test_bounded_cost.py``
holds the request count to a linear bound.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim.cluster import cluster_preset
from schedgym.sim.job import JobClass, JobSpec
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.trace import Workload

POLICIES = ("fifo", "priority", "fitgpp", "k8s", "random", "ppo")


def identical_te_jobs(k: int) -> Workload:
    """``k`` TE jobs of 8 GPUs and 600 s, all submitted at 0."""
    return Workload(tuple(JobSpec(f"t{i}", 0.0, 600.0, 8.0, 0.0, 0.0, 1, JobClass.TE) for i in range(k)), name=f"te{k}")


def one_run(policy: str, k: int, engine: str) -> dict:
    workload = identical_te_jobs(k)
    cluster = cluster_preset("small")
    built = make_policy(policy)
    t0 = time.perf_counter()
    result = run_policy(built, cluster, workload, SimConfig(engine=engine), rng=np.random.default_rng(0))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "requests": result.n_requests, "preemptions": result.n_preemptions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", default="both", choices=("both", "native", "python"))
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--ks", default="250,500,1000,2500,5000,10000", help="comma-separated K values")
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this core (Linux)")
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    engines = ("native", "python") if args.engine == "both" else (args.engine,)
    ks = [int(k) for k in args.ks.split(",")]
    print("| policy | engine | K | seconds | us/job | requests | requests/K | preemptions |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for policy in args.policies.split(","):
        for engine in engines:
            for k in ks:
                row = one_run(policy, k, engine)
                print(
                    f"| {policy} | {engine} | {k:,} | {row['seconds']:.3f} | {1e6 * row['seconds'] / k:.1f} | "
                    f"{row['requests']:,} | {row['requests'] / k:.3f} | {row['preemptions']} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

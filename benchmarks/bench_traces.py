"""Simulating whole real traces: jobs per second under fifo and fitgpp.

Usage:
    python benchmarks/bench_traces.py [--cpu 1] [--repeats 2]

Runs every job of the bundled converted Philly trace (2017-09-25..2017-11-05) in one simulation on the
`philly` cluster (64 x 8 GPUs), and, when ../shared/traces/philly/philly.csv is present, the whole
Philly trace (all 82,247 jobs) converted with the default rules. Also the bundled Alibaba 2023 trace on its
own 1,213-node cluster when it is bundled.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim.cluster import resolve_cluster
from schedgym.workloads.named import TRACE_WORKLOADS

SHARED_PHILLY = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly" / "philly.csv"


def measure(name: str, workload, cluster, policies: list[str], repeats: int) -> None:  # noqa: ANN001
    for policy in policies:
        best = float("inf")
        result = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = run_policy(make_policy(policy), cluster, workload, rng=np.random.default_rng(0))
            best = min(best, time.perf_counter() - t0)
        assert result is not None
        print(
            f"| {name} | {cluster.name} ({cluster.n_nodes} nodes) | {policy} | {len(workload.jobs):,} | {best:.2f} "
            f"| {len(workload.jobs) / best:,.0f} | {result.n_preemptions:,} | {result.n_requests:,} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--policies", default="fifo,fitgpp")
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    policies = args.policies.split(",")
    print(f"| trace | cluster | policy | jobs | seconds (best of {args.repeats}) | jobs/s | preemptions | requests |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    philly = TRACE_WORKLOADS["philly"]
    measure(
        "philly (bundled window, every job)", philly.load(), resolve_cluster(philly.cluster), policies, args.repeats
    )
    if SHARED_PHILLY.is_file():
        from schedgym.workloads.convert.philly import convert_philly

        workload, _ = convert_philly(str(SHARED_PHILLY))
        measure("philly (whole trace, 82,247 rows)", workload, resolve_cluster("philly"), policies, args.repeats)
    if "alibaba2023" in TRACE_WORKLOADS:
        ali = TRACE_WORKLOADS["alibaba2023"]
        measure("alibaba2023 (bundled, every job)", ali.load(), resolve_cluster(ali.cluster), policies, args.repeats)


if __name__ == "__main__":
    main()

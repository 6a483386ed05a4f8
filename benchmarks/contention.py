"""How contended a bundled trace is on a cluster: per evaluation window, the peak demand (had every job run
from its submission, without waiting) against the cluster's capacity, and what queueing fifo then gives.

    python benchmarks/contention.py --workload alibaba2023 --cluster alibaba2023-contended

prints one row per test window (the windows ``schedgym compare --workload NAME`` runs). The figures of
docs/workloads.md come from this script.
"""

from __future__ import annotations

import argparse

import numpy as np

from schedgym.experiments.evaluation import evaluate_policy
from schedgym.registry import make_policy
from schedgym.sim.cluster import resolve_cluster
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.named import DAY, TRACE_WORKLOADS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="alibaba2023", choices=sorted(TRACE_WORKLOADS))
    parser.add_argument("--cluster", default=None, help="cluster name or CSV (default: the workload's own)")
    parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
    parser.add_argument("--policy", default="fifo")
    args = parser.parse_args()

    trace = TRACE_WORKLOADS[args.workload]
    cluster = resolve_cluster(args.cluster or trace.cluster)
    capacity = cluster.total
    print(
        f"{args.workload} on {cluster.name}: {cluster.n_nodes} nodes, capacity {capacity[0]:g} GPUs, "
        f"{capacity[1]:g} CPUs, {capacity[2]:g} GB; whole trace peak {_fmt(trace.load().peak_demand())}"
    )
    print(
        f"{'window':>6} {'jobs':>5}  {'peak demand in window (GPUs, CPUs, GB)':>38}  {'mean GPUs':>9}  "
        f"{'over capacity':>15}  {args.policy + ': waited':>14} {'mean wait s':>11} {'TE p95':>7} {'BE p95':>7}"
    )
    policy = make_policy(args.policy)
    for i in range(len(trace.windows(args.split))):
        workload = trace.window(args.split, i)
        measured = np.array(workload.measured)
        start = float(workload.table.columns["submit"][measured].min())
        peak = workload.peak_demand(start)
        mean_gpus = _mean_gpus(workload, start, start + trace.window_days * DAY)
        over = ", ".join(name for name, p, c in zip(("GPUs", "CPUs", "mem"), peak, capacity, strict=True) if p > c)
        (run,) = evaluate_policy(policy, cluster, [workload], [i], SimConfig(queue=policy.queue))
        result = run.result
        waited = float((result.wait > 1.0).mean())
        summary = result.summary()
        print(
            f"{i:>6} {int(measured.sum()):>5}  {_fmt(peak):>38}  {mean_gpus:>9.1f}  {over or '-':>15}  {waited:>14.1%} "
            f"{float(result.wait.mean()):>11.0f} {summary['te']['slowdown_p95']:>7.2f} "
            f"{summary['be']['slowdown_p95']:>7.2f}"
        )


def _mean_gpus(workload, start: float, end: float) -> float:  # noqa: ANN001
    """The GPUs the jobs would hold on average over [start, end), had each run from its submission."""
    col = workload.table.columns
    lo = np.maximum(col["submit"], start)
    hi = np.minimum(col["submit"] + col["duration"], end)
    return float((np.maximum(hi - lo, 0.0) * col["gpus"]).sum() / (end - start))


def _fmt(amounts: np.ndarray) -> str:
    return f"{amounts[0]:.1f}, {amounts[1]:.0f}, {amounts[2]:.0f}"


if __name__ == "__main__":
    main()

"""Which BE jobs make BE p99, under each policy: gangs or not, preempted or not, and where their time went.

    python examples/be_tail.py --workers 2          # 20 validation workloads of `paper`, about 20 s
    python examples/be_tail.py --policies fitgpp,k8s,lean-ppo-nowait --split test --seeds 20

The tail of a run is its BE jobs whose slowdown is at or above the run's BE p99 (the 1% slowest). For each
policy, one markdown row of means over the seeds (± the 95% interval): BE p50 and BE p99; the share of the
tail that are gang jobs (several nodes; a last line gives their share of all BE jobs) and that were
preempted at least once; the tail's mean hours from submission to first start (the queue), from first start
to completion beyond its own run time (which counts restart overheads: what is left is grace periods and
waits after a preemption) and its duration; and the run's preemptions. The runs are compare's (`schedgym
compare --split validation` gives the same BE p50 and p99), on the validation workloads by default: a
diagnosis for the design of agents, kept off the test seeds.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from schedgym.errors import SchedGymError
from schedgym.experiments.compare import CompareConfig, load_workloads, run_comparison
from schedgym.experiments.executors import ExecutorConfig
from schedgym.experiments.figures import headline_figures
from schedgym.experiments.report import format_interval
from schedgym.experiments.stats import ci95, mean
from schedgym.sim.job import JobClass
from schedgym.sim.metrics import RunResult

COLUMNS = ("BE p50", "BE p99", "tail: gangs", "tail: preempted", "tail: queue h", "tail: after start h",
           "tail: duration h", "preemptions")  # fmt: skip
HOUR = 3600.0


def tail_figures(result: RunResult, gang: np.ndarray) -> dict[str, float]:
    """The columns of one run (:data:`COLUMNS`); ``gang``: which jobs of its workload run on several nodes."""
    figures = headline_figures(result)  # compare's BE p50 and p99, to the last digit
    p50, p99 = figures["be_p50"], figures["be_p99"]
    tail = (result.job_class == JobClass.BE) & (result.slowdown >= p99)
    queue = result.first_start - result.submit
    after = result.completion - result.first_start - result.run_time
    values = (p50, p99, gang[tail].mean(), (result.preemptions[tail] > 0).mean(), queue[tail].mean() / HOUR,
              after[tail].mean() / HOUR, result.duration[tail].mean() / HOUR, result.n_preemptions)  # fmt: skip
    return dict(zip(COLUMNS, (float(v) for v in values), strict=True))


def table(per_policy: dict[str, list[dict[str, float]]]) -> str:
    """The markdown table: one row per policy, each column's mean ± 95% interval over the runs."""
    lines = ["| policy | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for label, runs in per_policy.items():
        cells = []
        for column in COLUMNS:
            values = [r[column] for r in runs]
            digits = 0 if column == "preemptions" else 1 if column.endswith(" h") or column == "BE p99" else 3
            cells.append(format_interval(mean(values), ci95(values), digits))
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fitgpp,k8s,lean-ppo,lean-ppo-nowait", help="comma-separated")
    parser.add_argument("--workload", default="paper", help="a named workload")
    parser.add_argument("--split", default="validation", help="validation (default) or test")
    parser.add_argument("--seeds", type=int, default=20, help="workloads, at least 2")
    parser.add_argument("--jobs", type=int, default=None, help="jobs per workload (default: the workload's own)")
    parser.add_argument("--workers", type=int, default=1, help="processes (1: serial)")
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error("--seeds must be at least 2 (an interval needs two runs)")
    try:
        config = CompareConfig(workload=args.workload, policies=tuple(args.policies.split(",")), seeds=args.seeds,
                               n_jobs=args.jobs, split=args.split)  # fmt: skip
        executor = ExecutorConfig(kind="process", workers=args.workers) if args.workers > 1 else ExecutorConfig()
        result = run_comparison(config, executor=executor, progress=False)
    except SchedGymError as exc:
        print(f"be_tail.py: error: {exc}", file=sys.stderr)
        return 2
    # Each seed's gang jobs, by id: a trace window's run keeps only the jobs measured after its warm-up. Every
    # policy ran the same jobs of a seed, in the same order: one mask per seed serves them all.
    columns = [w.table.columns for w in load_workloads(config, result.cluster)]
    first = next(iter(result.runs.values()))
    gangs = [np.isin(np.asarray(run.job_ids, dtype=object), np.asarray(c["job_id"], dtype=object)[c["gang"] > 1])
             for run, c in zip(first, columns, strict=True)]  # fmt: skip
    per_policy = {label: [tail_figures(run, gangs[i]) for i, run in enumerate(runs)]
                  for label, runs in result.runs.items()}  # fmt: skip
    print(table(per_policy))
    be_gangs = [gang[run.job_class == JobClass.BE].mean() for gang, run in zip(gangs, first, strict=True)]
    print(f"\nGang jobs are {100 * mean(be_gangs):.1f}% of the BE jobs of these workloads.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

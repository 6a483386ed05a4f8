"""Judge one policy on the shift suite by issue 23's target 3: on every workload of the suite it is never
dominated by fitgpp or k8s, its TE p95 is within 5% of the lower of the two rules' TE p95, and its objective
(mean slowdown per job) is no worse than the better rule's beyond the paired 95% interval.

    python examples/shift_targets.py --policy lean-ppo            # the suite's 20 test seeds, about 10 min
    python examples/shift_targets.py --policy mine:runs/x/agent.npz --seeds 5 --jobs 2000 --workers 2

Prints one markdown row per workload and a last line saying on how many workloads all three hold. The figures
come from the same runs as `schedgym compare --suite shifts --policies fitgpp,k8s,POLICY` (docs/suite.md).
"""

from __future__ import annotations

import argparse

from schedgym.experiments.executors import ExecutorConfig
from schedgym.experiments.suite import run_suite

RULES = ("fitgpp", "k8s")
TE_P95_TOLERANCE = 0.05  # target 3: within 5% of the better rule's TE p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True, help="a registered policy or NAME:PATH")
    parser.add_argument("--seeds", type=int, default=20, help="seeds per workload (a trace: at most its windows)")
    parser.add_argument("--jobs", type=int, default=None, help="cap on each synthetic workload's jobs")
    parser.add_argument("--workers", type=int, default=1, help="processes (1: serial)")
    args = parser.parse_args()

    executor = ExecutorConfig() if args.workers <= 1 else ExecutorConfig(kind="process", workers=args.workers)
    result = run_suite("shifts", (*RULES, args.policy), seeds=args.seeds, max_jobs=args.jobs, executor=executor)
    name = args.policy.split(":")[0]
    rows = {(r.entry, r.policy): r for r in result.rows()}

    print("| workload | vs fitgpp | vs k8s | TE p95 | better rule's TE p95 | objective vs better rule | target 3 |")
    print("|---|---|---|---:|---:|---:|---|")
    held = 0
    for entry, comparison in zip(result.entries, result.comparisons, strict=True):
        policies = comparison["policies"]
        agent = rows[(entry.name, name)]
        te_p95 = {p: policies[p]["te"]["slowdown_p95"] for p in (*RULES, name)}
        best_te = min(te_p95[r] for r in RULES)
        better = min(RULES, key=lambda r: rows[(entry.name, r)].objective)  # the rule of the lower objective
        diff, half = agent.diff[better]
        checks = (
            all(agent.verdict[r] != "dominated" for r in RULES),
            te_p95[name] <= (1 + TE_P95_TOLERANCE) * best_te,
            diff - half <= 0,  # not significantly worse (a single seed has no interval: nan, so it fails)
        )
        held += all(checks)
        failed = [what for what, ok in zip(("dominated", "TE p95", "objective"), checks, strict=True) if not ok]
        print(f"| {entry.name} | {agent.verdict['fitgpp']} | {agent.verdict['k8s']} | {te_p95[name]:.3f} | "
              f"{best_te:.3f} | {diff:+.3f} ± {half:.3f} ({better}) | "
              f"{'holds' if all(checks) else 'fails: ' + ', '.join(failed)} |")  # fmt: skip
    print(f"\ntarget 3 holds on {held} of {len(result.entries)} workloads for {name}")


if __name__ == "__main__":
    main()

"""Judge one policy on the shift suite by issue 23's target 3: on every workload of the suite it is never
dominated by fitgpp or k8s, its TE p95 is within 5% of the lower of the two rules' TE p95, and its objective
(mean slowdown per job) is no worse than the better rule's beyond the paired 95% interval.

    python examples/shift_targets.py --policy lean-ppo --workers 2      # 20 test seeds, about 40 s
    python examples/shift_targets.py --policy mine:runs/x/agent.npz --seeds 5 --jobs 2000
    python examples/shift_targets.py --policy mine:runs/x/agent.npz --split validation   # to choose an agent
    python examples/shift_targets.py --policy dagger-mix --first-seed 20   # fresh seeds, synthetic workloads only

Prints one markdown row per workload and a last line saying on how many workloads all three hold. The figures
come from the same runs as `schedgym compare --suite shifts --policies fitgpp,k8s,POLICY` (docs/suite.md).
The TE p95 criterion compares means, as the target states it, not a paired interval: on the two traces,
with 7 and 5 windows, a pass or a failure there is within the noise.
"""

from __future__ import annotations

import argparse
import sys

from schedgym.errors import SchedGymError
from schedgym.experiments.compare import VERDICT_REFERENCES as RULES  # fitgpp and k8s, the verdicts' rules
from schedgym.experiments.executors import ExecutorConfig
from schedgym.experiments.report import format_interval
from schedgym.experiments.suite import run_suite
from schedgym.registry import check_spec

TE_P95_TOLERANCE = 0.05  # target 3: within 5% of the better rule's TE p95


def failures(
    verdict: dict[str, str], rules_te_p95: dict[str, float], te_p95: float, objective_diff: tuple[float, float]
) -> list[str]:
    """The criteria of target 3 one workload fails (none: it holds). ``verdict``: the policy's verdict against
    each rule; ``rules_te_p95``: each rule's mean TE p95, ``te_p95`` the policy's; ``objective_diff``: the
    paired difference of the objective to the better rule's (mean, 95% half-width)."""
    failed = []
    if any(verdict[r] == "dominated" for r in RULES):
        failed.append("dominated")
    if te_p95 > (1 + TE_P95_TOLERANCE) * min(rules_te_p95[r] for r in RULES):
        failed.append("TE p95")
    mean, half = objective_diff
    if not (mean - half <= 0):  # significantly worse (or no interval at all: NaN)
        failed.append("objective")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--policy", required=True, help="a registered policy or NAME:PATH (not fitgpp or k8s)")
    parser.add_argument("--seeds", type=int, default=20, help="seeds per workload, at least 2 (a trace: its windows)")
    parser.add_argument("--jobs", type=int, default=None, help="cap on each synthetic workload's jobs")
    parser.add_argument("--workers", type=int, default=1, help="processes (1: serial)")
    parser.add_argument("--split", choices=("test", "validation"), default="test",
                        help="test seeds (to report) or validation seeds (to choose an agent)")  # fmt: skip
    parser.add_argument("--first-seed", type=int, default=0,
                        help="first seed (not 0: fresh seeds of the 8 synthetic workloads, no traces)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error("--seeds must be at least 2: the verdicts and the interval need paired seeds")
    if args.first_seed < 0:
        parser.error("--first-seed must be at least 0")
    try:
        name = check_spec(args.policy)
        if name in RULES:
            raise SchedGymError(f"--policy {args.policy!r} is one of the rules it is judged against")
        workers = ExecutorConfig(kind="process", workers=args.workers) if args.workers > 1 else ExecutorConfig()
        result = run_suite("shifts", (*RULES, args.policy), seeds=args.seeds, max_jobs=args.jobs, split=args.split,
                           executor=workers, first_seed=args.first_seed)  # fmt: skip
    except SchedGymError as exc:
        print(f"schedgym: error: {exc}", file=sys.stderr)
        return 2
    rows = {(r.entry, r.policy): r for r in result.rows()}

    print("| workload | vs fitgpp | vs k8s | TE p95 | lower rule TE p95 | objective vs the rule of lower objective "
          "| target 3 |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---|")
    held = 0
    for entry, comparison in zip(result.entries, result.comparisons, strict=True):
        agent = rows[(entry.name, name)]
        te_p95 = {p: comparison["policies"][p]["te"]["slowdown_p95"] for p in (*RULES, name)}
        te_rule = min(RULES, key=lambda r: te_p95[r])
        better = min(RULES, key=lambda r: rows[(entry.name, r)].objective)
        diff, half = agent.diff[better]
        failed = failures(agent.verdict, te_p95, te_p95[name], (diff, half))
        held += not failed
        print(f"| {entry.name} | {agent.verdict['fitgpp']} | {agent.verdict['k8s']} | {te_p95[name]:.3f} | "
              f"{te_p95[te_rule]:.3f} ({te_rule}) | {format_interval(diff, half, signed=True)} ({better}) | "
              f"{'fails: ' + ', '.join(failed) if failed else 'holds'} |")  # fmt: skip
    seeds = "" if args.split == "test" else " (validation seeds)"
    print(f"\ntarget 3 holds on {held} of {len(result.entries)} workloads for {name}{seeds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Compare rules and a bundled agent on the same workloads, from Python: what ``schedgym compare`` runs.

python examples/compare_rules.py [--seeds N] [--jobs N]
"""

from __future__ import annotations

import argparse

from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.report import markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="workloads (test seeds 0, 1, ...)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per workload")
    args = parser.parse_args()
    config = CompareConfig(policies=("fifo", "k8s", "fitgpp", "dagger"), seeds=args.seeds, n_jobs=args.jobs)
    result = run_comparison(config)
    # Means ± 95% CIs over the seeds; the verdicts judge each policy's paired differences to fitgpp and k8s.
    print(markdown_table(result))


if __name__ == "__main__":
    main()

"""A teacher for imitation that switches rule with the cluster's size, registered as the policy `switch`.

fitgpp decides on clusters of at most --small-nodes nodes, lookahead-nowait-pc10 on larger ones. The rest of
the command line runs as `schedgym ...` would, so that `schedgym train --imitate switch` can imitate it on
`mix`:

    python examples/switch_teacher.py train --imitate switch --imitate-decisions 8000 --imitate-rounds 2 \\
        --imitate-epochs 15 --total-timesteps 0 --n-envs 8 --policy rows --n-eval-workloads 20 \\
        --env-kwargs '{"max_candidates": 64, "workload": "mix"}' --net-arch 64,64 --learning-rate 3e-4 --seed 0
    python examples/switch_teacher.py --small-nodes 4 compare --policies fitgpp,switch --cluster small --seeds 2

Why: imitation of lookahead-nowait-pc10 on `mix` fails issue 23's target 3 on `paper 4 nodes` with every
training seed, where fitgpp's many preemptions win and the clairvoyant teacher's choices are not learnable
(docs/log.md, sixth session). The switch asks the student for fitgpp's choices where the cluster is small.
The lookahead reads the workload's future, so `switch` is a teacher, not a policy to deploy.
"""

from __future__ import annotations

import argparse
import sys

from agents.fallback import SmallClusterFallback
from schedgym.registry import make_policy, register_policy


def switch_teacher(small_nodes: int = 8) -> SmallClusterFallback:
    """fitgpp where the cluster has at most ``small_nodes`` nodes, lookahead-nowait-pc10 elsewhere (the
    recorder schedules with its teacher's queue discipline: SmallClusterFallback refuses two that differ)."""
    return SmallClusterFallback(make_policy("lookahead-nowait-pc10"), make_policy("fitgpp"), small_nodes, name="switch")


def main() -> int:
    # The options before the schedgym command are this script's; the rest is schedgym's command line.
    parser = argparse.ArgumentParser(
        usage="%(prog)s [--small-nodes N] SCHEDGYM-COMMAND ...",
        description=__doc__.splitlines()[0],
        add_help=False,
        allow_abbrev=False,
    )
    parser.add_argument("--small-nodes", type=int, default=8, help="largest cluster (in nodes) on which fitgpp decides")
    args, rest = parser.parse_known_args()
    if args.small_nodes < 1:
        parser.error("--small-nodes must be at least 1")
    if not rest or rest[0] in ("-h", "--help"):
        parser.print_help()
        print("\nschedgym's command line follows (the policy `switch` is registered for it):\n")
        rest = ["--help"]
    register_policy(
        "switch",
        switch_teacher,
        kwargs={"small_nodes": args.small_nodes},
        description=f"fitgpp on clusters of at most {args.small_nodes} nodes, lookahead-nowait-pc10 on larger ones",
    )
    from schedgym.cli import main as schedgym_main

    return schedgym_main(rest)


if __name__ == "__main__":
    sys.exit(main())

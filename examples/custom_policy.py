"""A preemption rule of your own, registered by name and compared with the built-in ones.

The simulator offers each TE job it cannot place to the policy as a ``PreemptionRequest`` (the job, each
node's available resources and its preemptible candidates) and expects a ``PreemptionPlan`` back, or
``DECLINE``. Registered under a name, the policy runs wherever a name does: ``compare``, ``sweep``, the
environment's ``HeuristicAgent``.

    python examples/custom_policy.py [--seeds N] [--jobs N]
"""

from __future__ import annotations

import argparse

import numpy as np

from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.report import markdown_table
from schedgym.registry import register_policy
from schedgym.sim import DECLINE, Policy, PreemptionPlan


class LargestVictim(Policy):
    """Preempt the job with the most GPUs on the first node where that alone makes room (gangs wait)."""

    preempts = True

    def _decide(self, request):
        if request.gang_size > 1:
            return DECLINE
        need = np.asarray(request.job.demand)
        for node, candidates in request.candidates.items():
            victim = max(candidates, key=lambda j: j.demand[0])
            if (request.avail[node] + victim.member >= need - 1e-9).all():
                return PreemptionPlan(nodes=(node,), victims=(victim.idx,))
        return DECLINE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2000)
    args = parser.parse_args()
    # A "module:Class" path, so that worker processes (--executor process, Ray) can build it too.
    register_policy("largest-victim", f"{__name__}:LargestVictim")
    config = CompareConfig(policies=("fifo", "fitgpp", "largest-victim"), seeds=args.seeds, n_jobs=args.jobs)
    print(markdown_table(run_comparison(config)))


if __name__ == "__main__":
    main()

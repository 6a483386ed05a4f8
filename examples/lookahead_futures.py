"""What the lookahead's gain is made of: the same planner knowing the future, and knowing only the past.

python examples/lookahead_futures.py [--seeds 20] [--jobs 5000] [--samples 4] [--arrivals-hours all 168]
                                     [--estimate-noise 0.3] [--window-hours 24 72] [--perturbations]
                                     [--split validation] [--workers 2]

Runs fitgpp, k8s, ``lookahead-nowait-pc10`` (playouts on clones, which hold the future: the arrivals to come
and every job's true duration) and the same lookahead with ``future="sampled"`` (playouts on shadows that know
only the jobs submitted so far, duration estimates, and arrivals drawn from the past: what a scheduler could
compute; :mod:`baselines.sampled_future`), one sampled variant per ``--arrivals-hours`` (``all``: drawn until
the workload's job count, as far as a clone sees; durations drawn with ``--estimate-noise``, 0 for the true
ones), with ``future="window"`` (true durations and only the next ``--window-hours`` of the real arrivals;
none if the flag is given no value), and with the whole real future but every unfinished or future job's
duration off by a factor ``exp(N(0, sigma))`` per shadow, one variant per sigma of ``--perturbations`` (none
by default), on the ``paper``
workloads of ``--split`` (validation seeds 100,000 + i by default: issue 23 makes its choices there). Prints
the comparison table and, per policy, the objective (mean slowdown per job) paired with fitgpp's and k8s's
(mean ± 95% interval over the seeds). The figures and what they show are in docs/lookahead.md.
"""

from __future__ import annotations

import argparse

from schedgym.experiments import stats
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.executors import ExecutorConfig
from schedgym.experiments.figures import objective
from schedgym.experiments.report import format_interval, markdown_table
from schedgym.registry import register_policy

CLAIRVOYANT = "lookahead-nowait-pc10"
"""the registered lookahead whose gain issue 23 asks a learned agent to capture"""


def hours(text: str) -> float | None:
    """An arrivals horizon in hours, or ``all`` (None: no horizon)."""
    if text == "all":
        return None
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected hours >= 0 or 'all', got {text!r}")
    return value


def register_variants(
    future: str, samples: int, horizons: list[float | None], label: str | None = None, **kwargs: float
) -> list[str]:
    """Register ``lookahead-nowait-pc10`` with ``future`` (and ``kwargs``), one per arrivals horizon, as
    ``LABEL-HOURSh`` or ``LABEL-all`` (``LABEL``: ``future``), in this process; the process executor's workers
    are forked from it, so they have them too."""
    names = []
    for horizon in horizons:
        prefix = label or future
        name = f"{prefix}-all" if horizon is None else f"{prefix}-{horizon:g}h"
        register_policy(
            name,
            "baselines.lookahead:Lookahead",
            kwargs={
                "horizon": None,
                "preemption_cost": 10.0,
                "wait": False,
                "future": future,
                "samples": samples,
                "arrivals_horizon": None if horizon is None else horizon * 3600.0,
                **kwargs,
            },
            description=f"{CLAIRVOYANT} on shadows ({future}, samples={samples}"
            + "".join(f", {k}={v:g}" for k, v in kwargs.items())
            + f"), arrivals: {'all' if horizon is None else f'{horizon:g} h'}",
        )
        names.append(name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="workloads")
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per workload")
    parser.add_argument("--samples", type=int, default=4, help="shadows per request")
    parser.add_argument("--arrivals-hours", type=hours, nargs="*", default=[None, 168.0], help="sampled variants")
    parser.add_argument("--estimate-noise", type=float, default=0.3, help="sampled variants' duration noise")
    parser.add_argument("--window-hours", type=hours, nargs="*", default=[24.0, 72.0], help="window variants")
    parser.add_argument("--perturbations", type=float, nargs="*", default=[], help="perturbed variants' sigmas")
    parser.add_argument("--split", default="validation", choices=("validation", "test"))
    parser.add_argument("--workers", type=int, default=2, help="processes (1: serial)")
    args = parser.parse_args()
    noise = args.estimate_noise
    label = "sampled" if noise == parser.get_default("estimate_noise") else f"sampled-noise{noise:g}"
    variants = register_variants("sampled", args.samples, args.arrivals_hours, label, estimate_noise=noise)
    variants += register_variants("window", 1, args.window_hours)
    for sigma in args.perturbations:
        variants += register_variants("window", args.samples, [None], f"perturbed{sigma:g}", perturbation=sigma)
    config = CompareConfig(
        policies=("fitgpp", "k8s", CLAIRVOYANT, *variants), seeds=args.seeds, n_jobs=args.jobs, split=args.split
    )
    executor = ExecutorConfig("serial") if args.workers == 1 else ExecutorConfig("process", workers=args.workers)
    result = run_comparison(config, executor=executor)
    print(markdown_table(result))
    print()
    summary = result.summary()["policies"]
    per_seed = {name: [objective(s) for s in entry["per_seed"]] for name, entry in summary.items()}
    print("| policy | objective | vs fitgpp | vs k8s | wall s |")
    print("|---|---:|---:|---:|---:|")
    for name, values in per_seed.items():
        cells = [format_interval(stats.mean(values), stats.ci95(values))]
        for ref in ("fitgpp", "k8s"):
            d = stats.paired(values, per_seed[ref])
            cells.append("" if ref == name else format_interval(d["mean"], d["ci95"], signed=True))
        cells.append(f"{summary[name]['wall_time_s']:.0f}")
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

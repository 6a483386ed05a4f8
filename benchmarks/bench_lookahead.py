"""What a clone of a simulation costs, what the ``lookahead`` policy costs per decision, and what it buys.

Usage:
    python benchmarks/bench_lookahead.py                        # 2,000-job paper workloads, 3 seeds, native
    python benchmarks/bench_lookahead.py --jobs 1000 --seeds 2 --engines native,python --horizons 21600

Three tables, printed only:

1. Clone cost: the simulation is advanced (under fitgpp) to its middle preemption request, then cloned over and
   over (the best of ``--repeats`` batches, as timeit does: noise on a shared machine only adds time). For
   scale: a pickle round trip (the native engine pickles by replaying every decision) and, on the Python
   engine, ``copy.deepcopy``.
2. Lookahead cost: wall time of whole runs (workload generation excluded), requests answered, playouts
   simulated, and time per request, next to fitgpp's run on the same workload.
3. Outcome per seed and the mean over seeds: TE slowdown p95, BE slowdown p50/p95/p99 and preemptions of
   fitgpp, k8s and lookahead (one row per horizon), every run seeded as ``schedgym compare`` seeds it.
"""

from __future__ import annotations

import argparse
import copy
import gc
import pickle
import platform
import time

import numpy as np

from baselines.lookahead import Lookahead
from schedgym.experiments.evaluation import evaluate_policy
from schedgym.experiments.figures import HEADLINE
from schedgym.registry import make_policy
from schedgym.sim import SimConfig, Simulator
from schedgym.sim.cluster import cluster_preset
from schedgym.workloads import generate, preset


def workload(n_jobs: int, seed: int, cluster):  # noqa: ANN001, ANN201
    """The seed's synthetic workload, drawn as ``schedgym compare`` draws it."""
    return generate(preset("paper", n_jobs=n_jobs), cluster, np.random.default_rng(np.random.SeedSequence([seed, 0])))


def best_of(fn, number: int, repeats: int) -> float:  # noqa: ANN001
    """Seconds per call of ``fn``: the best of ``repeats`` batches of ``number`` calls."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def clone_costs(cluster, wl, engine: str, repeats: int) -> dict[str, float]:  # noqa: ANN001
    fitgpp = make_policy("fitgpp")
    total = Simulator(cluster, wl.table, SimConfig(engine=engine)).run(fitgpp).n_requests
    sim = Simulator(cluster, wl.table, SimConfig(engine=engine))
    for _ in range(total // 2):
        sim.resolve(fitgpp.decide(sim.advance()))
    assert sim.advance() is not None  # a request pending, as when lookahead clones
    out = {"requests": total, "now_h": sim.now / 3600}
    out["clone_us"] = best_of(sim.clone, 200, repeats) * 1e6
    out["pickle_us"] = best_of(lambda: pickle.loads(pickle.dumps(sim)), 5, repeats) * 1e6
    if engine == "python":
        out["deepcopy_us"] = best_of(lambda: copy.deepcopy(sim), 5, repeats) * 1e6
    return out


def timed_run(policy, cluster, wl, seed: int, engine: str):  # noqa: ANN001, ANN201
    gc.collect()
    t0 = time.perf_counter()
    (run,) = evaluate_policy(policy, cluster, [wl], [seed], SimConfig(engine=engine))
    result = run.result
    return result, time.perf_counter() - t0


def stats(result) -> tuple[float, float, float, float]:  # noqa: ANN001
    te_p95, be_p50, be_p95, be_p99 = (f.of(result) for f in HEADLINE)
    return te_p95, be_p50, be_p95, be_p99


def horizon_label(h: float | None) -> str:
    return "lookahead(end)" if h is None else f"lookahead({h / 3600:g} h)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per paper workload (paper cluster)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--engines", default="native", help="engines for the clone and cost tables (python is slow)")
    parser.add_argument(
        "--horizons", default="21600,end", help="lookahead horizons in seconds, 'end' for the end of the workload"
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    engines = args.engines.split(",")
    horizons = [None if h == "end" else float(h) for h in args.horizons.split(",")]
    cluster = cluster_preset("paper")
    print(f"# {platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
    print(f"# paper cluster, paper workloads of {args.jobs} jobs, seeds 0..{args.seeds - 1}\n")

    print("## Clone cost (middle request of seed 0 under fitgpp)")
    print(f"{'engine':8} {'requests':>8} {'at (h)':>7} {'clone (us)':>11} {'pickle rt (us)':>15} {'deepcopy (us)':>14}")
    wl0 = workload(args.jobs, 0, cluster)
    for engine in engines:
        c = clone_costs(cluster, wl0, engine, args.repeats)
        deep = f"{c['deepcopy_us']:14,.0f}" if "deepcopy_us" in c else f"{'-':>14}"
        print(f"{engine:8} {c['requests']:8d} {c['now_h']:7.1f} {c['clone_us']:11,.1f} {c['pickle_us']:15,.0f} {deep}")

    print("\n## Lookahead cost (whole runs; per request = (run - fitgpp's run) / requests)")
    print(
        f"{'engine':8} {'seed':>4} {'policy':18} {'run (s)':>8} {'requests':>8} {'playouts':>8} "
        f"{'ms/request':>10} {'us/playout':>10}"
    )
    outcome: dict[str, list[tuple[float, ...]]] = {}
    for engine in engines:
        for seed in range(args.seeds):
            wl = workload(args.jobs, seed, cluster)
            base, t_base = timed_run(make_policy("fitgpp"), cluster, wl, seed, engine)
            print(f"{engine:8} {seed:4d} {'fitgpp':18} {t_base:8.3f} {base.n_requests:8d}")
            runs = {"fitgpp": base}
            if engine == engines[0]:
                runs["k8s"], _ = timed_run(make_policy("k8s"), cluster, wl, seed, engine)
            for h in horizons:
                policy = Lookahead(horizon=h)
                result, t = timed_run(policy, cluster, wl, seed, engine)
                per_req = (t - t_base) / max(result.n_requests, 1) * 1e3
                per_playout = (t - t_base) / max(policy.n_playouts, 1) * 1e6
                print(
                    f"{engine:8} {seed:4d} {horizon_label(h):18} {t:8.3f} {result.n_requests:8d} "
                    f"{policy.n_playouts:8d} {per_req:10.2f} {per_playout:10.0f}"
                )
                runs[horizon_label(h)] = result
            if engine == engines[0]:
                for label, result in runs.items():
                    outcome.setdefault(label, []).append((*stats(result), result.n_preemptions))

    print(f"\n## Outcome ({engines[0]} engine; slowdown percentiles; mean over {args.seeds} seeds)")
    print(f"{'policy':18} {'TE p95':>8} {'BE p50':>8} {'BE p95':>8} {'BE p99':>8} {'preemptions':>11}")
    for label, rows in outcome.items():
        m = np.mean(np.array(rows), axis=0)
        print(f"{label:18} {m[0]:8.3f} {m[1]:8.3f} {m[2]:8.3f} {m[3]:8.3f} {m[4]:11.1f}")
    print("\nper seed:")
    for label, rows in outcome.items():
        cells = "  ".join(f"[{r[0]:.3f} {r[1]:.3f} {r[2]:.3f} {r[3]:.3f} {int(r[4])}]" for r in rows)
        print(f"{label:18} {cells}")


if __name__ == "__main__":
    main()

"""The environment's cost per decision on fixed work, for comparing two versions on a shared machine.

``bench_env.py`` counts decisions in a fixed time, which swings by +-30% when other jobs share the cores.
This script does the same work every run (seed 0, the same random legal actions, the same number of steps)
and reports microseconds per decision, the best of ``--reps`` repetitions: process CPU time for the single
environment, wall time for the vector environment (its worker threads), and a checksum of the rewards, which
must be equal between two versions that claim the same results. Compare versions by running it from each
checkout in turn, several times alternately (old, new, old, new, ...), and comparing the medians:

    python benchmarks/bench_env_fixed.py --tag new --reps 3
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import schedgym  # noqa: F401  (registers the environments)


def single(env_id: str, n_steps: int) -> tuple[float, float]:
    """CPU seconds for ``n_steps`` decisions of one environment, and the sum of their rewards."""
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    total = 0.0
    t0 = time.process_time()
    for _ in range(n_steps):
        legal = np.flatnonzero(info["action_mask"])
        _, reward, terminated, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
        total += float(reward)
        if terminated or truncated:
            _, info = env.reset()
    return time.process_time() - t0, total


def vector(env_id: str, num_envs: int, n_threads: int, n_calls: int) -> tuple[float, float, int]:
    """Wall seconds for ``n_calls`` vector steps, the sum of their rewards, and the decisions made (a
    sub-environment being reset at a step makes none)."""
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", n_threads=n_threads)
    raw = venv.unwrapped
    raw.reset(seed=0)
    rng = np.random.default_rng(0)
    decisions, total = 0, 0.0
    t0 = time.perf_counter()
    for _ in range(n_calls):
        masks = raw.action_masks()  # type: ignore[attr-defined]
        k = rng.integers(masks.sum(axis=1))  # the k-th legal action of each sub-environment
        actions = (np.cumsum(masks, axis=1) > k[:, None]).argmax(axis=1)
        decisions += num_envs - int(raw._autoreset.sum())  # type: ignore[attr-defined]
        _, rewards, _, _, _ = raw.step(actions)
        total += float(rewards.sum())
    elapsed = time.perf_counter() - t0
    venv.close()
    return elapsed, total, decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tag", default="", help="a label printed at the start of every line (old, new...)")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    for env_id, n in (("schedgym/Preemption-v1", 15_000), ("schedgym/PreemptionLarge-v1", 10_000)):
        seconds, total = min((single(env_id, n) for _ in range(args.reps)), key=lambda r: r[0])
        print(f"{args.tag}\tsingle {env_id}\t{1e6 * seconds / n:.2f} us/decision\treward sum {total:.6f}", flush=True)
    for num_envs, calls in ((16, 1_500), (1, 8_000)):
        seconds, total, decisions = min(
            (vector("schedgym/Preemption-v1", num_envs, 1, calls) for _ in range(args.reps)), key=lambda r: r[0]
        )
        print(
            f"{args.tag}\tvector {num_envs} x schedgym/Preemption-v1, 1 thread\t"
            f"{1e6 * seconds / decisions:.2f} us/decision\treward sum {total:.6f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

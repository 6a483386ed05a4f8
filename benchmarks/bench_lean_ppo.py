"""Training throughput of ``agents.lean_ppo`` against MaskablePPO on the plan mode, in one run.

Usage:
    python benchmarks/bench_lean_ppo.py                    # docs/lean_ppo.md's figures
    python benchmarks/bench_lean_ppo.py --updates 4 --sb3-steps 16384

Trains ``agents.lean_ppo`` with its defaults (5,000-job ``paper`` workloads, 16 workloads x 4 rollouts an
update, 8 sub-environments, one torch thread) for ``--updates`` updates with 1 and with 2 worker processes,
and MaskablePPO (``schedgym train``'s defaults: ``TrainConfig``'s network, n_steps, batch size, one torch thread,
rewards normalised) on ``schedgym/PreemptionPlan-v1`` with 16 sub-environments of the batched vector environment
for ``--sb3-steps`` steps. A training step is one decision of an episode learned from; lean PPO's steps/s
are its steps over the time spent playing and updating (validation excluded, as MaskablePPO's figure has
none); the steps idle sub-environments take at the end of an update are not counted. Every figure comes from
the same run, so their ratios hold on a shared machine even where the absolute rates move.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def lean(updates: int, workers: int, seed: int) -> tuple[float, float, float]:
    """(steps/s, share of the time playing episodes, idle steps per training step) of ``updates`` updates."""
    from agents.lean_ppo import LeanPPOConfig, train

    # one validation workload at the start and the end only: validation is not training
    config = LeanPPOConfig(updates=updates, workers=workers, seed=seed, validation_seeds=1, validate_every=updates)
    report = train(config, log=lambda line: None)
    s = report["seconds"]
    return (
        report["steps"] / (s["rollout"] + s["update"]),
        s["rollout"] / (s["rollout"] + s["update"]),
        (report["idle_steps"] / report["steps"]),
    )


def sb3(steps: int, seed: int) -> float:
    """MaskablePPO's steps/s on the plan mode (16 sub-environments, schedgym train's defaults)."""
    import gymnasium as gym
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecNormalize

    import schedgym  # noqa: F401  (registers the environments)
    from agents.train import TrainConfig, model_kwargs
    from agents.vec_env import SB3VecEnv

    defaults = TrainConfig.of()
    torch.set_num_threads(defaults.common.torch_threads)
    venv = SB3VecEnv(gym.make_vec("schedgym/PreemptionPlan-v1", num_envs=16, vectorization_mode="vector_entry_point",
                                  n_jobs=5000))  # fmt: skip
    venv.seed(seed)
    venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=defaults.model.gamma)
    model = MaskablePPO("MlpPolicy", venv, **model_kwargs(defaults.replace(seed=seed)))
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - t0
    venv.close()
    return model.num_timesteps / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=10, help="lean PPO updates per configuration")
    parser.add_argument("--sb3-steps", type=int, default=32768, help="MaskablePPO training steps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    print()
    print("| trainer | processes | steps/s | time playing episodes | idle steps per step | vs MaskablePPO |")
    print("|---|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    reference = sb3(args.sb3_steps, args.seed)
    rows = [("MaskablePPO (16 sub-envs)", 1, reference, None, None)]
    for workers in (1, 2):
        rate, share, idle = lean(args.updates, workers, args.seed)
        rows.append(("agents.lean_ppo", workers, rate, share, idle))
    for name, procs, rate, share, idle in rows:
        share_text = "" if share is None else f"{share:.0%}"
        idle_text = "" if idle is None else f"{idle:.3f}"
        print(f"| {name} | {procs} | {rate:,.0f} | {share_text} | {idle_text} | {rate / reference:.2f} |")
    print(f"\n{time.perf_counter() - t0:.0f} s wall")


if __name__ == "__main__":
    main()

"""RLlib's PPO against stable-baselines3's MaskablePPO on the same environment and settings: sampler steps/s,
learner steps/s and overall steps/s, as a Markdown table.

Usage:
    python benchmarks/bench_rllib.py                 # README figures (needs the rllib and rl extras)
    python benchmarks/bench_rllib.py --quick         # a check that it runs (2 updates per configuration)
    python benchmarks/bench_rllib.py --steps 8192 --configs sb3:vector:2,rllib:0:2,rllib:2:1

Both train ``schedgym/Preemption-v1`` with ``schedgym train``'s defaults (``TrainConfig``: 64x64 tanh MLP,
learning rate 3e-4, minibatches of 128, 10 epochs, entropy 0.01, GAE lambda 0.95, one torch thread per
process) and one update every 1,024 sampled steps (``n_steps`` per environment x environments, as
``schedgym train`` sizes it: :func:`agents.rllib_config.rollout_size`). stable-baselines3 normalises
rewards (VecNormalize), RLlib scales them by ``reward_scale``: neither changes the work per step.

- sampler steps/s: environment steps collected over the time spent collecting them, policy forward passes
  included (SB3: ``collect_rollouts``; RLlib: PPO's ``synchronous_parallel_sample``, which waits for the env
  runners);
- learner steps/s: steps of the update batches over the time spent updating (SB3: ``train``; RLlib:
  ``LearnerGroup.update``), each update being 10 epochs over its batch;
- overall: steps over the whole training time (RLlib's includes the weight sync to the env runners);
- startup: SB3's model construction; RLlib's building of the Algorithm (its env runner actors), Ray itself
  started once before (its start is printed apart).

Configurations: ``sb3:VEC:N`` (``VEC`` vector, subproc or dummy, ``N`` environments) and ``rllib:R:N`` (``R``
env runner actors with ``N`` environments each; ``R`` 0 samples in this process).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_ID = "schedgym/Preemption-v1"
ROLLOUT = 1024  # steps per update, in every configuration


def _monitored_env() -> Any:
    """One environment for SB3's vectorised envs; in a worker process too, which must register the ids."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor

    import schedgym  # noqa: F401

    return Monitor(gym.make(ENV_ID))


def bench_sb3(kind: str, n_envs: int, steps: int, seed: int) -> dict[str, float]:
    import gymnasium as gym
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

    import schedgym  # noqa: F401  (registers the environments)
    from agents.train import TrainConfig, model_kwargs

    defaults = TrainConfig.of()
    torch.set_num_threads(defaults.common.torch_threads)
    times = {"sample": 0.0, "learn": 0.0, "learned_steps": 0}

    class Timed(MaskablePPO):
        def collect_rollouts(self, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = super().collect_rollouts(*args, **kwargs)
            times["sample"] += time.perf_counter() - t0
            return out

        def train(self) -> None:
            t0 = time.perf_counter()
            super().train()
            times["learn"] += time.perf_counter() - t0
            times["learned_steps"] += self.n_steps * self.n_envs

    t0 = time.perf_counter()
    venv: VecEnv
    if kind == "vector":
        from agents.vec_env import SB3VecEnv

        venv = SB3VecEnv(gym.make_vec(ENV_ID, num_envs=n_envs, vectorization_mode="vector_entry_point"))  # type: ignore[arg-type]
    else:
        cls = SubprocVecEnv if kind == "subproc" else DummyVecEnv
        venv = cls([_monitored_env for _ in range(n_envs)])
    venv.seed(seed)
    venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=defaults.model.gamma)
    model = Timed("MlpPolicy", venv, **model_kwargs(defaults.replace(n_steps=ROLLOUT // n_envs, seed=seed)))
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    total = time.perf_counter() - t0
    venv.close()
    return {
        "steps": model.num_timesteps,
        "sampler": model.num_timesteps / times["sample"],
        "learner": times["learned_steps"] / times["learn"] if times["learn"] else float("nan"),
        "overall": model.num_timesteps / total,
        "startup": startup,
    }


def bench_rllib(runners: int, n_envs: int, steps: int, seed: int, folder: Path) -> dict[str, float]:
    import ray.rllib.algorithms.ppo.ppo as ppo_module

    from agents.rllib_train import algorithm
    from agents.train import TrainConfig

    config = TrainConfig.of(
        algo="rllib_ppo",
        num_env_runners=runners,
        n_envs=n_envs,
        n_steps=ROLLOUT // (n_envs * max(1, runners)),
        total_timesteps=steps,
        seed=seed,
        progress=False,
    )
    times = {"sample": 0.0, "sampled": 0.0, "learn": 0.0, "learned_steps": 0.0}
    sample: Any = ppo_module.synchronous_parallel_sample  # returns (episodes, metrics) here

    def timed_sample(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = sample(*args, **kwargs)
        times["sample"] += time.perf_counter() - t0
        times["sampled"] += sum(len(e) for e in out[0])
        return out

    t0 = time.perf_counter()
    with algorithm(config, folder) as algo:
        startup = time.perf_counter() - t0
        update = algo.learner_group.update

        def timed_update(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = update(*args, **kwargs)
            times["learn"] += time.perf_counter() - t0
            times["learned_steps"] += sum(len(e) for e in kwargs["episodes"])
            return out

        algo.learner_group.update = timed_update
        ppo_module.synchronous_parallel_sample = timed_sample
        try:
            t0 = time.perf_counter()
            done = 0
            while done < steps:
                result = algo.train()
                done = int(result["num_env_steps_sampled_lifetime"])
            total = time.perf_counter() - t0
        finally:
            ppo_module.synchronous_parallel_sample = sample
    return {
        "steps": done,
        "sampler": times["sampled"] / times["sample"],
        "learner": times["learned_steps"] / times["learn"],
        "overall": done / total,
        "startup": startup,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20480, help="environment steps per configuration")
    parser.add_argument(
        "--configs",
        default="sb3:vector:2,sb3:subproc:2,rllib:0:2,rllib:1:2,rllib:2:1",
        help="comma-separated sb3:VEC:N and rllib:RUNNERS:N configurations",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 updates per configuration, to check that it runs")
    args = parser.parse_args()
    steps = 2 * ROLLOUT if args.quick else args.steps
    configs = [item.split(":") for item in args.configs.split(",")]
    for parts in configs:
        if len(parts) != 3 or parts[0] not in ("sb3", "rllib"):
            parser.error(f"expected sb3:VEC:N or rllib:RUNNERS:N, got {':'.join(parts)!r}")

    import ray
    import torch

    print(
        f"python {platform.python_version()}, ray {ray.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs"
    )
    print(f"{ENV_ID}, {steps:,} steps per configuration, an update every {ROLLOUT:,} steps")
    session: Any = None
    if any(parts[0] == "rllib" for parts in configs):
        from schedgym.experiments.executors import ExecutorConfig, ray_session
        from schedgym.rllib import register_envs

        cpus = max(os.cpu_count() or 1, *(int(p[1]) for p in configs if p[0] == "rllib"))
        t0 = time.perf_counter()
        session = ray_session(ray, ExecutorConfig(kind="ray", workers=cpus))
        session.__enter__()
        print(f"ray.init: {time.perf_counter() - t0:.1f} s")
        register_envs()
    print()
    print("| trainer | env runners x envs | steps | sampler steps/s | learner steps/s | overall steps/s | startup s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    try:
        with tempfile.TemporaryDirectory(prefix="bench_rllib") as folder:
            for kind, a, b in configs:
                if kind == "sb3":
                    row = bench_sb3(a, int(b), steps, args.seed)
                    label = f"SB3 MaskablePPO ({a})"
                    layout = f"- x {b}"
                else:
                    row = bench_rllib(int(a), int(b), steps, args.seed, Path(folder))
                    label = "RLlib PPO"
                    layout = f"{a} x {b}"
                print(
                    f"| {label} | {layout} | {row['steps']:,} | {row['sampler']:,.0f} | {row['learner']:,.0f} | "
                    f"{row['overall']:,.0f} | {row['startup']:.1f} |",
                    flush=True,
                )
    finally:
        if session is not None:
            session.__exit__(None, None, None)


if __name__ == "__main__":
    main()

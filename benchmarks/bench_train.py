"""Training throughput: MaskablePPO steps per second, and the share of the time spent stepping the environment.

Usage:
    python benchmarks/bench_train.py                          # README figures
    python benchmarks/bench_train.py --steps 8192 --vec subproc:2,vector:16

Trains MaskablePPO with ``schedgym train``'s defaults (``TrainConfig``: network, n_steps per environment,
batch size, learning rate, one torch thread; rewards normalised, observations not) for ``--steps`` steps
on ``schedgym/Preemption-v1`` and times, from the learner's side, every call into the vectorised
environment: ``step_async``/``step_wait``, ``reset`` and ``env_method`` (how MaskablePPO reads the masks).
The env share is that time over the whole ``learn()``; the rest is the policy's forward passes while
collecting and the gradient updates. With ``subproc`` the workers step in other processes, so the
learner's time in ``step_wait`` is the time it waits for them.

``--vec``: ``subproc`` (SubprocVecEnv, what ``schedgym train`` uses), ``dummy`` (DummyVecEnv, in process), or
``vector`` (the batched :class:`schedgym.envs.vector_env.PreemptionVectorEnv` through
:class:`agents.vec_env.SB3VecEnv`).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import gymnasium as gym
import numpy as np
from sb3_contrib import MaskablePPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper, VecNormalize

import schedgym  # noqa: F401  (registers the environments)
from agents.train import TrainConfig, model_kwargs

ENV_ID = "schedgym/Preemption-v1"


class Timed(VecEnvWrapper):
    """Accumulates the wall time the learner spends inside the wrapped vectorised environment."""

    def __init__(self, venv: VecEnv):
        super().__init__(venv)
        self.seconds = 0.0

    def reset(self) -> Any:
        t0 = time.perf_counter()
        out = self.venv.reset()
        self.seconds += time.perf_counter() - t0
        return out

    def step_async(self, actions: np.ndarray) -> None:
        t0 = time.perf_counter()
        self.venv.step_async(actions)
        self.seconds += time.perf_counter() - t0

    def step_wait(self) -> Any:
        t0 = time.perf_counter()
        out = self.venv.step_wait()
        self.seconds += time.perf_counter() - t0
        return out

    def env_method(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = self.venv.env_method(*args, **kwargs)
        self.seconds += time.perf_counter() - t0
        return out


def make_venv(kind: str, n_envs: int) -> VecEnv:
    if kind == "vector":
        from agents.vec_env import SB3VecEnv

        return SB3VecEnv(gym.make_vec(ENV_ID, num_envs=n_envs, vectorization_mode="vector_entry_point"))

    def make_env() -> gym.Env:
        return Monitor(gym.make(ENV_ID))

    cls = SubprocVecEnv if kind == "subproc" else DummyVecEnv
    return cls([make_env for _ in range(n_envs)])


def measure(kind: str, n_envs: int, steps: int, seed: int) -> tuple[float, float]:
    import torch

    defaults = TrainConfig.of()
    torch.set_num_threads(defaults.common.torch_threads)
    timed = Timed(make_venv(kind, n_envs))
    timed.seed(seed)
    venv = VecNormalize(timed, norm_obs=False, norm_reward=True, gamma=defaults.model.gamma)
    model = MaskablePPO("MlpPolicy", venv, **model_kwargs(defaults.replace(seed=seed)))
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - t0
    venv.close()
    return model.num_timesteps / seconds, timed.seconds / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20480, help="training steps per configuration")
    parser.add_argument(
        "--vec", default="subproc:2,dummy:1,vector:2,vector:16", help="comma-separated KIND:N_ENVS configurations"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import numpy

    print(f"python {platform.python_version()}, numpy {numpy.__version__}, {os.cpu_count()} CPUs")
    print()
    print("| vectorised env | envs | steps/s | time stepping the environment |")
    print("|---|---:|---:|---:|")
    for item in args.vec.split(","):
        kind, n = item.split(":")
        rate, share = measure(kind, int(n), args.steps, args.seed)
        print(f"| {kind} | {n} | {rate:,.0f} | {share:.0%} |", flush=True)


if __name__ == "__main__":
    main()

"""The environment in ten lines: a random legal action at every preemption decision (the README's loop)."""

import gymnasium as gym
import numpy as np

import schedgym  # noqa: F401  (registers the environments)

env = gym.make("schedgym/Preemption-v1", n_jobs=300)
rng = np.random.default_rng(0)
obs, info = env.reset(seed=0)
total, done = 0.0, False
while not done:  # action 0 preempts nothing; action i preempts candidate row i - 1
    action = rng.choice(np.flatnonzero(info["action_mask"]))  # or env.unwrapped.action_masks()
    obs, reward, terminated, truncated, info = env.step(action)
    total, done = total + reward, terminated or truncated
print(f"return {total:.1f}; TE p95 slowdown {env.unwrapped.sim.result().summary()['te']['slowdown_p95']:.3f}")

"""schedgym: preemptive job scheduling on deep-learning clusters, as a simulator and a Gymnasium environment.

Layout: ``schedgym.sim`` (the simulator, no gymnasium), ``schedgym.workloads`` (traces and synthetic
generators), ``schedgym.envs`` (the Gymnasium environment), ``schedgym.registry`` (policy names),
``schedgym.experiments`` (comparisons); the baseline policies live in the top-level ``baselines`` package
and agents in ``agents``.

Importing schedgym registers the environments with Gymnasium (see :data:`ENV_IDS`).
"""

from gymnasium.envs.registration import register, registry

from schedgym.errors import SchedGymError

__version__ = "0.1.0"

# id -> (kwargs, max_episode_steps). Behaviour changes bump the version suffix.
ENV_IDS: dict[str, tuple[dict, int]] = {
    # The paper workload on the paper cluster (16 x 8 GPUs), 1,000 jobs per episode: a training size.
    "schedgym/Preemption-v0": ({"n_jobs": 1000, "max_candidates": 16}, 20_000),
    # The same workload on 64 x 8 GPUs (arrivals scale with the cluster), 5,000 jobs per episode.
    "schedgym/PreemptionLarge-v0": ({"cluster": "large", "n_jobs": 5000, "max_candidates": 32}, 100_000),
}

for _id, (_kwargs, _steps) in ENV_IDS.items():
    if _id not in registry:  # importing twice (or reloading) must not register twice
        register(
            id=_id,
            entry_point="schedgym.envs.preemption_env:PreemptionEnv",
            vector_entry_point="schedgym.envs.vector_env:PreemptionVectorEnv",
            kwargs=dict(_kwargs),
            max_episode_steps=_steps,
        )

__all__ = ["ENV_IDS", "SchedGymError", "__version__"]

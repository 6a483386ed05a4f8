"""schedgym: preemptive job scheduling on deep-learning clusters, as a simulator and a Gymnasium environment.

Layout: ``schedgym.sim`` (the simulator, no gymnasium), ``schedgym.workloads`` (traces and synthetic
generators), ``schedgym.envs`` (the Gymnasium environment), ``schedgym.registry`` (policy names),
``schedgym.experiments`` (comparisons); the baseline policies live in the top-level ``baselines`` package
and agents in ``agents``.

Importing schedgym registers the environments with Gymnasium (see :data:`ENV_IDS`).
"""

from gymnasium.envs import registration as _gym_registration

from schedgym.errors import SchedGymError

__version__ = "0.1.0"

# id -> (kwargs, max_episode_steps). Behaviour changes bump the version suffix.
# v1: a TE job whose offer was declined is asked again only when something that could change the answer has
# changed (docs/semantics.md, "Who is offered, and when again"), and only the oldest TE job of a shape is
# asked; v0 asked every declined TE job again after any release or BE start. Observations, actions and
# rewards are defined as in v0.
ENV_IDS: dict[str, tuple[dict, int]] = {
    # The paper workload on the paper cluster (16 x 8 GPUs), 1,000 jobs per episode: a training size.
    "schedgym/Preemption-v1": ({"n_jobs": 1000, "max_candidates": 16}, 20_000),
    # The same workload on 64 x 8 GPUs (arrivals scale with the cluster), 5,000 jobs per episode.
    "schedgym/PreemptionLarge-v1": ({"cluster": "large", "n_jobs": 5000, "max_candidates": 32}, 100_000),
    # The plan-level action mode (one whole plan per request, among the plan options) with the scale-free,
    # queue-aware observation (version 2): the paper workload and cluster, 1,000 jobs per episode.
    "schedgym/PreemptionPlan-v1": (
        {"n_jobs": 1000, "action_mode": "plan", "observation_version": 2, "max_plans": 24},
        20_000,
    ),
}

for _id, (_kwargs, _steps) in ENV_IDS.items():
    # (gymnasium's registry by its module: a name `registry` here would hide the submodule schedgym.registry)
    if _id not in _gym_registration.registry:  # importing twice (or reloading) must not register twice
        _gym_registration.register(
            id=_id,
            entry_point="schedgym.envs.preemption_env:PreemptionEnv",
            vector_entry_point="schedgym.envs.vector_env:PreemptionVectorEnv",
            kwargs=dict(_kwargs),
            max_episode_steps=_steps,
        )

SUPERSEDED: dict[str, str] = {
    "schedgym/Preemption-v0": "schedgym/Preemption-v1",
    "schedgym/PreemptionLarge-v0": "schedgym/PreemptionLarge-v1",
}
"""Ids of earlier versions -> the id that replaced them, with the same observation and action spaces: an agent
saved on the old id is evaluated on the new one (its decisions are asked at the new version's moments)."""

# The subpackages load on first use (``import schedgym`` stays light: the command line's start-up, a remote
# worker's registration), yet ``schedgym.envs.IllegalActionAsWait`` works after a plain ``import schedgym``, as
# the documentation writes it.
_SUBMODULES = frozenset(
    {"cli", "decision", "envs", "errors", "experiments", "limits", "registry", "rllib", "sim", "workloads"}
)


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"schedgym.{name}")
    raise AttributeError(f"module 'schedgym' has no attribute {name!r}")


__all__ = ["ENV_IDS", "SUPERSEDED", "SchedGymError", "__version__"]

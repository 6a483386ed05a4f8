"""Any policy as an agent of the environment, with stable-baselines3's ``predict``.

The simulator asks a :class:`~schedgym.sim.Policy` for a whole plan; the environment asks for one victim per
step. :class:`HeuristicAgent` bridges the two for stepping an environment by hand: it reads the simulator's
request from the unwrapped environment (``env.unwrapped.pending_request``; a rule such as FitGpp needs more
than the fixed-size observation), asks the policy for a plan, and replays the plan's victims one action at a
time. With ``max_candidates`` large enough to list every candidate, a rule acting through the environment
makes exactly the decisions it makes inside the simulator (tested). Comparisons do not need it: they run
every policy inside the simulator.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from schedgym.errors import SchedGymError
from schedgym.registry import make_policy
from schedgym.sim.policy import PreemptionPlan


class HeuristicAgent:
    """SB3-style ``predict`` for a baseline policy, acting in one (non-vectorised) environment.

    Args:
        policy: a :class:`~schedgym.sim.Policy` or its registry name.
        env: the environment it acts in (wrappers allowed).
        rng: generator for randomised rules (``policy.reset(rng)``).
    """

    def __init__(self, policy: Any, env: gym.Env, rng: np.random.Generator | None = None):
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.env = env
        self.policy.reset(rng if rng is not None else np.random.default_rng(0))
        self._key: tuple[int, int] | None = None
        self._plan: PreemptionPlan | None = None

    @property
    def queue(self) -> str:
        """The queue discipline the rule is meant for; configure the environment with it."""
        return str(self.policy.queue.value)

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[int, Any]:
        env = self.env.unwrapped
        request = env.pending_request  # type: ignore[attr-defined]
        if request is None:
            return 0, state
        key = (id(env.sim), env.n_decisions)  # type: ignore[attr-defined]
        if key != self._key:  # a new decision: ask the rule once, then replay its victims
            self._key = key
            self._plan = self.policy.decide(request)
        plan = self._plan
        assert plan is not None
        if plan.is_empty:
            return 0, state
        chosen = {v.idx for v in env.chosen_victims}  # type: ignore[attr-defined]
        rows = env.candidate_rows  # type: ignore[attr-defined]
        for v in plan.victims:
            if v in chosen:
                continue
            nodes = [n for n in plan.nodes if n in env.sim.jobs[v].nodes] or list(plan.nodes)  # type: ignore[attr-defined]
            for i, (job, node) in enumerate(rows):
                if job.idx == v and node in nodes:
                    return i + 1, state
            for i, (job, _) in enumerate(rows):
                if job.idx == v:
                    return i + 1, state
            raise SchedGymError(
                f"{type(self.policy).__name__} chose victim {env.sim.jobs[v].job_id!r}, which is not among the "  # type: ignore[attr-defined]
                f"{len(rows)} candidate rows; raise max_candidates (now {env.config.max_candidates})"  # type: ignore[attr-defined]
            )
        return 0, state  # unreachable: the environment resolves the plan when its last victim is chosen

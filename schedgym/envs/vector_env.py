"""N preemption environments stepped together: ``gymnasium.make_vec(id, num_envs=N,
vectorization_mode="vector_entry_point")``.

Gymnasium 1.x semantics: actions, observations, rewards and flags are batched; an episode that ends at one
step is reset at the next step of that sub-environment (``AutoresetMode.NEXT_STEP``: that step's action is
ignored, its reward is 0 and the observation is the new episode's first); ``info`` holds arrays with their
``_name`` masks. :meth:`PreemptionVectorEnv.action_masks` gives every sub-environment's legal actions
(shape ``(num_envs, max_candidates + 1)``), which sb3-contrib's MaskablePPO reads through
:class:`agents.vec_env.SB3VecEnv`.

On the native engine, one call steps every sub-environment (``schedgym.sim._engine.BatchStepper``,
``schedgym/sim/native/batch.cpp``): it applies the actions, advances each engine to its next decision and
writes observations, masks, rewards and info values into arrays allocated once, on ``n_threads`` threads
without the GIL, while this process resets the sub-environments whose episodes ended (their workloads are
drawn in Python). This module then only resets, builds the info dict and copies the arrays out. Each
sub-environment's results are exactly those of a :class:`PreemptionEnv` stepped alone, whatever the number of
threads (tested); the sub-environments' own attributes (``n_steps``, ``n_decisions``, their simulators) are
kept up to date after every step. On the Python engine the sub-environments are stepped one after the other.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from schedgym.decision import action_index, check_action, observation_size
from schedgym.envs.config import EnvConfig
from schedgym.envs.preemption_env import PreemptionEnv
from schedgym.errors import ConfigError, IllegalDecisionError
from schedgym.sim.native_engine import StepwiseNativeSimulator
from schedgym.sim.simulator import is_integer


class PreemptionVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` :class:`PreemptionEnv` with one configuration (``config`` and keyword overrides, as for
    the single environment); ``max_episode_steps`` truncates each sub-environment's episodes; ``n_threads``
    threads step the sub-environments on the native engine (None: as many as the machine has; never more than
    ``num_envs``; 1 steps them all in the calling thread).

    ``sub_env_kwargs`` (one dict per sub-environment, or None) overrides the configuration per
    sub-environment, to train on several workloads at once (``[{"workload": "paper"}, {"workload":
    "philly"}, ...]``). The spaces and the reward are batched, so ``max_candidates``, ``reward``,
    ``te_weight``, ``be_weight`` and ``preemption_cost`` must be the same for all."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        config: EnvConfig | None = None,
        max_episode_steps: int | None = None,
        n_threads: int | None = None,
        sub_env_kwargs: list[dict[str, Any]] | None = None,
        **overrides: Any,
    ):
        if not is_integer(num_envs) or num_envs < 1:
            raise ConfigError(f"Expected num_envs to be an integer >= 1, got {num_envs!r}")
        if max_episode_steps is not None and (not is_integer(max_episode_steps) or max_episode_steps < 1):
            raise ConfigError(f"Expected max_episode_steps to be an integer >= 1 or None, got {max_episode_steps!r}")
        if n_threads is not None and (not is_integer(n_threads) or n_threads < 1):
            raise ConfigError(f"Expected n_threads to be an integer >= 1 or None, got {n_threads!r}")
        max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        n_threads = None if n_threads is None else int(n_threads)
        if sub_env_kwargs is None:
            self.envs = [PreemptionEnv(config, **overrides) for _ in range(int(num_envs))]
        else:
            if not isinstance(sub_env_kwargs, (list, tuple)) or len(sub_env_kwargs) != num_envs:
                raise ConfigError(f"Expected sub_env_kwargs to be a list of {num_envs} dicts, got {sub_env_kwargs!r}")
            if not all(isinstance(kw, dict) and all(isinstance(k, str) for k in kw) for kw in sub_env_kwargs):
                raise ConfigError(f"Expected sub_env_kwargs to be a list of dicts, got {sub_env_kwargs!r}")
            self.envs = [PreemptionEnv(config, **{**overrides, **kw}) for kw in sub_env_kwargs]
            first_cfg = self.envs[0].config
            for i, env in enumerate(self.envs):
                for name in _BATCHED_FIELDS:
                    if getattr(env.config, name) != getattr(first_cfg, name):
                        raise ConfigError(
                            f"sub_env_kwargs: sub-environment {i} has {name}={getattr(env.config, name)!r}, "
                            f"sub-environment 0 {getattr(first_cfg, name)!r}; the vector environment batches "
                            f"{', '.join(_BATCHED_FIELDS)}, so they must be equal"
                        )
        self.num_envs = int(num_envs)
        self.max_episode_steps = max_episode_steps
        self.n_threads = n_threads
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = spaces.Discrete(first.config.max_candidates + 1)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._steps = np.zeros(self.num_envs, dtype=np.int64)
        self._batch: _NativeBatch | None = None  # on the native engine, from the first reset() on

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-environment: ``seed`` an int (sub-environment ``i`` gets ``seed + i``), a list of
        seeds, or None; ``options`` go to every sub-environment."""
        if seed is None or is_integer(seed):
            if seed is not None and seed < 0:
                raise ConfigError(f"Expected seed to be an integer >= 0, a list of them or None, got {seed!r}")
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        elif isinstance(seed, (list, tuple, np.ndarray)):
            seeds = list(seed)  # each checked by its sub-environment's reset
            if len(seeds) != self.num_envs:
                raise ConfigError(f"Expected {self.num_envs} seeds, got {len(seeds)}")
        else:
            raise ConfigError(f"Expected seed to be an integer >= 0, a list of them or None, got {seed!r}")
        super().reset(seed=int(seed) if is_integer(seed) else None)
        observations: list[np.ndarray] = []
        infos: dict[str, Any] = {}
        for i, (env, s) in enumerate(zip(self.envs, seeds, strict=True)):
            obs, info = env.reset(seed=s, options=options)
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        self._autoreset[:] = False
        self._steps[:] = 0
        if all(env._core is not None for env in self.envs):
            if self._batch is None:
                self._batch = _NativeBatch(self.envs, self.n_threads)
            for i, env in enumerate(self.envs):
                self._batch.load(i, env)
        else:
            self._batch = None
        return np.stack(observations), infos

    def reset_sub_env(
        self, index: int, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset sub-environment ``index`` now rather than at its next step (what stable-baselines3 expects);
        a reset it had pending is dropped. Returns its first observation and info."""
        env = self.envs[index]
        obs, info = env.reset(seed=seed, options=options)
        self._autoreset[index] = False
        self._steps[index] = 0
        if self._batch is not None:
            self._load_reset(index, obs, info)
        return obs, info

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        batch = self._batch
        if batch is not None:
            batch.resync(self.envs)
            if batch.is_stale():  # a sub-environment was reset on the Python engine (SCHEDGYM_ENGINE changed)
                self._batch = None
        resetting = self._autoreset
        actions = self._check_actions(actions, resetting)
        if self._batch is not None:
            return self._step_native(actions, resetting)
        observations = []
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if resetting[i]:  # the episode ended at the previous step: this step resets it
                obs, info = env.reset()
                self._steps[i] = 0
            else:
                obs, rewards[i], terminated[i], truncated[i], info = env.step(int(actions[i]))
                self._steps[i] += 1
                if self.max_episode_steps is not None and self._steps[i] >= self.max_episode_steps:
                    truncated[i] = not terminated[i]
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        self._autoreset = terminated | truncated
        return np.stack(observations), rewards, terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """Legal actions of every sub-environment (bool, shape ``(num_envs, max_candidates + 1)``); a
        sub-environment about to be reset allows only 0."""
        batch = self._batch
        if batch is not None:
            batch.resync(self.envs)
            masks = batch.mask.copy()
        else:
            masks = np.stack([env.action_masks() for env in self.envs])
        if self._autoreset.any():
            masks[self._autoreset] = False
            masks[self._autoreset, 0] = True
        return masks

    def close_extras(self, **kwargs: Any) -> None:
        self._batch = None  # stops its threads
        # getattr: gymnasium 1.2's VectorEnv.__del__ closes an instance whose __init__ raised before envs existed.
        for env in getattr(self, "envs", ()):
            env.close()

    # ------------------------------------------------------------------ the native batch
    def _step_native(
        self, actions: np.ndarray, resetting: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        batch = self._batch
        assert batch is not None
        np.copyto(batch.actions, actions)
        np.copyto(batch.skip, resetting)
        to_reset = np.flatnonzero(resetting).tolist()
        resets: list[tuple[np.ndarray, dict[str, Any]]] = []
        # The worker threads step the other sub-environments while this thread draws the new workloads.
        batch.stepper.begin()
        try:
            resets = [self.envs[i].reset() for i in to_reset]
        finally:
            batch.stepper.finish()
            batch.after_step(self.envs, resetting)
        for i, (obs, info) in zip(to_reset, resets, strict=True):
            self._load_reset(i, obs, info)
        self._steps[~resetting] += 1
        self._steps[resetting] = 0
        terminated = batch.terminated.copy()
        terminated[resetting] = False
        truncated = np.zeros(self.num_envs, dtype=bool)
        if self.max_episode_steps is not None:
            truncated = (self._steps >= self.max_episode_steps) & ~terminated
        rewards = batch.reward.copy()
        self._autoreset = terminated | truncated
        return batch.obs.copy(), rewards, terminated, truncated, batch.infos(self.envs)

    def _load_reset(self, i: int, obs: np.ndarray, info: dict[str, Any]) -> None:
        """Hand sub-environment ``i``, just reset, to the batch, with its first observation and info as this
        step's results."""
        batch = self._batch
        assert batch is not None
        env = self.envs[i]
        parts = info["reward_parts"]
        batch.obs[i] = obs
        batch.mask[i] = info["action_mask"]
        batch.reward[i] = 0.0
        batch.parts[i] = (parts["te_slowdown"], parts["be_slowdown"], parts["preemption"])
        batch.terminated[i] = False
        batch.sim_time[i] = info["sim_time"]
        batch.interval[i] = info["interval"]
        batch.n_candidates[i] = info["n_candidates"]
        batch.decisions[i] = info["decisions"]
        batch.preemptions[i] = info["preemptions"]
        if env._core is not None:
            batch.load(i, env)
        else:  # reset on the Python engine: these results stand, and the next step drops the batch
            request = env.pending_request
            batch.te_job[i] = request.job.idx if request is not None else -1
            batch.cores[i] = None

    def _check_actions(self, actions: Any, resetting: np.ndarray) -> np.ndarray:
        """``actions`` as int64, every one checked before any sub-environment steps: a batch of the wrong shape
        (ragged, or not one action per sub-environment) raises :class:`ConfigError`; an action that is not an
        integer or is illegal raises the single environment's :class:`IllegalDecisionError`
        (:func:`~schedgym.decision.check_action`), naming the sub-environment. The actions of
        sub-environments about to be reset are ignored."""
        n = self.num_envs
        try:
            raw = np.asarray(actions)
        except (TypeError, ValueError):  # a ragged sequence (numpy refuses inhomogeneous shapes)
            raise ConfigError(
                f"Expected actions of shape ({n},), one integer per sub-environment, got a ragged sequence "
                f"{_shorten(actions)}"
            ) from None
        if raw.shape != (n,):
            raise ConfigError(
                f"Expected actions of shape ({n},), one integer per sub-environment, got shape {raw.shape}: "
                f"{_shorten(actions)}"
            )
        if self._batch is not None:
            pending = self._batch.te_job >= 0
            n_rows = self._batch.n_candidates
        else:
            pending = np.array([env.decision is not None for env in self.envs])
            n_rows = np.array([len(env.candidate_rows) for env in self.envs], dtype=np.int64)
        if isinstance(actions, np.ndarray) and raw.dtype.kind in "iu":  # the common case, checked at once
            out = raw.astype(np.int64)
            bad = ~resetting & ((out < 0) | (out > n_rows))
            if not bad.any():
                return out
        else:  # floats, objects, bools, or a list (whose items are checked as given: [True, 1] is no int array)
            out = np.zeros(n, dtype=np.int64)
        given = list(actions) if isinstance(actions, (list, tuple)) else raw.tolist()
        for i in np.flatnonzero(~resetting).tolist():
            try:
                if not pending[i]:
                    if action_index(given[i]) != 0:
                        raise IllegalDecisionError(
                            f"Action {given[i]!r} is illegal: no decision is pending; legal: [0]"
                        )
                    out[i] = 0
                else:
                    out[i] = check_action(given[i], int(n_rows[i]))
            except IllegalDecisionError as exc:
                raise IllegalDecisionError(f"Sub-environment {i}: {exc}") from None
        return out

    # ------------------------------------------------------------------ copying
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_batch"] = None  # threads and pointers: rebuilt from the sub-environments
        state["_native"] = self._batch is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        native = state.pop("_native")
        self.__dict__.update(state)
        if native:
            self._batch = _NativeBatch(self.envs, self.n_threads)
            for i, env in enumerate(self.envs):
                self._batch.load(i, env)


class _NativeBatch:
    """The native batch stepper of a :class:`PreemptionVectorEnv` and the arrays it reads and writes, one row
    per sub-environment (``BatchBuffers`` in ``schedgym/sim/native/batch.hpp``)."""

    def __init__(self, envs: list[PreemptionEnv], n_threads: int | None):
        from schedgym.sim import _engine  # type: ignore[attr-defined]

        n = len(envs)
        config = envs[0].config
        m = config.max_candidates
        self.actions = np.zeros(n, dtype=np.int64)
        self.skip = np.zeros(n, dtype=bool)
        self.obs = np.zeros((n, observation_size(m)), dtype=np.float32)
        self.mask = np.zeros((n, m + 1), dtype=bool)
        self.reward = np.zeros(n, dtype=np.float64)
        self.parts = np.zeros((n, 3), dtype=np.float64)
        self.terminated = np.zeros(n, dtype=bool)
        self.resolved = np.zeros(n, dtype=bool)
        self.sim_time = np.zeros(n, dtype=np.float64)
        self.interval = np.zeros(n, dtype=np.float64)
        self.te_job = np.full(n, -1, dtype=np.int64)
        self.n_candidates = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.decisions = np.zeros(n, dtype=np.int64)
        self.last_accrued = np.zeros((n, 2), dtype=np.float64)
        arrays = {name: getattr(self, name) for name in _ARRAYS}
        self.stepper = _engine.BatchStepper(
            n,
            m,
            te_weight=float(config.te_weight),
            be_weight=float(config.be_weight),
            preemption_cost=float(config.preemption_cost),
            bounded=config.reward != "slowdown",  # as PreemptionEnv._reward_parts reads it
            threads=0 if n_threads is None else n_threads,
            arrays=arrays,
        )
        # What each sub-environment looked like after the batch last stepped or loaded it: a sub-environment
        # reset or stepped by someone else since (env_method, a user) is loaded again before the next step.
        self.cores: list[Any] = [None] * n
        self.n_steps: list[int] = [-1] * n

    def load(self, i: int, env: PreemptionEnv) -> None:
        """Take sub-environment ``i`` (on the native engine) as it is now: its core, its counters, its mask."""
        core = env._core
        assert core is not None
        self.stepper.attach(i, core)
        self.cores[i] = core
        self.n_steps[i] = env.n_steps
        self.decisions[i] = env.n_decisions
        self.last_accrued[i] = env._last_accrued
        self.te_job[i] = core.job
        self.n_candidates[i] = core.n_rows
        core.mask(self.mask[i])

    def is_stale(self) -> bool:
        """A sub-environment is no longer on the native engine (it was reset on the Python engine)."""
        return any(core is None for core in self.cores)

    def resync(self, envs: list[PreemptionEnv]) -> None:
        """Load again the sub-environments that were reset or stepped outside the batch."""
        if [env._core for env in envs] == self.cores and [env.n_steps for env in envs] == self.n_steps:
            return
        for i, env in enumerate(envs):
            if env._core is not self.cores[i] or env.n_steps != self.n_steps[i]:
                if env._core is None:
                    self.cores[i] = None
                else:
                    self.load(i, env)

    def after_step(self, envs: list[PreemptionEnv], skipped: np.ndarray) -> None:
        """Bring the stepped sub-environments' own state up to date, as their step() would have."""
        decisions = self.decisions.tolist()
        accrued = self.last_accrued.tolist()
        done = self.terminated.tolist()
        resolved = self.resolved.tolist()
        for i in np.flatnonzero(~skipped).tolist():
            env = envs[i]
            env.n_steps += 1
            env.n_decisions = decisions[i]
            env._last_accrued = (accrued[i][0], accrued[i][1])
            env._done = env._ended = done[i]
            if resolved[i]:
                sim = env.sim
                assert isinstance(sim, StepwiseNativeSimulator)
                sim.note_native_step()
            self.n_steps[i] = env.n_steps

    def infos(self, envs: list[PreemptionEnv]) -> dict[str, Any]:
        """The step's info dict, as ``VectorEnv._add_info`` builds it from every sub-environment's info (the
        same keys, dtypes and ``_name`` masks)."""
        n = len(envs)
        te_job = np.full(n, None, dtype=object)
        for i, j in enumerate(self.te_job.tolist()):
            if j >= 0:
                te_job[i] = envs[i]._workload.table.job_ids[j]  # as PreemptionEnv._info names it
        parts = self.parts.T.copy()  # one copy for the three parts' arrays
        present = np.ones((11, n), dtype=bool)  # one allocation for the eleven "_key" masks
        return {
            "sim_time": self.sim_time.copy(),
            "_sim_time": present[0],
            "interval": self.interval.copy(),
            "_interval": present[1],
            "action_mask": self.mask.copy(),
            "_action_mask": present[2],
            "reward_parts": {
                "te_slowdown": parts[0],
                "_te_slowdown": present[3],
                "be_slowdown": parts[1],
                "_be_slowdown": present[4],
                "preemption": parts[2],
                "_preemption": present[5],
            },
            "_reward_parts": present[6],
            "te_job": te_job,
            "_te_job": present[7],
            "n_candidates": self.n_candidates.copy(),
            "_n_candidates": present[8],
            "decisions": self.decisions.copy(),
            "_decisions": present[9],
            "preemptions": self.preemptions.copy(),
            "_preemptions": present[10],
        }


def _shorten(value: object, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error message stays one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# EnvConfig fields every sub-environment shares: the batched spaces and the batch stepper's reward.
_BATCHED_FIELDS = ("max_candidates", "reward", "te_weight", "be_weight", "preemption_cost")

_ARRAYS = (
    "actions",
    "skip",
    "obs",
    "mask",
    "reward",
    "parts",
    "terminated",
    "resolved",
    "sim_time",
    "interval",
    "te_job",
    "n_candidates",
    "preemptions",
    "decisions",
    "last_accrued",
)


__all__ = ["PreemptionVectorEnv"]

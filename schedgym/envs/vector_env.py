"""N preemption environments stepped together: ``gymnasium.make_vec(id, num_envs=N,
vectorization_mode="vector_entry_point")``.

Gymnasium 1.x semantics: actions, observations, rewards and flags are batched; ``info`` holds arrays with
their ``_name`` masks. ``autoreset_mode`` (``metadata["autoreset_mode"]``) is one of Gymnasium's three, each
stepping exactly as ``SyncVectorEnv`` does (tested in lockstep):

- ``"next-step"`` (the default, ``AutoresetMode.NEXT_STEP``): an episode that ends at one step is reset at the
  next step of that sub-environment (that step's action is ignored, its reward is 0 and the observation is
  the new episode's first);
- ``"same-step"``: it is reset at once; the step returns the new episode's first observation and the reset's
  info, the ended episode's last observation and info in ``info["final_obs"]`` (an object array, None for the
  others) and ``info["final_info"]``;
- ``"disabled"``: never reset automatically; ``reset(options={"reset_mask": mask})`` resets the sub-environments
  of ``mask`` (the others keep their last observation), and stepping an ended one is an error.
 :meth:`PreemptionVectorEnv.action_masks` gives every sub-environment's legal actions
(shape ``(num_envs, max_candidates + 1)``), which sb3-contrib's MaskablePPO reads through
:class:`agents.vec_env.SB3VecEnv`.

The sub-environments are stepped as one :class:`~schedgym.decision.batch.DecisionBatch` of their decision
backends, which writes observations, masks, rewards and info values into arrays allocated once. On the native
engine one call steps every sub-environment (``schedgym.sim._engine.BatchStepper``,
``schedgym/sim/native/batch.cpp``) on ``n_threads`` threads without the GIL, while this process resets the
sub-environments whose episodes ended (their workloads are drawn in Python); otherwise they are stepped one
after the other. This module only checks the actions, resets, and copies the arrays out. Each
sub-environment's results are exactly those of a :class:`PreemptionEnv` stepped alone, whatever the number of
threads (tested); the sub-environments' own attributes (``n_steps``, ``n_decisions``, their simulators) are
kept up to date after every step.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from schedgym.decision import action_index, check_action
from schedgym.decision.batch import DecisionBatch, batch_infos, open_batch
from schedgym.envs.config import EnvConfig
from schedgym.envs.preemption_env import MaskedSpace, PreemptionEnv
from schedgym.errors import ConfigError, IllegalDecisionError, SchedGymError
from schedgym.sim.simulator import is_integer


class PreemptionVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` :class:`PreemptionEnv` with one configuration (``config`` and keyword overrides, as for
    the single environment); ``max_episode_steps`` truncates each sub-environment's episodes; ``n_threads``
    threads step the sub-environments on the native engine (None: as many as the machine has; never more than
    ``num_envs``; 1 steps them all in the calling thread).

    ``sub_env_kwargs`` (one dict per sub-environment, or None) overrides the configuration per
    sub-environment, to train on several workloads at once (``[{"workload": "paper"}, {"workload":
    "philly"}, ...]``). The spaces and the reward are batched, so ``max_candidates``, ``reward``,
    ``te_weight``, ``be_weight`` and ``preemption_cost`` must be the same for all. ``autoreset_mode``: see the
    module's documentation (an ``AutoresetMode``, its value, or ``"next-step"``, ``"same-step"``,
    ``"disabled"``)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": list(PreemptionEnv.metadata["render_modes"])}

    def __init__(
        self,
        num_envs: int = 1,
        config: EnvConfig | None = None,
        max_episode_steps: int | None = None,
        n_threads: int | None = None,
        sub_env_kwargs: list[dict[str, Any]] | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        **overrides: Any,
    ):
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
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
        n_actions = first.config.decision_spec.n_actions
        self.single_action_space = spaces.Discrete(n_actions)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        nvec = np.full(self.num_envs, n_actions, dtype=np.int64)
        self.action_space = MaskedMultiDiscrete(nvec, mask_fn=self.action_masks)
        self.render_mode = first.render_mode  # make_vec hands render_mode to every sub-environment
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self._autoreset = np.zeros(self.num_envs, dtype=bool)  # episodes that ended at the last step
        self._steps = np.zeros(self.num_envs, dtype=np.int64)
        self._batch: DecisionBatch | None = None  # from the first reset() on
        self._wait_if_illegal = first.config.illegal_action == "wait"
        self._dict_obs = first.config.observation == "dict"
        self._n_illegal = np.zeros(self.num_envs, dtype=np.int64)  # per episode, with illegal_action="wait"

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
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
        options = dict(options) if options is not None else None
        reset_mask = self._reset_mask(options.pop("reset_mask")) if options and "reset_mask" in options else None
        if reset_mask is None:
            super().reset(seed=int(seed) if is_integer(seed) else None)
        infos: dict[str, Any] = {}
        resets: dict[int, np.ndarray] = {}
        for i, (env, s) in enumerate(zip(self.envs, seeds, strict=True)):
            if reset_mask is None or reset_mask[i]:
                resets[i], info = env.reset(seed=s, options=options)
                infos = self._add_info(infos, info, i)
        if reset_mask is None:
            self._autoreset[:] = False
            self._steps[:] = 0
            self._n_illegal[:] = 0
            if self._batch is None:
                self._batch = self._open_batch()
        else:
            # Some sub-environments only (Gymnasium's reset_mask, what autoreset_mode="disabled" is used with):
            # the others keep their last observation.
            self._autoreset[reset_mask] = False
            self._steps[reset_mask] = 0
            self._n_illegal[reset_mask] = 0
        batch = self._synced_batch()  # the same batch (its threads), unless a backend needs another kind
        for i, obs in resets.items():
            batch.obs[i] = self._flat(obs)
        return self._observations(batch), infos

    def _flat(self, obs: Any) -> np.ndarray:
        """A sub-environment's observation without its mask (observation="dict" carries it too)."""
        flat: np.ndarray = obs["observations"] if self._dict_obs else obs
        return flat

    def _observations(self, batch: DecisionBatch) -> Any:
        """The batched observation: the arrays copied out (with the masks, for observation="dict")."""
        if self._dict_obs:
            return {"action_mask": batch.mask.astype(np.float32), "observations": batch.obs.copy()}
        return batch.obs.copy()

    def _row_observation(self, batch: DecisionBatch, i: int) -> Any:
        """Sub-environment ``i``'s observation, unbatched (``final_obs``)."""
        if self._dict_obs:
            return {"action_mask": batch.mask[i].astype(np.float32), "observations": batch.obs[i].copy()}
        return batch.obs[i].copy()

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
        else:
            self._batch = self._open_batch()
        return obs, info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        batch = self._synced_batch()
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            resetting = self._autoreset  # the episodes that ended at the previous step reset at this one
        else:
            ended = np.flatnonzero(self._autoreset).tolist()
            if ended:  # (disabled mode: SAME_STEP never leaves one ended)
                raise SchedGymError(
                    f"step() on sub-environments {ended}, whose episodes have ended (autoreset_mode='disabled'): "
                    "reset them first with reset(options={'reset_mask': mask})"
                )
            resetting = np.zeros(self.num_envs, dtype=bool)
        actions = self._check_actions(actions, resetting)
        np.copyto(batch.actions, actions)
        np.copyto(batch.skip, resetting)
        to_reset = np.flatnonzero(resetting).tolist()
        resets: list[tuple[np.ndarray, dict[str, Any]]] = []
        # On the native batch, worker threads step the other sub-environments while this thread draws the new
        # workloads (a Python batch steps them all in begin()).
        batch.begin()
        try:
            resets = [self.envs[i].reset() for i in to_reset]
        finally:
            batch.finish()
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
        if self.autoreset_mode == AutoresetMode.SAME_STEP and self._autoreset.any():
            infos = self._reset_same_step(batch)  # first: the ended rows' observations become the new episodes'
            return self._observations(batch), rewards, terminated, truncated, infos
        return (
            self._observations(batch),
            rewards,
            terminated,
            truncated,
            self._infos(batch),
        )

    def _reset_same_step(self, batch: DecisionBatch) -> dict[str, Any]:
        """Reset the sub-environments whose episodes ended at this step (autoreset_mode="same-step"): their row
        of the observation becomes the new episode's first, their info the reset's, and the step's own
        observation and info go to ``final_obs`` and ``final_info``, as Gymnasium's SyncVectorEnv gives them."""
        ended = self._autoreset.copy()
        final_obs = np.full(self.num_envs, None, dtype=object)  # unbatched, as Gymnasium's _add_info keeps it
        for i in np.flatnonzero(ended).tolist():
            final_obs[i] = self._row_observation(batch, i)
        final_info = _rows_only(self._infos(batch), ended)
        for i in np.flatnonzero(ended).tolist():
            obs, info = self.envs[i].reset()
            self._load_reset(i, obs, info)
            self._steps[i] = 0
        self._autoreset[:] = False
        infos = self._infos(batch)
        final = {"final_obs": final_obs, "_final_obs": ended, "final_info": final_info, "_final_info": ended.copy()}
        # Gymnasium adds each sub-environment's entries in turn, so the keys come first when sub-environment 0's
        # episode ended, after the others otherwise.
        return {**final, **infos} if ended[0] else {**infos, **final}

    def _infos(self, batch: DecisionBatch) -> dict[str, Any]:
        """The step's info, as the sub-environments' infos batched (illegal_actions last, as the single
        environment adds it)."""
        infos = batch_infos(batch, full=self.envs[0].config.info == "full")
        if self._wait_if_illegal:
            infos["illegal_actions"] = self._n_illegal.copy()
            infos["_illegal_actions"] = np.ones(self.num_envs, dtype=bool)
        return infos

    def _reset_mask(self, mask: Any) -> np.ndarray:
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ConfigError(
                f"Expected options['reset_mask'] to be a bool numpy array of shape ({self.num_envs},), got {mask!r}"
            )
        if not mask.any():
            raise ConfigError("Expected options['reset_mask'] to reset at least one sub-environment, got none")
        if self._batch is None:
            raise SchedGymError("reset(options={'reset_mask': ...}) before a full reset(); call reset() first")
        return mask

    def action_masks(self) -> np.ndarray:
        """Legal actions of every sub-environment (bool, shape ``(num_envs, max_candidates + 1)``); a
        sub-environment about to be reset allows only 0."""
        masks: np.ndarray = self._synced_batch().mask.copy()
        if self._autoreset.any():
            masks[self._autoreset] = False
            masks[self._autoreset, 0] = True
        return masks

    def render(self) -> tuple[Any, ...] | None:
        """Every sub-environment's frame (``render_mode`` "ansi": text; "rgb_array": an image), as Gymnasium's
        SyncVectorEnv gives them (what ``gymnasium.wrappers.vector.RecordVideo`` tiles)."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'")
            return None
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        self._batch = None  # stops a native batch's threads
        # getattr: gymnasium 1.2's VectorEnv.__del__ closes an instance whose __init__ raised before envs existed.
        for env in getattr(self, "envs", ()):
            env.close()

    # ------------------------------------------------------------------ the batch
    def _open_batch(self) -> DecisionBatch:
        first = self.envs[0]
        return open_batch(
            [env.backend for env in self.envs], first.config.decision_spec, first.reward_config, self.n_threads
        )

    def _synced_batch(self) -> DecisionBatch:
        """The batch, with the sub-environments reset or stepped by someone else since (``env_method``, a user)
        loaded again; a new one if a sub-environment now runs on a backend the batch cannot step (a reset after
        ``SCHEDGYM_ENGINE`` changed)."""
        if self._batch is None:
            raise SchedGymError("step() called before reset(); call reset() first")
        self._batch.sync([env.backend for env in self.envs])
        if self._batch.stale:
            self._batch = self._open_batch()
        return self._batch

    def _load_reset(self, i: int, obs: np.ndarray, info: dict[str, Any]) -> None:
        """Hand sub-environment ``i``, just reset, to the batch, with its first observation and info as this
        step's results."""
        batch = self._batch
        assert batch is not None
        batch.obs[i] = self._flat(obs)
        batch.reward[i] = 0.0
        batch.parts[i] = (info["reward_te"], info["reward_be"], info["reward_preemption"])
        batch.terminated[i] = False
        batch.sim_time[i] = info["sim_time"]
        batch.interval[i] = info["interval"]
        batch.preemptions[i] = info["preemptions"]
        self._n_illegal[i] = 0
        batch.load(i, self.envs[i].backend)  # a backend it cannot step makes it stale: the next step opens anew

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
        batch = self._batch
        assert batch is not None
        pending = batch.te_job >= 0
        n_rows = batch.n_candidates
        if isinstance(actions, np.ndarray) and raw.dtype.kind in "iu":  # the common case, checked at once
            out = raw.astype(np.int64)
            bad = ~resetting & ((out < 0) | (out > n_rows))
            if not bad.any():
                return out
            if self._wait_if_illegal:  # taken as waits, and counted
                out[bad] = 0
                self._n_illegal += bad
                return out
        else:  # floats, objects, bools, or a list (whose items are checked as given: [True, 1] is no int array)
            out = np.zeros(n, dtype=np.int64)
        given = list(actions) if isinstance(actions, (list, tuple)) else raw.tolist()
        for i in np.flatnonzero(~resetting).tolist():
            try:
                if self._wait_if_illegal:
                    a = action_index(given[i])  # a non-integer is an error still
                    legal = 0 <= a <= (int(n_rows[i]) if pending[i] else 0)
                    out[i] = a if legal else 0
                    self._n_illegal[i] += not legal
                elif not pending[i]:
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
        state["_opened"] = self._batch is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        opened = state.pop("_opened")
        self.__dict__.update(state)
        # The action space was pickled as a plain MultiDiscrete (MaskedMultiDiscrete.__reduce__): bind it here.
        plain = self.action_space
        assert isinstance(plain, spaces.MultiDiscrete)
        self.action_space = MaskedMultiDiscrete.bound_to(plain, self.action_masks)
        if opened:
            self._batch = self._open_batch()


class MaskedMultiDiscrete(MaskedSpace, spaces.MultiDiscrete):
    """The vector environment's action space: ``MultiDiscrete`` whose ``sample()`` without a mask draws a legal
    action for every sub-environment (from :meth:`PreemptionVectorEnv.action_masks`), as the single
    environment's :class:`~schedgym.envs.preemption_env.MaskedDiscrete` does. Pickled or copied alone it is a
    plain ``MultiDiscrete``."""

    def __init__(self, nvec: np.ndarray, mask_fn: Any = None, seed: int | np.random.Generator | None = None):
        super().__init__(nvec, seed=seed)
        self._mask_fn = mask_fn

    def sample(self, mask: tuple[Any, ...] | None = None, probability: tuple[Any, ...] | None = None) -> np.ndarray:
        if mask is None and probability is None and self._mask_fn is not None:
            mask = tuple(self._mask_fn().astype(np.int8))
        return super().sample(mask=mask, probability=probability)


def _autoreset_mode(value: object) -> AutoresetMode:
    """An :class:`AutoresetMode`, its value (``"SameStep"``) or its name in any case, with hyphens or underscores
    (``"same-step"``, ``"same_step"``: what a command line or a config file gives)."""
    if isinstance(value, AutoresetMode):
        return value
    if isinstance(value, str):
        key = value.replace("-", "").replace("_", "").lower()
        for mode in AutoresetMode:
            if mode.value.lower() == key:
                return mode
    names = ", ".join(repr(m.value) for m in AutoresetMode)
    raise ConfigError(
        f"Expected autoreset_mode to be an AutoresetMode or one of {names} (or 'same-step'...), got {value!r}"
    )


def _rows_only(infos: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """``infos`` (batched, with ``_key`` masks) keeping only ``rows``: the others zero (None for objects) and
    masked out, as Gymnasium's ``_add_info`` leaves the rows it was given nothing for."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        if isinstance(value, dict):
            out[key] = _rows_only(value, rows)
        else:
            kept = np.full_like(value, None) if value.dtype == object else np.zeros_like(value)
            kept[rows] = value[rows]
            out[key] = kept
        out[f"_{key}"] = rows.copy()
    return out


def _shorten(value: object, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error message stays one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# EnvConfig fields every sub-environment shares: the batched spaces and the batch's reward.
_BATCHED_FIELDS = (
    "max_candidates",
    "action_mode",
    "observation_version",
    "max_plans",
    "queue_rows",
    "reward",
    "te_weight",
    "be_weight",
    "preemption_cost",
    "info",
    "illegal_action",
    "observation",
)


__all__ = ["MaskedMultiDiscrete", "PreemptionVectorEnv"]

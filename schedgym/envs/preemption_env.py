"""The Gymnasium environment: the simulator's preemption decisions, made by an agent.

The environment only translates: the rules live in :mod:`schedgym.sim` (see ``docs/semantics.md``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from schedgym.decision import StepwiseDecision, action_index, observation_table
from schedgym.decision.backend import DecisionBackend, NativeDecision, Reward, open_backend
from schedgym.decision.plan_mode import PlanDecision
from schedgym.decision.plans import PlanOption
from schedgym.envs.config import EnvConfig
from schedgym.envs.render import render_ansi, render_rgb
from schedgym.errors import ConfigError, SchedGymError, UnknownArgumentError
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.job import Job
from schedgym.sim.policy import PreemptionRequest
from schedgym.sim.simulator import SimConfig, Simulator, is_integer
from schedgym.workloads.trace import Workload


class MaskedSpace:
    """What the masked action spaces share: pickled or copied alone, one is its plain Gymnasium base space
    (``Discrete``, ``MultiDiscrete``) with the same size and generator state. The mask function would drag
    the environment and its simulation along (into every saved SB3 model), and loading it would need
    schedgym's internals. An environment re-binds its own space when it is copied (:meth:`bound_to`)."""

    _mask_fn: Any

    def __reduce__(self) -> tuple[Any, ...]:
        plain = next(c for c in type(self).__mro__ if c.__module__.startswith("gymnasium."))
        state = {k: v for k, v in self.__dict__.items() if k != "_mask_fn"}
        return (plain.__new__, (plain,), state)  # object.__new__: unpickling needs gymnasium only

    @classmethod
    def bound_to(cls, space: spaces.Space[Any], mask_fn: Any) -> Any:
        """``space`` (size, start, generator state) as this masked space sampling from ``mask_fn``."""
        masked = cls.__new__(cls)
        masked.__dict__.update(space.__dict__)
        masked._mask_fn = mask_fn
        return masked


class MaskedDiscrete(MaskedSpace, spaces.Discrete):
    """``Discrete`` whose ``sample()`` without a mask draws a *legal* action of the environment's current
    decision (uniformly, from the space's own seeded generator). With an explicit ``mask`` or
    ``probability`` it behaves exactly as ``Discrete``."""

    def __init__(self, n: int, mask_fn: Any = None, seed: int | np.random.Generator | None = None):
        super().__init__(n, seed=seed)
        self._mask_fn = mask_fn

    def sample(self, mask: np.ndarray | None = None, probability: np.ndarray | None = None) -> np.int64:
        if mask is None and probability is None and self._mask_fn is not None:
            mask = self._mask_fn().astype(np.int8)
        return super().sample(mask=mask, probability=probability)


class PreemptionEnv(gym.Env):
    """Preemptive scheduling of TE and BE jobs on a DL cluster; the agent decides preemptions.

    ## Description
    A discrete-event simulation of a GPU cluster (``schedgym.sim``) runs a workload of trial-and-error (TE)
    and best-effort (BE) jobs under a queue discipline. Whenever a pending TE job cannot be placed, the
    simulator asks who to preempt; this environment hands that question to the agent. Simulated time between
    decisions is skipped (event-driven). Victims are chosen one at a time: if the TE job still does not fit
    after a victim, the next decision is for the same TE job with the candidates restricted to what can
    complete that placement (the victim's node, for a single-node job). Victims are preempted only when the
    set is complete; choosing 0 before that abandons the attempt and nobody is preempted.

    ## Action Space
    ``Discrete(max_candidates + 1)``: 0 = preempt nothing (the TE job waits; it is offered again after the
    cluster gains resources or candidates); ``i >= 1`` = preempt candidate row ``i - 1``. Rows are running
    preemptible BE jobs (fewer than ``max_preemptions`` preemptions) on nodes where the TE job could fit once
    they are gone; a gang job appears once per node it occupies. Order (policy-neutral): round-robin over
    the feasible nodes in node order, each node's candidates by job index; rows beyond ``max_candidates``
    are cut from the end of that order, so every feasible node keeps its first candidates. Legal actions:
    0 and the rows present. ``action_masks()`` (read by sb3-contrib's MaskablePPO) and
    ``info["action_mask"]`` give them; ``action_space.sample()`` draws only legal ones (the space pickles and
    copies alone as a plain ``Discrete``, so saved models hold no schedgym object); an illegal action
    raises :class:`~schedgym.errors.IllegalDecisionError` naming it and the legal set. An action is an int,
    a numpy integer (or 0-d integer array) or a float equal to an integer; a bool, ``1.5``, ``inf``, NaN, a
    string or a sequence raises the same error (:func:`schedgym.decision.action_index`).

    Plan mode (``action_mode="plan"``, the id ``schedgym/PreemptionPlan-v1``): ``Discrete(max_plans)``, one
    action per request: action ``i`` takes *plan option* ``i`` (:func:`schedgym.decision.plans.plan_options`):
    row 0 is always wait, then the plans of ``fitgpp`` and ``k8s`` (each asked on the request), then, for a
    job of one node, the fewest victims that make room on each node, in node order; a plan proposed by several
    is one row carrying each proposer's flag; options beyond ``max_plans`` are cut from the end. It is the
    option set ``lookahead`` plays out. Legal actions: the options present (``info["action_mask"]``,
    ``action_masks()``); ``plan_options`` lists them; a request whose only option is to wait is declined
    without asking.

    ## Observation Space
    Version 1 (``observation_version=1``, the default in the victim mode): ``Box(0, 1, (20 + 13 *
    max_candidates,), float32)``, built from the decision at hand (no copy of the
    cluster state). Resources are divided by the largest node's capacity; times are squashed with
    ``t / (t + scale)``. The layout (generated from :mod:`schedgym.decision.features`):

    {observation_table}

    The remaining-work and duration estimates are true values times a per-job lognormal error with sigma
    ``estimate_noise`` (default 0.3, drawn at reset from ``np_random``): real schedulers know durations only
    approximately. Padded rows are all zeros.

    Version 2 (``observation_version=2``; the plan mode's only version): scale-free and queue-aware. Every time
    is a ratio to another time of the same workload (the waiting TE job's estimate, the running median of the
    estimates of a class's jobs submitted so far), squashed with ``x / (x + 1)``; job counts are per node; the
    ``queue_rows`` oldest waiting jobs of each class are rows. ``Box(0, 1, (21 + 22 * queue_rows + 14 *
    max_candidates,), float32)`` victim by victim, ``Box(0, 1, (21 + 22 * queue_rows + 22 * max_plans,),
    float32)`` plan by plan. Multiplying every time of a workload by ``k > 0`` changes no observation, mask or
    decision; permuting the nodes permutes the option rows only. The layout is in ``docs/observation.md``
    (generated from :func:`schedgym.decision.features.schema`). On the native engine the plan mode's protocol
    runs in C++ (``PlanCore``, bit for bit the Python specification's observations); the victim mode with
    version 2 runs its protocol in Python (the simulation stays native).

    ## Rewards
    A weighted sum of named parts, each reported in ``info`` (``reward_te``, ``reward_be``,
    ``reward_preemption``; with ``info="full"`` also in ``info["reward_parts"]``, named ``te_slowdown``,
    ``be_slowdown``, ``preemption``): ``te_slowdown`` and ``be_slowdown`` = minus the slowdown accrued since
    the previous step by every job in the system, a job accruing ``1/duration`` per second
    (``1/max(duration, 10 s)`` with ``reward="bounded_slowdown"``), times ``te_weight`` / ``be_weight``;
    ``preemption`` = minus ``preemption_cost`` per job preempted at this step. With the default reward the
    undiscounted return of a finished episode equals minus the weighted sum of job slowdowns (tested). Time
    before the first decision counts in the first step.

    ## Starting State
    ``reset(seed=...)`` draws a fresh workload of ``n_jobs`` jobs from ``np_random`` (synthetic preset) or a
    random window of the trace, or, with ``workload="mix"``, a training level of
    :mod:`schedgym.workloads.distribution` (its own cluster, ``n_jobs`` and ``estimate_noise``: the cluster
    changes between episodes, the spaces do not), then runs the simulation to the first decision. ``options``
    can pin the workload: ``{"workload": Workload}``, ``{"workload_seed": s}`` (the same workload that
    ``schedgym compare`` uses for seed ``s``; for ``mix``, level ``s``) or, for a trace, ``{"window_start": i}``.

    ## Episode End
    ``terminated`` when the workload has drained (the last step's reward includes everything until then);
    ``truncated`` only from ``max_episode_steps`` (TimeLimit). Requests where no victim is possible are
    declined without asking the agent (they offer no choice); an episode may thus have no decision at all,
    in which case the first step (any legal action, i.e. 0) ends it.

    ## Arguments
    ``PreemptionEnv(config=None, render_mode=None, **overrides)``: ``config`` is an
    :class:`~schedgym.envs.EnvConfig`; keyword overrides replace its fields (``gymnasium.make(id,
    n_jobs=1000)``), and an unknown one raises a ``TypeError`` ("got an unexpected keyword argument", as
    Python words it; also a :class:`~schedgym.errors.SchedGymError`); the simulator's rules are the field
    ``sim`` (a :class:`~schedgym.sim.SimConfig` or a dict of its fields: ``gymnasium.make(id,
    sim={"max_preemptions": 2})``). ``render_mode``: ``"ansi"`` (text: nodes, queue, the decision) or
    ``"rgb_array"`` (node occupancy image). The action mode and observation: ``action_mode`` (``"victim"`` or
    ``"plan"``), ``observation_version`` (1 or 2), ``max_candidates`` (victim rows), ``max_plans`` (plan rows),
    ``queue_rows`` (version 2's queue rows per class); a row count the mode does not read (``max_plans`` in the
    victim mode, ``max_candidates`` in the plan mode, ``queue_rows`` with version 1) raises
    :class:`~schedgym.errors.ConfigError` unless it is at its default.

    ## Version History
    * v0 (``schedgym/Preemption-v0``, ``schedgym/PreemptionLarge-v0``; retired, see v1): initial release.
      Later, within v0 (observations, actions, rewards and episodes unchanged, checked bit for bit): the
      simulator's rules moved from flat arguments into ``sim``, and the features ``free_*`` were renamed
      ``unused_*``. The bundled agent ``ppo`` was trained on ``schedgym/Preemption-v0``.
    * v1 (``schedgym/Preemption-v1``, ``schedgym/PreemptionLarge-v1``): a change of dynamics only. A TE job the
      agent declined is asked again only when something that could change the answer has changed (a release
      or a new candidate on a node where it could fit after preemptions; docs/semantics.md, step 6 of the
      scheduling pass), and only the oldest TE job of a shape is asked; v0 asked every declined TE job again
      after any release or BE start anywhere. Observations, actions and rewards are as in v0. ``gym.make`` of a
      v0 id raises Gymnasium's ``DeprecatedEnv`` naming v1; an agent saved on a v0 id is evaluated on its v1
      successor (``schedgym.SUPERSEDED``).
    * ``schedgym/PreemptionPlan-v1``: the plan-level action mode with observation version 2, on the dynamics of
      ``schedgym/Preemption-v1``. Observation version 2 is also an option of the victim-by-victim ids
      (``gym.make("schedgym/Preemption-v1", observation_version=2)``); their default stays version 1.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    # "auto": the decision protocol in C++ on the native engine (NativeBackend, the same results); "python"
    # runs schedgym.decision.stepwise on either engine (for tests: schedgym.decision.backend.open_backend).
    _protocol: Literal["auto", "python"] = "auto"

    def __init__(self, config: EnvConfig | None = None, render_mode: str | None = None, **overrides: Any):
        if config is not None and not isinstance(config, EnvConfig):
            raise ConfigError(f"Expected config to be an EnvConfig or None, got {type(config).__name__} {config!r}")
        base = config if config is not None else EnvConfig()
        unknown = sorted(set(overrides) - set(EnvConfig.field_names()))
        if unknown:
            sim_fields = sorted(set(unknown) & set(SimConfig.__dataclass_fields__))
            hint = f" (simulator rules go in sim={{...}}: sim={{{sim_fields[0]!r}: ...}})" if sim_fields else ""
            others = f" (unknown: {unknown})" if len(unknown) > 1 else ""
            raise UnknownArgumentError(
                f"PreemptionEnv.__init__() got an unexpected keyword argument {unknown[0]!r}{others}; expected "
                f"fields of EnvConfig{hint}"
            )
        self.config = replace(base, **overrides) if overrides else base
        if render_mode is not None and (
            not isinstance(render_mode, str) or render_mode not in self.metadata["render_modes"]
        ):
            raise ConfigError(f"Expected render_mode in {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.cluster: ClusterSpec = resolve_cluster(self.config.cluster_name)
        self.source = self.config.source
        self._trace: Workload | None = None  # the jobs trace episodes are cut from
        self._estimate_noise = self.config.estimate_noise  # a mix level's own replaces it at reset
        if self.source.kind not in ("synthetic", "mix"):
            self._trace = self.source.pool(self.config.split)
            self._trace.check_fits(self.cluster)
        self.decision_spec = spec = self.config.decision_spec
        flat = spaces.Box(0.0, 1.0, shape=(spec.observation_size,), dtype=np.float32)
        self.observation_space: spaces.Space[Any] = flat
        if self.config.observation == "dict":
            mask = spaces.Box(0.0, 1.0, shape=(spec.n_actions,), dtype=np.float32)
            # (keys in the order Gymnasium's Dict space keeps them: sorted)
            self.observation_space = spaces.Dict({"action_mask": mask, "observations": flat})
        self.action_space = MaskedDiscrete(spec.n_actions, mask_fn=self.action_masks)
        self.reward_config = Reward(
            te_weight=self.config.te_weight,
            be_weight=self.config.be_weight,
            preemption_cost=self.config.preemption_cost,
            bounded=self.config.reward != "slowdown",
        )
        self._backend: DecisionBackend | None = None
        self._n_illegal = 0  # illegal actions taken as waits in this episode (illegal_action="wait")

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            if not is_integer(seed) or seed < 0:
                raise ConfigError(f"Expected seed to be an integer >= 0 or None, got {seed!r}")
            seed = int(seed)
        if options is not None and not isinstance(options, dict):
            raise ConfigError(f"Expected options to be a dict or None, got {type(options).__name__} {options!r}")
        super().reset(seed=seed)
        workload = self._draw_workload(options or {})
        self._workload = workload
        self._backend = open_backend(
            self.cluster,
            workload.table,
            self.config.sim,
            spec=self.decision_spec,
            estimate_noise=self._estimate_noise,
            rng=self.np_random,
            protocol=self._protocol,
        )
        self._n_illegal = 0
        info = self._info(interval=self.sim.now, parts=(0.0, 0.0, 0.0))
        return self._observe(self._backend), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        backend = self._backend
        if backend is None:
            raise SchedGymError("step() called on a finished episode (or before reset()); call reset() first")
        start = backend.sim.now
        if self.config.illegal_action == "wait" and not backend.ended:
            a = action_index(action)  # not an integer (True, 1.5): an error still
            if not 0 <= a <= (backend.n_rows if backend.job >= 0 else 0):
                action = 0
                self._n_illegal += 1
        n_preempted = backend.step(action)  # checks the action first
        parts = self.reward_config.parts(backend, n_preempted)
        reward = parts[0] + parts[1] + parts[2]
        info = self._info(interval=backend.sim.now - start, parts=parts)
        return self._observe(backend), float(reward), backend.done, False, info

    def action_masks(self) -> np.ndarray:
        """Legal actions of the current decision (bool, shape ``(max_candidates + 1,)`` victim by victim,
        ``(max_plans,)`` plan by plan); 0 is always legal."""
        if self._backend is None:
            mask = np.zeros(self.decision_spec.n_actions, dtype=bool)
            mask[0] = True
            return mask
        return self._backend.mask()

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'")
            return None
        if self._backend is None:
            raise SchedGymError("render() called before reset()")
        if self.render_mode == "ansi":
            return render_ansi(self)
        return render_rgb(self)

    # ------------------------------------------------------------------ the episode
    @property
    def backend(self) -> DecisionBackend:
        """The episode's simulation and decision protocol (:mod:`schedgym.decision.backend`), built at reset."""
        if self._backend is None:
            raise SchedGymError("no episode yet: call reset() first")
        return self._backend

    @property
    def sim(self) -> Simulator:
        """The episode's simulator."""
        return self.backend.sim

    @property
    def n_steps(self) -> int:
        """Steps taken in this episode."""
        return self._backend.n_steps if self._backend is not None else 0

    @property
    def n_decisions(self) -> int:
        """Decisions offered in this episode so far."""
        return self._backend.n_decisions if self._backend is not None else 0

    @property
    def pending_request(self) -> PreemptionRequest | None:
        """The simulator's request behind the current decision (None at the end of an episode)."""
        return self._backend.request if self._backend is not None else None

    @property
    def plan_options(self) -> list[PlanOption]:
        """Plan mode: the options of the decision in progress, action ``i`` taking option ``i`` (empty in the
        victim mode and at the end of an episode)."""
        view = self._backend.view() if self._backend is not None else None
        return list(view.options) if isinstance(view, PlanDecision) else []

    @property
    def decision(self) -> StepwiseDecision | PlanDecision | NativeDecision | None:
        """The decision in progress (rows, chosen victims, mask), or None at the end of an episode. On the native
        engine, a read-only :class:`~schedgym.decision.backend.NativeDecision` (the protocol runs in C++)."""
        return self._backend.view() if self._backend is not None else None

    @property
    def candidate_rows(self) -> list[tuple[Job, int]]:
        """``(job, node)`` of each candidate row; action ``i`` preempts row ``i - 1``."""
        return self._backend.rows() if self._backend is not None else []

    @property
    def chosen_victims(self) -> list[Job]:
        return self._backend.chosen() if self._backend is not None else []

    # ------------------------------------------------------------------ copying
    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        # The action space was pickled as a plain Discrete (MaskedDiscrete.__reduce__): bind it to this copy.
        plain = self.action_space
        assert isinstance(plain, spaces.Discrete)
        self.action_space = MaskedDiscrete.bound_to(plain, self.action_masks)

    def _observe(self, backend: DecisionBackend) -> Any:
        obs = backend.observe()
        if self.config.observation == "dict":
            return {"action_mask": backend.mask().astype(np.float32), "observations": obs}
        return obs

    # ------------------------------------------------------------------ info
    def _info(self, interval: float, parts: tuple[float, float, float]) -> dict[str, Any]:
        backend = self._backend
        assert backend is not None
        sim = backend.sim
        job = backend.job
        # Flat numbers of one type for the whole episode (RL libraries store info in typed buffers: a None or a
        # dict breaks Tianshou's and TorchRL's); the names and the dict only with info="full".
        info: dict[str, Any] = {
            "sim_time": sim.now,
            "interval": interval,
            "action_mask": backend.mask(),
            "te_job": job,
            "n_candidates": backend.n_rows,
            "decisions": backend.n_decisions,
            "preemptions": sim.n_preemptions,
            "reward_te": parts[0],
            "reward_be": parts[1],
            "reward_preemption": parts[2],
        }
        if self.config.illegal_action == "wait":
            info["illegal_actions"] = self._n_illegal
        if self.config.info == "full":
            info["te_job_id"] = backend.table.job_ids[job] if job >= 0 else None
            info["reward_parts"] = {"te_slowdown": parts[0], "be_slowdown": parts[1], "preemption": parts[2]}
        return info

    # ------------------------------------------------------------------ workloads
    def _draw_workload(self, options: dict[str, Any]) -> Workload:
        unknown = sorted(set(options) - {"workload", "workload_seed", "window_start"})
        if unknown:
            raise SchedGymError(
                f"Unknown reset options {unknown}; expected 'workload', 'workload_seed' or 'window_start'"
            )
        if "workload" in options:
            wl = options["workload"]
            if not isinstance(wl, Workload):
                raise SchedGymError(f"options['workload'] must be a Workload, got {type(wl).__name__}")
            wl.check_fits(self.cluster)
            return wl
        source = self.source
        if source.kind == "mix":
            return self._draw_level(options)
        if self._trace is not None:
            if "workload_seed" in options:
                raise SchedGymError(
                    "options['workload_seed'] applies to synthetic workloads; a trace takes 'window_start'"
                )
            if "window_start" in options:
                return source.window_at(options["window_start"], split=self.config.split)
        else:
            if "window_start" in options:
                raise SchedGymError(
                    "options['window_start'] applies to traces; a synthetic workload takes 'workload_seed'"
                )
            if "workload_seed" in options:
                return source.seeded(options["workload_seed"], self.cluster)
        return source.episode(self.np_random, self.cluster, split=self.config.split)

    def _draw_level(self, options: dict[str, Any]) -> Workload:
        # A level is a pure function of its seed; the seed comes from np_random (reset's seed), so the same
        # reset seed gives the same episode. The cluster changes with the level; the spaces do not depend on it.
        from schedgym.workloads.distribution import draw_train_level_seed

        if "window_start" in options:
            raise SchedGymError("options['window_start'] applies to traces; 'mix' takes 'workload_seed' (a level seed)")
        if "workload_seed" in options:
            seed = options["workload_seed"]
            if not is_integer(seed) or seed < 0:
                raise ConfigError(f"Expected workload_seed to be a level seed >= 0, got {seed!r}")
        else:
            seed = draw_train_level_seed(self.np_random, self.config.num_levels)
        cluster, workload, noise = self.source.mix_level(int(seed))
        self.cluster = cluster
        self._estimate_noise = noise
        return workload


# The observation table of the docstring comes from the one schema (schedgym.decision.features).
PreemptionEnv.__doc__ = (PreemptionEnv.__doc__ or "").replace(
    "    {observation_table}", "\n".join("    " + line for line in observation_table().splitlines())
)

"""The Gymnasium environment: the simulator's preemption decisions, made by an agent.

The environment only translates: the rules live in :mod:`schedgym.sim` (see ``docs/semantics.md``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from schedgym.decision import (
    DecisionEncoder,
    StepwiseDecision,
    action_index,
    check_action,
    observation_size,
    observation_table,
)
from schedgym.envs.config import EnvConfig
from schedgym.envs.render import render_ansi, render_rgb
from schedgym.errors import ConfigError, IllegalDecisionError, SchedGymError
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.job import Job
from schedgym.sim.native_engine import StepwiseNativeSimulator
from schedgym.sim.policy import DECLINE, PreemptionRequest
from schedgym.sim.simulator import SimConfig, Simulator, is_integer, select_engine
from schedgym.workloads.trace import Workload


class MaskedDiscrete(spaces.Discrete):
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
    ``info["action_mask"]`` give them; ``action_space.sample()`` draws only legal ones; an illegal action
    raises :class:`~schedgym.errors.IllegalDecisionError` naming it and the legal set. An action is an int,
    a numpy integer (or 0-d integer array) or a float equal to an integer; a bool, ``1.5``, ``inf``, NaN, a
    string or a sequence raises the same error (:func:`schedgym.decision.action_index`).

    ## Observation Space
    ``Box(0, 1, (20 + 13 * max_candidates,), float32)``, built from the decision at hand (no copy of the
    cluster state). Resources are divided by the largest node's capacity; times are squashed with
    ``t / (t + scale)``. The layout (generated from :mod:`schedgym.decision.features`):

    {observation_table}

    The remaining-work and duration estimates are true values times a per-job lognormal error with sigma
    ``estimate_noise`` (default 0.3, drawn at reset from ``np_random``): real schedulers know durations only
    approximately. Padded rows are all zeros.

    ## Rewards
    A weighted sum of named parts, each reported in ``info["reward_parts"]``: ``te_slowdown`` and
    ``be_slowdown`` = minus the slowdown accrued since the previous step by every job in the system, a job
    accruing ``1/duration`` per second (``1/max(duration, 10 s)`` with ``reward="bounded_slowdown"``),
    times ``te_weight`` / ``be_weight``; ``preemption`` = minus ``preemption_cost`` per job preempted at this
    step. With the default reward the undiscounted return of a finished episode equals minus the weighted
    sum of job slowdowns (tested). Time before the first decision counts in the first step.

    ## Starting State
    ``reset(seed=...)`` draws a fresh workload of ``n_jobs`` jobs from ``np_random`` (synthetic preset) or a
    random window of the trace, then runs the simulation to the first decision. ``options`` can pin the
    workload: ``{"workload": Workload}``, ``{"workload_seed": s}`` (the same workload that
    ``schedgym compare`` uses for seed ``s``) or, for a trace, ``{"window_start": i}``.

    ## Episode End
    ``terminated`` when the workload has drained (the last step's reward includes everything until then);
    ``truncated`` only from ``max_episode_steps`` (TimeLimit). Requests where no victim is possible are
    declined without asking the agent (they offer no choice); an episode may thus have no decision at all,
    in which case the first step (any legal action, i.e. 0) ends it.

    ## Arguments
    ``PreemptionEnv(config=None, render_mode=None, **overrides)``: ``config`` is an
    :class:`~schedgym.envs.EnvConfig`; keyword overrides replace its fields (``gymnasium.make(id,
    n_jobs=1000)``); the simulator's rules are the field ``sim`` (a :class:`~schedgym.sim.SimConfig` or a
    dict of its fields: ``gymnasium.make(id, sim={"max_preemptions": 2})``). ``render_mode``: ``"ansi"``
    (text: nodes, queue, the decision) or ``"rgb_array"`` (node occupancy image).

    ## Version History
    * v0: initial release. Later, within v0 (observations, actions, rewards and episodes unchanged, checked
      bit for bit): the simulator's rules moved from flat arguments into ``sim``, and the features
      ``free_*`` were renamed ``unused_*``.
    * v1 (``schedgym/Preemption-v1``, ``schedgym/PreemptionLarge-v1``): a change of dynamics only. A TE job the
      agent declined is asked again only when something that could change the answer has changed (a release
      or a new candidate on a node where it could fit after preemptions; docs/semantics.md, step 6 of the
      scheduling pass), and only the oldest TE job of a shape is asked; v0 asked every declined TE job again
      after any release or BE start anywhere. Observations, actions and rewards are as in v0. ``gym.make`` of a
      v0 id raises Gymnasium's ``DeprecatedEnv`` naming v1; an agent saved on a v0 id is evaluated on its v1
      successor (``schedgym.SUPERSEDED``).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    # On the native engine, decisions run in C++ (StepwiseNativeSimulator, the same protocol with the same
    # results); False runs schedgym.decision.stepwise on either engine (for tests).
    _native_decisions = True

    def __init__(self, config: EnvConfig | None = None, render_mode: str | None = None, **overrides: Any):
        if config is not None and not isinstance(config, EnvConfig):
            raise ConfigError(f"Expected config to be an EnvConfig or None, got {type(config).__name__} {config!r}")
        base = config if config is not None else EnvConfig()
        unknown = sorted(set(overrides) - set(EnvConfig.field_names()))
        if unknown:
            sim_fields = sorted(set(unknown) & set(SimConfig.__dataclass_fields__))
            hint = f" (simulator rules go in sim={{...}}: sim={{{sim_fields[0]!r}: ...}})" if sim_fields else ""
            raise ConfigError(f"Unknown PreemptionEnv arguments {unknown}; expected fields of EnvConfig{hint}")
        self.config = replace(base, **overrides) if overrides else base
        if render_mode is not None and (
            not isinstance(render_mode, str) or render_mode not in self.metadata["render_modes"]
        ):
            raise ConfigError(f"Expected render_mode in {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.cluster: ClusterSpec = resolve_cluster(self.config.cluster_name)
        self.source = self.config.source
        self._trace: Workload | None = None  # the jobs trace episodes are cut from
        if self.source.kind != "synthetic":
            self._trace = self.source.pool(self.config.split)
            self._trace.check_fits(self.cluster)
        m = self.config.max_candidates
        self.observation_space = spaces.Box(0.0, 1.0, shape=(observation_size(m),), dtype=np.float32)
        self.action_space = MaskedDiscrete(m + 1, mask_fn=self.action_masks)
        self._weights = (self.config.te_weight, self.config.be_weight)
        self.sim: Simulator | None = None
        self._encoder: DecisionEncoder | None = None
        self._decision: StepwiseDecision | None = None  # the Python protocol's decision in progress
        self._core: Any = None  # on the native engine: the C++ protocol (schedgym.sim._engine.EnvCore)
        self._done = True
        self._ended = True
        self._last_accrued = (0.0, 0.0)
        self.n_decisions = 0
        self.n_steps = 0

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            if not is_integer(seed) or seed < 0:
                raise ConfigError(f"Expected seed to be an integer >= 0 or None, got {seed!r}")
            seed = int(seed)
        if options is not None and not isinstance(options, dict):
            raise ConfigError(f"Expected options to be a dict or None, got {type(options).__name__} {options!r}")
        super().reset(seed=seed)
        workload = self._draw_workload(options or {})
        self._workload = workload
        self.sim = self._make_simulator(workload)
        self._encoder = encoder = DecisionEncoder(
            self.sim.capacity,
            len(workload),
            max_candidates=self.config.max_candidates,
            estimate_noise=self.config.estimate_noise,
            rng=self.np_random,
        )
        self._decision = None
        self._core = None
        if isinstance(self.sim, StepwiseNativeSimulator):  # the protocol in C++, from the same encoder
            enc = encoder
            self._core = self.sim.begin_decisions(enc.max_candidates, enc.estimate, enc.scale, enc.total)
        self._done = False  # the workload has drained
        self._ended = False  # ... and a step has returned terminated=True
        self._last_accrued = (0.0, 0.0)
        self.n_decisions = 0
        self.n_steps = 0
        self._next_decision()
        info = self._info(interval=self.sim.now, parts={"te_slowdown": 0.0, "be_slowdown": 0.0, "preemption": 0.0})
        return self._observation(), info

    def step(self, action: Any):
        if self.sim is None or self._ended:
            raise SchedGymError("step() called on a finished episode (or before reset()); call reset() first")
        decision, core = self._decision, self._core
        n_preempted = 0
        start = self.sim.now
        pending = decision is not None if core is None else core.job >= 0
        if not pending:  # an episode without any decision: this step only ends it
            if action_index(action) != 0:
                raise IllegalDecisionError(f"Action {action!r} is illegal: no decision is pending; legal: [0]")
            self.n_steps += 1
        elif core is not None:  # the native engine's protocol, in C++
            n = self.sim.choose(check_action(action, core.n_rows))
            self.n_steps += 1
            if n >= 0:  # resolved (0: declined)
                n_preempted = n
                self._next_decision()
        else:
            assert decision is not None
            plan = decision.choose(action)  # checks the action first
            self.n_steps += 1
            if plan is not None:
                self.sim.resolve(plan)
                n_preempted = len(plan.victims)
                self._next_decision()
        parts = self._reward_parts(n_preempted)
        reward = parts["te_slowdown"] + parts["be_slowdown"] + parts["preemption"]
        obs = self._observation()
        info = self._info(interval=self.sim.now - start, parts=parts)
        self._ended = self._done
        return obs, float(reward), self._done, False, info

    def action_masks(self) -> np.ndarray:
        """Legal actions of the current decision (bool, shape ``(max_candidates + 1,)``); 0 is always legal."""
        if self._core is not None:
            mask = np.empty(self.config.max_candidates + 1, dtype=bool)
            self._core.mask(mask)
            return mask
        if self._decision is None:
            mask = np.zeros(self.config.max_candidates + 1, dtype=bool)
            mask[0] = True
            return mask
        return self._decision.mask()

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'")
            return None
        if self.sim is None:
            raise SchedGymError("render() called before reset()")
        if self.render_mode == "ansi":
            return render_ansi(self)
        return render_rgb(self)

    # ------------------------------------------------------------------ decisions
    @property
    def pending_request(self) -> PreemptionRequest | None:
        """The simulator's request behind the current decision (None at the end of an episode)."""
        if self._core is not None:
            return self._native_sim.pending_request if self._core.job >= 0 else None
        return self._decision.request if self._decision is not None else None

    @property
    def decision(self) -> StepwiseDecision | NativeDecision | None:
        """The decision in progress (rows, chosen victims, mask), or None at the end of an episode. On the native
        engine, a read-only :class:`NativeDecision` (the protocol runs in C++)."""
        if self._core is not None:
            return NativeDecision(self) if self._core.job >= 0 else None
        return self._decision

    @property
    def candidate_rows(self) -> list[tuple[Job, int]]:
        """``(job, node)`` of each candidate row; action ``i`` preempts row ``i - 1``."""
        if self._core is not None:
            rows = self._core.rows()
            jobs = self._native_sim.decision_jobs([i for i, _ in rows])
            return [(job, node) for job, (_, node) in zip(jobs, rows, strict=True)]
        return list(self._decision.rows) if self._decision is not None else []

    @property
    def chosen_victims(self) -> list[Job]:
        if self._core is not None:
            return self._native_sim.decision_jobs(self._core.chosen())
        return list(self._decision.chosen) if self._decision is not None else []

    @property
    def _native_sim(self) -> StepwiseNativeSimulator:
        assert isinstance(self.sim, StepwiseNativeSimulator)
        return self.sim

    def _make_simulator(self, workload: Workload) -> Simulator:
        config = self.config.sim
        if self._native_decisions and select_engine(config.engine) == "native":
            return StepwiseNativeSimulator(self.cluster, workload.table, config)
        return Simulator(self.cluster, workload.table, config)

    def _next_decision(self) -> None:
        """Advance the simulator to the next request that offers a choice, or to the end."""
        sim, encoder = self.sim, self._encoder
        assert sim is not None and encoder is not None
        if self._core is not None:
            if sim.next_decision():
                self.n_decisions += 1
            else:
                self._done = True
            return
        while (request := sim.advance()) is not None:
            decision = encoder.begin(request)
            if decision.offers_choice:
                self._decision = decision
                self.n_decisions += 1
                return
            sim.resolve(DECLINE)  # no victim can make room: no choice to offer
        self._decision = None
        self._done = True

    # ------------------------------------------------------------------ observation, reward, info
    def _reward_parts(self, n_preempted: int) -> dict[str, float]:
        sim = self.sim
        assert sim is not None
        acc = sim.accrued if self.config.reward == "slowdown" else sim.accrued_bounded
        te, be = acc[0] - self._last_accrued[0], acc[1] - self._last_accrued[1]
        self._last_accrued = (acc[0], acc[1])
        return {
            "te_slowdown": -self._weights[0] * te,
            "be_slowdown": -self._weights[1] * be,
            "preemption": -self.config.preemption_cost * n_preempted,
        }

    def _info(self, interval: float, parts: dict[str, float]) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None
        core = self._core
        if core is not None:
            job = core.job
            te_job = self._workload.table.job_ids[job] if job >= 0 else None
            n_candidates = core.n_rows
        else:
            req = self.pending_request
            te_job = req.job.job_id if req is not None else None
            n_candidates = len(self._decision.rows) if self._decision is not None else 0
        return {
            "sim_time": sim.now,
            "interval": interval,
            "action_mask": self.action_masks(),
            "reward_parts": dict(parts),
            "te_job": te_job,
            "n_candidates": n_candidates,
            "decisions": self.n_decisions,
            "preemptions": sim.n_preemptions,
        }

    def _observation(self) -> np.ndarray:
        if self._core is not None:
            obs = np.empty(self._core.observation_size, dtype=np.float32)
            self._core.observe(obs)
            return obs
        if self._decision is None:
            assert self._encoder is not None
            return self._encoder.empty_observation()
        return self._decision.observe()

    # ------------------------------------------------------------------ copying
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_core"] = None  # a C++ object: the simulator rebuilds it (see StepwiseNativeSimulator)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._core = self.sim.core if isinstance(self.sim, StepwiseNativeSimulator) else None

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


class NativeDecision:
    """The decision in progress of a :class:`PreemptionEnv` on the native engine, where the protocol of
    :class:`~schedgym.decision.StepwiseDecision` runs in C++: the same read-only view (``request``, ``rows``,
    ``chosen``, ``targets``, ``offers_choice``, :meth:`mask`, :meth:`observe`, :meth:`check`). Act through
    ``env.step``."""

    __slots__ = ("_env",)

    def __init__(self, env: PreemptionEnv) -> None:
        self._env = env

    @property
    def encoder(self) -> DecisionEncoder | None:
        return self._env._encoder

    @property
    def request(self) -> PreemptionRequest | None:
        return self._env.pending_request

    @property
    def rows(self) -> list[tuple[Job, int]]:
        return self._env.candidate_rows

    @property
    def chosen(self) -> list[Job]:
        return self._env.chosen_victims

    @property
    def targets(self) -> list[int]:
        core = self._env._core
        return list(core.targets()) if core is not None else []

    @property
    def offers_choice(self) -> bool:
        core = self._env._core
        return core is not None and core.n_rows > 0

    def mask(self) -> np.ndarray:
        return self._env.action_masks()

    def observe(self) -> np.ndarray:
        return self._env._observation()

    def check(self, action: object) -> int:
        core = self._env._core
        return check_action(action, core.n_rows if core is not None else 0)


# The observation table of the docstring comes from the one schema (schedgym.decision.features).
PreemptionEnv.__doc__ = (PreemptionEnv.__doc__ or "").replace(
    "    {observation_table}", "\n".join("    " + line for line in observation_table().splitlines())
)

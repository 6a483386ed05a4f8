"""The Gymnasium environment: the simulator's preemption decisions, made by an agent.

The environment only translates: the rules live in :mod:`schedgym.sim` (see ``docs/semantics.md``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from schedgym.envs.config import EnvConfig
from schedgym.envs.render import render_ansi, render_rgb
from schedgym.errors import IllegalDecisionError, SchedGymError
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.job import Job
from schedgym.sim.policy import DECLINE, PreemptionPlan, PreemptionRequest
from schedgym.sim.simulator import EPS, Simulator
from schedgym.workloads.named import TRACE_WORKLOADS
from schedgym.workloads.synthetic import generate, preset
from schedgym.workloads.trace import Workload, load_trace

TE_FEATURES = (
    "gpus",
    "cpus",
    "mem_gb",
    "gang",
    "wait",
    "duration_estimate",
    "victims_chosen",
    "continuing",
    "missing_gpus",
    "missing_cpus",
    "missing_mem_gb",
)
CLUSTER_FEATURES = (
    "free_gpus",
    "free_cpus",
    "free_mem_gb",
    "reserved_gpus",
    "reserved_cpus",
    "reserved_mem_gb",
    "queued_te",
    "queued_be",
    "running_be",
)
CANDIDATE_FEATURES = (
    "valid",
    "gpus",
    "cpus",
    "mem_gb",
    "node_room_gpus",
    "node_room_cpus",
    "node_room_mem_gb",
    "fits_alone",
    "grace_period",
    "elapsed",
    "preemptions",
    "remaining_estimate",
    "is_gang",
)


def squash(x: float, scale: float) -> float:
    """Map [0, inf) onto [0, 1): x / (x + scale). Keeps unbounded times finite and ordered."""
    return x / (x + scale) if x > 0 else 0.0


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
    raises :class:`~schedgym.errors.IllegalDecisionError` naming it and the legal set.

    ## Observation Space
    ``Box(0, 1, (11 + 9 + 13 * max_candidates,), float32)``, built from the decision at hand (no copy of the
    cluster state). Resources are divided by the largest node's capacity; times are squashed with
    ``t / (t + scale)``.

    | index | feature | meaning |
    |---|---|---|
    | 0-2 | TE gpus, cpus, mem_gb | the waiting job's per-node demand |
    | 3 | TE gang | its gang size / number of nodes |
    | 4 | TE wait | seconds since submission (scale 600 s) |
    | 5 | TE duration_estimate | its duration, estimated (scale 600 s) |
    | 6 | victims_chosen | victims chosen so far in this attempt / max_candidates |
    | 7 | continuing | 1 if this decision continues an attempt |
    | 8-10 | missing gpus, cpus, mem_gb | what the target node still lacks (0 before a target is chosen) |
    | 11-13 | free gpus, cpus, mem_gb | resources not held by running or grace-period jobs, fraction of the cluster |
    | 14-16 | reserved gpus, cpus, mem_gb | free resources set aside for reserved TE jobs, fraction of the cluster |
    | 17 | queued_te | TE jobs waiting, reserved ones included (scale 10) |
    | 18 | queued_be | BE jobs waiting (scale 100) |
    | 19 | running_be | preemptible BE jobs running / (8 x nodes), clipped to 1 |
    | 20 + 13 i + 0 | valid | 1 for a real candidate row, 0 for padding |
    | 20 + 13 i + 1-3 | gpus, cpus, mem_gb | the candidate's per-node demand |
    | 20 + 13 i + 4-6 | node_room gpus, cpus, mem_gb | its node's room for the TE job, counting victims already chosen |
    | 20 + 13 i + 7 | fits_alone | 1 if preempting it (with those already chosen) lets the TE job fit |
    | 20 + 13 i + 8 | grace_period | its grace period (scale 60 s) |
    | 20 + 13 i + 9 | elapsed | seconds since it last started (scale 3600 s) |
    | 20 + 13 i + 10 | preemptions | its preemptions / max_preemptions |
    | 20 + 13 i + 11 | remaining_estimate | its remaining work, estimated (scale 3600 s) |
    | 20 + 13 i + 12 | is_gang | 1 if it runs on several nodes |

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
    n_jobs=1000)``). ``render_mode``: ``"ansi"`` (text: nodes, queue, the decision) or ``"rgb_array"``
    (node occupancy image).

    ## Version History
    * v0: initial release.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: EnvConfig | None = None, render_mode: str | None = None, **overrides: Any):
        base = config if config is not None else EnvConfig()
        unknown = sorted(set(overrides) - set(EnvConfig.field_names()))
        if unknown:
            raise SchedGymError(f"Unknown PreemptionEnv arguments {unknown}; expected fields of EnvConfig")
        self.config = replace(base, **overrides) if overrides else base
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise SchedGymError(f"Expected render_mode in {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.cluster: ClusterSpec = resolve_cluster(self.config.cluster_name)
        self._trace: Workload | None = None
        if self.config.trace is not None:
            self._trace = load_trace(self.config.trace)
        elif self.config.workload in TRACE_WORKLOADS:
            self._trace = TRACE_WORKLOADS[self.config.workload].split_jobs(self.config.split)
        if self._trace is not None:
            self._trace.check_fits(self.cluster)
        cap = self.cluster.capacity
        self._scale = [float(x) if x > 0 else 1.0 for x in cap.max(axis=0)]
        self._total = [float(x) if x > 0 else 1.0 for x in cap.sum(axis=0)]
        m = self.config.max_candidates
        self._n_head = len(TE_FEATURES) + len(CLUSTER_FEATURES)
        self._obs_dim = self._n_head + len(CANDIDATE_FEATURES) * m
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self._obs_dim,), dtype=np.float32)
        self.action_space = MaskedDiscrete(m + 1, mask_fn=self.action_masks)
        w = self.config
        self._weights = (w.te_weight, w.be_weight)
        self.sim: Simulator | None = None
        self._request: PreemptionRequest | None = None
        self._rows: list[tuple[Job, int]] = []
        self._chosen: list[Job] = []
        self._targets: list[int] = []
        self._done = True
        self._ended = True
        self._last_accrued = (0.0, 0.0)
        self._estimate: np.ndarray = np.ones(0)
        self.n_decisions = 0
        self.n_steps = 0

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        workload = self._draw_workload(options or {})
        self._workload = workload
        self.sim = Simulator(self.cluster, workload.jobs, self.config.sim_config())
        noise = self.config.estimate_noise
        n = len(workload.jobs)
        self._estimate = np.exp(self.np_random.normal(0.0, noise, n)) if noise > 0 else np.ones(n)
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
        a = self._check_action(action)
        self.n_steps += 1
        n_preempted = 0
        resolved = True
        if self._request is None:  # an episode without any decision: this step only ends it
            pass
        elif a == 0:
            self.sim.resolve(DECLINE)
        else:
            job, node = self._rows[a - 1]
            self._chosen.append(job)
            if node not in self._targets:
                self._targets.append(node)
            plan = self._complete_plan()
            if plan is None:
                resolved = False
                self._rows = self._candidate_rows()
            else:
                self.sim.resolve(plan)
                n_preempted = len(plan.victims)
        start = self.sim.now
        if resolved:
            self._next_decision()
        parts = self._reward_parts(n_preempted)
        reward = parts["te_slowdown"] + parts["be_slowdown"] + parts["preemption"]
        obs = self._observation()
        info = self._info(interval=self.sim.now - start, parts=parts)
        self._ended = self._done
        return obs, float(reward), self._done, False, info

    def action_masks(self) -> np.ndarray:
        """Legal actions of the current decision (bool, shape ``(max_candidates + 1,)``); 0 is always legal."""
        mask = np.zeros(self.config.max_candidates + 1, dtype=bool)
        mask[0] = True
        mask[1 : 1 + len(self._rows)] = True
        return mask

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
        return self._request

    @property
    def candidate_rows(self) -> list[tuple[Job, int]]:
        """``(job, node)`` of each candidate row; action ``i`` preempts row ``i - 1``."""
        return list(self._rows)

    @property
    def chosen_victims(self) -> list[Job]:
        return list(self._chosen)

    def _next_decision(self) -> None:
        """Advance the simulator to the next request that offers a choice, or to the end."""
        sim = self.sim
        assert sim is not None
        self._chosen = []
        self._targets = []
        while (request := sim.advance()) is not None:
            self._request = request
            self._rows = self._candidate_rows()
            if self._rows:
                self.n_decisions += 1
                return
            sim.resolve(DECLINE)  # no victim can make room: no choice to offer
        self._request = None
        self._rows = []
        self._done = True

    def _room(self) -> dict[int, list[float]]:
        """Per node touched by chosen victims: avail plus what they free there."""
        assert self._request is not None
        avail = self._request.avail
        room: dict[int, list[float]] = {}
        for v in self._chosen:
            d = v.demand
            for n in v.nodes:
                r = room.get(n)
                if r is None:
                    r = room[n] = avail[n].tolist()
                r[0] += d[0]
                r[1] += d[1]
                r[2] += d[2]
        return room

    def _candidate_rows(self) -> list[tuple[Job, int]]:
        req = self._request
        assert req is not None
        d = req.job.demand
        k = req.job.gang_size
        chosen = {v.idx for v in self._chosen}
        room = self._room()
        avail = req.avail
        per_node: list[list[Job]] = []
        nodes: list[int] = []
        fitting = 0  # nodes that already have room
        node_iter = self._targets[:1] if (k == 1 and self._targets) else list(req.candidates)
        for n in node_iter:
            r = room.get(n)
            if r is None:
                r = avail[n].tolist()
            if r[0] >= d[0] - EPS and r[1] >= d[1] - EPS and r[2] >= d[2] - EPS:
                continue
            cands = [c for c in req.candidates.get(n, ()) if c.idx not in chosen]
            g, c_, m = r
            for c in cands:
                g += c.demand[0]
                c_ += c.demand[1]
                m += c.demand[2]
            if g >= d[0] - EPS and c_ >= d[1] - EPS and m >= d[2] - EPS:
                nodes.append(n)
                per_node.append(cands)
        if k > 1:
            fitting = self._n_fitting(room)
            if fitting + len(nodes) < k:
                return []
        rows: list[tuple[Job, int]] = []
        limit = self.config.max_candidates
        depth = 0
        while len(rows) < limit:
            added = False
            for n, cands in zip(nodes, per_node, strict=True):
                if depth < len(cands):
                    rows.append((cands[depth], n))
                    added = True
                    if len(rows) == limit:
                        break
            if not added:
                break
            depth += 1
        return rows

    def _n_fitting(self, room: dict[int, list[float]]) -> int:
        assert self._request is not None
        d = self._request.job.member
        fits = np.asarray((self._request.avail >= d - EPS).all(axis=1))
        for n, r in room.items():
            fits[n] = r[0] >= d[0] - EPS and r[1] >= d[1] - EPS and r[2] >= d[2] - EPS
        return int(fits.sum())

    def _complete_plan(self) -> PreemptionPlan | None:
        """The plan if the chosen victims make room for the TE job, else None."""
        req = self._request
        assert req is not None
        d = req.job.demand
        k = req.job.gang_size
        room = self._room()

        def ok(n: int) -> bool:
            r = room[n] if n in room else req.avail[n].tolist()
            return r[0] >= d[0] - EPS and r[1] >= d[1] - EPS and r[2] >= d[2] - EPS

        victims = tuple(v.idx for v in self._chosen)
        if k == 1:
            return PreemptionPlan(nodes=(self._targets[0],), victims=victims) if ok(self._targets[0]) else None
        # Gang: the nodes the agent targeted, then nodes that already had room, then nodes freed in passing.
        picked = [n for n in self._targets if ok(n)]
        if len(picked) < k:
            free = np.flatnonzero((req.avail >= req.job.member - EPS).all(axis=1)).tolist()
            picked += [n for n in free if n not in picked][: k - len(picked)]
        if len(picked) < k:
            picked += [n for n in sorted(room) if n not in picked and ok(n)][: k - len(picked)]
        if len(picked) < k:
            return None
        return PreemptionPlan(nodes=tuple(picked[:k]), victims=victims)

    def _check_action(self, action: Any) -> int:
        try:
            a = int(action)
            if a != action:
                raise ValueError
        except (TypeError, ValueError):
            raise IllegalDecisionError(f"Expected an integer action, got {action!r}") from None
        if not (0 <= a <= len(self._rows)):
            legal = list(range(len(self._rows) + 1))
            raise IllegalDecisionError(
                f"Action {a} is illegal in this decision; legal actions are {legal} "
                f"(0 = preempt nothing, i = candidate row i-1); use action_masks()"
            )
        return a

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
        req = self._request
        return {
            "sim_time": sim.now,
            "interval": interval,
            "action_mask": self.action_masks(),
            "reward_parts": dict(parts),
            "te_job": req.job.job_id if req is not None else None,
            "n_candidates": len(self._rows),
            "decisions": self.n_decisions,
            "preemptions": sim.n_preemptions,
        }

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self._obs_dim, dtype=np.float32)
        req = self._request
        sim = self.sim
        assert sim is not None
        if req is None:
            return obs
        sg, sc, sm = self._scale
        job = req.job
        now = sim.now
        d = job.demand
        room = self._room()
        missing = (0.0, 0.0, 0.0)
        if self._targets:
            r = room.get(self._targets[0]) or req.avail[self._targets[0]].tolist()
            missing = (max(d[0] - r[0], 0.0) / sg, max(d[1] - r[1], 0.0) / sc, max(d[2] - r[2], 0.0) / sm)
        free = sim.unused.sum(axis=0).tolist()
        held = sim.held.sum(axis=0).tolist()
        tg, tc, tm = self._total
        q_te, q_be = sim.queue_lengths
        n_be = len(set().union(*req.candidates.values())) if req.candidates else 0
        head = [
            d[0] / sg,
            d[1] / sc,
            d[2] / sm,
            job.gang_size / self.cluster.n_nodes,
            squash(now - job.submit_time, 600.0),
            squash(job.duration * float(self._estimate[job.idx]), 600.0),
            min(1.0, len(self._chosen) / self.config.max_candidates),
            1.0 if self._chosen else 0.0,
            *missing,
            free[0] / tg,
            free[1] / tc,
            free[2] / tm,
            held[0] / tg,
            held[1] / tc,
            held[2] / tm,
            squash(q_te, 10.0),
            squash(q_be, 100.0),
            min(1.0, n_be / (8.0 * self.cluster.n_nodes)),
        ]
        rows: list[float] = []
        cap_p = max(self.config.max_preemptions, 1)
        for c, n in self._rows:
            r = room.get(n) or req.avail[n].tolist()
            cd = c.demand
            fits = r[0] + cd[0] >= d[0] - EPS and r[1] + cd[1] >= d[1] - EPS and r[2] + cd[2] >= d[2] - EPS
            elapsed = now - c.run_start
            remaining = max(c.remaining - max(0.0, elapsed - c.run_overhead), 0.0)
            rows.extend(
                (
                    1.0,
                    cd[0] / sg,
                    cd[1] / sc,
                    cd[2] / sm,
                    r[0] / sg,
                    r[1] / sc,
                    r[2] / sm,
                    1.0 if fits else 0.0,
                    squash(c.grace_period, 60.0),
                    squash(elapsed, 3600.0),
                    min(1.0, c.preemptions / cap_p),
                    squash(remaining * float(self._estimate[c.idx]), 3600.0),
                    1.0 if c.gang_size > 1 else 0.0,
                )
            )
        obs[: self._n_head] = head
        if rows:
            obs[self._n_head : self._n_head + len(rows)] = rows
        np.clip(obs, 0.0, 1.0, out=obs)  # float noise in resource sums must not leave the Box
        return obs

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
        if self._trace is not None:
            if "workload_seed" in options:
                raise SchedGymError(
                    "options['workload_seed'] applies to synthetic workloads; a trace takes 'window_start'"
                )
            jobs = self._trace.jobs
            n = min(self.config.n_jobs, len(jobs))
            start = options.get("window_start")
            if start is None:
                start = int(self.np_random.integers(0, len(jobs) - n + 1))
            if not (isinstance(start, (int, np.integer)) and 0 <= start <= len(jobs) - n):
                raise SchedGymError(f"Expected window_start in [0, {len(jobs) - n}], got {start!r}")
            window = sorted(jobs[start : start + n], key=lambda j: j.submit_time)
            t0 = window[0].submit_time
            shifted = tuple(replace(j, submit_time=j.submit_time - t0) for j in window)
            return Workload(shifted, name=f"{self._trace.name}[{start}:{start + n}]")
        if "window_start" in options:
            raise SchedGymError("options['window_start'] applies to traces; a synthetic workload takes 'workload_seed'")
        synth = preset(self.config.workload, n_jobs=self.config.n_jobs)
        if "workload_seed" in options:
            seed = options["workload_seed"]
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
                raise SchedGymError(f"Expected options['workload_seed'] to be an integer >= 0, got {seed!r}")
            rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0]))
        else:
            rng = self.np_random
        return generate(synth, self.cluster, rng, name=self.config.workload)

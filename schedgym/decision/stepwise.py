"""The victim-by-victim decision protocol: a simulator request as observations, masks and actions.

A :class:`~schedgym.sim.policy.PreemptionRequest` asks for a whole plan at once (nodes and victims). A
learned agent picks one victim per action instead, from a fixed number of candidate rows:

- action 0 = preempt nothing (the TE job waits; it is offered again after the cluster gains resources or
  candidates), or abandon the attempt in progress;
- action ``i >= 1`` = preempt candidate row ``i - 1``. If the TE job still does not fit, the decision goes on
  for the same job, the candidates restricted to what can complete the placement (the chosen victim's
  node, for a single-node job); once it fits, the chosen victims form the plan.

Rows are running preemptible BE jobs on nodes where the TE job could fit once they are gone; a gang victim
appears once per node it occupies. Their order is policy-neutral: round-robin over the feasible nodes in
node order, each node's candidates by job index, cut after ``max_candidates`` (so every feasible node keeps
its first candidates).

This module knows nothing of gymnasium: the environment (:mod:`schedgym.envs`) and learned agents deciding
inside :meth:`Simulator.run <schedgym.sim.simulator.Simulator.run>` (:mod:`agents.learned`) both use it, so
the two make identical decisions.
"""

from __future__ import annotations

import operator
from typing import SupportsIndex, cast

import numpy as np

from schedgym.decision.features import N_HEAD, layout, observation_size, squash
from schedgym.decision.scalefree import ScaleFreeObserver
from schedgym.errors import ConfigError, IllegalDecisionError
from schedgym.sim.job import Job, JobTable
from schedgym.sim.policy import DECLINE, PreemptionPlan, PreemptionRequest
from schedgym.sim.resources import covers, fits_on


class DecisionEncoder:
    """The protocol for one simulation: normalisers, the per-job duration estimates, the row limit.

    Args:
        capacity: per-node capacities, shape (n_nodes, 3).
        n_jobs: jobs in the workload.
        max_candidates: candidate rows per observation.
        estimate_noise: sigma of the lognormal error of duration and remaining-work estimates (0 = exact):
            real schedulers know durations only approximately. One factor per job, drawn here from ``rng``.
        rng: the generator for those factors.
        table: the workload, for observation version 2 (None: version 1).
        queue_rows: version 2's queue rows per job class.
    """

    mode = "victim"

    def __init__(
        self,
        capacity: np.ndarray,
        n_jobs: int,
        *,
        max_candidates: int,
        estimate_noise: float,
        rng: np.random.Generator,
        table: JobTable | None = None,
        queue_rows: int = 0,
    ) -> None:
        if not isinstance(max_candidates, (int, np.integer)) or max_candidates < 1:
            raise ConfigError(f"Expected max_candidates >= 1, got {max_candidates!r}")
        self.max_candidates = int(max_candidates)
        self.n_actions = self.max_candidates + 1
        self.n_nodes = len(capacity)
        self.scale = [float(x) if x > 0 else 1.0 for x in capacity.max(axis=0)]
        self.total = [float(x) if x > 0 else 1.0 for x in capacity.sum(axis=0)]
        self.estimate = draw_estimates(estimate_noise, n_jobs, rng)
        # Observation version 2 (schedgym.decision.scalefree) when the workload is given.
        self.observer: ScaleFreeObserver | None = None
        if table is not None:
            self.observer = ScaleFreeObserver(
                capacity, table, self.estimate, mode="victim", n_rows=self.max_candidates, queue_rows=queue_rows
            )
        self.size = observation_size(self.max_candidates) if self.observer is None else self.observer.size
        # The features' normalisers, from their one declaration (schedgym.decision.features); the native
        # decision core is built with the same values (StepwiseNativeSimulator.begin_decisions).
        # Read here, not at import, so that the layout is the declaration's as it stands.
        self.layout = lay = layout()
        self.head_names = lay.head_names
        self.row_names = lay.row_names
        self.head_scale = lay.head_scale
        self.row_scale = lay.row_scale

    @classmethod
    def for_run(
        cls, request: PreemptionRequest, *, max_candidates: int, estimate_noise: float, rng: np.random.Generator
    ) -> DecisionEncoder:
        """The encoder (observation version 1) of the simulation ``request`` comes from, for a policy deciding
        inside it (built at its first request, when the workload's size is known; the estimate noise is drawn
        then, once per run, as the environment draws it at reset)."""
        return cls(
            request.capacity, request.n_jobs, max_candidates=max_candidates, estimate_noise=estimate_noise, rng=rng
        )

    def begin(self, request: PreemptionRequest) -> StepwiseDecision:
        """Start deciding ``request``; check :attr:`StepwiseDecision.offers_choice` before asking anyone."""
        return StepwiseDecision(self, request)

    def empty_observation(self) -> np.ndarray:
        """The observation when no decision is pending (the end of an episode): all zeros."""
        return np.zeros(self.size, dtype=np.float32)


class StepwiseDecision:
    """One request being decided victim by victim. Read :attr:`rows`, :meth:`mask`, :meth:`observe`;
    answer with :meth:`choose`."""

    def __init__(self, encoder: DecisionEncoder, request: PreemptionRequest) -> None:
        self.encoder = encoder
        self.request = request
        self.chosen: list[Job] = []
        self.targets: list[int] = []  # nodes of the chosen victims' rows, in order of choice
        self.rows: list[tuple[Job, int]] = self._candidate_rows()

    @property
    def offers_choice(self) -> bool:
        """False if no victim can make room: the request is then declined without asking."""
        return bool(self.rows)

    def mask(self) -> np.ndarray:
        """Legal actions (bool, shape ``(max_candidates + 1,)``); 0 is always legal."""
        mask = np.zeros(self.encoder.max_candidates + 1, dtype=bool)
        mask[: 1 + len(self.rows)] = True
        return mask

    def check(self, action: object) -> int:
        """``action`` as an int if it is legal, else :class:`IllegalDecisionError` naming the legal set
        (:func:`check_action`)."""
        return check_action(action, len(self.rows))

    def choose(self, action: object) -> PreemptionPlan | None:
        """Apply one action: :data:`DECLINE` for 0, the plan once the chosen victims make room, or None when
        the decision goes on (the rows are then recomputed for the same job)."""
        a = self.check(action)
        if a == 0:
            return DECLINE
        job, node = self.rows[a - 1]
        self.chosen.append(job)
        if node not in self.targets:
            self.targets.append(node)
        plan = self._complete_plan()
        if plan is None:
            self.rows = self._candidate_rows()
        return plan

    # ------------------------------------------------------------------ rows and plans
    def _room(self) -> dict[int, list[float]]:
        """Per node touched by chosen victims: avail plus what they free there."""
        avail = self.request.avail
        room: dict[int, list[float]] = {}
        for v in self.chosen:
            d = v.demand
            for n in v.nodes:
                r = room.get(n)
                if r is None:
                    r = room[n] = avail[n].tolist()
                r[0] += d[0]
                r[1] += d[1]
                r[2] += d[2]
        return room

    def _room_on(self, room: dict[int, list[float]], n: int) -> list[float]:
        r = room.get(n)
        return r if r is not None else self.request.avail[n].tolist()

    def _candidate_rows(self) -> list[tuple[Job, int]]:
        req = self.request
        d = req.job.demand
        k = req.job.gang_size
        chosen = {v.idx for v in self.chosen}
        room = self._room()
        per_node: list[list[Job]] = []
        nodes: list[int] = []
        node_iter = self.targets[:1] if (k == 1 and self.targets) else list(req.candidates)
        for n in node_iter:
            r = self._room_on(room, n)
            if covers(r, d):
                continue
            cands = [c for c in req.candidates.get(n, ()) if c.idx not in chosen]
            g, c_, m = r
            for c in cands:
                g += c.demand[0]
                c_ += c.demand[1]
                m += c.demand[2]
            if covers((g, c_, m), d):
                nodes.append(n)
                per_node.append(cands)
        if k > 1 and self._n_fitting(room) + len(nodes) < k:
            return []
        rows: list[tuple[Job, int]] = []
        limit = self.encoder.max_candidates
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
        """Nodes where the TE job fits now, counting what the chosen victims free."""
        fits = np.asarray(fits_on(self.request.avail, self.request.job.member))
        d = self.request.job.demand
        for n, r in room.items():
            fits[n] = covers(r, d)
        return int(fits.sum())

    def _complete_plan(self) -> PreemptionPlan | None:
        """The plan if the chosen victims make room for the TE job, else None."""
        req = self.request
        d = req.job.demand
        k = req.job.gang_size
        room = self._room()
        victims = tuple(v.idx for v in self.chosen)
        if k == 1:
            target = self.targets[0]
            return PreemptionPlan(nodes=(target,), victims=victims) if covers(self._room_on(room, target), d) else None
        # Gang: the nodes the agent targeted, then nodes that already had room, then nodes freed in passing.
        picked = [n for n in self.targets if covers(self._room_on(room, n), d)]
        if len(picked) < k:
            fitting = fits_on(req.avail, req.job.member).nonzero()[0].tolist()
            picked += [n for n in fitting if n not in picked][: k - len(picked)]
        if len(picked) < k:
            picked += [n for n in sorted(room) if n not in picked and covers(room[n], d)][: k - len(picked)]
        if len(picked) < k:
            return None
        return PreemptionPlan(nodes=tuple(picked[:k]), victims=victims)

    # ------------------------------------------------------------------ observation
    @property
    def n_rows(self) -> int:
        """Candidate rows (legal actions are 0 to ``n_rows``)."""
        return len(self.rows)

    def observe(self) -> np.ndarray:
        """The observation of this decision (a fresh float32 array, layout in :mod:`schedgym.decision.features`)."""
        if self.encoder.observer is not None:
            return self._observe_v2(self.encoder.observer)
        enc = self.encoder
        req = self.request
        obs = np.zeros(enc.size, dtype=np.float32)
        sg, sc, sm = enc.scale
        hs, rs = enc.head_scale, enc.row_scale
        job = req.job
        now = req.now
        d = job.demand
        room = self._room()
        missing = (0.0, 0.0, 0.0)
        if self.targets:
            r = self._room_on(room, self.targets[0])
            missing = (max(d[0] - r[0], 0.0) / sg, max(d[1] - r[1], 0.0) / sc, max(d[2] - r[2], 0.0) / sm)
        unused = (req.avail + req.held).sum(axis=0).tolist()
        held = req.held.sum(axis=0).tolist()
        tg, tc, tm = enc.total
        q_te, q_be = req.queued
        n_be = len(set().union(*req.candidates.values())) if req.candidates else 0
        head = {
            "gpus": d[0] / sg,
            "cpus": d[1] / sc,
            "mem_gb": d[2] / sm,
            "gang": job.gang_size / enc.n_nodes,
            "wait": squash(now - job.submit_time, hs["wait"]),
            "duration_estimate": squash(job.duration * float(enc.estimate[job.idx]), hs["duration_estimate"]),
            "victims_chosen": min(1.0, len(self.chosen) / enc.max_candidates),
            "continuing": 1.0 if self.chosen else 0.0,
            "missing_gpus": missing[0],
            "missing_cpus": missing[1],
            "missing_mem_gb": missing[2],
            "unused_gpus": unused[0] / tg,
            "unused_cpus": unused[1] / tc,
            "unused_mem_gb": unused[2] / tm,
            "reserved_gpus": held[0] / tg,
            "reserved_cpus": held[1] / tc,
            "reserved_mem_gb": held[2] / tm,
            "queued_te": squash(q_te, hs["queued_te"]),
            "queued_be": squash(q_be, hs["queued_be"]),
            "running_be": min(1.0, n_be / (hs["running_be"] * enc.n_nodes)),
        }
        values = [head[name] for name in enc.head_names]  # KeyError: a feature declared, not computed
        cap_p = max(req.max_preemptions, 1)
        for c, n in self.rows:
            r = self._room_on(room, n)
            cd = c.demand
            elapsed = now - c.run_start
            remaining = max(c.remaining - max(0.0, elapsed - c.run_overhead), 0.0)
            row = {
                "valid": 1.0,
                "gpus": cd[0] / sg,
                "cpus": cd[1] / sc,
                "mem_gb": cd[2] / sm,
                "node_room_gpus": r[0] / sg,
                "node_room_cpus": r[1] / sc,
                "node_room_mem_gb": r[2] / sm,
                "fits_alone": 1.0 if covers((r[0] + cd[0], r[1] + cd[1], r[2] + cd[2]), d) else 0.0,
                "grace_period": squash(c.grace_period, rs["grace_period"]),
                "elapsed": squash(elapsed, rs["elapsed"]),
                "preemptions": min(1.0, c.preemptions / cap_p),
                "remaining_estimate": squash(remaining * float(enc.estimate[c.idx]), rs["remaining_estimate"]),
                "is_gang": 1.0 if c.gang_size > 1 else 0.0,
            }
            values.extend(row[name] for name in enc.row_names)
        obs[: len(values)] = values
        np.clip(obs, 0.0, 1.0, out=obs)  # float noise in resource sums must not leave the Box
        return obs

    def _observe_v2(self, obs: ScaleFreeObserver) -> np.ndarray:
        req = self.request
        d = req.job.demand
        sg, sc, sm = obs.scale
        medians = obs.scales.medians(req.now)
        room = self._room()
        extra = {"victims_chosen": min(1.0, len(self.chosen) / self.encoder.max_candidates)}
        if self.chosen:
            r = self._room_on(room, self.targets[0])
            extra["continuing"] = 1.0
            extra["missing_gpus"] = max(d[0] - r[0], 0.0) / sg
            extra["missing_cpus"] = max(d[1] - r[1], 0.0) / sc
            extra["missing_mem_gb"] = max(d[2] - r[2], 0.0) / sm
        rows = [obs.victim_row(req, c, self._room_on(room, n), medians) for c, n in self.rows]
        queue_jobs = obs.queued(req)
        return obs.assemble(obs.head(req, medians, extra), obs.queue(req, queue_jobs, medians), rows)


def draw_estimates(noise: float, n_jobs: int, rng: np.random.Generator) -> np.ndarray:
    """Per job, the factor its true duration (and remaining work) is multiplied by to give its estimate:
    ``exp(N(0, noise))`` drawn from ``rng``, or exactly 1 with ``noise`` 0 (nothing drawn)."""
    if not (np.isfinite(noise) and noise >= 0):
        raise ConfigError(f"Expected estimate_noise >= 0, got {noise!r}")
    return np.exp(rng.normal(0.0, noise, n_jobs)) if noise > 0 else np.ones(n_jobs)


def action_index(action: object) -> int:
    """``action`` as a Python int if it is an integer action, else :class:`IllegalDecisionError`.

    An integer action is an int, a numpy integer or a 0-d integer array (what stable-baselines3 and
    ``Discrete.sample()`` give), another object with ``__index__``, or a float equal to an integer (``1.0``,
    as a float array of actions holds it). Refused: bools (``True`` is not action 1), floats that are not
    integers, infinite or NaN, strings, None, sequences and arrays of one or more dimensions. The one check
    of every way to act: the environment's ``step`` on either engine, the vector environment's (element by
    element) and :meth:`StepwiseDecision.check`."""
    if type(action) is int:
        return action
    value = action[()] if isinstance(action, np.ndarray) and action.ndim == 0 else action
    if isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, (int, np.integer)):
        return int(value)
    elif isinstance(value, (float, np.floating)):
        if abs(value) <= 2**53 and float(value).is_integer():  # False for NaN and infinities
            return int(value)
    elif hasattr(type(value), "__index__"):  # another integer type (a 0-d integer tensor...)
        try:
            return operator.index(cast(SupportsIndex, value))
        except (TypeError, ValueError):
            pass
    raise IllegalDecisionError(f"Expected an integer action, got {action!r}")


def check_action(action: object, n_rows: int, what: str = "candidate row i-1") -> int:
    """``action`` as an int if it is legal in a decision with ``n_rows`` rows besides waiting (0 to ``n_rows``),
    else :class:`IllegalDecisionError` naming the legal set (:func:`action_index` first); ``what`` says what
    action ``i`` is."""
    a = action_index(action)
    if not 0 <= a <= n_rows:
        raise IllegalDecisionError(
            f"Action {a} is illegal in this decision; legal actions are {list(range(n_rows + 1))} "
            f"(0 = preempt nothing, i = {what}); use action_masks()"
        )
    return a


__all__ = ["N_HEAD", "DecisionEncoder", "StepwiseDecision", "action_index", "check_action", "draw_estimates"]

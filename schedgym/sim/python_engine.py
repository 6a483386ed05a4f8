"""The Python engine: the readable, executable specification of the simulator.

The rules are written out in ``docs/semantics.md``; this module implements them, and the native engine
(``schedgym/sim/native/``) is held to it by differential tests. Select it with ``SimConfig(engine="python")``
or ``SCHEDGYM_ENGINE=python``; :class:`~schedgym.sim.simulator.Simulator` documents the API both share.

Hot-path design (why it scales):
- The event queue is a heap of ``(time, kind, seq, job, epoch)``; ``kind`` orders equal times
  (completions, then releases, then arrivals), ``seq`` makes the rest pop in a fixed order, and ``epoch``
  lets a preempted job's completion event go stale instead of being searched for and removed.
- Pending jobs are grouped by *shape* (class, per-node demand, gang size). Jobs of one shape fit or fail
  together, so a scheduling pass tries only the head of each shape, and a shape that failed stays
  "blocked" until resources are freed: a pass costs O(shapes), not O(queued jobs).
- Per-node availability is a numpy array updated in place; placement is a few vector operations.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from schedgym.errors import IllegalDecisionError
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import Job, JobClass, JobSpec, JobState, build_jobs
from schedgym.sim.metrics import TAU, RunResult, Segment, build_result
from schedgym.sim.policy import PreemptionPlan, PreemptionRequest, QueueDiscipline
from schedgym.sim.resources import EPS, covers, fits_on, shortfall, total_demand
from schedgym.sim.simulator import SimConfig, Simulator

# Event kinds; the number is also the tie-break priority at equal times: resources are freed before new
# jobs arrive, so an arrival sees everything released at its own instant.
_COMPLETE, _RELEASE, _ARRIVE = 0, 1, 2


class PythonSimulator(Simulator):
    """The Python engine (see :class:`~schedgym.sim.simulator.Simulator` for the API)."""

    engine = "python"
    # The state Simulator declares read-only, kept here as plain attributes (the hot path reads and writes them).
    now: float
    jobs: list[Job]
    avail: np.ndarray
    held: np.ndarray
    accrued: list[float]
    accrued_bounded: list[float]
    n_preemptions: int
    n_requests: int
    segments: list[Segment]
    # The attributes clone() shares between copies (beyond scalars): none of them changes after construction.
    _CLONE_SHARES = frozenset(
        ("cluster", "config", "capacity", "_capacity_rows", "_shape_te", "_inv_duration", "_inv_bounded")
        + ("_shape_demand", "_shape_demand_eps", "_shape_rows", "_shape_k_arr")
    )

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[JobSpec],
        config: SimConfig | None = None,
        *,
        preemption: bool = True,
    ) -> None:
        self._set_up(cluster, config, preemption)
        # unused = avail + held. held: free resources already set aside for reserved TE jobs (taken from what
        # was free at the decision, or handed over by victims as they release); avail: what anyone may use.
        self.held = np.zeros_like(self.capacity)
        self.avail = self.capacity.copy()
        self.now = 0.0
        self.jobs = []
        self._running_on: list[set[int]] = [set() for _ in cluster.nodes]
        # Preemption candidates per node, kept up to date so that a decision does not scan every job.
        self._cand_on: list[set[int]] = [set() for _ in cluster.nodes]
        self._events: list[tuple[float, int, int, int, int]] = []
        self._seq = 0  # creation order of events (the heap's tie-break); an int, so that clone() copies it
        self._queues: dict[int, list[tuple[tuple[Any, ...], int]]] = {}  # shape id -> heap of (queue key, job idx)
        self._blocked: set[int] = set()  # shape ids known not to fit until resources are freed
        self._nonempty: set[int] = set()  # shape ids with at least one queued job
        self._unknown: set[int] = set()  # nonempty shapes not known to be blocked
        self._n_te_queued = 0  # TE jobs in the queues (reserved ones are not queued)
        self._n_be_queued = 0
        # Offers go to the oldest queued TE job of each shape (jobs of one shape get the same answer from a
        # rule). A shape whose offer was declined is not offered again until a node where it could fit
        # after preemptions gains resources or a candidate (_offer_again).
        self._declined: set[int] = set()  # queued TE shapes declined since the last change that could help
        self._owed: set[int] = set()  # queued TE shapes owed an offer (not declined)
        shape_rows: list[list[float]] = []
        shape_k: list[int] = []
        self._shape_te: list[bool] = []
        self._reserved: list[int] = []  # TE jobs waiting for their victims' grace periods
        self._res_on: list[list[int]] = [[] for _ in cluster.nodes]  # reserved jobs per node, oldest first
        self._in_pass = False
        self._request: PreemptionRequest | None = None
        self._n_done = 0
        self.segments = []
        self.n_preemptions = 0
        self.n_requests = 0  # preemption requests made to the policy (offers)
        # Slowdown accrued so far, per class (index = JobClass): a job in the system accrues 1/duration per
        # second (1/max(duration, TAU) for the bounded variant), so at the end these are the sums of the
        # jobs' slowdowns. The Gymnasium environment's reward is their change between decisions.
        self.accrued = [0.0, 0.0]
        self.accrued_bounded = [0.0, 0.0]
        self._rate = [0.0, 0.0]
        self._rate_bounded = [0.0, 0.0]
        self._priority = self.config.queue == QueueDiscipline.PRIORITY

        self.jobs = build_jobs(jobs, self.capacity)
        for job in self.jobs:
            if job.shape == len(shape_rows):  # shape ids are numbered in order of first appearance
                shape_rows.append(list(job.demand))
                self._shape_te.append(job.spec.job_class == JobClass.TE)
                shape_k.append(job.spec.gang_size)
            self._push(job.spec.submit_time, _ARRIVE, job.idx, 0)
        self._inv_duration = [1.0 / j.spec.duration for j in self.jobs]
        self._inv_bounded = [1.0 / max(j.spec.duration, TAU) for j in self.jobs]
        self._shape_demand = np.array(shape_rows, dtype=np.float64).reshape(-1, 3)
        self._shape_demand_eps = self._shape_demand - EPS
        self._shape_rows = [tuple(r) for r in shape_rows]
        self._shape_k_arr = np.array(shape_k, dtype=np.int64)

    # ------------------------------------------------------------------ public driving interface
    def advance(self, until: float = math.inf) -> PreemptionRequest | None:
        """Run until a TE job needs a preemption decision (returned) or the workload drains (None); or stop
        (None, not ``done``) before processing events later than ``until``. Stopping changes nothing: a later
        ``advance()`` goes on as if it had not stopped."""
        if self._request is not None:
            raise IllegalDecisionError("advance() called while a decision is pending; call resolve() first")
        while True:
            if self._in_pass:
                job = self._schedule_pass()
                if job is not None:
                    # Built after the pass. The pass takes only the jobs it starts out of their queues: this TE
                    # job and those it looked past are still queued (queue_lengths, queued() list them).
                    request = self._request = self._make_request(job)
                    self.n_requests += 1
                    return request
                self._in_pass = False
            if not self._events or self._events[0][0] > until:
                return None
            self._process_events_at(self._events[0][0])
            self._in_pass = True

    def resolve(self, plan: PreemptionPlan) -> None:
        """Apply the answer to the pending request (see :class:`PreemptionPlan` for what is legal)."""
        request = self._request
        if request is None:
            raise IllegalDecisionError("resolve() called with no decision pending")
        job = request.job
        if plan.is_empty:
            if plan.victims:
                raise IllegalDecisionError(f"A plan with victims {plan.victims} must name the nodes to use")
            self._owed.discard(job.shape)
            self._declined.add(job.shape)
        else:
            self._check_plan(request, plan)
            self._apply_plan(job, plan)
        self._request = None

    @property
    def unused(self) -> np.ndarray:
        """Per-node resources that no RUNNING or PREEMPTING job occupies (a fresh array: ``avail + held``).

        ``avail`` is the part anyone may use; ``held`` the part set aside for reserved TE jobs."""
        unused: np.ndarray = self.avail + self.held
        return unused

    @property
    def pending_request(self) -> PreemptionRequest | None:
        return self._request

    @property
    def done(self) -> bool:
        return self._n_done == len(self.jobs)

    def result(self) -> RunResult:
        """Per-job records, run segments and aggregates; only valid once the workload has drained."""
        if not self.done:
            raise IllegalDecisionError(
                f"result() needs a finished simulation; {len(self.jobs) - self._n_done} jobs are unfinished"
            )
        return build_result(self.jobs, self.segments, self.capacity, self.n_preemptions, self.n_requests)

    def clone(self) -> PythonSimulator:
        """An independent simulation in exactly this state (see :meth:`Simulator.clone`).

        A structural copy: the mutable state is copied container by container, what never changes after
        construction (the cluster, the rules, per-shape and per-job constants, the specs) is shared, and so
        are the records of completed jobs, which nothing changes any more. Some 40 times cheaper than
        ``copy.deepcopy`` (``benchmarks/bench_lookahead.py``, docs/engines.md).
        """
        new = object.__new__(type(self))
        d = new.__dict__
        d.update(self.__dict__)  # immutable and scalar state, shared or copied by value; the rest replaced below
        done = JobState.COMPLETED
        d["jobs"] = jobs = [j if j.state is done else j.copy() for j in self.jobs]
        d["avail"] = self.avail.copy()
        d["held"] = self.held.copy()
        d["_running_on"] = [set(x) for x in self._running_on]
        d["_cand_on"] = [set(x) for x in self._cand_on]
        d["_events"] = self._events.copy()  # a heap stays a heap when copied as a list
        d["_queues"] = {shape: q.copy() for shape, q in self._queues.items()}
        for name in ("_blocked", "_nonempty", "_unknown", "_declined", "_owed"):
            d[name] = getattr(self, name).copy()
        d["_reserved"] = self._reserved.copy()
        d["_res_on"] = [r.copy() for r in self._res_on]
        d["segments"] = self.segments.copy()  # of immutable Segments
        for name in ("accrued", "accrued_bounded", "_rate", "_rate_bounded"):
            d[name] = getattr(self, name).copy()
        if self._request is not None:  # the same request (the state has not moved since), on the copy's records
            d["_request"] = new._make_request(jobs[self._request.job.idx])
        return new

    def _rates(self, bounded: bool) -> tuple[float, float]:
        rate = self._rate_bounded if bounded else self._rate
        return rate[0], rate[1]

    # ------------------------------------------------------------------ read-only helpers for policies
    def candidates(self) -> dict[int, list[Job]]:
        """Preemptible jobs per node (RUNNING, BE, fewer than max_preemptions preemptions), by job index."""
        jobs = self.jobs
        return {n: [jobs[i] for i in sorted(c)] for n, c in enumerate(self._cand_on) if c}

    def running_on(self, node: int) -> frozenset[int]:
        return frozenset(self._running_on[node])

    def _queued(self, limit: int) -> tuple[list[Job], list[Job]]:
        # Per class, a best-first walk of that class's shape heaps (jobs of one shape share their class): a
        # frontier heap holds the heap entries whose parents have been taken, starting from every shape's root;
        # taking the oldest (and adding its children, at 2p+1 and 2p+2) yields the class's jobs in queue order.
        # Queue keys of one class compare as (submit time, index) under either discipline, and are unique.
        # O(shapes + limit * log(shapes + limit)) per class; the rest of the queues is not read.
        out: tuple[list[Job], list[Job]] = ([], [])
        if limit == 0:
            return out
        queues = self._queues
        frontier: tuple[list[tuple[tuple[Any, ...], int, int]], ...] = ([], [])
        for shape in self._nonempty:
            frontier[0 if self._shape_te[shape] else 1].append((queues[shape][0][0], shape, 0))
        jobs = self.jobs
        for f, taken in zip(frontier, out, strict=True):
            heapq.heapify(f)
            while f and len(taken) < limit:
                _, shape, pos = heapq.heappop(f)
                q = queues[shape]
                taken.append(jobs[q[pos][1]])
                for child in (2 * pos + 1, 2 * pos + 2):
                    if child < len(q):
                        heapq.heappush(f, (q[child][0], shape, child))
        return out

    @property
    def queue_lengths(self) -> tuple[int, int]:
        """(TE, BE) jobs pending, reserved TE jobs included."""
        return self._n_te_queued + len(self._reserved), self._n_be_queued

    # ------------------------------------------------------------------ events
    def _push(self, time: float, kind: int, idx: int, epoch: int) -> None:
        heapq.heappush(self._events, (time, kind, self._seq, idx, epoch))
        self._seq += 1

    def _process_events_at(self, t: float) -> None:
        events = self._events
        dt = t - self.now
        if dt > 0:  # written out: this runs at every event time
            rate, rate_b, acc, acc_b = self._rate, self._rate_bounded, self.accrued, self.accrued_bounded
            acc[0] += rate[0] * dt
            acc[1] += rate[1] * dt
            acc_b[0] += rate_b[0] * dt
            acc_b[1] += rate_b[1] * dt
        self.now = t
        while events and events[0][0] == t:
            _, kind, _, idx, epoch = heapq.heappop(events)
            job = self.jobs[idx]
            if kind == _ARRIVE:
                job.state = JobState.PENDING
                self._enqueue(job)
                c = job.spec.job_class
                self._rate[c] += self._inv_duration[idx]
                self._rate_bounded[c] += self._inv_bounded[idx]
            elif kind == _COMPLETE:
                if epoch != job.epoch:
                    continue  # the run this event belonged to was preempted
                self._close_segment(job, t, "completed")
                self._release(job)
                job.state = JobState.COMPLETED
                job.remaining = 0.0
                job.completion = t
                self._n_done += 1
                c = job.spec.job_class
                self._rate[c] -= self._inv_duration[idx]
                self._rate_bounded[c] -= self._inv_bounded[idx]
            else:  # _RELEASE: grace period over
                self._release(job)
                job.state = JobState.PENDING
                job.nodes = ()
                self._enqueue(job)

    def _enqueue(self, job: Job) -> None:
        spec = job.spec
        key: tuple[Any, ...]
        if self._priority:
            key = (int(spec.job_class), spec.submit_time, job.idx)
        else:
            key = (spec.submit_time, job.idx)
        q = self._queues.get(job.shape)
        if q is None:
            self._queues[job.shape] = q = []
        heapq.heappush(q, (key, job.idx))
        self._nonempty.add(job.shape)
        if job.shape not in self._blocked:
            self._unknown.add(job.shape)
        if self._shape_te[job.shape]:
            self._n_te_queued += 1
            if job.shape not in self._declined:
                self._owed.add(job.shape)
        else:
            self._n_be_queued += 1

    def _release(self, job: Job) -> None:
        m = job.member
        for n in job.nodes:
            self._running_on[n].discard(job.idx)
            self._cand_on[n].discard(job.idx)
            if self._res_on[n]:
                self._hand_over(job, n)
            else:
                self.avail[n] += m
        job.preempted_for = -1
        if self._declined:
            self._offer_again(job.nodes)
        if self._blocked:
            # Only these nodes gained room, so a blocked shape can fit now only if it fits on one of them.
            # Scalar Python: a handful of shapes against one or two nodes is cheaper than a numpy call.
            rows = [self.avail[n].tolist() for n in job.nodes]
            demand = self._shape_rows
            for shape in list(self._blocked):
                d = demand[shape]
                for a in rows:
                    if covers(a, d):
                        self._blocked.discard(shape)
                        if shape in self._nonempty:
                            self._unknown.add(shape)
                        break

    def _hand_over(self, job: Job, n: int) -> None:
        """Give what ``job`` releases on node ``n`` to the reservations there: first the TE job it was
        preempted for, then the others oldest first; what nobody is owed becomes available."""
        give = job.member.copy()
        waiting = self._res_on[n]
        if job.preempted_for in waiting:
            waiting = [job.preempted_for] + [r for r in waiting if r != job.preempted_for]
        for r in waiting:
            rj = self.jobs[r]
            assert rj.owed is not None
            owed = rj.owed[rj.nodes.index(n)]
            g = np.minimum(give, owed)
            owed -= g
            give -= g
            self.held[n] += g
        self.avail[n] += give

    def _offer_again(self, nodes: Iterable[int]) -> None:
        """These nodes gained resources or a preemption candidate: a declined TE shape is owed an offer
        again if it could now fit on one of them after preemptions. Elsewhere nothing has changed that
        could turn a decline into a plan (starts, reservations and preemptions only take room away)."""
        for n in nodes:
            a = self.avail[n].tolist()
            # Summed in job order, as the baselines sum a request's candidates.
            free = total_demand(self.jobs[c].demand for c in sorted(self._cand_on[n]))
            for shape in list(self._declined):
                # The baselines' feasibility test (baselines/base.py), with the same float operations.
                if covers(free, shortfall(a, self._shape_rows[shape])):
                    self._declined.discard(shape)
                    self._owed.add(shape)

    def _dequeued(self, job: Job) -> None:
        """Bookkeeping for a job that leaves its queue (started, or reserved)."""
        if not self._queues[job.shape]:
            self._nonempty.discard(job.shape)
            self._unknown.discard(job.shape)
            self._declined.discard(job.shape)  # a decline is about the jobs queued now
            self._owed.discard(job.shape)
        if self._shape_te[job.shape]:
            self._n_te_queued -= 1
        else:
            self._n_be_queued -= 1

    # ------------------------------------------------------------------ scheduling pass
    def _schedule_pass(self) -> Job | None:
        """Start what can start, in queue order; return the TE job that needs a decision, if any.

        After a decision the pass is restarted from the top, which is equivalent to continuing it:
        started jobs have left the queue and availability has only decreased since.
        """
        if self._reserved:
            self._start_ready_reservations()
        queues = self._queues
        blocked = self._blocked
        backfill = self.config.backfill
        offer_te = self.preemption
        shape_te = self._shape_te
        nonempty = self._nonempty
        declined = self._declined
        offers_owed = offer_te and bool(self._owed)
        if not self._unknown and backfill and not offers_owed:
            return None  # nothing can start and nobody is owed an offer
        unknown = list(self._unknown)
        rows: dict[int, int] = {}
        if unknown:
            # One (shapes x nodes) fit matrix for every shape not known to be blocked. A start changes
            # only its own nodes' columns, so the matrix is patched there instead of recomputed.
            sel = np.array(unknown)
            demand = self._shape_demand_eps[sel][:, None, :]
            fit = (self.avail[None, :, :] >= demand).all(axis=2)
            placeable = (fit.sum(axis=1) >= self._shape_k_arr[sel]).tolist()
            newly = []
            for r, shape in enumerate(unknown):  # one loop for both: this runs in most passes
                if placeable[r]:
                    rows[shape] = r
                else:
                    newly.append(shape)
            if newly:
                blocked.update(newly)
                self._unknown.difference_update(newly)
        considered: Iterable[int]
        if not backfill:
            considered = nonempty  # strict order: blocked shapes still block the ones behind them
        elif offers_owed:
            considered = [sh for sh in nonempty if sh not in blocked or (shape_te[sh] and sh not in declined)]
        else:
            considered = rows  # exactly the shapes found placeable
        heap = [(queues[shape][0][0], shape) for shape in considered]
        if not heap:
            return None
        heapq.heapify(heap)
        while heap:
            _, shape = heapq.heappop(heap)
            q = queues[shape]
            _, idx = q[0]
            job = self.jobs[idx]
            if shape not in blocked:
                nodes = self._place(job.member, job.spec.gang_size, fit[rows[shape]])
                if nodes is not None:
                    heapq.heappop(q)
                    self._dequeued(job)
                    self._start(job, nodes)
                    cols = list(nodes)
                    fit[:, cols] = (self.avail[cols][None, :, :] >= demand).all(axis=2)
                    if q:
                        heapq.heappush(heap, (q[0][0], shape))
                    continue
                blocked.add(shape)
                self._unknown.discard(shape)
            # The head of this shape cannot be placed; the jobs behind it cannot either.
            if offer_te and shape_te[shape] and shape not in declined:
                return job
            if not backfill:
                return None  # strict head-of-line blocking
        return None

    def _place(self, member: np.ndarray, k: int, fits: np.ndarray) -> tuple[int, ...] | None:
        """Nodes for a job whose per-node fit is ``fits`` (bool per node), or None if fewer than ``k``."""
        idx = fits.nonzero()[0]
        if len(idx) < k:
            return None
        if self.config.placement == "first-fit" or len(idx) == k:
            return tuple(idx[:k].tolist())
        # Rounded so that float noise (fractional GPUs) does not break ties that are meant to go to node order.
        left = (self.avail[idx] - member).round(9)
        if k == 1 and len(idx) <= 64:
            # Few candidates: scalar Python beats a sort. Lexicographic; the first of equals is the lowest node.
            rows = left.tolist()
            best = min(range(len(rows)), key=rows.__getitem__)
            return (int(idx[best]),)
        order = np.lexsort((idx, left[:, 2], left[:, 1], left[:, 0]))
        return tuple(idx[order[:k]].tolist())

    def _start(self, job: Job, nodes: tuple[int, ...], *, reserved: bool = False) -> None:
        m = job.member
        for pos, n in enumerate(nodes):
            if reserved:  # its resources were set aside in held
                assert job.owed is not None
                self.held[n] -= m - job.owed[pos]
                self.avail[n] -= job.owed[pos]  # at most float noise: a job starts when nothing is owed
            else:
                self.avail[n] -= m
            self._running_on[n].add(job.idx)
        candidate = job.spec.job_class == JobClass.BE and job.preemptions < self.config.max_preemptions
        if candidate:
            for n in nodes:
                self._cand_on[n].add(job.idx)
        now = self.now
        job.nodes = nodes
        job.state = JobState.RUNNING
        job.run_start = now
        if job.preemptions:  # a restart: the job's own overhead, or the simulator's when it gives none
            own = job.spec.restart_overhead
            job.run_overhead = self.config.restart_overhead if own is None else own
        else:
            job.run_overhead = 0.0
        if job.first_start != job.first_start:  # NaN: first run
            job.first_start = now
        job.epoch += 1
        self._push(now + job.run_overhead + job.remaining, _COMPLETE, job.idx, job.epoch)
        if candidate and self._declined:
            self._offer_again(nodes)

    def _start_ready_reservations(self) -> None:
        still = []
        for idx in self._reserved:
            job = self.jobs[idx]
            assert job.owed is not None
            if (job.owed <= EPS).all():
                for n in job.nodes:
                    self._res_on[n].remove(idx)
                self._start(job, job.nodes, reserved=True)
                job.owed = None
            else:
                still.append(idx)
        self._reserved = still

    def _close_segment(self, job: Job, end: float, reason: str) -> None:
        start = job.run_start
        length = end - start
        job.run_time += length
        job.overhead_time += min(job.run_overhead, length)
        for n in job.nodes:
            self.segments.append(Segment(job.idx, n, start, end, reason))

    # ------------------------------------------------------------------ preemption
    def _make_request(self, job: Job) -> PreemptionRequest:
        cap = self.capacity
        return PreemptionRequest(
            job=job,
            now=self.now,
            avail=self._read_only(self.avail),
            capacity=cap,
            candidates=self.candidates(),
            capacity_rows=self._capacity_rows,
            held=self._read_only(self.held),
            queued=self.queue_lengths,
            n_jobs=len(self.jobs),
            max_preemptions=self.config.max_preemptions,
            sim=self,
        )

    @staticmethod
    def _read_only(a: np.ndarray) -> np.ndarray:
        # A fresh view per request (not one kept on self): a copied or unpickled simulator must not hand
        # out a view of the original's array.
        v: np.ndarray = a.view()
        v.setflags(write=False)
        return v

    def _check_plan(self, request: PreemptionRequest, plan: PreemptionPlan) -> None:
        job = request.job
        k = job.spec.gang_size
        nodes, victims = tuple(plan.nodes), tuple(plan.victims)
        n_nodes = self.cluster.n_nodes
        if len(nodes) != k or len(set(nodes)) != k:
            raise IllegalDecisionError(
                f"Job {job.job_id!r} needs {k} distinct node(s); the plan names nodes {list(nodes)}"
            )
        for n in nodes:
            if not (isinstance(n, (int, np.integer)) and 0 <= n < n_nodes):
                raise IllegalDecisionError(f"Plan node {n!r} is not a node index in [0, {n_nodes})")
        if len(set(victims)) != len(victims):
            raise IllegalDecisionError(f"Plan names a victim more than once: {list(victims)}")
        legal = set().union(*self._cand_on)
        for v in victims:
            if v not in legal:
                raise IllegalDecisionError(
                    f"Job index {v!r} is not a preemption candidate for {job.job_id!r}; candidates are {sorted(legal)}"
                )
        room = self.avail[list(nodes)].copy()
        pos = {n: i for i, n in enumerate(nodes)}
        for v in victims:
            vj = self.jobs[v]
            for n in vj.nodes:
                if n in pos:
                    room[pos[n]] += vj.member
        short = np.flatnonzero(~fits_on(room, job.member))
        if len(short):
            n = nodes[int(short[0])]
            raise IllegalDecisionError(
                f"After preempting {list(victims)}, node {n} would offer {room[short[0]].tolist()} "
                f"but job {job.job_id!r} needs {job.member.tolist()} there"
            )

    def _apply_plan(self, job: Job, plan: PreemptionPlan) -> None:
        nodes = tuple(int(n) for n in plan.nodes)
        # Take the job out of its queue; on each chosen node set aside what is free now (up to its demand),
        # and record what the victims still owe it.
        q = self._queues[job.shape]
        q.remove(next(e for e in q if e[1] == job.idx))  # O(len) once per decision, not per event
        heapq.heapify(q)
        self._dequeued(job)
        m = job.member
        owed = np.empty((len(nodes), 3))
        for pos, n in enumerate(nodes):
            take = np.minimum(np.maximum(self.avail[n], 0.0), m)
            self.avail[n] -= take
            self.held[n] += take
            owed[pos] = m - take
            self._res_on[n].append(job.idx)
        job.owed = owed
        job.nodes = nodes
        self._reserved.append(job.idx)
        for v in plan.victims:
            self._preempt(self.jobs[v])
            self.jobs[v].preempted_for = job.idx

    def _preempt(self, victim: Job) -> None:
        now = self.now
        for n in victim.nodes:
            self._cand_on[n].discard(victim.idx)
        self._close_segment(victim, now, "preempted")
        progress = max(0.0, now - victim.run_start - victim.run_overhead)
        victim.remaining = max(0.0, victim.remaining - progress)
        victim.epoch += 1  # its completion event is now stale
        victim.preemptions += 1
        victim.state = JobState.PREEMPTING
        victim.grace_time += victim.spec.grace_period
        self.n_preemptions += 1
        self._push(now + victim.spec.grace_period, _RELEASE, victim.idx, victim.epoch)

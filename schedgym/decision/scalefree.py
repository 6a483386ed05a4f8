"""Observation version 2: scale-free and queue-aware, for both action modes.

Version 1 squashes times with fixed scales (600 s, 3,600 s), which saturate on a cluster whose jobs are ten
times longer, and shows the queue as two counts. Here every time is divided by another time of the same
workload before it is squashed with ``x / (x + 1)``: the waiting TE job's own estimate, or the *running
median* of the estimates of the jobs of a class submitted so far (what a scheduler knows at that instant: an
estimate is given at submission). Job counts are per node, resources per node's or the cluster's capacity.
So multiplying every time of a workload by ``k > 0`` changes nothing an agent sees (exactly for powers of
two; up to float rounding otherwise), and permuting the nodes permutes the option rows only.

The queue appears as rows (:data:`~schedgym.decision.features.QUEUE_FEATURES`): the ``queue_rows`` oldest
waiting TE jobs, then the ``queue_rows`` oldest waiting BE jobs, from the simulator's
:meth:`~schedgym.sim.simulator.Simulator.queued`.

The layout is declared in :mod:`schedgym.decision.features` (:func:`~schedgym.decision.features.schema`);
this module computes it, by name. It knows nothing of gymnasium.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence

import numpy as np

from schedgym.decision.features import schema
from schedgym.sim.job import Job, JobClass, JobTable
from schedgym.sim.policy import PreemptionPlan, PreemptionRequest
from schedgym.sim.resources import EPS, covers


def ratio(x: float, unit: float) -> float:
    """``x / unit`` squashed into [0, 1): ``x / (x + unit)`` (0 for ``x <= 0``)."""
    return x / (x + unit) if x > 0 else 0.0


_INSORT_LIMIT = 4096
"""Up to this many values, :func:`prefix_lower_medians` keeps them in one sorted list (``bisect.insort`` moves
memory in C, faster than two heaps in Python at the sizes of an episode); beyond it, two heaps (no quadratic
time). Both give the element of rank ``i // 2`` of ``values[: i + 1]``."""


def prefix_lower_medians(values: np.ndarray) -> np.ndarray:
    """``out[i]`` = the lower median of ``values[: i + 1]`` (an element of them, so it scales with them exactly)."""
    if len(values) <= _INSORT_LIMIT:
        ordered: list[float] = []
        medians: list[float] = []
        for i, v in enumerate(values.tolist()):
            bisect.insort(ordered, v)
            medians.append(ordered[i >> 1])  # sorted(values[: i + 1])[i // 2]: the lower median
        return np.array(medians, dtype=np.float64)
    out = np.empty(len(values))
    lo: list[float] = []  # the smaller half, negated (a max-heap), holding the lower median on top
    hi: list[float] = []
    for i, v in enumerate(values.tolist()):
        if lo and v > -lo[0]:
            heapq.heappush(hi, v)
        else:
            heapq.heappush(lo, -v)
        # Balance: lo holds ceil(n / 2) values, so its top is the lower median.
        if len(lo) > len(hi) + 1:
            heapq.heappush(hi, -heapq.heappop(lo))
        elif len(hi) > len(lo):
            heapq.heappush(lo, -heapq.heappop(hi))
        out[i] = -lo[0]
    return out


def _fast_prefix_lower_medians() -> Callable[[np.ndarray], np.ndarray]:
    """:func:`prefix_lower_medians`, computed in C++ where the native engine is built (the same values: the same
    two heaps, tests/test_native_plan_core.py), else in Python. An environment's reset computes them for every
    episode's workload."""
    from schedgym._optional import import_optional

    _engine = import_optional("schedgym.sim._engine")
    if _engine is None:  # pragma: no cover - the native engine is not built
        return prefix_lower_medians
    native: Callable[[np.ndarray], np.ndarray] | None = getattr(_engine, "prefix_lower_medians", None)
    return native if native is not None else prefix_lower_medians


class WorkloadScales:
    """The running medians of a workload's estimated durations, per class: the time units of version 2.

    Args:
        table: the workload.
        estimate: per job, the factor its true duration is multiplied by to give its estimate.
    """

    def __init__(self, table: JobTable, estimate: np.ndarray) -> None:
        cols = table.columns
        est = np.asarray(cols["duration"], dtype=np.float64) * estimate
        self._submit: list[np.ndarray] = []
        self._median: list[np.ndarray] = []
        for cls in (JobClass.TE, JobClass.BE):
            idx = np.flatnonzero(cols["job_class"] == int(cls))
            order = idx[np.argsort(cols["submit"][idx], kind="stable")]
            self._submit.append(np.asarray(cols["submit"][order]))
            self._median.append(_PREFIX_LOWER_MEDIANS(np.ascontiguousarray(est[order], dtype=np.float64)))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(TE submit times, TE running medians, BE submit times, BE running medians), float64: per class, the
        submit times of its jobs in submit order and the lower median of the first ``i + 1`` estimates (what the
        native plan core is handed)."""
        te_submit, be_submit = (np.ascontiguousarray(s, dtype=np.float64) for s in self._submit)
        te_median, be_median = (np.ascontiguousarray(m, dtype=np.float64) for m in self._median)
        return te_submit, te_median, be_submit, be_median

    def medians(self, now: float) -> tuple[float, float]:
        """(TE, BE): the median estimate of the jobs of each class submitted by ``now``; a class none of whose
        jobs has arrived takes the other's (and 1.0 if neither has)."""
        out: list[float | None] = []
        for submit, median in zip(self._submit, self._median, strict=True):
            m = int(np.searchsorted(submit, now, side="right"))
            out.append(float(median[m - 1]) if m > 0 else None)
        te, be = out
        if te is None:
            te = be if be is not None else 1.0
        if be is None:
            be = te
        return te, be


_PREFIX_LOWER_MEDIANS = _fast_prefix_lower_medians()


class ScaleFreeObserver:
    """Builds version-2 observations of one simulation, in either action mode.

    Args:
        capacity: per-node capacities, shape (n_nodes, 3).
        table: the workload (for the running medians).
        estimate: per-job estimate factors (the victim protocol's :class:`~schedgym.decision.DecisionEncoder`
            draws them; both modes use the same).
        mode: ``"victim"`` or ``"plan"``.
        n_rows: option rows (``max_candidates`` or ``max_plans``).
        queue_rows: queue rows per job class.
    """

    def __init__(
        self,
        capacity: np.ndarray,
        table: JobTable,
        estimate: np.ndarray,
        *,
        mode: str,
        n_rows: int,
        queue_rows: int,
    ) -> None:
        self.schema = schema(2, mode)
        self.n_rows = n_rows
        self.queue_rows = queue_rows
        self.size = self.schema.size(n_rows, queue_rows)
        self.n_nodes = len(capacity)
        self.scale = [float(x) if x > 0 else 1.0 for x in capacity.max(axis=0)]
        self.total = [float(x) if x > 0 else 1.0 for x in capacity.sum(axis=0)]
        self.estimate = estimate
        self.scales = WorkloadScales(table, estimate)
        self.head_names = tuple(f.name for f in self.schema.head)
        self.queue_names = tuple(f.name for f in self.schema.queue)
        self.row_names = tuple(f.name for f in self.schema.row)

    def estimate_of(self, job: Job) -> float:
        """The job's estimated duration."""
        return job.duration * float(self.estimate[job.idx])

    def remaining_of(self, job: Job, now: float) -> float:
        """A running job's remaining work, estimated (its restart overhead is not work)."""
        elapsed = now - job.run_start
        return max(job.remaining - max(0.0, elapsed - job.run_overhead), 0.0) * float(self.estimate[job.idx])

    # ------------------------------------------------------------------ head and queue
    def head(self, request: PreemptionRequest, medians: tuple[float, float], extra: dict[str, float]) -> list[float]:
        """The job and cluster features; ``extra`` gives the victim mode's attempt features (absent: 0)."""
        job = request.job
        d = job.demand
        sg, sc, sm = self.scale
        tg, tc, tm = self.total
        n = self.n_nodes
        est = self.estimate_of(job)
        unused = (request.avail + request.held).sum(axis=0).tolist()
        held = request.held.sum(axis=0).tolist()
        q_te, q_be = request.queued
        running_be = len({c.idx for cands in request.candidates.values() for c in cands})
        te, be = medians
        values = {
            "gpus": d[0] / sg,
            "cpus": d[1] / sc,
            "mem_gb": d[2] / sm,
            "gang": job.gang_size / n,
            "wait": ratio(request.now - job.submit_time, est),
            "estimate": ratio(est, te),
            "victims_chosen": 0.0,
            "continuing": 0.0,
            "missing_gpus": 0.0,
            "missing_cpus": 0.0,
            "missing_mem_gb": 0.0,
            "unused_gpus": unused[0] / tg,
            "unused_cpus": unused[1] / tc,
            "unused_mem_gb": unused[2] / tm,
            "reserved_gpus": held[0] / tg,
            "reserved_cpus": held[1] / tc,
            "reserved_mem_gb": held[2] / tm,
            "queued_te": ratio(q_te, n),
            "queued_be": ratio(q_be, n),
            "running_be": ratio(running_be, n),
            "te_scale": te / (te + be),
        }
        values.update(extra)
        return [values[name] for name in self.head_names]  # KeyError: a feature declared, not computed

    def queued(self, request: PreemptionRequest) -> list[Job]:
        """The queue rows' jobs: up to ``queue_rows`` oldest waiting TE jobs (not the one being decided), then
        up to ``queue_rows`` oldest waiting BE jobs. A request built by hand (no simulation) has none."""
        sim = request.sim
        if sim is None or self.queue_rows == 0:
            return []
        te, be = sim.queued(self.queue_rows + 1)
        te = [j for j in te if j.idx != request.job.idx][: self.queue_rows]
        return te + be[: self.queue_rows]

    def queue(self, request: PreemptionRequest, jobs: Sequence[Job], medians: tuple[float, float]) -> list[float]:
        """The queue rows, TE rows first (padded to ``queue_rows`` each), flat."""
        sg, sc, sm = self.scale
        n = self.n_nodes
        now = request.now
        cap_p = max(request.max_preemptions, 1)
        width = len(self.queue_names)
        out: list[float] = []
        for cls in (JobClass.TE, JobClass.BE):
            rows = [j for j in jobs if j.spec.job_class == cls]
            unit = medians[0] if cls == JobClass.TE else medians[1]
            for j in rows:
                d = j.demand
                est = self.estimate_of(j)
                wait = now - j.submit_time
                values = {
                    "valid": 1.0,
                    "is_te": 1.0 if cls == JobClass.TE else 0.0,
                    "gang": j.gang_size / n,
                    "gpus": d[0] / sg,
                    "cpus": d[1] / sc,
                    "mem_gb": d[2] / sm,
                    "wait": ratio(wait, unit),
                    "estimate": ratio(est, unit),
                    "slowdown": ratio(wait, est),
                    "preemptions": min(1.0, j.preemptions / cap_p),
                    "fits_now": 1.0 if _n_fitting(request.avail.tolist(), d) >= j.gang_size else 0.0,
                }
                out.extend(values[name] for name in self.queue_names)
            out.extend([0.0] * (width * (self.queue_rows - len(rows))))
        return out

    # ------------------------------------------------------------------ option rows
    def victim_row(
        self, request: PreemptionRequest, candidate: Job, room: Sequence[float], medians: tuple[float, float]
    ) -> list[float]:
        """A candidate victim's row (victim mode); ``room`` is its node's room counting victims already chosen."""
        sg, sc, sm = self.scale
        d = request.job.demand
        cd = candidate.demand
        now = request.now
        est = self.estimate_of(request.job)
        remaining = self.remaining_of(candidate, now)
        values = {
            "valid": 1.0,
            "gpus": cd[0] / sg,
            "cpus": cd[1] / sc,
            "mem_gb": cd[2] / sm,
            "node_room_gpus": room[0] / sg,
            "node_room_cpus": room[1] / sc,
            "node_room_mem_gb": room[2] / sm,
            "fits_alone": 1.0 if covers((room[0] + cd[0], room[1] + cd[1], room[2] + cd[2]), d) else 0.0,
            "grace_period": ratio(candidate.spec.grace_period, est),
            "elapsed": ratio(now - candidate.run_start, medians[1]),
            "preemptions": min(1.0, candidate.preemptions / max(request.max_preemptions, 1)),
            "remaining": ratio(remaining, medians[1]),
            "remaining_vs_te": ratio(remaining, est),
            "is_gang": 1.0 if candidate.gang_size > 1 else 0.0,
        }
        return [values[name] for name in self.row_names]

    def plan_row(
        self,
        request: PreemptionRequest,
        plan: PreemptionPlan,
        sources: frozenset[str],
        queue_jobs: Sequence[Job],
        medians: tuple[float, float],
    ) -> list[float]:
        """An option's row (plan mode): who proposed it, what it frees, where and when, what it costs the
        victims, and what the cluster looks like once it is done."""
        n_nodes = self.n_nodes
        sg = self.scale[0]
        tg, tc, tm = self.total
        now = request.now
        job = request.job
        est = self.estimate_of(job)
        by_idx = {c.idx: c for cands in request.candidates.values() for c in cands}
        victims = [by_idx[i] for i in plan.victims]
        avail = request.avail.tolist()
        freed = [0.0, 0.0, 0.0]
        touched: set[int] = set()
        for v in victims:
            d = v.demand
            for node in v.nodes:
                touched.add(node)
                a = avail[node]
                a[0] += d[0]
                a[1] += d[1]
                a[2] += d[2]
                freed[0] += d[0]
                freed[1] += d[1]
                freed[2] += d[2]
        need = job.demand
        for node in plan.nodes:
            a = avail[node]
            a[0] -= need[0]
            a[1] -= need[1]
            a[2] -= need[2]
        surplus = sum(max(avail[node][0], 0.0) for node in plan.nodes)
        starts = _greedy_starts(avail, queue_jobs)
        free_gpus = sum(max(a[0], 0.0) for a in avail)
        largest = max((max(a[0], 0.0) for a in avail), default=0.0)
        n = len(victims)
        cap_p = max(request.max_preemptions, 1)
        remaining = sum(self.remaining_of(v, now) for v in victims)
        elapsed = sum(now - v.run_start for v in victims)
        values = {
            "valid": 1.0,
            "wait": 1.0 if plan.is_empty else 0.0,
            "per_node": 1.0 if "per_node" in sources else 0.0,
            "victims": ratio(n, 1.0),
            "gang_victims": sum(1 for v in victims if v.gang_size > 1) / n if n else 0.0,
            "nodes_touched": len(touched) / n_nodes,
            "freed_gpus": freed[0] / tg,
            "freed_cpus": freed[1] / tc,
            "freed_mem_gb": freed[2] / tm,
            "surplus_gpus": surplus / (len(plan.nodes) * sg) if plan.nodes else 0.0,
            "start_delay": ratio(max((v.spec.grace_period for v in victims), default=0.0), est),
            "remaining": ratio(remaining, medians[1]),
            "remaining_vs_te": ratio(remaining, est),
            "elapsed": ratio(elapsed, medians[1]),
            "preemptions": min(1.0, max((v.preemptions for v in victims), default=0) / cap_p),
            "last_chance": sum(1 for v in victims if v.preemptions + 1 >= request.max_preemptions) / n if n else 0.0,
            "starts_te": ratio(starts[0], 1.0),
            "starts_be": ratio(starts[1], 1.0),
            "unused_gpus_after": free_gpus / tg,
            "fragmentation_after": 1.0 - largest / free_gpus if free_gpus > EPS else 0.0,
        }
        for name in self.row_names:
            if name.startswith("by_"):
                values[name] = 1.0 if name[3:] in sources else 0.0
        return [values[name] for name in self.row_names]

    def assemble(self, head: list[float], queue: list[float], rows: Sequence[list[float]]) -> np.ndarray:
        """The flat observation: head, queue rows, option rows (zero-padded), clipped to [0, 1]."""
        obs = np.zeros(self.size, dtype=np.float32)
        values = head + queue
        for row in rows:
            values.extend(row)
        obs[: len(values)] = values
        np.clip(obs, 0.0, 1.0, out=obs)  # float noise in resource sums must not leave the Box
        return obs


def _n_fitting(avail: Sequence[Sequence[float]], need: Sequence[float]) -> int:
    return sum(1 for a in avail if covers(a, need))


def _greedy_starts(avail: list[list[float]], jobs: Sequence[Job]) -> tuple[int, int]:
    """(TE, BE) of ``jobs`` that would start, in their order, on ``avail`` (changed in place), each placed
    best-fit (least GPUs left, then CPUs, then memory): an outcome that does not depend on the nodes' order."""
    started = [0, 0]
    for j in jobs:
        d = j.demand
        fitting = [n for n, a in enumerate(avail) if covers(a, d)]
        if len(fitting) < j.gang_size:
            continue
        fitting.sort(key=lambda n: (avail[n][0] - d[0], avail[n][1] - d[1], avail[n][2] - d[2]))
        for n in fitting[: j.gang_size]:
            a = avail[n]
            a[0] -= d[0]
            a[1] -= d[1]
            a[2] -= d[2]
        started[0 if j.spec.job_class == JobClass.TE else 1] += 1
    return started[0], started[1]


__all__ = ["ScaleFreeObserver", "WorkloadScales", "prefix_lower_medians", "ratio"]

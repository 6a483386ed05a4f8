"""schedgym's native simulation engine"""

from collections.abc import Sequence
from typing import Annotated

import numpy
from numpy.typing import NDArray


ENGINE_VERSION: int = ...

FEATURE_INDEX: dict = ...

class Engine:
    """
    One simulation: the rules of docs/semantics.md, with the same results as the Python engine (schedgym.sim.python_engine).
    """

    def __init__(self, capacity: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], submit: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], duration: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], member: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], gang: Annotated[NDArray[numpy.int64], dict(order='C', device='cpu', writable=False)], job_class: Annotated[NDArray[numpy.int64], dict(order='C', device='cpu', writable=False)], grace: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], *, priority_queue: bool, backfill: bool, first_fit: bool, max_preemptions: int, restart_overhead: float, preemption: bool, job_ids: object | None = ..., restart: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)] | None = ...) -> None:
        """
        capacity (n_nodes, 3) and member (n_jobs, 3, per-node demand) float64; submit, duration, grace float64 and gang, job_class (0 TE, 1 BE) int64, one per job. job_ids (optional) only name jobs in error messages. restart (optional, float64, one per job): each job's restart overhead, instead of restart_overhead for every job.
        """

    def clone(self) -> Engine:
        """
        An independent engine in exactly the same state (a copy of the C++ state, not a replay).
        """

    def advance(self, until: float = ...) -> int:
        """
        Run until a TE job needs a preemption decision (returns its index) or the workload drains (-1); or stop (-1, not done) before processing events later than ``until``.
        """

    def resolve(self, nodes: Sequence[int], victims: Sequence[int]) -> None:
        """
        Answer the pending request: the nodes to use and the victims (job indices); empty nodes declines.
        """

    def run_declining(self, until: float = ...) -> None:
        """advance(until) to the end (or to ``until``), declining every request."""

    def run_rule(self, name: str, params: dict, until: float = ..., max_decisions: int = ..., log: bool = ...) -> object:
        """
        advance(until) to the end with a built-in rule ('fitgpp' with lam, grace_scale, order, rank; 'k8s'; 'decline'; 'random' with rng, a numpy Generator over PCG64, which it advances as the Python rule would) answering every request, in C++; stop at ``until`` (as advance does), or right after the rule has answered ``max_decisions`` requests if that is >= 0. With ``log``, return the plans it made, [(nodes, victims), ...] in order, else None.
        """

    @property
    def now(self) -> float: ...

    @property
    def n_preemptions(self) -> int: ...

    @property
    def n_requests(self) -> int: ...

    @property
    def done(self) -> bool: ...

    @property
    def pending(self) -> int:
        """The job index of the pending request, or -1."""

    @property
    def queue_lengths(self) -> tuple[int, int]:
        """(TE, BE) jobs pending, reserved TE jobs included."""

    @property
    def n_nodes(self) -> int: ...

    @property
    def n_jobs(self) -> int: ...

    def accrued(self) -> tuple[float, float]:
        """Slowdown accrued so far, (TE, BE)."""

    def accrued_bounded(self) -> tuple[float, float]:
        """Bounded slowdown accrued so far, (TE, BE)."""

    def rate(self) -> tuple:
        """
        What accrued() and accrued_bounded() grow by per simulated second until the next event: (TE, BE, TE bounded, BE bounded).
        """

    def avail(self) -> NDArray[numpy.float64]:
        """What any job may use, per node (a copy, shape (n_nodes, 3))."""

    def held(self) -> NDArray[numpy.float64]:
        """
        What is set aside for reserved TE jobs, per node (a copy, shape (n_nodes, 3)).
        """

    def candidates(self) -> list[tuple[int, list[int]]]:
        """
        [(node, [job index, ...]), ...]: preemption candidates of the nodes that have any, ascending.
        """

    def running_on(self, node: int) -> list[int]:
        """
        Jobs that hold resources on the node (running or in their grace period), ascending.
        """

    def queued(self, limit: int) -> tuple[list[int], list[int]]:
        """
        ([TE job index, ...], [BE job index, ...]): the up-to-limit oldest jobs of each class waiting in the queues (not reserved), in queue order.
        """

    def job_records(self, jobs: Sequence[int]) -> list:
        """
        (state, remaining, preemptions, run_start, run_overhead, first_start, completion, grace_time, overhead_time, run_time, nodes) of each of ``jobs``.
        """

    def job_nodes(self, job: int) -> tuple:
        """
        The nodes the job runs on, or is reserved on (a tuple; empty while queued).
        """

    def state(self) -> NDArray[numpy.int8]:
        """JobState values (int8)."""

    def remaining(self) -> NDArray[numpy.float64]: ...

    def preemptions(self) -> NDArray[numpy.int64]: ...

    def run_start(self) -> NDArray[numpy.float64]: ...

    def run_overhead(self) -> NDArray[numpy.float64]: ...

    def first_start(self) -> NDArray[numpy.float64]: ...

    def completion(self) -> NDArray[numpy.float64]: ...

    def grace_time(self) -> NDArray[numpy.float64]: ...

    def overhead_time(self) -> NDArray[numpy.float64]: ...

    def run_time(self) -> NDArray[numpy.float64]: ...

    def segments(self) -> tuple:
        """
        (job, node, start, end, completed) arrays, one row per closed run segment and node, in closing order.
        """

class EnvCore:
    """
    The victim-by-victim decision protocol of schedgym.decision.stepwise on an Engine's state (PreemptionEnv's native path): the same rows, plans and observations, computed in C++.
    """

    def __init__(self, engine: object, max_candidates: int, estimate: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], scale: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], total: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], head_scale: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], row_scale: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)]) -> None:
        """
        engine: the Engine to drive (nothing else may drive it meanwhile); estimate: one float64 factor per job (DecisionEncoder.estimate); scale, total: DecisionEncoder.scale and .total (3 values each); head_scale, row_scale: the features' declared scales (schedgym.decision.features.feature_scales, 0 where none).
        """

    def next_decision(self) -> bool:
        """
        Advance to the next request that offers a choice (True), declining those that offer none, or to the end (False).
        """

    def choose(self, action: int) -> int:
        """
        0 declines, i >= 1 chooses row i - 1. Returns the number of victims preempted once the request is resolved (0 for a decline), or -1 if the decision goes on. Call next_decision() after a resolve.
        """

    def attach(self) -> bool:
        """
        Begin deciding the engine's pending request, if any (True); for an engine rebuilt by replay.
        """

    def restore(self, chosen: Sequence[int], targets: Sequence[int]) -> None:
        """
        Continue the pending decision from these chosen victims and target nodes.
        """

    def observe(self, out: Annotated[NDArray[numpy.float32], dict(shape=(None,), order='C', device='cpu')]) -> None:
        """
        Write the observation into out (float32, C-contiguous, shape (20 + 13 * max_candidates,)).
        """

    def mask(self, out: Annotated[NDArray[numpy.bool_], dict(shape=(None,), order='C', device='cpu')]) -> None:
        """Write the legal actions into out (bool, shape (max_candidates + 1,))."""

    def rows(self) -> list[tuple[int, int]]:
        """[(candidate job index, node), ...]: action i chooses row i - 1."""

    def chosen(self) -> list:
        """Job indices of the victims chosen in this attempt, in order."""

    def targets(self) -> list:
        """Nodes of the chosen victims' rows, in order of first choice."""

    def take_log(self) -> list:
        """
        The (nodes, victims) of every resolve made since the last call, in order (for replay).
        """

    @property
    def job(self) -> int:
        """The index of the TE job being decided, or -1."""

    @property
    def n_rows(self) -> int:
        """Candidate rows of the decision (legal actions: 0..n_rows)."""

    @property
    def n_offered(self) -> int:
        """Decisions offered so far."""

    @property
    def max_candidates(self) -> int: ...

    @property
    def observation_size(self) -> int: ...

def plan_feature_names(rules: Sequence[str]) -> tuple:
    """
    (head, queue row, plan row): the names of the features PlanCore computes, in observation order, with the plan row's per-rule flags named after ``rules``.
    """

def prefix_lower_medians(values: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.float64]:
    """
    schedgym.decision.scalefree.prefix_lower_medians in C++: out[i] is the lower median of values[: i + 1] (float64).
    """

def python_sum(values: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], compensated: bool) -> float:
    """
    sum(values) as PlanCore computes Python's sum() of floats: compensated as from Python 3.12 on, or not.
    """

class PlanCore:
    """
    The plan-level decision protocol of schedgym.decision.plan_mode on an Engine's state (PreemptionPlan-v1's native path): the same options, masks and observations (version 2), computed in C++.
    """

    def __init__(self, engine: object, rules: list, max_plans: int, queue_rows: int, estimate: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], scale: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], total: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], te_submit: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], te_median: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], be_submit: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], be_median: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu', writable=False)], max_subset: int, compensated_sum: bool) -> None:
        """
        engine: the Engine to drive (nothing else may drive it meanwhile); rules: [(name, params)] of the native rules whose plans are offered, in order (as Engine.run_rule takes them); estimate: one float64 factor per job; scale, total: ScaleFreeObserver.scale and .total; te_submit, te_median, be_submit, be_median: scalefree.WorkloadScales per class; max_subset: plans.MAX_SUBSET_CANDIDATES; compensated_sum: sum floats as Python >= 3.12's sum() does.
        """

    def next_decision(self) -> bool:
        """
        Advance to the next request that offers a choice (True), declining those whose only option is to wait, or to the end (False).
        """

    def choose(self, action: int) -> int:
        """
        Resolve the request with option ``action``; returns the number of victims preempted (0 for wait). Call next_decision() next.
        """

    def attach(self) -> bool:
        """
        Begin deciding the engine's pending request, if any (True); for an engine rebuilt by replay or copied.
        """

    def observe(self, out: Annotated[NDArray[numpy.float32], dict(shape=(None,), order='C', device='cpu')]) -> None:
        """Write the observation into out (float32, C-contiguous)."""

    def mask(self, out: Annotated[NDArray[numpy.bool_], dict(shape=(None,), order='C', device='cpu')]) -> None:
        """Write the legal actions into out (bool, shape (max_plans,))."""

    def options(self) -> list:
        """
        [(nodes, victims, sources), ...]: the options of the decision, action i taking option i; sources is a bit set (1: wait, 2 << r: rule r, 2 << n_rules: the per-node search).
        """

    def medians(self, now: float) -> tuple[float, float]:
        """scalefree.WorkloadScales.medians(now): (TE, BE)."""

    def take_log(self) -> list:
        """
        The (nodes, victims) of every resolve made since the last call, in order (for replay).
        """

    @property
    def job(self) -> int:
        """The index of the TE job being decided, or -1."""

    @property
    def n_options(self) -> int:
        """Options of the decision, wait included (0 with none pending)."""

    @property
    def n_offered(self) -> int:
        """Decisions offered so far."""

    @property
    def max_plans(self) -> int: ...

    @property
    def queue_rows(self) -> int: ...

    @property
    def observation_size(self) -> int: ...

class BatchStepper:
    """
    PreemptionEnv.step for the EnvCores of a vector environment in one call, on a few threads without the GIL, writing into the caller's numpy arrays (schedgym.envs.vector_env).
    """

    def __init__(self, n_envs: int, max_candidates: int, *, te_weight: float, be_weight: float, preemption_cost: float, bounded: bool, threads: int, arrays: dict) -> None:
        """
        arrays: a dict of C-contiguous numpy arrays with n_envs rows (see BatchBuffers in batch.hpp): actions, te_job, n_candidates, preemptions, decisions (int64); skip, terminated, resolved (bool); reward, sim_time, interval (float64); parts (float64, 3 columns), last_accrued (float64, 2 columns); obs (float32, observation size columns); mask (bool, max_candidates + 1 columns). threads: threads that step, the caller's included (0: the hardware's count), at most n_envs.
        """

    def attach(self, i: int, core: object) -> None:
        """Sub-environment i steps this EnvCore from now on."""

    def step(self) -> None:
        """
        Step every sub-environment not marked in skip with its action; results go to the arrays.
        """

    def begin(self) -> None:
        """
        Start step() on the worker threads and return: the caller may reset the skipped sub-environments meanwhile (and must touch nothing else), then call finish().
        """

    def finish(self) -> None:
        """Take part in the step begun by begin() and wait for it to end."""

    @property
    def n_threads(self) -> int:
        """Threads that step, the caller's included."""

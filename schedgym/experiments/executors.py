"""Where the runs of a comparison or a sweep execute: in this process, in a pool of processes, or on Ray.

The unit of work is one run: one policy on one seed's workload under one setting (:class:`RunTask`). A
comparison has one setting; a sweep (:mod:`schedgym.experiments.sweep`) has one per combination of its
swept values, each a comparison configuration of its own (workload, cluster, simulator rules). Every
executor runs the same :class:`Worker` code, which builds each policy once per process (a learned agent's
network is loaded once per worker, not per run or per setting), rebuilds a seed's workload from the
setting's configuration (the same workload for every policy, as in the serial loop) and calls
:func:`~schedgym.experiments.evaluation.evaluate_policy`. A run depends only on its policy, setting, workload and
seed, so every executor gives the same results, bit for bit; :func:`execute` hands them back as they finish
and :func:`run_tasks` puts them in the deterministic (seed, setting, policy) order.

- ``serial``: this process, one run after another (the default).
- ``process``: a :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes (default
  ``os.cpu_count()``), started with ``forkserver`` where there is one, else ``spawn``: workers import the
  task functions from the installed package, never from ``__main__``, and inherit no threads.
- ``ray``: Ray tasks (the ``ray`` extra), at most ``workers`` at once (default: the cluster's CPUs). Ray
  reuses its worker processes, and each keeps its :class:`Worker` (hence its loaded agents) for the
  comparison. ``address`` None starts a local Ray for the comparison and stops it after; ``"auto"`` or a
  cluster address connects to a running cluster (``ray start --head``), where every node needs schedgym.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from schedgym._csvio import is_ascii_digits
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.evaluation import evaluate_policy
from schedgym.experiments.runstore import RunStore
from schedgym.registry import PolicyEntry, check_spec, make_policy, policy_entry, register_policy
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.metrics import RunResult
from schedgym.sim.policy import Policy
from schedgym.sim.simulator import ENV_VAR
from schedgym.workloads.trace import Workload

log = logging.getLogger(__name__)

EXECUTORS = ("serial", "process", "ray")
DEFAULT_RETRIES = 3
"""Times a batch of runs is run again after its worker process or node died (``--retries``)."""
MAX_RETRIES = 1000
MAX_BATCH = 100_000
AUTO_BATCH_LIMIT = 64
"""The most runs :func:`batch_size` puts in one task: a lost worker loses at most this many per batch it held."""
RAY_INSTALL_HINT = "pip install 'schedgym[ray]'"


@dataclass(frozen=True)
class ExecutorConfig:
    """How the runs of a comparison or a sweep execute. It never changes the results, only where and how fast."""

    kind: str = "serial"
    """``serial`` (this process), ``process`` (a process pool) or ``ray`` (Ray tasks)"""
    workers: int | None = None
    """runs at once (``process``: processes, default ``os.cpu_count()``; ``ray``: default the cluster's CPUs)"""
    address: str | None = None
    """``ray`` only: ``"auto"`` or a cluster address to connect to; None starts a local Ray"""
    retries: int = DEFAULT_RETRIES
    """``process`` and ``ray``: how many times runs whose worker process or node died are run again (a run
    that fails by its own error is not); then the grid ends with one line"""
    batch: int | None = None
    """``process`` and ``ray``: runs per task (None: :func:`batch_size` picks one); a task's cost is paid
    once per batch, and a lost worker loses at most its batches"""

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ConfigError(f"Expected executor in {list(EXECUTORS)}, got {self.kind!r}")
        for name, low, high in (("retries", 0, MAX_RETRIES), ("batch", 1, MAX_BATCH)):
            value = getattr(self, name)
            if value is None and name == "batch":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ConfigError(f"Expected {name} from {low} to {high}, got {value!r}")
        if self.batch is not None and self.kind == "serial":
            raise ConfigError("--batch applies to --executor process or ray, not serial")
        if self.workers is not None:
            if not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 1:
                raise ConfigError(f"Expected workers > 0, got {self.workers!r}")
            if self.kind == "serial":
                raise ConfigError("--workers applies to --executor process or ray, not serial")
        if self.address is not None:
            if self.kind != "ray":
                raise ConfigError(f"--address applies to --executor ray, not {self.kind}")
            if not isinstance(self.address, str) or not self.address.strip():
                raise ConfigError(f"Expected a Ray address ('auto' or HOST:PORT), got {self.address!r}")


@dataclass(frozen=True)
class RunTask:
    """One run: policy ``spec`` (shown as ``label``) on the workload of ``seed``, the ``seed_index``-th seed,
    under setting ``setting`` of the context (0 for a comparison). ``index`` is its place in the
    deterministic order (seed-major, then setting, then policy)."""

    index: int
    label: str
    spec: str
    seed_index: int
    seed: int
    setting: int = 0


@dataclass(frozen=True)
class RunOutcome:
    """What one run gives back: its result and how long it took (in the worker)."""

    task: RunTask
    result: RunResult
    wall_time: float


@dataclass(frozen=True)
class RunSetting:
    """One setting of a grid: the comparison configuration its runs follow (workload, seeds, simulator
    rules) and the cluster they run on."""

    config: Any  # CompareConfig (not imported: compare imports this module)
    cluster: ClusterSpec


@dataclass(frozen=True)
class RunContext:
    """What every worker needs to know of a comparison or sweep, sent once per worker (or once to Ray's
    object store). ``entries`` are the registry entries of the compared policies, so that a policy
    registered by the caller (and absent from a freshly started worker's registry) resolves there too.
    ``token`` tells grids apart in a worker process that outlives one."""

    token: str
    policies: tuple[str, ...]
    settings: tuple[RunSetting, ...]
    """a comparison's one setting, or a sweep's settings; :attr:`RunTask.setting` indexes them"""
    entries: tuple[PolicyEntry, ...]
    engine: str | None
    """``$SCHEDGYM_ENGINE`` where the grid was started, set in every worker: a fork server, a Ray worker or a
    cluster node has an environment of its own"""


def make_tasks(specs: Sequence[str], labels: Sequence[str], seeds: Sequence[int], n_settings: int = 1) -> list[RunTask]:
    """Every (seed, setting, policy) run, seed-major: the order of the serial loop and of the results. With
    one setting (a comparison), the (seed, policy) runs. Seed-major, so that the runs sharing a seed's
    workload (every policy's, and every setting's that changes only the simulator's rules) follow each other
    and a worker builds that workload once."""
    triples = itertools.product(enumerate(seeds), range(n_settings), zip(labels, specs, strict=True))
    return [RunTask(i, label, spec, k, seed, setting) for i, ((k, seed), setting, (label, spec)) in enumerate(triples)]


class Worker:
    """The state of one worker process for one grid: each policy built once (on first use, or all at once
    with :meth:`build_all`) and reset before every run, whatever the setting; the workloads of the last seed
    kept, since the runs of one seed tend to follow each other. ``workloads``: each setting's seeds'
    workloads, if the caller has them (else each setting's are made when first needed)."""

    def __init__(self, context: RunContext, workloads: Sequence[Sequence[Workload]] | None = None):
        for entry in context.entries:
            if _registered(entry.name) != entry:
                register_policy(
                    entry.name,
                    entry.entry_point,
                    kwargs=entry.kwargs,
                    description=entry.description,
                    learned=entry.learned,
                )
        if context.engine is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = context.engine
        self.context = context
        if workloads is not None and len(workloads) != len(context.settings):
            raise ValueError(f"Expected the workloads of {len(context.settings)} settings, got {len(workloads)}")
        self._workloads: dict[int, Sequence[Workload]] = dict(enumerate(workloads)) if workloads is not None else {}
        self.policies: dict[str, Policy] = {}
        self.n_builds = 0
        """policies built by this worker (one per compared policy it ran)"""
        self._seed_index: int | None = None
        self._seed_workloads: dict[Any, Workload] = {}
        self._keys: dict[int, Any] = {}

    def policy(self, spec: str) -> Policy:
        policy = self.policies.get(spec)
        if policy is None:
            policy = self.policies[spec] = make_policy(spec)
            self.n_builds += 1
        return policy

    def build_all(self) -> None:
        """Build every compared policy now (a bad model path fails before any simulation)."""
        for spec in self.context.policies:
            self.policy(spec)

    def workloads(self, setting: int) -> Sequence[Workload]:
        """The seeds' workloads of ``setting`` (each built when it is asked for)."""
        found = self._workloads.get(setting)
        if found is None:
            from schedgym.experiments.compare import load_workloads

            s = self.context.settings[setting]
            found = self._workloads[setting] = load_workloads(s.config, s.cluster)
        return found

    def workload(self, seed_index: int, setting: int = 0) -> Workload:
        """The workload of the ``seed_index``-th seed under ``setting``. Those of the current seed are kept,
        one per workload source and cluster: settings that change only the simulator's rules share one."""
        if self._seed_index != seed_index:
            self._seed_index, self._seed_workloads = seed_index, {}
        key = self._workload_key(setting)
        found = self._seed_workloads.get(key)
        if found is None:
            found = self._seed_workloads[key] = self.workloads(setting)[seed_index]
        return found

    def _workload_key(self, setting: int) -> Any:
        """Equal for two settings with the same workload source and cluster (their workloads are equal)."""
        key = self._keys.get(setting)
        if key is None:
            s = self.context.settings[setting]
            key = (s.config.source, s.cluster)
            try:
                hash(key)
            except TypeError:  # a source holding an unhashable value: this setting shares with no other
                key = ("setting", setting)
            self._keys[setting] = key
        return key

    def run(self, task: RunTask) -> RunOutcome:
        policy = self.policy(task.spec)
        workload = self.workload(task.seed_index, task.setting)
        s = self.context.settings[task.setting]
        t0 = time.perf_counter()
        seeds = self.workloads(task.setting)
        # A mix level has its own cluster (SeedWorkloads.cluster_at); other workloads run on the setting's.
        cluster = seeds.cluster_at(task.seed_index) if hasattr(seeds, "cluster_at") else s.cluster
        noise = seeds.estimate_noise_at(task.seed_index) if hasattr(seeds, "estimate_noise_at") else None
        (run,) = evaluate_policy(policy, cluster, [workload], [task.seed], s.config.sim, estimate_noise=noise)
        return RunOutcome(task, run.result, time.perf_counter() - t0)


def _registered(name: str) -> PolicyEntry | None:
    try:
        return policy_entry(name)
    except SchedGymError:
        return None


def policy_entries(specs: Sequence[str]) -> tuple[PolicyEntry, ...]:
    """The registry entries the compared ``specs`` resolve through (none for ``NAME:PATH`` of an unregistered
    name: a saved agent is loaded by path)."""
    entries = []
    for spec in specs:
        entry = _registered(check_spec(spec))
        if entry is not None and entry not in entries:
            entries.append(entry)
    return tuple(entries)


# One Worker per process for the grid being run (a Ray worker process may serve several in turn).
_WORKER: Worker | None = None


def worker_for(context: RunContext) -> Worker:
    """This process's :class:`Worker` for ``context``, made at its first run."""
    global _WORKER
    if _WORKER is None or _WORKER.context.token != context.token:
        _WORKER = Worker(context)
    return _WORKER


def run_batch(context: RunContext, tasks: Sequence[RunTask]) -> list[RunOutcome]:
    """Run ``tasks`` one after another in this process (the task function of ``process`` and ``ray``)."""
    worker = worker_for(context)
    return [worker.run(task) for task in tasks]


def batch_size(n_tasks: int, workers: int) -> int:
    """Runs per task: about eight tasks per worker, so that the work stays balanced to the end, and at most
    :data:`AUTO_BATCH_LIMIT`. A run takes milliseconds (a paper workload: 5-20 ms); a Ray task costs about a
    millisecond of the driver's and the worker's time, which a batch pays once."""
    return max(1, min(AUTO_BATCH_LIMIT, n_tasks // (8 * max(1, workers))))


def batches(tasks: Sequence[RunTask], size: int) -> list[tuple[RunTask, ...]]:
    """``tasks`` cut into consecutive batches of ``size`` (seed-major: a batch's runs share workloads)."""
    return [tuple(tasks[i : i + size]) for i in range(0, len(tasks), size)]


def _init_process_worker(context: RunContext) -> None:
    # Ctrl-C and SIGTERM (from `timeout`, a batch scheduler) are sent to the command's process group, or to each
    # of its processes (Slurm, systemd, `pkill -f`). Only the command handles them: it cancels the pool and the
    # workers finish the batch in hand. So a worker runs in a session of its own (no group signal reaches it)
    # and takes SIGTERM from the command alone (the pool's terminate() of a broken pool): a worker killed while
    # it sends a batch's results leaves a partial message, on which the pool's manager thread waits for ever.
    if hasattr(os, "setsid"):
        with contextlib.suppress(OSError):
            os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()  # the command, also for a worker forked by the fork server
    if parent is not None and hasattr(signal, "sigwaitinfo"):
        # Blocked before any thread starts, so in every thread: the one below takes it, and looks at who sent it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(target=_sigterm_from, args=(parent.pid,), daemon=True).start()
    else:  # (no sigwaitinfo: macOS) deadly from anyone, as before
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Out of the command's session, a worker no longer dies with it (SIGHUP when its terminal closes, a
    # SIGKILL): it ends itself once the command is gone, rather than wait for ever for batches that will not
    # come (the fork server cannot do it: it lives while any of its workers does).
    if parent is not None:
        threading.Thread(target=_exit_when_gone, args=(parent,), daemon=True).start()
    worker_for(context)


def _sigterm_from(command: int) -> None:
    """End this worker on a SIGTERM from ``command`` (the pool ending it); ignore one from anyone else."""
    while True:
        if signal.sigwaitinfo({signal.SIGTERM}).si_pid == command:
            os._exit(128 + signal.SIGTERM)


def _exit_when_gone(parent: multiprocessing.process.BaseProcess) -> None:
    parent.join()  # waits on the parent's sentinel: returns once the command has ended
    os._exit(1)


def _process_batch(tasks: Sequence[RunTask]) -> list[RunOutcome]:
    assert _WORKER is not None, "the pool's initializer makes the worker"
    return [_WORKER.run(task) for task in tasks]


def execute(
    executor: ExecutorConfig,
    context: RunContext,
    tasks: Sequence[RunTask],
    workloads: Sequence[Workload] | None = None,
    store: RunStore | None = None,
) -> Generator[RunOutcome, None, None]:
    """Run ``tasks`` on ``executor``; yield each outcome as it finishes (in the tasks' order for ``serial``,
    in completion order otherwise). The first run that fails raises here, and the rest are cancelled.
    ``workloads``: for a context of one setting (a comparison), its seeds' workloads if the caller has them
    (``serial`` uses them; workers build their own). ``store``: a run folder; the runs it holds are yielded
    first (in the tasks' order) and not run again, and every run that finishes is written to it before it is
    yielded (a sweep's as its summary, :meth:`RunStore.save`); a new folder is removed again if a run fails
    before any is kept (:meth:`RunStore.remove_if_unused`)."""
    kept = {} if store is None else store.finished(tasks)
    yield from (kept[task.index] for task in tasks if task.index in kept)
    todo = [task for task in tasks if task.index not in kept]
    try:
        for outcome in _execute(executor, context, todo, workloads):
            yield outcome if store is None else store.save(outcome)
    except Exception:  # not Ctrl-C or SIGTERM: an interrupted grid's folder stays resumable
        if store is not None:
            store.remove_if_unused()
        raise


def _execute(
    executor: ExecutorConfig, context: RunContext, tasks: Sequence[RunTask], workloads: Sequence[Workload] | None
) -> Generator[RunOutcome, None, None]:
    if not tasks:
        return
    if executor.kind == "serial":
        worker = Worker(context, None if workloads is None else [workloads])
        worker.build_all()
        for task in tasks:
            yield worker.run(task)
    elif executor.kind == "process":
        workers = min(executor.workers or os.cpu_count() or 1, len(tasks))
        chunks = batches(tasks, executor.batch or batch_size(len(tasks), workers))
        yield from _execute_process(workers, context, chunks, executor.retries)
    else:
        yield from _execute_ray(executor, context, tasks)


def _mp_context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # The fork server imports schedgym once; each worker forked from it starts with it imported.
        ctx.set_forkserver_preload([__name__])
        return ctx
    return multiprocessing.get_context("spawn")


def _execute_process(
    workers: int, context: RunContext, chunks: Sequence[tuple[RunTask, ...]], retries: int
) -> Generator[RunOutcome, None, None]:
    """Run ``chunks`` on a pool of ``workers`` processes. A worker process that dies (killed, out of memory)
    breaks the whole pool: a new pool then runs every batch not yet finished, up to ``retries`` times."""
    remaining = {chunk[0].index: chunk for chunk in chunks}  # in order; a batch leaves once it is yielded
    failures = 0
    while True:
        lost = yield from _process_pool_round(workers, context, remaining)
        if lost is None:
            return
        failures += 1
        if failures > retries:
            raise SchedGymError(
                f"a worker process died {failures} times ({lost}); {len(remaining)} batches of runs were left "
                f"(--retries {retries})"
            )
        log.warning("schedgym: a worker process died (%s); running %d batches again", lost, len(remaining))


def _process_pool_round(
    workers: int, context: RunContext, remaining: dict[int, tuple[RunTask, ...]]
) -> Generator[RunOutcome, None, str | None]:
    """One pool's life: run the batches of ``remaining``, yielding outcomes and removing each finished batch
    from it; return None when all are done, or why the pool broke."""
    workers = min(workers, len(remaining))
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=_mp_context(), initializer=_init_process_worker, initargs=(context,)
    )
    try:
        # At most two batches queued per worker: a failure stops the comparison soon, and results (a run's
        # per-job arrays) do not pile up in the pipe.
        queue = iter(list(remaining.values()))  # a copy: finished batches leave remaining as we go
        pending: dict[Future[list[RunOutcome]], tuple[RunTask, ...]] = {}

        def refill() -> None:
            for chunk in itertools.islice(queue, 2 * workers - len(pending)):
                pending[pool.submit(_process_batch, chunk)] = chunk

        try:
            # submit() raises too when a worker died meanwhile, e.g. while the consumer of the last outcomes
            # wrote a run folder: that is the same lost pool, not an error of the command.
            refill()
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    chunk = pending.pop(future)
                    outcomes = future.result()
                    del remaining[chunk[0].index]
                    yield from outcomes
                refill()
        except BrokenProcessPool as exc:
            return str(exc).split(":")[0] or type(exc).__name__
        return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def import_ray() -> Any:
    """The ``ray`` module, or a :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None
    return ray


def _execute_ray(
    executor: ExecutorConfig, context: RunContext, tasks: Sequence[RunTask]
) -> Generator[RunOutcome, None, None]:
    ray = import_ray()
    with ray_session(ray, executor):
        # Ray runs a task again when its worker process or node died (max_retries), never when the task raised
        # (retry_exceptions=False): a run that fails by its own error would fail again.
        remote_run = ray.remote(num_cpus=1, max_retries=executor.retries, retry_exceptions=False)(run_batch)
        workers = executor.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        chunks = batches(tasks, executor.batch or batch_size(len(tasks), workers))
        context_ref = ray.put(context)
        queue = iter(chunks)
        pending: dict[Any, tuple[RunTask, ...]] = {}

        def refill() -> None:
            # One batch queued per worker beyond the one it runs: no worker idles while its next batch is sent.
            for chunk in itertools.islice(queue, 2 * workers - len(pending)):
                pending[remote_run.remote(context_ref, chunk)] = chunk

        try:
            refill()
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    chunk = pending.pop(ref)
                    yield from _ray_get(ray, ref, chunk, executor.retries)
                refill()
        finally:
            for ref in pending:
                ray.cancel(ref)


def _ray_get(ray: Any, ref: Any, chunk: Sequence[RunTask], retries: int) -> list[RunOutcome]:
    try:
        outcomes: list[RunOutcome] = ray.get(ref)
        return outcomes
    except ray.exceptions.RayTaskError as exc:
        # A user error in a worker (a missing model file) reads as it would in this process: one line.
        cause = getattr(exc, "cause", None)
        if isinstance(cause, SchedGymError):
            raise cause from None
        raise
    except ray.exceptions.RayError as exc:
        # Not the task's own error: its worker process or node died, and Ray's retries are spent.
        first, last = chunk[0], chunk[-1]
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SchedGymError(
            f"Ray lost runs {first.index}..{last.index} {retries + 1} times ({type(exc).__name__}: {message}); "
            f"--retries {retries}"
        ) from None


class _NeverRaised(Exception):
    """Stands for an exception class this Ray version does not have."""


RAY_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a TCP connection to ``--address HOST:PORT`` before saying that no Ray answers there
(Ray itself retries for minutes, printing a warning each time)."""


def check_ray_address(address: str) -> None:
    """Raise :class:`ConfigError` within :data:`RAY_CONNECT_TIMEOUT` if nothing accepts a connection at a
    ``HOST:PORT`` (or ``ray://HOST:PORT``) address; ``auto`` and ``local`` are Ray's to resolve."""
    text = address.strip()
    if text in ("auto", "local", ""):
        return
    host, sep, port_text = text.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not is_ascii_digits(port_text) or not 0 < int(port_text) < 65536:
        raise ConfigError(f"--address {address!r}: expected auto or HOST:PORT")
    try:
        with socket.create_connection((host, int(port_text)), timeout=RAY_CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ConfigError(f"--address {address!r}: no Ray cluster answers there ({reason})") from None


@contextlib.contextmanager
def _sigterm_kept() -> Generator[None, None, None]:
    """Put this process's own SIGTERM handler back after the block, ``ray.init`` or ``ray.shutdown``. Ray's
    init installs handlers of its own (``sys.exit``), which would skip the clean-up that the ``schedgym``
    command's handler starts (schedgym.cli: SIGTERM is taken as Ctrl-C); its shutdown resets SIGTERM to the
    default below Python (measured with Ray 2.60: the process then died of a SIGTERM while Python still
    reported its handler). A handler written in Python, or SIG_IGN, is put back; a default SIGTERM stays Ray's
    to handle, as before. During the block itself SIGTERM is Ray's (seconds, for init)."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        yield
    finally:
        if callable(previous) or previous == signal.SIG_IGN:
            signal.signal(signal.SIGTERM, previous)


class ray_session:  # noqa: N801  (used as a context manager, like a function)
    """Connect to Ray for one comparison or sweep. With no address, start a local Ray with ``workers`` CPUs
    (default all), no dashboard, usage statistics off unless set, and a token of its own for token
    authentication (Ray 2.60 turns it on by default and would otherwise write ``~/.ray/auth_token``); stop it
    after. A Ray already initialised in this process (``ray.init`` by the caller) is used as it is and left
    running."""

    def __init__(self, ray: Any, executor: ExecutorConfig):
        self.ray, self.executor = ray, executor
        self.started = False
        self._saved_env: dict[str, str | None] = {}

    def __enter__(self) -> bool:
        """True if this session started a local Ray (whose workers inherit this process's environment)."""
        ray, executor = self.ray, self.executor
        if ray.is_initialized():
            return False
        if executor.address is not None:
            # A cluster with token authentication refuses a driver without its token (Ray 2.60:
            # AuthenticationError, which older Rays do not have).
            refused = getattr(getattr(ray, "exceptions", None), "AuthenticationError", _NeverRaised)
            check_ray_address(executor.address)
            try:
                with _sigterm_kept():
                    ray.init(address=executor.address, logging_level="WARNING", log_to_driver=True)
            except refused:
                raise ConfigError(
                    f"--address {executor.address!r}: the Ray cluster uses token authentication and this process "
                    "has no token; set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's"
                ) from None
            except (ConnectionError, RuntimeError, ValueError) as exc:
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ConfigError(f"--address {executor.address!r}: cannot connect to Ray ({message})") from None
            self.started = True  # connected by us: disconnect after (the cluster keeps running)
            return False
        self._setenv("RAY_USAGE_STATS_ENABLED", "0")
        # Ray sets RAY_AUTH_MODE=token in this process when it starts a local cluster; put it back after, so
        # that a second session in this process starts as the first did (with its token, not a file's).
        self._saved_env.setdefault("RAY_AUTH_MODE", os.environ.get("RAY_AUTH_MODE"))
        if not (
            os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or os.environ.get("RAY_AUTH_MODE")
        ):
            # Ray turns token authentication on (and warns that it did); its token then lives in this
            # process's environment and its Ray's, not in a file under the home folder. RAY_AUTH_MODE is left
            # unset: set after `import ray`, the driver would not send the token it asks for.
            self._setenv("RAY_AUTH_TOKEN", _local_token())
        _forget_ray_token()  # the driver reads the token in force now, not one it read for an earlier Ray
        quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with _sigterm_kept():
                ray.init(
                    address="local",
                    num_cpus=executor.workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    logging_level="WARNING",
                )
        finally:
            quiet.setLevel(level)
        self.started = True
        return True

    def _setenv(self, name: str, value: str) -> None:
        if name not in os.environ:
            self._saved_env.setdefault(name, None)
            os.environ[name] = value

    def __exit__(self, *exc: object) -> None:
        if self.started:
            printer = builtins.print
            with _sigterm_kept():
                self.ray.shutdown()
            # Ray 2.60's shutdown leaves its own safe_print as builtins.print; cloudpickle then refuses to pickle
            # the real print by reference, and a later Ray task or Tune trainable that prints fails.
            builtins.print = printer
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._saved_env:
            _forget_ray_token()


_TOKEN: str | None = None


def _local_token() -> str:
    """The token of the local Rays this process starts: one per process, since Ray's driver reads its token
    once and keeps it (:func:`_forget_ray_token` makes it read again, where Ray allows)."""
    global _TOKEN
    if _TOKEN is None:
        import secrets

        _TOKEN = secrets.token_hex(32)
    return _TOKEN


def _forget_ray_token() -> None:
    """Make Ray's driver read its authentication token again (Ray 2.60 caches it in the process for good:
    a second local Ray with another token would refuse the driver). Older Rays have no such cache."""
    try:
        from ray._raylet import AuthenticationTokenLoader  # type: ignore[import-not-found,attr-defined,unused-ignore]
    except ImportError:
        return
    with contextlib.suppress(AttributeError):
        AuthenticationTokenLoader.instance().reset_cache()


def run_tasks(
    executor: ExecutorConfig,
    context: RunContext,
    tasks: Sequence[RunTask],
    on_outcome: Callable[[RunOutcome], None],
    workloads: Sequence[Workload] | None = None,
    store: RunStore | None = None,
) -> list[RunOutcome]:
    """Run every task, call ``on_outcome`` as each finishes (in this process), and return the outcomes in
    the tasks' order. ``workloads`` and ``store``: as for :func:`execute`."""
    outcomes: list[RunOutcome | None] = [None] * len(tasks)
    position = {task.index: i for i, task in enumerate(tasks)}
    with contextlib.closing(
        execute(executor, context, tasks, workloads, store)
    ) as finished:  # a failure stops the pool
        for outcome in finished:
            outcomes[position[outcome.task.index]] = outcome
            on_outcome(outcome)
    assert all(o is not None for o in outcomes), "every task gives one outcome"
    return [o for o in outcomes if o is not None]


def new_context(config: Any, cluster: ClusterSpec) -> RunContext:
    """The :class:`RunContext` of the comparison ``config`` on ``cluster`` (one setting)."""
    return grid_context(config.policies, [RunSetting(config, cluster)])


def grid_context(policies: Sequence[str], settings: Sequence[RunSetting]) -> RunContext:
    """The :class:`RunContext` of ``policies`` run under each of ``settings`` (a sweep)."""
    if not settings:
        raise ConfigError("Expected at least one setting, got none")
    return RunContext(
        token=uuid.uuid4().hex,
        policies=tuple(policies),
        settings=tuple(settings),
        entries=policy_entries(policies),
        engine=os.environ.get(ENV_VAR),
    )


__all__ = [
    "EXECUTORS",
    "ExecutorConfig",
    "RunContext",
    "RunOutcome",
    "RunSetting",
    "RunTask",
    "Worker",
    "execute",
    "grid_context",
    "make_tasks",
    "new_context",
    "policy_entries",
    "batch_size",
    "batches",
    "ray_session",
    "run_batch",
    "run_tasks",
]

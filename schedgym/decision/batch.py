"""Many decision backends stepped together, their results in arrays allocated once: what the vector
environment (:mod:`schedgym.envs.vector_env`) steps.

:func:`open_batch` picks the implementation from the backends, so that the vector environment never asks
which engine it runs on: :class:`NativeBatch` when every backend is a
:class:`~schedgym.decision.backend.NativeBackend` (one call steps them all, ``BatchStepper`` in
``schedgym/sim/native/batch.cpp``, on a few threads without the GIL, while the caller resets the others),
else :class:`PythonBatch` (one after the other, through :meth:`DecisionBackend.step`). Both fill the same
arrays with the same values: each row is what the single environment's ``step`` gives for that backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from schedgym.decision.backend import DecisionBackend, DecisionSpec, NativeBackend, Reward


class DecisionBatch(ABC):
    """The arrays of a batch step, one row per backend, and the backends they belong to.

    A step is :meth:`begin` then :meth:`finish`: the caller sets :attr:`actions` (checked) and :attr:`skip`
    (rows it resets meanwhile), and between the two may reset the skipped rows' environments, then hands
    their new backends over with :meth:`load`. :meth:`sync` loads again the rows whose backend was reset or
    stepped by someone else since."""

    def __init__(self, n: int, spec: DecisionSpec, reward: Reward) -> None:
        self.reward_config = reward
        self.actions = np.zeros(n, dtype=np.int64)
        self.skip = np.zeros(n, dtype=bool)
        self.obs = np.zeros((n, spec.observation_size), dtype=np.float32)
        self.mask = np.zeros((n, spec.n_actions), dtype=bool)
        self.reward = np.zeros(n, dtype=np.float64)
        self.parts = np.zeros((n, 3), dtype=np.float64)
        self.terminated = np.zeros(n, dtype=bool)
        self.sim_time = np.zeros(n, dtype=np.float64)
        self.interval = np.zeros(n, dtype=np.float64)
        self.te_job = np.full(n, -1, dtype=np.int64)
        self.n_candidates = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.decisions = np.zeros(n, dtype=np.int64)
        # What each row looked like after the batch last stepped or loaded it.
        self.backends: list[DecisionBackend | None] = [None] * n
        self._n_steps: list[int] = [-1] * n
        self.stale = False  # a backend this batch cannot step was loaded: open a new batch before stepping

    @abstractmethod
    def accepts(self, backend: DecisionBackend) -> bool:
        """Whether this batch can step ``backend``."""

    @abstractmethod
    def begin(self) -> None:
        """Start stepping the rows not skipped with :attr:`actions`."""

    @abstractmethod
    def finish(self) -> None:
        """Return once every row not skipped is stepped, its results in the arrays."""

    def load(self, i: int, backend: DecisionBackend) -> None:
        """Take ``backend`` as row ``i``, as it is now (its mask, decision and counters; the caller writes the
        row's step results itself, from the reset that made it). A backend this batch cannot step marks the
        batch :attr:`stale`."""
        self.backends[i] = backend
        self._n_steps[i] = backend.n_steps
        self.te_job[i] = backend.job
        self.n_candidates[i] = backend.n_rows
        self.decisions[i] = backend.n_decisions
        backend.mask_into(self.mask[i])
        if not self.accepts(backend):
            self.stale = True

    def sync(self, backends: list[DecisionBackend]) -> None:
        """Load again the rows whose backend was replaced (a reset) or stepped outside the batch."""
        for i, b in enumerate(backends):
            if b is not self.backends[i] or b.n_steps != self._n_steps[i]:
                self.load(i, b)

    def _stepped(self, i: int, backend: DecisionBackend) -> None:
        self._n_steps[i] = backend.n_steps


class PythonBatch(DecisionBatch):
    """Each row stepped in turn by :meth:`DecisionBackend.step` (any backend)."""

    def accepts(self, backend: DecisionBackend) -> bool:
        return True

    def begin(self) -> None:
        for i in np.flatnonzero(~self.skip).tolist():
            b = self.backends[i]
            assert b is not None
            start = b.sim.now
            n = b.step(int(self.actions[i]))
            te, be, pc = self.reward_config.parts(b, n)
            self.reward[i] = te + be + pc
            self.parts[i] = (te, be, pc)
            b.observe_into(self.obs[i])
            b.mask_into(self.mask[i])
            self.terminated[i] = b.done
            self.sim_time[i] = b.sim.now
            self.interval[i] = b.sim.now - start
            self.te_job[i] = b.job
            self.n_candidates[i] = b.n_rows
            self.preemptions[i] = b.sim.n_preemptions
            self.decisions[i] = b.n_decisions
            self._stepped(i, b)

    def finish(self) -> None:
        pass


class NativeBatch(DecisionBatch):
    """The rows' C++ decision cores stepped in one call (``BatchStepper``) on ``n_threads`` threads (None: as
    many as the machine has; 1: all in the calling thread)."""

    def __init__(self, n: int, spec: DecisionSpec, reward: Reward, n_threads: int | None) -> None:
        super().__init__(n, spec, reward)
        from schedgym.sim import _engine

        self.resolved = np.zeros(n, dtype=bool)
        self.last_accrued = np.zeros((n, 2), dtype=np.float64)
        arrays = {name: getattr(self, name) for name in _ARRAYS}
        self.stepper = _engine.BatchStepper(
            n,
            spec.max_candidates,
            te_weight=float(reward.te_weight),
            be_weight=float(reward.be_weight),
            preemption_cost=float(reward.preemption_cost),
            bounded=reward.bounded,
            threads=0 if n_threads is None else n_threads,
            arrays=arrays,
        )

    def accepts(self, backend: DecisionBackend) -> bool:
        return isinstance(backend, NativeBackend)

    def load(self, i: int, backend: DecisionBackend) -> None:
        super().load(i, backend)
        if isinstance(backend, NativeBackend):
            self.stepper.attach(i, backend.core)
            self.last_accrued[i] = backend.last_accrued

    def begin(self) -> None:
        self.stepper.begin()

    def finish(self) -> None:
        try:
            self.stepper.finish()
        finally:
            self._after_step()

    def _after_step(self) -> None:
        """Bring the stepped backends' counters up to date, as their own step would have."""
        decisions = self.decisions.tolist()
        accrued = self.last_accrued.tolist()
        done = self.terminated.tolist()
        resolved = self.resolved.tolist()
        for i in np.flatnonzero(~self.skip).tolist():
            b = self.backends[i]
            assert isinstance(b, NativeBackend)
            b.note_batch_step(decisions[i], accrued[i], done[i], resolved[i])
            self._stepped(i, b)


def open_batch(
    backends: list[DecisionBackend], spec: DecisionSpec, reward: Reward, n_threads: int | None = None
) -> DecisionBatch:
    """A batch of ``backends`` (loaded), asked as ``spec`` says: native when every one of them is, else stepped
    one by one."""
    batch: DecisionBatch
    if all(isinstance(b, NativeBackend) for b in backends):
        batch = NativeBatch(len(backends), spec, reward, n_threads)
    else:
        batch = PythonBatch(len(backends), spec, reward)
    for i, b in enumerate(backends):
        batch.load(i, b)
    return batch


def batch_infos(batch: DecisionBatch, full: bool = False) -> dict[str, Any]:
    """A step's info dict from the batch's arrays, as ``VectorEnv._add_info`` builds it from every
    sub-environment's info (the same keys, dtypes and ``_name`` masks); ``full``: with ``te_job_id`` and
    ``reward_parts`` (the environment's ``info="full"``)."""
    n = len(batch.backends)
    parts = batch.parts.T.copy()  # one copy for the three parts' arrays
    present = np.ones((17, n), dtype=bool)  # one allocation for the "_key" masks
    infos = {
        "sim_time": batch.sim_time.copy(),
        "_sim_time": present[0],
        "interval": batch.interval.copy(),
        "_interval": present[1],
        "action_mask": batch.mask.copy(),
        "_action_mask": present[2],
        "te_job": batch.te_job.copy(),
        "_te_job": present[3],
        "n_candidates": batch.n_candidates.copy(),
        "_n_candidates": present[4],
        "decisions": batch.decisions.copy(),
        "_decisions": present[5],
        "preemptions": batch.preemptions.copy(),
        "_preemptions": present[6],
        "reward_te": parts[0],
        "_reward_te": present[7],
        "reward_be": parts[1],
        "_reward_be": present[8],
        "reward_preemption": parts[2],
        "_reward_preemption": present[9],
    }
    if full:
        te_job_id = np.full(n, None, dtype=object)
        for i, j in enumerate(batch.te_job.tolist()):
            if j >= 0:
                b = batch.backends[i]
                assert b is not None
                te_job_id[i] = b.table.job_ids[j]  # as DecisionBackend.job_name names it
        infos["te_job_id"] = te_job_id
        infos["_te_job_id"] = present[10]
        infos["reward_parts"] = {
            "te_slowdown": parts[0].copy(),
            "_te_slowdown": present[11],
            "be_slowdown": parts[1].copy(),
            "_be_slowdown": present[12],
            "preemption": parts[2].copy(),
            "_preemption": present[13],
        }
        infos["_reward_parts"] = present[14]
    return infos


# The arrays BatchStepper reads and writes (BatchBuffers in schedgym/sim/native/batch.hpp).
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

__all__ = ["DecisionBatch", "NativeBatch", "PythonBatch", "batch_infos", "open_batch"]

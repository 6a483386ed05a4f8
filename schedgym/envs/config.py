"""Configuration of the preemption environment: one validated dataclass."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from schedgym.errors import ConfigError
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.named import SPLITS, TRACE_WORKLOADS
from schedgym.workloads.synthetic import PRESETS


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines a :class:`~schedgym.envs.PreemptionEnv`. Bad values raise
    :class:`~schedgym.errors.ConfigError` stating the expected and the actual value."""

    cluster: str | None = None
    """cluster preset name or path to a cluster CSV (None: the workload's own; paper for synthetic ones)"""
    workload: str = "paper"
    """synthetic preset, or bundled trace workload (philly, ...) cut into n_jobs windows (ignored with ``trace``)"""
    split: str = "train"
    """for a bundled trace workload: which time split episodes come from (train, validation, test)"""
    trace: str | None = None
    """trace CSV; each episode is a window of ``n_jobs`` consecutive jobs from a random start"""
    n_jobs: int = 500
    """jobs per episode"""
    queue: str = "priority"
    """queue discipline, ``fifo`` or ``priority``"""
    backfill: bool = True
    """skip jobs that do not fit (True) or block at the head of the queue (False)"""
    placement: str = "best-fit"
    """``best-fit`` or ``first-fit``"""
    max_preemptions: int = 1
    """the cap P: a job preempted this many times is no longer a candidate"""
    restart_overhead: float = 0.0
    """seconds charged at every restart after a preemption"""
    max_candidates: int = 16
    """candidate rows in the observation; the action space is ``Discrete(max_candidates + 1)``"""
    estimate_noise: float = 0.3
    """sigma of the lognormal error of the remaining-work estimate (0 = exact)"""
    reward: str = "slowdown"
    """accrual per second in the system: ``slowdown`` (1/duration) or ``bounded_slowdown`` (1/max(duration, 10 s))"""
    te_weight: float = 1.0
    """weight of TE jobs' accrued slowdown"""
    be_weight: float = 1.0
    """weight of BE jobs' accrued slowdown (0 gives a TE-only reward)"""
    preemption_cost: float = 0.0
    """reward subtracted per preempted job"""

    def __post_init__(self) -> None:
        known = sorted(PRESETS) + sorted(TRACE_WORKLOADS)
        if self.trace is None and self.workload not in known:
            raise ConfigError(f"Expected workload in {known} (or a trace), got {self.workload!r}")
        if self.split not in SPLITS:
            raise ConfigError(f"Expected split in {list(SPLITS)}, got {self.split!r}")
        _int(self, "n_jobs", 1)
        _int(self, "max_candidates", 1)
        self.sim_config()  # queue, backfill, placement, the cap and restart overhead: SimConfig checks them
        if self.reward not in ("slowdown", "bounded_slowdown"):
            raise ConfigError(f"Expected reward 'slowdown' or 'bounded_slowdown', got {self.reward!r}")
        for name in ("estimate_noise", "te_weight", "be_weight", "preemption_cost"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
                raise ConfigError(f"Expected {name} to be a finite number, got {value!r}")
            if value < 0:
                raise ConfigError(f"Expected {name} >= 0, got {value!r}")

    @property
    def cluster_name(self) -> str:
        if self.cluster is not None:
            return self.cluster
        if self.trace is None and self.workload in TRACE_WORKLOADS:
            return TRACE_WORKLOADS[self.workload].cluster
        return "paper"

    def sim_config(self) -> SimConfig:
        return SimConfig(
            queue=self.queue,
            backfill=self.backfill,
            placement=self.placement,
            max_preemptions=self.max_preemptions,
            restart_overhead=self.restart_overhead,
        )

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def _int(cfg: EnvConfig, name: str, minimum: int) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"Expected {name} to be an integer >= {minimum}, got {value!r}")

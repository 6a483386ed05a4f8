"""Configuration of the preemption environment: one validated dataclass."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from schedgym.errors import ConfigError
from schedgym.limits import MAX_JOBS
from schedgym.sim.policy import QueueDiscipline
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.named import SPLITS
from schedgym.workloads.source import WorkloadSource

MAX_CANDIDATES = 100_000
"""largest max_candidates: the observation has 20 + 13 * max_candidates floats (5 MB at this bound)"""


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
    load: float | None = None
    """offered GPU load of a synthetic workload (None: the preset's own, 1.0 for paper and realistic)"""
    sim: SimConfig = field(default_factory=SimConfig)
    """the simulator's rules (queue, backfill, placement, the cap P, restart overhead); a dict of
    :class:`~schedgym.sim.SimConfig` fields is accepted (``gym.make(id, sim={"max_preemptions": 2})``)"""
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
        if isinstance(self.sim, dict):
            unknown = sorted(set(self.sim) - {f.name for f in fields(SimConfig)})
            if unknown:
                raise ConfigError(f"Unknown sim fields {unknown}; expected fields of SimConfig")
            object.__setattr__(self, "sim", SimConfig(**self.sim))
        if not isinstance(self.sim, SimConfig):
            raise ConfigError(f"Expected sim to be a SimConfig or a dict of its fields, got {self.sim!r}")
        if self.split not in SPLITS:
            raise ConfigError(f"Expected split in {list(SPLITS)}, got {self.split!r}")
        _int(self, "n_jobs", 1, MAX_JOBS)
        _int(self, "max_candidates", 1, MAX_CANDIDATES)
        self.source  # noqa: B018 - the workload name is checked there
        if self.reward not in ("slowdown", "bounded_slowdown"):
            raise ConfigError(f"Expected reward 'slowdown' or 'bounded_slowdown', got {self.reward!r}")
        for name in ("estimate_noise", "te_weight", "be_weight", "preemption_cost"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
                raise ConfigError(f"Expected {name} to be a finite number, got {value!r}")
            if value < 0:
                raise ConfigError(f"Expected {name} >= 0, got {value!r}")

    @property
    def source(self) -> WorkloadSource:
        """Where episodes' workloads come from."""
        return WorkloadSource(workload=self.workload, trace=self.trace, n_jobs=self.n_jobs, load=self.load)

    @property
    def cluster_name(self) -> str:
        """``cluster``, or the workload's own cluster."""
        return self.cluster if self.cluster is not None else self.source.default_cluster

    def to_kwargs(self) -> dict[str, Any]:
        """The fields as JSON-ready keyword arguments (``sim`` as a dict), for ``gym.make`` or a saved agent."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        sim = self.sim
        out["sim"] = {f.name: getattr(sim, f.name) for f in fields(sim)}
        out["sim"]["queue"] = QueueDiscipline(sim.queue).value
        return out

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def _int(cfg: EnvConfig, name: str, minimum: int, maximum: int) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"Expected {name} to be an integer >= {minimum}, got {value!r}")
    if value > maximum:
        raise ConfigError(f"Expected {name} <= {maximum:,}, got {value!r}")

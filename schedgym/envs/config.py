"""Configuration of the preemption environment: one validated dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from schedgym.decision.backend import DecisionSpec
from schedgym.errors import ConfigError
from schedgym.limits import MAX_JOBS
from schedgym.sim.cluster import cluster_argument
from schedgym.sim.policy import QueueDiscipline
from schedgym.sim.simulator import SimConfig, is_integer, is_number
from schedgym.workloads.named import SPLITS, TRACE_WORKLOADS
from schedgym.workloads.source import WorkloadSource

MAX_CANDIDATES = 100_000
"""largest max_candidates: the observation has 20 + 13 * max_candidates floats (5 MB at this bound)"""

MAX_QUEUE_ROWS = 10_000
"""largest queue_rows (observation version 2): 2 x 11 x queue_rows floats of queue rows"""

MAX_ESTIMATE_NOISE = 10.0
"""largest estimate_noise: the estimates are multiplied by exp(N(0, sigma)), which overflows a float64 past
exp(709); at sigma 10 that needs a draw 70 standard deviations out (the default is 0.3)"""

MAX_WEIGHT = 1e6
"""largest te_weight, be_weight and preemption_cost: with every time, job and node count within
schedgym.limits, a step's reward then stays a finite float64 (the defaults are 1, 1 and 0)"""


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines a :class:`~schedgym.envs.PreemptionEnv`. Bad values raise
    :class:`~schedgym.errors.ConfigError` stating the expected and the actual value, whichever front end gave
    them (``gym.make`` and ``gym.make_vec`` keyword arguments, ``schedgym train --env-kwargs``, Python): a
    wrong type (a bool is not a number, 2.5 not an integer, 5 not a cluster name), a number that is not finite
    or beyond its limit. Numpy scalars are taken and stored as Python numbers."""

    cluster: str | None = None
    """cluster preset name or path to a cluster CSV, a string or a ``pathlib.Path`` (stored as a string; None:
    the workload's own, paper for synthetic ones)"""
    workload: str = "paper"
    """synthetic preset, bundled trace workload (philly, ...) cut into n_jobs windows (with ``trace``, whose file
    is the workload, only the default is accepted),
    or ``mix``: every episode a training level of :mod:`schedgym.workloads.distribution`, its own cluster,
    n_jobs and estimate noise (``cluster`` is then refused; ``n_jobs`` and ``estimate_noise``, which
    always have a value, a default or the registered id's, are not used)"""
    split: str = "train"
    """for a bundled trace workload: which time split episodes come from (train, validation, test); any other
    workload refuses a split other than ``train`` (a synthetic one draws afresh, ``mix`` plays training levels,
    a trace file's episodes are windows of the whole file)"""
    trace: str | None = None
    """trace CSV (a string or a ``pathlib.Path``, stored as a string); each episode is a window of ``n_jobs``
    consecutive jobs from a random start"""
    n_jobs: int = 500
    """jobs per episode"""
    load: float | None = None
    """offered GPU load of a synthetic workload (None: the preset's own, 1.0 for paper and realistic)"""
    num_levels: int | None = None
    """for ``workload="mix"``: train on the first ``num_levels`` training levels only (None: every training
    level, seeds 1,000,000 and above; docs/workloads.md)"""
    sim: SimConfig = field(default_factory=SimConfig)
    """the simulator's rules (queue, backfill, placement, the cap P, restart overhead); a dict of
    :class:`~schedgym.sim.SimConfig` fields is accepted (``gym.make(id, sim={"max_preemptions": 2})``)"""
    max_candidates: int = 16
    """victim mode: candidate rows in the observation; the action space is ``Discrete(max_candidates + 1)``
    (the plan mode has no candidate rows and refuses a value other than the default)"""
    action_mode: str = "victim"
    """``victim``: victims are chosen one per action (:mod:`schedgym.decision.stepwise`); ``plan``: one whole
    plan per request, among the plan options (:mod:`schedgym.decision.plan_mode`; observation version 2 only)"""
    observation_version: int = 1
    """1: times squashed with fixed scales (:data:`schedgym.decision.features.JOB_FEATURES` ...); 2: scale-free
    and queue-aware (:mod:`schedgym.decision.scalefree`), the plan mode's only version"""
    max_plans: int = 24
    """plan mode: option rows in the observation (wait included); the action space is ``Discrete(max_plans)``
    (the victim mode has no plan rows and refuses a value other than the default)"""
    queue_rows: int = 4
    """observation version 2: queue rows per job class (the oldest waiting TE jobs, then BE jobs); version 1 has
    no queue rows and refuses a value other than the default"""
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
    illegal_action: str = "raise"
    """an illegal action (an integer outside the mask): ``raise`` (:class:`~schedgym.errors.IllegalDecisionError`)
    or ``wait`` (taken as 0, preempt nobody, and counted in ``info["illegal_actions"]``): for clients that
    cannot mask and cannot insert a wrapper (``make_vec`` with the vector entry point). A non-integer action
    still raises"""
    observation: str = "flat"
    """``flat`` (the ``Box`` of :mod:`schedgym.decision.features`) or ``dict``: ``{"observations": that Box,
    "action_mask": Box(0, 1, (n,), float32)}`` (``n`` the number of actions: ``max_candidates + 1`` in the
    victim mode, ``max_plans`` in the plan mode), the legal actions inside the observation,
    the convention of RLlib's action-masking module (TorchRL's ``ActionMask`` reads it too; Tianshou reads
    ``obs``/``mask``, a one-line rename: docs/clients.md)"""
    info: str = "flat"
    """what ``info`` holds: ``flat`` (numbers of one type and shape for the whole episode, which every RL
    library can store: ``te_job`` as a job index, -1 for none, and the reward's parts as ``reward_te``,
    ``reward_be``, ``reward_preemption``) or ``full`` (also ``te_job_id``, the job's name or None, and
    ``reward_parts``, a dict)"""

    def __post_init__(self) -> None:
        # Types first, each field's own message; then the workload source checks the names together.
        for name in ("cluster", "trace"):
            value = getattr(self, name)
            if value is not None:
                what = "a preset name or a path" if name == "cluster" else "a path"
                object.__setattr__(self, name, _path(name, value, what))
        if isinstance(self.sim, dict):
            unknown = sorted(set(map(str, self.sim)) - {f.name for f in fields(SimConfig)})
            if unknown:
                raise ConfigError(f"Unknown sim fields {unknown}; expected fields of SimConfig")
            object.__setattr__(self, "sim", SimConfig(**self.sim))
        if not isinstance(self.sim, SimConfig):
            raise ConfigError(f"Expected sim to be a SimConfig or a dict of its fields, got {self.sim!r}")
        if not isinstance(self.workload, str):
            raise ConfigError(
                f"Expected workload to be a workload name, got {type(self.workload).__name__} {self.workload!r}"
            )
        if not isinstance(self.split, str) or self.split not in SPLITS:
            raise ConfigError(f"Expected split in {list(SPLITS)}, got {self.split!r}")
        _int(self, "n_jobs", 1, MAX_JOBS)
        _int(self, "max_candidates", 1, MAX_CANDIDATES)
        _int(self, "max_plans", 2, MAX_CANDIDATES)
        _int(self, "queue_rows", 0, MAX_QUEUE_ROWS)
        _int(self, "observation_version", 1, 2)
        if not isinstance(self.action_mode, str) or self.action_mode not in ("victim", "plan"):
            raise ConfigError(f"Expected action_mode 'victim' or 'plan', got {self.action_mode!r}")
        if self.action_mode == "plan" and self.observation_version != 2:
            raise ConfigError(
                f"Expected observation_version 2 with action_mode 'plan' (its only version), got "
                f"{self.observation_version!r}"
            )
        if self.num_levels is not None:
            if self.workload != "mix" or self.trace is not None:
                raise ConfigError(f"num_levels applies to workload 'mix', got workload {self.workload!r}")
            _int(self, "num_levels", 1, 2**62)
        kind = self.source.kind  # the workload name and load are checked there
        _check_applies(self, kind)
        _check_mode_applies(self)
        if self.load is not None and type(self.load) not in (int, float):  # a numpy scalar
            object.__setattr__(self, "load", float(self.load))
        if not isinstance(self.illegal_action, str) or self.illegal_action not in ("raise", "wait"):
            raise ConfigError(f"Expected illegal_action 'raise' or 'wait', got {self.illegal_action!r}")
        if not isinstance(self.observation, str) or self.observation not in ("flat", "dict"):
            raise ConfigError(f"Expected observation 'flat' or 'dict', got {self.observation!r}")
        if not isinstance(self.info, str) or self.info not in ("flat", "full"):
            raise ConfigError(f"Expected info 'flat' or 'full', got {self.info!r}")
        if not isinstance(self.reward, str) or self.reward not in ("slowdown", "bounded_slowdown"):
            raise ConfigError(f"Expected reward 'slowdown' or 'bounded_slowdown', got {self.reward!r}")
        for name, maximum in (
            ("estimate_noise", MAX_ESTIMATE_NOISE),
            ("te_weight", MAX_WEIGHT),
            ("be_weight", MAX_WEIGHT),
            ("preemption_cost", MAX_WEIGHT),
        ):
            value = getattr(self, name)
            if not is_number(value):
                raise ConfigError(f"Expected {name} to be a finite number, got {value!r}")
            if value < 0:
                raise ConfigError(f"Expected {name} >= 0, got {value!r}")
            if value > maximum:
                raise ConfigError(
                    f"Expected {name} <= {maximum:g} (schedgym.envs.config.{_LIMIT[name]}), got {value!r}"
                )
            if type(value) not in (int, float):  # a numpy scalar: stored as the Python number it is
                object.__setattr__(self, name, float(value))

    @property
    def source(self) -> WorkloadSource:
        """Where episodes' workloads come from."""
        return WorkloadSource(workload=self.workload, trace=self.trace, n_jobs=self.n_jobs, load=self.load)

    @property
    def decision_spec(self) -> DecisionSpec:
        """How the agent is asked: action mode, observation version and row counts."""
        return DecisionSpec(
            mode="plan" if self.action_mode == "plan" else "victim",
            version=self.observation_version,
            max_candidates=self.max_candidates,
            max_plans=self.max_plans,
            queue_rows=self.queue_rows,
        )

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


_LIMIT = {
    "estimate_noise": "MAX_ESTIMATE_NOISE",
    "te_weight": "MAX_WEIGHT",
    "be_weight": "MAX_WEIGHT",
    "preemption_cost": "MAX_WEIGHT",
}


def _check_applies(config: EnvConfig, kind: str) -> None:
    """Refuse a field the workload (of source kind ``kind``) does not use, rather than ignore it: a user who
    asks for the test split or a cluster would otherwise train on something else without a word."""
    if config.split != "train" and kind != "bundled":
        name, split = config.source.name, config.split
        reason = {
            "synthetic": f"{name!r} draws every episode afresh (reset(options={{'workload_seed': s}}) plays compare's "
            "seed s, 100,000 + i its validation workload i)",
            "mix": "'mix' episodes are training levels "
            f"(reset(options={{'workload_seed': level_seed({split!r}, i)}}) plays level i of {split!r})",
            "file": f"the episodes of the trace file {name!r} are windows of the whole file, whatever the split",
        }[kind]
        raise ConfigError(
            f"split applies to bundled trace workloads ({', '.join(sorted(TRACE_WORKLOADS))}), got split {split!r} "
            f"for {name!r}; {reason}"
        )
    if kind == "file" and config.workload != _default("workload"):
        # The trace wins (WorkloadSource): a workload named beside it would be dropped without a word; the
        # default passes (a dataclass cannot tell it from an omitted one).
        raise ConfigError(
            f"Expected no workload with trace (episodes are windows of the trace file), got workload "
            f"{config.workload!r} and trace {config.trace!r}; pass one of them"
        )
    if config.cluster is not None and kind == "mix":
        # A registered id may set the cluster (PreemptionLarge-v1 does): cluster=None in gym.make overrides it.
        raise ConfigError(
            f"Expected no cluster with workload 'mix' (each level draws its own), got cluster {config.cluster!r} "
            "(if the environment id sets it, pass cluster=None)"
        )


def _check_mode_applies(config: EnvConfig) -> None:
    """Refuse a row count the action mode or observation version does not read, rather than ignore it: a user
    who sets ``max_plans`` in the victim mode, ``max_candidates`` in the plan mode or ``queue_rows`` with
    observation version 1 would otherwise train on another observation than the one asked for, without a
    word. A dataclass cannot tell a given value from its default, so (as with ``split``) the default passes."""
    default = {name: _default(name) for name in ("max_plans", "max_candidates", "queue_rows")}
    mode, version = config.action_mode, config.observation_version
    if mode == "victim" and config.max_plans != default["max_plans"]:
        raise ConfigError(
            f"max_plans applies to action_mode 'plan', got max_plans {config.max_plans!r} with action_mode 'victim' "
            f"(its rows are the max_candidates candidates); pass action_mode='plan' with observation_version=2, "
            f"or leave max_plans at its default {default['max_plans']!r}"
        )
    if mode == "plan" and config.max_candidates != default["max_candidates"]:
        raise ConfigError(
            f"max_candidates applies to action_mode 'victim', got max_candidates {config.max_candidates!r} with "
            f"action_mode 'plan' (its rows are the max_plans plan options); set max_plans instead, or leave "
            f"max_candidates at its default (if the environment id sets another, pass "
            f"max_candidates={default['max_candidates']!r})"
        )
    if version == 1 and config.queue_rows != default["queue_rows"]:
        raise ConfigError(
            f"queue_rows applies to observation_version 2, got queue_rows {config.queue_rows!r} with "
            f"observation_version 1 (it has no queue rows); pass observation_version=2, or leave queue_rows at its "
            f"default {default['queue_rows']!r}"
        )


def _default(name: str) -> Any:
    """The default of the EnvConfig field ``name``."""
    return next(f.default for f in fields(EnvConfig) if f.name == name)


def _int(cfg: EnvConfig, name: str, minimum: int, maximum: int) -> None:
    value = getattr(cfg, name)
    if not is_integer(value) or value < minimum:
        raise ConfigError(f"Expected {name} to be an integer >= {minimum}, got {value!r}")
    if value > maximum:
        raise ConfigError(f"Expected {name} <= {maximum:,}, got {value!r}")
    if type(value) is not int:  # a numpy integer
        object.__setattr__(cfg, name, int(value))


def _path(name: str, value: object, what: str) -> str:
    """A ``cluster`` or ``trace`` argument as a string (a ``pathlib.Path`` is taken), else a ConfigError."""
    try:
        return cluster_argument(name, value)
    except ConfigError:
        raise ConfigError(f"Expected {name} to be {what}, got {type(value).__name__} {value!r}") from None

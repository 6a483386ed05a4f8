"""A Procgen-style distribution of workloads and clusters, for training agents that generalise.

A :class:`WorkloadDistribution` holds *ranges*; a *level* is one draw from them: a cluster (node count and
node shape), a :class:`~schedgym.workloads.synthetic.SyntheticConfig` (load, TE share, durations, gang mix,
grace periods, restart overheads, n_jobs) and the environment's ``estimate_noise``. A level is a pure
function of its level seed: :func:`draw_level` seeds a numpy Generator from it and nothing else, so the same
seed gives the same level in every process, on both engines.

Level seeds are split into ranges that never overlap (as Procgen keeps its test levels out of training):

============  ======================  =============================================
split         level seeds             used by
============  ======================  =============================================
test          0 .. 99,999             ``schedgym compare --workload mix`` (seed i = level i)
validation    100,000 .. 999,999      model selection (validation level i = 100,000 + i)
train         1,000,000 and above     training episodes (``num_levels`` restricts them to a finite set)
============  ======================  =============================================

Asking a split for a level outside its range raises :class:`~schedgym.errors.ConfigError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from schedgym.errors import ConfigError
from schedgym.limits import MAX_JOBS, MAX_NODES
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.simulator import is_integer, is_number
from schedgym.workloads.synthetic import PREEMPTION_COST_BY_GPUS, PRESETS, SyntheticConfig

LEVEL_SPLITS: dict[str, tuple[int, int | None]] = {
    "test": (0, 100_000),
    "validation": (100_000, 1_000_000),
    "train": (1_000_000, None),
}
"""Level seeds of each split, ``[start, stop)`` (None: unbounded); the ranges are disjoint."""

NODE_SHAPES: dict[str, tuple[float, float, float]] = {
    "8x64x512": (8.0, 64.0, 512.0),
    "4x32x256": (4.0, 32.0, 256.0),
    "8x96x384": (8.0, 96.0, 384.0),
}
"""Node shapes (GPUs, CPUs, memory GB) a level's cluster is built from: the ``paper`` cluster's node, a
half-size node, and the ``philly`` cluster's node."""

BE_GPU_SIZES: tuple[tuple[float, float], ...] = PRESETS["paper"].be_gpus
"""The BE GPU sizes and base weights (the ``paper`` preset's, read from it). A level gives the sizes above its
node's GPUs (the multi-node gangs) the total weight ``gang_share`` and the others the rest, each group in these
ratios."""

_LEVEL_KEY = 0x6D6978  # "mix": the level Generator's stream differs from the synthetic workloads' seeds


def _range(name: str, value: object, lo: float, hi: float, *, integer: bool = False) -> tuple[float, float]:
    """``value`` as a checked ``(low, high)`` pair with ``lo <= low <= high <= hi``, else a one-line ConfigError."""
    kind = "integers" if integer else "numbers"
    ok = isinstance(value, (tuple, list)) and len(value) == 2
    if ok:
        ok = all(is_integer(v) if integer else is_number(v) for v in value)  # type: ignore[attr-defined]
    if not ok:
        raise ConfigError(f"Expected {name} to be a (low, high) pair of finite {kind}, got {value!r}")
    low, high = (int(v) if integer else float(v) for v in value)  # type: ignore[attr-defined]
    if not lo <= low <= high <= hi:
        raise ConfigError(f"Expected {lo:g} <= {name} low <= high <= {hi:g}, got {value!r}")
    return (low, high)


@dataclass(frozen=True)
class WorkloadDistribution:
    """Ranges of workloads and clusters; each level draws every quantity uniformly within its range (the
    scales log-uniformly, so that 0.5 and 2 are equally likely around 1). Construction checks every range."""

    load: tuple[float, float] = (0.6, 1.4)
    """offered GPU load"""
    n_nodes: tuple[int, int] = (4, 32)
    """nodes of the cluster"""
    shapes: tuple[str, ...] = tuple(NODE_SHAPES)
    """node shapes (names in :data:`NODE_SHAPES`), one drawn per level; every node of a level has it"""
    te_fraction: tuple[float, float] = (0.1, 0.5)
    """share of TE jobs"""
    duration_scale: tuple[float, float] = (0.5, 2.0)
    """factor on the TE and BE durations (median, min and max) of the ``paper`` preset"""
    gang_share: tuple[float, float] = (0.0, 0.3)
    """weight of the BE GPU sizes larger than a node (multi-node gangs)"""
    grace_scale: tuple[float, float] = (0.5, 2.0)
    """factor on the grace period's median, min and max (``paper``: 30 s, 5 s, 180 s)"""
    restart_scale: tuple[float, float] = (0.0, 2.0)
    """factor on the restart overhead by GPUs (:data:`~schedgym.workloads.synthetic.PREEMPTION_COST_BY_GPUS`:
    7 s for 1 GPU, 30 s up to 8, 60 s above); 0 gives none"""
    estimate_noise: tuple[float, float] = (0.0, 0.5)
    """sigma of the environment's estimate error (``EnvConfig.estimate_noise``)"""
    n_jobs: tuple[int, int] = (200, 1000)
    """jobs of a level"""

    def __post_init__(self) -> None:
        object.__setattr__(self, "load", _range("load", self.load, 0.05, 5.0))
        object.__setattr__(self, "n_nodes", _range("n_nodes", self.n_nodes, 1, MAX_NODES, integer=True))
        shapes = self.shapes
        if isinstance(shapes, str) or not isinstance(shapes, (tuple, list)) or not shapes:
            raise ConfigError(
                f"Expected shapes to be a non-empty tuple of names in {list(NODE_SHAPES)}, got {shapes!r}"
            )
        unknown = [s for s in shapes if s not in NODE_SHAPES]
        if unknown:
            raise ConfigError(f"Expected shapes in {list(NODE_SHAPES)}, got {unknown!r}")
        object.__setattr__(self, "shapes", tuple(shapes))
        object.__setattr__(self, "te_fraction", _range("te_fraction", self.te_fraction, 0.0, 1.0))
        for name in ("duration_scale", "grace_scale"):
            object.__setattr__(self, name, _range(name, getattr(self, name), 0.05, 20.0))
        object.__setattr__(self, "gang_share", _range("gang_share", self.gang_share, 0.0, 1.0))
        object.__setattr__(self, "restart_scale", _range("restart_scale", self.restart_scale, 0.0, 20.0))
        object.__setattr__(self, "estimate_noise", _range("estimate_noise", self.estimate_noise, 0.0, 10.0))
        object.__setattr__(self, "n_jobs", _range("n_jobs", self.n_jobs, 1, MAX_JOBS, integer=True))
        # The largest BE job (16 GPUs) must fit the smallest cluster a level can draw.
        smallest = self.n_nodes[0] * min(NODE_SHAPES[s][0] for s in self.shapes)
        largest = max(g for g, _ in BE_GPU_SIZES)
        if smallest < largest:
            raise ConfigError(
                f"Expected the smallest cluster to hold a {largest:g}-GPU job, got n_nodes low {self.n_nodes[0]} "
                f"of {min(NODE_SHAPES[s][0] for s in self.shapes):g} GPUs ({smallest:g} GPUs)"
            )


@dataclass(frozen=True)
class Level:
    """One draw of a :class:`WorkloadDistribution`: what an episode or a compare seed runs."""

    seed: int
    """the level seed"""
    cluster: ClusterSpec
    workload: SyntheticConfig
    estimate_noise: float
    shape: str
    """the node shape's name (:data:`NODE_SHAPES`)"""


def level_seed(split: str, index: int, num_levels: int | None = None) -> int:
    """The level seed of level ``index`` of ``split`` (test: ``index``; validation: 100,000 + ``index``;
    train: 1,000,000 + ``index``, below 1,000,000 + ``num_levels`` when that is given)."""
    if split not in LEVEL_SPLITS:
        raise ConfigError(f"Expected split in {list(LEVEL_SPLITS)}, got {split!r}")
    if not is_integer(index) or index < 0:
        raise ConfigError(f"Expected a level index >= 0 (an integer), got {index!r}")
    start, stop = LEVEL_SPLITS[split]
    if num_levels is not None:
        if split != "train":
            raise ConfigError(f"num_levels restricts the train split only, got split {split!r}")
        if not is_integer(num_levels) or num_levels < 1:
            raise ConfigError(f"Expected num_levels >= 1 (an integer), got {num_levels!r}")
        stop = start + int(num_levels)
    seed = start + int(index)
    # check_level_seed's range, said as the index asked for (compare's --first-seed), not the seed; the split
    # is known and the seed an integer from start on, so nothing else of that check is left to do.
    if stop is not None and seed >= stop:
        raise ConfigError(
            f"Expected a {split} level index below {stop - start:,} (level seeds {start:,}..{stop - 1:,}), "
            f"got {int(index):,}"
        )
    return seed


def draw_train_level_seed(rng: np.random.Generator, num_levels: int | None = None) -> int:
    """A training level seed drawn from ``rng``: one of the first ``num_levels`` (None: any). The environment's
    reset draws its episodes' levels so, and imitation records its teacher on the same ones."""
    index = int(rng.integers(num_levels if num_levels is not None else 2**62))
    return level_seed("train", index, num_levels)


def check_level_seed(split: str, seed: int, stop: int | None = None) -> None:
    """Raise a ConfigError unless ``seed`` is a level seed of ``split`` (below ``stop`` if given)."""
    if split not in LEVEL_SPLITS:
        raise ConfigError(f"Expected split in {list(LEVEL_SPLITS)}, got {split!r}")
    start, end = LEVEL_SPLITS[split]
    end = stop if stop is not None else end
    if not is_integer(seed):
        raise ConfigError(f"Expected a level seed (an integer), got {seed!r}")
    if seed < start or (end is not None and seed >= end):
        where = f"{start:,}..{end - 1:,}" if end is not None else f">= {start:,}"
        raise ConfigError(f"Expected a {split} level seed in {where}, got {seed:,}")


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    if lo <= 0:  # a range from 0 (restart_scale) is drawn uniformly
        return float(rng.uniform(lo, hi))
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def draw_level(distribution: WorkloadDistribution, seed: int) -> Level:
    """The level of ``seed`` (any split's: check the split with :func:`level_seed` first). A pure function of
    ``distribution`` and ``seed``: a Generator seeded from ``(seed, "mix")`` draws, in this order, the node
    shape, the node count, load, TE share, duration scale, gang share, grace scale, restart scale, estimate
    noise and n_jobs. Changing the order changes every level."""
    if not is_integer(seed) or seed < 0:
        raise ConfigError(f"Expected a level seed >= 0 (an integer), got {seed!r}")
    d = distribution
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _LEVEL_KEY]))
    shape = d.shapes[int(rng.integers(len(d.shapes)))]
    n_nodes = int(rng.integers(d.n_nodes[0], d.n_nodes[1] + 1))
    load = float(rng.uniform(*d.load))
    te_fraction = float(rng.uniform(*d.te_fraction))
    duration = _log_uniform(rng, *d.duration_scale)
    gang = float(rng.uniform(*d.gang_share))
    grace = _log_uniform(rng, *d.grace_scale)
    restart = _log_uniform(rng, *d.restart_scale)
    noise = float(rng.uniform(*d.estimate_noise))
    n_jobs = int(rng.integers(d.n_jobs[0], d.n_jobs[1] + 1))

    gpus, cpus, mem = NODE_SHAPES[shape]
    cluster = ClusterSpec.homogeneous(n_nodes, gpus, cpus, mem, name=f"mix[{seed}]")
    base = SyntheticConfig()
    # CPUs and memory per GPU follow the node's ratio (half of it or all of it), so every job fits a node.
    config = SyntheticConfig(
        n_jobs=n_jobs,
        load=load,
        te_fraction=te_fraction,
        te_duration_median=base.te_duration_median * duration,
        te_duration_min=max(1.0, round(base.te_duration_min * duration)),
        te_duration_max=base.te_duration_max * duration,
        be_duration_median=base.be_duration_median * duration,
        be_duration_min=max(1.0, round(base.be_duration_min * duration)),
        be_duration_max=base.be_duration_max * duration,
        be_gpus=_be_gpus(gang, gpus),
        gpus_per_node=gpus,
        cpus_per_gpu=((cpus / gpus / 2, 0.5), (cpus / gpus, 0.5)),
        mem_per_gpu=((mem / gpus / 2, 0.5), (mem / gpus, 0.5)),
        grace_median=base.grace_median * grace,
        grace_min=base.grace_min * grace,
        grace_max=base.grace_max * grace,
        te_grace=base.te_grace * grace,
        restart_overhead_by_gpus=tuple((b, s * restart) for b, s in PREEMPTION_COST_BY_GPUS) if restart > 0 else (),
    )
    return Level(seed=int(seed), cluster=cluster, workload=config, estimate_noise=noise, shape=shape)


def _be_gpus(gang_share: float, gpus_per_node: float) -> tuple[tuple[float, float], ...]:
    """:data:`BE_GPU_SIZES` with the sizes above ``gpus_per_node`` weighted ``gang_share`` in total."""
    single = [(g, w) for g, w in BE_GPU_SIZES if g <= gpus_per_node]
    multi = [(g, w) for g, w in BE_GPU_SIZES if g > gpus_per_node]
    ws, wm = sum(w for _, w in single), sum(w for _, w in multi)
    out = [(g, w / ws * (1.0 - gang_share)) for g, w in single]
    out += [(g, w / wm * gang_share) for g, w in multi]
    return tuple((g, p) for g, p in out if p > 0)


MIX = WorkloadDistribution()
"""The default distribution, the ``mix`` workload."""

__all__ = [
    "BE_GPU_SIZES",
    "LEVEL_SPLITS",
    "MIX",
    "NODE_SHAPES",
    "Level",
    "WorkloadDistribution",
    "check_level_seed",
    "draw_level",
    "draw_train_level_seed",
    "level_seed",
]

"""Seeded synthetic workloads.

A :class:`SyntheticConfig` describes the distributions; :func:`generate` draws a workload from a numpy
``Generator``. The ``paper`` preset is our reconstruction of the OpML'19 paper's synthetic workload, whose
exact parameters are not published: its values were *calibrated* so that FIFO versus FitGpp on the
``paper`` cluster lands near the paper's headline ratios (see README, "Reproducing the paper").

How a job is drawn:
- class TE with probability ``te_fraction``, else BE;
- duration ~ lognormal(median, sigma), clipped to [min, max] (per class);
- GPUs from a discrete distribution (per class); a request above ``gpus_per_node`` becomes a gang over
  ``ceil(gpus / gpus_per_node)`` nodes;
- CPUs = GPUs x a value drawn from ``cpus_per_gpu``; memory = GPUs x a value drawn from ``mem_per_gpu``;
- grace period: BE ~ lognormal(``grace_median``, ``grace_sigma``) clipped to [``grace_min``, ``grace_max``],
  rounded to whole seconds; TE jobs get ``te_grace`` (never used: TE jobs are not preempted). With
  ``grace_median_by_gpus``, a BE job's draw is then scaled to the median of its size and rounded again;
- restart overhead: with ``restart_overhead_by_gpus``, each job's own (by its GPUs); without, none (the
  simulator's ``SimConfig.restart_overhead`` applies).
Arrivals are a Poisson process whose rate makes the offered GPU load (GPU-seconds per second over cluster
GPUs) equal ``load`` for the jobs actually drawn.

Every quantity is drawn for all jobs at once, and the jobs stay columns (a
:class:`~schedgym.sim.job.JobTable`): an environment's reset draws a workload and builds the native engine
from it without making a JobSpec per job. The draws (which ``Generator`` calls, in which order) define the
workloads of every seed; changing them changes every published result.

The Python code below is the specification. When the compiled module ``schedgym.workloads._synthetic``
(``schedgym/workloads/native/synthetic.cpp``) is there, :func:`generate` runs the same draws and the same
float operations in C++ without the GIL, on the Generator's own bit generator and numpy's own distribution
functions: the same jobs, bit for bit, and the same Generator state afterwards (held to the Python path by
``tests/test_synthetic_native.py``).
"""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple

import numpy as np

from schedgym.errors import ConfigError, UnknownNameError
from schedgym.limits import MAX_AMOUNT, MAX_JOBS, MAX_NODES, MAX_TIME, check_amount, check_time
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import JobClass, JobTable
from schedgym.sim.simulator import is_integer, is_number
from schedgym.workloads.trace import Workload

_SYNTHETIC_VERSION = 2
"""The version of the compiled generator this module expects (``schedgym.workloads._synthetic``)."""


def _load_native() -> Any:
    from schedgym._optional import import_optional

    _synthetic = import_optional("schedgym.workloads._synthetic")
    if _synthetic is None:
        return None
    # numpy's distributions are linked into the module: another numpy may draw differently, so the module
    # serves only the numpy it was built against.
    if _synthetic.SYNTHETIC_VERSION != _SYNTHETIC_VERSION or _synthetic.NUMPY_VERSION != np.__version__:
        return None
    return _synthetic


_native = _load_native()


def _pairs(name: str, table: object, what: str) -> list[tuple[float, float]]:
    """``table`` (a tuple, list or array of 2-item pairs of numbers) as a list of its pairs (the numbers as
    given, for the messages), else a ConfigError. The values' ranges (finite among them) are the caller's to
    check."""
    sequence = (tuple, list, np.ndarray)
    try:
        if not isinstance(table, sequence):
            raise TypeError
        pairs = []
        for pair in table:
            if not isinstance(pair, sequence):
                raise TypeError
            a, b = pair
            if not (_is_real(a) and _is_real(b)):
                raise TypeError
            pairs.append((a, b))
    except (TypeError, ValueError):
        raise ConfigError(f"Expected {name} to be {what} pairs of numbers, got {table!r}") from None
    return pairs


def _is_real(value: object) -> bool:
    """A real number, finite or not (not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_dist(name: str, dist: tuple[tuple[float, float], ...]) -> list[tuple[float, float]]:
    """A distribution's (value, probability) pairs, checked: non-empty, probabilities >= 0 summing to 1,
    values finite and > 0."""
    if isinstance(dist, (tuple, list, np.ndarray)) and len(dist) == 0:
        raise ConfigError(f"Expected a non-empty distribution for {name}, got {dist!r}")
    pairs = _pairs(name, dist, "(value, probability)")
    probs = [p for _, p in pairs]
    if any(p < 0 for p in probs) or not math.isclose(sum(probs), 1.0, abs_tol=1e-6):
        raise ConfigError(f"Expected the probabilities of {name} to be >= 0 and sum to 1, got {probs}")
    values = [v for v, _ in pairs]
    if any(v <= 0 for v in values):
        raise ConfigError(f"Expected positive values in {name}, got {values}")
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"Expected finite values in {name}, got {values}")
    return pairs


@dataclass(frozen=True)
class SyntheticConfig:
    """Distributions of a synthetic workload. Times in seconds.

    Construction checks every field, whichever front end gave it (``sweep --set``, a preset's overrides,
    Python), and what they give together: every job :func:`generate` can draw is within
    :mod:`schedgym.limits` (durations rounded to at least 1 s and at most ``MAX_TIME``, GPUs, CPUs and memory
    at most ``MAX_AMOUNT``, gangs of at most ``MAX_NODES`` nodes), so that a bad value raises
    :class:`~schedgym.errors.ConfigError` naming it before any workload is drawn. Numbers are ints, floats or
    numpy scalars (not bools or strings); ``n_jobs`` is an integer.
    """

    n_jobs: int = 5000
    """number of jobs drawn"""
    load: float = 1.0
    """offered GPU load relative to the cluster's GPUs"""
    te_fraction: float = 0.3
    """probability that a job is TE"""
    te_duration_median: float = 900.0
    te_duration_sigma: float = 0.8
    te_duration_min: float = 60.0
    te_duration_max: float = 3600.0
    be_duration_median: float = 3 * 3600.0
    be_duration_sigma: float = 1.0
    be_duration_min: float = 600.0
    be_duration_max: float = 48 * 3600.0
    te_gpus: tuple[tuple[float, float], ...] = ((1, 0.7), (2, 0.2), (4, 0.1))
    """(GPUs, probability) for TE jobs"""
    be_gpus: tuple[tuple[float, float], ...] = ((1, 0.3), (2, 0.25), (4, 0.25), (8, 0.15), (16, 0.05))
    """(GPUs, probability) for BE jobs"""
    gpus_per_node: float = 8.0
    """GPUs of one node: larger requests become gangs"""
    cpus_per_gpu: tuple[tuple[float, float], ...] = ((4, 0.5), (8, 0.5))
    mem_per_gpu: tuple[tuple[float, float], ...] = ((32, 0.5), (64, 0.5))
    grace_median: float = 30.0
    grace_sigma: float = 0.7
    grace_min: float = 5.0
    grace_max: float = 180.0
    te_grace: float = 30.0
    grace_median_by_gpus: tuple[tuple[float, float], ...] = ()
    """(up to GPUs, seconds) pairs, bounds increasing: a BE job with ``g`` GPUs takes the seconds of the first
    pair whose bound is >= ``g`` (the last pair's above every bound) as its grace period's median: its drawn
    grace period (clipped and rounded as above) is multiplied by ``seconds / grace_median`` and rounded to whole
    seconds again. Empty: every BE job's median is ``grace_median``"""
    restart_overhead_by_gpus: tuple[tuple[float, float], ...] = ()
    """(up to GPUs, seconds) pairs, bounds increasing: each job's restart overhead (``JobSpec.restart_overhead``)
    by its GPUs, looked up as ``grace_median_by_gpus``. Empty: jobs give none"""

    def __post_init__(self) -> None:
        # Every field's type and range, then what the fields give together: every job drawn is a valid job
        # (schedgym.limits), so that a bad value fails here, naming it, before any workload is drawn.
        if not is_integer(self.n_jobs) or self.n_jobs <= 0:
            raise ConfigError(f"Expected n_jobs > 0 (an integer), got {self.n_jobs!r}")
        if self.n_jobs > MAX_JOBS:
            raise ConfigError(f"Expected n_jobs <= {MAX_JOBS:,} (schedgym.limits.MAX_JOBS), got {self.n_jobs!r}")
        if type(self.n_jobs) is not int:  # a numpy integer
            object.__setattr__(self, "n_jobs", int(self.n_jobs))
        check_load(self.load)
        if not (is_number(self.te_fraction) and 0 <= self.te_fraction <= 1):
            raise ConfigError(f"Expected 0 <= te_fraction <= 1, got {self.te_fraction!r}")
        for name in _NUMBER_FIELDS:
            value = getattr(self, name)
            if not is_number(value):
                raise ConfigError(f"Expected {name} to be a finite number, got {value!r}")
        for cls in ("te", "be"):
            lo, hi = getattr(self, f"{cls}_duration_min"), getattr(self, f"{cls}_duration_max")
            med = getattr(self, f"{cls}_duration_median")
            if not (0 < lo <= hi):
                raise ConfigError(f"Expected 0 < {cls}_duration_min <= {cls}_duration_max, got {lo!r}, {hi!r}")
            if med <= 0:
                raise ConfigError(f"Expected {cls}_duration_median > 0, got {med!r}")
            if not round(lo) >= 1:  # durations are rounded to whole seconds (np.round: halves to even)
                raise ConfigError(
                    f"Expected {cls}_duration_min to round to at least 1 s (durations are drawn in whole "
                    f"seconds), got {lo!r}"
                )
            _check_time(f"{cls}_duration_max", hi)
        for name in ("te_duration_sigma", "be_duration_sigma", "grace_sigma"):
            value = getattr(self, name)
            if value < 0:
                raise ConfigError(f"Expected {name} >= 0, got {value!r}")
        if self.grace_median <= 0:
            raise ConfigError(f"Expected grace_median > 0, got {self.grace_median!r}")
        if self.te_grace < 0:
            raise ConfigError(f"Expected te_grace >= 0, got {self.te_grace!r}")
        _check_time("te_grace", self.te_grace)
        if not (0 <= self.grace_min <= self.grace_max):
            raise ConfigError(f"Expected 0 <= grace_min <= grace_max, got {self.grace_min!r}, {self.grace_max!r}")
        _check_time("grace_max", self.grace_max)
        dists = {name: _check_dist(name, getattr(self, name)) for name in _DISTRIBUTIONS}
        gpus = float(max(v for name in ("te_gpus", "be_gpus") for v, _ in dists[name]))
        if check_amount(gpus) is not None:
            raise ConfigError(
                f"Expected the GPUs of te_gpus and be_gpus at most {MAX_AMOUNT:g} (schedgym.limits.MAX_AMOUNT), "
                f"got {gpus!r}"
            )
        for name in ("cpus_per_gpu", "mem_per_gpu"):
            per_gpu = float(max(v for v, _ in dists[name]))
            if check_amount(gpus * per_gpu) is not None:
                raise ConfigError(
                    f"Expected {name} at most {MAX_AMOUNT / gpus:g} (a job of {gpus:g} GPUs gets up to "
                    f"{MAX_AMOUNT:g}, schedgym.limits.MAX_AMOUNT), got {per_gpu!r}"
                )
        gpn = self.gpus_per_node
        if not gpn > 0:
            raise ConfigError(f"Expected gpus_per_node > 0, got {gpn!r}")
        if gpus / gpn > MAX_NODES:  # the gang size ceil(gpus / gpus_per_node), without forming it
            raise ConfigError(
                f"Expected gpus_per_node >= {gpus / MAX_NODES:g} (a job of {gpus:g} GPUs spans at most "
                f"{MAX_NODES:,} nodes, schedgym.limits.MAX_NODES), got {gpn!r}"
            )
        for name in ("grace_median_by_gpus", "restart_overhead_by_gpus"):
            _check_by_gpus(name, getattr(self, name))
        if self.grace_median_by_gpus:  # a BE job's grace period is scaled by seconds / grace_median
            longest = max(v for _, v in self.grace_median_by_gpus)
            if self.grace_max * longest > MAX_TIME * self.grace_median:
                raise ConfigError(
                    f"Expected grace periods of at most {MAX_TIME:g} s (schedgym.limits.MAX_TIME), got up to "
                    f"grace_max x the longest seconds of grace_median_by_gpus / grace_median = "
                    f"{self.grace_max!r} x {longest!r} / {self.grace_median!r}"
                )


_DISTRIBUTIONS = ("te_gpus", "be_gpus", "cpus_per_gpu", "mem_per_gpu")
_NUMBER_FIELDS = (
    "te_duration_median",
    "te_duration_sigma",
    "te_duration_min",
    "te_duration_max",
    "be_duration_median",
    "be_duration_sigma",
    "be_duration_min",
    "be_duration_max",
    "gpus_per_node",
    "grace_median",
    "grace_sigma",
    "grace_min",
    "grace_max",
    "te_grace",
)
"""the scalar number fields of :class:`SyntheticConfig` (besides ``load`` and ``te_fraction``)"""


def _check_time(name: str, value: float) -> None:
    problem = check_time(float(value))
    if problem is not None:
        raise ConfigError(f"Expected {name} {problem.removeprefix('expected ')}, got {value!r}")


MAX_LOAD = 10.0
"""Loads must be below this: a synthetic workload offering ten times the cluster's GPUs only grows its queue."""
MIN_LOAD = 0.01
"""Loads must be at least this: below, the cluster is all but empty, and the arrival rate's inverse overflowed
(5e-324 divided by zero) or pushed submit times past ``limits.MAX_TIME``."""


def check_load(load: object) -> None:
    """Raise a ConfigError unless ``load`` is a number with MIN_LOAD <= load < MAX_LOAD."""
    if (
        isinstance(load, (bool, np.bool_))
        or not isinstance(load, numbers.Real)
        or not MIN_LOAD <= float(load) < MAX_LOAD
    ):
        raise ConfigError(f"Expected {MIN_LOAD:g} <= load < {MAX_LOAD:g}, got {load!r}")


def _check_by_gpus(name: str, table: tuple[tuple[float, float], ...]) -> None:
    """A ``*_by_gpus`` table: (bound, seconds) pairs, bounds > 0 and increasing, seconds in [0, MAX_TIME]."""
    pairs = _pairs(name, table, "(up to GPUs, seconds)")
    bounds = [b for b, _ in pairs]
    if not all(math.isfinite(b) and b > 0 for b in bounds) or any(a >= b for a, b in itertools.pairwise(bounds)):
        raise ConfigError(f"Expected the GPU bounds of {name} to be > 0 and increasing, got {bounds}")
    if not all(0 <= v <= MAX_TIME for _, v in pairs):
        raise ConfigError(f"Expected the seconds of {name} to be from 0 to {MAX_TIME:g}, got {[v for _, v in pairs]}")


PREEMPTION_COST_BY_GPUS: tuple[tuple[float, float], ...] = ((1.0, 7.0), (8.0, 30.0), (16.0, 60.0))
"""Seconds a preemption costs a job by its GPUs: 7 s for 1 GPU, 30 s up to 8, 60 s above, as the Helios
simulator charges it (Hu et al., SC'21; docs/workloads.md gives the sources and the calibration)."""

PRESETS: dict[str, SyntheticConfig] = {
    "paper": SyntheticConfig(),
    # The paper's jobs, with preemption costs that grow with the victim's size (docs/workloads.md): a BE job's
    # checkpoint (grace period) and its restart each cost about PREEMPTION_COST_BY_GPUS.
    "realistic": SyntheticConfig(
        grace_median_by_gpus=PREEMPTION_COST_BY_GPUS, restart_overhead_by_gpus=PREEMPTION_COST_BY_GPUS
    ),
}


def _draw(rng: np.random.Generator, dist: tuple[tuple[float, float], ...], size: int) -> np.ndarray:
    values, cdf, _, _ = _discrete(dist)
    # rng.choice(len(values), size=size, p=p) is exactly this (numpy's Generator.choice: one uniform per
    # draw, searched in the normalised cumulative sum), without re-checking and re-summing p on every call,
    # which was a quarter of an environment's reset. tests/test_job_table.py holds it to rng.choice.
    return values[np.searchsorted(cdf, rng.random(size), side="right")]


class _Discrete(NamedTuple):
    values: np.ndarray
    cdf: np.ndarray
    """the cumulative distribution ``rng.choice`` would search"""
    smallest: float
    largest: float
    """the extreme values (for the native path's range check)"""


def _discrete(dist: tuple[tuple[float, float], ...]) -> _Discrete:
    try:
        return _dist_arrays(dist)
    except TypeError:  # an unhashable distribution (lists rather than tuples): not cached
        return _dist_arrays.__wrapped__(dist)


@functools.lru_cache(maxsize=64)
def _dist_arrays(dist: tuple[tuple[float, float], ...]) -> _Discrete:
    """A distribution's values and the cumulative distribution ``rng.choice`` would use, made once per
    distribution (they are the same arrays, with the same normalisation, on every draw)."""
    values = np.array([v for v, _ in dist], dtype=np.float64)
    probs = np.array([p for _, p in dist], dtype=np.float64)
    p = probs / probs.sum()
    cdf = p.cumsum()
    cdf /= cdf[-1]
    values.setflags(write=False)
    cdf.setflags(write=False)
    return _Discrete(values, cdf, float(values.min()), float(values.max()))


def _lognormal(rng: np.random.Generator, median: float, sigma: float, lo: float, hi: float, size: int) -> np.ndarray:
    # np.minimum(np.maximum(...)) is np.clip without its per-call dispatch overhead (the same values).
    return np.minimum(np.maximum(rng.lognormal(math.log(median), sigma, size=size), lo), hi)


@functools.lru_cache(maxsize=8)
def _job_ids(n: int) -> tuple[str, ...]:
    """``j0 .. j{n-1}``: one tuple per workload size, shared by every draw (and checked once by JobTable)."""
    return tuple(f"j{i}" for i in range(n))


def generate(
    config: SyntheticConfig, cluster: ClusterSpec, rng: np.random.Generator, name: str = "synthetic"
) -> Workload:
    """Draw one workload. Same config, cluster and generator state give the same jobs.

    The jobs are drawn as columns and stay columns (:meth:`Workload.from_table`): no
    :class:`~schedgym.sim.job.JobSpec` is made unless someone reads ``workload.jobs``.
    """
    arguments = _native_arguments(config, rng)
    if arguments is None:
        table = _generate_python(config, cluster, rng, name).table
    else:
        table = _generate_native(config, cluster, rng, arguments)
    if config.grace_median_by_gpus or config.restart_overhead_by_gpus:
        table = _with_costs_by_size(config, table)
    return Workload.from_table(table, name=name)


def _by_gpus(table: tuple[tuple[float, float], ...], gpus: np.ndarray) -> np.ndarray:
    """The seconds of a ``*_by_gpus`` table for each job's GPUs."""
    bounds = np.array([b for b, _ in table], dtype=np.float64)
    seconds = np.array([v for _, v in table], dtype=np.float64)
    return seconds[np.minimum(np.searchsorted(bounds, gpus, side="left"), len(bounds) - 1)]


def _with_costs_by_size(config: SyntheticConfig, table: JobTable) -> JobTable:
    """``table`` with the grace periods and restart overheads of :attr:`SyntheticConfig.grace_median_by_gpus`
    and :attr:`SyntheticConfig.restart_overhead_by_gpus` (no draw: every seed's jobs are otherwise the ones
    the other fields give)."""
    col = table.columns
    floats = np.array([col[k] for k in ("submit", "duration", "gpus", "cpus", "mem_gb", "grace")])
    gpus, is_be = col["gpus"], col["job_class"] == int(JobClass.BE)
    if config.grace_median_by_gpus:
        scale = _by_gpus(config.grace_median_by_gpus, gpus) / config.grace_median
        floats[5] = np.where(is_be, np.round(floats[5] * scale), floats[5])
    restart = _by_gpus(config.restart_overhead_by_gpus, gpus) if config.restart_overhead_by_gpus else None
    return JobTable._from_columns(
        col["job_id"], floats, col["gang"], col["job_class"], member=col["member"], restart=restart
    )


def _generate_python(config: SyntheticConfig, cluster: ClusterSpec, rng: np.random.Generator, name: str) -> Workload:
    """:func:`generate` in numpy: the specification of the draws."""
    n = config.n_jobs
    is_te = rng.random(n) < config.te_fraction
    dur = np.where(
        is_te,
        _lognormal(
            rng, config.te_duration_median, config.te_duration_sigma, config.te_duration_min, config.te_duration_max, n
        ),
        _lognormal(
            rng, config.be_duration_median, config.be_duration_sigma, config.be_duration_min, config.be_duration_max, n
        ),
    )
    dur = np.round(dur)
    gpus = np.where(is_te, _draw(rng, config.te_gpus, n), _draw(rng, config.be_gpus, n))
    cpus = gpus * _draw(rng, config.cpus_per_gpu, n)
    mem = gpus * _draw(rng, config.mem_per_gpu, n)
    grace = np.round(_lognormal(rng, config.grace_median, config.grace_sigma, config.grace_min, config.grace_max, n))
    grace = np.where(is_te, config.te_grace, grace)
    nodes = np.maximum(1, np.ceil(gpus / config.gpus_per_node)).astype(np.int64)
    rate = config.load * _total_gpus(cluster) / float((gpus * dur).mean())  # jobs per second
    submit = np.round(np.cumsum(rng.exponential(1.0 / rate, size=n)), 3)
    table = JobTable(
        job_id=_job_ids(n),
        submit_time=submit,
        duration=dur,
        gpus=gpus,
        cpus=cpus,
        mem_gb=mem,
        gang_size=nodes,
        job_class=np.where(is_te, int(JobClass.TE), int(JobClass.BE)),
        grace_period=grace,
    )
    return Workload.from_table(table, name=name)


def _total_gpus(cluster: ClusterSpec) -> float:
    total_gpus = float(cluster.total[0])
    if total_gpus <= 0:
        raise ConfigError(f"Synthetic workloads need a cluster with GPUs; {cluster.name!r} has none")
    return total_gpus


# The native path takes parameters in [_TINY, _HUGE] only (numbers of plain Python types): then no product,
# quotient or sum that generate() forms overflows, underflows or is NaN, so numpy would report nothing (no
# RuntimeWarning, no error under np.errstate) and the C++ arithmetic, which reports nothing, does the same.
# Anything else is drawn in Python.
_TINY, _HUGE = 1e-100, 1e100


def _plain(x: object, lo: float = 0.0) -> bool:
    """A Python float, or an int that converts to float exactly, in ``[lo, _HUGE]``."""
    return (type(x) is float or (type(x) is int and abs(x) <= 2**53)) and lo <= x <= _HUGE  # type: ignore[operator]


def _native_arguments(config: SyntheticConfig, rng: np.random.Generator) -> tuple | None:
    """The arguments of ``_synthetic.draw_jobs`` after the bit generator, or None if this draw is for the
    Python path: the module is missing, ``rng`` is not exactly a numpy Generator (a subclass may draw
    differently), or a parameter is outside the native path's range."""
    if _native is None or type(rng) is not np.random.Generator:
        return None
    c = config
    if not (
        all(
            _plain(x)
            for x in (
                c.te_fraction, c.te_duration_median, c.te_duration_sigma, c.te_duration_max, c.be_duration_median,
                c.be_duration_sigma, c.be_duration_max, c.grace_median, c.grace_sigma, c.grace_min, c.grace_max,
                c.te_grace,
            )
        )
        and _plain(c.te_duration_min, _TINY)
        and _plain(c.be_duration_min, _TINY)
        and _plain(c.gpus_per_node, _TINY)
    ):  # fmt: skip
        return None
    dists = [_discrete(d) for d in (c.te_gpus, c.be_gpus, c.cpus_per_gpu, c.mem_per_gpu)]
    if not all(_TINY <= d.smallest and d.largest <= _HUGE for d in dists):
        return None
    # The largest gang size must fit an int64 (numpy's cast of a larger one warns).
    if max(dists[0].largest, dists[1].largest) / c.gpus_per_node > 2.0**62:
        return None
    return (
        float(c.te_fraction),
        _lognormal_arguments(c.te_duration_median, c.te_duration_sigma, c.te_duration_min, c.te_duration_max),
        _lognormal_arguments(c.be_duration_median, c.be_duration_sigma, c.be_duration_min, c.be_duration_max),
        *((d.values, d.cdf) for d in dists),
        _lognormal_arguments(c.grace_median, c.grace_sigma, c.grace_min, c.grace_max),
        float(c.te_grace),
        float(c.gpus_per_node),
    )


def _lognormal_arguments(median: float, sigma: float, lo: float, hi: float) -> tuple[float, float, float, float]:
    """What :func:`_lognormal` passes to ``rng.lognormal`` and clips with, as floats."""
    return math.log(median), float(sigma), float(lo), float(hi)


def _generate_native(
    config: SyntheticConfig, cluster: ClusterSpec, rng: np.random.Generator, arguments: tuple
) -> JobTable:
    """:func:`generate`'s table, drawn by ``_synthetic`` (``arguments`` from :func:`_native_arguments`)."""
    n = config.n_jobs
    bit_generator = rng.bit_generator
    capsule = bit_generator.capsule
    floats = np.empty((6, n))  # the table's float columns, in JobTable's order: submit, duration, ..., grace
    gang = np.empty(n, dtype=np.int64)
    job_class = np.empty(n, dtype=np.int64)
    member = np.empty((n, 3))
    with bit_generator.lock:  # as the Generator's own methods hold it
        mean, lo, hi, *counts = _native.draw_jobs(capsule, *arguments, floats, gang, job_class, member)
    rate = config.load * _total_gpus(cluster) / mean  # the Python path's expressions, with their errors
    scale = 1.0 / rate
    extremes = None
    # An exponential draw is below 45 (numpy's ziggurat), so the arrival times and their products with 1000
    # stay normal floats from 1e-250 to 1e250 / n_jobs (else in Python: numpy would report an overflow).
    if 1e-250 <= float(scale) <= 1e250 / n:
        with bit_generator.lock:
            first, last = _native.draw_submit(capsule, float(scale), floats[0])
        extremes = ([first, *lo], [last, *hi], *counts)
    else:
        floats[0] = np.round(np.cumsum(rng.exponential(scale, size=n)), 3)
    return JobTable._from_columns(_job_ids(n), floats, gang, job_class, extremes, member)


def preset(name: str, **overrides: Any) -> SyntheticConfig:
    """A named preset, optionally with fields replaced (``preset("paper", n_jobs=500)``)."""
    base = PRESETS.get(name) if isinstance(name, str) else None
    if base is None:
        raise UnknownNameError(f"Unknown workload {name!r}; expected one of {sorted(PRESETS)}")
    unknown = sorted(set(overrides) - {f.name for f in fields(SyntheticConfig)})
    if unknown:
        raise ConfigError(f"Unknown SyntheticConfig fields {unknown}; expected fields of SyntheticConfig")
    return replace(base, **overrides) if overrides else base


OVERRIDABLE = tuple(f.name for f in fields(SyntheticConfig) if f.name not in ("n_jobs", "load"))
"""the fields of a preset a workload source replaces through its ``synthetic`` overrides (``n_jobs`` and
``load`` have fields of their own, in the source and in ``schedgym compare``)"""


def check_overrides(overrides: Any) -> tuple[tuple[str, Any], ...]:
    """``overrides`` (a mapping, or ``(field, value)`` pairs) as a tuple of pairs, checked: every name a field
    of :data:`OVERRIDABLE`, each at most once. The values are :class:`SyntheticConfig`'s to check."""
    items = list(overrides.items()) if isinstance(overrides, Mapping) else overrides
    if isinstance(items, (str, bytes)) or not isinstance(items, (tuple, list)):
        raise ConfigError(f"Expected synthetic overrides as (field, value) pairs or a mapping, got {overrides!r}")
    out: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2 or not isinstance(item[0], str):
            raise ConfigError(f"Expected a (field, value) pair of synthetic overrides, got {item!r}")
        name, value = item
        if name in ("n_jobs", "load"):
            raise ConfigError(f"{name!r} is not a synthetic override: give it as the source's own {name}")
        if name not in OVERRIDABLE:
            close = difflib.get_close_matches(name, OVERRIDABLE, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"Expected a field of SyntheticConfig to override, got {name!r}{hint}")
        if any(name == seen for seen, _ in out):
            raise ConfigError(f"Expected each synthetic field overridden once, got {name!r} twice")
        out.append((name, value))
    return tuple(out)

"""The native synthetic generator (``schedgym.workloads._synthetic``) against the Python one it stands in for.

:func:`~schedgym.workloads.synthetic.generate` draws in C++ when the module is built, from the Generator's own
bit generator and numpy's own distribution functions. These tests hold it to the Python path
(``synthetic._generate_python``, the specification): every column of the table bit for bit, the same errors,
and the same Generator state afterwards, over hypothesis-generated configurations (loads, sizes up to 5,000
jobs, TE fractions 0, 1 and between, custom and unhashable distributions, clusters of different sizes) and
every numpy bit generator; and they check when the Python path is taken instead.
"""

from __future__ import annotations

import copy
import math
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.errors import ConfigError
from schedgym.sim import ClusterSpec, NodeSpec
from schedgym.sim.cluster import resolve_cluster
from schedgym.workloads import synthetic
from schedgym.workloads.synthetic import SyntheticConfig, generate, preset

if synthetic._native is None:  # pragma: no cover - depends on the build
    if os.environ.get("CI"):
        raise ImportError("CI must test the native synthetic generator, but schedgym.workloads._synthetic is missing")
    pytest.skip("the native synthetic generator is not built", allow_module_level=True)

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ("submit", "duration", "gpus", "cpus", "mem_gb", "grace", "gang", "job_class", "member")
BIT_GENERATORS = (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64)
CLUSTERS = (
    resolve_cluster("paper"),
    resolve_cluster("small"),
    resolve_cluster("large"),
    ClusterSpec(tuple(NodeSpec(f"n{i}", g, 64, 512) for i, g in enumerate([8, 4, 2, 8, 1]))),
    ClusterSpec((NodeSpec("one", 3, 16, 64),)),
)


def both(
    config: SyntheticConfig, cluster: ClusterSpec, seed: int, bit_generator: type = np.random.PCG64
) -> tuple[np.random.Generator, np.random.Generator, object, object]:
    """``generate`` on the native path and on the Python path from the same seed: their Generators after the
    draw, and their workloads (or the exceptions they raised)."""
    native_rng = np.random.Generator(bit_generator(seed))
    python_rng = np.random.Generator(bit_generator(seed))
    assert synthetic._native_arguments(config, native_rng) is not None  # the native path runs
    results = []
    for draw, rng in ((generate, native_rng), (synthetic._generate_python, python_rng)):
        try:
            results.append(draw(config, cluster, rng, "synthetic"))
        except (ConfigError, ZeroDivisionError, FloatingPointError) as exc:
            results.append(exc)
    return native_rng, python_rng, results[0], results[1]


def assert_identical(config: SyntheticConfig, cluster: ClusterSpec, seed: int, bit_generator: type = np.random.PCG64):
    native_rng, python_rng, native, python = both(config, cluster, seed, bit_generator)
    if isinstance(python, Exception):
        assert type(native) is type(python) and str(native) == str(python)
    else:
        assert not isinstance(native, Exception), native
        a, b = native.table.columns, python.table.columns
        assert a["job_id"] == b["job_id"]
        for key in KEYS:
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert a[key].tobytes() == b[key].tobytes(), key  # bit for bit: -0.0 and 0.0 differ
            assert not a[key].flags.writeable, key
        assert native.name == python.name and native == python
    # The Generator continues as if the Python path had drawn from it.
    assert same_state(native_rng.bit_generator.state, python_rng.bit_generator.state)
    assert native_rng.random(3).tolist() == python_rng.random(3).tolist()


def unchecked(**fields: object) -> SyntheticConfig:
    """The paper preset with ``fields`` set past :class:`SyntheticConfig`'s checks, which refuse them (every job
    drawn must be within schedgym.limits): the generator's own guards are tested on such configurations."""
    config = copy.copy(preset("paper"))
    for name, value in fields.items():
        object.__setattr__(config, name, value)
    return config


def same_state(a: object, b: object) -> bool:
    """Bit generator states (dicts of ints and, for MT19937, arrays) equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return type(a) is type(b) and a == b


def distribution(values: st.SearchStrategy, max_size: int = 8) -> st.SearchStrategy:
    """(value, probability) pairs whose probabilities sum to 1, some of them 0; as tuples or as lists."""

    @st.composite
    def draw(d: st.DrawFn):
        vals = d(st.lists(values, min_size=1, max_size=max_size))
        weights = d(st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0]), min_size=len(vals), max_size=len(vals)))
        if sum(weights) == 0:
            weights[0] = 1.0
        total = math.fsum(weights)
        pairs = [(v, w / total) for v, w in zip(vals, weights, strict=True)]
        if d(st.booleans()):
            return tuple(pairs)
        return [list(p) for p in pairs]  # unhashable: not cached by the generator

    return draw()


@st.composite
def configs(d: st.DrawFn) -> SyntheticConfig:
    gpus = st.one_of(st.sampled_from([1, 2, 4, 8, 16, 32]), st.floats(0.25, 40.0))
    per_gpu = st.one_of(st.sampled_from([2, 4, 8, 32, 64]), st.floats(0.5, 100.0))
    fields: dict = {
        "n_jobs": d(st.one_of(st.integers(1, 300), st.integers(1, 5000))),
        "load": d(st.one_of(st.sampled_from([0.3, 1.0, 2.5]), st.floats(0.01, 9.9))),
        "te_fraction": d(st.one_of(st.sampled_from([0.0, 1.0, 0.3]), st.floats(0.0, 1.0))),
        "te_gpus": d(distribution(gpus)),
        "be_gpus": d(distribution(gpus)),
        "cpus_per_gpu": d(distribution(per_gpu, 4)),
        "mem_per_gpu": d(distribution(per_gpu, 4)),
        "gpus_per_node": d(st.sampled_from([8.0, 4, 1.0, 2.5, 64.0])),
        "te_grace": d(st.sampled_from([30.0, 0, 7.5])),
    }
    for cls in ("te", "be"):
        lo = d(st.floats(1.0, 5000.0))
        fields[f"{cls}_duration_min"] = lo
        fields[f"{cls}_duration_max"] = d(st.floats(lo, 2e5))
        fields[f"{cls}_duration_median"] = d(st.floats(1.0, 1e5))
        fields[f"{cls}_duration_sigma"] = d(st.sampled_from([0.0, 0.5, 1.0, 2.5]))
    lo = d(st.sampled_from([0.0, 0.4, 5.0]))
    fields["grace_min"], fields["grace_max"] = lo, d(st.floats(lo, 600.0))
    fields["grace_median"] = d(st.floats(0.5, 300.0))
    fields["grace_sigma"] = d(st.sampled_from([0.0, 0.7, 3.0]))
    return SyntheticConfig(**fields)


@SETTINGS
@given(config=configs(), cluster=st.sampled_from(CLUSTERS), seed=st.integers(0, 2**64 - 1))
def test_native_draws_are_the_python_draws(config, cluster, seed):
    assert_identical(config, cluster, seed)


@settings(max_examples=40, deadline=None)
@given(
    n_jobs=st.integers(1, 5000),
    load=st.sampled_from([0.3, 1.0, 1.3, 2.5]),
    te_fraction=st.sampled_from([0.0, 0.3, 1.0]),
    cluster=st.sampled_from(CLUSTERS),
    seed=st.integers(0, 2**32),
    bit_generator=st.sampled_from(BIT_GENERATORS),
)
def test_paper_workloads_are_identical_on_every_bit_generator(n_jobs, load, te_fraction, cluster, seed, bit_generator):
    config = preset("paper", n_jobs=n_jobs, load=load, te_fraction=te_fraction)
    assert_identical(config, cluster, seed, bit_generator)


@pytest.mark.parametrize("n_jobs", [1, 7, 8, 9, 127, 128, 129, 136, 1000, 8191, 8192, 8193, 100_003])
def test_the_mean_is_numpys_pairwise_mean(n_jobs):
    # The arrival rate divides by float((gpus * dur).mean()), which numpy sums pairwise (blocks of 128, 8
    # accumulators, halves split at multiples of 8): sizes at and around every boundary, and a large one.
    assert_identical(preset("paper", n_jobs=n_jobs), resolve_cluster("paper"), n_jobs)


def test_invalid_jobs_raise_the_python_paths_error():
    # Durations above schedgym.limits.MAX_TIME (1e10 s), half-second durations rounded to 0, gangs with
    # more GPUs than JobSpec allows: the table's check names the same job and value on both paths.
    # SyntheticConfig refuses these (unchecked() gets past it); arrivals beyond MAX_TIME it cannot see (they
    # depend on the cluster).
    refused = [
        dict(n_jobs=50, be_duration_median=1e11, be_duration_min=1e11, be_duration_max=2e11),
        dict(n_jobs=50, te_fraction=0.5, te_duration_median=0.4, te_duration_min=0.3, te_duration_max=0.4),
        dict(n_jobs=50, be_gpus=((2e6, 1.0),)),
    ]
    for fields in refused:
        with pytest.raises(ConfigError):
            preset("paper", **fields)
    late = preset(
        "paper", n_jobs=50, te_fraction=0.0, load=0.01, be_duration_median=1e9, be_duration_min=1e9, be_duration_max=1e9
    )
    for config in [*(unchecked(**fields) for fields in refused), late]:
        _, _, native, python = both(config, resolve_cluster("paper"), 3)
        assert isinstance(python, ConfigError) and type(native) is type(python) and str(native) == str(python)


def test_a_cluster_without_gpus_fails_after_the_same_draws():
    cpu_only = ClusterSpec((NodeSpec("cpu", 0, 64, 256),))
    native_rng, python_rng, native, python = both(preset("paper", n_jobs=40), cpu_only, 5)
    assert isinstance(python, ConfigError) and str(native) == str(python)
    assert same_state(native_rng.bit_generator.state, python_rng.bit_generator.state)


class _Generator(np.random.Generator):
    pass


@pytest.mark.parametrize(
    "config, rng",
    [
        (preset("paper"), _Generator(np.random.PCG64(1))),  # a subclass may draw differently
        (preset("paper", te_duration_min=np.float32(60.0)), None),  # numpy scalars other than float64
        # The rest SyntheticConfig refuses (but cpus_per_gpu=1e-120): the generator's guards stay.
        (unchecked(te_duration_max=float("inf")), None),  # outside the range without overflow
        (unchecked(gpus_per_node=1e-120), None),
        (unchecked(be_gpus=((1e120, 1.0),)), None),
        (preset("paper", cpus_per_gpu=((1e-120, 1.0),)), None),
        (unchecked(be_gpus=((2.0**63, 1.0),), gpus_per_node=1.0), None),  # a gang size beyond int64
        (unchecked(grace_max=2**60 + 1), None),  # an int that float() rounds
    ],
)
def test_parameters_outside_the_native_range_are_drawn_in_python(config, rng):
    rng = rng if rng is not None else np.random.default_rng(1)
    assert synthetic._native_arguments(config, rng) is None
    assert synthetic._native_arguments(preset("paper"), np.random.default_rng(1)) is not None


def test_arrivals_that_overflow_are_drawn_in_python():
    # A load so small that the arrival times overflow once multiplied by 1000 (np.round(x, 3)): numpy reports
    # it (here as an error), so these arrivals are drawn by numpy on the native path too. SyntheticConfig now
    # refuses such a load (MIN_LOAD); the guard stays, and is tested past the check.
    config = preset("paper", n_jobs=2000)
    object.__setattr__(config, "load", 1e-300)
    with np.errstate(over="raise"):
        native_rng, python_rng, native, python = both(config, resolve_cluster("paper"), 9)
    assert isinstance(python, FloatingPointError)
    assert type(native) is type(python) and str(native) == str(python)
    assert same_state(native_rng.bit_generator.state, python_rng.bit_generator.state)


def test_the_draw_holds_the_bit_generators_lock():
    rng = np.random.default_rng(0)
    held = threading.Event()

    def hold() -> None:
        with rng.bit_generator.lock:
            held.set()
            time.sleep(0.3)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    start = time.perf_counter()
    generate(preset("paper", n_jobs=10), resolve_cluster("paper"), rng)
    waited = time.perf_counter() - start
    thread.join()
    assert waited >= 0.2


def test_a_module_built_against_another_numpy_is_not_used(monkeypatch):
    class Stale:
        SYNTHETIC_VERSION = synthetic._SYNTHETIC_VERSION
        NUMPY_VERSION = "1.0.0"

    import sys

    monkeypatch.setitem(sys.modules, "schedgym.workloads._synthetic", Stale)  # what the import then finds
    assert synthetic._load_native() is None
    monkeypatch.setattr(Stale, "NUMPY_VERSION", np.__version__)
    assert synthetic._load_native() is Stale

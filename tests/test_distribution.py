"""The workload distribution (schedgym.workloads.distribution): ranges checked, level seeds split into
disjoint ranges, levels reproducible, within their ranges and engine-independent."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedgym.errors import ConfigError
from schedgym.experiments import run_policy
from schedgym.registry import make_policy
from schedgym.sim import SimConfig
from schedgym.sim.simulator import native_available
from schedgym.workloads import generate
from schedgym.workloads.distribution import (
    LEVEL_SPLITS,
    MIX,
    NODE_SHAPES,
    WorkloadDistribution,
    check_level_seed,
    draw_level,
    level_seed,
)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"load": (1.2, 0.8)}, "Expected 0.05 <= load low <= high <= 5, got (1.2, 0.8)"),
        ({"load": (0.5,)}, "Expected load to be a (low, high) pair of finite numbers, got (0.5,)"),
        ({"load": (0.5, float("nan"))}, "Expected load to be a (low, high) pair of finite numbers"),
        ({"n_nodes": (2.5, 8)}, "Expected n_nodes to be a (low, high) pair of finite integers"),
        ({"n_nodes": (0, 8)}, "Expected 1 <= n_nodes low"),
        ({"shapes": ("8x64x512", "huge")}, "Expected shapes in"),
        ({"shapes": ()}, "Expected shapes to be a non-empty tuple"),
        ({"te_fraction": (0.2, 1.5)}, "Expected 0 <= te_fraction low <= high <= 1, got (0.2, 1.5)"),
        ({"gang_share": (True, 0.3)}, "Expected gang_share to be a (low, high) pair"),
        ({"n_nodes": (1, 4), "shapes": ("4x32x256",)}, "Expected the smallest cluster to hold a 16-GPU job"),
        ({"n_jobs": (0, 10)}, "Expected 1 <= n_jobs low"),
    ],
)
def test_bad_ranges_raise_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=None) as err:
        WorkloadDistribution(**kwargs)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


def test_split_ranges_are_disjoint_and_ordered():
    (t0, t1), (v0, v1), (r0, r1) = LEVEL_SPLITS["test"], LEVEL_SPLITS["validation"], LEVEL_SPLITS["train"]
    assert (t0, t1, v0, v1, r0, r1) == (0, 100_000, 100_000, 1_000_000, 1_000_000, None)
    assert level_seed("test", 99_999) == 99_999
    assert level_seed("validation", 0) == 100_000
    assert level_seed("validation", 899_999) == 999_999
    assert level_seed("train", 0) == 1_000_000
    assert level_seed("train", 9, num_levels=10) == 1_000_009


@pytest.mark.parametrize(
    ("split", "index", "num_levels", "message"),
    [
        ("test", 100_000, None, "Expected a test level index below 100,000 (level seeds 0..99,999), got 100,000"),
        ("validation", 900_000, None, "index below 900,000 (level seeds 100,000..999,999), got 900,000"),
        ("train", 10, 10, "Expected a train level index below 10 (level seeds 1,000,000..1,000,009), got 10"),
        ("test", -1, None, "Expected a level index >= 0"),
        ("test", 0, 5, "num_levels restricts the train split only"),
        ("holdout", 0, None, "Expected split in"),
    ],
)
def test_levels_outside_their_split_raise(split, index, num_levels, message):
    with pytest.raises(ConfigError) as err:
        level_seed(split, index, num_levels)
    assert message in str(err.value)


@given(st.integers(0, 3_000_000))
def test_a_seed_belongs_to_exactly_one_split(seed):
    owners = []
    for split in LEVEL_SPLITS:
        try:
            check_level_seed(split, seed)
            owners.append(split)
        except ConfigError:
            pass
    assert len(owners) == 1


def test_level_is_a_pure_function_of_its_seed():
    a, b = draw_level(MIX, 1_000_123), draw_level(MIX, 1_000_123)
    assert a == b
    wa = generate(a.workload, a.cluster, np.random.default_rng(0))
    wb = generate(b.workload, b.cluster, np.random.default_rng(0))
    assert wa.jobs == wb.jobs
    # Levels differ: across 20 seeds the cluster takes more than one size.
    assert len({draw_level(MIX, s).cluster.n_nodes for s in range(20)}) > 1


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**40))
def test_drawn_levels_are_within_the_ranges(seed):
    d = MIX
    level = draw_level(d, seed)
    c, cl = level.workload, level.cluster
    assert d.n_nodes[0] <= cl.n_nodes <= d.n_nodes[1]
    assert level.shape in d.shapes
    assert tuple(cl.capacity[0]) == NODE_SHAPES[level.shape]
    assert d.load[0] <= c.load <= d.load[1]
    assert d.te_fraction[0] <= c.te_fraction <= d.te_fraction[1]
    scale = c.te_duration_median / 900.0
    assert d.duration_scale[0] - 1e-9 <= scale <= d.duration_scale[1] + 1e-9
    assert c.be_duration_median / 10800.0 == pytest.approx(scale)
    gang = sum(p for g, p in c.be_gpus if g > c.gpus_per_node)
    assert d.gang_share[0] - 1e-9 <= gang <= d.gang_share[1] + 1e-9
    grace = c.grace_median / 30.0
    assert d.grace_scale[0] - 1e-9 <= grace <= d.grace_scale[1] + 1e-9
    if c.restart_overhead_by_gpus:
        restart = c.restart_overhead_by_gpus[0][1] / 7.0
        assert d.restart_scale[0] - 1e-9 <= restart <= d.restart_scale[1] + 1e-9
    assert d.estimate_noise[0] <= level.estimate_noise <= d.estimate_noise[1]
    assert d.n_jobs[0] <= c.n_jobs <= d.n_jobs[1]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 99_999))
def test_every_drawn_job_fits_its_level_cluster(seed):
    level = draw_level(MIX, seed)
    wl = generate(level.workload, level.cluster, np.random.default_rng(seed))
    wl.check_fits(level.cluster)


@pytest.mark.skipif(not native_available(), reason="the native engine is not built")
@pytest.mark.parametrize("seed", [0, 1, 100_000, 1_000_000])
def test_both_engines_give_identical_results_on_a_level(seed):
    level = draw_level(MIX, seed)
    wl = generate(level.workload, level.cluster, np.random.default_rng(np.random.SeedSequence([seed, 0])))
    results = [
        run_policy(make_policy("fitgpp"), level.cluster, wl, SimConfig(engine=e), rng=np.random.default_rng(1))
        for e in ("python", "native")
    ]
    py, nat = results
    for field in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
        np.testing.assert_array_equal(getattr(py, field), getattr(nat, field))
    assert py.n_preemptions == nat.n_preemptions

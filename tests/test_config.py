"""Configuration validation: bad values are rejected with a ConfigError stating what was expected and what
was given."""

from __future__ import annotations

import re

import pytest

from baselines.fitgpp import FitGpp
from schedgym.errors import ConfigError, SchedGymError, UnknownNameError
from schedgym.experiments import CompareConfig
from schedgym.sim import ClusterSpec, NodeSpec, QueueDiscipline, SimConfig
from schedgym.workloads import SyntheticConfig, preset


def expect_config_error(factory, expected: str, actual: str) -> ConfigError:
    """``factory()`` must raise a ConfigError whose message contains ``expected`` and ``actual``."""
    with pytest.raises(ConfigError) as exc:
        factory()
    msg = str(exc.value)
    assert re.search(r"\b(expected|got)\b", msg, re.IGNORECASE), msg
    assert expected in msg, msg
    assert actual in msg, msg
    return exc.value


# ----------------------------------------------------------------------------------------------------------
# SimConfig
# ----------------------------------------------------------------------------------------------------------


def test_simconfig_defaults():
    c = SimConfig()
    assert (c.queue, c.backfill, c.placement, c.max_preemptions, c.restart_overhead) == (
        QueueDiscipline.PRIORITY,
        True,
        "best-fit",
        1,
        0.0,
    )


def test_simconfig_accepts_queue_names():
    assert SimConfig(queue="fifo").queue is QueueDiscipline.FIFO


@pytest.mark.parametrize(
    ("kwargs", "expected", "actual"),
    [
        ({"queue": "lifo"}, "queue in", "'lifo'"),
        ({"placement": "worst-fit"}, "'best-fit' or 'first-fit'", "'worst-fit'"),
        ({"max_preemptions": -1}, ">= 0", "-1"),
        ({"max_preemptions": 1.5}, "an int", "1.5"),
        ({"max_preemptions": True}, "an int", "True"),
        ({"restart_overhead": -1.0}, ">= 0", "-1.0"),
        ({"restart_overhead": float("inf")}, ">= 0", "inf"),
        ({"restart_overhead": float("nan")}, ">= 0", "nan"),
        ({"backfill": "yes"}, "a bool", "'yes'"),
        ({"backfill": 1}, "a bool", "1"),
    ],
)
def test_simconfig_rejects(kwargs, expected, actual):
    expect_config_error(lambda: SimConfig(**kwargs), expected, actual)


def test_simconfig_rejects_a_non_numeric_restart_overhead():
    # Regression: at commit 7840322 this raised a bare TypeError from math.isfinite("5").
    expect_config_error(lambda: SimConfig(restart_overhead="5"), ">= 0", "'5'")


def test_config_errors_are_schedgym_and_value_errors():
    with pytest.raises(SchedGymError):
        SimConfig(placement="x")
    with pytest.raises(ValueError):
        SimConfig(placement="x")


# ----------------------------------------------------------------------------------------------------------
# SyntheticConfig (field values are being tuned: only the validation is tested here)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected", "actual"),
    [
        ({"n_jobs": 0}, "n_jobs > 0", "0"),
        ({"n_jobs": 2.5}, "n_jobs > 0", "2.5"),
        ({"load": 0.0}, "0.01 <= load < 10", "0.0"),
        ({"load": 10.0}, "0.01 <= load < 10", "10.0"),
        ({"load": float("nan")}, "0.01 <= load < 10", "nan"),
        ({"load": 5e-324}, "0.01 <= load < 10", "5e-324"),  # its arrival rate's inverse divided by zero
        ({"te_duration_median": 0.0}, "te_duration_median > 0", "0.0"),  # named min and max until 2026-12-05
        ({"te_fraction": 1.5}, "0 <= te_fraction <= 1", "1.5"),
        ({"te_fraction": -0.1}, "0 <= te_fraction <= 1", "-0.1"),
        ({"te_duration_min": 100.0, "te_duration_max": 50.0}, "te_duration_min <= te_duration_max", "100.0, 50.0"),
        ({"be_duration_min": 0.0}, "0 < be_duration_min", "0.0"),
        ({"grace_min": 10.0, "grace_max": 5.0}, "grace_min <= grace_max", "10.0, 5.0"),
        ({"grace_min": -1.0}, "0 <= grace_min", "-1.0"),
        ({"te_gpus": ((1, 0.5), (2, 0.4))}, "sum to 1", "[0.5, 0.4]"),
        ({"be_gpus": ((1, 1.2), (2, -0.2))}, ">= 0 and sum to 1", "[1.2, -0.2]"),
        ({"cpus_per_gpu": ((0, 1.0),)}, "positive values in cpus_per_gpu", "[0]"),
        ({"mem_per_gpu": ()}, "non-empty distribution for mem_per_gpu", "()"),
    ],
)
def test_synthetic_config_rejects(kwargs, expected, actual):
    expect_config_error(lambda: SyntheticConfig(**kwargs), expected, actual)


@pytest.mark.parametrize(
    "kwargs", [{"gpus_per_node": 0.0}, {"gpus_per_node": -8.0}, {"be_duration_sigma": -1.0}, {"grace_sigma": -1.0}]
)
def test_synthetic_config_rejects_gang_size_and_sigma_errors(kwargs):
    # Regression: at commit 7840322 these were accepted; generate() then made every job's gang size
    # int(ceil(gpus / 0)) = -2**63 (gpus_per_node=0), or failed inside numpy with ValueError('sigma < 0').
    name = next(iter(kwargs))
    expect_config_error(lambda: SyntheticConfig(**kwargs), name, repr(kwargs[name]))


def test_unknown_preset_and_overrides():
    with pytest.raises(UnknownNameError, match="Unknown workload 'nope'; expected one of"):
        preset("nope")
    assert preset("paper", n_jobs=17).n_jobs == 17
    with pytest.raises(ConfigError, match="n_jobs > 0"):
        preset("paper", n_jobs=0)


# ----------------------------------------------------------------------------------------------------------
# FitGpp
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected", "actual"),
    [
        ({"lam": -1.0}, "lam >= 0", "-1.0"),
        ({"lam": float("nan")}, "lam >= 0", "nan"),
        ({"lam": float("inf")}, "lam >= 0", "inf"),
        ({"grace_scale": 0.0}, "grace_scale > 0", "0.0"),
        ({"grace_scale": -60.0}, "grace_scale > 0", "-60.0"),
        ({"order": "size"}, "'fit' or 'grace'", "'size'"),
        ({"rank": "fitness"}, "'score' or 'grace'", "'fitness'"),
    ],
)
def test_fitgpp_rejects(kwargs, expected, actual):
    expect_config_error(lambda: FitGpp(**kwargs), expected, actual)


# ----------------------------------------------------------------------------------------------------------
# CompareConfig
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected", "actual"),
    [
        ({"policies": ()}, "at least one policy", "none"),
        ({"policies": ("fifo", "fifo")}, "distinct", "['fifo', 'fifo']"),
        ({"seeds": -1}, "seeds > 0", "-1"),
        ({"first_seed": -1}, "first_seed >= 0", "-1"),
        ({"n_jobs": 0}, "n_jobs", "0"),
        ({"workload": None, "trace": None}, "a workload name or a trace path", ""),
    ],
)
def test_compare_config_rejects(kwargs, expected, actual):
    expect_config_error(lambda: CompareConfig(**kwargs), expected, actual)


def test_compare_config_rejects_unknown_policy_at_construction():
    with pytest.raises(UnknownNameError, match="Unknown policy 'nope'"):
        CompareConfig(policies=("fifo", "nope"))


# ----------------------------------------------------------------------------------------------------------
# Cluster
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "expected", "actual"),
    [
        (lambda: NodeSpec("a", -1, 1, 1), "gpus >= 0", "-1"),
        (lambda: NodeSpec("a", 1, float("nan"), 1), "cpus >= 0", "nan"),
        (lambda: ClusterSpec(()), "at least one node", "0 nodes"),
        (lambda: ClusterSpec.homogeneous(0, 8, 64, 512), "n_nodes > 0", "0"),
    ],
)
def test_cluster_rejects(factory, expected, actual):
    expect_config_error(factory, expected, actual)


def test_compare_seeds_default_to_20_or_every_test_window():
    assert CompareConfig(policies=("fifo",)).seeds == 20
    assert CompareConfig(policies=("fifo",), workload="philly").seeds == 7
    assert CompareConfig(policies=("fifo",), workload="philly", first_seed=5).seeds == 2

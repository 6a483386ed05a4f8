"""Bundled real-trace workloads: windows, warm-up, the comparison and the environment on them."""

from __future__ import annotations

import numpy as np
import pytest

from schedgym.envs import PreemptionEnv
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.sim.cluster import resolve_cluster
from schedgym.workloads.named import DAY, TRACE_WORKLOADS, trace_workload


@pytest.mark.parametrize("name", sorted(TRACE_WORKLOADS))
def test_bundled_trace_loads_without_the_raw_files_and_fits_its_cluster(name):
    tw = trace_workload(name)
    wl = tw.load()
    assert len(wl.jobs) > 1000
    wl.check_fits(resolve_cluster(tw.cluster))


@pytest.mark.parametrize("name", sorted(TRACE_WORKLOADS))
def test_splits_are_disjoint_and_ordered_in_time(name):
    tw = trace_workload(name)
    train, val, test = (tw.splits[s] for s in ("train", "validation", "test"))
    assert train[1] <= val[0] and val[1] <= test[0]
    for split in ("train", "validation", "test"):
        wins = tw.windows(split)
        assert wins, split
        lo, hi = tw.splits[split]
        assert wins[0][0] == lo * DAY and wins[-1][1] <= hi * DAY + 1e-6
        assert all(a[1] == b[0] for a, b in zip(wins, wins[1:], strict=False))  # consecutive


def test_window_has_warm_up_jobs_that_are_not_measured():
    tw = trace_workload("philly")
    start, end = tw.windows("test")[0]
    wl = tw.window("test", 0)
    assert wl.measured is not None and len(wl.measured) == len(wl.jobs)
    original = {j.job_id: j.submit_time for j in tw.load().jobs}
    for job, measured in zip(wl.jobs, wl.measured, strict=True):
        t = original[job.job_id]
        assert (start - tw.warmup_days * DAY) <= t < end
        assert measured == (t >= start)
    assert 0 < sum(wl.measured) < len(wl.jobs)
    assert min(j.submit_time for j in wl.jobs) == 0.0  # shifted to the warm-up start


def test_comparison_measures_only_the_window_jobs():
    config = CompareConfig(workload="philly", policies=("fifo", "fitgpp"), seeds=1)
    result = run_comparison(config, progress=False)
    wl = trace_workload("philly").window("test", 0)
    measured_ids = [j.job_id for j, m in zip(wl.jobs, wl.measured, strict=True) if m]
    for runs in result.runs.values():
        assert runs[0].job_ids == measured_ids
    assert result.cluster.name == "philly"  # the workload's own cluster by default


def test_too_many_seeds_for_the_test_windows_is_a_clear_error():
    n = len(trace_workload("philly").windows("test"))
    with pytest.raises(ConfigError, match=f"{n} test windows"):
        run_comparison(CompareConfig(workload="philly", policies=("fifo",), seeds=n + 1), progress=False)
    with pytest.raises(ConfigError, match="--jobs"):
        run_comparison(CompareConfig(workload="philly", policies=("fifo",), n_jobs=10), progress=False)


def test_environment_draws_episodes_from_the_training_split():
    env = PreemptionEnv(workload="philly", n_jobs=300)
    assert env.cluster.name == "philly"
    lo, hi = trace_workload("philly").splits["train"]
    train_ids = {j.job_id for j in trace_workload("philly").load().jobs if lo * DAY <= j.submit_time < hi * DAY}
    env.reset(seed=3)
    ids = [j.job_id for j in env.sim.jobs]
    assert len(ids) == 300 and set(ids) <= train_ids
    with pytest.raises(ConfigError, match="split"):
        PreemptionEnv(workload="philly", split="holdout")


def test_fractional_gpus_of_the_alibaba_trace_are_kept():
    gpus = np.array([j.gpus for j in trace_workload("alibaba2023").load().jobs])
    assert ((gpus > 0) & (gpus < 1)).sum() > 100
    nodes = resolve_cluster("alibaba2023").nodes
    assert len(nodes) == 1213 and {n.gpu_model for n in nodes} >= {"P100", "T4", "V100M16"}

"""Bundled real-trace workloads: windows, warm-up, the comparison and the environment on them."""

from __future__ import annotations

import numpy as np
import pytest

from schedgym.cli import main
from schedgym.envs import PreemptionEnv
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.sim.cluster import resolve_cluster
from schedgym.workloads.named import DAY, TRACE_WORKLOADS, trace_workload
from schedgym.workloads.source import WorkloadSource


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


def test_a_trace_file_given_as_a_workload_name_is_pointed_to_trace(tmp_path, capsys):
    # The old message allowed "(or a trace)" and then refused the trace it was given.
    path = str(tmp_path / "t.csv")
    with pytest.raises(ConfigError) as err:
        WorkloadSource(workload=path)
    assert str(err.value) == (
        f"Expected workload in ['paper', 'realistic', 'alibaba2023', 'philly', 'mix'], got {path!r}; "
        "a trace file is given as trace=PATH (schedgym compare --trace PATH), not as a workload name"
    )
    assert main(["compare", "--workload", path]) == 2
    assert capsys.readouterr().err == f"schedgym: error: {err.value}\n"
    with pytest.raises(ConfigError) as typo:  # a misspelt name is not taken for a path
        WorkloadSource(workload="phily")
    assert "trace" not in str(typo.value)


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


# ----------------------------------------------------------------------------------------------------------
# The contended Alibaba cluster
# ----------------------------------------------------------------------------------------------------------


def test_contended_alibaba_cluster_is_the_documented_subset():
    cluster = resolve_cluster("alibaba2023-contended")
    assert cluster.name == "alibaba2023-contended"
    # One node in 400 of each shape: the first G2 and the first T4 (2 GPUs) node; plus openb-node-0022 (G3).
    assert [(n.name, n.gpu_model) for n in cluster.nodes] == [
        ("openb-node-0022", "G3"),
        ("openb-node-0026", "G2"),
        ("openb-node-0036", "T4"),
    ]
    assert cluster.total.tolist() == [18.0, 328.0, 1664.0]
    full = {n.name: n for n in resolve_cluster("alibaba2023").nodes}
    assert all(full[n.name] == n for n in cluster.nodes)  # the nodes as they are in the bundled file


def test_every_alibaba_pod_fits_the_contended_cluster_and_the_added_node_is_needed():
    from schedgym.sim.cluster import ClusterSpec
    from schedgym.sim.job import first_unplaceable

    col = trace_workload("alibaba2023").load().table.columns
    member, gang = col["member"], col["gang"]
    cluster = resolve_cluster("alibaba2023-contended")
    assert first_unplaceable(member, gang, cluster.capacity) == len(member)
    without = ClusterSpec(tuple(n for n in cluster.nodes if n.name != "openb-node-0022"))
    fits = [first_unplaceable(member[i : i + 1], gang[i : i + 1], without.capacity) == 1 for i in range(len(member))]
    assert fits.count(False) == 5


def test_contended_alibaba_cluster_is_below_the_peak_demand_of_most_test_windows():
    tw = trace_workload("alibaba2023")
    capacity = resolve_cluster("alibaba2023-contended").total
    peaks = []
    for i in range(len(tw.windows("test"))):
        wl = tw.window("test", i)
        start = min(j.submit_time for j, m in zip(wl.jobs, wl.measured, strict=True) if m)
        peaks.append(wl.peak_demand(start))
    gpus = [round(float(p[0]), 2) for p in peaks]
    assert gpus == [39.81, 17.26, 30.37, 22.75, 23.46]  # docs/workloads.md
    assert sum(p[0] > capacity[0] for p in peaks) == 4
    assert float(tw.load().peak_demand()[0]) == pytest.approx(52.37)  # the whole trace, on 6,212 GPUs


def test_cluster_subset_rule():
    from schedgym.sim.cluster import ClusterSpec, ClusterSubset, NodeSpec

    nodes = [NodeSpec(f"a{i}", 8, 64, 256, "A") for i in range(5)] + [
        NodeSpec(f"b{i}", 2, 16, 64, "B") for i in range(3)
    ]
    nodes.insert(2, NodeSpec("c0", 4, 32, 128, "C"))
    source = ClusterSpec(tuple(nodes))
    # one in 2: round(5 / 2) = 3 of A (halves round up), round(3 / 2) = 2 of B, round(1 / 2) = 1 of C.
    assert [n.name for n in ClusterSubset("x", one_in=2).select(source)] == ["a0", "a1", "c0", "a2", "b0", "b1"]
    # one in 4: round(1.25) = 1 of A, round(0.75) = 1 of B, none of C; b2 added by name, in file order.
    assert [n.name for n in ClusterSubset("x", one_in=4, also=("b2",)).select(source)] == ["a0", "b0", "b2"]
    with pytest.raises(ConfigError, match="no node 'zz'"):
        ClusterSubset("x", one_in=4, also=("zz",)).select(source)


def test_contended_cluster_is_a_name_everywhere_clusters_are_named():
    from schedgym.errors import UnknownNameError
    from schedgym.sim.cluster import cluster_names

    assert "alibaba2023-contended" in cluster_names()
    with pytest.raises(UnknownNameError, match="alibaba2023-contended"):
        resolve_cluster("nosuch")
    env = PreemptionEnv(workload="alibaba2023", cluster="alibaba2023-contended", n_jobs=200)
    env.reset(seed=0)
    assert env.cluster.name == "alibaba2023-contended" and env.cluster.n_nodes == 3


def test_peak_demand_by_hand():
    from schedgym.sim import JobSpec
    from schedgym.workloads import Workload

    jobs = (
        JobSpec("a", 0.0, 10.0, 2.0, cpus=4.0),  # [0, 10)
        JobSpec("b", 5.0, 10.0, 3.0, cpus=1.0),  # [5, 15)
        JobSpec("c", 10.0, 1.0, 4.0, mem_gb=8.0),  # [10, 11): a ends at 10 before c starts
        JobSpec("d", 20.0, 1.0, 1.0),  # [20, 21)
    )
    wl = Workload(jobs)
    # GPUs: 2 + 3 = 5 on [5, 10), then 3 + 4 = 7 on [10, 11); CPUs: 4 + 1 = 5; memory 8.
    assert wl.peak_demand().tolist() == [7.0, 5.0, 8.0]
    # From 12 on: b alone (3 GPUs, 1 CPU) until 15, then d.
    assert wl.peak_demand(12.0).tolist() == [3.0, 1.0, 0.0]
    assert wl.peak_demand(16.0).tolist() == [1.0, 0.0, 0.0]

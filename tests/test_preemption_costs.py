"""Preemption costs per job: a job's own restart overhead (JobSpec, JobTable, the trace column, both engines),
the ``realistic`` preset that sets it and scales grace periods by job size, and the ``load`` setting of
synthetic workloads. The simulator's rule itself has hand-computed tests in ``test_sim_rules.py``."""

from __future__ import annotations

import hashlib
import pickle

import numpy as np
import pytest

from schedgym.envs import EnvConfig
from schedgym.errors import ConfigError, TraceError
from schedgym.experiments.runner import run_policy
from schedgym.registry import make_policy
from schedgym.sim import JobClass, JobSpec, SimConfig, Simulator, cluster_preset
from schedgym.sim.job import JobTable
from schedgym.workloads import Workload, load_trace, preset, save_trace, synthetic
from schedgym.workloads.source import WorkloadSource
from schedgym.workloads.synthetic import PREEMPTION_COST_BY_GPUS, SyntheticConfig, generate

PAPER = cluster_preset("paper")


def seeded(name: str, seed: int = 0, **overrides) -> JobTable:
    """The workload ``schedgym compare`` runs for ``seed`` (with preset fields replaced)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    return generate(preset(name, **overrides), PAPER, rng).table


# ----------------------------------------------------------------------------------------------------------
# The presets
# ----------------------------------------------------------------------------------------------------------


def test_paper_workloads_are_unchanged():
    # The columns of the paper workloads of seeds 0, 1 and 19, as drawn before per-job restart overheads and
    # the realistic preset existed (the digest was taken on that commit, 13cfb2a, and on this one).
    digest = hashlib.sha256()
    for seed in (0, 1, 19):
        col = WorkloadSource("paper").seeded(seed, PAPER).table.columns
        assert col["restart"] is None  # paper jobs give no restart overhead: SimConfig's applies
        for key in ("submit", "duration", "gpus", "cpus", "mem_gb", "grace", "gang", "job_class"):
            digest.update(np.ascontiguousarray(col[key]).tobytes())
    assert digest.hexdigest() == "d5ba3a739b2883144ca0867a7f08593a356361deabc196c96123b0a566bca194"


def test_realistic_is_the_paper_jobs_with_costs_by_size():
    paper, realistic = seeded("paper", 3).columns, seeded("realistic", 3).columns
    assert realistic["job_id"] == paper["job_id"]
    for key in ("submit", "duration", "gpus", "cpus", "mem_gb", "gang", "job_class"):
        np.testing.assert_array_equal(realistic[key], paper[key])
    gpus, be = paper["gpus"], paper["job_class"] == int(JobClass.BE)
    cost = np.select([gpus <= 1, gpus <= 8], [7.0, 30.0], 60.0)  # PREEMPTION_COST_BY_GPUS, by hand
    # Restart overhead: the table's seconds for every job.
    np.testing.assert_array_equal(realistic["restart"], cost)
    # Grace period: the paper draw (median 30 s) scaled to the table's median and rounded; TE jobs keep theirs.
    np.testing.assert_array_equal(realistic["grace"][be], np.round(paper["grace"][be] * cost[be] / 30.0))
    np.testing.assert_array_equal(realistic["grace"][~be], paper["grace"][~be])
    for g, median in ((1, 7.0), (4, 30.0), (16, 60.0)):  # the medians, up to sampling noise (few 16-GPU jobs)
        assert np.median(realistic["grace"][be & (gpus == g)]) == pytest.approx(median, rel=0.15)
    assert preset("realistic").grace_median_by_gpus == preset("realistic").restart_overhead_by_gpus
    assert PREEMPTION_COST_BY_GPUS == ((1.0, 7.0), (8.0, 30.0), (16.0, 60.0))


def test_table_lookup_takes_the_first_bound_at_or_above_and_the_last_beyond():
    table = ((1.0, 7.0), (8.0, 30.0), (16.0, 60.0))
    gpus = np.array([0.0, 0.5, 1.0, 1.5, 8.0, 8.01, 16.0, 64.0])
    assert synthetic._by_gpus(table, gpus).tolist() == [7.0, 7.0, 7.0, 30.0, 30.0, 60.0, 60.0, 60.0]


@pytest.mark.parametrize(
    "table, message",
    [
        (((8.0, 30.0), (1.0, 7.0)), "increasing"),
        (((1.0, 7.0), (1.0, 8.0)), "increasing"),
        (((0.0, 7.0),), "increasing"),
        (((1.0, -1.0),), "from 0"),
        (((1.0, float("nan")),), "from 0"),
        (((1.0, 2e10),), "from 0"),
        (((1.0,),), "pairs"),
        ((("a", 1.0),), "pairs"),
    ],
)
@pytest.mark.parametrize("field", ["grace_median_by_gpus", "restart_overhead_by_gpus"])
def test_bad_cost_tables_are_refused(field, table, message):
    with pytest.raises(ConfigError, match=message):
        SyntheticConfig(**{field: table})


def test_realistic_is_drawn_alike_in_python_and_in_cpp(monkeypatch):
    if synthetic._native is None:
        pytest.skip("the native synthetic generator is not built")
    native = seeded("realistic", 5, n_jobs=3000)
    monkeypatch.setattr(synthetic, "_native", None)
    python = seeded("realistic", 5, n_jobs=3000)
    assert native == python
    assert native.columns["restart"].tobytes() == python.columns["restart"].tobytes()


@pytest.mark.parametrize("policy", ["fitgpp", "k8s", "random"])
def test_engines_agree_on_realistic_workloads(policy):
    from schedgym.sim.simulator import native_available

    if not native_available():
        pytest.skip("the native engine is not built")
    table = seeded("realistic", 2, n_jobs=1500)
    results = {}
    for engine in ("python", "native"):
        config = SimConfig(queue=make_policy(policy).queue, restart_overhead=99.0, engine=engine)
        assert Simulator(PAPER, table, config).engine == engine
        workload = Workload.from_table(table)
        results[engine] = run_policy(make_policy(policy), PAPER, workload, config, rng=np.random.default_rng(4))
    py, nat = results["python"], results["native"]
    for name in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
        np.testing.assert_array_equal(getattr(nat, name), getattr(py, name), err_msg=name)
    assert nat.segments == py.segments
    # Every job pays its own overhead, never SimConfig's 99 s: at most its own per preemption, and exactly it
    # for a restart that was not cut short.
    own = table.columns["restart"]
    assert py.n_preemptions > 0
    assert (py.overhead_time <= py.preemptions * own + 1e-9).all()
    once = py.preemptions == 1
    assert np.isin(py.overhead_time[once], own[once]).mean() > 0.9


# ----------------------------------------------------------------------------------------------------------
# The column: JobSpec, JobTable, trace files, windows
# ----------------------------------------------------------------------------------------------------------


def test_jobspec_restart_overhead_is_checked_like_the_other_times():
    assert JobSpec("a", 0.0, 1.0, 1.0).restart_overhead is None
    assert JobSpec("a", 0.0, 1.0, 1.0, restart_overhead=np.float32(2.5)).restart_overhead == 2.5
    assert type(JobSpec("a", 0.0, 1.0, 1.0, restart_overhead=3).restart_overhead) is float
    for bad, message in (
        (-1.0, ">= 0"),
        (float("inf"), "finite"),
        (2e10, "MAX_TIME"),
        ("5", "a number"),
        (True, "a number"),
    ):
        with pytest.raises(ConfigError, match=message):
            JobSpec("a", 0.0, 1.0, 1.0, restart_overhead=bad)


def table(restart) -> JobTable:
    return JobTable(
        job_id=["a", "b", "c"], submit_time=[0, 1, 2], duration=[5, 5, 5], gpus=[1, 1, 1], restart_overhead=restart
    )


def test_table_restart_column_forms():
    assert table(None).columns["restart"] is None
    assert table([None, None, None]).columns["restart"] is None  # nobody gives one: no column
    np.testing.assert_array_equal(table([None, 4, 0.0]).columns["restart"], [np.nan, 4.0, 0.0])
    np.testing.assert_array_equal(table(np.array([np.nan, 4.0, 0.0])).columns["restart"], [np.nan, 4.0, 0.0])
    np.testing.assert_array_equal(table(6.0).columns["restart"], [6.0, 6.0, 6.0])
    t = table([None, 4, 0.0])
    assert [j.restart_overhead for j in t] == [None, 4.0, 0.0]
    assert t[0].restart_overhead is None and t[1].restart_overhead == 4.0
    assert t == JobTable.from_specs(t.specs) == pickle.loads(pickle.dumps(t))
    assert t != table(None) and table(None) == JobTable.from_specs(table(None).specs)
    assert not t.columns["restart"].flags.writeable


@pytest.mark.parametrize("bad", [[None, -1, 0], [None, float("nan"), 0], [None, "x", 0], [True, 1, 2], "x", [1, 2]])
def test_table_restart_errors_are_jobspecs(bad):
    with pytest.raises(ConfigError) as table_error:
        table(bad)
    if isinstance(bad, list) and len(bad) == 3:
        ids = ["a", "b", "c"]
        first = next(i for i, v in enumerate(bad) if v is not None and not (type(v) in (int, float) and 0 <= v < 1e10))
        with pytest.raises(ConfigError) as spec_error:
            JobSpec(ids[first], 0.0, 5.0, 1.0, restart_overhead=bad[first])
        assert str(table_error.value) == str(spec_error.value)


def test_trace_column_round_trip(tmp_path):
    jobs = [JobSpec("a", 0.0, 10.0, 1.0), JobSpec("b", 1.0, 10.0, 1.0, restart_overhead=7.0)]
    path = tmp_path / "t.csv"
    save_trace(path, jobs)
    assert path.read_text().splitlines()[0].endswith(",grace_period,restart_overhead")
    assert load_trace(path).jobs == tuple(jobs)
    save_trace(path, jobs[:1])  # nobody gives one: the column is not written
    assert "restart_overhead" not in path.read_text()


def test_trace_column_errors_name_file_line_and_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,duration,gpus,class,restart_overhead\na,0,1,1,BE,\nb,0,1,1,BE,-3\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert f"{path}:3" in str(info.value) and "restart_overhead" in str(info.value) and "-3" in str(info.value)


def test_trace_windows_keep_the_column(tmp_path):
    jobs = [JobSpec(f"j{i}", float(10 - i), 5.0, 1.0, restart_overhead=None if i % 2 else float(i)) for i in range(6)]
    path = tmp_path / "t.csv"
    save_trace(path, jobs)
    window = WorkloadSource(workload=None, trace=str(path), n_jobs=3).window_at(2, 3)
    # Jobs 2, 3, 4 of the file, sorted by submit time: j4 (6 s), j3 (7 s), j2 (8 s).
    assert [(j.job_id, j.restart_overhead) for j in window.jobs] == [("j4", 4.0), ("j3", None), ("j2", 2.0)]


# ----------------------------------------------------------------------------------------------------------
# load
# ----------------------------------------------------------------------------------------------------------


def test_load_scales_the_arrival_rate_only():
    base, heavy = seeded("realistic", 1, n_jobs=400), seeded("realistic", 1, n_jobs=400, load=2.0)
    for key in ("duration", "gpus", "grace", "restart"):
        np.testing.assert_array_equal(base.columns[key], heavy.columns[key])
    ratio = base.columns["submit"][-1] / heavy.columns["submit"][-1]
    assert ratio == pytest.approx(2.0, rel=1e-3)


def test_workload_source_and_env_config_take_load():
    source = WorkloadSource("paper", n_jobs=300, load=0.5)
    assert source.synthetic_config().load == 0.5
    assert EnvConfig(workload="realistic", load=1.3).source.load == 1.3
    for bad in (0, 10, -1.0, float("nan"), True, "1"):
        with pytest.raises(ConfigError, match="0.01 <= load < 10"):
            WorkloadSource("paper", load=bad)
    with pytest.raises(ConfigError, match="load applies to synthetic workloads"):
        EnvConfig(workload="philly", load=1.1)

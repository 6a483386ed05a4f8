"""The column path of a workload (:class:`JobTable`) against the JobSpec path it replaces.

The synthetic generator draws columns and never builds a JobSpec; the native engine is built from those
columns. These tests hold the column path to the JobSpec one: the same jobs (compared with a copy of the
generator as it was, JobSpec by JobSpec), the same checks and messages, the same simulations and the same
environment steps, on both engines.
"""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pytest
from helpers import cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.envs import PreemptionEnv
from schedgym.errors import ConfigError, ImpossibleJobError, TraceError
from schedgym.registry import make_policy
from schedgym.sim import ClusterSpec, JobClass, JobSpec, JobTable, NodeSpec, SimConfig, Simulator
from schedgym.sim.cluster import resolve_cluster
from schedgym.sim.job import check_workload, first_unplaceable, workload_columns
from schedgym.sim.metrics import RunResult
from schedgym.sim.resources import fits_on
from schedgym.workloads.source import WorkloadSource
from schedgym.workloads.synthetic import SyntheticConfig, generate, preset
from schedgym.workloads.trace import Workload, save_trace

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIELDS = ("submit_time", "duration", "gpus", "cpus", "mem_gb", "gang_size", "job_class", "grace_period")
COLUMN_KEYS = ("submit", "duration", "gpus", "cpus", "mem_gb", "grace", "gang", "job_class", "member")


def generate_specs(config: SyntheticConfig, cluster: ClusterSpec, rng: np.random.Generator) -> tuple[JobSpec, ...]:
    """The synthetic generator as it was before the column path: the same draws, one JobSpec per job. The
    column path must give exactly these jobs."""
    n = config.n_jobs

    def draw(dist, size):
        values = np.array([v for v, _ in dist], dtype=np.float64)
        probs = np.array([p for _, p in dist], dtype=np.float64)
        return values[rng.choice(len(values), size=size, p=probs / probs.sum())]

    def lognormal(median, sigma, lo, hi, size):
        return np.clip(rng.lognormal(math.log(median), sigma, size=size), lo, hi)

    c = config
    is_te = rng.random(n) < c.te_fraction
    dur = np.where(
        is_te,
        lognormal(c.te_duration_median, c.te_duration_sigma, c.te_duration_min, c.te_duration_max, n),
        lognormal(c.be_duration_median, c.be_duration_sigma, c.be_duration_min, c.be_duration_max, n),
    )
    dur = np.round(dur)
    gpus = np.where(is_te, draw(c.te_gpus, n), draw(c.be_gpus, n))
    cpus = gpus * draw(c.cpus_per_gpu, n)
    mem = gpus * draw(c.mem_per_gpu, n)
    grace = np.round(lognormal(c.grace_median, c.grace_sigma, c.grace_min, c.grace_max, n))
    grace = np.where(is_te, c.te_grace, grace)
    nodes = np.maximum(1, np.ceil(gpus / c.gpus_per_node)).astype(int)
    rate = c.load * float(cluster.total[0]) / float((gpus * dur).mean())
    submit = np.round(np.cumsum(rng.exponential(1.0 / rate, size=n)), 3)
    columns = zip(
        submit.tolist(), dur.tolist(), gpus.tolist(), cpus.tolist(), mem.tolist(), nodes.tolist(),
        is_te.tolist(), grace.tolist(), strict=True,
    )  # fmt: skip
    return tuple(
        JobSpec(f"j{i}", s, d, g, cp, m, k, JobClass.TE if t else JobClass.BE, gr)
        for i, (s, d, g, cp, m, k, t, gr) in enumerate(columns)
    )


def same_spec(a: JobSpec, b: JobSpec) -> bool:
    """Equal, field by field, with the same types (a float stays a float, a JobClass a JobClass)."""
    fa, fb = dataclasses.astuple(a), dataclasses.astuple(b)
    return fa == fb and [type(x) for x in fa] == [type(x) for x in fb]


def assert_same_columns(a: dict, b: dict) -> None:
    assert a["job_id"] == b["job_id"]
    assert all(type(x) is str for x in a["job_id"])
    for key in COLUMN_KEYS:
        assert a[key].dtype == b[key].dtype, key
        assert a[key].shape == b[key].shape, key
        assert np.array_equal(a[key], b[key]), key
        assert a[key].view(np.uint8).tobytes() == b[key].view(np.uint8).tobytes(), key  # -0.0 and 0.0 differ


def assert_same_result(a: RunResult, b: RunResult) -> None:
    for f in dataclasses.fields(RunResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f.name
        elif isinstance(x, (list, tuple)) or hasattr(x, "__len__"):
            assert list(x) == list(y), f.name
        else:
            assert x == y, f.name


CLUSTERS = {
    "paper": resolve_cluster("paper"),
    "small": resolve_cluster("small"),
    "large": resolve_cluster("large"),
    "mixed": ClusterSpec(
        tuple(NodeSpec(f"n{i}", g, c, m) for i, (g, c, m) in enumerate([(8, 64, 512), (4, 32, 256), (8, 96, 768)] * 3))
    ),
}


@st.composite
def synthetic(draw: st.DrawFn) -> tuple[SyntheticConfig, ClusterSpec, int]:
    overrides = {
        "n_jobs": draw(st.integers(1, 400)),
        "load": draw(st.sampled_from([0.3, 0.9, 1.0, 1.3, 2.5])),
        "te_fraction": draw(st.sampled_from([0.0, 0.3, 0.7, 1.0])),
    }
    if draw(st.booleans()):
        overrides["gpus_per_node"] = draw(st.sampled_from([4.0, 8.0]))
    return preset("paper", **overrides), CLUSTERS[draw(st.sampled_from(sorted(CLUSTERS)))], draw(st.integers(0, 2**32))


# ---------------------------------------------------------------------------------------------- the same jobs


@SETTINGS
@given(case=synthetic())
def test_generated_columns_are_the_jobspec_path_jobs(case):
    config, cl, seed = case
    wl = generate(config, cl, np.random.default_rng(seed))
    specs = generate_specs(config, cl, np.random.default_rng(seed))
    assert len(wl) == len(specs) == config.n_jobs
    assert_same_columns(wl.table.columns, workload_columns(specs))
    # JobSpecs made one at a time, then all at once, equal the eager ones with the same types.
    for i in {0, len(specs) - 1, len(specs) // 2}:
        assert same_spec(wl.table[i], specs[i])
    assert wl.table._specs is None  # reading single jobs made no table of them
    assert all(same_spec(a, b) for a, b in zip(wl.jobs, specs, strict=True))
    assert wl.jobs == specs and wl == Workload(specs, name=wl.name)


def test_seeded_workloads_match_the_jobspec_path():
    source, cl = WorkloadSource("paper", n_jobs=300), resolve_cluster("paper")
    for seed in range(20):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
        assert source.seeded(seed, cl).jobs == generate_specs(preset("paper", n_jobs=300), cl, rng)


@SETTINGS
@given(case=synthetic(), policy=st.sampled_from(["fifo", "fitgpp", "k8s", "random"]))
def test_column_and_jobspec_workloads_simulate_alike(case, policy):
    config, cl, seed = case
    table = generate(config, cl, np.random.default_rng(seed)).table
    specs = list(generate_specs(config, cl, np.random.default_rng(seed)))
    results = []
    for jobs in (table, specs):
        p = make_policy(policy)
        p.reset(np.random.default_rng(seed))
        results.append(Simulator(cl, jobs, SimConfig(queue=p.queue), preemption=p.preempts).run(p))
    assert_same_result(*results)


# ---------------------------------------------------------------------------------------------- construction

NUMBERS = st.one_of(
    st.floats(0, 1e6, allow_nan=False),
    st.integers(0, 100),
    st.sampled_from([0.0, -0.0, -1.0, 1.5, math.nan, math.inf, -math.inf, 2, np.float64(3.5), np.int64(4)]),
)
ODD = st.sampled_from([True, False, np.bool_(True), "1", None, 2.0, 1, 0, 2, -1, JobClass.TE, np.int64(1)])


@st.composite
def raw_columns(draw: st.DrawFn) -> tuple[list, dict]:
    """Columns as a user might pass them: lists or arrays, mostly valid, sometimes not."""
    n = draw(st.integers(0, 6))
    ids = draw(
        st.lists(
            st.one_of(st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]), st.sampled_from(["", " ", 5])),
            min_size=n,
            max_size=n,
        )
        if draw(st.integers(0, 4)) == 0
        else st.just([f"j{i}" for i in range(n)])
    )
    if draw(st.integers(0, 4)) == 0:
        ids = np.array(ids)  # numpy strings: stored as str, as JobSpec stores them
    valid = {
        "submit_time": st.floats(0, 1e6),
        "duration": st.floats(1e-3, 1e6),
        "gpus": st.sampled_from([0.5, 1.0, 2, 8.0]),
        "cpus": st.floats(0, 64),
        "mem_gb": st.floats(0, 512),
        "gang_size": st.integers(1, 3),
        "job_class": st.sampled_from([0, 1, JobClass.TE, JobClass.BE]),
        "grace_period": st.floats(0, 100),
    }
    cols = {}
    for name in FIELDS:
        if name in ("cpus", "mem_gb", "gang_size", "job_class", "grace_period") and draw(st.integers(0, 4)) == 0:
            continue  # the default
        element = valid[name] if draw(st.integers(0, 3)) else st.one_of(NUMBERS, ODD)
        if draw(st.integers(0, 5)) == 0:  # one value for every job
            cols[name] = draw(element)
            continue
        values = draw(st.lists(element, min_size=n, max_size=n))
        if draw(st.booleans()):
            try:
                values = np.array(values)
            except (TypeError, ValueError):
                pass
        cols[name] = values
    return ids, cols


def eager(ids: list, cols: dict) -> tuple[JobSpec, ...]:
    """The JobSpecs of the same columns, built one by one: what JobTable must accept, reject and store."""
    per_job = {k: v if isinstance(v, (list, np.ndarray)) else [v] * len(ids) for k, v in cols.items()}
    return tuple(JobSpec(job_id, **{k: v[i] for k, v in per_job.items()}) for i, job_id in enumerate(ids))


def outcome(make):
    try:
        return "ok", make()
    except ConfigError as exc:
        return "error", str(exc)


@settings(max_examples=400, deadline=None)
@given(data=raw_columns())
def test_table_checks_and_stores_like_jobspecs(data):
    ids, cols = data
    expected = outcome(lambda: eager(ids, cols))
    got = outcome(lambda: JobTable(job_id=ids, **cols))
    assert got[0] == expected[0], (got, expected)
    if expected[0] == "error":
        assert got[1] == expected[1]
        return
    table, specs = got[1], expected[1]
    assert len(table) == len(specs)
    assert all(same_spec(table[i], s) for i, s in enumerate(specs))
    assert all(same_spec(a, b) for a, b in zip(table, specs, strict=True))
    assert_same_columns(table.columns, workload_columns(specs))
    assert table == JobTable.from_specs(specs)


def test_table_column_shapes_and_ids_are_checked():
    with pytest.raises(ConfigError, match=r"Expected duration to have one value per job \(2\), got shape \(3,\)"):
        JobTable(job_id=["a", "b"], submit_time=[0, 1], duration=[1, 2, 3], gpus=1)
    with pytest.raises(ConfigError, match="Expected job_id to be a sequence of strings"):
        JobTable(job_id="ab", submit_time=[0, 1], duration=[1, 2], gpus=1)


def test_table_reads_and_pickles_like_a_tuple():
    t = JobTable(job_id=["a", "b", "c"], submit_time=[0.0, 1.0, 2.0], duration=[5.0, 6.0, 7.0], gpus=[1.0, 2.0, 3.0])
    assert t[-1].job_id == "c" and t[0:2] == t.specs[0:2]
    with pytest.raises(IndexError):
        t[3]
    assert [j.job_id for j in t] == ["a", "b", "c"] and t.job_ids == ("a", "b", "c")
    copy = pickle.loads(pickle.dumps(t))
    assert copy == t and tuple(copy) == tuple(t)
    assert not t.columns["submit"].flags.writeable  # shared with engines and results


# ---------------------------------------------------------------------------------------------- checks


@st.composite
def placements(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clusters with few or many node types (more than 16 takes the other branch) and jobs that may not fit."""
    n_types = draw(st.sampled_from([1, 3, 20]))
    types = np.array(
        draw(
            st.lists(
                st.tuples(*[st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0, 7.5])] * 3), min_size=n_types, max_size=n_types
            )
        )
    )
    capacity = types[draw(st.lists(st.integers(0, n_types - 1), min_size=1, max_size=40))]
    n = draw(st.integers(1, 60))
    member = np.array(
        draw(
            st.lists(
                st.tuples(*[st.sampled_from([0.0, 0.5, 1.0, 2.0 + 1e-10, 4.0, 8.0, 9.0])] * 3), min_size=n, max_size=n
            )
        )
    )
    gang = np.array(draw(st.lists(st.integers(1, 45), min_size=n, max_size=n)), dtype=np.int64)
    return member, gang, capacity


@settings(max_examples=300, deadline=None)
@given(case=placements())
def test_first_unplaceable_is_the_per_job_fit_test(case):
    member, gang, capacity = case
    per_job = [int(fits_on(capacity, member[i]).sum()) >= gang[i] for i in range(len(member))]
    expected = per_job.index(False) if not all(per_job) else len(member)
    assert first_unplaceable(member, gang, capacity) == expected


def test_check_workload_reports_the_same_first_problem_for_columns_and_specs():
    cl = cluster(8, 8)
    jobs = [JobSpec("a", 0.0, 1.0, 2.0), JobSpec("b", 0.0, 1.0, 16.0), JobSpec("a", 0.0, 1.0, 1.0)]
    for sequence in (
        jobs,
        JobTable.from_specs(jobs),
        JobTable(**{"job_id": ["a", "b", "a"], "submit_time": 0.0, "duration": 1.0, "gpus": [2.0, 16.0, 1.0]}),
    ):
        with pytest.raises(ImpossibleJobError, match="Job 'b' can never run: it needs 1 node"):
            check_workload(sequence, cl.capacity)
        with pytest.raises(ImpossibleJobError, match="Duplicate job_id 'a'"):
            check_workload(list(sequence)[:1] + list(sequence)[2:], cl.capacity)


def test_check_workload_says_how_many_nodes_fit_a_gang_member(engine):
    # One node holds a member of "g" and the largest node is large enough: the count is the reason, not the size.
    cl = ClusterSpec((NodeSpec("big", 8.0, 128.0, 768.0), NodeSpec("s0", 8.0, 32.0, 256.0),
                      NodeSpec("s1", 8.0, 32.0, 256.0)))  # fmt: skip
    jobs = [JobSpec("g", 0.0, 1.0, 16.0, cpus=64.0, mem_gb=1024.0, gang_size=2)]
    with pytest.raises(ImpossibleJobError) as err:
        check_workload(jobs, cl.capacity)
    assert str(err.value) == (
        "Job 'g' can never run: it needs 2 node(s) with gpus=8, cpus=32, mem_gb=512 each, "
        "and only 1 node(s) are that large"
    )
    with pytest.raises(ImpossibleJobError) as got:
        Simulator(cl, jobs, SimConfig(engine=engine))
    assert str(got.value) == str(err.value)


def test_check_workload_names_the_largest_node_only_when_it_is_too_small():
    too_big = [JobSpec("b", 0.0, 1.0, 16.0)]
    with pytest.raises(ImpossibleJobError, match="each, but the largest node offers gpus=8, cpus=0, mem_gb=0$"):
        check_workload(too_big, cluster(8, 4).capacity)
    # Each resource is offered by some node, but never all of them by one: no node is "the largest".
    split = ClusterSpec((NodeSpec("gpu", 8.0, 1.0, 1.0), NodeSpec("cpu", 0.0, 64.0, 64.0)))
    with pytest.raises(ImpossibleJobError, match=r"no node offers all three \(the most per node: gpus=8, cpus=64"):
        check_workload([JobSpec("c", 0.0, 1.0, 4.0, cpus=8.0, mem_gb=8.0)], split.capacity)


@pytest.mark.parametrize(
    "jobs",
    [
        [JobSpec("a", 0.0, 1.0, 2.0), JobSpec("b", 0.0, 1.0, 16.0), JobSpec("a", 0.0, 1.0, 1.0)],
        [JobSpec("a", 0.0, 1.0, 2.0), JobSpec("a", 0.0, 1.0, 1.0), JobSpec("b", 0.0, 1.0, 16.0)],
        [JobSpec("a", 0.0, 1.0, 2.0), JobSpec("g", 0.0, 1.0, 24.0, gang_size=3), JobSpec("b", 0.0, 1.0, 16.0)],
        [JobSpec("a", 0.0, 1.0, 2.0), JobSpec("c", 0.0, 1.0, 2.0, cpus=1e5)],
        [JobSpec("a", 0.0, 1.0, 2.0), JobSpec("a", 5.0, 1.0, 1.0)],  # a duplicate id, every job placeable
    ],
)
def test_simulators_report_check_workloads_first_problem(jobs, engine):
    # The native simulator leaves a job that can never run to its engine and then asks check_workload for the
    # error: the same one, duplicate ids before or after it included, as checking first.
    cl = cluster(8, 8)
    with pytest.raises(ImpossibleJobError) as expected:
        check_workload(jobs, cl.capacity)
    for sequence in (jobs, JobTable.from_specs(jobs)):
        with pytest.raises(ImpossibleJobError) as got:
            Simulator(cl, sequence, SimConfig(engine=engine))
        assert str(got.value) == str(expected.value)
    assert len(Simulator(cl, jobs[:1], SimConfig(engine=engine)).jobs) == 1


def test_workload_from_table_checks_like_the_constructor():
    table = JobTable(job_id=["x", "y", "x"], submit_time=0.0, duration=1.0, gpus=1.0)
    with pytest.raises(ConfigError) as from_table:
        Workload.from_table(table, name="w")
    with pytest.raises(ConfigError) as from_jobs:
        Workload(tuple(table), name="w")
    assert (
        str(from_table.value)
        == str(from_jobs.value)
        == "Workload 'w': expected unique job ids, got 'x' at positions 0 and 2"
    )
    ok = JobTable(job_id=["x", "y"], submit_time=0.0, duration=1.0, gpus=1.0)
    with pytest.raises(ConfigError, match=r"expected lines to have one entry per job \(2\), got 1"):
        Workload.from_table(ok, lines=(3,))
    wl = Workload.from_table(ok, name="w", measured=[True, np.bool_(False)])
    assert wl.measured == (True, False) and len(wl) == 2 and "jobs" not in wl.__dict__
    copy = pickle.loads(pickle.dumps(wl))
    assert "jobs" not in copy.__dict__ and copy == wl == Workload(tuple(ok), name="w", measured=(True, False))
    with pytest.raises(AttributeError):
        wl.no_such_field  # noqa: B018


def test_check_fits_names_the_first_job_that_cannot_run():
    cl = cluster(8, 8, cpus=16.0)
    table = JobTable(
        job_id=["ok", "wide", "big"], submit_time=0.0, duration=1.0, gpus=[8.0, 24.0, 10.0], cpus=[1.0, 1.0, 1.0],
        gang_size=[1, 3, 1],
    )  # fmt: skip
    for wl in (Workload.from_table(table), Workload(tuple(table))):
        with pytest.raises(TraceError, match="job 'wide' needs 3 nodes but cluster"):
            wl.check_fits(cl)
    assert "jobs" not in Workload.from_table(table).__dict__


# ---------------------------------------------------------------------------------------------- environment


def rollout(env: PreemptionEnv, options: dict, seed: int, steps: int = 400) -> list:
    trace = []
    obs, info = env.reset(seed=seed, options=options)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        action = int(legal[rng.integers(len(legal))])
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append(
            (obs.tobytes(), info["action_mask"].tobytes(), reward, terminated, info["te_job"], info["sim_time"])
        )
        if terminated:
            break
    return trace


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_environment_steps_alike_on_column_and_jobspec_workloads(seed, engine):
    config = preset("paper", n_jobs=1000)
    cl = resolve_cluster("paper")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    specs = Workload(generate_specs(config, cl, rng), name="paper")
    env = PreemptionEnv(n_jobs=1000, max_candidates=8)
    via_seed = rollout(env, {"workload_seed": seed}, seed)
    if engine == "native":  # the native engine ran from the columns: no JobSpec was made
        assert env._workload.table._specs is None and "jobs" not in env._workload.__dict__
    via_specs = rollout(PreemptionEnv(n_jobs=1000, max_candidates=8), {"workload": specs}, seed)
    assert len(via_seed) > 1 and via_seed == via_specs


def window_specs(pool: tuple[JobSpec, ...], start: int, n: int) -> tuple[JobSpec, ...]:
    """A trace window as it was cut before the column path: JobSpec by JobSpec."""
    window = sorted(pool[start : start + n], key=lambda j: j.submit_time)
    return tuple(dataclasses.replace(j, submit_time=j.submit_time - window[0].submit_time) for j in window)


@pytest.mark.parametrize("workload", ["philly", "alibaba2023"])
def test_trace_windows_cut_from_columns_are_the_jobspec_cut(workload):
    source = WorkloadSource(workload, n_jobs=700)
    rng = np.random.default_rng(3)
    for split in ("train", "validation"):
        pool = source.pool(split).jobs
        for start in [0, len(pool) - 700, *rng.integers(0, len(pool) - 700, 5).tolist()]:
            wl = source.window_at(start, split=split)
            assert "jobs" not in wl.__dict__
            expected = window_specs(pool, start, 700)
            assert all(same_spec(a, b) for a, b in zip(wl.jobs, expected, strict=True))
            assert wl.name == f"{workload}/{split}[{start}:{start + 700}]"


def test_trace_file_windows_cut_from_columns_are_the_jobspec_cut(tmp_path):
    # Out-of-order submissions and ties, so that the sort and its stability matter.
    specs = [JobSpec(f"t{i}", float((i * 7) % 5), 1.0 + i, 1.0) for i in range(30)]
    path = tmp_path / "t.csv"
    save_trace(path, specs)
    source = WorkloadSource(trace=str(path), n_jobs=9)
    for start in range(0, 22):
        assert source.window_at(start).jobs == window_specs(tuple(specs), start, 9)
    env = PreemptionEnv(trace=str(path), n_jobs=9, cluster="paper")
    env.reset(seed=1)
    assert [j.spec for j in env.sim.jobs] == list(env._workload.jobs)

"""Inputs built in Python obey the trace reader's rules: ``JobSpec``, ``NodeSpec``, ``ClusterSpec`` and
``Workload`` check themselves at construction, so a bad value fails there with a ConfigError naming the
field and the value, whatever the entry point (Python API, ``reset(options={"workload": ...})``, a trace)."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
from helpers import be, cluster

import schedgym  # noqa: F401  (registers the environments)
from schedgym.errors import ConfigError, SchedGymError, TraceError
from schedgym.sim import ClusterSpec, JobClass, JobSpec, NodeSpec, Simulator
from schedgym.sim.job import DEFAULT_GRACE_PERIOD
from schedgym.workloads import OPTIONAL_DEFAULTS, Workload, load_trace, save_trace
from schedgym.workloads import trace as trace_module

GOOD_JOB = dict(job_id="a", submit_time=0.0, duration=100.0, gpus=2.0, cpus=8.0, mem_gb=32.0)


def job(**overrides) -> JobSpec:
    return JobSpec(**(GOOD_JOB | overrides))


def expect_config_error(factory, *parts: str) -> ConfigError:
    """``factory()`` raises a ConfigError (a SchedGymError) whose message contains every one of ``parts``."""
    with pytest.raises(ConfigError) as exc:
        factory()
    assert isinstance(exc.value, SchedGymError)
    msg = str(exc.value)
    for part in parts:
        assert part in msg, msg
    return exc.value


# ----------------------------------------------------------------------------------------------------------
# JobSpec
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected", "actual"),
    [
        ({"job_id": ""}, "job_id", "''"),
        ({"job_id": "  "}, "job_id", "'  '"),
        ({"job_id": 7}, "job_id", "7"),
        ({"submit_time": -1.0}, "submit_time >= 0", "-1.0"),
        ({"submit_time": math.inf}, "submit_time >= 0", "inf"),
        ({"submit_time": math.nan}, "submit_time >= 0", "nan"),
        ({"duration": 0}, "duration >= 0.001", "0.0"),
        ({"duration": 0.0}, "duration >= 0.001", "0.0"),
        ({"duration": -5}, "duration >= 0.001", "-5.0"),
        ({"duration": math.inf}, "duration >= 0.001", "inf"),
        ({"duration": math.nan}, "duration >= 0.001", "nan"),
        ({"duration": "100"}, "duration", "'100'"),
        ({"duration": None}, "duration", "None"),
        ({"gpus": -1.0}, "gpus >= 0", "-1.0"),
        ({"gpus": True}, "gpus", "True"),
        ({"gpus": np.bool_(True)}, "gpus", "True"),
        ({"cpus": -0.5}, "cpus >= 0", "-0.5"),
        ({"cpus": math.nan}, "cpus >= 0", "nan"),
        ({"mem_gb": -32}, "mem_gb >= 0", "-32"),
        ({"mem_gb": "32"}, "mem_gb", "'32'"),
        ({"gpus": 0.0, "cpus": 0.0, "mem_gb": 0.0}, "requests no resources", "gpus, cpus and mem_gb"),
        ({"gang_size": 0}, "gang_size >= 1", "0"),
        ({"gang_size": -2}, "gang_size >= 1", "-2"),
        ({"gang_size": 2.0}, "gang_size", "2.0"),
        ({"gang_size": True}, "gang_size", "True"),
        ({"gang_size": "2"}, "gang_size", "'2'"),
        ({"job_class": 2}, "job_class", "2"),
        ({"job_class": "TE"}, "job_class", "'TE'"),
        ({"job_class": False}, "job_class", "False"),
        ({"grace_period": -100}, "grace_period >= 0", "-100"),
        ({"grace_period": math.inf}, "grace_period >= 0", "inf"),
        ({"grace_period": False}, "grace_period", "False"),
    ],
)
def test_jobspec_rejects(overrides, expected, actual):
    err = expect_config_error(lambda: job(**overrides), expected, actual)
    if "job_id" not in overrides:
        assert str(err).startswith("Job 'a'")  # names the job


def test_jobspec_message_style():
    with pytest.raises(
        ConfigError, match=r"^Job 'a': expected duration >= 0\.001 s \(schedgym\.limits\.MIN_DURATION\), got 0\.0$"
    ):
        job(duration=0.0)
    with pytest.raises(
        ConfigError, match=r"^Job 'a': expected submit_time <= 1e\+10 s \(schedgym\.limits\.MAX_TIME\), got 1e\+16$"
    ):
        job(submit_time=1e16)
    with pytest.raises(
        ConfigError, match=r"^Job 'a': expected gpus <= 1e\+06 \(schedgym\.limits\.MAX_AMOUNT\), got 2000000\.0$"
    ):
        job(gpus=2e6)


def test_jobspec_accepts_numpy_scalars_and_stores_python_scalars():
    spec = JobSpec(
        np.str_("x"),
        np.float64(1.5),
        np.int64(3),
        np.float32(0.5),
        np.int32(2),
        np.float64(4.0),
        np.int64(2),
        np.int64(0),
        np.float64(7.0),
    )
    assert spec == JobSpec("x", 1.5, 3.0, 0.5, 2.0, 4.0, 2, JobClass.TE, 7.0)
    for name in ("submit_time", "duration", "gpus", "cpus", "mem_gb", "grace_period"):
        assert type(getattr(spec, name)) is float, name
    assert type(spec.gang_size) is int
    assert type(spec.job_class) is JobClass
    assert type(spec.job_id) is str


def test_jobspec_converts_ints_and_class_values():
    spec = JobSpec("x", 0, 10, 1, job_class=1, grace_period=0)
    assert (spec.submit_time, spec.duration, spec.gpus, spec.grace_period) == (0.0, 10.0, 1.0, 0.0)
    assert type(spec.duration) is float
    assert spec.job_class is JobClass.BE


def test_jobspec_accepts_the_boundaries():
    spec = job(submit_time=0.0, gpus=0.0, cpus=0.0, mem_gb=1e-9, grace_period=0.0, gang_size=1)
    assert spec.mem_gb == 1e-9


def test_replace_is_validated_too():
    spec = job()
    assert dataclasses.replace(spec, submit_time=5.0).submit_time == 5.0
    expect_config_error(lambda: dataclasses.replace(spec, submit_time=-5.0), "submit_time >= 0", "-5.0")


def test_default_grace_period_is_the_trace_default(tmp_path):
    assert DEFAULT_GRACE_PERIOD == 30.0
    assert job().grace_period == DEFAULT_GRACE_PERIOD
    assert OPTIONAL_DEFAULTS["grace_period"] == DEFAULT_GRACE_PERIOD
    path = tmp_path / "trace.csv"
    path.write_text("job_id,submit_time,duration,gpus,class\na,0,100,2,BE\n")
    (loaded,) = load_trace(path).jobs
    assert loaded.grace_period == DEFAULT_GRACE_PERIOD
    assert loaded == JobSpec("a", 0.0, 100.0, 2.0)


# ----------------------------------------------------------------------------------------------------------
# Entry points: the simulator, the environment, the trace reader
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"duration": 0.0}, "duration >= 0.001"),
        ({"gang_size": 0}, "gang_size >= 1"),
        ({"duration": -5.0}, "duration >= 0.001"),
        ({"grace_period": -100.0}, "grace_period >= 0"),
    ],
)
def test_simulator_never_sees_a_bad_job(overrides, expected):
    # Used to be a ZeroDivisionError (duration 0, gang size 0), slowdown 1.0 (duration -5) or a run segment
    # starting before the job's submission (grace -100): now the job cannot be built.
    with pytest.raises(ConfigError, match=expected):
        Simulator(cluster(8), [be("blk", 0, 1000, 8), job(gpus=8.0, cpus=0.0, mem_gb=0.0, **overrides)])


def test_environment_workload_option_cannot_carry_a_bad_job():
    env = gym.make("schedgym/Preemption-v1")
    try:
        with pytest.raises(ConfigError, match="duration >= 0.001"):
            env.reset(options={"workload": Workload((be("b", 0, 100, 2), JobSpec("t", 5.0, 0.0, 2.0)))})
        with pytest.raises(ConfigError, match="grace_period >= 0"):
            env.reset(options={"workload": Workload((be("b", 0, 100, 2, grace=-100),))})
    finally:
        env.close()


def test_trace_reader_reports_a_jobspec_error_with_file_and_line(tmp_path, monkeypatch):
    # The reader checks every value before building the JobSpec; should the two ever disagree, the JobSpec's
    # ConfigError still comes out as a TraceError pointing into the file.
    def stricter(**kw):
        raise ConfigError(f"Job {kw['job_id']!r}: expected something else")

    monkeypatch.setattr(trace_module, "JobSpec", stricter)
    path = tmp_path / "trace.csv"
    path.write_text("job_id,submit_time,duration,gpus,class\na,0,100,2,BE\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    assert (exc.value.path, exc.value.line) == (str(path), 2)
    assert str(exc.value) == f"{path}:2: Job 'a': expected something else"


def test_trace_round_trip_of_converted_values(tmp_path):
    jobs = [JobSpec("a", np.float64(1.25), 10, np.int64(3), gang_size=np.int64(3), job_class=0, grace_period=0)]
    path = tmp_path / "trace.csv"
    save_trace(path, jobs)
    assert load_trace(path).jobs == tuple(jobs)


# ----------------------------------------------------------------------------------------------------------
# NodeSpec and ClusterSpec
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "expected", "actual"),
    [
        (lambda: NodeSpec("", 8, 64, 512), "node name", "''"),
        (lambda: NodeSpec(None, 8, 64, 512), "node name", "None"),
        (lambda: NodeSpec("a", True, 64, 512), "gpus", "True"),
        (lambda: NodeSpec("a", "8", 64, 512), "gpus", "'8'"),
        (lambda: NodeSpec("a", 8, math.inf, 512), "cpus >= 0", "inf"),
        (lambda: NodeSpec("a", 8, 64, math.nan), "mem_gb >= 0", "nan"),
        (lambda: NodeSpec("a", 8, 64, -1), "mem_gb >= 0", "-1"),
        (lambda: NodeSpec("a", 0, 0, 0), "no resources", "'a'"),
        (lambda: NodeSpec("a", 8, 64, 512, gpu_model=None), "gpu_model", "None"),
        (lambda: ClusterSpec(NodeSpec("a", 8, 64, 512)), "tuple or list of NodeSpec", "NodeSpec"),
        (lambda: ClusterSpec("ab"), "tuple or list of NodeSpec", "str"),
        (lambda: ClusterSpec((NodeSpec("a", 8, 64, 512), ("b", 8, 64, 512))), "node 1", "tuple"),
        (lambda: ClusterSpec((NodeSpec("a", 8, 64, 512),), name=""), "cluster name", "''"),
        (lambda: ClusterSpec((NodeSpec("a", 8, 64, 512),), name=3), "cluster name", "3"),
        (lambda: ClusterSpec([]), "at least one node", "0 nodes"),
        (lambda: ClusterSpec.homogeneous(True, 8, 64, 512), "n_nodes > 0", "True"),
        (lambda: ClusterSpec.homogeneous(2.0, 8, 64, 512), "n_nodes > 0", "2.0"),
        (lambda: ClusterSpec.homogeneous(2, -8, 64, 512), "gpus >= 0", "-8"),
        (lambda: ClusterSpec.homogeneous(2, 8, 64, 512, name=""), "cluster name", "''"),
    ],
)
def test_cluster_rejects(factory, expected, actual):
    expect_config_error(factory, expected, actual)


def test_node_and_cluster_accept_numpy_scalars_and_lists():
    node = NodeSpec(np.str_("a"), np.int64(8), np.float32(64), 512)
    assert [type(v) for v in (node.name, node.gpus, node.cpus, node.mem_gb)] == [str, float, float, float]
    assert node == NodeSpec("a", 8.0, 64.0, 512.0)
    cl = ClusterSpec([node, NodeSpec("b", 4, 32, 256)])
    assert isinstance(cl.nodes, tuple) and cl.n_nodes == 2
    homog = ClusterSpec.homogeneous(np.int64(3), np.float64(8), 64, 512)
    assert homog.n_nodes == 3 and type(homog.nodes[0].gpus) is float


# ----------------------------------------------------------------------------------------------------------
# Workload
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "expected", "actual"),
    [
        (lambda: Workload(job()), "tuple or list of JobSpec", "JobSpec"),
        (lambda: Workload((job(), {"job_id": "b"})), "job 1", "dict"),
        (lambda: Workload((job(), job(job_id="b"), job())), "unique job ids", "'a'"),
        (lambda: Workload((job(),), measured=(True, False)), "measured", "got 2"),
        (lambda: Workload((job(),), measured=(1,)), "measured", "1"),
        (lambda: Workload((job(),), measured=True), "measured", "bool"),
        (lambda: Workload((job(),), lines=(2, 3)), "lines", "got 2"),
        (lambda: Workload((job(),), lines=(True,)), "lines", "True"),
    ],
)
def test_workload_rejects(factory, expected, actual):
    expect_config_error(factory, expected, actual)


def test_workload_converts_lists_and_numpy_values():
    wl = Workload([job(), job(job_id="b")], lines=[np.int64(2), 3], measured=np.array([False, True]))
    assert wl.jobs == (job(), job(job_id="b"))
    assert wl.lines == (2, 3) and type(wl.lines[0]) is int
    assert wl.measured == (False, True) and type(wl.measured[0]) is bool

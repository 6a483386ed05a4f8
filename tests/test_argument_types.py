"""Arguments of the wrong type or beyond the limits, at every public entry point (issue 19, items 9, 11, 12).

Each refusal is a :class:`~schedgym.errors.SchedGymError` naming the expected and the given value, raised by the
configuration dataclass itself (``SimConfig``, ``SyntheticConfig``, ``EnvConfig``), so that every front end
(Python, ``gym.make``/``gym.make_vec`` keyword arguments, ``schedgym train --env-kwargs``, ``schedgym sweep
--set``) applies the same check; from the CLI it is one line on stderr and exit status 2. Actions go through
one check (:func:`schedgym.decision.check_action`) on both environments.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from helpers import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedgym  # noqa: F401  (registers the ids)
from schedgym.decision import action_index, check_action
from schedgym.envs import EnvConfig, IllegalActionAsWait, PreemptionEnv
from schedgym.envs.vector_env import PreemptionVectorEnv
from schedgym.errors import ConfigError, IllegalDecisionError, SchedGymError, UnknownNameError
from schedgym.experiments.compare import CompareConfig
from schedgym.experiments.sweep import SweepConfig
from schedgym.limits import MAX_TIME
from schedgym.sim import SimConfig, resolve_cluster
from schedgym.workloads.synthetic import SyntheticConfig, preset

ID = "schedgym/Preemption-v1"
BUSY = dict(n_jobs=1000)  # as tests/test_env.py: seed 1 starts with a decision that offers a choice
BUSY_SEED = 1
HYPOTHESIS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NOT_ACTIONS = [
    True,
    False,
    np.bool_(True),
    np.array(True),
    float("inf"),
    -float("inf"),
    float("nan"),
    np.float64("nan"),
    1.5,
    np.float32(0.5),
    1e300,
    "1",
    b"1",
    None,
    [1],
    (0,),
    np.array([1]),
    np.zeros((1, 1), dtype=np.int64),
    1 + 0j,
    {0: 0},
]


def one_line_error(proc) -> str:  # noqa: ANN001
    """The CLI's one-line refusal: exit status 2, exactly one line on stderr (no warning, no traceback)."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("schedgym: error: "), proc.stderr
    return lines[0]


def write_cluster(tmp_path: Path) -> Path:
    path = tmp_path / "two.csv"
    path.write_text("name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,8,64,512\n")
    return path


# ---------------------------------------------------------------------------------------------- cluster=, trace=


@pytest.mark.parametrize(
    ("value", "shown"),
    [(5, "int 5"), (b"paper", "bytes b'paper'"), (["paper"], "list ['paper']"), (5.0, "float 5.0"), ("", "str ''")],
)
def test_a_cluster_that_is_no_name_or_path_is_refused_everywhere(value, shown):
    expected = f"Expected cluster to be a preset name or a path, got {shown}"
    with pytest.raises(ConfigError, match="^" + expected.replace("[", r"\[").replace("]", r"\]") + "$"):
        gym.make(ID, cluster=value)
    with pytest.raises(ConfigError, match="preset name or a path"):
        gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", cluster=value)
    with pytest.raises(ConfigError, match="preset name or a path"):
        EnvConfig(cluster=value)
    with pytest.raises(ConfigError, match="preset name or a path"):
        resolve_cluster(value)


@pytest.mark.parametrize("value", [5, b"t.csv", ["t.csv"]])
def test_a_trace_that_is_no_path_is_refused(value):
    with pytest.raises(ConfigError, match=f"Expected trace to be a path, got {type(value).__name__}"):
        gym.make(ID, trace=value)


def test_a_workload_that_is_no_name_is_refused():
    with pytest.raises(ConfigError, match="Expected workload to be a workload name, got int 5"):
        gym.make(ID, workload=5)


def test_a_path_to_a_cluster_csv_works_as_its_string(tmp_path):
    path = write_cluster(tmp_path)
    env = gym.make(ID, cluster=path, n_jobs=60)
    twin = gym.make(ID, cluster=str(path), n_jobs=60)
    assert env.unwrapped.config.cluster == str(path)  # stored as a string: to_kwargs stays JSON-ready
    assert env.unwrapped.cluster == twin.unwrapped.cluster and env.unwrapped.cluster.n_nodes == 2
    (o1, _), (o2, _) = env.reset(seed=3), twin.reset(seed=3)
    assert np.array_equal(o1, o2)
    venv = gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", cluster=path, n_jobs=60)
    assert all(e.cluster == twin.unwrapped.cluster for e in venv.envs)
    assert resolve_cluster(path) == twin.unwrapped.cluster


@pytest.mark.parametrize("kwargs", [{"cluster": "nope"}, {"workload": "nope"}])
def test_an_unknown_name_in_gym_make_is_a_value_error_as_every_bad_argument_is(kwargs):
    # UnknownNameError was a KeyError alone: `except ValueError` around gym.make missed it.
    with pytest.raises(ValueError, match="nope"):
        gym.make("schedgym/Preemption-v1", **kwargs)
    assert issubclass(UnknownNameError, KeyError)  # still a failed lookup


def test_a_cluster_name_too_long_for_a_path_is_an_unknown_name():
    # Path.exists() raised OSError (ENAMETOOLONG) for it.
    with pytest.raises(UnknownNameError, match="Unknown cluster"):
        resolve_cluster("x" * 5000)


def test_train_refuses_a_cluster_of_the_wrong_type_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(run_cli("train", "--env-kwargs", '{"cluster": 5}'))
    assert "Expected cluster to be a preset name or a path, got int 5" in line
    assert list(tmp_path.iterdir()) == []  # nothing was made


def test_train_refuses_a_restart_overhead_beyond_max_time_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(run_cli("train", "--env-kwargs", '{"sim": {"restart_overhead": 1e300}}'))
    assert "restart_overhead at most 1e+10 s (schedgym.limits.MAX_TIME), got 1e+300" in line


# ---------------------------------------------------------------------------------------------- SimConfig limits


@pytest.mark.parametrize("value", [1e11, 1e300, MAX_TIME * (1 + 1e-15)])
def test_restart_overhead_beyond_max_time_is_refused_by_simconfig(value):
    with pytest.raises(ConfigError, match=r"Expected restart_overhead at most 1e\+10 s \(schedgym.limits.MAX_TIME\)"):
        SimConfig(restart_overhead=value)
    with pytest.raises(ConfigError, match="MAX_TIME"):
        dataclasses.replace(SimConfig(), restart_overhead=value)  # what sweep --set does
    with pytest.raises(ConfigError, match="MAX_TIME"):
        gym.make(ID, sim={"restart_overhead": value})
    with pytest.raises(ConfigError, match="MAX_TIME"):
        gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", sim={"restart_overhead": value})
    assert SimConfig(restart_overhead=MAX_TIME).restart_overhead == MAX_TIME


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"restart_overhead": True}, "restart_overhead to be a finite number >= 0, got True"),
        ({"restart_overhead": np.float64("inf")}, "restart_overhead to be a finite number >= 0, got np.float64(inf)"),
        ({"max_preemptions": 2.0}, "max_preemptions to be an int, got 2.0"),
        ({"max_preemptions": np.bool_(True)}, "max_preemptions to be an int, got np.True_"),
        ({"max_preemptions": 10**7}, "max_preemptions <= 1,000,000"),
        ({"backfill": np.int64(1)}, "backfill to be a bool"),
        ({"queue": ["fifo"]}, "queue in ['fifo', 'priority'], got ['fifo']"),
        ({"placement": ["best-fit"]}, "placement 'best-fit' or 'first-fit', got ['best-fit']"),
        ({"engine": 5}, "engine in ['native', 'python'] or None, got 5"),
    ],
)
def test_simconfig_refuses_wrong_types(kwargs, expected):
    with pytest.raises(ConfigError) as exc:
        SimConfig(**kwargs)
    assert expected in str(exc.value)


def test_simconfig_takes_numpy_scalars_as_python_numbers():
    config = SimConfig(max_preemptions=np.int64(3), restart_overhead=np.float32(2.5), backfill=np.bool_(False))
    assert config == SimConfig(max_preemptions=3, restart_overhead=2.5, backfill=False)
    assert type(config.max_preemptions) is int and type(config.restart_overhead) is float
    assert type(config.backfill) is bool


@HYPOTHESIS
@given(
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**12), 10**12),
        st.booleans(),
        st.text(max_size=5),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )
)
def test_simconfig_restart_overhead_is_a_number_within_the_limits_or_a_config_error(value):
    valid = not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= MAX_TIME
    if valid:
        assert SimConfig(restart_overhead=value).restart_overhead == value
    else:
        with pytest.raises(ConfigError, match="restart_overhead"):
            SimConfig(restart_overhead=value)


# ---------------------------------------------------------------------------------------------- EnvConfig


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"n_jobs": True}, "n_jobs to be an integer >= 1, got True"),
        ({"n_jobs": 500.0}, "n_jobs to be an integer >= 1, got 500.0"),
        ({"max_candidates": 2.5}, "max_candidates to be an integer >= 1, got 2.5"),
        ({"estimate_noise": 1e300}, "estimate_noise <= 10"),
        ({"estimate_noise": True}, "estimate_noise to be a finite number, got True"),
        ({"te_weight": float("inf")}, "te_weight to be a finite number, got inf"),
        ({"be_weight": "1"}, "be_weight to be a finite number, got '1'"),
        ({"preemption_cost": 1e308}, "preemption_cost <= 1e+06"),
        ({"split": ["train"]}, "split in"),
        ({"reward": 0}, "reward 'slowdown' or 'bounded_slowdown', got 0"),
        ({"load": True}, "0.01 <= load < 10, got True"),
        ({"sim": 5}, "sim to be a SimConfig or a dict of its fields, got 5"),
    ],
)
def test_env_config_refuses_wrong_types(kwargs, expected):
    with pytest.raises(ConfigError) as exc:
        gym.make(ID, **kwargs)
    assert expected in str(exc.value)


def test_env_config_takes_numpy_scalars_as_python_numbers():
    config = EnvConfig(n_jobs=np.int64(50), max_candidates=np.int32(4), load=np.float64(0.5), te_weight=np.float32(2))
    assert config == EnvConfig(n_jobs=50, max_candidates=4, load=0.5, te_weight=2.0)
    assert all(type(v) in (int, float) for k, v in config.to_kwargs().items() if k in ("n_jobs", "load", "te_weight"))
    env = PreemptionEnv(config)
    env.reset(seed=0)  # the synthetic preset takes the converted n_jobs


def test_env_refuses_a_config_that_is_no_env_config():
    with pytest.raises(ConfigError, match="Expected config to be an EnvConfig or None, got dict"):
        PreemptionEnv({"n_jobs": 5})  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [True, -1, 1.0, "1", [1]])
def test_reset_refuses_a_seed_that_is_no_integer(seed):
    env = PreemptionEnv(n_jobs=50)
    with pytest.raises(ConfigError, match="Expected seed to be an integer >= 0"):
        env.reset(seed=seed)


def test_reset_takes_numpy_integer_seeds_and_refuses_options_that_are_no_dict():
    env, twin = PreemptionEnv(n_jobs=50), PreemptionEnv(n_jobs=50)
    assert np.array_equal(env.reset(seed=np.int64(4))[0], twin.reset(seed=4)[0])
    with pytest.raises(ConfigError, match="Expected options to be a dict or None, got list"):
        env.reset(options=["workload_seed"])
    venv = gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", n_jobs=50)
    venv.reset(seed=np.array([1, 2]))
    for bad in (True, -1, "12", 1.5):
        with pytest.raises(ConfigError, match="seed"):
            venv.reset(seed=bad)


def test_vector_env_refuses_a_bool_max_episode_steps():
    with pytest.raises(ConfigError, match="max_episode_steps to be an integer >= 1 or None, got True"):
        PreemptionVectorEnv(2, max_episode_steps=True, n_jobs=50)


# ---------------------------------------------------------------------------------------------- SyntheticConfig


def test_gpus_per_node_too_small_for_max_nodes_is_refused_without_a_numpy_warning():
    # It used to pass the checks; generate() then cast ceil(16 / 1e-300) to int64 (a RuntimeWarning) and the
    # job table refused the gang size -2**63.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for factory in (
            lambda: SyntheticConfig(gpus_per_node=1e-300),
            lambda: preset("paper", gpus_per_node=1e-300),
            lambda: SweepConfig(
                base=CompareConfig(policies=("fifo",), seeds=1, n_jobs=5), grid=(("gpus_per_node", (1e-300,)),)
            ),
        ):
            with pytest.raises(ConfigError, match=r"Expected gpus_per_node >= 0\.00016 .*MAX_NODES.*got 1e-300"):
                factory()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"n_jobs": True}, "n_jobs > 0 (an integer), got True"),
        ({"n_jobs": 10**8}, "n_jobs <= 2,000,000 (schedgym.limits.MAX_JOBS)"),
        ({"gpus_per_node": True}, "gpus_per_node to be a finite number, got True"),
        ({"gpus_per_node": "8"}, "gpus_per_node to be a finite number, got '8'"),
        ({"te_fraction": "0.3"}, "0 <= te_fraction <= 1, got '0.3'"),
        ({"grace_sigma": float("inf")}, "grace_sigma to be a finite number, got inf"),
        ({"te_duration_max": float("inf")}, "te_duration_max to be a finite number, got inf"),
        ({"be_duration_min": 1e11, "be_duration_max": 2e11}, "be_duration_max at most 1e+10 s"),
        ({"te_duration_min": 0.3, "te_duration_max": 0.4}, "te_duration_min to round to at least 1 s"),
        ({"grace_max": 2**60}, "grace_max at most 1e+10 s"),
        ({"te_grace": 1e11}, "te_grace at most 1e+10 s"),
        ({"be_gpus": ((2e6, 1.0),)}, "GPUs of te_gpus and be_gpus at most 1e+06"),
        ({"cpus_per_gpu": ((1e5, 1.0),)}, "cpus_per_gpu at most 62500"),
        ({"te_gpus": ((True, 1.0),)}, "te_gpus to be (value, probability) pairs of numbers"),
        ({"te_gpus": "ab"}, "te_gpus to be (value, probability) pairs of numbers"),
        ({"mem_per_gpu": ((float("inf"), 1.0),)}, "finite values in mem_per_gpu"),
        ({"grace_median": 1e-300, "grace_median_by_gpus": ((1, 7.0),)}, "grace periods of at most 1e+10 s"),
    ],
)
def test_synthetic_config_refuses_wrong_types_and_values_beyond_the_limits(kwargs, expected):
    with pytest.raises(ConfigError) as exc:
        SyntheticConfig(**kwargs)
    assert expected in str(exc.value)


def test_preset_refuses_unknown_fields_and_names_of_the_wrong_type():
    with pytest.raises(ConfigError, match=r"Unknown SyntheticConfig fields \['gpus'\]"):
        preset("paper", gpus=8)
    with pytest.raises(UnknownNameError, match="Unknown workload"):
        preset(["paper"])  # type: ignore[arg-type]


def test_sweep_refuses_a_restart_overhead_beyond_max_time_when_its_config_is_made():
    with pytest.raises(ConfigError, match=r"restart_overhead=1e\+11: .*MAX_TIME"):
        SweepConfig(
            base=CompareConfig(policies=("fifo",), seeds=1, n_jobs=5), grid=(("restart_overhead", (0.0, 1e11)),)
        )


def test_sweep_refuses_a_restart_overhead_beyond_max_time_in_one_line(tmp_path):
    out = tmp_path / "sweep.json"
    args = ("--policies", "fifo", "--seeds", "1", "--jobs", "5", "--no-progress", "--json", str(out))
    proc = run_cli("sweep", "--set", "restart_overhead=0,1e11", *args)
    line = one_line_error(proc)
    assert "restart_overhead=1e+11" in line and "at most 1e+10 s (schedgym.limits.MAX_TIME)" in line
    assert proc.stdout == "" and not out.exists()  # refused before any run


def test_sweep_refuses_a_tiny_gpus_per_node_in_one_line_without_a_warning():
    proc = run_cli("sweep", "--set", "gpus_per_node=1e-300", "--policies", "fifo", "--seeds", "1", "--jobs", "5")
    line = one_line_error(proc)  # exactly one line: numpy's RuntimeWarning came first
    assert "Expected gpus_per_node >=" in line and "got 1e-300" in line
    assert "Warning" not in proc.stderr and proc.stdout == ""


# ---------------------------------------------------------------------------------------------- actions


@pytest.fixture(scope="module")
def busy_env() -> PreemptionEnv:
    """A single environment at a decision with a choice; every test leaves it there (illegal actions do)."""
    env = PreemptionEnv(**BUSY)
    env.reset(seed=BUSY_SEED)
    assert len(env.candidate_rows) > 0
    return env


@pytest.mark.parametrize("action", NOT_ACTIONS, ids=repr)
def test_step_refuses_actions_that_are_no_integers(busy_env, action):
    steps = busy_env.n_steps
    with pytest.raises(IllegalDecisionError, match="Expected an integer action, got"):
        busy_env.step(action)
    assert busy_env.n_steps == steps
    if busy_env.decision is not None:  # the decision's own check is the same one
        with pytest.raises(IllegalDecisionError, match="Expected an integer action"):
            busy_env.decision.check(action)


@HYPOTHESIS
@given(
    action=st.one_of(
        st.floats().filter(lambda x: not (math.isfinite(x) and x.is_integer() and abs(x) <= 2**53)),
        st.booleans(),
        st.text(max_size=3),
        st.binary(max_size=3),
        st.none(),
        st.lists(st.integers(0, 3), min_size=1, max_size=3),
        st.complex_numbers(),
    )
)
def test_step_refuses_any_non_integer(busy_env, action):
    steps = busy_env.n_steps
    with pytest.raises(IllegalDecisionError):
        busy_env.step(action)
    assert busy_env.n_steps == steps


def test_integer_actions_of_every_kind_are_taken_alike():
    # Python ints, numpy integers, 0-d integer arrays and integral floats (as a float array of actions holds
    # them) are the same action.
    results = []
    for action in (1, np.int64(1), np.int32(1), np.uint8(1), np.array(1), 1.0, np.float32(1.0), np.array(1.0)):
        env = PreemptionEnv(**BUSY)
        env.reset(seed=BUSY_SEED)
        obs, reward, *_ = env.step(action)
        results.append((obs.tobytes(), reward))
    assert all(r == results[0] for r in results)


def test_an_episode_without_decisions_refuses_non_integers_too():
    env = PreemptionEnv(n_jobs=1)
    env.reset(seed=0)
    assert env.decision is None
    for action in (True, float("inf"), float("nan"), "0", None):
        with pytest.raises(IllegalDecisionError, match="Expected an integer action"):
            env.step(action)
    with pytest.raises(IllegalDecisionError, match="no decision is pending"):
        env.step(1)
    assert env.step(np.int64(0))[2] is True


def test_check_action_is_the_one_check():
    assert [check_action(a, 2) for a in (0, np.int64(2), np.array(1), 2.0)] == [0, 2, 1, 2]
    for bad in (3, -1, np.int64(3)):
        with pytest.raises(IllegalDecisionError, match=r"is illegal in this decision; legal actions are \[0, 1, 2\]"):
            check_action(bad, 2)
    with pytest.raises(IllegalDecisionError, match="Expected an integer action, got True"):
        action_index(True)


def test_illegal_action_as_wait_refuses_non_integers_and_waits_on_illegal_integers():
    env = IllegalActionAsWait(PreemptionEnv(**BUSY))
    env.reset(seed=BUSY_SEED)
    for action in (float("inf"), True, 1.5):
        with pytest.raises(IllegalDecisionError, match="Expected an integer action"):
            env.step(action)
    *_, info = env.step(10**6)
    assert info["illegal_action"] and info["illegal_actions"] == 1


# ---------------------------------------------------------------------------------------------- vector actions


@pytest.fixture(scope="module")
def venv() -> PreemptionVectorEnv:
    env = gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", n_jobs=300)
    env.reset(seed=0)
    return env


@pytest.mark.parametrize(
    "actions",
    [[[0, 1], [0]], [[0], [0, 0]], [0, [0, 1]]],
    ids=["ragged", "ragged-2", "scalar-and-list"],
)
def test_ragged_actions_are_refused(venv, actions):
    steps = [e.n_steps for e in venv.envs]
    with pytest.raises(ConfigError, match=r"Expected actions of shape \(2,\), one integer per sub-environment, got"):
        venv.step(actions)
    assert [e.n_steps for e in venv.envs] == steps


@pytest.mark.parametrize("actions", [np.zeros(3, dtype=np.int64), np.zeros((2, 1), dtype=np.int64), 0, [], "00"])
def test_actions_of_the_wrong_shape_are_refused(venv, actions):
    with pytest.raises(ConfigError, match=r"Expected actions of shape \(2,\).*got shape"):
        venv.step(actions)


@pytest.mark.parametrize(
    "actions",
    [
        [True, 0],
        [0, True],
        np.array([True, False]),
        np.array([np.inf, 0.0]),
        np.array([0.0, np.nan]),
        [float("inf"), 0],
        [1.5, 0],
        np.array([0.5, 0.0]),
        ["0", 0],
        np.array([1e300, 0.0]),
        np.array([0, None], dtype=object),
        np.array([[0, 1], [0]], dtype=object),  # shape (2,), of lists
    ],
    ids=repr,
)
def test_vector_actions_that_are_no_integers_are_refused_before_any_step(venv, actions):
    steps = [e.n_steps for e in venv.envs]
    with pytest.raises(IllegalDecisionError, match=r"^Sub-environment [01]: .*Expected an integer action, got"):
        venv.step(actions)
    assert [e.n_steps for e in venv.envs] == steps


def test_vector_actions_of_every_integer_kind_are_taken_alike():
    results = []
    for actions in ([0, 0], (0, 0), np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.uint8), np.zeros(2)):
        env = gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", n_jobs=300)
        env.reset(seed=0)
        obs, rewards, *_ = env.step(actions)
        results.append((obs.tobytes(), rewards.tobytes()))
    assert all(r == results[0] for r in results)


def test_every_refusal_is_a_schedgym_error():
    for exc in (ConfigError, IllegalDecisionError):
        assert issubclass(exc, SchedGymError)


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), (" Yes ", True), ("1", True), ("FALSE", False), ("no", False), ("0", False)]
    + [(text, None) for text in ("", "tru", "\u0661", "on", "true false")],
)
def test_every_option_reads_a_bool_as_text_from_one_table(text, value):
    # --set of trace convert, a sweep's --set and a search's values each had their own table; the first did
    # not strip blanks, so "--set FIELD= true" was refused where the sweep took it.
    from agents.tune import _parse_value
    from schedgym._csvio import parse_bool
    from schedgym.cli import _rule_value
    from schedgym.experiments.sweep import parse_value

    assert parse_bool(text) is value
    readers = (
        lambda: _rule_value(text, "bool"),
        lambda: parse_value("backfill", text),
        lambda: _parse_value("bool", text),
    )
    for read in readers:
        if value is None:
            with pytest.raises((ValueError, ConfigError)):
                read()
        else:
            assert read() is value

"""``schedgym tune`` without Ray: the search-space syntax, the trials drawn from it, their ranking, the
``schedgym train`` command of a trial, and the command line's one-line errors (a missing Ray among them).
The search on Ray Tune itself is tests/test_tune.py."""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from agents.train import TrainConfig
from agents.tune import (
    METRICS,
    TuneConfig,
    collect_outcomes,
    parse_search,
    plan_trials,
    train_command,
    trial_kwargs,
    validation_figures,
)
from schedgym.cli import build_parser, main
from schedgym.errors import ConfigError


@pytest.fixture(scope="module", autouse=True)
def engine():
    """Overrides conftest's per-engine fixture: nothing here simulates."""
    yield "native"


def draws(spec: str, n: int = 400) -> list[Any]:
    search = parse_search(spec)
    rng = np.random.default_rng(0)
    return [search.draw(rng) for _ in range(n)]


# --- the distributions


def test_choice_draws_every_value_and_nothing_else():
    assert set(draws("ent_coef=choice:0,0.01,0.1")) == {0.0, 0.01, 0.1}


def test_choice_reads_values_by_the_fields_type():
    assert parse_search("net_arch=choice:64x64,128").values == ((64, 64), (128,))
    assert parse_search("normalize_reward=choice:true,no").values == (True, False)
    assert parse_search("imitate=choice:none,fitgpp").values == (None, "fitgpp")
    assert parse_search("env.reward=choice:slowdown").values == ("slowdown",)
    assert parse_search("n_steps=choice:256,512").values == (256, 512)


def test_uniform_draws_floats_between_its_bounds():
    values = draws("env.preemption_cost=uniform:0,5")
    assert all(isinstance(v, float) and 0 <= v <= 5 for v in values)
    assert max(values) - min(values) > 4  # spread over the interval, not one point


def test_loguniform_draws_as_often_below_the_geometric_mean_as_above():
    values = draws("learning_rate=loguniform:1e-4,1e-2", 1000)
    assert all(1e-4 <= v <= 1e-2 for v in values)
    below = sum(v < 1e-3 for v in values) / len(values)
    assert 0.45 < below < 0.55, below  # uniform draws would put 9% there


def test_randint_includes_both_bounds():
    assert set(draws("n_steps=randint:3,5")) == {3, 4, 5}
    assert all(isinstance(v, int) for v in draws("n_steps=randint:3,5", 20))


def test_grid_takes_every_value_once_per_sample():
    config = TuneConfig(
        search=(parse_search("net_arch=grid:32,64x64"), parse_search("learning_rate=loguniform:1e-4,1e-3")),
        num_samples=3,
    )
    trials = plan_trials(config)
    assert len(trials) == config.n_trials == 6
    assert [t.params["net_arch"] for t in trials] == [(32,), (64, 64)] * 3
    assert len({t.params["learning_rate"] for t in trials}) == 6  # drawn per trial


# --- the trials


def test_the_same_seed_draws_the_same_trials_and_another_seed_others():
    search = (parse_search("learning_rate=loguniform:1e-4,1e-3"), parse_search("ent_coef=uniform:0,0.1"))
    first = plan_trials(TuneConfig(train={"seed": 3}, search=search, num_samples=4))
    again = plan_trials(TuneConfig(train={"seed": 3}, search=search, num_samples=4))
    other = plan_trials(TuneConfig(train={"seed": 4}, search=search, num_samples=4))
    assert first == again
    assert [t.params for t in first] != [t.params for t in other]


def test_trial_i_trains_with_seed_plus_i():
    trials = plan_trials(TuneConfig(train={"seed": 10}, num_samples=3))
    assert [(t.index, t.seed) for t in trials] == [(0, 10), (1, 11), (2, 12)]


def test_env_fields_go_into_env_kwargs_over_the_shared_ones():
    kwargs = trial_kwargs(
        {"env_kwargs": {"n_jobs": 150, "preemption_cost": 1.0}, "learning_rate": 1e-3},
        {"env.preemption_cost": 2.5, "ent_coef": 0.0},
        seed=7,
        run_dir="r",
    )
    assert kwargs["env_kwargs"] == {"n_jobs": 150, "preemption_cost": 2.5}
    assert (kwargs["ent_coef"], kwargs["learning_rate"], kwargs["seed"]) == (0.0, 1e-3, 7)
    assert (kwargs["torch_threads"], kwargs["progress"], kwargs["run_dir"]) == (1, False, "r")


# --- bad specs: one line, naming the spec


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("learning_rate", "Expected FIELD=KIND:VALUES"),
        ("learning_rate=uniform", "Expected FIELD=KIND:VALUES"),
        ("learning_rate=normal:0,1", "Expected a distribution in"),
        ("learning_rate=logunifrom:1e-4,1e-3", "did you mean 'loguniform'?"),
        ("learning_rate=uniform:0.1,0.01", "Expected LOW < HIGH"),
        ("learning_rate=uniform:0.1", "two values"),
        ("learning_rate=loguniform:0,1", "LOW > 0"),
        ("learning_rate=randint:1,5", "randint applies to fields that take an integer"),
        ("n_steps=uniform:64,128", "uniform applies to fields that take a number"),
        ("algo=loguniform:1,2", "use choice"),
        ("learning_rate=choice:fast", "Expected a number, got 'fast'"),
        ("n_steps=choice:64,1e3", "Expected an integer, got '1e3'"),
        ("learning_rate=choice:inf", "Expected a number, got 'inf'"),
        ("ent_coef=choice:0,0.0", "Expected distinct values"),
        ("net_arch=choice:64,64", "joined by x"),
        ("normalize_reward=choice:maybe", "true or false"),
    ],
)
def test_a_bad_spec_is_one_line_naming_it(spec, needle):
    with pytest.raises(ConfigError) as info:
        parse_search(spec)
    message = str(info.value)
    assert message.startswith(f"--search {spec!r}: ") and needle in message and "\n" not in message, message


@pytest.mark.parametrize(
    "spec, hint",
    [
        ("learning_rat=choice:0.1", "did you mean 'learning_rate'?"),
        ("preemption_cost=uniform:0,5", "did you mean 'env.preemption_cost'?"),
        ("env.te_weigth=uniform:0,5", "did you mean 'env.te_weight'?"),
    ],
)
def test_an_unknown_field_is_refused_with_a_did_you_mean(spec, hint):
    with pytest.raises(ConfigError, match="unknown field") as info:
        parse_search(spec)
    assert hint in str(info.value)


@pytest.mark.parametrize(
    "spec, reason",
    [
        ("seed=choice:1,2", "trial i trains with --seed + i"),
        ("env.n_jobs=choice:100,200", "validation workloads"),
        ("env.sim=choice:x", "validation workloads"),
        ("eval_freq=choice:100,200", "how trials are measured"),
        ("total_timesteps=choice:100,200", "budget"),
    ],
)
def test_fields_that_would_make_trials_incomparable_cannot_be_searched(spec, reason):
    with pytest.raises(ConfigError, match="cannot be searched") as info:
        parse_search(spec)
    assert reason in str(info.value)


def test_a_value_training_refuses_is_refused_before_any_trial_even_if_not_drawn():
    search = parse_search("ent_coef=choice:0.01,-1")
    with pytest.raises(ConfigError, match=r"--search 'ent_coef=choice:0.01,-1.0': Expected a finite ent_coef >= 0"):
        TuneConfig(search=(search,), num_samples=1)


def test_a_combination_training_refuses_names_its_trial():
    search = (parse_search("policy=choice:rows"), parse_search("algo=choice:dqn"))
    with pytest.raises(ConfigError, match=r"trial 0 \(policy=rows, algo=dqn\): policy 'rows' needs"):
        plan_trials(TuneConfig(search=search))


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"search": (parse_search("gamma=choice:0.9"), parse_search("gamma=choice:0.99"))}, "gamma more than once"),
        ({"train": {"eval_freq": 0}, "scheduler": "asha"}, "with scheduler asha"),
        ({"train": {"run_dir": "x"}}, "tune sets them"),
        ({"train": {"learnig_rate": 0.1}}, "did you mean 'learning_rate'?"),
        ({"metric": "mean_return"}, "Expected metric in"),
        ({"num_samples": 0}, "num_samples > 0"),
        ({"num_samples": 6000, "search": (parse_search("gamma=grid:0.9,0.99"),)}, "at most 10,000 trials"),
    ],
)
def test_tune_config_refuses(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        TuneConfig(**kwargs)


# --- validation figures, ranking, the reproducing command


def test_figures_are_means_over_workloads_and_objective_the_mean_of_te_and_be_p95():
    per = {
        "paper": {"figures": {"te_p95": 1.0, "be_p50": 1.0, "be_p95": 3.0, "be_p99": 9.0}},
        "realistic": {"figures": {"te_p95": 2.0, "be_p50": 1.5, "be_p95": 5.0, "be_p99": 11.0}},
    }
    figures = validation_figures({"workloads": per})
    assert figures == {"objective": 2.75, "te_p95": 1.5, "be_p50": 1.25, "be_p95": 4.0, "be_p99": 10.0}


@dataclass
class FakeResult:
    """What collect_outcomes reads of a Tune result."""

    config: dict
    metrics: dict
    error: Any = None


def test_outcomes_rank_finished_trials_by_the_metric_then_stopped_then_failed(tmp_path):
    config = TuneConfig(metric="be_p95", num_samples=5)
    trials = plan_trials(config)

    def result(index: int, be_p95: float, final: bool, error: Any = None) -> FakeResult:
        metrics = {m: 1.0 for m in METRICS} | {"be_p95": be_p95, "final": final, "timesteps": 64}
        return FakeResult({"trial": {"index": index}}, metrics, error)

    results = [
        result(0, 5.0, True),
        result(1, 2.0, False),  # better, but stopped early: after every finished trial
        result(2, float("nan"), True),  # no figure: after the finished trials with one
        result(3, 3.0, True),
        FakeResult({"trial": {"index": 4}}, {}, RuntimeError("Traceback ...\n\nValueError: out of memory\n")),
    ]
    outcomes = collect_outcomes(config, trials, results, tmp_path)
    assert [(o.trial.index, o.status) for o in outcomes] == [
        (3, "finished"),
        (0, "finished"),
        (2, "finished"),
        (1, "stopped"),
        (4, "error"),
    ]
    assert outcomes[-1].error == "ValueError: out of memory"
    assert math.isnan(outcomes[-1].figures["be_p95"]) and outcomes[-1].timesteps is None


def test_the_train_command_rebuilds_the_trials_configuration():
    params = {
        "learning_rate": 0.00012345678901234567,
        "net_arch": (32, 16),
        "normalize_reward": False,
        "imitate": "fitgpp",
        "env.preemption_cost": 2.5,
    }
    shared = {"env_kwargs": {"n_jobs": 150, "sim": {"max_preemptions": 2}}, "eval_baselines": (), "n_envs": 1}
    kwargs = trial_kwargs(shared, params, seed=12, run_dir="runs")
    command = train_command(kwargs)
    argv = shlex.split(command)
    assert argv[:2] == ["schedgym", "train"]
    args = build_parser().parse_args(argv[1:])
    rebuilt = TrainConfig.of(**{name: getattr(args, name) for name in TrainConfig.option_names()} | {"progress": False})
    assert rebuilt == TrainConfig.of(**kwargs)


# --- the command line


def status(argv: list[str]) -> int:
    """``main``'s exit status, argparse's own (SystemExit) included."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def one_line_error(capsys) -> str:  # noqa: ANN001
    err = capsys.readouterr().err
    assert err.startswith("schedgym: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--search", "learning_rate=uniform:1,0"], "Expected LOW < HIGH"),
        (["--search", "learnin_rate=uniform:0,1"], "did you mean 'learning_rate'?"),
        (["--metric", "return"], "argument --metric: invalid choice"),
        (["--scheduler", "pbt"], "argument --scheduler: invalid choice"),
        (["--num-samples", "0"], "argument --num-samples"),
        (["--scheduler", "asha", "--eval-freq", "0"], "with scheduler asha"),
        (["--env-kwargs", '{"n_jobz": 5}'], "did you mean 'n_jobs'?"),
    ],
)
def test_cli_errors_are_one_line_with_status_2(capsys, tmp_path, argv, needle):
    assert status(["tune", *argv, "--run-dir", str(tmp_path / "runs")]) == 2
    assert needle in one_line_error(capsys)
    assert not (tmp_path / "runs").exists()


def test_cli_refuses_a_json_path_in_a_missing_folder_before_any_work(capsys, tmp_path):
    assert main(["tune", "--json", str(tmp_path / "no" / "t.json"), "--run-dir", str(tmp_path / "runs")]) == 2
    assert "does not exist" in one_line_error(capsys)
    assert not (tmp_path / "runs").exists()


def test_cli_without_ray_says_how_to_install_it_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray then raises ImportError, installed or not
    monkeypatch.setitem(sys.modules, "ray.tune", None)
    argv = ["tune", "--search", "learning_rate=loguniform:1e-4,1e-3", "--run-dir", str(tmp_path / "runs")]
    assert main(argv) == 2
    assert "needs Ray Tune, which is not installed (pip install 'schedgym[tune]')" in one_line_error(capsys)
    assert not (tmp_path / "runs").exists()


def test_tune_help_runs(capsys):
    with pytest.raises(SystemExit) as info:
        main(["tune", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--search FIELD=KIND:VALUES" in out and "--learning-rate" in out and "--torch-threads" not in out

"""``TrainConfig`` as one group per concern (agents/train_config.py), the command lines derived from it
(agents/commands.py), and the flat ``train_config`` a run's ``.json`` records."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agents.commands import _int_tuple, _json_object, add_options
from agents.manifest import BUNDLED_DIR
from agents.train_config import (
    CommonConfig,
    ImitationConfig,
    ModelConfig,
    RLlibConfig,
    SB3Config,
    TrainConfig,
)
from agents.tune import TUNE_SETS, TuneConfig
from schedgym._fielddocs import field_docs, option_fields
from schedgym.cli import build_parser, main
from schedgym.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
GROUPS = (CommonConfig, ModelConfig, SB3Config, ImitationConfig, RLlibConfig)

# --- each group checks its own fields


@pytest.mark.parametrize(
    "group, kwargs, message",
    [
        (CommonConfig, {"algo": "a2c"}, "Expected algo in ['dqn', 'maskable_ppo', 'ppo', 'rllib_ppo'], got 'a2c'"),
        (CommonConfig, {"n_envs": 0}, "Expected n_envs > 0, got 0"),
        (CommonConfig, {"total_timesteps": -1}, "Expected total_timesteps >= 0, got -1"),
        (CommonConfig, {"workloads": ("paper", "paper")}, "Expected distinct workloads, got ['paper', 'paper']"),
        (CommonConfig, {"eval_baselines": ("ppo",)}, "eval_baselines are rules; 'ppo' is a learned agent"),
        # was run and reported twice ("minus fifo" twice in every evaluation), where compare refuses it
        (
            CommonConfig,
            {"eval_baselines": ("fifo", "k8s", "fifo")},
            "Expected distinct eval_baselines, got ['fifo', 'k8s', 'fifo']: 'fifo' more than once",
        ),
        (CommonConfig, {"eval_freq": -5}, "Expected eval_freq >= 0, got -5"),
        (CommonConfig, {"env_kwargs": {"n_jobz": 3}}, "env_kwargs: unknown option 'n_jobz' (did you mean 'n_jobs'?)"),
        (CommonConfig, {"seed": -1}, "Expected seed from 0 to 4294967295 (numpy's and torch's range), got -1"),
        (CommonConfig, {"run_dir": " "}, "Expected run_dir to name a directory, got ' '"),
        (ModelConfig, {"gamma": 1.5}, "Expected 0 < gamma <= 1, got 1.5"),
        (ModelConfig, {"batch_size": 0}, "Expected batch_size > 0, got 0"),
        (ModelConfig, {"learning_rate": float("nan")}, "Expected a finite learning_rate > 0, got nan"),
        (ModelConfig, {"lr_schedule": "cosine"}, "Expected lr_schedule 'constant' or 'linear', got 'cosine'"),
        (ModelConfig, {"net_arch": (64, 0)}, "Expected positive layer sizes in net_arch, got (64, 0)"),
        (SB3Config, {"policy": "cnn"}, "Expected policy 'mlp' or 'rows', got 'cnn'"),
        (SB3Config, {"vec_env": "ray"}, "Expected vec_env 'auto', 'vector', 'subproc' or 'dummy', got 'ray'"),
        (ImitationConfig, {"imitate_rounds": 0}, "Expected imitate_rounds > 0, got 0"),
        (ImitationConfig, {"imitate": "nope"}, "imitate: "),
        (RLlibConfig, {"num_env_runners": 300}, "Expected num_env_runners from 0 to 256, got 300"),
        (RLlibConfig, {"address": ""}, "Expected address 'auto' or HOST:PORT of a Ray cluster, got ''"),
        (RLlibConfig, {"reward_scale": 0.0}, "Expected reward_scale to be a finite number > 0, got 0.0"),
        (TuneConfig, {"metric": "return"}, "Expected metric in"),
        (TuneConfig, {"num_samples": 0}, "Expected num_samples > 0, got 0"),
    ],
)
def test_a_bad_value_is_one_error_from_its_group(group, kwargs, message):
    with pytest.raises(ConfigError) as caught:
        group(**kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"algo": "dqn", "policy": "rows"}, "policy 'rows' needs an actor-critic algorithm"),
        ({"algo": "dqn", "imitate": "fitgpp"}, "imitate needs an actor-critic algorithm"),
        ({"total_timesteps": 0}, "Expected total_timesteps > 0 (0 is allowed only with --imitate"),
        ({"workloads": ("paper", "realistic"), "n_envs": 1}, "2 workloads need at least as many environments"),
        ({"algo": "ppo", "vec_env": "vector"}, "vec_env 'vector' needs an algorithm that reads action masks"),
        ({"num_env_runners": 2}, "num_env_runners applies to algo rllib_ppo, not maskable_ppo"),
        ({"algo": "rllib_ppo", "imitate": "fitgpp"}, "imitate needs maskable_ppo or ppo, not rllib_ppo"),
        ({"net_arch": (5000, 5000)}, "expected at most 50,000,000"),
        # Settings the run would not read were accepted, ignored, and recorded in its .json.
        ({"imitate_rounds": 2}, "imitate_rounds applies to imitation, which needs imitate (a policy to imitate)"),
        ({"imitate_decisions": 5, "imitate_epochs": 2}, "imitate_decisions and imitate_epochs apply to imitation"),
        ({"algo": "dqn", "n_steps": 64}, "n_steps applies to the PPO algorithms (maskable_ppo, ppo, rllib_ppo), not"),
        ({"algo": "dqn", "ent_coef": 0.0, "n_steps": 64}, "n_steps and ent_coef apply to the PPO algorithms"),
        # stable-baselines3's PPO silently took the whole rollout (64 samples) as one minibatch of 65.
        ({"n_steps": 32, "n_envs": 2, "batch_size": 65}, r"Expected batch_size <= n_steps \* n_envs = 64 "),
    ],
)
def test_combinations_are_checked_once_the_groups_are_valid(options, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig.of(**options)


def test_what_a_run_does_not_read_may_be_left_at_its_default():
    TrainConfig.of(algo="dqn", n_steps=512, ent_coef=0.01)  # the defaults: nothing was asked of dqn
    TrainConfig.of(imitate="fitgpp", imitate_rounds=2, total_timesteps=0, batch_size=4096)  # imitation alone


def test_an_unknown_option_says_which_was_meant():
    with pytest.raises(
        ConfigError, match=r"Unknown TrainConfig option 'learnig_rate' \(did you mean 'learning_rate'\?\)"
    ):
        TrainConfig.of(learnig_rate=1e-3)


def test_options_are_unique_across_the_groups_and_round_trip():
    names = TrainConfig.option_names()
    assert len(names) == len(set(names))
    assert [g.default_factory for g in dataclasses.fields(TrainConfig)] == list(GROUPS)
    config = TrainConfig.of(algo="ppo", learning_rate=1e-3, imitate="fitgpp", policy="rows", seed=7)
    assert TrainConfig.of(**config.options()) == config
    assert config.model.learning_rate == 1e-3 and config.sb3.vec_env == "subproc"  # auto, resolved
    assert config.replace(seed=8).options() == {**config.options(), "seed": 8}


def test_a_group_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().model.gamma = 0.5  # type: ignore[misc]


# --- the command lines, derived from the dataclasses


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_every_option_has_a_flag_and_a_docstring():
    """Fails when a field is added to a group without a docstring (its --help), or without a reading on the
    command line (an annotation agents/commands.py does not know and no metadata["cli"])."""
    flags = _flags(_subparser("train"))
    for f, doc in option_fields(TrainConfig):
        assert doc, f"{f.name} has no docstring"
        assert "--" + f.name.replace("_", "-") in flags, f.name
    assert all(field_docs(TrainConfig).values()) and set(field_docs(TrainConfig)) == {
        g.name for g in dataclasses.fields(TrainConfig)
    }


def test_tune_offers_its_own_fields_and_the_training_options_it_does_not_set():
    flags = _flags(_subparser("tune"))
    own = {f.name for f in dataclasses.fields(TuneConfig)} - {"train"}
    for name in [*own, *(set(TrainConfig.option_names()) - set(TUNE_SETS) - own)]:
        assert "--" + name.replace("_", "-") in flags, name
    for name in TUNE_SETS:
        assert "--" + name.replace("_", "-") not in flags or name in own, name
    assert all(doc for _, doc in option_fields(TuneConfig))


def test_the_defaults_on_the_command_line_are_the_dataclasses():
    args = build_parser().parse_args(["train"])
    assert TrainConfig.of(**{n: getattr(args, n) for n in TrainConfig.option_names()}) == TrainConfig()


def test_a_field_the_command_line_cannot_read_fails_when_the_parser_is_built():
    @dataclass
    class Odd:
        weights: list[float] = field(default_factory=list)
        """a list, which no reader of agents/commands.py takes"""

    with pytest.raises(TypeError, match=r"Odd.weights: no command-line reading"):
        add_options(argparse.ArgumentParser(), Odd)

    @dataclass
    class Declared:
        weights: list[float] = field(default_factory=list, metadata={"cli": {"type": float, "action": "append"}})
        """a list, read as its metadata says"""

    parser = argparse.ArgumentParser()
    assert add_options(parser, Declared) == ["weights"]
    assert parser.parse_args(["--weights", "1.5", "--weights", "2"]).weights == [1.5, 2.0]


def _documented_train_commands() -> list[str]:
    commands = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line.startswith("schedgym train ") and "--help" not in line:
                commands.append(line)
    manifest = json.loads((BUNDLED_DIR / "manifest.json").read_text())
    commands += [agent["train_command"] for agent in manifest["agents"] if agent["algo"] == "maskable_ppo"]
    return commands


@pytest.mark.parametrize("command", _documented_train_commands())
def test_every_documented_train_command_still_parses_into_a_valid_configuration(command):
    args = build_parser().parse_args(shlex.split(command)[1:])
    TrainConfig.of(**{n: getattr(args, n) for n in TrainConfig.option_names()})


# --- the run's .json: the flat train_config, as the bundled agents carry it


def _bundled_metas() -> list[tuple[str, dict]]:
    manifest = json.loads((BUNDLED_DIR / "manifest.json").read_text())
    return [
        (a["name"], json.loads((BUNDLED_DIR / a["metadata"]["file"]).read_text()))
        for a in manifest["agents"]
        if a["algo"] == "maskable_ppo"  # schedgym train's; agents.lean_ppo's are tests/test_lean_ppo.py's
    ]


@pytest.mark.parametrize("name, meta", _bundled_metas(), ids=[n for n, _ in _bundled_metas()])
def test_a_bundled_agents_flat_train_config_is_read_back(name, meta):
    recorded = meta["train_config"]
    assert set(recorded) <= set(TrainConfig.option_names())  # every recorded key is still an option
    if recorded["env_id"] != "schedgym/Preemption-v1":
        pytest.skip(f"{name} was trained on the retired {recorded['env_id']}: no longer a training target")
    config = TrainConfig.of(**recorded)
    shown = json.loads(json.dumps(config.options()))  # as write_meta writes it
    assert {k: shown[k] for k in recorded} == recorded


def test_write_meta_records_the_flat_options(tmp_path):
    from agents.train import write_meta

    config = TrainConfig.of(imitate="fitgpp", learning_rate=1e-3)
    write_meta(tmp_path / "m.json", config, {})
    meta = json.loads((tmp_path / "m.json").read_text())
    newest = dict(_bundled_metas())["dagger-philly"]["train_config"]
    newer = {"max_env_runner_restarts"}  # options added since that agent was trained (issue 25)
    assert set(meta["train_config"]) == set(newest) | newer  # the newest bundled agent's keys, and the newer
    assert TrainConfig.of(**meta["train_config"]) == config
    assert (meta["algo"], meta["env_id"], meta["validation_workloads"]) == ("maskable_ppo", config.common.env_id, 5)


# --- no long functions


EXEMPT: set[str] = set()
"""Functions allowed over 80 lines (generated tables would go here); none is left."""


def test_no_function_is_over_80_lines():
    long = []
    for folder in ("schedgym", "agents", "baselines"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    where = f"{path.relative_to(ROOT).as_posix()}:{node.name}"
                    if node.end_lineno - node.lineno + 1 > 80 and where not in EXEMPT:  # type: ignore[operator]
                        long.append(where)
    assert long == []


def test_the_search_help_names_every_distribution():
    from agents.tune import DISTRIBUTIONS

    doc = field_docs(TuneConfig)["search"]
    assert all(kind in doc for kind in DISTRIBUTIONS)


# --- command-line values and run folders

LAYERS_MESSAGE = "expected 1 to 64 comma-separated layer sizes from 1 to 1,000,000"


@pytest.mark.parametrize("text", ["64,,64", "64,", ",64", "64, ,64"])
def test_a_blank_layer_size_is_refused_not_skipped(text):
    # '64,,64' read as (64, 64): the network the user may have meant, with three layers, silently became two.
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{LAYERS_MESSAGE}, got {text!r}$"):
        _int_tuple(text)
    assert _int_tuple(" 64 , 32 ") == (64, 32)  # blanks around a size are still allowed


@pytest.mark.parametrize("command", ["train", "tune"])
@pytest.mark.parametrize("text", ["64,,64", "64,"])
def test_a_blank_layer_size_on_the_command_line_is_one_error_line(tmp_path, capsys, monkeypatch, command, text):
    # --algo none is refused too, once the options are read: the old code, which read '64,,64', stops there
    # (with another message) instead of training or searching.
    monkeypatch.chdir(tmp_path)
    try:
        status = main([command, "--net-arch", text, "--algo", "none", "--run-dir", str(tmp_path / "runs")])
    except SystemExit as exc:  # argparse's errors
        status = exc.code
    assert status == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines == [f"schedgym: error: {command}: argument --net-arch: {LAYERS_MESSAGE}, got {text!r}"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text, key",
    [
        ('{"n_jobs": 30, "n_jobs": 40}', "n_jobs"),  # was read as 40, and recorded so in model.json
        ('{"sim": {"max_preemptions": 1, "max_preemptions": 2}}', "max_preemptions"),  # at any depth
    ],
)
def test_a_json_key_given_twice_is_refused_not_read_as_the_last(text, key):
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        _json_object(text)
    assert str(caught.value) == f"expected a JSON object, got {text!r} (key {key!r} given twice)"
    assert _json_object('{"n_jobs": 30, "sim": {"n_jobs": 40}}') == {"n_jobs": 30, "sim": {"n_jobs": 40}}


@pytest.mark.parametrize("command", ["train", "tune"])
@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--env-kwargs", '{"n_jobs":30, "n_jobs":40}'],
            'argument --env-kwargs: expected a JSON object, got \'{"n_jobs":30, "n_jobs":40}\' '
            "(key 'n_jobs' given twice)",
        ),
        (
            ["--eval-baselines", "fifo,fifo"],
            "Expected distinct eval_baselines, got ['fifo', 'fifo']: 'fifo' more than once",
        ),
    ],
)
def test_a_name_or_key_given_twice_on_the_command_line_is_one_error_line(
    tmp_path, capsys, monkeypatch, command, options, message
):
    # An unknown --env-id is refused once the names are checked: the old code, which read both, stops there
    # (with another message) instead of training or searching.
    monkeypatch.chdir(tmp_path)
    try:
        status = main([command, *options, "--env-id", "schedgym/Nope-v0", "--run-dir", str(tmp_path / "runs")])
    except SystemExit as exc:  # argparse's errors
        status = exc.code
    assert status == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    prefix = f"{command}: " if options[0] == "--env-kwargs" else ""
    assert lines == [f"schedgym: error: {prefix}{message}"]
    assert list(tmp_path.iterdir()) == []


def test_a_file_where_the_tune_folder_goes_is_an_error(tmp_path, monkeypatch):
    # schedgym tune went on to the name with -2 appended; schedgym train refused: they now share one helper.
    from agents.tune import TuneConfig, _new_run_dir

    monkeypatch.setattr(time, "strftime", lambda fmt: "20260101-000000")
    config = TuneConfig(run_dir=str(tmp_path))
    base = config.base()
    name = f"tune__{base.common.env_id.replace('/', '_')}__{base.common.seed}__20260101-000000"
    (tmp_path / name).write_text("")
    with pytest.raises(ConfigError, match="it exists and is not a directory$"):
        _new_run_dir(config, base)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]

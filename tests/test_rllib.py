"""RLlib training (``schedgym.rllib``, ``schedgym train --algo rllib_ppo``; the ``rllib`` extra): the env creator,
the masked module, one training iteration, the CLI end to end and compare of what it saves, and training when an
env runner's process is killed. Skipped where Ray RLlib is not installed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")
pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

import gymnasium as gym  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
from helpers import TINY_RLLIB, run_python_without_ray_settings  # noqa: E402
from ray.rllib.core import DEFAULT_MODULE_ID  # noqa: E402
from ray.rllib.core.columns import Columns  # noqa: E402
from ray.rllib.core.rl_module.rl_module import RLModule  # noqa: E402

from agents import rllib_train  # noqa: E402
from agents.inference import load_rllib_network, rllib_network  # noqa: E402
from agents.learned import load_agent  # noqa: E402
from agents.rllib_config import CLUSTER_ENV_RUNNER_RESTARTS, PPO_FIXED, ppo_settings  # noqa: E402
from agents.rllib_export import actor_arrays  # noqa: E402
from agents.rllib_train import algorithm, algorithm_config  # noqa: E402
from agents.train import TrainConfig, train  # noqa: E402
from schedgym.cli import main  # noqa: E402
from schedgym.errors import ConfigError, SchedGymError  # noqa: E402
from schedgym.rllib import DEFAULT_REWARD_SCALE, MASKED_LOGIT, make_env, register_envs  # noqa: E402
from schedgym.rllib.module import MaskedPPOTorchRLModule  # noqa: E402

ENV_KWARGS = TINY_RLLIB["env_kwargs"]
TINY_ARGS = [
    "--algo", "rllib_ppo", "--total-timesteps", "64", "--n-envs", "1", "--n-steps", "64", "--batch-size", "32",
    "--eval-freq", "64", "--n-eval-workloads", "1", "--env-kwargs", json.dumps(ENV_KWARGS), "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def rllib_envs(local_ray):
    """schedgym's environments registered with RLlib, in conftest's local Ray (which training finds
    initialised, uses and leaves running; it checks the home folder is left empty)."""
    register_envs()


def legal_rollout(env: gym.Env, seed: int, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """The observations of one episode of ``env`` (a Dict-mask env) with random legal actions."""
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    done = False
    while not done:
        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, _, terminated, truncated, _ = env.step(action)
        seen.append(obs)
        done = terminated or truncated
    return seen


@pytest.fixture(scope="module")
def module() -> MaskedPPOTorchRLModule:
    """The module training builds (PPO's default model config merged), with weights scaled up so that its
    logits differ by more than float rounding."""
    env = make_env(ENV_KWARGS)
    built = algorithm_config(TrainConfig.of(**TINY_RLLIB)).get_rl_module_spec(env=env).build()
    with torch.no_grad():
        for p in built.parameters():
            p.mul_(3.0)
    return built


@pytest.fixture(scope="module")
def observations() -> dict[str, np.ndarray]:
    """Observations and masks of a few episodes, batched."""
    env = make_env(ENV_KWARGS)
    rng = np.random.default_rng(0)
    seen = [o for seed in range(4) for o in legal_rollout(env, seed, rng)]
    return {key: np.stack([o[key] for o in seen]) for key in ("observations", "action_mask")}


def torch_batch(obs: dict[str, np.ndarray]) -> dict:
    return {Columns.OBS: {k: torch.as_tensor(v) for k, v in obs.items()}}


# ------------------------------------------------------------------ the environment creator
def test_env_creator_observation_is_in_its_space_with_the_envs_mask():
    env = make_env(ENV_KWARGS)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(1)
    for _ in range(20):
        assert env.observation_space.contains(obs)
        assert np.array_equal(obs["action_mask"], env.unwrapped.action_masks().astype(np.int8))
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            obs, _ = env.reset()


def test_env_creator_scales_rewards():
    raw, scaled = make_env({**ENV_KWARGS, "reward_scale": 1.0}), make_env(ENV_KWARGS)
    raw.reset(seed=3)
    scaled.reset(seed=3)
    rewards = []
    for _ in range(10):
        _, r_raw, *_ = raw.step(0)
        _, r_scaled, *_ = scaled.step(0)
        rewards.append((r_raw, r_scaled))
    assert any(r != 0 for r, _ in rewards)
    assert all(s == r * DEFAULT_REWARD_SCALE for r, s in rewards)


@pytest.mark.parametrize("scale", [0, -1e-3, float("nan"), "1"])
def test_env_creator_refuses_a_bad_reward_scale(scale):
    with pytest.raises(ConfigError, match="Expected reward_scale to be a finite number > 0"):
        make_env({"reward_scale": scale})


# ------------------------------------------------------------------ the module
def test_module_sets_illegal_logits_to_the_mask_value_in_every_forward_pass(module, observations):
    batch = torch_batch(observations)
    everything = torch_batch({**observations, "action_mask": np.ones_like(observations["action_mask"])})
    illegal = observations["action_mask"] == 0
    assert illegal.any() and (~illegal).any()
    with torch.no_grad():
        unmasked = module.forward_inference(everything)[Columns.ACTION_DIST_INPUTS].numpy()
        for forward in (module.forward_inference, module.forward_exploration, module.forward_train):
            logits = forward(batch)[Columns.ACTION_DIST_INPUTS].numpy()
            assert np.all(logits[illegal] == MASKED_LOGIT), forward.__name__
            assert np.array_equal(logits[~illegal], unmasked[~illegal]), forward.__name__


def test_module_value_reads_the_observations_only(module, observations):
    flipped = {**observations, "action_mask": 1 - observations["action_mask"]}
    with torch.no_grad():
        values = module.compute_values(torch_batch(observations))
        assert torch.equal(values, module.compute_values(torch_batch(flipped)))


def test_module_refuses_an_observation_space_without_a_mask():
    env = make_env(ENV_KWARGS)
    with pytest.raises(ValueError, match="Expected a Dict observation space"):
        MaskedPPOTorchRLModule(
            observation_space=env.observation_space["observations"],
            action_space=env.action_space,
            model_config={"fcnet_hiddens": [8]},
        )


def test_exported_actor_picks_the_modules_deterministic_action(module, observations):
    network = rllib_network(actor_arrays(module))
    with torch.no_grad():
        logits = module.forward_inference(torch_batch(observations))[Columns.ACTION_DIST_INPUTS]
    expected = module.get_inference_action_dist_cls().from_logits(logits).to_deterministic().sample().numpy()
    actions = network.act_batch(observations["observations"], observations["action_mask"])
    assert len(set(actions.tolist())) > 1  # not a constant answer
    assert np.array_equal(actions, expected)


def test_a_damaged_export_is_refused_in_one_message(module, tmp_path):
    arrays = actor_arrays(module)
    arrays["weight1"] = arrays["weight1"][:, :-1]  # no longer chains from layer 0
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(SchedGymError, match="not a supported exported actor .its layer shapes do not chain"):
        load_rllib_network(path)


# ------------------------------------------------------------------ RLlib: one training iteration
@pytest.fixture(scope="module")
def trained_algo(tmp_path_factory):
    """An RLlib PPO with one remote env runner after one training iteration (64 steps, 2 minibatches); 2
    torch threads, where Ray would give its actor 1."""
    config = TrainConfig.of(**{**TINY_RLLIB, "num_env_runners": 1, "torch_threads": 2})
    with algorithm(config, tmp_path_factory.mktemp("logdir")) as algo:
        result = algo.train()
        yield algo, result


def test_one_training_iteration_samples_and_trains(trained_algo):
    _, result = trained_algo
    assert result["num_env_steps_sampled_lifetime"] >= 64
    learner = result["learners"][DEFAULT_MODULE_ID]
    # Scaled rewards keep the critic's squared error under PPO's clip, where it still gets a gradient.
    assert 0 < learner["vf_loss_unclipped"] < PPO_FIXED["vf_clip_param"]
    assert learner["num_module_steps_trained"] > 0


def test_env_runners_step_the_env_with_masks_and_take_no_illegal_action(trained_algo):
    algo, _ = trained_algo
    # The remote runner's exploration (the sampling of training); an illegal action would also have made the
    # environment raise IllegalDecisionError there.
    episodes = algo.env_runner_group.foreach_env_runner(
        lambda runner: runner.sample(num_timesteps=200, explore=True), local_env_runner=False
    )[0]
    checked = 0
    for episode in episodes:
        masks = episode.get_observations()["action_mask"]
        for t, action in enumerate(episode.get_actions()):
            assert masks[t][action] == 1, (t, action, masks[t])
            checked += 1
    assert checked >= 200


def test_env_runners_use_the_configured_torch_threads(trained_algo):
    algo, _ = trained_algo
    assert algo.env_runner_group.foreach_env_runner(lambda _: torch.get_num_threads(), local_env_runner=False) == [2]


# ------------------------------------------------------------------ the command line, and compare
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """``schedgym train --algo rllib_ppo`` with tiny settings; the run folder it made."""
    runs = tmp_path_factory.mktemp("runs")
    assert main(["train", *TINY_ARGS, "--run-dir", str(runs)]) == 0
    (made,) = runs.iterdir()
    return made


def test_cli_train_writes_the_checkpoint_the_actor_and_their_description(run_dir):
    names = {p.name for p in run_dir.iterdir()}
    assert names == {"checkpoint", "model.npz", "model.json", "best_model.npz", "best_model.json"}
    assert (run_dir / "checkpoint" / "rllib_checkpoint.json").is_file()
    meta = json.loads((run_dir / "model.json").read_text())
    assert meta["algo"] == "rllib_ppo" and meta["env_kwargs"] == ENV_KWARGS
    assert meta["timesteps_sampled"] >= 64 and len(meta["evaluations"]) == 1
    assert meta["rllib"]["settings"]["training"]["train_batch_size_per_learner"] == 64


def test_saved_actor_is_the_checkpoints_module(run_dir, observations):
    saved = RLModule.from_checkpoint(run_dir / "checkpoint/learner_group/learner/rl_module" / DEFAULT_MODULE_ID)
    with torch.no_grad():
        logits = saved.forward_inference(torch_batch(observations))[Columns.ACTION_DIST_INPUTS].numpy()
    network = load_rllib_network(run_dir / "model.npz")
    assert np.allclose(network.logits_batch(observations["observations"])[observations["action_mask"] == 1],
                       logits[observations["action_mask"] == 1], atol=1e-5)  # fmt: skip
    assert np.array_equal(
        network.act_batch(observations["observations"], observations["action_mask"]), logits.argmax(axis=1)
    )


def test_compare_evaluates_the_saved_agent(run_dir, tmp_path):
    out = tmp_path / "out.json"
    argv = ["compare", "--policies", f"fitgpp,mine:{run_dir / 'model.npz'}", "--seeds", "2", "--jobs", "100",
            "--cluster", "small", "--no-progress", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    policies = json.loads(out.read_text())["policies"]
    assert set(policies) == {"fitgpp", "mine"}
    assert len(policies["mine"]["per_seed"]) == 2
    assert policies["mine"]["requests"] > 0  # the agent was asked to decide


def test_a_saved_agent_loads_by_its_name_without_suffix(run_dir):
    agent = load_agent(run_dir / "best_model", name="best")
    assert agent.name == "best" and agent.maskable and agent.max_candidates == 16


# RLlib registers its env runner's environment with gymnasium again at each build in one process.
@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0")
@pytest.mark.parametrize("runners", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_training_is_deterministic_for_a_seed(tmp_path, runners):
    config = {**TINY_RLLIB, "num_env_runners": runners}
    # The second run allows env runner restarts: allowed and not needed, they change nothing.
    changes = {"a": {}, "b": {"max_env_runner_restarts": 3}}
    runs = [train(TrainConfig.of(**{**config, **changes[n], "run_dir": str(tmp_path / n)})) for n in ("a", "b")]
    first, second = (np.load(run / "model.npz") for run in runs)
    assert first.files == second.files
    assert all(np.array_equal(first[k], second[k]) for k in first.files)


@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0")
def test_train_reports_every_evaluation_to_its_hook(tmp_path):
    reported: list[dict] = []
    run = train(TrainConfig.of(**{**TINY_RLLIB, "run_dir": str(tmp_path)}), on_evaluation=reported.append)
    assert [r.get("final", False) for r in reported] == [False, True]
    assert all(r["timesteps"] >= 64 and "te_p95" in r["figures"] for r in reported)
    assert reported[-1]["score"] == json.loads((run / "model.json").read_text())["final_evaluation"]["score"]


@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0")
def test_training_on_mix_validates_on_the_levels_compare_plays(tmp_path):
    """The env runners draw mix levels at reset; validation plays levels 100,000 + i on their clusters."""
    from schedgym.experiments.compare import CompareConfig, run_comparison
    from schedgym.experiments.figures import headline_figures

    mix = {**TINY_RLLIB, "run_dir": str(tmp_path), "env_kwargs": {"workload": "mix"}, "n_eval_workloads": 2}
    fitgpp = json.loads((train(TrainConfig.of(**mix)) / "model.json").read_text())["baselines"]["mix"]["fitgpp"]
    compared = run_comparison(CompareConfig(workload="mix", split="validation", seeds=2, policies=("fitgpp",)))
    runs = compared.runs["fitgpp"]
    assert runs[0].capacity_total.tolist() != runs[1].capacity_total.tolist()  # two levels, two clusters
    for key in ("te_p95", "be_p50", "be_p95", "be_p99"):
        assert fitgpp[key] == pytest.approx(np.mean([headline_figures(r)[key] for r in runs]), rel=1e-12)


# ------------------------------------------------------------------ errors
def test_negative_num_env_runners_is_one_line_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:  # argparse's type check: it exits from parse_args
        main(["train", *TINY_ARGS, "--num-env-runners", "-1", "--run-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("schedgym: error: train: argument --num-env-runners") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_rllib_ppo_without_ray_is_one_line_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.rllib", None)  # `import ray.rllib` now raises ImportError
    assert main(["train", *TINY_ARGS, "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == "schedgym: error: --algo rllib_ppo needs Ray RLlib, which is not installed: " \
        "pip install 'schedgym[rllib]'\n"  # fmt: skip
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algo": "maskable_ppo", "num_env_runners": 1}, "num_env_runners applies to algo rllib_ppo"),
        ({"algo": "ppo", "address": "auto", "reward_scale": 1.0}, "address and reward_scale apply to algo"),
        ({"num_env_runners": 257}, "Expected num_env_runners from 0 to 256"),
        ({"policy": "rows"}, "policy 'rows' needs maskable_ppo or ppo"),
        ({"imitate": "fitgpp"}, "imitate needs maskable_ppo or ppo"),
        ({"batch_size": 65}, r"Expected batch_size <= n_steps \* n_envs \* max\(1, num_env_runners\) = 64"),
        ({"max_env_runner_restarts": -1}, "Expected max_env_runner_restarts from 0 to 1000, got -1"),
        ({"max_env_runner_restarts": 1001}, "Expected max_env_runner_restarts from 0 to 1000, got 1001"),
        ({"max_env_runner_restarts": True}, "Expected max_env_runner_restarts from 0 to 1000, got True"),
        ({"algo": "ppo", "max_env_runner_restarts": 0}, "max_env_runner_restarts applies to algo rllib_ppo"),
    ],
)
def test_train_config_refuses_what_rllib_ppo_does_not_do(changes, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.of(**{**TINY_RLLIB, **changes})


def test_a_bad_max_env_runner_restarts_is_one_line_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *TINY_ARGS, "--max-env-runner-restarts", "1001", "--run-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("schedgym: error: train: argument --max-env-runner-restarts") and err.count("\n") == 1
    assert "expected an integer from 0 to 1,000" in err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ faults: a lost env runner
@pytest.mark.parametrize(
    ("options", "restarts"),
    [
        ({}, 0),  # the local Ray of one run: a lost env runner ends it, and every run is its seed's
        ({"address": "auto"}, CLUSTER_ENV_RUNNER_RESTARTS),  # a cluster, whose nodes may leave
        ({"address": "auto", "max_env_runner_restarts": 0}, 0),
        ({"max_env_runner_restarts": 5}, 5),
    ],
)
def test_env_runner_restarts_default_to_none_locally_and_some_on_a_cluster(options, restarts):
    config = TrainConfig.of(**{**TINY_RLLIB, "num_env_runners": 1, **options})
    assert ppo_settings(config)["fault_tolerance"] == {
        "restart_failed_env_runners": restarts > 0,
        "max_num_env_runner_restarts": restarts,
        "delay_between_env_runner_restarts_s": 1.0,
    }
    built = algorithm_config(config)
    assert (built.restart_failed_env_runners, built.max_num_env_runner_restarts) == (restarts > 0, restarts)
    assert not built.ignore_env_runner_failures  # a failure is restarted or fails the run, never just dropped


@contextlib.contextmanager
def env_runner_killer(monkeypatch: pytest.MonkeyPatch, kills: int) -> Any:
    """An ``on_evaluation`` hook for :func:`train` that SIGKILLs the (one) env runner's process at each of the
    first ``kills`` evaluations during training, and the list of the env runner's process ids it saw at each."""
    held = {}
    real = rllib_train.algorithm

    @contextlib.contextmanager
    def keep(*args: Any, **kwargs: Any) -> Any:  # the Algorithm train() builds, for the hook to reach
        with real(*args, **kwargs) as algo:
            held["algo"] = algo
            yield algo

    monkeypatch.setattr(rllib_train, "algorithm", keep)
    seen: list[list[int]] = []

    def hook(stats: dict) -> None:
        if stats.get("final"):
            return
        group = held["algo"].env_runner_group
        seen.append(group.foreach_env_runner(lambda _: os.getpid(), local_env_runner=False))
        if len(seen) <= kills:
            os.kill(seen[-1][0], signal.SIGKILL)

    yield hook, seen


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0")
def test_training_goes_on_when_an_env_runner_process_is_killed(tmp_path, monkeypatch):
    """The env runner's process killed after the first evaluation: Ray restarts it, RLlib gives it the
    learner's weights, training reaches its total with the new process sampling, and the run says so."""
    config = {**TINY_RLLIB, "num_env_runners": 1, "total_timesteps": 256, "max_env_runner_restarts": 1}
    with env_runner_killer(monkeypatch, kills=1) as (hook, seen):
        run = train(TrainConfig.of(**{**config, "run_dir": str(tmp_path)}), on_evaluation=hook)
    meta = json.loads((run / "model.json").read_text())
    assert meta["timesteps_sampled"] >= 256 and meta["env_runner_restarts"] == 1
    assert meta["rllib"]["settings"]["fault_tolerance"]["max_num_env_runner_restarts"] == 1
    assert len(seen) == 4 and seen[0] != seen[-1]  # evaluations at 64, 128, 192, 256; sampled by another process
    assert [i["env_runner_restarts"] for i in meta["iterations"]][-1] == 1
    assert (run / "model.npz").is_file() and (run / "checkpoint" / "rllib_checkpoint.json").is_file()


@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0")
@pytest.mark.parametrize(
    ("restarts", "kills", "message"),
    [
        (0, 1, r"^an env runner was lost \(The actor died unexpectedly before finishing this task\.\) and no restart "),
        pytest.param(
            1,
            2,
            r"^every env runner was lost and none can be restarted again \(1 restarts made; ",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_an_env_runner_lost_beyond_its_restarts_ends_the_run_in_one_line(tmp_path, monkeypatch, restarts, kills,
                                                                          message):  # fmt: skip
    config = {**TINY_RLLIB, "num_env_runners": 1, "total_timesteps": 256, "max_env_runner_restarts": restarts}
    with env_runner_killer(monkeypatch, kills=kills) as (hook, _), pytest.raises(SchedGymError, match=message):
        train(TrainConfig.of(**{**config, "run_dir": str(tmp_path)}), on_evaluation=hook)


@pytest.mark.slow
def test_cli_starts_and_stops_its_own_ray_leaving_the_home_folder_empty(tmp_path):
    done = train_in_subprocess(tmp_path, "--num-env-runners", "1")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no Ray or RLlib warnings
    assert "validation (score" in done.stdout
    assert list((tmp_path / "home").iterdir()) == []


def train_in_subprocess(tmp_path: Path, *args: str, **ray_env: str) -> subprocess.CompletedProcess:
    """``schedgym train ARGS`` in a fresh interpreter whose home folder is ``tmp_path/home``, with no RAY_
    variables but ``ray_env`` (and usage statistics off)."""
    home = tmp_path / "home"
    home.mkdir()
    return run_python_without_ray_settings(
        ["-m", "schedgym.cli", "train", *TINY_ARGS, *args, "--run-dir", str(tmp_path / "runs")],
        home=home,
        cwd=tmp_path,
        timeout=600,
        **ray_env,
    )


@pytest.mark.slow
def test_cli_trains_on_a_running_cluster_given_its_address_and_token(tmp_path):
    address = ray.get_runtime_context().gcs_address  # this module's Ray, as another process reaches it
    # A client of a cluster with token authentication needs both: without RAY_AUTH_MODE it sends no token.
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.environ["RAY_AUTH_TOKEN"]}
    done = train_in_subprocess(tmp_path, "--num-env-runners", "1", "--address", address, **token)
    assert done.returncode == 0, done.stderr
    # By address an env runner may be restarted, and Ray's core says (in C++, past Python's logging) that a
    # restart needs the runner's constructor arguments, which the training process holds for the run.
    caution = "has constructor arguments in the object store and max_restarts > 0"
    assert all(caution in line for line in done.stderr.splitlines()), done.stderr
    assert ray.is_initialized()  # the cluster keeps running
    assert list((tmp_path / "home").iterdir()) == []


@pytest.mark.slow
def test_cli_without_the_clusters_token_is_one_line_exit_2(tmp_path):
    address = ray.get_runtime_context().gcs_address
    done = train_in_subprocess(tmp_path, "--address", address, RAY_AUTH_MODE="token")
    assert done.returncode == 2
    assert done.stderr.startswith("schedgym: error: --address") and "RAY_AUTH_TOKEN" in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "runs").exists()

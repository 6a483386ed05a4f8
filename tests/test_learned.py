"""Learned agents: training smoke test, saving and loading, the comparison on identical workloads, and the
statistics the comparison reports."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import TINY, play_episode, run_cli

pytest.importorskip("sb3_contrib")

from agents.learned import BUNDLED, LearnedPolicy, SB3Network, algo_class, load_agent  # noqa: E402
from agents.train import TrainConfig, field_docs, train  # noqa: E402
from schedgym.errors import ConfigError, SchedGymError  # noqa: E402
from schedgym.experiments.compare import CompareConfig, run_comparison  # noqa: E402
from schedgym.experiments.runner import run_policy  # noqa: E402
from schedgym.experiments.stats import ci95  # noqa: E402
from schedgym.registry import make_policy  # noqa: E402
from schedgym.sim import Policy, cluster_preset  # noqa: E402
from schedgym.workloads import generate, preset  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One tiny MaskablePPO run shared by the tests of this module."""
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path_factory.mktemp("runs")), **TINY))
    return run_dir


def test_training_writes_final_and_best_models_with_their_description(trained):
    for stem in ("model", "best_model"):
        assert (trained / f"{stem}.zip").is_file()
        meta = json.loads((trained / f"{stem}.json").read_text())
        assert meta["algo"] == "maskable_ppo"
        assert meta["env_id"] == "schedgym/Preemption-v1"
        assert meta["env_kwargs"] == {"n_jobs": 150}
        assert meta["validation_workloads"] == 1
    summary = json.loads((trained / "model.json").read_text())
    assert summary["steps_per_second"] > 0
    assert summary["evaluations"], "eval_freq=64 over 128 steps must evaluate at least once"
    # Run names follow {env_id with / as _}__{algo}__{seed}__{timestamp}.
    env_part, algo, seed, stamp = trained.name.split("__")
    assert (env_part, algo, seed) == ("schedgym_Preemption-v1", "maskable_ppo", "0") and stamp


def test_the_steps_reported_are_the_steps_trained(tmp_path, capsys):
    # 100 asked, rollouts of 64 steps on one environment: stable-baselines3 trains 128 (it once printed 100)
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path), **{**TINY, "total_timesteps": 100}))
    assert json.loads((run_dir / "model.json").read_text())["timesteps"] == 128
    assert "trained 128 steps (100 asked: it stops at a rollout's end) in " in capsys.readouterr().out


def test_saved_agent_loads_by_path_under_any_name(trained):
    agent = make_policy(f"mine:{trained / 'model.zip'}")
    assert isinstance(agent, LearnedPolicy) and isinstance(agent, Policy)
    assert agent.name == "mine" and agent.maskable and agent.queue.value == "priority"
    assert make_policy(f"ppo:{trained / 'model'}").name == "ppo"  # .zip may be left out


def test_a_rule_name_cannot_label_a_saved_agent(trained):
    with pytest.raises(SchedGymError, match="'fitgpp' is a rule"):
        make_policy(f"fitgpp:{trained / 'model.zip'}")


def test_two_policies_with_one_label_are_refused(trained):
    with pytest.raises(ConfigError, match="labelled 'ppo'"):
        CompareConfig(policies=("ppo", f"ppo:{trained / 'model.zip'}"))


def test_numpy_evaluation_decides_as_the_sb3_model_in_the_simulator(trained):
    """The saved agent (numpy forward pass) and the live SB3 model make the same decisions, run after run."""
    numpy_agent = load_agent(trained / "model.zip")
    model = algo_class("maskable_ppo").load(trained / "model.zip", device="cpu")
    sb3_agent = LearnedPolicy(SB3Network(model, maskable=True), max_candidates=16, estimate_noise=0.3)
    cluster = cluster_preset("paper")
    for seed in range(2):
        wl = generate(preset("paper", n_jobs=400), cluster, np.random.default_rng(seed))
        a = run_policy(numpy_agent, cluster, wl, rng=np.random.default_rng(seed))
        b = run_policy(sb3_agent, cluster, wl, rng=np.random.default_rng(seed))
        np.testing.assert_array_equal(a.completion, b.completion)
        np.testing.assert_array_equal(a.preemptions, b.preemptions)


def test_saved_agent_evaluates_deterministically(trained):
    config = CompareConfig(policies=(f"ppo:{trained / 'model.zip'}",), seeds=2, n_jobs=300)
    a = run_comparison(config, progress=False)
    b = run_comparison(config, progress=False)
    for ra, rb in zip(a.runs["ppo"], b.runs["ppo"], strict=True):
        np.testing.assert_array_equal(ra.completion, rb.completion)
        np.testing.assert_array_equal(ra.preemptions, rb.preemptions)


def test_comparison_gives_every_policy_the_identical_workloads(trained):
    agent = f"ppo:{trained / 'model.zip'}"
    config = CompareConfig(policies=("fifo", "fitgpp", "k8s", agent), seeds=2, n_jobs=300)
    result = run_comparison(config, progress=False)
    for seed in range(2):
        ref = result.runs["fifo"][seed]
        for name in config.labels:
            r = result.runs[name][seed]
            assert r.job_ids == ref.job_ids
            np.testing.assert_array_equal(r.submit, ref.submit)
            np.testing.assert_array_equal(r.duration, ref.duration)
            np.testing.assert_array_equal(r.job_class, ref.job_class)
    # Different seeds are different workloads.
    assert not np.array_equal(result.runs["fifo"][0].submit, result.runs["fifo"][1].submit)


def test_missing_description_is_a_clear_error(tmp_path, trained):
    lone = tmp_path / "lone.zip"
    lone.write_bytes((trained / "model.zip").read_bytes())
    with pytest.raises(SchedGymError, match="lone.json"):
        make_policy(f"ppo:{lone}")
    with pytest.raises(SchedGymError, match="No model"):
        make_policy(f"ppo:{tmp_path / 'nothing.zip'}")


@pytest.mark.parametrize(
    "where, twice, key",
    [
        ('"env_id": ', '"env_id": "schedgym/Preemption-v0", "env_id": ', "env_id"),  # was read as the last
        ('"env_kwargs": {', '"env_kwargs": {"n_jobs": 30, ', "n_jobs"),  # at any depth
    ],
)
def test_a_key_given_twice_in_an_agents_description_is_refused(tmp_path, where, twice, key):
    source = BUNDLED["lean-ppo"]
    text = json.dumps(json.loads(source.with_suffix(".json").read_text(encoding="utf-8")))
    assert text.count(where) == 1
    model = tmp_path / "me.npz"
    model.write_bytes(source.read_bytes())
    model.with_suffix(".json").write_text(text.replace(where, twice), encoding="utf-8")
    message = f"{model.with_suffix('.json')}: not a schedgym agent description (key {key!r} given twice)"
    with pytest.raises(SchedGymError) as caught:
        load_agent(model)
    assert str(caught.value) == message
    proc = run_cli("compare", "--seeds", "1", "--jobs", "30", "--policies", f"fifo,me:{model}")
    assert (proc.returncode, proc.stderr.splitlines()) == (2, [f"schedgym: error: {message}"])


def test_a_model_path_that_is_not_a_zip_is_named_as_given(tmp_path):
    with pytest.raises(SchedGymError, match="ph.csv"):
        make_policy(f"ppo:{tmp_path / 'ph.csv'}")


def test_training_on_a_bundled_trace_validates_on_its_validation_windows(tmp_path):
    from agents.train import validation_workloads
    from schedgym.workloads.named import trace_workload

    workloads = validation_workloads("schedgym/Preemption-v1", {"workload": "philly", "n_jobs": 50}, 2)
    val = trace_workload("philly").window("validation", 0)
    assert [j.job_id for j in workloads[0].jobs] == [j.job_id for j in val.jobs]
    philly = {**TINY, "env_kwargs": {"workload": "philly", "n_jobs": 50}}
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path), **philly))
    assert (run_dir / "model.zip").is_file()


def test_training_on_mix_validates_each_level_on_its_own_cluster_as_compare_does(tmp_path):
    """`schedgym train --env-kwargs '{"workload": "mix"}'` once stopped on an assertion: validation asked
    for windows of a trace. Validation level i is compare's validation seed i, on that level's cluster."""
    from agents.train import Validation
    from schedgym.experiments.figures import headline_figures

    mix = {**TINY, "env_kwargs": {"workload": "mix"}, "n_eval_workloads": 2}
    config = TrainConfig.of(run_dir=str(tmp_path), **mix)
    validation = Validation(config, maskable=True)
    compared = run_comparison(CompareConfig(workload="mix", split="validation", seeds=2, policies=("fitgpp", "k8s")))
    for rule in ("fitgpp", "k8s"):
        runs = compared.runs[rule]
        assert runs[0].capacity_total.tolist() != runs[1].capacity_total.tolist()  # two levels, two clusters
        ours = validation.baselines["mix"][rule]
        for key in ("te_p95", "be_p50", "be_p95", "be_p99"):
            assert ours[key] == [headline_figures(r)[key] for r in runs]
    run_dir = train(config)
    assert (run_dir / "model.zip").is_file()
    # the learned agent is judged the same way: its validation figures are compare's runs of it
    stats = json.loads((run_dir / "best_model.json").read_text())
    assert stats["validation_workloads"] == 2


def test_a_mix_level_is_not_an_evaluation_window_of_one_cluster():
    from schedgym.workloads.source import WorkloadSource

    mix = WorkloadSource(workload="mix")
    with pytest.raises(ConfigError, match="own cluster"):
        mix.evaluation("validation", 0, cluster_preset("paper"))
    with pytest.raises(ConfigError, match="own cluster"):
        mix.episode(np.random.default_rng(0), cluster_preset("paper"))


def test_max_episode_steps_in_env_kwargs_is_gym_makes_not_the_configurations():
    from agents.train import env_config, validation_workloads

    kwargs = {"n_jobs": 50, "max_episode_steps": 20}  # it used to reach EnvConfig there: TypeError
    assert env_config("schedgym/Preemption-v1", kwargs).n_jobs == 50
    assert len(validation_workloads("schedgym/Preemption-v1", kwargs, 1)) == 1


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"env_id": "nosuch/Env-v0"}, "Unknown env_id"),
        ({"learning_rate": float("inf")}, "learning_rate"),
        # validation and compare read the network through version-1 victim rows: these once crashed there
        ({"env_id": "schedgym/PreemptionPlan-v1"}, "agents.lean_ppo"),
        ({"env_kwargs": {"observation_version": 2}}, "observation_version 2"),
        # the trace would have won over each named workload, every run labelled with a name it was not
        ({"workloads": ("paper", "mix"), "n_envs": 2, "env_kwargs": {"trace": "t.csv", "n_jobs": 20}}, "both set"),
    ],
)
def test_train_config_rejects_unknown_env_and_non_finite_rates(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        TrainConfig.of(**kwargs)


def test_train_refuses_a_run_dir_that_is_a_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="run directory"):
        train(TrainConfig.of(run_dir=str(afile), **TINY))


def test_cli_reports_a_missing_model_without_traceback(tmp_path):
    proc = run_cli("compare", "--policies", f"fifo,ppo:{tmp_path}/x.zip", "--seeds", "1")
    assert proc.returncode == 2
    assert "schedgym: error: No model at" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_unmasked_algorithms_train_and_compare(tmp_path, algo):
    tiny = {k: v for k, v in TINY.items() if algo != "dqn" or k != "n_steps"}  # dqn reads no n_steps
    run_dir = train(TrainConfig.of(algo=algo, run_dir=str(tmp_path), **tiny))
    agent = load_agent(run_dir / "model.zip")
    assert not agent.maskable  # its illegal actions become 0, counted
    result = run_comparison(CompareConfig(policies=(f"{algo}:{run_dir / 'model.zip'}",), seeds=1, n_jobs=200))
    assert all(r.completion.size == 200 for r in next(iter(result.runs.values())))


@pytest.mark.slow
def test_train_cli_end_to_end(tmp_path):
    proc = run_cli(
        "train",
        "--total-timesteps",
        "128",
        "--n-envs",
        "2",
        "--n-steps",
        "64",
        "--batch-size",
        "32",
        "--eval-freq",
        "0",
        "--env-kwargs",
        '{"n_jobs": 150}',
        "--run-dir",
        str(tmp_path),
        "--no-tensorboard",
        "--no-progress",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "steps/s" in proc.stdout
    (run,) = tmp_path.iterdir()
    # Without evaluations during training, best_model.zip is the final model, evaluated at the end.
    assert (run / "model.zip").is_file() and (run / "best_model.zip").is_file()
    # The same weights (the zip files' own timestamps may differ by a second).
    import zipfile

    weights = [zipfile.ZipFile(run / name).read("policy.pth") for name in ("model.zip", "best_model.zip")]
    assert weights[0] == weights[1]


# ------------------------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"algo": "a2c"}, "algo"),
        ({"total_timesteps": 0}, "total_timesteps > 0"),
        ({"vec_env": "ray"}, "vec_env"),
        ({"lr_schedule": "cosine"}, "lr_schedule"),
        ({"learning_rate": -1.0}, "learning_rate > 0"),
        ({"gamma": 1.5}, "gamma"),
        ({"net_arch": (64, 0)}, "net_arch"),
        ({"n_eval_workloads": 1000}, "n_eval_workloads"),
    ],
)
def test_train_config_rejects_bad_values(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        TrainConfig.of(**kwargs)


def test_every_train_config_field_has_a_docstring():
    from dataclasses import fields

    from schedgym._fielddocs import option_fields

    docs = field_docs(TrainConfig)  # the groups'
    assert {f.name for f in fields(TrainConfig)} == set(docs)
    assert all(docs.values())
    assert all(doc for _, doc in option_fields(TrainConfig))  # every option's


# ------------------------------------------------------------------------------------------ statistics


def test_paired_differences_are_seed_by_seed():
    result = run_comparison(CompareConfig(policies=("fifo", "priority", "fitgpp"), seeds=3, n_jobs=300))
    summ = result.summary()["policies"]
    per = {name: [s["te"]["slowdown_p95"] for s in e["per_seed"]] for name, e in summ.items()}
    diffs = [a - b for a, b in zip(per["priority"], per["fitgpp"], strict=True)]
    paired = summ["priority"]["paired"]["fitgpp"]["te"]["slowdown_p95"]
    assert paired["mean"] == pytest.approx(np.mean(diffs))
    assert paired["ci95"] == pytest.approx(ci95(diffs))
    assert "fitgpp" not in summ["fitgpp"]["paired"]  # no difference of a policy to itself
    assert summ["fifo"]["ci95"]["te"]["slowdown_p95"] == pytest.approx(ci95(per["fifo"]))


def test_csv_and_plot_outputs(tmp_path):
    import csv

    pytest.importorskip("matplotlib")
    from schedgym.cli import main

    out_csv, out_png = tmp_path / "c.csv", tmp_path / "p.png"
    args = ["compare", "--policies", "fifo,fitgpp", "--seeds", "2", "--jobs", "200", "--no-progress"]
    assert main([*args, "--csv", str(out_csv), "--plot", str(out_png)]) == 0
    rows = list(csv.DictReader(out_csv.open()))
    assert {r["policy"] for r in rows} == {"fifo", "fitgpp"}
    te95 = next(r for r in rows if r["policy"] == "fitgpp" and r["class"] == "te" and r["metric"] == "slowdown_p95")
    assert float(te95["ci95_low"]) <= float(te95["mean"]) <= float(te95["ci95_high"])
    assert te95["diff_vs_fifo"] != "" and te95["diff_vs_fitgpp"] == ""
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------ the bundled agent


@pytest.mark.parametrize("name", ["ppo", "dagger", "dagger-realistic", "dagger-nowait", "dagger-philly"])
def test_bundled_agent_loads_by_name_and_is_small(name):
    from agents.learned import BUNDLED

    agent = make_policy(name)
    assert isinstance(agent, LearnedPolicy) and agent.maskable and agent.name == name
    assert BUNDLED[name].stat().st_size < 5 * 2**20
    meta = json.loads(BUNDLED[name].with_suffix(".json").read_text())
    assert "schedgym train" in meta["train_command"]


def test_the_bundled_dagger_agent_is_a_row_scorer_over_64_rows():
    from agents.inference import RowScorerNetwork

    agent = make_policy("dagger")
    assert isinstance(agent.network, RowScorerNetwork) and agent.max_candidates == 64
    cluster = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=800), cluster, np.random.default_rng(3))
    result = run_policy(agent, cluster, wl, rng=np.random.default_rng(0))
    assert result.completion.size == 800 and result.n_preemptions > 0 and agent.n_illegal == 0


def test_the_bundled_agent_runs_in_the_simulator_like_a_rule():
    # run_policy(make_policy("ppo"), ...) once failed with AttributeError: every name gives a Policy now.
    cluster = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=500), cluster, np.random.default_rng(3))
    result = run_policy(make_policy("ppo"), cluster, wl)
    assert result.completion.size == 500


def test_bundled_agent_is_in_the_default_comparison_and_acts():
    config = CompareConfig(seeds=1, n_jobs=1000)
    assert "ppo" in config.policies
    result = run_comparison(config, progress=False)
    ppo = result.runs["ppo"][0]
    assert ppo.n_preemptions > 0  # it does preempt on a contended workload
    np.testing.assert_array_equal(ppo.submit, result.runs["fifo"][0].submit)


def test_validation_is_deterministic(trained):
    from agents.train import evaluate, validation_workloads

    agent = load_agent(trained / "model.zip")
    workloads = validation_workloads("schedgym/Preemption-v1", {"n_jobs": 150}, 2)
    a = evaluate(agent, "schedgym/Preemption-v1", {"n_jobs": 150}, workloads, True)
    b = evaluate(agent, "schedgym/Preemption-v1", {"n_jobs": 150}, workloads, True)
    assert a == b


def test_an_agent_decides_alike_in_the_simulator_and_in_the_environment(trained):
    """One network, two drivers: stepping the environment with its actions, and the LearnedPolicy inside
    Simulator.run, give the same runs, and the environment's summed rewards equal episode_return."""
    import gymnasium as gym

    from agents.train import env_config
    from schedgym.experiments.runner import episode_return

    kwargs = {"n_jobs": 200, "te_weight": 3.0, "preemption_cost": 0.5}
    agent = load_agent(trained / "model.zip")
    cluster = cluster_preset("paper")
    for seed in range(3):
        wl = generate(preset("paper", n_jobs=200, load=1.3), cluster, np.random.default_rng(seed))
        env = gym.make("schedgym/Preemption-v1", **kwargs)
        obs, _ = env.reset(seed=seed, options={"workload": wl})  # estimate noise from default_rng(seed)
        masks = env.unwrapped.action_masks
        steps, total = play_episode(env, obs, lambda o, masks=masks: agent.network.act(o, masks()))
        through_env = env.unwrapped.sim.result()
        in_sim = run_policy(agent, cluster, wl, rng=np.random.default_rng(seed))
        assert agent.n_actions == steps > 0  # the same decisions, and there were some
        np.testing.assert_array_equal(in_sim.completion, through_env.completion)
        np.testing.assert_array_equal(in_sim.preemptions, through_env.preemptions)
        assert episode_return(in_sim, env_config("schedgym/Preemption-v1", kwargs)) == pytest.approx(total, rel=1e-9)


def test_training_uses_one_torch_thread_by_default(trained):
    import torch

    assert TrainConfig.of().common.torch_threads == 1
    assert torch.get_num_threads() == 1  # set by the training run of the fixture
    with pytest.raises(ConfigError, match="torch_threads"):
        TrainConfig.of(torch_threads=0)


def test_an_agent_saved_on_a_superseded_env_id_is_evaluated_on_its_successor(tmp_path):
    """The bundled agent was trained on Preemption-v0; v1 has the same spaces, so its .json still loads."""
    import gymnasium as gym

    import schedgym
    from agents.learned import BUNDLED, describe

    meta_path = BUNDLED["ppo"].with_suffix(".json")
    assert json.loads(meta_path.read_text())["env_id"] == "schedgym/Preemption-v0"
    algo, config = describe(meta_path)
    v1 = gym.spec("schedgym/Preemption-v1").kwargs
    assert algo == "maskable_ppo" and config.max_candidates == v1["max_candidates"] and config.te_weight == 5.0
    assert schedgym.SUPERSEDED["schedgym/Preemption-v0"] == "schedgym/Preemption-v1"
    with pytest.raises(gym.error.DeprecatedEnv, match="v1"):
        gym.make("schedgym/Preemption-v0")


def test_training_on_the_batched_vector_environment(tmp_path):
    """maskable_ppo trains on PreemptionVectorEnv by default (vec_env auto -> vector); the run is deterministic
    and records what it used."""
    kwargs = {**TINY, "vec_env": "auto", "n_envs": 2}
    runs = [train(TrainConfig.of(run_dir=str(tmp_path / str(i)), **kwargs)) for i in range(2)]
    meta = json.loads((runs[0] / "model.json").read_text())
    assert meta["train_config"]["vec_env"] == "vector"
    assert meta["evaluations"] and meta["final_evaluation"]["illegal_actions"] == 0
    weights = [algo_class("maskable_ppo").load(r / "model.zip").policy.state_dict() for r in runs]
    assert all(np.array_equal(weights[0][k].numpy(), weights[1][k].numpy()) for k in weights[0])
    assert isinstance(make_policy(f"mine:{runs[0] / 'model.zip'}"), LearnedPolicy)


def test_the_vector_environment_is_for_algorithms_that_read_masks():
    assert TrainConfig.of(algo="ppo").sb3.vec_env == "subproc"
    with pytest.raises(ConfigError, match="reads action masks"):
        TrainConfig.of(algo="ppo", vec_env="vector")


def test_markdown_table_has_every_policy_and_the_verdicts(tmp_path):
    from schedgym.cli import main

    out = tmp_path / "t.md"
    args = ["compare", "--policies", "fifo,fitgpp,k8s", "--seeds", "3", "--jobs", "300", "--no-progress"]
    assert main([*args, "--markdown", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "| policy | TE p95 | BE p50 | BE p95 | BE p99 | preemptions | vs fitgpp | vs k8s |"
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in lines[2:]}
    assert set(rows) == {"`fifo`", "`fitgpp`", "`k8s`"}
    assert rows["`fifo`"][4] == "0.0"  # no preemptions
    assert rows["`fitgpp`"][5] == "" and rows["`k8s`"][6] == ""  # no verdict against itself
    verdicts = {"dominates", "dominated", "mixed", "equal"}
    assert rows["`fifo`"][5] in verdicts and rows["`fitgpp`"][6] in verdicts


def test_the_bundled_philly_agent_was_trained_on_philly_and_acts_on_its_windows():
    from agents.learned import BUNDLED
    from schedgym.workloads.named import TRACE_WORKLOADS

    agent = make_policy("dagger-philly")
    meta = json.loads(BUNDLED["dagger-philly"].with_suffix(".json").read_text())
    assert meta["env_kwargs"]["workload"] == "philly" and agent.max_candidates == 64
    trace = TRACE_WORKLOADS["philly"]
    result = run_policy(agent, cluster_preset("philly"), trace.window("validation", 0), rng=np.random.default_rng(0))
    assert result.n_preemptions > 0 and agent.n_illegal == 0 and agent.n_actions > 0

"""Learned agents: training smoke test, saving and loading, the comparison on identical workloads, and the
statistics the comparison reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

pytest.importorskip("sb3_contrib")

from agents.learned import SavedAgent  # noqa: E402
from agents.train import VALIDATION_SEEDS, TrainConfig, field_docs, train  # noqa: E402
from schedgym.errors import ConfigError, SchedGymError  # noqa: E402
from schedgym.experiments.compare import CompareConfig, ci95, run_comparison, t975  # noqa: E402
from schedgym.registry import make_policy  # noqa: E402

TINY = dict(
    total_timesteps=128,
    n_envs=1,
    vec_env="dummy",
    n_steps=64,
    batch_size=32,
    eval_freq=64,
    n_eval_workloads=1,
    env_kwargs={"n_jobs": 150},
    tensorboard=False,
    progress=False,
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One tiny MaskablePPO run shared by the tests of this module."""
    run_dir = train(TrainConfig(run_dir=str(tmp_path_factory.mktemp("runs")), **TINY))
    return run_dir


def test_training_writes_final_and_best_models_with_their_description(trained):
    for stem in ("model", "best_model"):
        assert (trained / f"{stem}.zip").is_file()
        meta = json.loads((trained / f"{stem}.json").read_text())
        assert meta["algo"] == "maskable_ppo"
        assert meta["env_id"] == "schedgym/Preemption-v0"
        assert meta["env_kwargs"] == {"n_jobs": 150}
        assert meta["validation_seeds"] == [VALIDATION_SEEDS.start, VALIDATION_SEEDS.start + 1]
    summary = json.loads((trained / "model.json").read_text())
    assert summary["steps_per_second"] > 0
    assert summary["evaluations"], "eval_freq=64 over 128 steps must evaluate at least once"
    # Run names follow {env_id}__{algo}__{seed}__{timestamp}.
    env_part, algo, seed, stamp = trained.name.split("__")
    assert (env_part, algo, seed) == ("schedgym_Preemption-v0", "maskable_ppo", "0") and stamp


def test_saved_agent_loads_by_path_with_no_other_argument(trained):
    saved = make_policy(f"ppo:{trained / 'model.zip'}")
    assert isinstance(saved, SavedAgent)
    assert saved.kind == "agent" and saved.algo == "maskable_ppo" and saved.maskable
    assert make_policy(f"maskable_ppo:{trained / 'model'}").path == saved.path  # .zip may be left out


def test_saved_agent_evaluates_deterministically(trained):
    config = CompareConfig(policies=(f"ppo:{trained / 'model.zip'}",), seeds=2, n_jobs=300)
    a = run_comparison(config, progress=False)
    b = run_comparison(config, progress=False)
    for ra, rb in zip(a.runs[config.policies[0]], b.runs[config.policies[0]], strict=True):
        np.testing.assert_array_equal(ra.completion, rb.completion)
        np.testing.assert_array_equal(ra.preemptions, rb.preemptions)


def test_comparison_gives_every_policy_the_identical_workloads(trained):
    agent = f"ppo:{trained / 'model.zip'}"
    config = CompareConfig(policies=("fifo", "fitgpp", "k8s", agent), seeds=2, n_jobs=300)
    result = run_comparison(config, progress=False)
    for seed in range(2):
        ref = result.runs["fifo"][seed]
        for name in config.policies:
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


def test_a_model_path_that_is_not_a_zip_is_named_as_given(tmp_path):
    with pytest.raises(SchedGymError, match="ph.csv"):
        make_policy(f"ppo:{tmp_path / 'ph.csv'}")


def test_training_on_a_bundled_trace_validates_on_its_validation_windows(tmp_path):
    from agents.train import validation_resets
    from schedgym.workloads.named import trace_workload

    resets = validation_resets("schedgym/Preemption-v0", {"workload": "philly", "n_jobs": 50}, 2)
    val = trace_workload("philly").window("validation", 0)
    assert [j.job_id for j in resets[0]["workload"].jobs] == [j.job_id for j in val.jobs]
    run_dir = train(TrainConfig(run_dir=str(tmp_path), **{**TINY, "env_kwargs": {"workload": "philly", "n_jobs": 50}}))
    assert (run_dir / "model.zip").is_file()


@pytest.mark.parametrize(
    "kwargs, needle",
    [({"env_id": "nosuch/Env-v0"}, "Unknown env_id"), ({"learning_rate": float("inf")}, "learning_rate")],
)
def test_train_config_rejects_unknown_env_and_non_finite_rates(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        TrainConfig(**kwargs)


def test_train_refuses_a_run_dir_that_is_a_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="run directory"):
        train(TrainConfig(run_dir=str(afile), **TINY))


def test_cli_reports_a_missing_model_without_traceback(tmp_path):
    proc = run_cli("compare", "--policies", f"fifo,ppo:{tmp_path}/x.zip", "--seeds", "1")
    assert proc.returncode == 2
    assert "schedgym: error: No model at" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_unmasked_algorithms_train_through_the_illegal_action_wrapper(tmp_path, algo):
    run_dir = train(TrainConfig(algo=algo, run_dir=str(tmp_path), **TINY))
    saved = SavedAgent.from_path(run_dir / "model.zip")
    assert not saved.maskable
    env = saved.make_env()
    assert type(env).__name__ == "IllegalActionAsWait"
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
    assert (run / "model.zip").is_file() and not (run / "best_model.zip").exists()


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
        TrainConfig(**kwargs)


def test_every_train_config_field_has_a_docstring():
    from dataclasses import fields

    docs = field_docs(TrainConfig)
    assert {f.name for f in fields(TrainConfig)} == set(docs)
    assert all(docs.values())


# ------------------------------------------------------------------------------------------ statistics


def test_ci95_by_hand():
    # [1, 2, 3]: mean 2, sample sd 1, n 3, t(0.975, 2) = 4.303 -> half-width 4.303 / sqrt(3) = 2.4843.
    assert ci95([1.0, 2.0, 3.0]) == pytest.approx(4.303 / math.sqrt(3))
    assert math.isnan(ci95([5.0]))
    assert ci95([2.0, 2.0, 2.0]) == 0.0


def test_t_quantiles():
    assert t975(1) == 12.706 and t975(4) == 2.776
    assert t975(22) == 2.086  # between table entries: the lower degree of freedom, conservative
    assert t975(1000) == 1.96
    assert math.isnan(t975(0))


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


def test_bundled_agent_loads_by_name_and_is_small():
    saved = make_policy("ppo")
    assert isinstance(saved, SavedAgent) and saved.algo == "maskable_ppo"
    assert Path(saved.path).stat().st_size < 5 * 2**20
    assert "train_command" in saved.meta and "schedgym train" in saved.meta["train_command"]


def test_bundled_agent_is_in_the_default_comparison_and_acts():
    config = CompareConfig(seeds=1, n_jobs=1000)
    assert "ppo" in config.policies
    result = run_comparison(config, progress=False)
    ppo = result.runs["ppo"][0]
    assert ppo.n_preemptions > 0  # it does preempt on a contended workload
    np.testing.assert_array_equal(ppo.submit, result.runs["fifo"][0].submit)


def test_validation_is_deterministic(trained):
    from agents.learned import SavedAgent
    from agents.train import evaluate, validation_resets

    saved = SavedAgent.from_path(trained / "model.zip")
    resets = validation_resets(saved.env_id, saved.env_kwargs, 2)
    a = evaluate(saved.load_model(), saved.env_id, saved.env_kwargs, resets, saved.maskable)
    b = evaluate(saved.load_model(), saved.env_id, saved.env_kwargs, resets, saved.maskable)
    assert a == b

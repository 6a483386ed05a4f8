"""Imitation of lookahead in the plan mode (agents/plan_imitation.py), end to end on tiny workloads: the labels
are legal rows on the teacher's own trajectory, the numpy student computes the torch module's logits, and it
acts inside run_policy; the command writes its outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from agents.plan_imitation import (  # noqa: E402
    KINDS,
    PlanDemos,
    PlanImitationConfig,
    PlanRecorder,
    PlanStudent,
    fit,
    format_report,
    main,
    make_scorer,
    record,
    row_inputs,
)
from schedgym.errors import ConfigError  # noqa: E402
from schedgym.experiments.runner import run_policy, run_rng  # noqa: E402
from schedgym.registry import make_policy  # noqa: E402
from schedgym.sim.cluster import resolve_cluster  # noqa: E402
from schedgym.workloads.source import WorkloadSource  # noqa: E402

TINY = {"n_jobs": 400, "n_train": 1, "n_val": 1, "epochs": 3, "hidden": (16,), "evaluate": False}


@pytest.fixture(scope="module")
def tiny():
    config = PlanImitationConfig(**TINY)
    return config, record(config, config.train_seeds).arrays()


def test_recorded_labels_are_legal_rows_and_never_wait(tiny):
    _, data = tiny
    assert len(data["labels"]) >= 5
    rows = np.arange(len(data["labels"]))
    assert data["masks"][rows, data["labels"]].all()
    assert (data["labels"] > 0).all()  # the teacher waits only when nothing else serves the request
    assert set(data["kinds"].tolist()) <= set(range(len(KINDS)))
    has_fitgpp = data["fitgpp_rows"] >= 0
    took_fitgpp = data["kinds"] == KINDS.index("fitgpp")
    assert (data["labels"][took_fitgpp] == data["fitgpp_rows"][took_fitgpp]).all()
    assert has_fitgpp[took_fitgpp].all()


def test_recording_is_the_teachers_own_run():
    cluster = resolve_cluster("paper")
    workload = WorkloadSource("paper", n_jobs=400).seeded(1_000_000, cluster)
    teacher = run_policy(make_policy("lookahead-nowait-pc10"), cluster, workload, rng=run_rng(1_000_000))
    recorder = PlanRecorder(make_policy("lookahead-nowait-pc10"), PlanDemos(), seed=1_000_000)
    recorded = run_policy(recorder, cluster, workload, rng=run_rng(1_000_000))
    assert recorded.summary() == teacher.summary()
    assert len(recorder.demos) > 0


def test_numpy_forward_pass_equals_torch(tiny):
    import torch

    config, data = tiny
    model = make_scorer(config)
    fit(model, config, data, 0)
    x = torch.as_tensor(row_inputs(data["obs"], data["masks"], config.max_plans, config.queue_rows, True),
                        dtype=torch.float32)  # fmt: skip
    with torch.no_grad():
        expected = model(x, torch.as_tensor(data["masks"])).numpy()
    got = model.numpy().logits(data["obs"], data["masks"])
    legal = data["masks"]
    np.testing.assert_allclose(got[legal], expected[legal], rtol=1e-4, atol=1e-5)
    assert (got[~legal] == expected[~legal]).all()
    assert (got.argmax(axis=1) == expected.argmax(axis=1)).all()


def test_the_student_acts_inside_run_policy(tiny):
    config, data = tiny
    model = make_scorer(config)
    fit(model, config, data, 0)
    cluster = resolve_cluster("paper")
    workload = WorkloadSource("paper", n_jobs=400).seeded(config.val_seeds[0], cluster)
    student = PlanStudent(model.numpy())
    result = run_policy(student, cluster, workload, rng=run_rng(config.val_seeds[0]))
    assert result.n_requests > 0 and np.isfinite(result.slowdown).all()


def test_the_command_writes_a_student_that_loads(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--out", str(out), "--n-jobs", "300", "--n-train", "1", "--n-val", "1", "--epochs", "2", "--hidden", "8",
            "--no-evaluate", "--rounds", "2"]  # fmt: skip
    assert main(argv) == 0
    assert "agreement with the teacher" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {"student.npz", "student.json", "report.json"}
    report = json.loads((out / "report.json").read_text())
    assert report["val_seeds"] == [100_000] and len(report["rounds"]) == 2
    student = PlanStudent.load(out)
    assert student.network.spec()["hidden"] == [8]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"first_val_seed": 0}, "validation seeds within 100,000"),
        ({"first_train_seed": 100_000}, "first_train_seed >= 1,000,000"),
        ({"max_plans": 1}, "max_plans >= 2"),
        ({"hidden": ()}, "hidden"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"rounds": 0}, "rounds"),
        # its workloads are seeded synthetic draws: these once failed later, 'mix' called "a trace"
        ({"workload": "mix"}, "synthetic preset .* got 'mix'"),
        ({"workload": "philly"}, "synthetic preset .* got 'philly'"),
    ],
)
def test_the_configuration_is_validated(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PlanImitationConfig(**kwargs)


def test_a_student_sees_the_estimates_the_recording_saw(tiny):
    # Both draw the estimate noise from the run's generator at the first request (the recorder spawns the
    # teacher's generator from it, which leaves its stream as it is): the first observation is the same.
    from schedgym.decision.plan_mode import PlanPolicy

    config, data = tiny
    seen = []

    class Capture(PlanPolicy):
        def choose(self, decision):
            seen.append(decision.observe())
            return 1

    cluster = resolve_cluster("paper")
    seed = config.train_seeds[0]
    run_policy(Capture(), cluster, WorkloadSource("paper", n_jobs=400).seeded(seed, cluster), rng=run_rng(seed))
    np.testing.assert_array_equal(seen[0], data["obs"][0])


def test_the_report_prints_each_interval_and_none_for_one_seed():
    report = {
        "val_seeds": [100_000, 100_001],
        "teacher": {"requests": 12, "options_per_request": 3.5, "plans_per_request": 2.5,
                    "kinds": {"wait": {"n": 3, "share": 0.25}, "fitgpp": {"n": 9, "share": 0.75}}},
        "agreement": {"student": {"overall": 0.5, "not_fitgpp": 0.25, "n": 12, "n_not_fitgpp": 3}},
        "policy": {
            "policies": {
                "fitgpp": {"mean": 1.23456, "ci95": 0.01234, "slowdown_per_job": [1.2, 1.27], "preemptions": 4},
                "student": {"mean": 1.5, "ci95": float("nan"), "slowdown_per_job": [1.5], "preemptions": 2},
            },
            "student_minus": {"fitgpp": {"mean": -0.01, "ci95": 0.005}, "k8s": {"mean": 0.02, "ci95": float("nan")}},
        },
        "timings": {"record": 1.0, "fit": 2.0},
    }  # fmt: skip
    lines = format_report(report).splitlines()
    assert any(line.split()[:4] == ["fitgpp", "1.2346", "±", "0.0123"] for line in lines)
    assert any(line.split()[:2] == ["student", "1.5000"] and "±" not in line for line in lines)  # one seed
    assert any(line.split()[:6] == ["student", "minus", "fitgpp", "-0.0100", "±", "0.0050"] for line in lines)
    assert any(line.split()[:4] == ["student", "minus", "k8s", "+0.0200"] and "nan" not in line for line in lines)

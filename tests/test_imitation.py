"""Imitation before reinforcement learning (agents/imitation.py, ``schedgym train --imitate``), training on
several workloads at once, and the validation figures reported during training."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import TINY, run_cli

pytest.importorskip("sb3_contrib")

from agents.imitation import Demonstrations, ImitationRecorder, expert_action, pretrain  # noqa: E402
from agents.learned import algo_class  # noqa: E402
from agents.train import TrainConfig, train  # noqa: E402
from schedgym.errors import ConfigError  # noqa: E402
from schedgym.experiments.figures import HEADLINE_KEYS  # noqa: E402
from schedgym.experiments.runner import run_policy  # noqa: E402
from schedgym.registry import make_policy  # noqa: E402
from schedgym.sim import cluster_preset  # noqa: E402
from schedgym.sim.job import Job  # noqa: E402
from schedgym.sim.policy import DECLINE, PreemptionPlan  # noqa: E402
from schedgym.workloads import generate, preset  # noqa: E402


def _job(idx: int) -> Job:
    return SimpleNamespace(idx=idx)  # type: ignore[return-value]  (expert_action reads only the index)


def test_expert_action_follows_the_plan_row_by_row():
    a, b, c = _job(0), _job(1), _job(2)
    rows = [(a, 0), (b, 1), (b, 2), (c, 2)]
    assert expert_action(DECLINE, rows, []) == (0, True)
    # The victim's row on one of the plan's nodes comes first (b runs on nodes 1 and 2; the plan uses 2).
    assert expert_action(PreemptionPlan(nodes=(2,), victims=(1, 2)), rows, []) == (3, True)
    # A victim already chosen is skipped.
    assert expert_action(PreemptionPlan(nodes=(2,), victims=(1, 2)), rows, [b]) == (4, True)
    # No row of a victim on the plan's nodes: the first row holding a victim.
    assert expert_action(PreemptionPlan(nodes=(5,), victims=(1,)), rows, []) == (2, True)
    # The plan's victim is not among the rows: a row on the plan's node, not exact.
    assert expert_action(PreemptionPlan(nodes=(2,), victims=(7,)), rows, []) == (3, False)
    # ... and with no row on its node either, 0.
    assert expert_action(PreemptionPlan(nodes=(9,), victims=(7,)), rows, []) == (0, False)


def _record(expert: str, n_jobs: int = 500, seed: int = 0, max_candidates: int = 16, **kwargs):
    cluster = cluster_preset("paper")
    workload = generate(preset("paper", n_jobs=n_jobs), cluster, np.random.default_rng(seed))
    demos = Demonstrations()
    recorder = ImitationRecorder(
        make_policy(expert), demos, max_candidates=max_candidates, estimate_noise=0.3, **kwargs
    )
    result = run_policy(recorder, cluster, workload, rng=np.random.default_rng(seed))
    return demos, recorder, result


def test_recorded_labels_are_legal_and_follow_the_expert():
    demos, recorder, result = _record("fitgpp")
    obs, masks, actions = demos.arrays()
    assert len(demos) >= 10 and obs.shape == (len(demos), 20 + 13 * 16) and obs.dtype == np.float32
    assert masks[np.arange(len(actions)), actions].all()
    assert (actions > 0).all() and result.n_preemptions > 0  # fitgpp preempts at every request it is asked
    # 16 rows on 16 feasible nodes show each node's first candidate only: fitgpp's victim is often not
    # among them. 64 rows show enough of every node here.
    wide, wide_recorder, _ = _record("fitgpp", max_candidates=64)
    assert recorder.n_unmatched > 0 and wide_recorder.n_unmatched <= 0.1 * len(wide)


def test_a_never_preempting_expert_is_labelled_zero_throughout():
    demos, recorder, result = _record("priority")
    _, _, actions = demos.arrays()
    assert len(actions) > 0 and (actions == 0).all()
    assert result.n_preemptions == 0 and recorder.n_unmatched == 0


def test_recording_is_deterministic_and_a_learner_acting_changes_only_the_actions_taken():
    a, _, ra = _record("fitgpp", seed=3)
    b, _, rb = _record("fitgpp", seed=3)
    np.testing.assert_array_equal(a.arrays()[2], b.arrays()[2])
    np.testing.assert_array_equal(ra.completion, rb.completion)

    class Decline:
        def act(self, obs, mask):
            return 0

    c, _, rc = _record("fitgpp", seed=3, learner=Decline(), beta=0.0)
    # The learner declines every time: nothing is preempted, yet the labels still say what fitgpp would do.
    assert rc.n_preemptions == 0 and (c.arrays()[2] > 0).any()


def test_pretraining_fits_the_labels():
    import torch

    torch.set_num_threads(1)
    demos, _, _ = _record("fitgpp", n_jobs=1000)
    model = algo_class("maskable_ppo")("MlpPolicy", _env(), seed=0, device="cpu")
    fit = pretrain(model, demos, epochs=60, batch_size=16, learning_rate=3e-3, maskable=True, seed=0)
    majority = np.bincount(demos.arrays()[2]).max() / len(demos)
    assert majority < 0.5 and fit["agreement"] >= 0.8


def _env():
    import gymnasium as gym

    return gym.make("schedgym/Preemption-v1", n_jobs=100)


def test_training_with_imitation_alone_records_rounds_and_validation_figures(tmp_path):
    config = TrainConfig.of(
        run_dir=str(tmp_path),
        **{**TINY, "total_timesteps": 0, "imitate": "fitgpp", "imitate_decisions": 200, "imitate_rounds": 2},
    )
    run_dir = train(config)
    meta = json.loads((run_dir / "model.json").read_text())
    rounds = meta["imitation"]
    assert [r["round"] for r in rounds] == [0, 1] and rounds[1]["decisions"] >= 400
    final = meta["final_evaluation"]
    assert set(final["figures"]) == set(HEADLINE_KEYS)
    assert set(final["minus"]) == {"fitgpp", "k8s"}
    assert set(final["minus"]["fitgpp"]["te_p95"]) == {"mean", "ci95"}
    assert meta["evaluations"][0]["timesteps"] == 0  # the evaluation after imitation
    assert set(meta["baselines"]["paper"]) == {"fitgpp", "k8s"}


def test_training_on_several_workloads_validates_on_each(tmp_path):
    kwargs = {**TINY, "vec_env": "vector", "n_envs": 2, "workloads": ("paper", "philly"), "env_kwargs": {"n_jobs": 60}}
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path), **kwargs))
    meta = json.loads((run_dir / "model.json").read_text())
    assert set(meta["final_evaluation"]["workloads"]) == {"paper", "philly"}
    assert set(meta["baselines"]) == {"paper", "philly"}


def test_imitation_on_mix_records_training_levels_each_on_its_own_cluster(tmp_path, monkeypatch):
    """It once stopped with "'mix' is synthetic: it has no pool of trace jobs"; the expert now plays
    training levels (seeds from 1,000,000), each on its cluster with its estimate noise, as reset draws them."""
    from schedgym.experiments import runner
    from schedgym.workloads.distribution import MIX, draw_level

    played = []
    original = runner.run_policy

    def spy(policy, cluster, workload, *args, **kwargs):
        played.append((int(workload.name[4:-1]), cluster, policy.estimate_noise))
        return original(policy, cluster, workload, *args, **kwargs)

    monkeypatch.setattr(runner, "run_policy", spy)
    mix = {**TINY, "total_timesteps": 0, "imitate": "fitgpp", "imitate_decisions": 100, "imitate_rounds": 1}
    mix["env_kwargs"] = {"workload": "mix"}
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path), **mix))
    assert json.loads((run_dir / "model.json").read_text())["imitation"][0]["decisions"] >= 100
    assert played and all(seed >= 1_000_000 for seed, _, _ in played)
    for seed, cluster, noise in played:
        level = draw_level(MIX, seed)
        assert (cluster, noise) == (level.cluster, level.estimate_noise)
    assert len({cluster.n_nodes for _, cluster, _ in played}) > 1


def test_imitation_on_workloads_that_never_ask_stops_with_one_message(tmp_path, monkeypatch):
    """At load 0.05 twenty jobs never contend: the recording loop once waited forever for a decision (here
    a guard stops it after 20 workloads, so that the old code fails instead of hanging)."""
    import agents.train
    from schedgym.experiments import runner

    played = []
    original = runner.run_policy

    def guard(*args, **kwargs):
        played.append(1)
        assert len(played) <= 20, "imitation kept recording workloads that never ask"
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "run_policy", guard)
    monkeypatch.setattr(agents.train, "IDLE_WORKLOADS", 5)
    quiet = {**TINY, "total_timesteps": 0, "imitate": "fitgpp", "imitate_decisions": 10, "imitate_rounds": 1}
    quiet["env_kwargs"] = {"load": 0.05, "n_jobs": 20}
    with pytest.raises(ConfigError, match="no decision on the first 5 training workloads of round 0: paper"):
        train(TrainConfig.of(run_dir=str(tmp_path), **quiet))
    assert len(played) == 5


def test_imitation_goes_on_while_a_workload_asks_now_and_then(tmp_path, monkeypatch):
    """Only a round that records nothing at all is stopped: one that asks seldom is recorded to the end."""
    import agents.train

    # 100-job `paper` episodes of this seed ask 2, 0, 0, 0, 0, 0, 0, 0, 4, ... times: idle runs longer than 2
    monkeypatch.setattr(agents.train, "IDLE_WORKLOADS", 2)
    seldom = {**TINY, "total_timesteps": 0, "imitate": "fitgpp", "imitate_decisions": 10, "imitate_rounds": 1}
    seldom["env_kwargs"] = {"n_jobs": 100}
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path), **seldom))
    (round_,) = json.loads((run_dir / "model.json").read_text())["imitation"]
    assert round_["decisions"] >= 10 and round_["workloads_recorded"] > 8


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"imitate": "nope"}, "Unknown policy"),
        ({"imitate": "fitgpp", "algo": "dqn"}, "actor-critic"),
        ({"total_timesteps": 0}, "only with --imitate"),
        ({"workloads": ("paper", "paper"), "n_envs": 2}, "distinct"),
        ({"workloads": ("paper", "philly"), "n_envs": 1}, "at least as many environments"),
        ({"workloads": ("paper", "nope"), "n_envs": 2}, "nope"),
        ({"eval_baselines": ("ppo",)}, "learned agent"),
        ({"imitate_rounds": 0}, "imitate_rounds"),
    ],
)
def test_train_config_checks_the_new_fields(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        TrainConfig.of(**kwargs)


def test_the_vector_environment_batches_only_equal_reward_settings():
    import gymnasium as gym

    with pytest.raises(ConfigError, match="max_candidates"):
        gym.make_vec(
            "schedgym/Preemption-v1",
            num_envs=2,
            vectorization_mode="vector_entry_point",
            sub_env_kwargs=[{"max_candidates": 8}, {"max_candidates": 16}],
        )


def test_train_cli_takes_lists_of_names(tmp_path):
    proc = run_cli("train", "--workloads", "paper,,philly", "--run-dir", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.startswith("schedgym: error:") and "Traceback" not in proc.stderr


def test_lookahead_is_imitated_through_the_simulation_its_requests_carry():
    demos, recorder, result = _record("lookahead", n_jobs=400)
    again, _, _ = _record("lookahead", n_jobs=400)
    obs, masks, actions = demos.arrays()
    assert len(actions) > 0 and masks[np.arange(len(actions)), actions].all()
    np.testing.assert_array_equal(actions, again.arrays()[2])

"""agents.lean_ppo: the input-driven baseline, GAE and the masked log-probabilities by hand; a tiny run is a
function of its configuration; the CLI writes its output set, which loads and compares like any agent."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from agents import lean_ppo
from agents.evolve import FIGURES, PLAN_WIDTH, PlanScoreNetwork, legal_rows
from agents.lean_ppo import LeanPPOConfig, batch_scores, gae, input_driven_baseline, returns_to_go
from schedgym.decision.features import N_HEAD_V2, QUEUE_FEATURES
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.registry import make_policy

# A run small enough for a test: 300-job paper workloads, 2 updates of 2 workloads x 2 rollouts.
TINY = dict(n_jobs=300, updates=2, seeds_per_update=2, rollouts_per_seed=2, num_envs=3, validation_seeds=2,
            validate_every=1, stats_seeds=2, minibatch_size=64, hidden=4)  # fmt: skip
TINY_ARGS = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]


def test_returns_to_go_hand_computed():
    assert returns_to_go(np.array([-1.0, -2.0, -3.0])) == pytest.approx([-6.0, -5.0, -3.0])
    assert returns_to_go(np.array([-1.0, -2.0, -4.0]), gamma=0.5) == pytest.approx([-3.0, -4.0, -4.0])


def test_input_driven_baseline_interpolates_the_other_rollouts_over_time():
    # Rollout A decides at t = 0, 10 (return-to-go -6, -4) and ends at 20; B at 5, 15 (-10, -2), ends at 25;
    # C at 0 (-3), ends at 30.
    times = [np.array([0.0, 10.0]), np.array([5.0, 15.0]), np.array([0.0])]
    togo = [np.array([-6.0, -4.0]), np.array([-10.0, -2.0]), np.array([-3.0])]
    ends = [20.0, 25.0, 30.0]
    base = input_driven_baseline(times, togo, ends)
    # B's curve: -10 until t=5 (constant before its first decision), -6 at 10 (half way to -2 at 15), 0 at 25.
    # C's curve: -3 at 0, 0 at 30: -2 at 10, -2.5 at 5, -1.5 at 15.
    # A's curve: -6 at 0, -5 at 5, -4 at 10, -2 at 15 (half way to 0 at 20), 0 after 20.
    assert base[0] == pytest.approx([(-10.0 - 3.0) / 2, (-6.0 - 2.0) / 2])
    assert base[1] == pytest.approx([(-5.0 - 2.5) / 2, (-2.0 - 1.5) / 2])
    assert base[2] == pytest.approx([(-6.0 - 10.0) / 2])
    with pytest.raises(ValueError, match="at least 2 rollouts"):
        input_driven_baseline(times[:1], togo[:1], ends[:1])


def test_gae_over_the_baseline_hand_computed():
    rewards, values = np.array([-1.0, -2.0, -3.0]), np.array([-5.0, -4.0, -2.0])
    # gamma = lambda = 1: the return-to-go minus the baseline
    assert gae(rewards, values, 1.0, 1.0) == pytest.approx(returns_to_go(rewards) - values)
    # gamma 0.5, lambda 0.5: delta = (-1 + 0.5 * -4 + 5, -2 + 0.5 * -2 + 4, -3 + 0 + 2) = (2, 1, -1)
    # A_2 = -1; A_1 = 1 + 0.25 * -1 = 0.75; A_0 = 2 + 0.25 * 0.75 = 2.1875
    assert gae(rewards, values, 0.5, 0.5) == pytest.approx([2.1875, 0.75, -1.0])


def test_masked_log_probs_are_a_softmax_over_the_legal_rows_only():
    torch = pytest.importorskip("torch")
    scores = torch.tensor([[1.0, float("-inf"), 0.0, float("-inf")], [0.0, 2.0, float("-inf"), float("-inf")]])
    logp, entropy = lean_ppo.masked_log_probs(scores, torch.tensor([2, 1]))
    z0, z1 = math.e + 1.0, 1.0 + math.e**2
    assert logp.tolist() == pytest.approx([math.log(1 / z0), math.log(math.e**2 / z1)])
    p0, p1 = np.array([math.e / z0, 1 / z0]), np.array([1 / z1, math.e**2 / z1])
    assert entropy.tolist() == pytest.approx([-(p0 * np.log(p0)).sum(), -(p1 * np.log(p1)).sum()])
    assert torch.isfinite(entropy).all()


@pytest.mark.parametrize("wait, reads_queue", [(True, False), (False, False), (True, True)])
def test_the_torch_network_is_the_numpy_scorer_it_exports(wait, reads_queue):
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    head_width = N_HEAD_V2 + (2 * 4 * len(QUEUE_FEATURES) if reads_queue else 0)
    module = lean_ppo.make_module(5, head_width)
    rng = np.random.default_rng(0)
    mean, scale = rng.normal(size=PLAN_WIDTH), rng.uniform(0.5, 2.0, PLAN_WIDTH)
    net = PlanScoreNetwork(6, 4, 5, module.flat_params(), mean, scale, wait, reads_queue)
    assert net.head_width == head_width and len(net.params) == PlanScoreNetwork.n_params(5, head_width)
    obs = rng.uniform(size=(3, N_HEAD_V2 + 2 * 4 * len(QUEUE_FEATURES) + 6 * PLAN_WIDTH)).astype(np.float32)
    mask = np.array([[True, True, False, True, False, True], [True] * 6, [True] + [False] * 5])
    ours = batch_scores(net, obs, mask)
    for i in range(3):  # the batched scorer is PlanScoreNetwork's, row by row
        assert ours[i] == pytest.approx(net.scores(obs[i], mask[i]), rel=1e-12)
    # the update's module reads the rows the policy chose among (play_episodes logs legal_rows(mask, wait))
    chosen_among = legal_rows(mask, wait)
    assert np.isinf(ours[0, 0]) != wait and np.isfinite(ours[2, 0])  # without wait, row 0 only when alone
    head, rows = lean_ppo.split(obs, 6, 4, head=head_width)
    z = torch.tensor((rows - mean) / scale, dtype=torch.float32)
    with torch.no_grad():
        theirs = module(torch.tensor(head, dtype=torch.float32), z, torch.tensor(chosen_among)).double().numpy()
    assert np.array_equal(np.isinf(theirs), ~chosen_among)
    assert theirs[chosen_among] == pytest.approx(ours[chosen_among], rel=1e-5, abs=1e-5)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"rollouts_per_seed": 1}, "rollouts_per_seed >= 2"),
        ({"gamma": 0.0}, "0 < gamma <= 1"),
        ({"learning_rate": -1.0}, "learning_rate > 0"),
        ({"num_envs": 0}, "num_envs >= 1"),
        ({"entropy_coef": float("nan")}, "entropy_coef >= 0"),
        ({"te_weight": -1.0}, "te_weight >= 0"),
        ({"tail_weight": -1.0}, "tail_weight >= 0"),
        ({"be_tail": 0.5}, "be_tail >= 1"),
        ({"init": "teacher"}, "init one of random, fitgpp"),
        ({"wait": "no"}, "wait True or False"),
        ({"read_queue": 1}, "read_queue True or False"),
        ({"preemption_cost": -1.0}, "preemption_cost"),
        ({"init_margin": 0.0}, "init_margin > 0"),
        ({"select": "best"}, "select one of objective, dominance"),
    ],
)
def test_config_is_validated(overrides, message):
    with pytest.raises(ConfigError, match=message):
        LeanPPOConfig(**overrides)


def test_te_weight_weighs_the_training_reward_only():
    # the same decisions on the same workload: TE's part of the reward doubles, BE's is unchanged
    parts = []
    for te_weight in (1.0, 2.0):
        config = LeanPPOConfig(n_jobs=300, num_envs=1, te_weight=te_weight)
        assert ("--te-weight" in config.command()) == (te_weight != 1.0)  # recorded when not the default
        venv = lean_ppo.make_vec_env(config)
        assert venv.envs[0].config.te_weight == te_weight
        _, info = venv.reset(seed=7)
        te = be = 0.0
        for _ in range(40):
            first_legal = np.argmax(info["action_mask"], axis=1)
            _, _, terminated, _, info = venv.step(first_legal)
            te, be = te + float(info["reward_te"][0]), be + float(info["reward_be"][0])
            if terminated[0]:
                break
        venv.close()
        parts.append((te, be))
    (te1, be1), (te2, be2) = parts
    assert te1 < 0 and te2 == pytest.approx(2 * te1) and be2 == be1
    # validation judges the unweighted objective whatever the training reward
    assert LeanPPOConfig(te_weight=2.0).evolve_config() == LeanPPOConfig().evolve_config()


def test_a_tiny_run_is_a_function_of_its_configuration(tmp_path):
    pytest.importorskip("torch")
    assert lean_ppo.main(["--out", str(tmp_path / "a"), *TINY_ARGS]) == 0
    # the same configuration on other sub-environment and worker counts: the same episodes, the same weights
    assert lean_ppo.main(["--out", str(tmp_path / "b"), *TINY_ARGS, "--num-envs=2", "--workers=2"]) == 0
    a, b = (np.load(tmp_path / x / "agent.npz") for x in "ab")
    for key in ("params", "row_mean", "row_scale"):
        assert np.array_equal(a[key], b[key])
    curve_a = json.loads((tmp_path / "a" / "training.json").read_text())["curve"]
    curve_b = json.loads((tmp_path / "b" / "training.json").read_text())["curve"]
    assert curve_a == curve_b and len(curve_a) == 3


def test_an_update_moves_the_weights_the_same_way_every_time():
    torch = pytest.importorskip("torch")
    config = LeanPPOConfig(**{**TINY, "n_jobs": 800})
    runs = []
    for num_envs in (3, 2):
        c = dataclasses.replace(config, num_envs=num_envs)
        torch.manual_seed(c.seed)
        module = lean_ppo.make_module(c.hidden)
        optimizer = torch.optim.Adam(module.parameters(), lr=c.learning_rate)
        venv = lean_ppo.make_vec_env(c)
        mean, scale = lean_ppo.row_statistics(c, venv)
        before = module.flat_params()
        net = PlanScoreNetwork(24, 4, c.hidden, before, mean, scale)
        episodes, _ = lean_ppo.play_update(c, venv, None, net, 1)
        assert [e.seed for e in episodes] == [1_000_000, 1_000_000, 1_000_001, 1_000_001]
        assert not np.array_equal(episodes[0].action, episodes[1].action)  # two rollouts, two samples
        stats = lean_ppo.ppo_update(module, optimizer, net, episodes, lean_ppo.advantages(episodes, c), c,
                                    np.random.default_rng(0))  # fmt: skip
        assert stats["decisions"] > 10
        runs.append((mean, before, module.flat_params()))
    (mean_a, before_a, after_a), (mean_b, before_b, after_b) = runs
    assert np.array_equal(mean_a, mean_b) and np.array_equal(before_a, before_b) and np.array_equal(after_a, after_b)
    assert not np.allclose(before_a, after_a)


def test_the_cli_writes_its_output_set_which_loads_and_compares(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert lean_ppo.main(["--out", str(out), *TINY_ARGS]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["agent.json", "agent.npz", "training.json"]
    meta = json.loads((out / "agent.json").read_text())
    report = json.loads((out / "training.json").read_text())
    assert meta["algo"] == "lean_ppo" and meta["env_id"] == "schedgym/PreemptionPlan-v1"
    assert meta["train_command"] == report["command"]
    # the recorded command, run again, is this configuration
    again, _, _ = lean_ppo.parse_args(report["command"].split()[3:])
    assert again == LeanPPOConfig(**TINY) and LeanPPOConfig(**report["config"]) == again
    assert report["steps"] > 0 and report["chosen_update"] in (0, 1, 2)
    chosen = next(p for p in report["curve"] if p["update"] == report["chosen_update"])
    assert chosen["objective"] == min(p["objective"] for p in report["curve"])
    # the numpy network written is the one validated: replayed on the validation workloads, the same objective
    network = PlanScoreNetwork.from_arrays(dict(np.load(out / "agent.npz")), report["network"])
    assert lean_ppo.validate(LeanPPOConfig(**report["config"]), network)["objective"] == chosen["objective"]
    assert "validation objective" in capsys.readouterr().out
    policy = make_policy(f"mine:{out / 'agent.npz'}")
    assert policy.name == "mine" and np.array_equal(policy.network.params, np.load(out / "agent.npz")["params"])
    result = run_comparison(CompareConfig(policies=("fitgpp", f"mine:{out / 'agent.npz'}"), seeds=2, n_jobs=300))
    assert set(result.runs) == {"fitgpp", "mine"}
    # a bad option is one error line and exit 2, and writes nothing
    assert lean_ppo.main(["--out", str(tmp_path / "bad"), *TINY_ARGS, "--rollouts-per-seed=1"]) == 2
    assert "rollouts_per_seed >= 2" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_the_training_figure_is_written_with_the_run_or_refused_before_it(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    out = tmp_path / "run"
    # inside the output folder, which the run makes
    assert lean_ppo.main(["--out", str(out), "--plot", str(out / "training.png"), *TINY_ARGS]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["agent.json", "agent.npz", "training.json", "training.png"]
    assert (out / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a figure that cannot be written is refused before any training, in one line, and nothing is written
    monkeypatch.setattr(lean_ppo, "train", lambda *a, **k: pytest.fail("trained before checking --plot"))
    for plot, needle in ((tmp_path / "no" / "f.png", "does not exist"), (tmp_path / "f.txt", ".png, .pdf or .svg")):
        assert lean_ppo.main(["--out", str(tmp_path / "bad"), "--plot", str(plot), *TINY_ARGS]) == 2
        assert needle in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_the_bundled_lean_ppo_agent_is_its_manifests_command_and_acts():
    from agents.evolve import EvolvedPolicy
    from agents.learned import BUNDLED
    from agents.manifest import read_manifest

    entry = read_manifest()["lean-ppo"]
    meta = json.loads(BUNDLED["lean-ppo"].with_suffix(".json").read_text())
    # the manifest's command, parsed again, is the configuration the agent records (its training seed included)
    config, _, _ = lean_ppo.parse_args(entry.train_command.split()[3:])
    assert config == LeanPPOConfig(**meta["train_config"]) and config.updates == 300
    assert entry.algo == meta["algo"] == "lean_ppo" and BUNDLED["lean-ppo"].suffix == ".npz"
    agent = make_policy("lean-ppo")
    assert isinstance(agent, EvolvedPolicy) and agent.name == "lean-ppo"
    assert "lean-ppo" in CompareConfig().policies  # compared by default
    result = run_comparison(CompareConfig(policies=("fitgpp", "lean-ppo"), seeds=1, n_jobs=500))
    assert result.runs["lean-ppo"][0].n_preemptions > 0


def test_the_bundled_no_wait_agent_is_its_manifests_command_and_never_waits_while_it_can_serve():
    from agents.evolve import EvolvedPolicy
    from agents.learned import BUNDLED
    from agents.manifest import read_manifest
    from schedgym.decision.plan_mode import PlanDecision
    from schedgym.experiments.runner import run_policy
    from schedgym.sim import cluster_preset
    from schedgym.workloads import generate, preset

    entry = read_manifest()["lean-ppo-nowait"]
    meta = json.loads(BUNDLED["lean-ppo-nowait"].with_suffix(".json").read_text())
    config, _, _ = lean_ppo.parse_args(entry.train_command.split()[3:])
    assert config == LeanPPOConfig(**meta["train_config"])
    assert (config.wait, config.preemption_cost, config.select, config.init) == (False, 10.0, "dominance", "random")
    assert meta["network"]["wait"] is False and meta["chosen_update"] == 300
    agent = make_policy("lean-ppo-nowait")
    assert isinstance(agent, EvolvedPolicy) and agent.network.wait is False
    assert "lean-ppo-nowait" not in CompareConfig().policies  # not in the quickstart's comparison
    # inside the simulator, every request that offers a plan is served
    seen = {"offered": 0, "waited": 0}
    choose = agent.choose

    def counting(decision: PlanDecision) -> int:
        row = choose(decision)
        offered = bool(decision.mask()[1:].any())
        seen["offered"] += offered
        seen["waited"] += offered and row == 0
        return row

    agent.choose = counting  # type: ignore[method-assign]
    cluster = cluster_preset("paper")
    workload = generate(preset("paper", n_jobs=500), cluster, np.random.default_rng(0))
    result = run_policy(agent, cluster, workload, rng=np.random.default_rng(1))
    assert seen["offered"] > 5 and seen["waited"] == 0 and result.n_preemptions > 0


def test_tail_rewards_hand_computed():
    # A: slowdown 4, threshold 2 -> charged 0.1/s from t=20 to 40; B: slowdown 1 < 1.5, never charged;
    # C: slowdown 2.5, threshold 1 -> charged 0.05/s from t=30 to 60
    submit, duration = np.array([0.0, 5.0, 10.0]), np.array([10.0, 5.0, 20.0])
    completion, threshold = np.array([40.0, 10.0, 60.0]), np.array([2.0, 1.5, 1.0])
    out = lean_ppo.tail_rewards(np.array([0.0, 25.0, 35.0, 50.0, 70.0]), submit, duration, completion, threshold)
    np.testing.assert_allclose(out, [-0.5, -1.25, -1.25, -0.5])
    assert out.sum() == pytest.approx(-(2.0 + 1.5))  # max(0, slowdown - threshold), summed
    nothing = lean_ppo.tail_rewards(np.array([0.0, 100.0]), submit, duration, completion, np.full(3, 10.0))
    np.testing.assert_array_equal(nothing, [0.0])


@pytest.mark.parametrize("seed", range(5))
def test_tail_rewards_sum_to_each_jobs_excess_within_the_bounds(seed):
    rng = np.random.default_rng(seed)
    n = 50
    submit = rng.uniform(0, 100, n)
    duration = rng.uniform(1, 20, n)
    completion = submit + duration * rng.uniform(1, 6, n)
    threshold = rng.uniform(1, 4, n)
    bounds = np.sort(np.concatenate([[10.0, 400.0], rng.uniform(10, 400, 30)]))
    out = lean_ppo.tail_rewards(bounds, submit, duration, completion, threshold)
    start = submit + threshold * duration  # each job's charged span, clipped to the bounds, job by job
    span = np.clip(np.minimum(completion, bounds[-1]) - np.maximum(start, bounds[0]), 0, None)
    assert len(out) == len(bounds) - 1 and np.all(out <= 1e-12)
    assert out.sum() == pytest.approx(-(span / duration).sum())


def test_the_tail_term_is_added_to_the_rewards_of_the_same_episode():
    import gymnasium as gym

    from schedgym.sim.job import JobClass

    config = LeanPPOConfig(n_jobs=1000, num_envs=2, tail_weight=2.0, te_tail=1.01, be_tail=2.0)
    assert "--tail-weight 2.0" in config.command() and LeanPPOConfig().tail() is None
    venv = lean_ppo.make_vec_env(config)
    net = PlanScoreNetwork(24, 4, config.hidden, np.zeros(0), *lean_ppo.row_statistics(config, venv))
    net = net.with_params(np.random.default_rng(0).normal(0, 0.1, PlanScoreNetwork.n_params(config.hidden, N_HEAD_V2)))
    plain, _ = lean_ppo.play_episodes(venv, net, [5, 6], [np.random.default_rng(j) for j in range(2)])
    tailed, _ = lean_ppo.play_episodes(venv, net, [5, 6], [np.random.default_rng(j) for j in range(2)], config.tail())
    venv.close()
    for a, b in zip(plain, tailed, strict=True):
        np.testing.assert_array_equal(a.action, b.action)  # the reward does not steer the sampling
        assert np.all(b.reward - a.reward <= 1e-9) and len(a.action) > 10
    # the whole charge, job by job, from a replay of the first episode's decisions in a single environment:
    # every job's excess over its class's threshold, as the plain rewards sum to every job's slowdown
    env = gym.make(lean_ppo.ENV_ID, workload="paper", n_jobs=1000, estimate_noise=config.estimate_noise).unwrapped
    env.reset(seed=5, options={"workload_seed": 5})
    for action in tailed[0].action:
        env.step(int(action))
    result = env.sim.result()
    threshold = np.where(result.job_class == JobClass.TE, config.te_tail, config.be_tail)
    excess = np.maximum(result.slowdown - threshold, 0.0)
    assert plain[0].reward.sum() == pytest.approx(-result.slowdown.sum())
    charged = (tailed[0].reward - plain[0].reward).sum()
    assert charged < 0 and charged == pytest.approx(-config.tail_weight * excess.sum())


def test_the_fitgpp_warm_start_is_fitgpp_at_update_0_and_explores_around_it():
    pytest.importorskip("torch")
    config = LeanPPOConfig(**{**TINY, "updates": 1}, init="fitgpp")
    report = lean_ppo.train(config, None, log=lambda line: None)
    # greedy, the starting weights take fitgpp's plan (else wait): fitgpp's validation figures to the last digit
    start = report["curve"][0]
    fitgpp = report["validation_rules"]["fitgpp"]
    assert all(start[k] == fitgpp[k] for k in fitgpp)
    # sampled, fitgpp's row scores the margin above every other legal row, which all score the same
    venv = lean_ppo.make_vec_env(config)
    shown = venv.envs[0].config
    mean, scale = lean_ppo.row_statistics(config, venv)
    module = lean_ppo.make_module(config.hidden)
    lean_ppo.warm_start(module, scale, 4.0)
    net = PlanScoreNetwork(shown.max_plans, shown.queue_rows, config.hidden, module.flat_params(), mean, scale)
    at = N_HEAD_V2 + 2 * shown.queue_rows * len(QUEUE_FEATURES)
    obs, info = venv.reset(seed=3)
    seen = 0
    for _ in range(200):
        mask = info["action_mask"]
        scores = batch_scores(net, obs, mask)
        flag = obs[:, at:].reshape(len(obs), -1, PLAN_WIDTH)[:, :, lean_ppo.ROW_NAMES.index("by_fitgpp")] > 0.5
        for i in range(len(obs)):
            legal = np.flatnonzero(mask[i])
            gaps = scores[i, legal] - scores[i, legal].min()
            assert gaps == pytest.approx(np.where(flag[i, legal], 4.0, 0.0) if flag[i, legal].any() else 0 * gaps,
                                         abs=1e-6)  # fmt: skip
            seen += int(flag[i, legal].any() and len(legal) > 2)
        obs, _, _, _, info = venv.step(np.argmax(mask, axis=1))
    venv.close()
    assert seen > 10


def test_dominance_selection_counts_the_figures_above_either_rule():
    rules = {"fitgpp": {"objective": 3.0, "te_p95": 1.04, "be_p50": 1.05, "be_p95": 13.0, "be_p99": 50.0},
             "k8s": {"objective": 3.2, "te_p95": 1.05, "be_p50": 1.00, "be_p95": 14.0, "be_p99": 70.0}}  # fmt: skip
    near = {"objective": 2.0, "te_p95": 1.04, "be_p50": 1.00, "be_p95": 13.5, "be_p99": 49.0}  # be_p95 above
    worse = {"objective": 1.5, "te_p95": 1.06, "be_p50": 1.01, "be_p95": 12.0, "be_p99": 49.0}  # two above
    assert lean_ppo.dominated_figures(near, rules) == 1 and lean_ppo.dominated_figures(worse, rules) == 2
    assert lean_ppo.selection_key(near, rules, "dominance") < lean_ppo.selection_key(worse, rules, "dominance")
    assert lean_ppo.selection_key(worse, rules, "objective") < lean_ppo.selection_key(near, rules, "objective")
    tie = {**near, "objective": 1.9}
    assert lean_ppo.selection_key(tie, rules, "dominance") < lean_ppo.selection_key(near, rules, "dominance")
    # a checkpoint whose objective is above both rules' comes after every one that is not, whatever its figures
    tails = {"objective": 3.3, "te_p95": 1.0, "be_p50": 1.0, "be_p95": 1.0, "be_p99": 1.0}
    assert lean_ppo.dominated_figures(tails, rules) == 0
    assert lean_ppo.selection_key(worse, rules, "dominance") < lean_ppo.selection_key(tails, rules, "dominance")
    # between the rules' objectives (below k8s's 3.2, above fitgpp's 3.0) a checkpoint still qualifies
    between = {**tails, "objective": 3.1}
    assert lean_ppo.selection_key(between, rules, "dominance") < lean_ppo.selection_key(worse, rules, "dominance")
    # and when none qualifies, the figures still order them
    assert lean_ppo.selection_key(tails, rules, "dominance") < lean_ppo.selection_key(
        {**worse, "objective": 3.3}, rules, "dominance"
    )


def test_preemption_cost_charges_each_preemption_in_the_training_reward_only():
    config = LeanPPOConfig(n_jobs=300, num_envs=1, preemption_cost=10.0)
    assert "--preemption-cost 10.0" in config.command()
    venv = lean_ppo.make_vec_env(config)
    assert venv.envs[0].config.preemption_cost == 10.0
    _, info = venv.reset(seed=7)
    charged = 0.0
    for _ in range(60):
        last_legal = info["action_mask"].shape[1] - 1 - np.argmax(info["action_mask"][:, ::-1], axis=1)
        _, _, terminated, _, info = venv.step(last_legal)  # a plan that preempts wherever there is one
        charged += float(info["reward_preemption"][0])
        if terminated[0]:
            break
    preemptions = int(info["preemptions"][0])
    venv.close()
    assert preemptions > 0 and charged == pytest.approx(-10.0 * preemptions)


def test_legal_rows_drop_wait_only_where_a_plan_is_offered():
    mask = np.array([[True, True, False], [True, False, False], [True, False, True]])
    assert np.array_equal(legal_rows(mask, True), mask)
    assert legal_rows(mask, False).tolist() == [[False, True, False], [True, False, False], [False, False, True]]
    assert legal_rows(mask[1], False).tolist() == [True, False, False]  # one request: only wait, kept


def test_a_no_wait_run_never_waits_while_a_plan_is_offered_and_its_agent_keeps_that(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert lean_ppo.main(["--out", str(out), *TINY_ARGS, "--no-wait"]) == 0
    report = json.loads((out / "training.json").read_text())
    assert "--no-wait" in report["command"] and report["config"]["wait"] is False
    again, _, _ = lean_ppo.parse_args(report["command"].split()[3:])
    assert again == LeanPPOConfig(**TINY, wait=False)
    meta = json.loads((out / "agent.json").read_text())
    assert meta["network"]["wait"] is False
    policy = make_policy(f"mine:{out / 'agent.npz'}")
    assert policy.network.wait is False
    # the agent in the environment: wait only where nothing else is legal
    config = LeanPPOConfig(**TINY)
    venv = lean_ppo.make_vec_env(config)
    obs, info = venv.reset(seed=5)
    offered = 0
    for _ in range(300):
        actions = np.array([policy.network.act(o, m) for o, m in zip(obs, info["action_mask"], strict=True)])
        offered += int(info["action_mask"][:, 1:].any(axis=1).sum())
        assert all(a != 0 or not m[1:].any() for a, m in zip(actions, info["action_mask"], strict=True))
        obs, _, _, _, info = venv.step(actions)
    venv.close()
    assert offered > 10
    # a description whose wait is not a boolean is refused
    with pytest.raises(ValueError, match="wait"):
        PlanScoreNetwork.from_arrays(dict(np.load(out / "agent.npz")), {**meta["network"], "wait": "no"})


def test_no_wait_episodes_are_sampled_and_logged_over_the_plans_only():
    pytest.importorskip("torch")
    config = LeanPPOConfig(**{**TINY, "n_jobs": 1500}, wait=False)
    venv = lean_ppo.make_vec_env(config)
    shown = venv.envs[0].config
    mean, scale = lean_ppo.row_statistics(config, venv)
    module = lean_ppo.make_module(config.hidden)
    net = PlanScoreNetwork(shown.max_plans, shown.queue_rows, config.hidden, module.flat_params(), mean, scale, False)
    episodes, _ = lean_ppo.play_episodes(venv, net, [11, 12], [np.random.default_rng(i) for i in range(2)])
    venv.close()
    mask = np.concatenate([e.mask for e in episodes])
    action = np.concatenate([e.action for e in episodes])
    assert mask[np.arange(len(action)), action].all()  # every action among the logged rows
    alone = ~mask[:, 1:].any(axis=1)
    assert np.array_equal(mask[:, 0], alone)  # wait is logged legal exactly where nothing else is
    assert (action[~alone] != 0).all() and (~alone).sum() > 10


def test_a_network_that_reads_the_queue_scores_by_it_and_one_that_does_not_ignores_it():
    rng = np.random.default_rng(4)
    n_queue = 2 * 4 * len(QUEUE_FEATURES)
    obs = rng.uniform(size=N_HEAD_V2 + n_queue + 6 * PLAN_WIDTH)
    other = obs.copy()
    other[N_HEAD_V2 : N_HEAD_V2 + n_queue] = rng.uniform(size=n_queue)  # other jobs waiting, the same request
    mask = np.array([True, True, True, False, True, True])
    for reads_queue in (False, True):
        n = PlanScoreNetwork.n_params(5, N_HEAD_V2 + (n_queue if reads_queue else 0))
        net = PlanScoreNetwork(6, 4, 5, rng.normal(size=n), np.zeros(PLAN_WIDTH), np.ones(PLAN_WIDTH), True,
                               reads_queue)  # fmt: skip
        moved = not np.allclose(net.scores(obs, mask)[mask], net.scores(other, mask)[mask])
        assert moved == reads_queue
    with pytest.raises(ValueError, match="reads_queue"):
        PlanScoreNetwork.from_arrays(net.arrays(), {**net.spec(), "reads_queue": 1})
    without = rng.normal(size=PlanScoreNetwork.n_params(5, N_HEAD_V2))
    with pytest.raises(ValueError, match="parameters"):  # weights of a network without the queue
        PlanScoreNetwork.from_arrays({**net.arrays(), "params": without}, net.spec())
    linear = {**net.arrays(), "params": rng.normal(size=PlanScoreNetwork.n_params(0, N_HEAD_V2))}
    for spec in ({**net.spec(), "hidden": 0}, {**net.spec(), "queue_rows": 0}):  # nothing reads, nothing to read
        with pytest.raises(ValueError, match="reads_queue needs"):
            PlanScoreNetwork.from_arrays(linear if spec["hidden"] == 0 else net.arrays(), spec)


def test_a_read_queue_run_writes_an_agent_that_reads_the_queue(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert lean_ppo.main(["--out", str(out), *TINY_ARGS, "--read-queue"]) == 0
    report = json.loads((out / "training.json").read_text())
    again, _, _ = lean_ppo.parse_args(report["command"].split()[3:])
    assert again == LeanPPOConfig(**TINY, read_queue=True)
    meta = json.loads((out / "agent.json").read_text())
    assert meta["network"]["reads_queue"] is True and "reads_queue" not in PlanScoreNetwork(
        6, 4, 0, np.zeros(PLAN_WIDTH), np.zeros(PLAN_WIDTH), np.ones(PLAN_WIDTH)).spec()  # fmt: skip
    policy = make_policy(f"mine:{out / 'agent.npz'}")
    assert policy.network.reads_queue and len(policy.network.params) == PlanScoreNetwork.n_params(
        TINY["hidden"], N_HEAD_V2 + 2 * policy.network.queue_rows * len(QUEUE_FEATURES))  # fmt: skip
    # the written agent, loaded as `mine:` loads it, is the validated checkpoint: the queue is read the same way
    point = next(p for p in report["curve"] if p["update"] == report["chosen_update"])
    assert lean_ppo.validate(again, policy.network) == {k: point[k] for k in ("objective", *FIGURES, "preemptions")}


def test_a_run_on_mix_validates_on_the_levels_own_clusters(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    args = [a for a in TINY_ARGS if not a.startswith("--n-jobs")]
    assert lean_ppo.main(["--out", str(out), *args, "--workload", "mix"]) == 0
    report = json.loads((out / "training.json").read_text())
    config = LeanPPOConfig(**{**TINY, "workload": "mix"})
    # the rules' lines are compare's runs of the validation levels, each on its own cluster
    from schedgym.experiments.figures import headline_figures

    compared = run_comparison(CompareConfig(workload="mix", split="validation", seeds=2, policies=("fitgpp",)))
    runs = compared.runs["fitgpp"]
    assert runs[0].capacity_total.tolist() != runs[1].capacity_total.tolist()  # two levels, two clusters
    for key in ("te_p95", "be_p99"):
        ours = report["validation_rules"]["fitgpp"][key]
        assert ours == pytest.approx(np.mean([headline_figures(r)[key] for r in runs]), rel=1e-12)
    policy = make_policy(f"mine:{out / 'agent.npz'}")
    point = next(p for p in report["curve"] if p["update"] == report["chosen_update"])
    assert lean_ppo.validate(config, policy.network)["objective"] == point["objective"]

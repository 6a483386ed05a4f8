"""agents.evolve: the plan-mode scorer, its search, what it writes and how it is loaded back."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from agents import evolve
from agents.evolve import (
    ROW_NAMES,
    EvolveConfig,
    EvolvedPolicy,
    PlanScoreNetwork,
    centred_ranks,
    coordinate_steps,
    fitness,
    play,
    rule_figures,
    search,
)
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.registry import make_policy

# A search small enough for a test: 300-job paper workloads, two generations.
TINY = dict(n_jobs=300, generations=2, population=2, seeds_per_generation=2, validation_seeds=2, validate_every=1,
            workers=1)  # fmt: skip
WIDTH = len(ROW_NAMES)


def fitgpp_network(hidden: int = 0) -> PlanScoreNetwork:
    return PlanScoreNetwork.fitgpp(24, 4, hidden, np.zeros(WIDTH), np.ones(WIDTH))


@pytest.mark.parametrize("workload", ["paper", "mix"])
def test_the_starting_network_is_fitgpp_in_the_environment(workload):
    # on `mix` every seed is a level with its own cluster (4 to 32 nodes): the rule runs on the level's
    config = EvolveConfig(**{**TINY, "workload": workload})
    seeds = [1_000_000, 1_000_001, 100_000]
    ours = [play(config, fitgpp_network(), s) for s in seeds]
    rule = rule_figures(config, "fitgpp", seeds)
    for a, b in zip(ours, rule, strict=True):
        assert a == pytest.approx(b, rel=1e-12)


def test_the_starting_network_is_fitgpp_inside_the_simulator():
    from schedgym.experiments.runner import run_policy, run_rng
    from schedgym.sim.cluster import resolve_cluster
    from schedgym.workloads.source import WorkloadSource

    cluster = resolve_cluster("paper")
    source = WorkloadSource("paper", n_jobs=300)
    for seed in (0, 1):
        workload = source.seeded(seed, cluster)
        ours = run_policy(EvolvedPolicy(fitgpp_network(hidden=3)), cluster, workload, rng=run_rng(seed))
        rule = run_policy(make_policy("fitgpp"), cluster, workload, rng=run_rng(seed))
        assert np.array_equal(ours.slowdown, rule.slowdown)
        assert ours.n_preemptions == rule.n_preemptions > 0


def test_scores_hand_computed():
    net = PlanScoreNetwork(2, 0, 0, np.zeros(WIDTH), np.full(WIDTH, 2.0), np.ones(WIDTH))
    net = net.with_params(np.arange(WIDTH, dtype=float))
    head = np.zeros(21, dtype=np.float32)
    rows = np.zeros((2, WIDTH), dtype=np.float32)
    rows[0, 3] = 1.0  # score (1 - 2) / 1 * 3 + sum of the others at -2 * weight
    rows[1, 5] = 3.0
    obs = np.concatenate([head, rows.ravel()])
    base = -2.0 * np.arange(WIDTH).sum()
    scores = net.scores(obs, np.array([True, True]))
    assert scores[0] == pytest.approx(base + 3 * 1.0)
    assert scores[1] == pytest.approx(base + 5 * 3.0)
    assert net.act(obs, np.array([True, False])) == 0
    assert net.act(obs, np.array([True, True])) == 1


def test_fitness_hand_computed():
    fitgpp = [{"objective": 2.0, "te_p95": 1.0, "be_p50": 1.0, "be_p95": 10.0, "be_p99": 40.0}]
    k8s = [{"objective": 2.5, "te_p95": 1.2, "be_p50": 0.9, "be_p95": 8.0, "be_p99": 50.0}]
    run = [{"objective": 1.8, "te_p95": 1.1, "be_p50": 0.9, "be_p95": 8.0, "be_p99": 44.0}]
    # -1.8/2 - w * (1.1/1.0 - 1 + 0 + 0 + 44/40 - 1)
    assert fitness(run, fitgpp, k8s, 0.5) == pytest.approx(-0.9 - 0.5 * (0.1 + 0.1))
    assert fitness(run, fitgpp, k8s, 0.0) == pytest.approx(-0.9)


def test_centred_ranks():
    assert centred_ranks(np.array([3.0, 1.0, 2.0])).tolist() == [0.5, -0.5, 0.0]


def test_coordinate_steps_take_the_best_move_and_keep_the_parameters_on_a_tie():
    config = EvolveConfig(generations=2, sigma=0.5)
    theta = np.zeros(WIDTH)
    theta[ROW_NAMES.index("by_fitgpp")] = 2.0
    target = ROW_NAMES.index("victims")

    def fit(candidates, seeds):  # best: victims' weight as high as it goes
        return np.array([c[target] for c in candidates])

    steps = list(coordinate_steps(config, theta, np.random.default_rng(0), fit))
    assert [g for g, _ in steps] == [1, 2]
    assert steps[0][1][target] == pytest.approx(4.0)  # 4 sigma * the starting by_fitgpp weight
    assert steps[1][1][target] == pytest.approx(8.0)
    flat = list(coordinate_steps(config, theta, np.random.default_rng(0), lambda c, s: np.zeros(len(c))))
    assert all(np.array_equal(p, theta) for _, p in flat)


@pytest.mark.parametrize("method", ["es", "coordinate"])
def test_search_is_a_pure_function_of_its_configuration(method, tmp_path):
    config = EvolveConfig(method=method, **TINY)
    a = search(config, log=lambda line: None)
    b = search(EvolveConfig(**{**TINY, "method": method, "workers": 2}), log=lambda line: None)
    assert a["curve"] == [{**p, "seconds": q["seconds"]} for p, q in zip(b["curve"], a["curve"], strict=True)]
    assert a["chosen_generation"] == b["chosen_generation"]
    assert len(a["curve"]) == 3 and a["curve"][0]["objective_minus_fitgpp"] == pytest.approx(0.0, abs=1e-12)


def test_written_agent_loads_as_a_policy_and_decides_as_searched(tmp_path):
    out = tmp_path / "run"
    report = search(EvolveConfig(method="coordinate", **TINY), out, log=lambda line: None)
    assert sorted(p.name for p in out.iterdir()) == ["agent.json", "agent.npz", "training.json"]
    meta = json.loads((out / "agent.json").read_text())
    assert meta["algo"] == "evolved" and meta["env_id"] == "schedgym/PreemptionPlan-v1"
    assert meta["train_command"] == report["command"]
    policy = make_policy(f"mine:{out / 'agent.npz'}")
    assert isinstance(policy, EvolvedPolicy) and policy.name == "mine"
    # The loaded agent, run through compare, gives what the search measured on its validation workloads
    # (the environment and compare draw estimate noise from different generators, so only the chosen
    # network's identity is checked bit for bit here, and its figures through compare below).
    params = np.load(out / "agent.npz")["params"]
    assert np.array_equal(policy.network.params, params)
    result = run_comparison(CompareConfig(policies=("fitgpp", f"mine:{out / 'agent.npz'}"), seeds=2, n_jobs=300))
    assert set(result.runs) == {"fitgpp", "mine"}


def test_a_broken_agent_file_is_one_error(tmp_path):
    out = tmp_path / "run"
    search(EvolveConfig(**TINY), out, log=lambda line: None)
    (out / "agent.npz").write_bytes(b"not a zip")
    with pytest.raises(SchedGymError, match="not an agent saved by 'python -m agents.evolve'"):
        make_policy(f"mine:{out / 'agent.npz'}")
    np.savez(out / "agent.npz", params=np.zeros(3), row_mean=np.zeros(WIDTH), row_scale=np.ones(WIDTH))
    with pytest.raises(SchedGymError, match="expected 22 parameters"):
        make_policy(f"mine:{out / 'agent.npz'}")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"method": "sgd"}, "method"),
        ({"population": 0}, "population"),
        ({"sigma": 0.0}, "sigma"),
        ({"tail_weight": -1.0}, "tail_weight"),
        ({"hidden": -1}, "hidden"),
    ],
)
def test_bad_configuration_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        EvolveConfig(**overrides)


@pytest.mark.parametrize("trainer", ["evolve", "lean_ppo"])  # both check with check_episode_workload
@pytest.mark.parametrize(
    "workload, got",
    [("philly", "'philly', a bundled trace"), ("alibaba2023", "'alibaba2023', a bundled trace"),
     ("/tmp/t.csv", "'/tmp/t.csv'")],
)  # fmt: skip
def test_a_workload_without_workload_seeds_is_refused_by_name(trainer, workload, got, tmp_path, capsys):
    # Episodes are replayed by workload seed: a trace used to fail at the first reset, on options['workload_seed'].
    from agents import lean_ppo

    module, config = {"evolve": (evolve, EvolveConfig), "lean_ppo": (lean_ppo, lean_ppo.LeanPPOConfig)}[trainer]
    expected = f"Expected workload to be a synthetic preset (paper, realistic) or 'mix', got {got}"
    with pytest.raises(ConfigError) as err:
        config(workload=workload)
    assert str(err.value) == expected
    assert module.main(["--out", str(tmp_path / "x"), "--workload", workload]) == 2
    assert capsys.readouterr().err == f"schedgym: error: {expected}\n"
    assert not (tmp_path / "x").exists()
    assert config(workload="mix").workload == "mix"


def test_command_line_errors_are_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "agents.evolve", "--out", str(tmp_path / "x"), "--sigma", "0"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["schedgym: error: Expected sigma > 0, got 0.0"]
    assert not (tmp_path / "x").exists()


def test_command_line_writes_the_set_and_the_figure(tmp_path):
    pytest.importorskip("matplotlib")
    args = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    out, plot = tmp_path / "run", tmp_path / "training.png"
    assert evolve.main(["--out", str(out), "--plot", str(plot), *args]) == 0
    assert plot.stat().st_size > 1000
    assert evolve.main(["--out", str(tmp_path / "bare"), *args]) == 0  # no figure asked: none needed
    assert sorted(p.name for p in (tmp_path / "bare").iterdir()) == ["agent.json", "agent.npz", "training.json"]
    report = json.loads((out / "training.json").read_text())
    assert report["command"] == "python -m agents.evolve --out DIR " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in TINY.items() if v != getattr(EvolveConfig(), k)
    )


def test_starting_network_file_round_trip():
    net = fitgpp_network(hidden=2)
    again = PlanScoreNetwork.from_arrays(net.arrays(), net.spec())
    assert np.array_equal(again.params, net.params) and again.spec() == net.spec()
    with pytest.raises(ValueError):
        PlanScoreNetwork.from_arrays({**net.arrays(), "row_scale": np.zeros(WIDTH)}, net.spec())

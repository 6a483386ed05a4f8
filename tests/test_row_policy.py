"""The row scorer (agents/row_policy.py, ``schedgym train --policy rows``): its logits follow the candidate rows
(permutation-equivariant, blind to padding), its numpy evaluation (agents/inference.py) picks what SB3's
predict picks, it trains and is compared like any agent, and it imitates fitgpp far better than the MLP."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from helpers import TINY, acts_like_sb3

pytest.importorskip("sb3_contrib")

import torch  # noqa: E402
from sb3_contrib import MaskablePPO  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

import schedgym  # noqa: E402, F401  (registers the environment ids)
from agents.inference import RowScorerNetwork, load_policy_network  # noqa: E402
from agents.learned import LearnedPolicy, SB3Network, load_agent  # noqa: E402
from agents.row_policy import PADDING_LOGIT, ROW_WIDTH, MaskableRowScorerPolicy, RowScorerPolicy  # noqa: E402
from agents.train import TrainConfig, train  # noqa: E402
from schedgym.decision.features import N_HEAD, observation_size  # noqa: E402
from schedgym.envs import IllegalActionAsWait  # noqa: E402
from schedgym.errors import ConfigError, SchedGymError  # noqa: E402
from schedgym.experiments.compare import CompareConfig, run_comparison  # noqa: E402
from schedgym.experiments.runner import run_policy  # noqa: E402
from schedgym.sim import cluster_preset  # noqa: E402
from schedgym.workloads import generate, preset  # noqa: E402

K = 8  # candidate rows in the torch-only tests


def _policy(cls: type = MaskableRowScorerPolicy, k: int = K, **kwargs) -> torch.nn.Module:
    """A fresh row scorer for ``k`` rows; without SB3's orthogonal init, so that its logits are far from 0
    and the comparisons below are not decided by their tolerance."""
    space = gym.spaces.Box(0.0, 1.0, (observation_size(k),), np.float32)
    kwargs = {"net_arch": [16, 16], "ortho_init": False, **kwargs}
    torch.manual_seed(0)
    policy = cls(space, gym.spaces.Discrete(k + 1), lambda _: 3e-4, **kwargs)
    policy.set_training_mode(False)
    return policy


def _observations(seed: int, n: int, k: int = K, *, prefix: bool = True, scale: float = 1.0) -> np.ndarray:
    """Random observations: ``prefix`` rows valid (a random number of them, padding zero, as the environment
    writes them), or each row valid or not at random with its features kept (padding with garbage)."""
    rng = np.random.default_rng(seed)
    obs = rng.random((n, observation_size(k)), dtype=np.float32) * np.float32(scale)
    rows = obs[:, N_HEAD:].reshape(n, k, ROW_WIDTH)
    if prefix:
        valid = np.arange(k)[None] < rng.integers(0, k + 1, size=(n, 1))
        rows *= valid[..., None]
    else:
        valid = rng.random((n, k)) < 0.5
    rows[..., 0] = valid
    return obs.astype(np.float32)


def _logits_and_value(policy: torch.nn.Module, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        features = policy.extract_features(torch.as_tensor(obs))
        logits, latent_vf = policy.mlp_extractor(features)
        return logits.numpy(), policy.value_net(latent_vf).numpy()


def _valid(obs: np.ndarray, k: int = K) -> np.ndarray:
    return obs[:, N_HEAD:].reshape(len(obs), k, ROW_WIDTH)[..., 0] > 0.5


# --- the architecture ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [MaskableRowScorerPolicy, RowScorerPolicy])
def test_permuting_rows_permutes_their_logits_and_leaves_stop_and_value(cls):
    policy = _policy(cls)
    obs = _observations(0, 200, prefix=False)
    logits, value = _logits_and_value(policy, obs)
    rng = np.random.default_rng(1)
    for _ in range(5):
        perm = rng.permutation(K)
        shuffled = obs.copy()
        rows = shuffled[:, N_HEAD:].reshape(len(obs), K, ROW_WIDTH)
        rows[:] = obs[:, N_HEAD:].reshape(len(obs), K, ROW_WIDTH)[:, perm]
        new_logits, new_value = _logits_and_value(policy, shuffled)
        np.testing.assert_allclose(new_logits[:, 1:], logits[:, 1:][:, perm], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_logits[:, 0], logits[:, 0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_value, value, rtol=1e-5, atol=1e-6)
    assert np.abs(logits[:, 0]).mean() > 1e-2  # the comparisons above are not all about zeros


def test_padding_rows_change_nothing():
    policy = _policy()
    clean = _observations(2, 300)  # padding rows are zeros, as the environment writes them
    valid = _valid(clean)
    garbage = clean.copy()
    rows = garbage[:, N_HEAD:].reshape(len(clean), K, ROW_WIDTH)
    noise = np.random.default_rng(3).random(rows.shape, dtype=np.float32)
    noise[..., 0] = 0.4  # not valid (> 0.5 is), but not zero either
    rows[~valid] = noise[~valid]
    (logits, value), (dirty_logits, dirty_value) = _logits_and_value(policy, clean), _logits_and_value(policy, garbage)
    np.testing.assert_array_equal(dirty_logits, logits)
    np.testing.assert_array_equal(dirty_value, value)
    assert (logits[:, 1:][~valid] == np.float32(PADDING_LOGIT)).all()
    assert (logits[:, 1:][valid] != np.float32(PADDING_LOGIT)).all()


def test_without_masks_padding_rows_are_never_chosen():
    """PPO reads no masks: the scorer itself keeps its choice among the real rows and "preempt nothing"."""
    policy = _policy(RowScorerPolicy)
    with torch.no_grad():
        policy.mlp_extractor.stop_out.bias.fill_(-100.0)  # never "preempt nothing" while a row is there
    obs = _observations(4, 500)
    actions = policy.predict(obs, deterministic=True)[0]
    n_valid = _valid(obs).sum(axis=1)
    assert (n_valid == 0).any() and (0 < n_valid).any() and (n_valid < K).any()
    np.testing.assert_array_equal(actions == 0, n_valid == 0)
    assert (actions <= n_valid).all()


def test_a_model_with_the_row_scorer_learns_saves_and_loads(tmp_path):
    env = gym.make("schedgym/Preemption-v1", n_jobs=150)
    model = MaskablePPO(MaskableRowScorerPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu")
    model.learn(64)
    model.save(tmp_path / "m.zip")
    loaded = MaskablePPO.load(tmp_path / "m.zip", device="cpu")
    assert isinstance(loaded.policy, MaskableRowScorerPolicy)
    obs = _observations(5, 50, 16)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_train_config_checks_the_policy():
    with pytest.raises(ConfigError, match="Expected policy 'mlp' or 'rows', got 'cnn'"):
        TrainConfig.of(policy="cnn")
    with pytest.raises(ConfigError, match="policy 'rows' needs an actor-critic algorithm"):
        TrainConfig.of(policy="rows", algo="dqn")


# --- numpy evaluation against stable-baselines3 ---------------------------------------------------------------

FRESH = [
    ("maskable_ppo", {}),
    ("maskable_ppo", {"ortho_init": False}),
    ("maskable_ppo", {"activation_fn": "ReLU", "net_arch": [8]}),
    ("ppo", {}),
    ("ppo", {"activation_fn": "ReLU", "net_arch": [16, 8], "ortho_init": False}),
]


@pytest.fixture(scope="module")
def recorded() -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks of the environment (16 rows), recorded while fitgpp decides: most hold rows with
    identical features, whose logits must tie exactly on both sides."""
    from agents.imitation import Demonstrations, ImitationRecorder
    from schedgym.registry import make_policy

    cluster = cluster_preset("paper")
    demos = Demonstrations()
    for seed in range(2):
        wl = generate(preset("paper", n_jobs=400), cluster, np.random.default_rng(seed))
        recorder = ImitationRecorder(make_policy("fitgpp"), demos, max_candidates=16, estimate_noise=0.3)
        run_policy(recorder, cluster, wl, rng=np.random.default_rng(seed))
    obs, masks, _ = demos.arrays()
    return obs, masks


@pytest.mark.parametrize(("algo", "policy_kwargs"), FRESH, ids=[f"{a}-{k}" for a, k in FRESH])
def test_numpy_row_scorer_picks_what_predict_picks(tmp_path, recorded, algo, policy_kwargs):
    env = gym.make("schedgym/Preemption-v1", n_jobs=150)
    kwargs = {"net_arch": [32, 32], **policy_kwargs}
    if "activation_fn" in kwargs:
        kwargs["activation_fn"] = getattr(torch.nn, kwargs["activation_fn"])
    if algo == "maskable_ppo":
        model = MaskablePPO(MaskableRowScorerPolicy, env, policy_kwargs=kwargs, seed=0, device="cpu")
    else:
        model = PPO(RowScorerPolicy, IllegalActionAsWait(env), policy_kwargs=kwargs, seed=0, device="cpu")
    model.save(tmp_path / "model.zip")
    net = load_policy_network(tmp_path / "model.zip", algo)
    assert isinstance(net, RowScorerNetwork)
    assert (net.obs_dim, net.n_actions, net.activation) == (228, 17, policy_kwargs.get("activation_fn", "Tanh"))
    # Untrained logits are tiny (gain 0.01): near-ties, which SB3's float32 softmax makes exact and the numpy
    # side must break the same way. Not tested: rows made nearly identical by scaling random observations by
    # 1e-3, where 0.25% of the actions differ. Their logits differ by ~1e-8, and whether torch's float32 sgemm
    # or numpy's float64 rounds one of them up decides the tie; no float32 numpy forward pass did better.
    # Environment observations (below, and 240,000 more with 16 and 64 rows) agreed on every action.
    rng = np.random.default_rng(0)
    random = [_observations(seed, 3000, 16, prefix=prefix) for seed, prefix in ((0, True), (1, False))]
    for obs, env_masks in [(o, None) for o in random] + [recorded]:
        masks = np.concatenate([np.ones((len(obs), 1), bool), _valid(obs, 16) & (rng.random((len(obs), 16)) < 0.8)], 1)
        for mask in (masks, env_masks) if env_masks is not None else (masks,):
            if algo == "maskable_ppo":
                expected = model.predict(obs, action_masks=mask, deterministic=True)[0]
                np.testing.assert_array_equal(net.act_batch(obs, mask), expected)
        np.testing.assert_array_equal(net.act_batch(obs), model.predict(obs, deterministic=True)[0])
        with torch.no_grad():
            logits = model.policy.mlp_extractor.forward_actor(torch.as_tensor(obs)).numpy()
        np.testing.assert_allclose(net.logits_batch(obs), logits, rtol=1e-5, atol=1e-7)
    single = {"action_masks": masks[0]} if algo == "maskable_ppo" else {}
    assert net.act(obs[0], single.get("action_masks")) == model.predict(obs[0], deterministic=True, **single)[0]


def _fresh_maskable(tmp_path: Path, **kwargs) -> Path:
    env = gym.make("schedgym/Preemption-v1", n_jobs=150)
    MaskablePPO(MaskableRowScorerPolicy, env, seed=0, device="cpu", **kwargs).save(tmp_path / "model.zip")
    return tmp_path / "model.zip"


def test_damaged_row_scorers_are_refused(tmp_path):
    path = _fresh_maskable(tmp_path)
    with pytest.raises(SchedGymError, match="a row scorer is an actor-critic policy"):
        load_policy_network(path, "dqn")
    with pytest.raises(SchedGymError, match=r"says policy 'mlp', but its parameters are those of 'rows'"):
        load_policy_network(path, "maskable_ppo", "mlp")
    model = MaskablePPO.load(path, device="cpu")
    state = model.policy.state_dict()
    two_scores = {"mlp_extractor.row_out.weight": torch.zeros(2, 64), "mlp_extractor.row_out.bias": torch.zeros(2)}
    for key, change, message in (
        ("mlp_extractor.stop_out.weight", None, r"it has parameters \['mlp_extractor\.stop_out\.weight'\]"),
        ("mlp_extractor.row_out.weight", two_scores, "its layer shapes do not chain"),
        ("mlp_extractor.actor_rows.0.bias", {"mlp_extractor.actor_rows.0.bias": torch.zeros(3)}, "a bias does not"),
    ):
        changed = dict(state)
        if change is None:
            del changed[key]
        else:
            changed.update(change)
        bad = tmp_path / f"bad_{key}.zip"
        _save_with_state(path, bad, changed)
        with pytest.raises(SchedGymError, match=rf"not a supported row-scorer model .*{message}"):
            load_policy_network(bad, "maskable_ppo")


def _save_with_state(source: Path, target: Path, state: dict) -> None:
    """A copy of the model at ``source`` whose policy.pth holds ``state``."""
    import io
    import zipfile

    buffer = io.BytesIO()
    torch.save(state, buffer)
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, buffer.getvalue() if name == "policy.pth" else src.read(name))


def test_an_mlp_described_as_rows_is_refused(tmp_path):
    env = gym.make("schedgym/Preemption-v1")
    MaskablePPO("MlpPolicy", env, seed=0, device="cpu").save(tmp_path / "mlp.zip")
    meta = {"algo": "maskable_ppo", "env_id": "schedgym/Preemption-v1", "train_config": {"policy": "rows"}}
    (tmp_path / "mlp.json").write_text(json.dumps(meta))
    with pytest.raises(SchedGymError, match=r"says policy 'rows', but its parameters are those of 'mlp'"):
        load_agent(tmp_path / "mlp.zip")
    (tmp_path / "mlp.json").write_text(json.dumps({**meta, "train_config": {"policy": "cnn"}}))
    with pytest.raises(SchedGymError, match="unknown policy architecture 'cnn'"):
        load_agent(tmp_path / "mlp.zip")
    (tmp_path / "mlp.json").write_text(json.dumps({**meta, "train_config": {}}))  # older runs: no policy
    assert load_agent(tmp_path / "mlp.zip").network.n_actions == 17


# --- training, evaluation and comparison ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny MaskablePPO run with the row scorer (a smoke test, not a benchmark)."""
    return train(TrainConfig.of(run_dir=str(tmp_path_factory.mktemp("runs")), policy="rows", **TINY))


def test_a_row_scorer_run_records_its_policy_and_loads_in_numpy(trained):
    for stem in ("model", "best_model"):
        meta = json.loads((trained / f"{stem}.json").read_text())
        assert meta["train_config"]["policy"] == "rows"
    agent = load_agent(trained / "model.zip")
    assert isinstance(agent.network, RowScorerNetwork) and agent.maskable


def test_a_row_scorer_decides_as_the_sb3_model_in_whole_episodes(trained):
    net = load_agent(trained / "model.zip").network
    model = MaskablePPO.load(trained / "model.zip", device="cpu")
    assert acts_like_sb3(net, model, gym.make("schedgym/Preemption-v1", n_jobs=1000), seeds=range(5)) > 50
    # ... and inside the simulator, as schedgym compare runs it.
    sb3_agent = LearnedPolicy(SB3Network(model, maskable=True), max_candidates=16, estimate_noise=0.3)
    cluster = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=300), cluster, np.random.default_rng(0))
    a = run_policy(load_agent(trained / "model.zip"), cluster, wl, rng=np.random.default_rng(0))
    b = run_policy(sb3_agent, cluster, wl, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(a.completion, b.completion)
    np.testing.assert_array_equal(a.preemptions, b.preemptions)


def test_compare_runs_a_row_scorer_by_path(trained, tmp_path):
    shutil.copy(trained / "model.zip", tmp_path / "rows.zip")
    shutil.copy(trained / "model.json", tmp_path / "rows.json")
    config = CompareConfig(policies=("fitgpp", f"mine:{tmp_path / 'rows.zip'}"), seeds=1, n_jobs=200)
    result = run_comparison(config, progress=False)
    assert len(result.runs["mine"]) == 1 and result.runs["mine"][0].job_ids == result.runs["fitgpp"][0].job_ids


# --- imitation --------------------------------------------------------------------------------------------------


def test_the_row_scorer_imitates_fitgpp_far_better_than_the_mlp():
    """Behaviour cloning of fitgpp on the same 1,012 decisions (64 rows) with the same budget for both (10
    epochs, learning rate 1e-3, 32x32). Measured: the row scorer agrees with 39.0% of its labels, the MLP with
    7.0% (on 2,012 held-out decisions 38.6% and 5.2%; with 64x64, 51.1% and 8.1%; given 50 epochs the 64x64
    MLP memorises more of so few decisions, 48.7%, against the row scorer's 59.6%)."""
    from agents.imitation import Demonstrations, ImitationRecorder, pretrain
    from schedgym.registry import make_policy

    cluster = cluster_preset("paper")
    demos = Demonstrations()
    seed = 0
    while len(demos) < 1000:
        wl = generate(preset("paper", n_jobs=500), cluster, np.random.default_rng(seed))
        recorder = ImitationRecorder(make_policy("fitgpp"), demos, max_candidates=64, estimate_noise=0.3)
        run_policy(recorder, cluster, wl, rng=np.random.default_rng(seed))
        seed += 1
    env = gym.make("schedgym/Preemption-v1", max_candidates=64, n_jobs=150)
    agreement = {}
    for name, policy in (("mlp", "MlpPolicy"), ("rows", MaskableRowScorerPolicy)):
        model = MaskablePPO(policy, env, policy_kwargs={"net_arch": [32, 32]}, seed=0, device="cpu")
        fit = pretrain(model, demos, epochs=10, batch_size=128, learning_rate=1e-3, maskable=True, seed=0)
        agreement[name] = fit["agreement"]
    assert agreement["rows"] > 0.3 and agreement["rows"] > agreement["mlp"] + 0.2, agreement


def test_ppo_trains_with_the_row_scorer_and_is_evaluated_without_masks(tmp_path):
    run_dir = train(TrainConfig.of(run_dir=str(tmp_path), algo="ppo", policy="rows", **TINY))
    agent = load_agent(run_dir / "model.zip")
    assert isinstance(agent.network, RowScorerNetwork) and not agent.maskable
    model = PPO.load(run_dir / "model.zip", device="cpu")
    assert isinstance(model.policy, RowScorerPolicy)
    cluster = cluster_preset("paper")
    wl = generate(preset("paper", n_jobs=300), cluster, np.random.default_rng(0))
    run_policy(agent, cluster, wl, rng=np.random.default_rng(0))
    assert agent.n_actions > 0 and agent.n_illegal == 0  # padding rows are never chosen, even without masks

"""Numpy inference of saved stable-baselines3 agents (agents.inference): the action SB3's predict picks, with
no torch and no pickled code run, and a clear SchedGymError for every file it cannot read.

The first half needs no torch: it reads the bundled model and torch-format files written by hand here. The
second half compares against SB3 itself and is skipped without the ``rl`` extra."""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from helpers import acts_like_sb3, run_cli

import agents.inference
import schedgym  # noqa: F401  (registers the environment ids)
from agents.inference import MlpPolicyNetwork, greedy, load_policy_network
from schedgym.errors import SchedGymError

BUNDLED = Path(agents.inference.__file__).parent / "bundled" / "ppo_paper.zip"


# --- torch's file format, written by hand -------------------------------------------------------------------


def _str(s: str) -> bytes:
    return b"X" + struct.pack("<I", len(s.encode())) + s.encode()


def _ints(*values: int) -> bytes:
    return b"(" + b"".join(b"J" + struct.pack("<i", v) for v in values) + b"t"


def _tensor_pickle(tensors: dict[str, tuple[str, str, tuple[int, ...], tuple[int, ...], int]]) -> bytes:
    """The protocol-2 pickle torch.save writes for a state dict: name -> (storage type, key, size, stride,
    offset), using the same opcodes (GLOBAL, BINPERSID, REDUCE)."""
    out = b"\x80\x02ccollections\nOrderedDict\n)R("
    for name, (kind, key, size, stride, offset) in tensors.items():
        pid = b"(" + _str("storage") + f"ctorch\n{kind}\n".encode() + _str(key) + _str("cpu") + b"J\x00\x00\x00\x00tQ"
        args = (
            pid
            + b"J"
            + struct.pack("<i", offset)
            + _ints(*size)
            + _ints(*stride)
            + b"\x89ccollections\nOrderedDict\n)R"
        )
        out += _str(name) + b"ctorch._utils\n_rebuild_tensor_v2\n(" + args + b"tR"
    return out + b"u."


def _write_model(path: Path, pickled: bytes, storages: dict[str, bytes], data: dict, byteorder: str = "little") -> Path:
    """An SB3-style zip: ``data`` (JSON) and ``policy.pth`` (torch's zip: archive/data.pkl, data/<key>)."""
    inner = path.with_suffix(".pth")
    with zipfile.ZipFile(inner, "w") as pth:
        pth.writestr("archive/data.pkl", pickled)
        pth.writestr("archive/byteorder", byteorder)
        for key, raw in storages.items():
            pth.writestr(f"archive/data/{key}", raw)
    with zipfile.ZipFile(path, "w") as model:
        model.writestr("data", json.dumps(data))
        model.write(inner, "policy.pth")
    return path


def _tiny_ppo(path: Path, *, transposed: bool = False, byteorder: str = "little", data: dict | None = None) -> Path:
    """A PPO actor 3 -> 2 (tanh) -> 2 with known weights; ``transposed`` stores the first weight column-major
    (a non-contiguous tensor), ``byteorder="big"`` stores big-endian floats."""
    w0, b0 = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]]), np.array([0.1, -0.1])
    w1, b1 = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0.0, 0.2])
    dtype = ">f4" if byteorder == "big" else "<f4"
    raw = {"0": (w0.T if transposed else w0).astype(dtype).tobytes(), "1": b0.astype(dtype).tobytes()}
    raw |= {"2": w1.astype(dtype).tobytes(), "3": b1.astype(dtype).tobytes()}
    tensors = {
        "mlp_extractor.policy_net.0.weight": ("FloatStorage", "0", (2, 3), (1, 2) if transposed else (3, 1), 0),
        "mlp_extractor.policy_net.0.bias": ("FloatStorage", "1", (2,), (1,), 0),
        "action_net.weight": ("FloatStorage", "2", (2, 2), (2, 1), 0),
        "action_net.bias": ("FloatStorage", "3", (2,), (1,), 0),
    }
    return _write_model(path, _tensor_pickle(tensors), raw, data or {"policy_kwargs": {}}, byteorder)


def _tiny_expected(obs: np.ndarray) -> int:
    hidden = np.tanh(np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]]) @ obs + [0.1, -0.1])
    return int(np.argmax(hidden + [0.0, 0.2]))


def _kwargs_blob(pickle_text: str) -> dict:
    """policy_kwargs as SB3 writes them when they hold a class: a base64 pickle (protocol 0 here) beside JSON."""
    return {":type:": "<class 'dict'>", ":serialized:": base64.b64encode(pickle_text.encode()).decode()}


# --- without torch ------------------------------------------------------------------------------------------


def test_bundled_model_is_read_without_torch():
    net = load_policy_network(BUNDLED, "maskable_ppo")
    assert isinstance(net, MlpPolicyNetwork)
    assert (net.obs_dim, net.n_actions, net.activation) == (228, 17, "Tanh")
    assert [w.shape for w, _ in net.layers] == [(128, 228), (128, 128), (17, 128)]
    obs = np.random.default_rng(0).random((50, 228), dtype=np.float32)
    masks = np.ones((50, 17), bool)
    masks[:, 1:] = False  # only "wait" legal
    assert (net.act_batch(obs, masks) == 0).all()
    single = [net.act(o) for o in obs]
    assert net.act_batch(obs).tolist() == single and all(isinstance(a, int) for a in single)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_hand_written_state_dict_is_computed_exactly(tmp_path, transposed, byteorder):
    net = load_policy_network(_tiny_ppo(tmp_path / "m.zip", transposed=transposed, byteorder=byteorder), "ppo")
    assert (net.obs_dim, net.n_actions, net.activation) == (3, 2, "Tanh")
    np.testing.assert_array_equal(net.layers[0][0], [[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]])
    for obs in np.random.default_rng(1).random((200, 3), dtype=np.float32):
        assert net.act(obs) == _tiny_expected(obs.astype(np.float64))


@pytest.mark.parametrize(
    ("kwargs", "activation"),
    [
        ({}, "Tanh"),
        (_kwargs_blob("(dp0\nVactivation_fn\np1\nctorch.nn.modules.activation\nReLU\np2\ns."), "ReLU"),
        (
            _kwargs_blob("(dp0\nVnet_arch\np1\n(lp2\nI2\nasVactivation_fn\np3\nctorch.nn\nLeakyReLU\np4\ns."),
            "LeakyReLU",
        ),
    ],
)
def test_activation_is_read_from_the_pickled_policy_kwargs_without_unpickling(tmp_path, kwargs, activation):
    net = load_policy_network(_tiny_ppo(tmp_path / "m.zip", data={"policy_kwargs": kwargs}), "ppo")
    assert net.activation == activation


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        ("(dp0\nVactivation_fn\np1\nctorch.nn.modules.activation\nGELU\np2\ns.", "activation .*GELU is not supported"),
        ("(dp0\nVactivation_fn\np1\ncos\nsystem\np2\ns.", "activation os.system is not supported"),
        ("(dp0\nVfeatures_extractor_class\np1\ncmine\nConvExtractor\np2\ns.", "not a supported MLP model"),
    ],
)
def test_unsupported_policy_kwargs_are_refused(tmp_path, blob, message):
    with pytest.raises(SchedGymError, match=message):
        load_policy_network(_tiny_ppo(tmp_path / "m.zip", data={"policy_kwargs": _kwargs_blob(blob)}), "ppo")


def test_a_forbidden_global_is_refused_and_never_called(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "system", lambda *args: calls.append(args))
    evil = b"\x80\x02cos\nsystem\n" + _str("touch pwned") + b"\x85R."
    path = _write_model(tmp_path / "evil.zip", evil, {}, {"policy_kwargs": {}})
    with pytest.raises(SchedGymError, match=r"evil\.zip: refusing policy\.pth, it refers to os\.system"):
        load_policy_network(path, "maskable_ppo")
    assert calls == []


def test_malformed_files_raise_schedgym_errors(tmp_path):
    not_zip = tmp_path / "model.zip"
    not_zip.write_text("not a zip")
    with pytest.raises(SchedGymError, match=r"model\.zip: not a stable-baselines3 model \(not a zip file"):
        load_policy_network(not_zip, "ppo")
    no_policy = tmp_path / "no_policy.zip"
    with zipfile.ZipFile(no_policy, "w") as z:
        z.writestr("data", "{}")
    with pytest.raises(SchedGymError, match=r"no_policy\.zip: .*the zip has no policy\.pth"):
        load_policy_network(no_policy, "ppo")
    legacy = tmp_path / "legacy.zip"
    with zipfile.ZipFile(legacy, "w") as z:
        z.writestr("data", "{}")
        z.writestr("policy.pth", b"\x80\x02not a zip")  # torch < 1.6 wrote a bare pickle
    with pytest.raises(SchedGymError, match=r"legacy\.zip: policy\.pth is not a torch zip archive"):
        load_policy_network(legacy, "ppo")
    with pytest.raises(SchedGymError, match="cannot read the model"):
        load_policy_network(tmp_path / "missing.zip", "ppo")
    with pytest.raises(SchedGymError, match="Unknown algorithm 'a2c'"):
        load_policy_network(BUNDLED, "a2c")
    with pytest.raises(SchedGymError, match=r"not a dqn model \(its parameters have no q_net\.q_net\.0\.weight\)"):
        load_policy_network(BUNDLED, "dqn")


def test_a_key_given_twice_in_the_data_entry_is_refused(tmp_path):
    # json.loads let the last win: the observation space or policy_kwargs read could be other than the first
    path = _tiny_ppo(tmp_path / "m.zip")
    with zipfile.ZipFile(path) as z:
        pth = z.read("policy.pth")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data", '{"policy_kwargs": {}, "policy_kwargs": {"net_arch": [4]}}')
        z.writestr("policy.pth", pth)
    with pytest.raises(SchedGymError, match=r"m\.zip: not a stable-baselines3 model .*key 'policy_kwargs' given twice"):
        load_policy_network(path, "ppo")


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (("LongStorage", "0", (2, 3), (3, 1), 0), "LongStorage tensors; only float32 and float64"),
        (("FloatStorage", "0", (2, 3), (3, 1), 1), "reaches past the end of its storage"),
        (("FloatStorage", "0", (3, 3), (3, 1), 0), "reaches past the end of its storage"),
        (("FloatStorage", "0", (2, 3), (-3, 1), 0), "malformed tensor"),
    ],
)
def test_bad_tensors_are_refused(tmp_path, tensor, message):
    path = _write_model(tmp_path / "m.zip", _tensor_pickle({"action_net.weight": tensor}), {"0": bytes(24)}, {})
    with pytest.raises(SchedGymError, match=message):
        load_policy_network(path, "ppo")


def test_a_features_extractor_with_weights_is_not_a_supported_mlp(tmp_path):
    tensors = {"features_extractor.cnn.0.weight": ("FloatStorage", "0", (2,), (1,), 0)}
    tensors |= {"action_net.weight": ("FloatStorage", "0", (1, 2), (2, 1), 0)}
    tensors |= {"action_net.bias": ("FloatStorage", "0", (1,), (1,), 0)}
    path = _write_model(tmp_path / "m.zip", _tensor_pickle(tensors), {"0": bytes(8)}, {})
    with pytest.raises(SchedGymError, match=r"not a supported MLP model .*features_extractor\.cnn\.0\.weight"):
        load_policy_network(path, "ppo")


def test_wrong_shapes_are_refused():
    net = load_policy_network(BUNDLED, "maskable_ppo")
    with pytest.raises(SchedGymError, match=r"Expected an observation of shape \(228,\), got \(10,\)"):
        net.act(np.zeros(10, np.float32))
    with pytest.raises(SchedGymError, match=r"Expected an action mask of shape \(17,\), got \(16,\)"):
        net.act(np.zeros(228, np.float32), np.ones(16, bool))
    with pytest.raises(SchedGymError, match=r"Expected observations of shape \(n, 228\), got \(228,\)"):
        net.act_batch(np.zeros(228, np.float32))
    ppo = load_policy_network(BUNDLED, "ppo")  # the same network; PPO's predict takes no masks
    with pytest.raises(SchedGymError, match="reads no action masks"):
        ppo.act(np.zeros(228, np.float32), np.ones(17, bool))


# --- against stable-baselines3 ------------------------------------------------------------------------------


def _random_inputs(seed: int, n: int, obs_dim: int, n_actions: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    obs = (rng.random((n, obs_dim), dtype=np.float32) * np.float32(scale)).astype(np.float32)
    masks = rng.random((n, n_actions)) < 0.5
    masks[:, 0] = True  # "wait" is always legal
    return obs, masks


def test_bundled_model_picks_what_maskable_ppo_predict_picks():
    sb3_contrib = pytest.importorskip("sb3_contrib")
    model = sb3_contrib.MaskablePPO.load(BUNDLED, device="cpu")
    net = load_policy_network(BUNDLED, "maskable_ppo")
    obs, masks = _random_inputs(0, 2000, 228, 17)
    for o, m in zip(obs, masks, strict=True):
        assert net.act(o, m) == model.predict(o, action_masks=m, deterministic=True)[0]
    obs, masks = _random_inputs(1, 50_000, 228, 17)
    np.testing.assert_array_equal(
        net.act_batch(obs, masks), model.predict(obs, action_masks=masks, deterministic=True)[0]
    )
    np.testing.assert_array_equal(net.act_batch(obs), model.predict(obs, deterministic=True)[0])


def test_log_probabilities_are_maskable_ppos_and_their_greedy_action_is_act_batchs():
    sb3_contrib = pytest.importorskip("sb3_contrib")
    import torch

    model = sb3_contrib.MaskablePPO.load(BUNDLED, device="cpu")
    net = load_policy_network(BUNDLED, "maskable_ppo")
    obs, masks = _random_inputs(3, 2000, 228, 17)
    mine = net.log_probabilities_batch(obs, masks)
    assert mine.dtype == np.float32 and (mine[~masks] < -1e7).all()
    np.testing.assert_array_equal(greedy(mine), net.act_batch(obs, masks))
    with torch.no_grad():
        dist = model.policy.get_distribution(torch.as_tensor(obs), action_masks=masks)
        theirs = dist.distribution.logits.numpy()  # normalised: log-probabilities
    np.testing.assert_allclose(mine[masks], theirs[masks], rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.exp(mine).sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(greedy(net.log_probabilities_batch(obs)), net.act_batch(obs))


def test_bundled_model_acts_like_maskable_ppo_in_the_environment():
    sb3_contrib = pytest.importorskip("sb3_contrib")
    model = sb3_contrib.MaskablePPO.load(BUNDLED, device="cpu")
    net = load_policy_network(BUNDLED, "maskable_ppo")
    assert acts_like_sb3(net, model, gym.make("schedgym/Preemption-v1", n_jobs=300), seeds=range(20)) > 50


FRESH = [
    ("maskable_ppo", {"net_arch": [32, 16]}),
    ("maskable_ppo", {"activation_fn": "ReLU", "net_arch": [8]}),
    ("ppo", {"net_arch": [32, 16]}),
    ("ppo", {"activation_fn": "ReLU", "net_arch": [8]}),
    ("dqn", {}),
    ("dqn", {"net_arch": [16, 16]}),
]


@pytest.mark.parametrize(("algo", "policy_kwargs"), FRESH, ids=[f"{a}-{k}" for a, k in FRESH])
def test_fresh_models_pick_what_predict_picks(tmp_path, algo, policy_kwargs):
    pytest.importorskip("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import DQN, PPO

    from schedgym.envs import IllegalActionAsWait

    env = gym.make("schedgym/Preemption-v1", n_jobs=300)
    kwargs = {k: getattr(torch.nn, v) if k == "activation_fn" else v for k, v in policy_kwargs.items()}
    if algo == "maskable_ppo":
        model = MaskablePPO("MlpPolicy", env, policy_kwargs=kwargs, seed=0, device="cpu")
    elif algo == "ppo":
        model = PPO("MlpPolicy", IllegalActionAsWait(env), policy_kwargs=kwargs, seed=0, device="cpu")
    else:
        model = DQN("MlpPolicy", IllegalActionAsWait(env), policy_kwargs=kwargs, seed=0, device="cpu", buffer_size=100)
    model.save(tmp_path / "model.zip")
    net = load_policy_network(tmp_path / "model.zip", algo)
    assert net.activation == policy_kwargs.get("activation_fn", "ReLU" if algo == "dqn" else "Tanh")
    # Untrained PPO logits are tiny (action_net gain 0.01), and smaller still on small observations: there SB3's
    # float32 softmax turns near-equal logits into exact ties, which a plain argmax of the logits gets wrong.
    for scale in (1.0, 1e-3):
        obs, masks = _random_inputs(2, 5000, net.obs_dim, net.n_actions, scale)
        if algo == "maskable_ppo":
            expected = model.predict(obs, action_masks=masks, deterministic=True)[0]
            np.testing.assert_array_equal(net.act_batch(obs, masks), expected)
        np.testing.assert_array_equal(net.act_batch(obs), model.predict(obs, deterministic=True)[0])
    single = {"action_masks": masks[0]} if algo == "maskable_ppo" else {}
    assert net.act(obs[0], single.get("action_masks")) == model.predict(obs[0], deterministic=True, **single)[0]
    if algo == "dqn":  # Q-values are no distribution
        with pytest.raises(SchedGymError, match="Q-values"):
            net.log_probabilities_batch(obs)
    else:
        legal = masks if algo == "maskable_ppo" else None
        np.testing.assert_array_equal(greedy(net.log_probabilities_batch(obs, legal)), net.act_batch(obs, legal))


def test_a_dqn_model_is_not_read_as_ppo(tmp_path):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import DQN

    from schedgym.envs import IllegalActionAsWait

    env = IllegalActionAsWait(gym.make("schedgym/Preemption-v1", n_jobs=300))
    DQN("MlpPolicy", env, seed=0, device="cpu", buffer_size=100).save(tmp_path / "dqn.zip")
    with pytest.raises(SchedGymError, match=r"dqn\.zip: not a ppo model \(its parameters have no action_net\.weight\)"):
        load_policy_network(tmp_path / "dqn.zip", "ppo")
    with pytest.raises(SchedGymError, match="not a maskable_ppo model"):
        load_policy_network(tmp_path / "dqn.zip", "maskable_ppo")


def _torch_saved_model(path: Path, state: dict) -> Path:
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    with zipfile.ZipFile(path, "w") as model:
        model.writestr("data", json.dumps({"policy_kwargs": {}}))
        model.writestr("policy.pth", buffer.getvalue())
    return path


def test_torch_save_files_with_strided_tensors_and_parameters_are_read(tmp_path):
    torch = pytest.importorskip("torch")
    weight = torch.arange(12, dtype=torch.float32).reshape(4, 3).t()  # (3, 4), not contiguous
    bias = torch.arange(8, dtype=torch.float64)[::2][:3]  # stride 2
    net = load_policy_network(
        _torch_saved_model(tmp_path / "m.zip", {"action_net.weight": weight, "action_net.bias": bias}), "ppo"
    )
    np.testing.assert_array_equal(net.layers[0][0], weight.numpy())
    np.testing.assert_array_equal(net.layers[0][1], [0.0, 2.0, 4.0])
    linear = torch.nn.Linear(4, 3)  # nn.Parameter pickles through torch._utils._rebuild_parameter
    state = {"action_net.weight": linear.weight, "action_net.bias": linear.bias}
    net = load_policy_network(_torch_saved_model(tmp_path / "p.zip", state), "ppo")
    np.testing.assert_array_equal(net.layers[0][0], linear.weight.detach().numpy())
    state["action_net.bias"] = torch.zeros(3, dtype=torch.float16)
    with pytest.raises(SchedGymError, match="HalfStorage tensors; only float32 and float64 are supported"):
        load_policy_network(_torch_saved_model(tmp_path / "half.zip", state), "ppo")


def test_an_rllib_actor_gives_no_log_probabilities():
    # its action is the argmax of the masked logits, not the greedy action of a float32 distribution
    net = agents.inference.RLlibActorNetwork(layers=((np.eye(3), np.zeros(3)),), activations=("",))
    assert net.act_batch(np.eye(3)[[2]]).tolist() == [2]
    with pytest.raises(SchedGymError, match="no log-probabilities"):
        net.log_probabilities_batch(np.eye(3))


# --- saved numpy agents: only arrays of real floats -----------------------------------------------------------

LEAN_PPO = BUNDLED.parent / "lean_ppo_paper.npz"
NOT_REAL = [np.complex64, np.complex128, np.int64, np.bool_, "U32"]


def _plan_agent(tmp_path: Path, dtype: object) -> Path:
    """The bundled lean_ppo agent copied to ``tmp_path`` with its params cast to ``dtype``, its .json beside it."""
    with np.load(LEAN_PPO) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["params"] = arrays["params"].astype(dtype)
    path = tmp_path / "lp.npz"
    np.savez(path, **arrays)
    path.with_suffix(".json").write_bytes(LEAN_PPO.with_suffix(".json").read_bytes())
    return path


@pytest.mark.parametrize("dtype", NOT_REAL)
def test_a_saved_plan_agent_whose_params_are_not_real_floats_is_refused(tmp_path, dtype):
    # complex64 params were cast to float64 with a ComplexWarning only (their imaginary parts dropped), integers
    # and booleans passed as numbers, strings were parsed as numbers: each loaded as an agent.
    from agents.learned import load_agent

    path = _plan_agent(tmp_path, dtype)
    with pytest.raises(SchedGymError) as caught:
        load_agent(path)
    assert str(caught.value) == (
        f"{path}: not an agent saved by 'python -m agents.evolve' "
        f"(expected arrays of real floats; params is {np.dtype(dtype)})"
    )


def test_a_complex_saved_agent_is_one_error_line_on_the_command_line(tmp_path):
    path = _plan_agent(tmp_path, np.complex64)
    proc = run_cli("compare", "--seeds", "1", "--jobs", "30", "--policies", f"fifo,me:{path}")
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.splitlines() == [
        f"schedgym: error: {path}: not an agent saved by 'python -m agents.evolve' "
        "(expected arrays of real floats; params is complex64)"
    ]


@pytest.mark.parametrize("hidden", [16.5, 16.0, "16", True, None])
def test_a_saved_plan_agent_whose_sizes_are_not_integers_is_refused(tmp_path, hidden):
    # int() read 16.5, 16.0 and "16" as 16 (and True as 1), and a missing size was a KeyError.
    from agents.learned import load_agent

    path = _plan_agent(tmp_path, np.float64)
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["network"]["hidden"] = hidden
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(SchedGymError, match="expected hidden, max_plans and queue_rows to be integers"):
        load_agent(path)


@pytest.mark.parametrize("dtype", NOT_REAL)
def test_a_plan_student_of_arrays_not_real_floats_is_refused(tmp_path, dtype):
    from agents.plan_imitation import PlanScorerNetwork

    w, b = np.ones((1, 3)), np.zeros(1)
    path = tmp_path / "student.npz"
    np.savez(path, **{"layer0.weight": w.astype(dtype), "layer0.bias": b})
    spec = {"max_plans": 2, "queue_rows": 0, "context": False}
    with pytest.raises(
        ValueError, match=rf"student\.npz: expected arrays of real floats; layer0\.weight is {np.dtype(dtype)}$"
    ):
        PlanScorerNetwork.load(path, spec)
    np.savez(path, **{"layer0.weight": w, "layer0.bias": b})
    assert PlanScorerNetwork.load(path, spec).layers[0][0].dtype == np.float64

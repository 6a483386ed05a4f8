"""Run a saved stable-baselines3 MLP agent with numpy alone: no torch, and no pickled code executed.

``load_policy_network(path, algo)`` reads the ``.zip`` that ``model.save`` writes and returns a
:class:`MlpPolicyNetwork` whose ``act`` picks the action ``model.predict(obs, deterministic=True)`` picks
(with ``action_masks=`` for MaskablePPO). torch is the optional ``rl`` extra; this module needs only the
core install, so a trained agent can be evaluated where torch is not installed.

``policy.pth`` is itself a torch zip archive whose ``data.pkl`` is a pickle. It is read by an unpickler that
knows only the few globals a plain state dict uses and maps them to numpy stand-ins; any other global is
refused, so a crafted file cannot run code.
"""

from __future__ import annotations

import base64
import collections
import io
import json
import math
import pickle
import pickletools
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedgym.errors import SchedGymError

__all__ = ["HUGE_NEG", "MlpPolicyNetwork", "load_policy_network"]

HUGE_NEG = -1e8
"""The logit sb3-contrib's ``MaskableCategorical`` gives masked-out actions (its ``HUGE_NEG``)."""
_HUGE_NEG = np.float32(HUGE_NEG)

# algo -> (prefix of the hidden layers, output layer (None: the last hidden one), SB3's default activation,
# prefixes of the parameters inference ignores: the critic, DQN's target network)
_CRITIC = ("mlp_extractor.value_net.", "value_net.")
_ALGOS: dict[str, tuple[str, str | None, str, tuple[str, ...]]] = {
    "maskable_ppo": ("mlp_extractor.policy_net.", "action_net.", "Tanh", _CRITIC),
    "ppo": ("mlp_extractor.policy_net.", "action_net.", "Tanh", _CRITIC),
    "dqn": ("q_net.q_net.", None, "ReLU", ("q_net_target.q_net.",)),
}

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Tanh": np.tanh,
    "ReLU": lambda x: np.maximum(x, 0.0),
    "LeakyReLU": lambda x: np.where(x > 0, x, 0.01 * x),  # torch's default negative_slope
    "ELU": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),  # alpha = 1
    "Sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),  # no overflow warning for large |x|
}

# torch's legacy storage type names (how a state dict pickles a tensor's element type) -> numpy dtype.
_STORAGES = {"FloatStorage": "f4", "DoubleStorage": "f8"}
_OTHER_STORAGES = {"Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "ComplexFloat", "ComplexDouble"}


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles a torch state dict into ``{name: np.ndarray}``; refuses every global a state dict does not need."""

    def __init__(self, archive: zipfile.ZipFile, root: str, byteorder: str, where: str):
        super().__init__(io.BytesIO(archive.read(f"{root}data.pkl")))
        self.archive, self.root, self.byteorder, self.where = archive, root, byteorder, where
        self.storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self.rebuild_tensor
        if (module, name) == ("torch._utils", "_rebuild_parameter"):
            return lambda data, requires_grad, backward_hooks: data
        if module == "torch" and (name in _STORAGES or name.removesuffix("Storage") in _OTHER_STORAGES):
            return ("storage type", name)  # a marker: persistent_load reads the dtype from it
        raise SchedGymError(
            f"{self.where}: policy.pth refers to {module}.{name}, which a plain MLP state dict "
            "never needs; refusing to load it"
        )

    def persistent_load(self, pid: Any) -> np.ndarray:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[2], str)):
            raise SchedGymError(f"{self.where}: policy.pth holds an object that is not a tensor storage")
        marker, key = pid[1], pid[2]
        if not (isinstance(marker, tuple) and marker[0] == "storage type"):
            raise SchedGymError(f"{self.where}: policy.pth holds a storage of unknown type")
        if marker[1] not in _STORAGES:
            raise SchedGymError(
                f"{self.where}: the model holds {marker[1]} tensors; only float32 and float64 are supported"
            )
        if key not in self.storages:
            raw = self.archive.read(f"{self.root}data/{key}")
            dtype = np.dtype(_STORAGES[marker[1]]).newbyteorder("<" if self.byteorder == "little" else ">")
            if len(raw) % dtype.itemsize:
                raise SchedGymError(f"{self.where}: storage {key} of policy.pth is truncated")
            self.storages[key] = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
        return self.storages[key]

    def rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> np.ndarray:
        """``torch._utils._rebuild_tensor_v2``: a view of ``storage``, checked to stay inside it, then copied."""
        ints = [offset, *size, *stride] if isinstance(size, tuple) and isinstance(stride, tuple) else None
        if (
            not isinstance(storage, np.ndarray)
            or ints is None
            or len(size) != len(stride)
            or not all(isinstance(i, int) and i >= 0 for i in ints)
        ):
            raise SchedGymError(f"{self.where}: policy.pth holds a malformed tensor")
        if 0 in size:
            return np.zeros(size, dtype=storage.dtype)
        if math.prod(size) > storage.size:  # only expanded views do that, and no state dict holds one
            raise SchedGymError(f"{self.where}: a tensor of policy.pth is larger than its storage")
        if offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) >= storage.size:
            raise SchedGymError(f"{self.where}: a tensor of policy.pth reaches past the end of its storage")
        item = storage.itemsize
        view = np.lib.stride_tricks.as_strided(storage[offset:], size, [s * item for s in stride], writeable=False)
        return view.copy()


@dataclass(frozen=True, eq=False)
class MlpPolicyNetwork:
    """The actor of a saved SB3 model: ``layers`` are (weight (out, in), bias (out,)) pairs, ``activation``
    follows every layer but the last. ``masked`` models (MaskablePPO) take an action mask."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    activation: str
    algo: str

    @property
    def obs_dim(self) -> int:
        return int(self.layers[0][0].shape[1])

    @property
    def n_actions(self) -> int:
        return int(self.layers[-1][0].shape[0])

    @property
    def masked(self) -> bool:
        return self.algo == "maskable_ppo"

    def act(self, observation: np.ndarray, action_mask: np.ndarray | None = None) -> int:
        """The action for one observation of shape ``(obs_dim,)``; ``action_mask`` (``n_actions`` booleans,
        MaskablePPO only) marks the legal actions."""
        observation = np.asarray(observation)
        if observation.shape != (self.obs_dim,):
            raise SchedGymError(f"Expected an observation of shape ({self.obs_dim},), got {observation.shape}")
        if action_mask is not None:
            action_mask = np.asarray(action_mask)
            if action_mask.shape != (self.n_actions,):
                raise SchedGymError(f"Expected an action mask of shape ({self.n_actions},), got {action_mask.shape}")
            action_mask = action_mask[None]
        return int(self.act_batch(observation[None], action_mask)[0])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray | None = None) -> np.ndarray:
        """The actions (int64, shape ``(n,)``) for observations of shape ``(n, obs_dim)``."""
        obs = np.asarray(observations)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise SchedGymError(f"Expected observations of shape (n, {self.obs_dim}), got {obs.shape}")
        if action_masks is not None and not self.masked:
            raise SchedGymError(f"A {self.algo} model does not read action masks; pass none")
        if action_masks is not None and np.shape(action_masks) != (len(obs), self.n_actions):
            raise SchedGymError(
                f"Expected action masks of shape ({len(obs)}, {self.n_actions}), got {np.shape(action_masks)}"
            )
        # Forward pass in float64, rounded to float32 at the end: of the strategies tried, the one whose logits
        # most often equal torch's float32 ones bit for bit, and whose actions agreed on every case measured.
        x = obs.astype(np.float32).astype(np.float64)  # SB3 casts observations to float32
        for i, (weight, bias) in enumerate(self.layers):
            x = x @ weight.T + bias
            if i < len(self.layers) - 1:
                x = _ACTIVATIONS[self.activation](x)
        logits = x.astype(np.float32)
        if self.algo == "dqn":
            return np.argmax(logits, axis=1).astype(np.int64)  # ties: the first index, as torch.argmax
        # SB3's deterministic action is the argmax of Categorical(logits=...).probs, not of the logits: torch
        # normalises the logits (minus their logsumexp) and takes a softmax, in float32, which makes
        # near-equal candidates exactly equal, and the first then wins. Untrained models (logits ~1e-3) hit
        # this often, so the same steps are repeated here in float32.
        z = _normalise(logits)
        if self.masked:  # MaskableCategorical normalises again after masking, even without a mask
            z = _normalise(z if action_masks is None else np.where(np.asarray(action_masks, bool), z, _HUGE_NEG))
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return np.argmax(e / e.sum(axis=1, keepdims=True), axis=1).astype(np.int64)


def _normalise(logits: np.ndarray) -> np.ndarray:
    """``logits - logsumexp(logits)`` in float32, as torch.distributions.Categorical computes it."""
    top = logits.max(axis=1, keepdims=True)
    return logits - (np.log(np.exp(logits - top).sum(axis=1, keepdims=True)) + top)


def load_policy_network(path: str | Path, algo: str) -> MlpPolicyNetwork:
    """Read the actor of the SB3 model ``path`` (the ``.zip`` of ``model.save``) trained with ``algo``
    (``"maskable_ppo"``, ``"ppo"`` or ``"dqn"``) without torch; raise SchedGymError if it is not a supported
    MLP model of that algorithm."""
    where = str(path)
    if algo not in _ALGOS:
        raise SchedGymError(f"Unknown algorithm {algo!r} for {where}; expected one of {sorted(_ALGOS)}")
    try:
        with zipfile.ZipFile(path) as outer:
            missing = [name for name in ("data", "policy.pth") if name not in outer.namelist()]
            if missing:
                raise SchedGymError(f"{where}: not a stable-baselines3 model (the zip has no {' or '.join(missing)})")
            data = json.loads(outer.read("data"))
            with zipfile.ZipFile(io.BytesIO(outer.read("policy.pth"))) as archive:
                state = _read_state_dict(archive, where)
    except OSError as exc:
        raise SchedGymError(f"{where}: cannot read the model ({exc.strerror or exc})") from None
    except zipfile.BadZipFile:
        raise SchedGymError(
            f"{where}: not a stable-baselines3 model (not a zip file, or policy.pth is not a torch zip archive)"
        ) from None
    except ValueError:  # json.JSONDecodeError, UnicodeDecodeError
        raise SchedGymError(f"{where}: not a stable-baselines3 model (its data entry is not JSON)") from None
    network = MlpPolicyNetwork(_actor_layers(state, algo, where), _activation(data, algo, where), algo)
    _check_spaces(data, network, where)
    return network


def _read_state_dict(archive: zipfile.ZipFile, where: str) -> dict[str, np.ndarray]:
    roots = [name[: -len("data.pkl")] for name in archive.namelist() if name.endswith("/data.pkl")]
    if len(roots) != 1:
        raise SchedGymError(f"{where}: policy.pth is not a torch zip archive (no single data.pkl)")
    byteorder = "little"  # torch writes no byteorder record on little-endian machines before 1.10
    if f"{roots[0]}byteorder" in archive.namelist():
        byteorder = archive.read(f"{roots[0]}byteorder").decode("ascii", "replace").strip()
    if byteorder not in ("little", "big"):
        raise SchedGymError(f"{where}: policy.pth has an unknown byte order {byteorder!r}")
    try:
        state = _StateDictUnpickler(archive, roots[0], byteorder, where).load()
    except SchedGymError:
        raise
    except Exception as exc:  # any malformed pickle: the stand-ins above are all it can reach
        raise SchedGymError(f"{where}: policy.pth is not a readable state dict ({type(exc).__name__}: {exc})") from None
    if not (
        isinstance(state, dict) and all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items())
    ):
        raise SchedGymError(f"{where}: policy.pth does not hold a state dict of tensors")
    return state


def _actor_layers(state: dict[str, np.ndarray], algo: str, where: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    hidden, out, _, ignored = _ALGOS[algo]
    first = f"{out}weight" if out else f"{hidden}0.weight"
    if first not in state:
        raise SchedGymError(f"{where}: not a {algo} model (its parameters have no {first})")
    unsupported = f"{where}: not a supported MLP model (only SB3's MlpPolicy with a plain flatten features extractor)"
    n_hidden = 0
    while f"{hidden}{2 * n_hidden}.weight" in state:  # Linear at even indices, parameterless activations between
        n_hidden += 1
    names = [f"{hidden}{2 * i}." for i in range(n_hidden)] + ([out] if out else [])
    expected = {name + p for name in names for p in ("weight", "bias")}
    extra = sorted(k for k in state if k not in expected and not k.startswith(ignored))
    if extra or not expected <= state.keys():
        raise SchedGymError(f"{unsupported}; it has parameters {(extra or sorted(expected - state.keys()))[:3]}")
    layers = tuple(
        (state[name + "weight"].astype(np.float64), state[name + "bias"].astype(np.float64)) for name in names
    )
    width = layers[0][0].shape[-1]
    for weight, bias in layers:
        if weight.ndim != 2 or weight.shape[1] != width or bias.shape != weight.shape[:1]:
            raise SchedGymError(f"{unsupported}; its layer shapes do not chain")
        width = weight.shape[0]
    return layers


def _pickled_globals(blob: str) -> dict[str, tuple[str, str]]:
    """The classes and functions a cloudpickled ``dict`` names, by key, read off its opcodes: never unpickled.

    A class is pickled by reference as two strings and STACK_GLOBAL (or one GLOBAL "module name"), right after
    its key; tracking the strings pushed (and memoized) is enough to pair them."""
    pushed: list[Any] = []
    memo: dict[int, Any] = {}
    found: dict[str, tuple[str, str]] = {}
    for op, arg, _ in pickletools.genops(base64.b64decode(blob)):
        if op.name in ("PROTO", "FRAME", "MARK"):
            continue
        if op.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif op.name in ("PUT", "BINPUT", "LONG_BINPUT") and isinstance(arg, int):
            memo[arg] = pushed[-1] if pushed else None
        elif op.name in ("GET", "BINGET", "LONG_BINGET") and isinstance(arg, int):
            pushed.append(memo.get(arg))
        elif op.name in ("GLOBAL", "STACK_GLOBAL"):
            module, name = str(arg).split(" ", 1) if op.name == "GLOBAL" else (pushed.pop(-2), pushed.pop())
            if pushed and isinstance(pushed[-1], str):
                found[pushed[-1]] = (str(module), str(name))
            pushed.append(None)
        else:
            pushed.append(arg if isinstance(arg, str) else None)
    return found


def _activation(data: dict[str, Any], algo: str, where: str) -> str:
    kwargs = data.get("policy_kwargs") or {}
    if not isinstance(kwargs, dict) or ":serialized:" not in kwargs:
        return _ALGOS[algo][2]  # plain JSON: no class in it, so SB3's default activation
    try:
        named = _pickled_globals(kwargs[":serialized:"])
    except Exception:  # noqa: BLE001  (a corrupt blob: SB3 could not read it either)
        raise SchedGymError(f"{where}: its policy_kwargs cannot be read") from None
    extractor = named.get("features_extractor_class", ("", "FlattenExtractor"))
    if extractor[1] != "FlattenExtractor":
        raise SchedGymError(f"{where}: not a supported MLP model (features extractor {'.'.join(extractor)})")
    if "activation_fn" in kwargs and "activation_fn" not in named:  # SB3 also lists the keys in plain JSON
        raise SchedGymError(f"{where}: cannot tell which activation function its policy_kwargs name")
    module, name = named.get("activation_fn", ("torch.nn.modules.activation", _ALGOS[algo][2]))
    if module not in ("torch.nn.modules.activation", "torch.nn") or name not in _ACTIVATIONS:
        raise SchedGymError(
            f"{where}: activation {module}.{name} is not supported; expected one of "
            f"{', '.join(_ACTIVATIONS)} from torch.nn"
        )
    return name


def _check_spaces(data: dict[str, Any], network: MlpPolicyNetwork, where: str) -> None:
    """SB3's data records the spaces (their attributes as JSON, some as repr strings, beside the pickle): the network must read a 1-D Box
    (anything else is preprocessed: one-hot, dict) and choose among n discrete actions starting at 0."""
    obs, act = data.get("observation_space"), data.get("action_space")
    if isinstance(obs, dict) and not ("low" in obs and obs.get("_shape") == [network.obs_dim]):
        raise SchedGymError(
            f"{where}: not a supported MLP model (it reads {obs.get(':type:')} observations of "
            f"shape {obs.get('_shape')}, not a Box of shape ({network.obs_dim},))"
        )
    if isinstance(act, dict) and (str(act.get("n")), str(act.get("start", 0))) != (str(network.n_actions), "0"):
        raise SchedGymError(
            f"{where}: not a supported model (its action space {act.get(':type:')} is not "
            f"Discrete({network.n_actions}))"
        )

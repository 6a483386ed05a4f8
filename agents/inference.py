"""Run a saved stable-baselines3 agent with numpy alone (torch is the optional ``rl`` extra).

``load_policy_network(path, algo)`` reads the ``.zip`` of ``model.save`` into a :class:`MlpPolicyNetwork`
(SB3's ``MlpPolicy``) or a :class:`RowScorerNetwork` (the row scorer of :mod:`agents.row_policy`, ``schedgym
train --policy rows``) whose ``act`` picks the action ``model.predict(obs, deterministic=True)`` picks
(``action_masks=`` for MaskablePPO). Which of the two a file holds is read off its parameter names.
``policy.pth`` in it is a torch zip archive holding a pickle; it is read by an unpickler that knows only the
few globals a plain state dict uses and maps them to numpy stand-ins, so a crafted file cannot run code.

Every zip read here (the model, the ``policy.pth`` archive inside it, an exported ``.npz``) is read by
:class:`_Archive`, within :data:`schedgym.limits.MAX_MODEL_ENTRY_BYTES`: a member's declared size is checked
before it is inflated, an ``.npz`` array's shape before it is allocated, and the bound holds while inflating.
"""

from __future__ import annotations

import base64
import collections
import io
import math
import os
import pickle
import pickletools
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents import strict_json
from schedgym import limits
from schedgym._csvio import open_input, read_bounded
from schedgym.decision.features import CANDIDATE_FEATURES, N_HEAD
from schedgym.errors import SchedGymError

ROW_WIDTH = len(CANDIDATE_FEATURES)  # as agents/row_policy.py, which needs torch

__all__ = [
    "HUGE_NEG",
    "POLICIES",
    "MlpPolicyNetwork",
    "PolicyNetwork",
    "RLlibActorNetwork",
    "RowScorerNetwork",
    "load_policy_network",
    "load_rllib_network",
    "read_npz",
    "rllib_network",
]

HUGE_NEG = -1e8  # the logit sb3-contrib's MaskableCategorical gives masked-out actions

# algo -> (prefix of the hidden Linear layers, output layer (None: the last hidden one), SB3's default
# activation, prefixes of the parameters inference ignores: the critic, DQN's target network)
_CRITIC = ("mlp_extractor.value_net.", "value_net.")
_ALGOS: dict[str, tuple[str, str | None, str, tuple[str, ...]]] = {
    "maskable_ppo": ("mlp_extractor.policy_net.", "action_net.", "Tanh", _CRITIC),
    "ppo": ("mlp_extractor.policy_net.", "action_net.", "Tanh", _CRITIC),
    "dqn": ("q_net.q_net.", None, "ReLU", ("q_net_target.q_net.",)),
}
_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {  # torch.nn classes with their default arguments
    "Tanh": np.tanh,
    "ReLU": lambda x: np.maximum(x, 0.0),
    "LeakyReLU": lambda x: np.where(x > 0, x, 0.01 * x),
    "ELU": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "Sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),  # = 1 / (1 + exp(-x)) without overflow warnings
}
_DTYPES = {"FloatStorage": "f4", "DoubleStorage": "f8"}  # torch's pickled storage type names -> numpy


_LIMIT = "(schedgym.limits.MAX_MODEL_ENTRY_BYTES)"


class _Archive:
    """A zip of a saved model whose members are read within :data:`~schedgym.limits.MAX_MODEL_ENTRY_BYTES`
    (its value when the archive is opened): a member's declared size is checked before it is inflated, and
    no more than that size is inflated, however much the compressed data holds (a header may lie). The
    members read from one archive together stay within the same bound, so that many members of a small file
    cannot each inflate to the limit. ``what`` names a nested archive in messages (``"policy.pth"``)."""

    def __init__(self, archive: zipfile.ZipFile, where: str, what: str = ""):
        self.zip, self.where, self.what = archive, where, what
        self.limit = limits.MAX_MODEL_ENTRY_BYTES
        self.left = self.limit  # bytes the members read so far leave to the others

    def names(self) -> list[str]:
        return self.zip.namelist()

    def _entry(self, name: str) -> str:
        return f"{self.what} entry {name}" if self.what else f"entry {name}"

    def _check(self, name: str, size: int) -> None:
        """Refuse ``size`` bytes (declared in a header) of member ``name`` over the bounds, before reading it."""
        if size > self.limit:
            raise SchedGymError(
                f"{self.where}: {self._entry(name)} is {size:,} bytes, more than {self.limit:,} {_LIMIT}"
            )
        if size > self.left:
            raise SchedGymError(
                f"{self.where}: the entries of {self.what or 'the zip'} hold more than {self.limit:,} bytes in all "
                f"{_LIMIT}"
            )

    def _take(self, name: str, stream: Any, n: int) -> bytes:
        """The ``n`` bytes (checked by :meth:`_check`) of member ``name`` left in ``stream``: at most ``n + 1``
        are inflated, and one more than ``n`` is refused."""
        data = read_bounded(stream, n + 1)
        if len(data) > n:  # Python's zipfile stops at the declared size; this holds whatever reads the stream
            raise SchedGymError(f"{self.where}: {self._entry(name)} inflates to more than the {n:,} bytes it declares")
        self.left -= len(data)
        return data

    def read(self, name: str) -> bytes:
        """Member ``name`` (KeyError if there is none), within the bounds."""
        info = self.zip.getinfo(name)
        self._check(name, info.file_size)
        with self.zip.open(info) as member:
            return self._take(name, member, info.file_size)

    def read_array(self, info: zipfile.ZipInfo) -> np.ndarray:
        """The ``.npy`` member ``info`` as :func:`numpy.load` reads it with ``allow_pickle=False``, its header read
        and its shape checked before anything is allocated: at most the bounds, and the member's declared size.
        ValueError if it is not an array of plain data."""
        name = info.filename
        self._check(name, info.file_size)
        with self.zip.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(member)
            else:  # 3.0 only differs for non-Latin-1 field names, which an exported actor has none of
                raise ValueError(f"unsupported .npy format version {version}")
            if dtype.hasobject or any(n < 0 for n in shape):
                raise ValueError("an object array, or a negative dimension")
            count = math.prod(shape)
            nbytes = count * dtype.itemsize
            if max(count, nbytes) > self.limit:
                raise SchedGymError(
                    f"{self.where}: array {name} of shape {shape} ({dtype}) takes {nbytes:,} bytes, more than "
                    f"{self.limit:,} {_LIMIT}"
                )
            if member.tell() + nbytes != info.file_size:
                raise SchedGymError(
                    f"{self.where}: array {name} is {info.file_size:,} bytes, but its header (shape {shape}, "
                    f"{dtype}) says {member.tell() + nbytes:,}"
                )
            self.left -= member.tell()  # the header counts as the member's bytes too
            data = self._take(name, member, nbytes)
        if len(data) != nbytes:
            raise ValueError(f"{name}: {len(data)} bytes of data, not {nbytes}")
        array = np.frombuffer(data, dtype, count).copy()  # writable, as numpy's own
        return array.reshape(shape[::-1]).transpose() if fortran_order else array.reshape(shape)


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles a torch state dict into ``{name: np.ndarray}``; refuses every global a state dict does not need."""

    def __init__(self, archive: _Archive, root: str, byteorder: str, where: str):
        super().__init__(io.BytesIO(archive.read(f"{root}data.pkl")))
        self.archive, self.root, self.where = archive, root, where
        self.big_endian = byteorder == "big"
        self.storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self.rebuild_tensor
        if (module, name) == ("torch._utils", "_rebuild_parameter"):
            return lambda data, requires_grad, backward_hooks: data
        if module == "torch" and name.endswith("Storage"):
            return ("storage type", name)  # a marker; persistent_load refuses all but float32 and float64
        raise SchedGymError(f"{self.where}: refusing policy.pth, it refers to {module}.{name} (not in a state dict)")

    def persistent_load(self, pid: Any) -> np.ndarray:
        """``('storage', type, key, location, numel)`` -> the raw ``data/<key>`` record as a 1-D array."""
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], tuple)):
            raise SchedGymError(f"{self.where}: policy.pth holds an object that is not a tensor storage")
        kind, key = pid[1][-1], str(pid[2])
        if kind not in _DTYPES:
            raise SchedGymError(f"{self.where}: the model holds {kind} tensors; only float32 and float64 are supported")
        if key not in self.storages:
            raw = self.archive.read(f"{self.root}data/{key}")
            dtype = np.dtype(_DTYPES[kind]).newbyteorder(">" if self.big_endian else "<")
            self.storages[key] = np.frombuffer(raw, dtype, len(raw) // dtype.itemsize).astype(dtype.newbyteorder("="))
        return self.storages[key]

    def rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> np.ndarray:
        """``torch._utils._rebuild_tensor_v2``: a view of ``storage``, checked to stay inside it, copied."""
        ok = isinstance(storage, np.ndarray) and isinstance(size, tuple) and isinstance(stride, tuple)
        if not (
            ok and len(size) == len(stride) and all(isinstance(i, int) and i >= 0 for i in (offset, *size, *stride))
        ):
            raise SchedGymError(f"{self.where}: policy.pth holds a malformed tensor")
        if 0 in size:
            return np.zeros(size, storage.dtype)
        end = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if end >= storage.size or math.prod(size) > storage.size:  # the latter: only expanded views, never saved
            raise SchedGymError(f"{self.where}: a tensor of policy.pth reaches past the end of its storage")
        strides = [s * storage.itemsize for s in stride]
        return np.lib.stride_tricks.as_strided(storage[offset:], size, strides, writeable=False).copy()


POLICIES = ("mlp", "rows")
"""the policy architectures read here: SB3's MlpPolicy, and the row scorer of :mod:`agents.row_policy`"""
_ROWS = "mlp_extractor."  # the row scorer's parameters (agents/row_policy.py RowScorer), under this prefix
_ROW_CRITIC = (f"{_ROWS}critic_rows.", f"{_ROWS}critic.", "value_net.")
_CHUNK = 1024  # observations per row-scorer forward pass: (chunk, rows, hidden) float64 arrays stay small

Layers = tuple[tuple[np.ndarray, np.ndarray], ...]
"""(weight (out, in), bias (out,)) pairs in float64"""


class PolicyNetwork:
    """The actor of a saved SB3 model evaluated in numpy: subclasses give the logits, this class checks the
    inputs and picks the action SB3's ``predict(..., deterministic=True)`` picks from them."""

    algo: str
    activation: str

    @property
    def obs_dim(self) -> int:  # pragma: no cover  (abstract)
        raise NotImplementedError

    @property
    def n_actions(self) -> int:  # pragma: no cover  (abstract)
        raise NotImplementedError

    def _logits(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover  (abstract)
        """The logits, float64 ``(n, n_actions)``, of float64 observations ``x`` ``(n, obs_dim)``."""
        raise NotImplementedError

    def act(self, observation: np.ndarray, action_mask: np.ndarray | None = None) -> int:
        """The action for one observation of shape ``(obs_dim,)``; ``action_mask`` (``n_actions`` booleans,
        True = legal) is read by MaskablePPO models only, as ``predict(..., action_masks=...)`` does."""
        observation = np.asarray(observation)
        if observation.shape != (self.obs_dim,):
            raise SchedGymError(f"Expected an observation of shape ({self.obs_dim},), got {observation.shape}")
        if action_mask is not None and np.shape(action_mask) != (self.n_actions,):
            raise SchedGymError(f"Expected an action mask of shape ({self.n_actions},), got {np.shape(action_mask)}")
        return int(self.act_batch(observation[None], None if action_mask is None else np.asarray(action_mask)[None])[0])

    def logits_batch(self, observations: np.ndarray) -> np.ndarray:
        """The logits (float32, shape ``(n, n_actions)``) for observations ``(n, obs_dim)``, before masking."""
        obs = np.asarray(observations)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise SchedGymError(f"Expected observations of shape (n, {self.obs_dim}), got {obs.shape}")
        # float64 throughout, rounded to torch's float32 at the end. Against a float32 forward pass, its logits
        # equal torch's bit for bit more often (51% vs 33%) and its actions disagreed with torch less often (0 vs
        # 6 of 9.6M random inputs to fresh PPO models; a second run: 6 of 37M over all algos, all near-ties).
        x = obs.astype(np.float32).astype(np.float64)  # SB3 casts observations to float32
        return self._logits(x).astype(np.float32)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray | None = None) -> np.ndarray:
        """The actions (int64, shape ``(n,)``) for observations ``(n, obs_dim)`` and masks ``(n, n_actions)``."""
        obs = self._checked(observations, action_masks)
        if self.algo == "dqn":
            return np.argmax(self.logits_batch(obs), axis=1).astype(np.int64)  # ties: the first, as torch.argmax
        return greedy(self._log_probabilities(obs, action_masks))

    def log_probabilities_batch(self, observations: np.ndarray, action_masks: np.ndarray | None = None) -> np.ndarray:
        """The log-probabilities (float32, ``(n, n_actions)``) of the policy's distribution, computed as torch
        computes them (a masked action's is about -1e8): :func:`greedy` of them is :meth:`act_batch`'s action."""
        obs = self._checked(observations, action_masks)
        if self.algo == "dqn":
            raise SchedGymError("A dqn model gives Q-values, not a distribution over actions")
        return self._log_probabilities(obs, action_masks)

    def _checked(self, observations: np.ndarray, action_masks: np.ndarray | None) -> np.ndarray:
        obs = np.asarray(observations)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise SchedGymError(f"Expected observations of shape (n, {self.obs_dim}), got {obs.shape}")
        if action_masks is not None and self.algo != "maskable_ppo":
            raise SchedGymError(f"A {self.algo} model reads no action masks (SB3's predict takes none)")
        if action_masks is not None and np.shape(action_masks) != (len(obs), self.n_actions):
            shape = np.shape(action_masks)
            raise SchedGymError(f"Expected action masks of shape ({len(obs)}, {self.n_actions}), got {shape}")
        return obs

    def _log_probabilities(self, obs: np.ndarray, action_masks: np.ndarray | None) -> np.ndarray:
        # SB3's deterministic action is the argmax of Categorical(logits).probs, not of the logits: torch takes
        # logits - logsumexp(logits), then a softmax, in float32, which makes near-equal logits exactly equal,
        # and the first one then wins. Small logits (untrained models: ~1e-2) hit this often, so the same float32
        # steps are repeated here; a plain argmax of the logits disagreed with torch on 0.2-1% of the tests' inputs.
        z = _normalise(self.logits_batch(obs))
        if self.algo == "maskable_ppo":  # MaskableCategorical normalises again after masking, even with no mask
            z = _normalise(
                z if action_masks is None else np.where(np.asarray(action_masks, bool), z, np.float32(HUGE_NEG))
            )
        return z


def greedy(log_probabilities: np.ndarray) -> np.ndarray:
    """The most probable action of each row of float32 log-probabilities (int64, ``(n,)``), as torch finds it:
    the argmax of the float32 softmax, so that near-equal actions tie and the first one wins."""
    z = np.asarray(log_probabilities)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return np.argmax(e / e.sum(axis=1, keepdims=True), axis=1).astype(np.int64)


def _dense(x: np.ndarray, layers: Layers, activation: str, *, last: bool) -> np.ndarray:
    """``layers`` applied to the last axis of ``x``, ``activation`` after each (after the last too if ``last``)."""
    for i, (weight, bias) in enumerate(layers):
        x = x @ weight.T + bias
        if last or i < len(layers) - 1:
            x = _ACTIVATIONS[activation](x)
    return x


class _LayerStack:
    """A network that is one stack of ``layers``: it takes the first layer's inputs and gives the last layer's
    outputs."""

    layers: Layers

    @property
    def obs_dim(self) -> int:
        return int(self.layers[0][0].shape[1])

    @property
    def n_actions(self) -> int:
        return int(self.layers[-1][0].shape[0])


@dataclass(frozen=True, eq=False)
class MlpPolicyNetwork(_LayerStack, PolicyNetwork):
    """The actor of a saved SB3 ``MlpPolicy``: ``layers`` are (weight (out, in), bias (out,)) pairs in float64,
    and ``activation`` (a torch.nn class name) follows every layer but the last."""

    layers: Layers
    activation: str
    algo: str

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return _dense(x, self.layers, self.activation, last=False)


@dataclass(frozen=True, eq=False)
class RowScorerNetwork(PolicyNetwork):
    """The actor of a saved row scorer (:class:`agents.row_policy.RowScorer`, ``schedgym train --policy rows``),
    the same computation as its ``forward_actor``: every row ``i`` gets ``h_i = rows([head, row_i])`` and the
    logit ``row_out(h_i)``, :data:`HUGE_NEG` for padding rows (``valid`` <= 0.5); "preempt nothing" gets
    ``stop_out(stop([head, mean h, max h, valid rows / n_rows]))``, the mean and max over the valid rows
    (0 when there are none). ``activation`` follows every layer of ``rows`` and ``stop``.

    Its actions equalled SB3's in all of 290,000 comparisons on recorded environment observations (16 and 64 rows,
    fresh and trained models), where most observations hold rows with identical features: their logits tie
    exactly on both sides and the first wins. Rows that are nearly but not exactly identical are where the two
    can differ: on random observations scaled by 1e-3, 0.25% of the actions did, each a pair of logits ~1e-8
    apart whose order torch's float32 sgemm and this float64 pass round differently."""

    rows: Layers
    row_out: tuple[np.ndarray, np.ndarray]
    stop: Layers
    stop_out: tuple[np.ndarray, np.ndarray]
    n_rows: int
    activation: str
    algo: str

    @property
    def obs_dim(self) -> int:
        return N_HEAD + ROW_WIDTH * self.n_rows

    @property
    def n_actions(self) -> int:
        return 1 + self.n_rows

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([self._chunk(x[i : i + _CHUNK]) for i in range(0, len(x), _CHUNK)] or [x[:, :1]])

    def _chunk(self, x: np.ndarray) -> np.ndarray:
        n, k = len(x), self.n_rows
        head, rows = x[:, :N_HEAD], x[:, N_HEAD:].reshape(n, k, ROW_WIDTH)
        valid = rows[..., 0] > 0.5  # as torch compares the float32 observation; float64 changes no comparison
        h = _dense(np.concatenate([np.broadcast_to(head[:, None], (n, k, N_HEAD)), rows], axis=-1), self.rows,
                   self.activation, last=True)  # fmt: skip
        row_logits = np.where(valid, (h @ self.row_out[0].T + self.row_out[1])[..., 0], HUGE_NEG)
        count = valid.sum(axis=1, keepdims=True).astype(np.float64)
        mean = (h * valid[..., None]).sum(axis=1) / np.maximum(count, 1.0)
        top = np.where(count > 0, np.where(valid[..., None], h, -np.inf).max(axis=1), 0.0)
        pooled = np.concatenate([head, mean, top, count / k], axis=1)
        stop = _dense(pooled, self.stop, self.activation, last=True) @ self.stop_out[0].T + self.stop_out[1]
        return np.concatenate([stop, row_logits], axis=1)


@dataclass(frozen=True, eq=False)
class RLlibActorNetwork(_LayerStack, PolicyNetwork):
    """The actor of an RLlib module trained by ``schedgym train --algo rllib_ppo``
    (:class:`schedgym.rllib.module.MaskedPPOTorchRLModule`), read from the ``.npz`` exported beside its
    checkpoint: ``layers`` with the activation after each (``""``: none). Its action is the one RLlib's
    deterministic forward pass picks: the argmax of the logits with illegal actions at :data:`HUGE_NEG` (the
    module's ``MASKED_LOGIT``); the first index wins a tie, as with torch.argmax."""

    layers: Layers
    activations: tuple[str, ...]
    algo: str = "rllib_ppo"

    def _logits(self, x: np.ndarray) -> np.ndarray:
        for (weight, bias), activation in zip(self.layers, self.activations, strict=True):
            x = x @ weight.T + bias
            if activation:
                x = _ACTIVATIONS[activation](x)
        return x

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray | None = None) -> np.ndarray:
        """The actions (int64, shape ``(n,)``) for observations ``(n, obs_dim)`` and masks ``(n, n_actions)``
        (None: every action legal)."""
        logits = self.logits_batch(observations)
        if action_masks is not None:
            if np.shape(action_masks) != logits.shape:
                shape = np.shape(action_masks)
                raise SchedGymError(f"Expected action masks of shape {logits.shape}, got {shape}")
            logits = np.where(np.asarray(action_masks, bool), logits, np.float32(HUGE_NEG))
        return np.argmax(logits, axis=1).astype(np.int64)

    def log_probabilities_batch(self, observations: np.ndarray, action_masks: np.ndarray | None = None) -> np.ndarray:
        raise SchedGymError("An RLlib actor acts by the argmax of its masked logits; it gives no log-probabilities")


MAX_NPZ_BYTES = 1 << 30  # an exported actor of 64 x 64 units is ~70 kB; this refuses a crafted giant


def load_rllib_network(path: str | Path) -> RLlibActorNetwork:
    """Read an actor exported by :func:`agents.rllib_export.save_actor` (``.npz``), checked by
    :func:`rllib_network`."""
    return rllib_network(read_npz(path, "an actor exported by 'schedgym train --algo rllib_ppo'"), str(path))


def read_npz(path: str | Path, what: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file, read as ``np.load`` with ``allow_pickle=False`` reads them (nothing in
    the file is executed), each header checked first (:meth:`_Archive.read_array`); a file that is not one is a
    :class:`SchedGymError` saying it is not ``what``."""
    where = str(path)
    try:
        with open_input(path, "model") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_NPZ_BYTES:
                raise SchedGymError(f"{where}: more than {MAX_NPZ_BYTES:,} bytes, not {what}")
            with zipfile.ZipFile(fh) as npz:
                archive, arrays = _Archive(npz, where), {}
                for info in npz.infolist():
                    key = info.filename.removesuffix(".npy")
                    if key == info.filename or key in arrays:
                        raise ValueError(f"{info.filename} is not one more .npy array")
                    arrays[key] = archive.read_array(info)
    except SchedGymError:
        raise
    except OSError as exc:
        raise SchedGymError(f"{where}: cannot read the model ({exc.strerror or exc})") from None
    except (ValueError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError):
        raise SchedGymError(f"{where}: not {what}") from None
    return arrays


def rllib_network(arrays: dict[str, np.ndarray], where: str = "the exported actor") -> RLlibActorNetwork:
    """The network of an exported actor's arrays (:func:`agents.rllib_export.actor_arrays`), checked: its
    format, one weight (2-D) and bias (1-D) per layer chained from the input to the logits, a known activation
    after each. Training evaluates its module through this too, so it evaluates what compare will."""
    from schedgym.rllib import NPZ_FORMAT

    fmt = arrays.get("format")
    if fmt is None or fmt.shape != () or str(fmt) != NPZ_FORMAT:
        raise SchedGymError(f"{where}: not an actor exported by 'schedgym train --algo rllib_ppo' (format {fmt!r})")
    activations = arrays.get("activations")
    n = 0 if activations is None or activations.ndim != 1 else len(activations)
    expected = {"format", "activations"} | {f"{p}{i}" for i in range(n) for p in ("weight", "bias")}
    problem = ""
    if n == 0 or activations is None or activations.dtype.kind != "U":
        problem = "no list of activations"
    elif set(arrays) != expected:
        problem = f"its arrays are {sorted(arrays)}, expected {sorted(expected)}"
    elif any(a and a not in _ACTIVATIONS for a in activations.tolist()):
        problem = f"activations {activations.tolist()}; known: {', '.join(_ACTIVATIONS)}"
    else:
        shapes = [(arrays[f"weight{i}"].shape, arrays[f"bias{i}"].shape) for i in range(n)]
        kinds = {arrays[f"{p}{i}"].dtype.kind for i in range(n) for p in ("weight", "bias")}
        if kinds != {"f"} or any(len(w) != 2 or b != w[:1] for w, b in shapes):
            problem = "a weight is not a float matrix or a bias does not match it"
        elif any(w[1] != before[0] for (w, _), (before, _) in zip(shapes[1:], shapes[:-1], strict=True)):
            problem = "its layer shapes do not chain"
    if problem:
        raise SchedGymError(f"{where}: not a supported exported actor ({problem})")
    assert activations is not None  # checked above
    layers = tuple((arrays[f"weight{i}"].astype(np.float64), arrays[f"bias{i}"].astype(np.float64)) for i in range(n))
    return RLlibActorNetwork(layers, tuple(str(a) for a in activations.tolist()))


def _normalise(logits: np.ndarray) -> np.ndarray:
    """``logits - logsumexp(logits)`` in float32, the way torch.distributions.Categorical computes it."""
    top = logits.max(axis=1, keepdims=True)
    return logits - (np.log(np.exp(logits - top).sum(axis=1, keepdims=True)) + top)


def load_policy_network(path: str | Path, algo: str, policy: str | None = None) -> PolicyNetwork:
    """Read the actor of the SB3 model at ``path`` (the ``.zip`` of ``model.save``), trained with ``algo``
    (``"maskable_ppo"``, ``"ppo"`` or ``"dqn"``); SchedGymError if it is not a supported model of it.

    ``policy`` (one of :data:`POLICIES`, as a run's ``.json`` records it) is checked against the parameter
    names, which decide the architecture; None (older runs recorded none) checks nothing."""
    where = str(path)
    if algo not in _ALGOS:
        raise SchedGymError(f"Unknown algorithm {algo!r} for {where}; expected one of {sorted(_ALGOS)}")
    if policy is not None and policy not in POLICIES:
        raise SchedGymError(f"Unknown policy architecture {policy!r} for {where}; expected one of {list(POLICIES)}")
    try:
        with open_input(path, "model") as fh, zipfile.ZipFile(fh) as model:
            outer = _Archive(model, where)
            missing = [name for name in ("data", "policy.pth") if name not in outer.names()]
            if missing:
                raise SchedGymError(f"{where}: not a stable-baselines3 model (the zip has no {' or '.join(missing)})")
            data = strict_json.loads(outer.read("data"))
            state = _read_state_dict(outer.read("policy.pth"), where)
    except SchedGymError:
        raise
    except OSError as exc:
        raise SchedGymError(f"{where}: cannot read the model ({exc.strerror or exc})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError):
        raise SchedGymError(f"{where}: not a stable-baselines3 model (not a zip file, or a damaged one)") from None
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError, a key given twice
        raise SchedGymError(f"{where}: not a stable-baselines3 model (its data entry is not JSON: {exc})") from None
    if not isinstance(data, dict):
        raise SchedGymError(f"{where}: not a stable-baselines3 model (its data entry is not a JSON object)")
    found = "rows" if any(k.startswith(f"{_ROWS}actor_rows.") for k in state) else "mlp"
    if policy is not None and policy != found:
        raise SchedGymError(
            f"{where}: its description says policy {policy!r}, but its parameters are those of {found!r}"
        )
    network: PolicyNetwork
    if found == "rows":
        network = _row_scorer(state, data, algo, where)
    else:
        network = MlpPolicyNetwork(_actor_layers(state, algo, where), _activation(data, algo, where), algo)
    _check_spaces(data, network, where)
    return network


def _stack(state: dict[str, np.ndarray], prefix: str) -> list[str]:
    """The names (``prefix`` + index + ``.``) of the Linear layers of an ``nn.Sequential`` of Linear and
    activation modules, as SB3 builds them: Linear layers at even indices."""
    names: list[str] = []
    while f"{prefix}{2 * len(names)}.weight" in state:
        names.append(f"{prefix}{2 * len(names)}.")
    return names


def _row_scorer(state: dict[str, np.ndarray], data: dict[str, Any], algo: str, where: str) -> RowScorerNetwork:
    """The actor of a row scorer's state dict, checked: every parameter known, weights 2-D and biases 1-D, the
    layers chained from the inputs (``[head, row]``; ``[head, mean, max, count]``) to one logit. The number
    of rows comes from the saved observation space (or action space)."""
    if algo == "dqn":
        raise SchedGymError(f"{where}: a row scorer is an actor-critic policy (maskable_ppo or ppo), not dqn")
    rows, stop = _stack(state, f"{_ROWS}actor_rows."), _stack(state, f"{_ROWS}actor_stop.")
    row_out, stop_out = f"{_ROWS}row_out.", f"{_ROWS}stop_out."
    expected = {name + p for name in (*rows, *stop, row_out, stop_out) for p in ("weight", "bias")}
    odd = sorted(k for k in state if k not in expected and not k.startswith(_ROW_CRITIC))
    odd = odd or sorted(expected - set(state))
    n_rows = _saved_rows(data)

    def problem() -> str:
        if odd:
            return f"it has parameters {odd[:3]}"
        if not rows or not stop:
            return "its row or stop network has no hidden layer"
        if n_rows is None:
            return "its saved spaces do not give the number of candidate rows"
        shapes = {n: (state[n + "weight"].shape, state[n + "bias"].shape) for n in (*rows, *stop, row_out, stop_out)}
        if any(len(w) != 2 or b != w[:1] for w, b in shapes.values()):
            return "a weight is not a matrix or a bias does not match it"
        width = shapes[rows[-1]][0][0]  # the row embedding that is pooled
        for names, n_in in (([*rows, row_out], N_HEAD + ROW_WIDTH), ([*stop, stop_out], N_HEAD + 2 * width + 1)):
            sizes = [n_in] + [shapes[n][0][0] for n in names]
            if [shapes[n][0][1] for n in names] != sizes[:-1] or sizes[-1] != 1:
                return "its layer shapes do not chain"
        return ""

    if text := problem():
        raise SchedGymError(f"{where}: not a supported row-scorer model (agents/row_policy.py; {text})")

    def layers(names: list[str]) -> Layers:
        return tuple((state[n + "weight"].astype(np.float64), state[n + "bias"].astype(np.float64)) for n in names)

    assert n_rows is not None
    return RowScorerNetwork(
        rows=layers(rows),
        row_out=layers([row_out])[0],
        stop=layers(stop),
        stop_out=layers([stop_out])[0],
        n_rows=n_rows,
        activation=_activation(data, algo, where),
        algo=algo,
    )


def _saved_rows(data: dict[str, Any]) -> int | None:
    """The candidate rows of the saved observation space (``N_HEAD + ROW_WIDTH * rows`` features), else of
    the action space (``1 + rows`` actions); None if neither says."""
    obs, act = (data.get(key) for key in ("observation_space", "action_space"))
    shape = obs.get("_shape") if isinstance(obs, dict) else None
    if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int):
        n_rows, rest = divmod(shape[0] - N_HEAD, ROW_WIDTH)
        return n_rows if n_rows > 0 and rest == 0 else None
    n = str(act.get("n")) if isinstance(act, dict) else ""
    return int(n) - 1 if n.isdigit() and int(n) > 1 else None


def _read_state_dict(raw: bytes, where: str) -> dict[str, np.ndarray]:
    try:
        archive = _Archive(zipfile.ZipFile(io.BytesIO(raw)), where, "policy.pth")
    except zipfile.BadZipFile:
        raise SchedGymError(f"{where}: policy.pth is not a torch zip archive (saved by torch < 1.6?)") from None
    roots = [name[: -len("data.pkl")] for name in archive.names() if name.endswith("/data.pkl")]
    if len(roots) != 1:
        raise SchedGymError(f"{where}: policy.pth is not a torch zip archive (no single data.pkl in it)")
    record = f"{roots[0]}byteorder"  # missing in old torch's files; torch.load then assumes little-endian
    byteorder = archive.read(record).decode("ascii", "replace") if record in archive.names() else "little"
    if byteorder not in ("little", "big"):
        raise SchedGymError(f"{where}: policy.pth has an unknown byte order {byteorder!r}")
    try:
        state = _StateDictUnpickler(archive, roots[0], byteorder, where).load()
    except SchedGymError:
        raise
    except Exception as exc:  # a malformed pickle; the stand-ins above are all it can reach
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
    n_hidden = 0
    while f"{hidden}{2 * n_hidden}.weight" in state:  # Linear layers at even indices, activations between
        n_hidden += 1
    names = [f"{hidden}{2 * i}." for i in range(n_hidden)] + ([out] if out else [])
    expected = {name + p for name in names for p in ("weight", "bias")}
    odd = sorted(k for k in state if k not in expected and not k.startswith(ignored)) or sorted(expected - set(state))
    shapes = [(state[n + "weight"].shape, state[n + "bias"].shape) for n in names] if not odd else []
    if (
        odd
        or any(len(w) != 2 or b != w[:1] for w, b in shapes)
        or any(w[1] != before[0] for (w, _), (before, _) in zip(shapes[1:], shapes[:-1], strict=True))
    ):
        detail = f"it has parameters {odd[:3]}" if odd else "its layer shapes do not chain"
        raise SchedGymError(
            f"{where}: not a supported MLP model (an SB3 MlpPolicy with a flatten features extractor; {detail})"
        )
    return tuple((state[n + "weight"].astype(np.float64), state[n + "bias"].astype(np.float64)) for n in names)


def _pickled_globals(blob: str) -> dict[str, tuple[str, str]]:
    """The classes and functions a cloudpickled ``dict`` holds, by key, read off its opcodes (never unpickled).

    A class is pickled by reference as two strings and STACK_GLOBAL (or one GLOBAL "module name") right after
    its key; tracking what is pushed, and memoized, is enough to pair them."""
    pushed: list[Any] = []
    memo: dict[int, Any] = {}
    found: dict[str, tuple[str, str]] = {}
    for op, arg, _ in pickletools.genops(base64.b64decode(blob)):
        if op.name == "MEMOIZE" or op.name.endswith("PUT"):
            memo[len(memo) if op.name == "MEMOIZE" else int(str(arg))] = pushed[-1] if pushed else None
        elif op.name.endswith("GET") and isinstance(arg, int):
            pushed.append(memo.get(arg))
        elif op.name in ("GLOBAL", "STACK_GLOBAL"):
            module, name = str(arg).split(" ", 1) if op.name == "GLOBAL" else (pushed.pop(-2), pushed.pop())
            if pushed and isinstance(pushed[-1], str):
                found[pushed[-1]] = (str(module), str(name))
            pushed.append(None)
        elif op.name not in ("PROTO", "FRAME", "MARK"):
            pushed.append(arg if isinstance(arg, str) else None)
    return found


def _activation(data: dict[str, Any], algo: str, where: str) -> str:
    kwargs = data.get("policy_kwargs") or {}
    if not isinstance(kwargs, dict) or ":serialized:" not in kwargs:
        return _ALGOS[algo][2]  # plain JSON holds no class: SB3's default activation
    try:
        named = _pickled_globals(kwargs[":serialized:"])
    except Exception:  # a corrupt blob, which SB3 could not read either
        raise SchedGymError(f"{where}: its policy_kwargs cannot be read") from None
    extractor = named.get("features_extractor_class", ("", "FlattenExtractor"))
    if extractor[1] != "FlattenExtractor":
        raise SchedGymError(f"{where}: not a supported MLP model (features extractor {'.'.join(extractor)})")
    if "activation_fn" in kwargs and "activation_fn" not in named:  # SB3 also lists the keys as JSON
        raise SchedGymError(f"{where}: cannot tell which activation function its policy_kwargs name")
    module, name = named.get("activation_fn", ("torch.nn.modules.activation", _ALGOS[algo][2]))
    if module not in ("torch.nn.modules.activation", "torch.nn") or name not in _ACTIVATIONS:
        raise SchedGymError(
            f"{where}: activation {module}.{name} is not supported; expected torch.nn's {', '.join(_ACTIVATIONS)}"
        )
    return name


def _check_spaces(data: dict[str, Any], network: PolicyNetwork, where: str) -> None:
    """The spaces in SB3's data (their attributes are JSON beside the pickle): the network must read a 1-D Box
    (SB3 preprocesses other spaces: one-hot, dict) and choose among n discrete actions starting at 0."""
    obs, act = (
        space if isinstance(space := data.get(key), dict) else {} for key in ("observation_space", "action_space")
    )
    if (obs and ("low" not in obs or obs.get("_shape") != [network.obs_dim])) or (
        act and (str(act.get("n")), str(act.get("start", 0))) != (str(network.n_actions), "0")
    ):
        raise SchedGymError(
            f"{where}: not a supported model (its spaces are {obs.get(':type:')} {obs.get('_shape')} and "
            f"{act.get(':type:')} {act.get('n')}, not Box ({network.obs_dim},) and Discrete({network.n_actions}))"
        )

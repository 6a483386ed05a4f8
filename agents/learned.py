"""Learned agents: policies that decide with a trained network, inside the simulator like any rule.

A :class:`LearnedPolicy` is a :class:`~schedgym.sim.policy.Policy`: for each preemption request it runs the
environment's victim-by-victim protocol (:mod:`schedgym.decision`), asking its network for one action per
step, until the chosen victims form a plan. It therefore makes exactly the decisions the same network makes
when it acts through :class:`~schedgym.envs.PreemptionEnv` (tested), and ``schedgym compare``, training's
evaluation and the tests run it with :func:`schedgym.experiments.runner.run_policy`, like a rule.

A saved agent is ``NAME.zip`` (the stable-baselines3 model) plus ``NAME.json`` beside it (algorithm,
environment id and configuration, training configuration). :func:`load_agent` evaluates it with a numpy
forward pass (:mod:`agents.inference`), so evaluation needs neither torch nor stable-baselines3; those are
the ``rl`` extra, for training. An agent trained with RLlib (``--algo rllib_ppo``) is ``NAME.npz`` (its actor's
weights, exported beside the RLlib checkpoint by :mod:`agents.rllib_export`) plus ``NAME.json``; it is
evaluated in numpy too, without Ray.

Safety: a stable-baselines3 ``.zip`` holds pickles, and SB3's ``load()`` (used by training, and by anyone who
loads the file with SB3 or torch) unpickles them, which can run any code the file's author chose: load only
model files you trust. The numpy reader used here loads weights only, through an unpickler that refuses every
object but a tensor, so evaluating a file runs no code from it. The ``.json`` beside a model may name only a
registered ``schedgym/`` environment (nothing is imported by name), and the bundled agents are checked against
the SHA-256 sums of their manifest (``agents/bundled/manifest.json``, :mod:`agents.manifest`) before they are
loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from agents import strict_json
from agents.manifest import BUNDLED_DIR, BundledAgent, check_file, read_manifest, sha256_of
from schedgym._csvio import open_input, read_bounded
from schedgym._optional import raise_if_interrupted
from schedgym.decision import DecisionEncoder, observation_size
from schedgym.errors import SchedGymError
from schedgym.sim.policy import DECLINE, Policy, PreemptionPlan, PreemptionRequest, QueueDiscipline

# The bundled agents, from agents/bundled/manifest.json (agents.manifest): registry name -> model file, and file
# name -> SHA-256, checked before a bundled agent is loaded: a file changed after the release (by accident or
# not) is refused. Replacing a bundled agent means updating its manifest entry.
BUNDLED_AGENTS: dict[str, BundledAgent] = read_manifest()
BUNDLED: dict[str, Path] = {name: BUNDLED_DIR / agent.model for name, agent in BUNDLED_AGENTS.items()}
BUNDLED_SHA256: dict[str, str] = {
    file: digest for agent in BUNDLED_AGENTS.values() for file, digest in agent.files().items()
}
MAX_META_BYTES = 1 << 20  # a saved agent's .json is a few kB

# algorithm name -> (module, class, reads action masks)
ALGOS: dict[str, tuple[str, str, bool]] = {
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", True),
    "ppo": ("stable_baselines3", "PPO", False),
    "dqn": ("stable_baselines3", "DQN", False),
    # RLlib's PPO with schedgym's masked module (schedgym/rllib/); trained by agents.rllib_train, saved as .npz
    "rllib_ppo": ("ray.rllib.algorithms.ppo", "PPO", True),
}
EVOLVED = "evolved"
"""the algorithm name of an agent searched by :mod:`agents.evolve` (a plan-mode scorer, ``.npz``)"""
LEAN_PPO = "lean_ppo"
"""the algorithm name of an agent trained by :mod:`agents.lean_ppo` (the same plan-mode scorer as ``evolved``)"""
NPZ_ALGOS = ("rllib_ppo", EVOLVED, LEAN_PPO)
"""algorithms whose models are ``.npz`` files"""


def algo_class(algo: str) -> Any:
    """The stable-baselines3 class of ``algo`` (needs the ``rl`` extra)."""
    try:
        module, name, _ = ALGOS[algo]
    except KeyError:
        raise SchedGymError(f"Unknown algorithm {algo!r}; expected one of {sorted(ALGOS)}") from None
    try:
        mod = __import__(module, fromlist=[name])
    except ImportError as exc:
        raise_if_interrupted(exc)  # Ctrl-C while torch's extensions initialised: not a missing extra
        if algo == "rllib_ppo":
            raise SchedGymError("RLlib's PPO needs the 'rllib' extra: pip install 'schedgym[rllib]'") from None
        raise SchedGymError(
            f"{name} needs the 'rl' extra (stable-baselines3, sb3-contrib, torch): pip install 'schedgym[rl]'"
        ) from None
    return getattr(mod, name)


class Network(Protocol):
    """What a learned policy needs of its network: one action for one observation (and the legal actions)."""

    def act(self, observation: np.ndarray, action_mask: np.ndarray | None = None) -> int:  # pragma: no cover
        ...


class SB3Network:
    """A live stable-baselines3 model as a :class:`Network` (training evaluates the model it is training).

    ``maskable`` models get the mask (sb3-contrib's ``action_masks``); others are asked without it.
    """

    def __init__(self, model: Any, maskable: bool):
        self.model = model
        self.maskable = maskable

    def act(self, observation: np.ndarray, action_mask: np.ndarray | None = None) -> int:
        if self.maskable:
            action, _ = self.model.predict(observation, deterministic=True, action_masks=action_mask)
        else:
            action, _ = self.model.predict(observation, deterministic=True)
        return int(action)


class LearnedPolicy(Policy):
    """A trained network deciding preemptions through the victim-by-victim protocol.

    Args:
        network: anything with ``act(observation, action_mask) -> int``.
        name: display name.
        queue: the queue discipline it was trained with.
        max_candidates: candidate rows of its observation (fixes the observation size).
        estimate_noise: sigma of the duration-estimate error of its observations, as in training.
        maskable: True if the network reads the action mask. A network that does not may pick an illegal
            action: it becomes 0 ("preempt nothing"), as with ``IllegalActionAsWait`` in training, and is
            counted in :attr:`n_illegal`.
    """

    preempts = True

    def __init__(
        self,
        network: Network,
        *,
        name: str = "agent",
        queue: QueueDiscipline | str = QueueDiscipline.PRIORITY,
        max_candidates: int = 16,
        estimate_noise: float = 0.3,
        maskable: bool = True,
    ):
        self.network = network
        self.name = name
        self.queue = QueueDiscipline(queue)
        self.max_candidates = max_candidates
        self.estimate_noise = estimate_noise
        self.maskable = maskable
        self._encoder: DecisionEncoder | None = None
        self.n_illegal = 0
        self.n_actions = 0

    def __repr__(self) -> str:
        return f"LearnedPolicy(name={self.name!r}, queue={self.queue.value!r}, max_candidates={self.max_candidates})"

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        self._encoder = None  # built at the first request, when the workload's size is known
        self.n_illegal = 0
        self.n_actions = 0

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        if self._encoder is None:
            self._encoder = DecisionEncoder.for_run(
                request, max_candidates=self.max_candidates, estimate_noise=self.estimate_noise, rng=self.rng
            )
        decision = self._encoder.begin(request)
        if not decision.offers_choice:
            return DECLINE  # as the environment: a request without a choice is not asked
        while True:
            mask = decision.mask()
            action = self.network.act(decision.observe(), mask if self.maskable else None)
            self.n_actions += 1
            if not (0 <= action < len(mask) and mask[action]):
                self.n_illegal += 1
                action = 0
            plan = decision.choose(action)
            if plan is not None:
                return plan


def load_agent(path: str | Path, name: str | None = None) -> Policy:
    """The agent saved at ``path`` by ``schedgym train`` (``.zip``, or ``.npz`` for ``rllib_ppo``, and its
    ``.json``) or by ``python -m agents.evolve`` or ``python -m agents.lean_ppo`` (``.npz``), evaluated in numpy."""
    from agents.inference import load_policy_network, load_rllib_network

    given = str(path)
    path = Path(path)
    if path.exists() and not path.is_file():  # said as what it is, not as a missing NAME.zip beside it
        open_input(path, "model").close()  # raises, naming the path: a directory, a FIFO, a device
    if path.suffix == "":  # SB3 saves NAME.zip for NAME; rllib_ppo runs export NAME.npz
        zip_path = path.with_suffix(".zip")
        path = zip_path if zip_path.is_file() or not path.with_suffix(".npz").is_file() else path.with_suffix(".npz")
    if path.suffix not in (".zip", ".npz"):
        raise SchedGymError(f"Expected a model saved by 'schedgym train' (a .zip or .npz file), got {given!r}")
    if not path.exists():  # a directory, FIFO or device is refused by name when it is opened
        raise SchedGymError(f"No model at {given!r}")
    meta_path = path.with_suffix(".json")
    if not meta_path.exists():
        raise SchedGymError(f"No {meta_path.name} beside {given}: was it saved by 'schedgym train'?")
    algo, config = describe(meta_path)
    if (path.suffix == ".npz") != (algo in NPZ_ALGOS):
        raise SchedGymError(
            f"{given}: its {meta_path.name} says algorithm {algo!r}, which saves "
            f"{'.npz' if algo in NPZ_ALGOS else '.zip'} models, not {path.suffix}"
        )
    if algo in (EVOLVED, LEAN_PPO):
        from agents.evolve import load_evolved

        return load_evolved(path, _read_meta(meta_path), config, name=name if name is not None else path.stem)
    network: Any
    if algo == "rllib_ppo":
        network = load_rllib_network(path)
    else:
        network = load_policy_network(path, algo, recorded_policy(meta_path))
    expected = observation_size(config.max_candidates)
    if network.obs_dim != expected or network.n_actions != config.max_candidates + 1:
        raise SchedGymError(
            f"{given}: the model takes {network.obs_dim} inputs and {network.n_actions} actions, but its "
            f"environment (max_candidates={config.max_candidates}) has {expected} and {config.max_candidates + 1}"
        )
    return LearnedPolicy(
        network,
        name=name if name is not None else path.stem,
        queue=config.sim.queue,
        max_candidates=config.max_candidates,
        estimate_noise=config.estimate_noise,
        maskable=ALGOS[algo][2],
    )


def describe(meta_path: Path) -> tuple[str, Any]:
    """``(algorithm, EnvConfig)`` from a saved agent's ``.json``."""
    import gymnasium as gym

    import schedgym  # noqa: F401  (registers the ids)
    from schedgym.envs import EnvConfig

    meta = _read_meta(meta_path)
    algo, env_id, env_kwargs = meta.get("algo"), meta.get("env_id"), meta.get("env_kwargs", {})
    for key, value, kind in (("algo", algo, str), ("env_id", env_id, str), ("env_kwargs", env_kwargs, dict)):
        if not isinstance(value, kind):
            raise SchedGymError(
                f"{meta_path}: not a schedgym agent description (expected {key!r} to be a JSON "
                f"{'string' if kind is str else 'object'}, got {value!r})"
            )
    if algo not in ALGOS and algo not in (EVOLVED, LEAN_PPO):
        raise SchedGymError(
            f"{meta_path}: unknown algorithm {algo!r}; expected one of {sorted([*ALGOS, EVOLVED, LEAN_PPO])}"
        )
    env_id = schedgym.SUPERSEDED.get(str(env_id), str(env_id))  # the same spaces under a newer version
    if env_id not in gym.registry or not str(env_id).startswith("schedgym/"):
        raise SchedGymError(f"{meta_path}: unknown environment {env_id!r}; expected a schedgym/ id")
    try:
        config = EnvConfig(**{**gym.spec(env_id).kwargs, **env_kwargs})
    except (SchedGymError, TypeError, ValueError) as exc:
        raise SchedGymError(f"{meta_path}: bad env_kwargs ({exc})") from None
    return algo, config


def recorded_policy(meta_path: Path) -> str | None:
    """The policy architecture (``"mlp"`` or ``"rows"``) a saved agent's ``.json`` records in its training
    configuration; None for runs that recorded none (all were MLPs)."""
    from agents.inference import POLICIES

    train_config = _read_meta(meta_path).get("train_config")
    policy = train_config.get("policy") if isinstance(train_config, dict) else None
    if policy is not None and policy not in POLICIES:
        raise SchedGymError(f"{meta_path}: unknown policy architecture {policy!r}; expected one of {list(POLICIES)}")
    return policy


def _read_meta(meta_path: Path) -> dict[str, Any]:
    """A saved agent's ``.json`` as a dict, or a SchedGymError saying why it is not one."""
    too_big = f"{meta_path}: more than {MAX_META_BYTES:,} bytes, not a schedgym agent description"
    try:
        with open_input(meta_path, "agent description") as fh:  # regular files only: never blocks
            if os.fstat(fh.fileno()).st_size > MAX_META_BYTES:
                raise SchedGymError(too_big)
            raw = read_bounded(fh, MAX_META_BYTES + 1)
        if len(raw) > MAX_META_BYTES:  # a file that grew, or a pseudo file reporting size 0
            raise SchedGymError(too_big)
        meta = strict_json.loads(raw.decode("utf-8"))  # a key given twice is refused, not read as its last
    except SchedGymError:  # TraceError is a ValueError too
        raise
    except (OSError, ValueError, RecursionError) as exc:
        raise SchedGymError(f"{meta_path}: not a schedgym agent description ({exc})") from None
    if not isinstance(meta, dict):
        raise SchedGymError(
            f"{meta_path}: not a schedgym agent description (a JSON {type(meta).__name__}, not an object)"
        )
    return meta


def verify_bundled(name: str = "ppo") -> None:
    """Check a bundled agent's model (``.zip`` or ``.npz``) and ``.json`` against the SHA-256 sums of the bundled
    agents' manifest (:data:`BUNDLED_SHA256`); raise :class:`SchedGymError` on a missing or changed file."""
    model = BUNDLED[name]
    for path in (model, model.with_suffix(".json")):
        check_file(name, path, BUNDLED_SHA256[path.name])


def bundled_agent(name: str = "ppo") -> Policy:
    """Registry factory of a bundled agent, verified against its recorded SHA-256 sums first; one whose
    manifest entry names a ``fallback`` is wrapped in :class:`agents.fallback.SmallClusterFallback`."""
    verify_bundled(name)
    agent = load_agent(BUNDLED[name], name=name)
    fallback = BUNDLED_AGENTS[name].fallback
    if fallback is None:
        return agent
    from agents.fallback import SmallClusterFallback
    from schedgym.registry import make_policy, policy_entry

    rule, max_nodes = fallback
    if policy_entry(rule).learned:
        raise SchedGymError(f"the bundled agent {name!r} falls back to {rule!r}, which is not a rule")
    return SmallClusterFallback(agent, make_policy(rule), max_nodes, name=name)


__all__ = [
    "ALGOS",
    "BUNDLED",
    "BUNDLED_AGENTS",
    "BUNDLED_DIR",
    "BUNDLED_SHA256",
    "LearnedPolicy",
    "Network",
    "SB3Network",
    "algo_class",
    "bundled_agent",
    "load_agent",
    "recorded_policy",
    "sha256_of",
    "verify_bundled",
]

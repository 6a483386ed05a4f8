"""Learned agents: stable-baselines3 models saved by ``schedgym train``, loaded by name or path.

A saved agent is ``NAME.zip`` (the SB3 model) plus ``NAME.json`` beside it (algorithm, environment id and
configuration, training configuration), so ``ppo:path/to/model.zip`` needs no other argument. The
bundled agent (``ppo``) lives in ``agents/bundled/``.

stable-baselines3, sb3-contrib and torch are the ``rl`` extra; they are imported only when a model is
loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from schedgym.errors import SchedGymError

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
BUNDLED = {"ppo": BUNDLED_DIR / "ppo_paper.zip"}

# algorithm name -> (module, class, reads action masks)
ALGOS: dict[str, tuple[str, str, bool]] = {
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", True),
    "ppo": ("stable_baselines3", "PPO", False),
    "dqn": ("stable_baselines3", "DQN", False),
}


def algo_class(algo: str) -> Any:
    try:
        module, name, _ = ALGOS[algo]
    except KeyError:
        raise SchedGymError(f"Unknown algorithm {algo!r}; expected one of {sorted(ALGOS)}") from None
    try:
        mod = __import__(module, fromlist=[name])
    except ImportError:
        raise SchedGymError(
            f"{name} needs the 'rl' extra (stable-baselines3, sb3-contrib, torch): pip install 'schedgym[rl]'"
        ) from None
    return getattr(mod, name)


@dataclass(frozen=True)
class SavedAgent:
    """A model on disk and what it was trained on. ``kind = "agent"`` tells the comparison harness to run
    it through the environment rather than inside the simulator."""

    path: str
    algo: str
    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    name: str = "agent"
    kind: str = "agent"

    @classmethod
    def from_path(cls, path: str | Path, name: str = "agent") -> SavedAgent:
        given = str(path)
        path = Path(path)
        if path.suffix == "":  # SB3 saves NAME.zip for NAME
            path = path.with_suffix(".zip")
        if path.suffix != ".zip":
            raise SchedGymError(f"Expected a model saved by 'schedgym train' (a .zip file), got {given!r}")
        meta_path = path.with_suffix(".json")
        if not path.is_file():
            raise SchedGymError(f"No model at {given!r}")
        if not meta_path.is_file():
            raise SchedGymError(f"No {meta_path.name} beside {path}: was it saved by 'schedgym train'?")
        try:
            meta = json.loads(meta_path.read_text())
            algo, env_id, env_kwargs = meta["algo"], meta["env_id"], dict(meta.get("env_kwargs", {}))
        except (ValueError, KeyError) as exc:
            raise SchedGymError(f"{meta_path}: not a schedgym agent description ({exc})") from None
        if algo not in ALGOS:
            raise SchedGymError(f"{meta_path}: unknown algorithm {algo!r}; expected one of {sorted(ALGOS)}")
        return cls(str(path), algo, env_id, env_kwargs, meta, name)

    @property
    def maskable(self) -> bool:
        return ALGOS[self.algo][2]

    def load_model(self) -> Any:
        return algo_class(self.algo).load(self.path, device="cpu")

    def make_env(self, **overrides: Any) -> gym.Env:
        """The environment the agent was trained in (``overrides`` replace configuration fields), wrapped so
        that an agent that cannot read masks has its illegal actions turned into 'wait' and counted."""
        import schedgym  # noqa: F401  (registers the ids)
        from schedgym.envs.wrappers import IllegalActionAsWait

        env = gym.make(self.env_id, **{**self.env_kwargs, **overrides})
        return env if self.maskable else IllegalActionAsWait(env)

    def agent(self, env: gym.Env) -> LearnedAgent:
        return LearnedAgent(self.load_model(), env, maskable=self.maskable)


class LearnedAgent:
    """SB3-style ``predict`` for a trained model; a maskable model gets the environment's current mask."""

    def __init__(self, model: Any, env: gym.Env, maskable: bool):
        self.model = model
        self.env = env
        self.maskable = maskable

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[Any, Any]:
        if self.maskable:
            masks = self.env.unwrapped.action_masks()  # type: ignore[attr-defined]
            action, state = self.model.predict(observation, state, episode_start, deterministic, action_masks=masks)
        else:
            action, state = self.model.predict(observation, state, episode_start, deterministic)
        return int(action), state


def saved_agent(arg: str | None = None, name: str = "ppo") -> SavedAgent:
    """Registry factory: ``ppo`` is the bundled agent, ``NAME:PATH`` a model saved by ``schedgym train``."""
    if arg is None:
        if name not in BUNDLED:
            raise SchedGymError(f"{name!r} needs a model path: {name}:path/to/model.zip")
        return SavedAgent.from_path(BUNDLED[name], name=name)
    return SavedAgent.from_path(arg, name=f"{name}:{arg}")

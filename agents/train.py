"""Train a learned preemption agent with stable-baselines3: ``schedgym train``.

Reads top to bottom: configuration, environments, model, evaluation callback, learn, save.

Seeds: ``seed`` goes to ``random``, numpy and torch (``set_random_seed``), to the model, and to the training
environments (environment ``i`` is reset with ``seed + i``; each episode then draws a fresh workload from
the environment's ``np_random``). Evaluation runs the model as a :class:`~agents.learned.LearnedPolicy`
inside the simulator (:func:`schedgym.experiments.runner.run_policy`, the loop ``schedgym compare`` uses) on
fixed *validation* workloads (:meth:`WorkloadSource.evaluation <schedgym.workloads.source.WorkloadSource.evaluation>`
with ``split="validation"``: synthetic seeds 100,000+, a bundled trace's validation windows), never the
*test* workloads that ``schedgym compare`` uses.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from agents.learned import ALGOS, LearnedPolicy, SB3Network, algo_class, load_agent
from schedgym._atomic import atomic_open
from schedgym._fielddocs import field_docs
from schedgym.errors import ConfigError, SchedGymError
from schedgym.limits import MAX_SEED

MAX_EVAL_WORKLOADS = 100
MAX_N_ENVS = 256
"""training environments (one process each) and torch threads at most"""


@dataclass
class TrainConfig:
    """Everything one training run depends on."""

    algo: str = "maskable_ppo"
    """maskable_ppo (reads action masks), ppo or dqn (both through IllegalActionAsWait)"""
    env_id: str = "schedgym/Preemption-v1"
    """registered environment id"""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """EnvConfig overrides for the environment (JSON on the command line)"""
    total_timesteps: int = 200_000
    """environment steps (decisions) to train for"""
    n_envs: int = 2
    """parallel training environments"""
    vec_env: str = "auto"
    """vector (the batched native vector environment, stepped in one call; maskable_ppo only), subproc (one
    process per environment), dummy (all in this process), or auto: vector for maskable_ppo, else subproc"""
    seed: int = 0
    """seed for random, numpy, torch, the model and the environments"""
    net_arch: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy (and value) network"""
    learning_rate: float = 3e-4
    """initial learning rate"""
    lr_schedule: str = "constant"
    """constant, or linear decay to 0 over training"""
    n_steps: int = 512
    """PPO: steps per environment per update"""
    batch_size: int = 128
    """minibatch size"""
    gamma: float = 0.99
    """discount factor"""
    ent_coef: float = 0.01
    """PPO: entropy bonus"""
    normalize_reward: bool = True
    """scale rewards by a running estimate of the return's spread (VecNormalize, training only)"""
    eval_freq: int = 20_000
    """evaluate every this many total steps (0: never)"""
    n_eval_workloads: int = 5
    """validation workloads per evaluation"""
    run_dir: str = "runs"
    """where runs are written: {run_dir}/{env_id with / as _}__{algo}__{seed}__{timestamp}/"""
    tensorboard: bool = True
    """log to TensorBoard (needs the tensorboard package)"""
    progress: bool = True
    """show a progress bar"""
    torch_threads: int = 1
    """torch threads in this process (a small MLP gains nothing from more, and on few cores they oversubscribe)"""

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ConfigError(f"Expected algo in {sorted(ALGOS)}, got {self.algo!r}")
        for name in ("total_timesteps", "n_envs", "n_steps", "batch_size", "n_eval_workloads", "torch_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"Expected {name} > 0, got {value!r}")
        if self.eval_freq < 0:
            raise ConfigError(f"Expected eval_freq >= 0, got {self.eval_freq!r}")
        if self.vec_env not in ("auto", "vector", "subproc", "dummy"):
            raise ConfigError(f"Expected vec_env 'auto', 'vector', 'subproc' or 'dummy', got {self.vec_env!r}")
        maskable = ALGOS[self.algo][2]
        if self.vec_env == "auto":  # resolved here, so that a run's .json records what it used
            self.vec_env = "vector" if maskable else "subproc"
        if self.vec_env == "vector" and not maskable:
            # The vector environment's sub-environments cannot be wrapped one by one (IllegalActionAsWait).
            raise ConfigError(f"vec_env 'vector' needs an algorithm that reads action masks, not {self.algo!r}")
        if self.lr_schedule not in ("constant", "linear"):
            raise ConfigError(f"Expected lr_schedule 'constant' or 'linear', got {self.lr_schedule!r}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ConfigError(f"Expected a finite learning_rate > 0, got {self.learning_rate!r}")
        if not (math.isfinite(self.gamma) and 0 < self.gamma <= 1):
            raise ConfigError(f"Expected 0 < gamma <= 1, got {self.gamma!r}")
        if not (math.isfinite(self.ent_coef) and self.ent_coef >= 0):
            raise ConfigError(f"Expected a finite ent_coef >= 0, got {self.ent_coef!r}")
        import gymnasium as gym

        import schedgym  # noqa: F401  (registers the ids)

        if self.env_id not in gym.registry or not self.env_id.startswith("schedgym/"):
            ids = sorted(i for i in gym.registry if i.startswith("schedgym/"))
            raise ConfigError(f"Unknown env_id {self.env_id!r}; schedgym registers {ids}")
        check_env_kwargs(self.env_id, self.env_kwargs)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"Expected seed from 0 to {MAX_SEED} (numpy's and torch's range), got {self.seed!r}")
        if self.n_envs > MAX_N_ENVS:
            raise ConfigError(f"Expected n_envs <= {MAX_N_ENVS} (one process each), got {self.n_envs}")
        if self.torch_threads > MAX_N_ENVS:
            raise ConfigError(f"Expected torch_threads <= {MAX_N_ENVS}, got {self.torch_threads}")
        if not isinstance(self.run_dir, str) or not self.run_dir.strip():
            raise ConfigError(f"Expected run_dir to name a directory, got {self.run_dir!r}")
        if not self.net_arch or any(int(h) <= 0 for h in self.net_arch):
            raise ConfigError(f"Expected positive layer sizes in net_arch, got {self.net_arch!r}")
        if self.n_eval_workloads > MAX_EVAL_WORKLOADS:
            raise ConfigError(f"Expected n_eval_workloads <= {MAX_EVAL_WORKLOADS}, got {self.n_eval_workloads}")

    @property
    def run_name(self) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"{self.env_id.replace('/', '_')}__{self.algo}__{self.seed}__{stamp}"


def check_env_kwargs(env_id: str, env_kwargs: object) -> None:
    """Check ``env_kwargs`` for training in this process, with one message, so that a bad value never
    reaches a worker process (where it would surface as a worker's EOFError): every key an
    :class:`~schedgym.envs.EnvConfig` field or ``max_episode_steps`` (an integer >= 1); the configuration
    valid; no ``render_mode`` (training renders nothing, and ``"human"`` would open a window per worker)."""
    import dataclasses
    import difflib

    from schedgym.envs import EnvConfig

    if not isinstance(env_kwargs, dict):
        raise ConfigError(f"Expected env_kwargs to be a JSON object (a dict), got {env_kwargs!r}")
    known = [f.name for f in dataclasses.fields(EnvConfig)] + ["max_episode_steps"]
    for key in env_kwargs:
        if key == "render_mode":
            raise ConfigError("env_kwargs: render_mode is not an option of training (nothing is rendered)")
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"env_kwargs: unknown option {key!r}{hint}; expected one of {sorted(known)}")
    steps = env_kwargs.get("max_episode_steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= 2**31 - 1):
        raise ConfigError(f"env_kwargs: expected max_episode_steps from 1 to {2**31 - 1}, got {steps!r}")
    try:
        env_config(env_id, {k: v for k, v in env_kwargs.items() if k != "max_episode_steps"})
    except ConfigError:
        raise
    except (SchedGymError, TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs: {exc}") from None


def env_config(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """The :class:`~schedgym.envs.EnvConfig` of ``gym.make(env_id, **env_kwargs)``."""
    import gymnasium as gym

    import schedgym  # noqa: F401  (registers the ids)
    from schedgym.envs import EnvConfig

    return EnvConfig(**{**gym.spec(env_id).kwargs, **env_kwargs})


def validation_workloads(env_id: str, env_kwargs: dict[str, Any], n: int) -> list[Any]:
    """The fixed validation workloads of the environment: its workload source's ``validation`` split (at
    most as many as it has). Never the test workloads of ``schedgym compare``."""
    from schedgym.sim.cluster import resolve_cluster

    cfg = env_config(env_id, env_kwargs)
    source = cfg.source
    cluster = resolve_cluster(cfg.cluster_name)
    available = source.n_evaluation("validation")
    count = n if available is None else min(n, available)
    return [source.evaluation("validation", i, cluster, count=count) for i in range(count)]


def evaluate(
    model_or_policy: Any, env_id: str, env_kwargs: dict[str, Any], workloads: list[Any], maskable: bool
) -> dict:
    """Deterministic runs on the given workloads, workload ``i`` with seed ``i``: the mean return the
    environment would give, and the slowdown figures per class (of the measured jobs, for trace windows with
    a warm-up). ``model_or_policy``: a live stable-baselines3 model or a :class:`LearnedPolicy`."""
    from schedgym.experiments.runner import episode_return, measured, run_policy, run_rng
    from schedgym.sim.cluster import resolve_cluster
    from schedgym.sim.job import JobClass

    cfg = env_config(env_id, env_kwargs)
    if isinstance(model_or_policy, LearnedPolicy):
        policy = model_or_policy
    else:
        policy = LearnedPolicy(
            SB3Network(model_or_policy, maskable),
            name="training",
            queue=cfg.sim.queue,
            max_candidates=cfg.max_candidates,
            estimate_noise=cfg.estimate_noise,
            maskable=maskable,
        )
    cluster = resolve_cluster(cfg.cluster_name)
    returns, te95, be95, illegal = [], [], [], 0
    for i, wl in enumerate(workloads):
        result = run_policy(policy, cluster, wl, cfg.sim, rng=run_rng(i))
        illegal += policy.n_illegal
        returns.append(episode_return(result, cfg))
        result = measured(result, wl)
        te95.append(result.class_stats(JobClass.TE).slowdown_p95)
        be95.append(result.class_stats(JobClass.BE).slowdown_p95)
    return {
        "mean_return": float(np.mean(returns)),
        "te_slowdown_p95": float(np.nanmean(te95)) if not np.isnan(te95).all() else float("nan"),
        "be_slowdown_p95": float(np.nanmean(be95)) if not np.isnan(be95).all() else float("nan"),
        "illegal_actions": illegal,
    }


def train(config: TrainConfig) -> Path:
    """Train, evaluate periodically, keep the best checkpoint, save the final model; return the run dir."""
    import gymnasium as gym

    import schedgym  # noqa: F401

    maskable = ALGOS[config.algo][2]
    # Configuration errors must surface here, as one clear message, not inside a worker process.
    try:
        gym.make(config.env_id, **config.env_kwargs).close()
    except SchedGymError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs: {exc}") from None
    run_dir = Path(config.run_dir) / config.run_name
    created = run_dir  # the outermost folder this run creates
    while not created.parent.exists() and created.parent != created:
        created = created.parent
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the run directory {run_dir}: {exc.strerror}") from None
    try:
        return _train(config, run_dir, maskable)
    except BaseException:
        _remove_empty_dirs(created)  # a run that failed before writing anything leaves no empty folder
        raise


def _remove_empty_dirs(top: Path) -> None:
    """Remove ``top`` and its subfolders, deepest first, as long as they hold no file."""
    import contextlib
    import os

    for root, _dirs, _files in os.walk(top, topdown=False):
        with contextlib.suppress(OSError):  # not empty: left alone
            os.rmdir(root)


def _train(config: TrainConfig, run_dir: Path, maskable: bool) -> Path:
    """The body of :func:`train`, once the run directory exists."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

    from schedgym.envs.wrappers import IllegalActionAsWait

    torch.set_num_threads(config.torch_threads)
    set_random_seed(config.seed)

    # --- environments
    def make_env() -> gym.Env:
        env = gym.make(config.env_id, **config.env_kwargs)
        if not maskable:
            env = IllegalActionAsWait(env)  # explicit and counted in info
        return Monitor(env)

    venv: VecEnv
    if config.vec_env == "vector":
        from stable_baselines3.common.vec_env import VecMonitor

        from agents.vec_env import SB3VecEnv
        from schedgym.envs.vector_env import PreemptionVectorEnv

        # Every sub-environment stepped in one native call (schedgym/envs/vector_env.py); VecMonitor records
        # the episode statistics Monitor records for single environments.
        batched = gym.make_vec(
            config.env_id, num_envs=config.n_envs, vectorization_mode="vector_entry_point", **config.env_kwargs
        )
        assert isinstance(batched, PreemptionVectorEnv)  # the id's vector entry point
        venv = VecMonitor(SB3VecEnv(batched))
    else:
        vec_cls = SubprocVecEnv if (config.vec_env == "subproc" and config.n_envs > 1) else DummyVecEnv
        venv = vec_cls([make_env for _ in range(config.n_envs)])
    venv.seed(config.seed)
    if config.normalize_reward:
        # Episode returns are sums of hundreds of slowdowns; a unit scale helps the value function. Only
        # rewards are scaled, so the saved policy needs no statistics at evaluation.
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=config.gamma)

    # --- model
    lr: Any = config.learning_rate
    if config.lr_schedule == "linear":
        lr = _linear(config.learning_rate)
    kwargs: dict[str, Any] = {
        "learning_rate": lr,
        "gamma": config.gamma,
        "batch_size": config.batch_size,
        "seed": config.seed,
        "device": "cpu",
        "verbose": 0,
        "policy_kwargs": {"net_arch": list(config.net_arch)},
        "tensorboard_log": str(run_dir / "tb") if config.tensorboard else None,
    }
    if config.algo in ("maskable_ppo", "ppo"):
        kwargs.update(n_steps=config.n_steps, ent_coef=config.ent_coef)
    model = algo_class(config.algo)("MlpPolicy", venv, **kwargs)

    # --- periodic evaluation on fixed validation workloads, keeping the best
    workloads = validation_workloads(config.env_id, config.env_kwargs, config.n_eval_workloads)
    best = {"mean_return": -np.inf}
    history: list[dict[str, Any]] = []

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if config.eval_freq and self.num_timesteps // config.eval_freq > len(history):
                stats = evaluate(self.model, config.env_id, config.env_kwargs, workloads, maskable)
                stats["timesteps"] = self.num_timesteps
                history.append(stats)
                for key in ("mean_return", "te_slowdown_p95", "be_slowdown_p95"):
                    self.logger.record(f"eval/{key}", stats[key])
                if stats["mean_return"] > best["mean_return"]:
                    best.update(stats)
                    self.model.save(run_dir / "best_model.zip")
                    _write_meta(run_dir / "best_model.json", config, {"evaluation": stats})
            return True

    t0 = time.perf_counter()
    model.learn(
        total_timesteps=config.total_timesteps,
        callback=Evaluate(),
        progress_bar=config.progress,
        tb_log_name="train",
    )
    seconds = time.perf_counter() - t0
    venv.close()

    # --- save the final model with everything needed to load it again
    model.save(run_dir / "model.zip")  # saved before anything else can fail
    final = evaluate(model, config.env_id, config.env_kwargs, workloads, maskable)
    summary = {
        "train_seconds": seconds,
        "steps_per_second": config.total_timesteps / seconds,
        "final_evaluation": final,
        "best_evaluation": best if history else None,
        "evaluations": history,
    }
    _write_meta(run_dir / "model.json", config, summary)
    if not history or final["mean_return"] > best["mean_return"]:
        # best_model.zip is always there: the final model when no evaluation during training did better.
        best.update(final)
        model.save(run_dir / "best_model.zip")
        _write_meta(run_dir / "best_model.json", config, {"evaluation": final})
    print(f"trained {config.total_timesteps} steps in {seconds:.0f} s: {config.total_timesteps / seconds:,.0f} steps/s")
    print(f"final validation: {final}")
    print(f"saved {run_dir / 'model.zip'} and best_model.zip (validation return {best['mean_return']:.1f})")
    return run_dir


def _linear(initial: float) -> Any:
    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial

    return schedule


def _write_meta(path: Path, config: TrainConfig, extra: dict[str, Any]) -> None:
    meta = {
        "algo": config.algo,
        "env_id": config.env_id,
        "env_kwargs": config.env_kwargs,
        "train_config": {f.name: getattr(config, f.name) for f in fields(config)},
        "validation_workloads": config.n_eval_workloads,
        **extra,
    }
    text = json.dumps(meta, indent=2, default=list, allow_nan=False) + "\n"
    with atomic_open(path) as fh:
        fh.write(text)


def load(path: str | Path) -> LearnedPolicy:
    """A saved run's model (``model.zip`` or ``best_model.zip``) as a policy."""
    return load_agent(path)


__all__ = ["TrainConfig", "evaluate", "field_docs", "load", "train", "validation_workloads"]

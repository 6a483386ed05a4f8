"""``schedgym train --algo rllib_ppo``: PPO on RLlib's new API stack with
:class:`~schedgym.rllib.module.MaskedPPOTorchRLModule` (needs the ``rllib`` extra).

Reads top to bottom like the stable-baselines3 path (agents/train.py), and shares its run folder, seeds,
validation workloads, evaluation and report:

- ``total_timesteps`` environment steps are sampled, a PPO update of :func:`~agents.rllib_config.rollout_size`
  steps at a time (RLlib's iterations: the last may overshoot by less than one update); ``num_env_runners``
  Ray actors sample ``n_envs`` environments each (0: this process samples).
- Every ``eval_freq`` steps the learner's current weights are exported as the numpy actor ``schedgym compare``
  evaluates, and run on the validation workloads (:func:`agents.train.evaluate`); the best is kept.
- The run folder gets ``checkpoint/`` (RLlib's, for ``Algorithm.from_checkpoint``), ``model.npz`` and
  ``best_model.npz`` (the actor's weights, :mod:`agents.rllib_export`) with their ``.json``:
  ``schedgym compare --policies fitgpp,mine:RUN/model.npz`` evaluates them in numpy, without Ray.

Ray: without ``address`` a local Ray is started for the run and stopped after, as ``compare --executor ray``
does it (:mod:`schedgym.experiments.executors`: no dashboard, usage statistics off, a token of its own for
Ray 2.60's token authentication, Ray's default temp dir); a Ray already initialised in this process is used
as it is. Seeds: ``seed`` goes to ``random``, numpy, torch and RLlib (``debugging(seed=...)``, which seeds
each env runner and its environments).

Faults: a lost env runner (its process killed, its node gone) is restarted by Ray up to
``max_env_runner_restarts`` times (:func:`agents.rllib_config.env_runner_restarts`) while training goes on,
and the run records how often (``env_runner_restarts``); such a run is not its seed's run (docs/rllib.md). With
no restart allowed, or once none is left, a lost env runner ends the run with one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agents.rllib_config import env_runner_restarts, ppo_settings
from schedgym._atomic import atomic_dir, output_set
from schedgym.errors import ConfigError, SchedGymError
from schedgym.rllib import import_rllib, make_env, register_envs

CHECKPOINT_DIR = "checkpoint"


class _KnownNoise(logging.Filter):
    """Drops Ray's log records that tell a user of ``schedgym train`` nothing to act on: that PPO runs on the
    new API stack (RLlib's default), that RLlib's own RLModule base builds a deprecated RLModuleConfig (on
    every module, in every process), that gputil is missing (no GPU is used). Other warnings pass."""

    LOGGERS = ("ray.rllib.algorithms.algorithm_config", "ray._common.deprecation", "ray.tune.utils.util")
    MESSAGES = ("on the new API stack", "RLModule(config=[RLModuleConfig", "Install gputil")

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(m in text for m in self.MESSAGES)


_NOISE = _KnownNoise()


def setup_env_runner(torch_threads: int, **_: Any) -> None:
    """An ``on_environment_created`` callback, run in every env runner process before it builds its module:
    ``torch_threads`` torch threads (its forward passes are a few small matrix products; more threads only
    compete for the cores), and Ray's known noise filtered from its log."""
    import torch

    torch.set_num_threads(torch_threads)
    for name in _KnownNoise.LOGGERS:
        logging.getLogger(name).addFilter(_NOISE)  # the same object: added once however often this runs


def algorithm_config(config: Any, settings: dict[str, Any] | None = None) -> Any:
    """The ``PPOConfig`` of a :class:`~agents.train.TrainConfig` (:func:`~agents.rllib_config.ppo_settings`),
    on the environment registered by :func:`~schedgym.rllib.register_envs`."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from schedgym.rllib.module import MaskedPPOTorchRLModule

    settings = settings or ppo_settings(config)
    common = config.common
    return (
        PPOConfig()
        .environment(common.env_id, env_config={**common.env_kwargs, "reward_scale": settings["reward_scale"]})
        .env_runners(**settings["env_runners"])
        .training(**settings["training"])
        .rl_module(
            rl_module_spec=RLModuleSpec(module_class=MaskedPPOTorchRLModule, model_config=settings["model_config"])
        )
        .callbacks(on_environment_created=partial(setup_env_runner, common.torch_threads))
        # Restarts (max_env_runner_restarts) keep a long run on a cluster going; 0 keeps every run reproducible.
        .fault_tolerance(**settings["fault_tolerance"])
        .debugging(seed=common.seed)
    )


@contextlib.contextmanager
def algorithm(config: Any, folder: Path, ppo_config: Any = None) -> Iterator[Any]:
    """The RLlib ``Algorithm`` of ``config`` (or of ``ppo_config``, an :func:`algorithm_config`), stopped on
    exit. Ray must be running and :func:`~schedgym.rllib.register_envs` called. The Algorithm is a Ray Tune
    Trainable: built outside Tune it makes an empty log folder under ``~/ray_results``; it is made under
    ``folder`` instead and removed after. Ray's known noise (:class:`_KnownNoise`) is filtered meanwhile."""
    from ray.tune.trainable import trainable

    ppo_config = ppo_config if ppo_config is not None else algorithm_config(config)
    saved = trainable.DEFAULT_STORAGE_PATH
    with _quiet_rllib():
        trainable.DEFAULT_STORAGE_PATH = str(Path(folder).resolve())
        try:
            algo = ppo_config.build_algo()
        finally:
            trainable.DEFAULT_STORAGE_PATH = saved
        try:
            yield algo
        finally:
            algo.stop()
            with contextlib.suppress(OSError):  # only if empty, as it is outside Tune
                os.rmdir(algo.logdir)


def train_rllib(config: Any, run_dir: Path, on_evaluation: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """Train ``config`` (``algo`` ``rllib_ppo``) into ``run_dir`` (made by :func:`agents.train.train`);
    return ``run_dir``. ``on_evaluation`` is :func:`agents.train.train`'s hook: called with every validation
    evaluation's statistics (``timesteps`` included), the final one with ``final`` True once the files are
    written."""
    ray = import_rllib()
    import torch

    from agents.rllib_export import save_actor
    from agents.train import BestModel, Evaluations, Validation, format_evaluation
    from schedgym.experiments.executors import ExecutorConfig, ray_session

    common = config.common
    torch.set_num_threads(common.torch_threads)
    random.seed(common.seed)
    np.random.seed(common.seed)
    torch.manual_seed(common.seed)
    settings = ppo_settings(config)
    ppo_config = algorithm_config(config, settings)
    layout = _actor_layout(config, ppo_config, settings)
    # The actor as compare evaluates its export (agents.inference), on the validation workloads.
    validation = Validation(config, maskable=True)
    rllib_meta = {"ray_version": ray.__version__, "checkpoint": CHECKPOINT_DIR, "settings": settings}
    best = BestModel(
        run_dir, config, partial(_save_weights, save_actor, layout), "best_model.npz", extra={"rllib": rllib_meta}
    )
    evaluate = partial(_evaluate_weights, validation, config, layout)
    evaluations = Evaluations(evaluate, best, on_evaluation or _ignore)

    register_envs()
    # Env runners take a CPU each; a local Ray gets at least that many, even on a smaller machine.
    runners = config.rllib.num_env_runners
    executor = ExecutorConfig(kind="ray", workers=max(os.cpu_count() or 1, runners), address=config.rllib.address)
    with contextlib.ExitStack() as session:
        session.enter_context(ray_session(ray, executor))  # a refused token is a ConfigError there
        cpus = float(ray.cluster_resources().get("CPU", 0))
        if runners > cpus:
            raise ConfigError(f"num_env_runners {runners} needs as many CPUs, and the Ray cluster has {cpus:g}")
        with algorithm(config, run_dir, ppo_config) as algo:
            steps, seconds, iterations = _learn(algo, config, evaluations)
            # --- save: RLlib's checkpoint (whole or not at all), then the actor for compare with the final evaluation
            save_checkpoint(algo, run_dir / CHECKPOINT_DIR)
            weights = _learner_weights(algo)
    final = evaluate(weights)
    summary = {
        "train_seconds": seconds,
        "timesteps_sampled": steps,
        "steps_per_second": steps / seconds if seconds > 0 else float("nan"),
        "baselines": validation.baseline_means(),
        "final_evaluation": final,
        "best_evaluation": best.stats if evaluations.history else None,
        "evaluations": evaluations.history,
        "iterations": iterations,
        "env_runner_restarts": iterations[-1]["env_runner_restarts"] if iterations else 0,
        "rllib": rllib_meta,
    }
    _save_final(config, run_dir, best, summary, final, weights)
    evaluations.on_evaluation({**final, "timesteps": steps, "final": True})
    print(f"trained {steps} steps in {seconds:.0f} s: {steps / seconds:,.0f} steps/s")
    print(format_evaluation(final, common.eval_baselines))
    print(
        f"saved {run_dir / CHECKPOINT_DIR}, {run_dir / 'model.npz'} and best_model.npz "
        f"(validation score {best.stats['score']:.3f})"
    )
    return run_dir


def _ignore(stats: dict[str, Any]) -> None:
    """The default ``on_evaluation``: nothing."""


def _actor_layout(config: Any, ppo_config: Any, settings: dict[str, Any]) -> Any:
    """The actor's layout, from the module RLlib builds, built here (the weights come from the learner); an
    actor numpy cannot evaluate fails now, not after training."""
    from agents.rllib_export import actor_arrays

    common = config.common
    probe = make_env({**common.env_kwargs, "reward_scale": settings["reward_scale"]}, env_id=common.env_id)
    with _quiet_rllib():
        layout = ppo_config.get_rl_module_spec(env=probe).build()
    probe.close()
    actor_arrays(layout)
    return layout


def _evaluate_weights(validation: Any, config: Any, layout: Any, weights: dict[str, Any]) -> dict[str, Any]:
    """The validation figures of the actor with ``weights``, as compare evaluates its export."""
    from agents.inference import rllib_network
    from agents.learned import LearnedPolicy
    from agents.rllib_export import actor_arrays
    from agents.train import env_config

    cfg = env_config(config.common.env_id, config.common.env_kwargs)
    policy = LearnedPolicy(
        rllib_network(actor_arrays(layout, weights)),
        name="training",
        queue=cfg.sim.queue,
        max_candidates=cfg.max_candidates,
        estimate_noise=cfg.estimate_noise,
        maskable=True,
    )
    return validation.evaluate(policy)


def _save_weights(save_actor: Callable[..., None], layout: Any, weights: dict[str, Any], path: Path) -> None:
    save_actor(path, layout, weights)


def _learner_weights(algo: Any) -> dict[str, Any]:
    from ray.rllib.core import DEFAULT_MODULE_ID

    return algo.learner_group.get_weights([DEFAULT_MODULE_ID])[DEFAULT_MODULE_ID]


def _learn(algo: Any, config: Any, evaluations: Any) -> tuple[int, float, list[dict[str, Any]]]:
    """RLlib's iterations until ``total_timesteps`` steps are sampled, evaluating every ``eval_freq``;
    return the steps sampled, the seconds taken and each iteration's summary."""
    common = config.common
    iterations: list[dict[str, Any]] = []
    bar = _progress(config)
    t0 = time.perf_counter()
    steps = 0
    while steps < common.total_timesteps:
        result = _train_iteration(algo, config)
        previous, steps = steps, _sampled(result)
        if steps == previous:
            _check_env_runners_left(algo)
        iterations.append(_iteration_summary(result, steps, config.rllib.reward_scale))
        if bar is not None:  # the last update may overshoot the total: the bar stops at it
            bar.update(min(steps, common.total_timesteps) - previous)
        if common.eval_freq and steps // common.eval_freq > len(evaluations.history):
            evaluations.record(_learner_weights(algo), steps)
    seconds = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    return steps, seconds, iterations


def _train_iteration(algo: Any, config: Any) -> dict[str, Any]:
    """``algo.train()``; an env runner lost with no restarts allowed is one line, not Ray's traceback."""
    from ray.exceptions import RayActorError

    try:
        return algo.train()
    except RayActorError as exc:
        restarts = env_runner_restarts(config)
        allowed = "no restart" if restarts == 0 else f"{restarts} restarts"
        raise SchedGymError(
            f"an env runner was lost ({_first_line(exc)}) and {allowed} allowed; --max-env-runner-restarts N "
            "restarts a lost env runner up to N times while training goes on"
        ) from None


def _check_env_runners_left(algo: Any) -> None:
    """After an iteration that sampled nothing: RLlib, which restarts lost env runners, goes on while they
    restart; once every one is gone for good (its restarts used up, Ray reports its actor dead) it would
    sample nothing for ever, so the run ends here with one line."""
    import ray
    from ray.exceptions import ActorDiedError, GetTimeoutError, RayActorError

    group = algo.env_runner_group
    if group is None or group.num_remote_workers() == 0 or group.num_healthy_remote_workers() > 0:
        return
    # The group's handles (RLlib has no public accessor): a ping of a restarting actor waits for it.
    for actor in group._worker_manager.actors().values():
        try:
            ray.get(actor.ping.remote(), timeout=algo.config.env_runner_health_probe_timeout_s)
        except ActorDiedError:
            continue  # gone for good
        except (GetTimeoutError, RayActorError):
            return  # restarting, or not known to be gone
        return  # answered: RLlib brings it back at the next iteration
    raise SchedGymError(
        f"every env runner was lost and none can be restarted again ({group.num_remote_worker_restarts()} "
        "restarts made; --max-env-runner-restarts sets how many each may have)"
    )


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _save_final(config: Any, run_dir: Path, best: Any, summary: dict[str, Any], final: dict, weights: Any) -> None:
    """One set of files (schedgym/_atomic.py): model.npz, its .json and, when the final actor is the best,
    best_model.npz and its .json appear together once all are complete, or none of them does."""
    from agents.train import finite, write_meta

    with output_set():
        best.save(weights, run_dir / "model.npz")
        write_meta(run_dir / "model.json", config, finite(summary))
        best.offer(final, weights)  # best_model.npz is always there: the final model when nothing did better


def save_checkpoint(algo: Any, path: Path) -> None:
    """``algo.save_to_path(path)``, whole or not at all: RLlib writes the checkpoint into a temporary folder
    beside ``path``, which replaces ``path`` once complete (:func:`schedgym._atomic.atomic_dir`: a previous
    checkpoint there is kept until then); a failure (a full disk: ``cannot write PATH: ...``, an interrupt)
    leaves ``path`` as it was."""
    with atomic_dir(path) as tmp:  # the folder has a folder's usual permissions, as save_to_path makes it
        try:
            algo.save_to_path(str(tmp))
        except OSError as exc:
            # RLlib writes through pyarrow, whose OSError has the errno and a text of its own ("Error writing
            # bytes to file. Detail: [errno 28] No space left on device"): the plain error, for a plain message.
            if exc.errno is None or exc.strerror == os.strerror(exc.errno):
                raise
            raise OSError(exc.errno, os.strerror(exc.errno)) from None


def _sampled(result: dict[str, Any]) -> int:
    """Environment steps sampled so far, from an RLlib result."""
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    value = result.get(NUM_ENV_STEPS_SAMPLED_LIFETIME)
    if value is None:
        value = result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME]
    return int(value)


def _iteration_summary(result: dict[str, Any], steps: int, reward_scale: float) -> dict[str, Any]:
    """What the run's .json keeps of one RLlib iteration: its time, its episodes' mean return (RLlib's
    window over recent episodes), unscaled, and the learner's losses. (RLlib's sampling and update timers are
    smoothed over iterations; benchmarks/bench_rllib.py times them itself.)"""
    from ray.rllib.core import DEFAULT_MODULE_ID

    runners = result.get("env_runners", {})
    learner = result.get("learners", {}).get(DEFAULT_MODULE_ID, {})
    ret = runners.get("episode_return_mean")
    out: dict[str, Any] = {
        "timesteps": steps,
        "seconds": float(result.get("time_this_iter_s", float("nan"))),
        "episode_return_mean": None if ret is None else float(ret) / reward_scale,
        # restarts of lost env runners so far: after one, the run is no longer its seed's (docs/rllib.md)
        "env_runner_restarts": int(result.get("fault_tolerance", {}).get("num_remote_worker_restarts", 0)),
    }
    for key in ("policy_loss", "vf_loss", "vf_loss_unclipped", "vf_explained_var", "entropy"):
        if key in learner:
            out[key] = float(learner[key])
    return {k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in out.items()}


def _progress(config: Any) -> Any:
    """A progress bar over environment steps (tqdm, the ``cli`` extra), or None."""
    if not config.common.progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=config.common.total_timesteps, unit="step", desc="rllib_ppo")


@contextlib.contextmanager
def _quiet_rllib() -> Iterator[None]:
    """:class:`_KnownNoise` filtered from this process's log for the run."""
    loggers = [logging.getLogger(name) for name in _KnownNoise.LOGGERS]
    for logger in loggers:
        logger.addFilter(_NOISE)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_NOISE)


__all__ = ["CHECKPOINT_DIR", "algorithm", "algorithm_config", "save_checkpoint", "setup_env_runner", "train_rllib"]

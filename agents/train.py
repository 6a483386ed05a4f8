"""Train a learned preemption agent with stable-baselines3: ``schedgym train``.

Reads top to bottom: environments, model, validation, imitation, learn, save (the configuration,
:class:`~agents.train_config.TrainConfig`, is in agents/train_config.py).

Seeds: ``seed`` goes to ``random``, numpy and torch (``set_random_seed``), to the model, and to the training
environments (environment ``i`` is reset with ``seed + i``; each episode then draws a fresh workload from
the environment's ``np_random``). Evaluation runs the model as a :class:`~agents.learned.LearnedPolicy`
inside the simulator (:func:`schedgym.experiments.evaluation.evaluate_policy`, the evaluation ``schedgym
compare`` runs) on fixed *validation* workloads
(:meth:`WorkloadSource.evaluation <schedgym.workloads.source.WorkloadSource.evaluation>` with
``split="validation"``: synthetic seeds 100,000+, a bundled trace's validation windows), never the *test*
workloads that ``schedgym compare`` uses.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agents.learned import ALGOS, LearnedPolicy, SB3Network, algo_class, load_agent
from agents.train_config import TrainConfig, check_env_kwargs, env_config, network_parameters, network_sizes
from schedgym._atomic import atomic_open, os_errors_surface, output_set
from schedgym._fielddocs import field_docs
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.figures import BE_P95, HEADLINE_KEYS, TE_P95
from schedgym.registry import make_policy


def model_kwargs(config: TrainConfig, tensorboard_log: str | None = None) -> dict[str, Any]:
    """The keyword arguments of the stable-baselines3 model ``config`` trains (policy and environment aside);
    the training benchmarks build their models from these too, so that they time what ``train`` runs."""
    model = config.model
    lr: Any = model.learning_rate
    if model.lr_schedule == "linear":
        lr = _linear(model.learning_rate)
    kwargs: dict[str, Any] = {
        "learning_rate": lr,
        "gamma": model.gamma,
        "batch_size": model.batch_size,
        "seed": config.common.seed,
        "device": "cpu",
        "verbose": 0,
        "policy_kwargs": {"net_arch": list(model.net_arch)},
        "tensorboard_log": tensorboard_log,
    }
    if config.common.algo in ("maskable_ppo", "ppo"):
        kwargs.update(n_steps=model.n_steps, ent_coef=model.ent_coef)
    return kwargs


def validation_workloads(env_id: str, env_kwargs: dict[str, Any], n: int) -> list[Any]:
    """The fixed validation workloads of the environment: its workload source's ``validation`` split (at
    most as many as it has; for ``mix``, levels 100,000 + i as ``schedgym compare --split validation``
    plays them, each on its own cluster: :func:`run_figures`). Never the test workloads of ``schedgym compare``."""
    from schedgym.sim.cluster import resolve_cluster
    from schedgym.workloads.distribution import level_seed

    cfg = env_config(env_id, env_kwargs)
    source = cfg.source
    if source.kind == "mix":
        return [source.mix_level(level_seed("validation", i))[1] for i in range(n)]
    cluster = resolve_cluster(cfg.cluster_name)
    available = source.n_evaluation("validation")
    count = n if available is None else min(n, available)
    return [source.evaluation("validation", i, cluster, count=count) for i in range(count)]


def run_figures(policy: Any, env_id: str, env_kwargs: dict[str, Any], workloads: list[Any]) -> dict[str, list[float]]:
    """Deterministic runs of ``policy`` on the given workloads (:func:`validation_workloads`), workload ``i``
    with seed ``i``, through the evaluation compare uses (:func:`~schedgym.experiments.evaluation.evaluate_policy`;
    a ``mix`` level on its own cluster with its own estimate noise, as the environment's reset and compare
    play it): per run, the return the environment would give, the illegal actions, and the headline figures
    by key (``te_p95``, ...; of the measured jobs, for trace windows with a warm-up)."""
    from schedgym.experiments.evaluation import evaluate_policy, per_run
    from schedgym.sim.cluster import resolve_cluster
    from schedgym.workloads.distribution import MIX, draw_level, level_seed

    cfg = env_config(env_id, env_kwargs)
    if cfg.source.kind != "mix":
        return per_run(evaluate_policy(policy, resolve_cluster(cfg.cluster_name), workloads, sim=cfg.sim, env=cfg))
    runs = []
    for i, workload in enumerate(workloads):
        seed = level_seed("validation", i)
        if workload.name != f"mix[{seed}]":  # the level's cluster and noise are those of its seed
            raise SchedGymError(f"Expected validation level {i} (mix[{seed}]) at position {i}, got {workload.name!r}")
        level = draw_level(MIX, seed)
        runs += evaluate_policy(
            policy, level.cluster, [workload], [i], cfg.sim, env=cfg, estimate_noise=level.estimate_noise
        )
    return per_run(runs)


def evaluate(
    model_or_policy: Any,
    env_id: str,
    env_kwargs: dict[str, Any],
    workloads: list[Any],
    maskable: bool,
    baselines: dict[str, dict[str, list[float]]] | None = None,
) -> dict:
    """Deterministic runs on the given workloads (:func:`run_figures`): the mean return, the mean of each
    headline figure (:data:`~schedgym.experiments.figures.HEADLINE`), and for each rule in ``baselines`` (its
    :func:`run_figures` on the same workloads) the paired differences agent minus rule (mean and 95% CI
    half-width). ``model_or_policy``: a live stable-baselines3 model or a :class:`LearnedPolicy`."""
    from schedgym.experiments.stats import mean, paired

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
    runs = run_figures(policy, env_id, env_kwargs, workloads)
    stats: dict[str, Any] = {
        "mean_return": float(np.mean(runs["return"])),
        **{f.column: mean(runs[f.key]) for f in (TE_P95, BE_P95)},
        "illegal_actions": int(sum(runs["illegal"])),
        "figures": {f: mean(runs[f]) for f in HEADLINE_KEYS},
    }
    if baselines:
        stats["minus"] = {rule: {f: paired(runs[f], ref[f]) for f in HEADLINE_KEYS} for rule, ref in baselines.items()}
    return stats


def train(config: TrainConfig, on_evaluation: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """Train, evaluate periodically, keep the best checkpoint, save the final model; return the run dir.

    ``on_evaluation``, if given, is called with the statistics of every validation evaluation as it happens
    (after imitation, every ``eval_freq`` steps, and the final one once the run's files are written), its
    ``timesteps`` included, and ``final`` True for the final one: ``schedgym tune`` reports them to Ray Tune."""
    import gymnasium as gym

    import schedgym  # noqa: F401

    common = config.common
    maskable = ALGOS[common.algo][2]
    if common.algo == "rllib_ppo":
        from schedgym.rllib import import_rllib

        import_rllib()  # not installed: one line now, before a run folder exists
    # A saved expert missing or damaged: one line now, not after the set-up.
    expert = load_expert(config.imitation.imitate)
    # Configuration errors must surface here, as one clear message, not inside a worker process.
    try:
        gym.make(common.env_id, **common.env_kwargs).close()
    except SchedGymError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs: {exc}") from None
    run_dir, created = _new_run_dir(config)
    try:
        if common.algo == "rllib_ppo":  # RLlib's own loop, same run folder and evaluation (agents/rllib_train.py)
            from agents.rllib_train import train_rllib

            return train_rllib(config, run_dir, on_evaluation or _ignore)
        with _quiet_tensorboard_thread():
            return _train(config, run_dir, maskable, on_evaluation or _ignore, expert)
    except OSError as exc:
        if not _raised_in_tensorboard(exc):
            remove_empty_dirs(created)
            raise
        # The one writer that is not schedgym's (schedgym/_atomic.py turns its own errors into SchedGymError):
        # stable-baselines3's TensorBoard logger. One line, as for every other output. The traceback goes: it
        # holds the training's frames, and the TensorBoard thread that raised the error first keeps it.
        where = exc.filename or run_dir / "tb"
        exc.with_traceback(None)
        remove_empty_dirs(created, empty_logs=True)
        raise SchedGymError(f"cannot write {where}: {exc.strerror or exc}") from None
    except BaseException:
        remove_empty_dirs(created)  # a run that failed before writing anything leaves no empty folder
        raise


@contextlib.contextmanager
def _quiet_tensorboard_thread() -> Iterator[None]:
    """TensorBoard writes its event file in a thread of its own. On a full disk that thread dies with the
    OSError, which Python prints as a traceback, and the training thread's next log write raises the same
    error (which :func:`train` turns into one line): meanwhile, that thread's OSError is not printed. Any
    other thread's exception is printed as before."""
    import threading

    previous = threading.excepthook

    def hook(args: Any) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__module__.startswith("tensorboard."):
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        if threading.excepthook is hook:  # not replaced meanwhile by someone else
            threading.excepthook = previous


def load_expert(imitate: str | None) -> Any:
    """The policy ``imitate`` (TrainConfig's) names, or None: built by :func:`train` before any environment,
    model or validation run is set up, so that a saved agent (``NAME:PATH``) that is missing or damaged is
    one line at once."""
    if imitate is None:
        return None
    try:
        return make_policy(imitate)
    except SchedGymError as exc:
        raise ConfigError(f"imitate: {exc}") from None


def _new_run_dir(config: TrainConfig) -> tuple[Path, Path]:
    """Create the run's folder, ``{run_dir}/{run_name}`` (:func:`new_run_dir`); return it and the outermost
    folder this run created (removed again if the run fails before writing anything)."""
    return new_run_dir(Path(config.common.run_dir) / config.run_name)


def new_run_dir(stem: Path) -> tuple[Path, Path]:
    """Create the folder ``stem`` (``-2``, ``-3``, ... appended to its name when a run that started in the
    same second took it: two runs never share a folder) and the folders above it that are missing; return
    it and the outermost folder created. A file (not a folder) at the name is a ConfigError. Used by
    ``schedgym train`` and ``schedgym tune``."""
    import itertools

    for n in itertools.count(1):
        run_dir = stem if n == 1 else stem.with_name(f"{stem.name}-{n}")
        created = run_dir
        while not created.parent.exists() and created.parent != created:
            created = created.parent
        try:
            run_dir.mkdir(parents=True)
            return run_dir, created
        except FileExistsError:
            if run_dir.is_dir():
                continue
            raise ConfigError(f"cannot create the run directory {run_dir}: it exists and is not a directory") from None
        except OSError as exc:
            raise ConfigError(f"cannot create the run directory {run_dir}: {exc.strerror}") from None
    raise AssertionError("unreachable")


def remove_empty_dirs(top: Path, empty_logs: bool = False) -> None:
    """Remove ``top`` and its subfolders, deepest first, as long as they hold no file (``empty_logs``: no
    file but empty TensorBoard event files, which are removed: a full disk leaves them empty)."""
    import os

    for root, _dirs, files in os.walk(top, topdown=False):
        if empty_logs:
            for name in files:
                path = os.path.join(root, name)
                with contextlib.suppress(OSError):
                    if name.startswith("events.out.tfevents.") and os.lstat(path).st_size == 0:
                        os.unlink(path)
        with contextlib.suppress(OSError):  # not empty: left alone
            os.rmdir(root)


def _raised_in_tensorboard(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by TensorBoard's writer (its traceback passes through its modules)."""
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module.startswith(("tensorboard.", "torch.utils.tensorboard")):
            return True
        tb = tb.tb_next
    return False


def _ignore(stats: dict[str, Any]) -> None:
    """The default ``on_evaluation``: nothing."""


def _train(
    config: TrainConfig,
    run_dir: Path,
    maskable: bool,
    on_evaluation: Callable[[dict[str, Any]], None],
    expert: Any = None,
) -> Path:
    """The body of :func:`train`, once the run directory exists (``expert``: :func:`load_expert`'s)."""
    import torch
    from stable_baselines3.common.utils import set_random_seed

    common = config.common
    torch.set_num_threads(common.torch_threads)
    set_random_seed(common.seed)
    venv = _training_envs(config, maskable)
    model = _model(config, venv, run_dir)
    validation = Validation(config, maskable)
    best = BestModel(run_dir, config, save_model, "best_model.zip")
    evaluations = Evaluations(validation.evaluate, best, on_evaluation)

    # --- imitation before reinforcement learning, evaluated as step 0
    imitation: list[dict[str, Any]] = []
    if config.imitation.imitate is not None:
        imitation = _imitate(config, model, maskable, config.workload_kwargs(), expert)
        stats = evaluations.record(model, 0)
        print(f"after imitating {config.imitation.imitate}: validation score {stats['score']:.3f}")

    t0 = time.perf_counter()
    if common.total_timesteps > 0:
        model.learn(
            total_timesteps=common.total_timesteps,
            callback=_evaluation_callback(evaluations, common.eval_freq),
            progress_bar=common.progress,
            tb_log_name="train",
        )
    seconds = time.perf_counter() - t0
    # stable-baselines3 stops at a rollout's end (n_steps, or dqn's train_freq, per environment): it may take more
    # steps than asked
    steps = model.num_timesteps
    venv.close()

    # --- save the final model with everything needed to load it again
    final = validation.evaluate(model)
    summary = {
        "train_seconds": seconds,
        "timesteps": steps,
        "steps_per_second": steps / seconds if seconds > 0 else float("nan"),
        "imitation": imitation,
        "baselines": validation.baseline_means(),
        "final_evaluation": final,
        "best_evaluation": best.stats if evaluations.history else None,
        "evaluations": evaluations.history,
    }
    # One set of files (schedgym/_atomic.py): model.zip, its .json and, when the final model is the best,
    # best_model.zip and its .json appear together once all are complete, or none of them does.
    with output_set():
        save_model(model, run_dir / "model.zip")
        write_meta(run_dir / "model.json", config, finite(summary))
        # best_model.zip is always there: the final model when no evaluation during training did better.
        best.offer(final, model)
    # Last, once every file is written: a caller may end the process when it learns the run is over.
    on_evaluation({**final, "timesteps": model.num_timesteps, "final": True})
    if common.total_timesteps > 0:
        asked = (
            "" if steps == common.total_timesteps else f" ({common.total_timesteps} asked: it stops at a rollout's end)"
        )
        print(f"trained {steps} steps{asked} in {seconds:.0f} s: {steps / seconds:,.0f} steps/s")
    print(format_evaluation(final, common.eval_baselines))
    print(f"saved {run_dir / 'model.zip'} and best_model.zip (validation score {best.stats['score']:.3f})")
    return run_dir


def _training_envs(config: TrainConfig, maskable: bool) -> Any:
    """The training environments, seeded: environment i trains on workload i % len(workloads); rewards
    normalised if ``normalize_reward``."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

    common = config.common
    kwargs_of = config.workload_kwargs()
    venv: VecEnv
    if config.sb3.vec_env == "vector":
        venv = _vector_env(config, kwargs_of)
    else:
        vec_cls = SubprocVecEnv if (config.sb3.vec_env == "subproc" and common.n_envs > 1) else DummyVecEnv
        factories = [_env_factory(common.env_id, kwargs_of[i % len(kwargs_of)], maskable) for i in range(common.n_envs)]
        venv = vec_cls(factories)
    venv.seed(common.seed)
    if config.sb3.normalize_reward:
        # Episode returns are sums of hundreds of slowdowns; a unit scale helps the value function. Only
        # rewards are scaled, so the saved policy needs no statistics at evaluation.
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=config.model.gamma)
    return venv


def _env_factory(env_id: str, env_kwargs: dict[str, Any], maskable: bool) -> Callable[[], Any]:
    """A function that makes one training environment (in a worker process, for subproc)."""

    def make_env() -> Any:
        import gymnasium as gym
        from stable_baselines3.common.monitor import Monitor

        from schedgym.envs.wrappers import IllegalActionAsWait

        env = gym.make(env_id, **env_kwargs)
        if not maskable:
            env = IllegalActionAsWait(env)  # explicit and counted in info
        return Monitor(env)

    return make_env


def _vector_env(config: TrainConfig, kwargs_of: list[dict[str, Any]]) -> Any:
    """Every sub-environment stepped in one native call (schedgym/envs/vector_env.py); VecMonitor records
    the episode statistics Monitor records for single environments."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.vec_env import SB3VecEnv
    from schedgym.envs.vector_env import PreemptionVectorEnv

    common = config.common
    sub_kwargs = None
    if common.workloads:
        sub_kwargs = [kwargs_of[i % len(kwargs_of)] for i in range(common.n_envs)]
    batched = gym.make_vec(
        common.env_id,
        num_envs=common.n_envs,
        vectorization_mode="vector_entry_point",
        sub_env_kwargs=sub_kwargs,
        **common.env_kwargs,
    )
    assert isinstance(batched, PreemptionVectorEnv)  # the id's vector entry point
    return VecMonitor(SB3VecEnv(batched))


def _model(config: TrainConfig, venv: Any, run_dir: Path) -> Any:
    """The stable-baselines3 model ``config`` trains on ``venv`` (:func:`model_kwargs`)."""
    kwargs = model_kwargs(config, str(run_dir / "tb") if config.sb3.tensorboard else None)
    policy: Any = "MlpPolicy"
    if config.sb3.policy == "rows":
        from agents.row_policy import POLICIES

        policy = POLICIES[config.common.algo]
    model = algo_class(config.common.algo)(policy, venv, **kwargs)
    if not config.sb3.tensorboard:
        from stable_baselines3.common.logger import Logger

        # Without TensorBoard, stable-baselines3's own logger would make an empty folder in the temporary
        # directory at every learn() (SB3-<date>): a logger with no outputs makes none.
        model.set_logger(Logger(folder=None, output_formats=[]))
    return model


class Validation:
    """The fixed validation workloads of every training workload, the reference rules' figures on them
    (run once, here), and the evaluation of a model on them; the RLlib trainer evaluates its actor here too."""

    def __init__(self, config: TrainConfig, maskable: bool):
        common = config.common
        self.env_id, self.maskable, self.rules = common.env_id, maskable, common.eval_baselines
        # workload name -> its env_kwargs
        self.named = dict(zip(workload_names(config), config.workload_kwargs(), strict=True))
        self.workloads = {
            name: validation_workloads(common.env_id, kw, common.n_eval_workloads) for name, kw in self.named.items()
        }
        self.baselines = {
            name: {rule: run_figures(make_policy(rule), common.env_id, kw, self.workloads[name]) for rule in self.rules}
            for name, kw in self.named.items()
        }

    def evaluate(self, model_or_policy: Any) -> dict[str, Any]:
        """Every training workload's validation figures, and a score to keep the best model by: the mean
        return, relative to the first reference rule's when there is one (returns of different workloads
        differ in scale)."""
        per = {
            name: evaluate(model_or_policy, self.env_id, kw, self.workloads[name], self.maskable, self.baselines[name])
            for name, kw in self.named.items()
        }
        scores = []
        for name, stats in per.items():
            ref = self.baselines[name].get(self.rules[0]) if self.rules else None
            scale = abs(float(np.mean(ref["return"]))) if ref else 1.0
            scores.append(stats["mean_return"] / (scale if scale > 0 else 1.0))
        out: dict[str, Any] = {"score": float(np.mean(scores))}
        if len(per) == 1:
            out.update(next(iter(per.values())))
        else:
            out["mean_return"] = float(np.mean([p["mean_return"] for p in per.values()]))
            out["illegal_actions"] = int(sum(p["illegal_actions"] for p in per.values()))
        out["workloads"] = per
        return out

    def baseline_means(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per workload and rule, the mean return and the headline figures (a run's .json records them)."""
        return {
            name: {rule: {f: float(np.mean(v[f])) for f in ("return", *HEADLINE_KEYS)} for rule, v in rules.items()}
            for name, rules in self.baselines.items()
        }


class BestModel:
    """The best evaluation of a run so far (``stats``; a score of -inf before any), its model saved as
    ``filename`` in the run folder by ``save(model, path)`` (:func:`save_model`'s order) with its ``.json``
    (``extra`` added to it)."""

    def __init__(
        self,
        run_dir: Path,
        config: TrainConfig,
        save: Callable[[Any, Path], None],
        filename: str,
        extra: dict[str, Any] | None = None,
    ):
        self.run_dir, self.config, self.save, self.filename = run_dir, config, save, filename
        self.extra = extra or {}
        self.stats: dict[str, Any] = {"score": -np.inf}

    def offer(self, stats: dict[str, Any], model: Any) -> None:
        """Keep ``model`` if ``stats`` scores better than the best so far."""
        if stats["score"] > self.stats["score"]:
            # The model and its .json replace the previous best together, or not at all.
            with output_set():
                self.save(model, self.run_dir / self.filename)
                meta = finite({"evaluation": stats, **self.extra})
                write_meta(self.run_dir / "best_model.json", self.config, meta)
            self.stats = dict(stats)


class Evaluations:
    """The validation evaluations of a run: each recorded (``history``), offered to the best model, and
    passed to the caller's ``on_evaluation``."""

    def __init__(
        self,
        evaluate: Callable[[Any], dict[str, Any]],
        best: BestModel,
        on_evaluation: Callable[[dict[str, Any]], None],
    ):
        self.evaluate, self.best, self.on_evaluation = evaluate, best, on_evaluation
        self.history: list[dict[str, Any]] = []

    def record(self, model: Any, timesteps: int, log: Callable[[dict[str, Any]], None] | None = None) -> dict:
        """Evaluate ``model`` after ``timesteps`` steps (``log``: also called with the statistics, before
        the model is offered to the best)."""
        stats = self.evaluate(model)
        stats["timesteps"] = timesteps
        self.history.append(stats)
        if log is not None:
            log(stats)
        self.best.offer(stats, model)
        self.on_evaluation(stats)
        return stats


def _evaluation_callback(evaluations: Evaluations, eval_freq: int) -> Any:
    """The stable-baselines3 callback that evaluates every ``eval_freq`` steps and logs every evaluation
    (those recorded before training, after imitation, once the logger exists)."""
    from stable_baselines3.common.callbacks import BaseCallback

    n_before = len(evaluations.history)

    class Evaluate(BaseCallback):
        def _on_training_start(self) -> None:
            for stats in evaluations.history:  # the evaluation after imitation, once the logger exists
                _log_evaluation(self.logger, stats)
                self.logger.dump(step=0)

        def _on_step(self) -> bool:
            if eval_freq and self.num_timesteps // eval_freq > len(evaluations.history) - n_before:
                evaluations.record(self.model, self.num_timesteps, log=partial(_log_evaluation, self.logger))
            return True

    return Evaluate()


def _log_evaluation(logger: Any, stats: dict[str, Any]) -> None:
    logger.record("eval/score", stats["score"])
    for name, per in stats["workloads"].items():
        prefix = "eval" if len(stats["workloads"]) == 1 else f"eval/{name}"
        logger.record(f"{prefix}/mean_return", per["mean_return"])
        for fig, value in per["figures"].items():
            logger.record(f"{prefix}/{fig}", value)
        for rule, diffs in per.get("minus", {}).items():
            for fig, d in diffs.items():
                logger.record(f"{prefix}/{fig}_minus_{rule}", d["mean"])


def workload_names(config: TrainConfig) -> list[str]:
    """The names of the training workloads (``workloads``, or the one of ``env_kwargs``)."""
    common = config.common
    if common.workloads:
        return list(common.workloads)
    return [str(env_config(common.env_id, common.env_kwargs).source.name)]


IDLE_WORKLOADS = 1000
"""imitation gives up when the first this many training workloads of a round asked the expert nothing (a
load so low, or episodes so short, that it is never asked): the recording loop would never end. Once one
has asked, a round is recorded for as long as it takes (60-job `paper` episodes ask about once in a hundred)."""


def _training_episode(cfg: Any, cluster: Any, rng: np.random.Generator) -> tuple[Any, Any, float]:
    """A training episode of the environment configuration ``cfg`` drawn from ``rng``: its cluster, its jobs
    and its estimate noise (a ``mix`` level's own cluster and noise, as the environment's reset draws one)."""
    from schedgym.workloads.distribution import draw_train_level_seed

    if cfg.source.kind == "mix":
        return cfg.source.mix_level(draw_train_level_seed(rng, cfg.num_levels))
    return cluster, cfg.source.episode(rng, cluster, split=cfg.split), cfg.estimate_noise


def _imitate(
    config: TrainConfig, model: Any, maskable: bool, kwargs_of: list[dict[str, Any]], expert: Any
) -> list[dict[str, Any]]:
    """Record the expert (:func:`load_expert`'s policy for ``imitate``, built once and reset before
    every run) on training workloads (drawn from the training split, cycling over the workloads) and fit the
    policy to it, ``imitate_rounds`` times (:mod:`agents.imitation`)."""
    from agents.imitation import Demonstrations, ImitationRecorder, pretrain
    from schedgym.experiments.runner import run_policy
    from schedgym.sim.cluster import resolve_cluster

    imitation, seed = config.imitation, config.common.seed
    if imitation.imitate is None or expert is None:
        raise ConfigError("imitation needs an expert: set imitate (--imitate NAME)")
    demos = Demonstrations()
    rounds: list[dict[str, Any]] = []
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))  # apart from the environments' seeds
    configs = [env_config(config.common.env_id, kw) for kw in kwargs_of]
    clusters = [resolve_cluster(cfg.cluster_name) for cfg in configs]
    for r in range(imitation.imitate_rounds):
        learner = None
        if r > 0:
            learner = SB3Network(model, maskable)
        beta = 0.5**r
        t0 = time.perf_counter()
        target = len(demos) + imitation.imitate_decisions
        unmatched = 0
        k = 0
        start = len(demos)
        while len(demos) < target:
            if k == IDLE_WORKLOADS and len(demos) == start:
                raise ConfigError(
                    f"imitation recorded no decision on the first {IDLE_WORKLOADS} training workloads of round "
                    f"{r}: {', '.join(workload_names(config))} (as configured) asks for a preemption seldom or never; "
                    "give its episodes more jobs or more load"
                )
            cfg, cluster = configs[k % len(configs)], clusters[k % len(configs)]
            k += 1
            cluster, workload, noise = _training_episode(cfg, cluster, rng)
            recorder = ImitationRecorder(
                expert,
                demos,
                max_candidates=cfg.max_candidates,
                estimate_noise=noise,
                learner=learner,
                beta=beta,
            )
            run_policy(recorder, cluster, workload, cfg.sim, rng=np.random.default_rng(rng.integers(2**63)))
            unmatched += recorder.n_unmatched
        record_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        fit = pretrain(
            model,
            demos,
            epochs=imitation.imitate_epochs,
            batch_size=config.model.batch_size,
            learning_rate=config.model.learning_rate,
            maskable=maskable,
            seed=seed + r,
        )
        rounds.append(
            {
                "round": r,
                "beta": beta,
                "workloads_recorded": k,
                "unmatched_labels": unmatched,
                "record_seconds": record_seconds,
                "fit_seconds": time.perf_counter() - t0,
                **fit,
            }
        )
        print(
            f"imitation round {r}: {int(fit['decisions']):,} decisions of {imitation.imitate}, "
            f"fit loss {fit['loss']:.3f}, agreement {fit['agreement']:.1%}"
        )
    return rounds


def format_evaluation(stats: dict[str, Any], rules: tuple[str, ...]) -> str:
    """The validation figures of every workload, and the paired differences to each rule."""
    from schedgym.experiments.report import format_interval

    lines = [f"validation (score {stats['score']:.3f}):"]
    for name, per in stats["workloads"].items():
        figs = ", ".join(f"{f} {v:.3f}" for f, v in per["figures"].items())
        lines.append(f"  {name}: return {per['mean_return']:.1f}, {figs}")
        for rule in rules:
            diffs = per.get("minus", {}).get(rule, {})
            text = ", ".join(f"{f} {format_interval(d['mean'], d['ci95'], signed=True)}" for f, d in diffs.items())
            lines.append(f"    minus {rule}: {text}")
    return "\n".join(lines)


def finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities as None (JSON without them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _linear(initial: float) -> Any:
    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial

    return schedule


def save_model(model: Any, path: Path) -> None:
    """``model.save(path)`` (stable-baselines3), the same bytes, written whole or not at all: to a temporary
    file beside ``path``, renamed onto it once complete (at the end of the enclosing output set), so that a
    full disk or an interrupt leaves the previous file, never a cut zip (schedgym/_atomic.py)."""
    with atomic_open(path, "wb") as fh, os_errors_surface():
        model.save(fh)


def write_meta(path: Path, config: TrainConfig, extra: dict[str, Any]) -> None:
    meta = {
        "algo": config.common.algo,
        "env_id": config.common.env_id,
        "env_kwargs": config.common.env_kwargs,
        # The flat options (TrainConfig.of reads them back), as runs have always recorded them.
        "train_config": config.options(),
        "validation_workloads": config.common.n_eval_workloads,
        **extra,
    }
    text = json.dumps(meta, indent=2, default=list, allow_nan=False) + "\n"
    with atomic_open(path) as fh:
        fh.write(text)


def load(path: str | Path) -> LearnedPolicy:
    """A saved run's model (``model.zip`` or ``best_model.zip``) as a policy."""
    policy = load_agent(path)
    if not isinstance(policy, LearnedPolicy):
        raise SchedGymError(f"{path}: not a model saved by 'schedgym train'")
    return policy


__all__ = [
    "BestModel",
    "Evaluations",
    "TrainConfig",
    "Validation",
    "check_env_kwargs",
    "env_config",
    "evaluate",
    "field_docs",
    "finite",
    "format_evaluation",
    "load",
    "load_expert",
    "model_kwargs",
    "network_parameters",
    "network_sizes",
    "remove_empty_dirs",
    "save_model",
    "train",
    "validation_workloads",
    "workload_names",
    "write_meta",
]

"""Train a learned preemption agent with stable-baselines3: ``schedgym train``.

Reads top to bottom: configuration, environments, model, evaluation callback, learn, save.

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
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from agents.learned import ALGOS, LearnedPolicy, SB3Network, algo_class, load_agent
from schedgym._atomic import atomic_open, os_errors_surface, output_set
from schedgym._fielddocs import field_docs
from schedgym.errors import ConfigError, SchedGymError
from schedgym.experiments.figures import BE_P95, HEADLINE_KEYS, TE_P95
from schedgym.limits import MAX_PARAMETERS, MAX_SEED
from schedgym.registry import make_policy
from schedgym.rllib import DEFAULT_REWARD_SCALE

MAX_EVAL_WORKLOADS = 100
MAX_N_ENVS = 256
"""training environments (one process each) and torch threads at most"""


@dataclass
class TrainConfig:
    """Everything one training run depends on."""

    algo: str = "maskable_ppo"
    """maskable_ppo (reads action masks), ppo or dqn (both through IllegalActionAsWait), or rllib_ppo (RLlib's
    PPO with a masked module, schedgym/rllib; the rllib extra)"""
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
    policy: str = "mlp"
    """mlp (SB3's MLP over the flat observation), or rows (maskable_ppo and ppo: one small network scores every
    candidate row alike, agents/row_policy.py; net_arch sizes each of its MLPs)"""
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
    workloads: tuple[str, ...] = ()
    """train on several workloads at once: environment i draws its episodes from workloads[i % len(workloads)]
    (synthetic presets or bundled traces, each on its own cluster unless env_kwargs names one); replaces
    env_kwargs' workload; validation covers each"""
    imitate: str | None = None
    """before reinforcement learning, imitate this registered policy (a rule such as fitgpp, or lookahead):
    behaviour cloning, then DAgger rounds"""
    imitate_decisions: int = 20_000
    """imitation: expert-labelled decisions recorded per round"""
    imitate_rounds: int = 1
    """imitation: rounds of recording and fitting (1: behaviour cloning; round r > 0 lets the learner act
    with probability 1 - 0.5**r, DAgger)"""
    imitate_epochs: int = 10
    """imitation: passes over the recorded decisions per round"""
    eval_baselines: tuple[str, ...] = ("fitgpp", "k8s")
    """rules run once on the validation workloads; every evaluation reports the agent's differences to them"""
    num_env_runners: int = 0
    """rllib_ppo: Ray actors collecting samples, n_envs environments each (0: the training process samples)"""
    address: str | None = None
    """rllib_ppo: the Ray cluster to train on ('auto': the one 'ray start --head' started here, or HOST:PORT);
    None starts a local Ray for the run and stops it after"""
    reward_scale: float = DEFAULT_REWARD_SCALE
    """rllib_ppo: rewards are multiplied by this, so that returns (about -1,500) do not saturate PPO's
    value-function clip; evaluation reports unscaled returns"""

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ConfigError(f"Expected algo in {sorted(ALGOS)}, got {self.algo!r}")
        for name in (
            "n_envs", "n_steps", "batch_size", "n_eval_workloads", "torch_threads", "imitate_decisions",
            "imitate_rounds", "imitate_epochs",
        ):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"Expected {name} > 0, got {value!r}")
        steps = self.total_timesteps
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise ConfigError(f"Expected total_timesteps >= 0, got {steps!r}")
        if steps == 0 and self.imitate is None:
            raise ConfigError("Expected total_timesteps > 0 (0 is allowed only with --imitate: imitation alone)")
        if self.policy not in ("mlp", "rows"):
            raise ConfigError(f"Expected policy 'mlp' or 'rows', got {self.policy!r}")
        if self.policy == "rows" and self.algo == "dqn":
            raise ConfigError("policy 'rows' needs an actor-critic algorithm (maskable_ppo or ppo), not dqn")
        if self.imitate is not None:
            _check_policy("imitate", self.imitate)
            if self.algo == "dqn":
                raise ConfigError("imitate needs an actor-critic algorithm (maskable_ppo or ppo), not dqn")
        for name in ("workloads", "eval_baselines"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(x, str) and x for x in value):
                raise ConfigError(f"Expected {name} to be a sequence of names, got {value!r}")
            setattr(self, name, tuple(value))
        if len(set(self.workloads)) != len(self.workloads):
            raise ConfigError(f"Expected distinct workloads, got {list(self.workloads)}")
        if len(self.workloads) > self.n_envs:
            raise ConfigError(
                f"{len(self.workloads)} workloads need at least as many environments; n_envs is {self.n_envs}"
            )
        for spec in self.eval_baselines:
            from schedgym.registry import policy_entry

            _check_policy("eval_baselines", spec)
            if ":" in spec or policy_entry(spec).learned:
                raise ConfigError(f"eval_baselines are rules; {spec!r} is a learned agent")
        if self.eval_freq < 0:
            raise ConfigError(f"Expected eval_freq >= 0, got {self.eval_freq!r}")
        if self.vec_env not in ("auto", "vector", "subproc", "dummy"):
            raise ConfigError(f"Expected vec_env 'auto', 'vector', 'subproc' or 'dummy', got {self.vec_env!r}")
        maskable = ALGOS[self.algo][2]
        if self.vec_env == "auto" and self.algo != "rllib_ppo":  # resolved here: a run's .json records it
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
        for kwargs in self.workload_kwargs():
            check_env_kwargs(self.env_id, kwargs)
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
        count = network_parameters(self)  # counted, never allocated: before torch tries
        if count > MAX_PARAMETERS:
            n_inputs, n_actions = network_sizes(self.env_id, self.env_kwargs)
            raise ConfigError(
                f"net_arch {','.join(str(int(h)) for h in self.net_arch)}: {count:,} parameters in the policy and "
                f"value networks ({n_inputs} inputs, {n_actions} actions); expected at most {MAX_PARAMETERS:,} "
                "(schedgym.limits.MAX_PARAMETERS)"
            )
        if self.n_eval_workloads > MAX_EVAL_WORKLOADS:
            raise ConfigError(f"Expected n_eval_workloads <= {MAX_EVAL_WORKLOADS}, got {self.n_eval_workloads}")
        from agents.rllib_config import check_rllib_fields  # imports no Ray

        check_rllib_fields(self)

    def workload_kwargs(self) -> list[dict[str, Any]]:
        """``env_kwargs`` for each training workload (just ``env_kwargs`` without ``workloads``)."""
        if not self.workloads:
            return [dict(self.env_kwargs)]
        return [{**self.env_kwargs, "workload": w} for w in self.workloads]

    @property
    def run_name(self) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"{self.env_id.replace('/', '_')}__{self.algo}__{self.seed}__{stamp}"


def _check_policy(field_name: str, spec: str) -> None:
    from schedgym.errors import UnknownNameError
    from schedgym.registry import check_spec

    try:
        check_spec(spec)
    except UnknownNameError as exc:
        raise ConfigError(f"{field_name}: {exc}") from None


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
        env_config(env_id, env_kwargs)
    except ConfigError:
        raise
    except (SchedGymError, TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs: {exc}") from None


def env_config(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """The :class:`~schedgym.envs.EnvConfig` of ``gym.make(env_id, **env_kwargs)`` (``max_episode_steps`` is
    gym.make's, not the configuration's)."""
    import gymnasium as gym

    import schedgym  # noqa: F401  (registers the ids)
    from schedgym.envs import EnvConfig

    own = {k: v for k, v in env_kwargs.items() if k != "max_episode_steps"}
    return EnvConfig(**{**gym.spec(env_id).kwargs, **own})


def network_sizes(env_id: str, env_kwargs: dict[str, Any]) -> tuple[int, int]:
    """``(observation features, actions)`` of the environment (every training workload shares them: they
    depend on ``max_candidates`` alone)."""
    from schedgym.decision.features import observation_size

    cfg = env_config(env_id, env_kwargs)
    return observation_size(cfg.max_candidates), cfg.max_candidates + 1


def _mlp_parameters(n_in: int, hidden: list[int]) -> int:
    """Weights and biases of Linear layers ``n_in -> hidden[0] -> ... -> hidden[-1]``."""
    total = 0
    for n_out in hidden:
        total += n_in * n_out + n_out
        n_in = n_out
    return total


def network_parameters(config: TrainConfig) -> int:
    """The parameters of the networks ``config`` trains, counted from the environment's observation and
    action sizes and ``net_arch`` without building anything (:data:`~schedgym.limits.MAX_PARAMETERS`): for
    maskable_ppo, ppo and rllib_ppo an actor and a critic, each with ``net_arch``'s hidden layers, and their
    heads (SB3's MlpPolicy, PPO's default RLModule); for dqn the Q network and its target copy; for the row
    policy its six MLPs and three heads (agents/row_policy.py)."""
    n_inputs, n_actions = network_sizes(config.env_id, config.env_kwargs)
    hidden = [int(h) for h in config.net_arch]
    last = hidden[-1]
    if config.policy == "rows":
        from schedgym.decision.features import CANDIDATE_FEATURES, N_HEAD

        row = N_HEAD + len(CANDIDATE_FEATURES)
        pooled = N_HEAD + 2 * last + 1
        one_side = _mlp_parameters(row, hidden) + _mlp_parameters(pooled, hidden)
        return 2 * one_side + 3 * (last + 1)  # actor and critic; row_out, stop_out and the value head
    if config.algo == "dqn":
        return 2 * (_mlp_parameters(n_inputs, hidden) + last * n_actions + n_actions)  # q_net and q_net_target
    return 2 * _mlp_parameters(n_inputs, hidden) + (last * n_actions + n_actions) + (last + 1)


def model_kwargs(config: TrainConfig, tensorboard_log: str | None = None) -> dict[str, Any]:
    """The keyword arguments of the stable-baselines3 model ``config`` trains (policy and environment aside);
    the training benchmarks build their models from these too, so that they time what ``train`` runs."""
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
        "tensorboard_log": tensorboard_log,
    }
    if config.algo in ("maskable_ppo", "ppo"):
        kwargs.update(n_steps=config.n_steps, ent_coef=config.ent_coef)
    return kwargs


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


def run_figures(policy: Any, env_id: str, env_kwargs: dict[str, Any], workloads: list[Any]) -> dict[str, list[float]]:
    """Deterministic runs of ``policy`` on the given workloads, workload ``i`` with seed ``i``, through the
    evaluation compare uses (:func:`~schedgym.experiments.evaluation.evaluate_policy`): per run, the return
    the environment would give, the illegal actions, and the headline figures by key (``te_p95``, ...; of the
    measured jobs, for trace windows with a warm-up)."""
    from schedgym.experiments.evaluation import evaluate_policy, per_run
    from schedgym.sim.cluster import resolve_cluster

    cfg = env_config(env_id, env_kwargs)
    return per_run(evaluate_policy(policy, resolve_cluster(cfg.cluster_name), workloads, sim=cfg.sim, env=cfg))


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

    maskable = ALGOS[config.algo][2]
    if config.algo == "rllib_ppo":
        from schedgym.rllib import import_rllib

        import_rllib()  # not installed: one line now, before a run folder exists
    expert = load_expert(config.imitate)  # a saved expert missing or damaged: one line now, not after the set-up
    # Configuration errors must surface here, as one clear message, not inside a worker process.
    try:
        gym.make(config.env_id, **config.env_kwargs).close()
    except SchedGymError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs: {exc}") from None
    run_dir, created = _new_run_dir(config)
    try:
        if config.algo == "rllib_ppo":  # RLlib's own loop, same run folder and evaluation (agents/rllib_train.py)
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
    """Create the run's folder, ``{run_dir}/{run_name}`` (``-2``, ``-3``, ... appended when a run that
    started in the same second took the name: two runs never share a folder); return it and the outermost
    folder this run created (removed again if the run fails before writing anything)."""
    import itertools

    stem = Path(config.run_dir) / config.run_name
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
    import gymnasium as gym
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

    from schedgym.envs.wrappers import IllegalActionAsWait

    torch.set_num_threads(config.torch_threads)
    set_random_seed(config.seed)

    # --- environments: environment i trains on workload i % len(workloads)
    kwargs_of = config.workload_kwargs()

    def env_kwargs_of(i: int) -> dict[str, Any]:
        return kwargs_of[i % len(kwargs_of)]

    def env_factory(i: int) -> Any:
        def make_env() -> gym.Env:
            env = gym.make(config.env_id, **env_kwargs_of(i))
            if not maskable:
                env = IllegalActionAsWait(env)  # explicit and counted in info
            return Monitor(env)

        return make_env

    venv: VecEnv
    if config.vec_env == "vector":
        from stable_baselines3.common.vec_env import VecMonitor

        from agents.vec_env import SB3VecEnv
        from schedgym.envs.vector_env import PreemptionVectorEnv

        # Every sub-environment stepped in one native call (schedgym/envs/vector_env.py); VecMonitor records
        # the episode statistics Monitor records for single environments.
        sub_kwargs = None
        if config.workloads:
            sub_kwargs = [env_kwargs_of(i) for i in range(config.n_envs)]
        batched = gym.make_vec(
            config.env_id,
            num_envs=config.n_envs,
            vectorization_mode="vector_entry_point",
            sub_env_kwargs=sub_kwargs,
            **config.env_kwargs,
        )
        assert isinstance(batched, PreemptionVectorEnv)  # the id's vector entry point
        venv = VecMonitor(SB3VecEnv(batched))
    else:
        vec_cls = SubprocVecEnv if (config.vec_env == "subproc" and config.n_envs > 1) else DummyVecEnv
        venv = vec_cls([env_factory(i) for i in range(config.n_envs)])
    venv.seed(config.seed)
    if config.normalize_reward:
        # Episode returns are sums of hundreds of slowdowns; a unit scale helps the value function. Only
        # rewards are scaled, so the saved policy needs no statistics at evaluation.
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=config.gamma)

    # --- model
    kwargs = model_kwargs(config, str(run_dir / "tb") if config.tensorboard else None)
    policy: Any = "MlpPolicy"
    if config.policy == "rows":
        from agents.row_policy import POLICIES

        policy = POLICIES[config.algo]
    model = algo_class(config.algo)(policy, venv, **kwargs)

    # --- fixed validation workloads per training workload, and the reference rules' figures on them
    named = dict(zip(workload_names(config), kwargs_of, strict=True))  # workload name -> its env_kwargs
    validation = {name: validation_workloads(config.env_id, kw, config.n_eval_workloads) for name, kw in named.items()}
    baselines = {
        name: {
            rule: run_figures(make_policy(rule), config.env_id, kw, validation[name]) for rule in config.eval_baselines
        }
        for name, kw in named.items()
    }

    def evaluate_all(model_or_policy: Any) -> dict[str, Any]:
        """Every training workload's validation figures, and a score to keep the best model by: the mean
        return, relative to the first reference rule's when there is one (returns of different workloads
        differ in scale)."""
        per = {
            name: evaluate(model_or_policy, config.env_id, kw, validation[name], maskable, baselines[name])
            for name, kw in named.items()
        }
        scores = []
        for name, stats in per.items():
            ref = baselines[name].get(config.eval_baselines[0]) if config.eval_baselines else None
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

    def log_evaluation(logger: Any, stats: dict[str, Any]) -> None:
        logger.record("eval/score", stats["score"])
        for name, per in stats["workloads"].items():
            prefix = "eval" if len(stats["workloads"]) == 1 else f"eval/{name}"
            logger.record(f"{prefix}/mean_return", per["mean_return"])
            for fig, value in per["figures"].items():
                logger.record(f"{prefix}/{fig}", value)
            for rule, diffs in per.get("minus", {}).items():
                for fig, d in diffs.items():
                    logger.record(f"{prefix}/{fig}_minus_{rule}", d["mean"])

    best: dict[str, Any] = {"score": -np.inf}
    history: list[dict[str, Any]] = []

    def keep_if_best(stats: dict[str, Any], model: Any) -> None:
        if stats["score"] > best["score"]:
            # The model and its .json replace the previous best together, or not at all.
            with output_set():
                save_model(model, run_dir / "best_model.zip")
                write_meta(run_dir / "best_model.json", config, finite({"evaluation": stats}))
            best.clear()
            best.update(stats)

    # --- imitation before reinforcement learning, evaluated as step 0
    imitation: list[dict[str, Any]] = []
    if config.imitate is not None:
        imitation = _imitate(config, model, maskable, kwargs_of, expert)
        stats = evaluate_all(model)
        stats["timesteps"] = 0
        history.append(stats)
        keep_if_best(stats, model)
        on_evaluation(stats)
        print(f"after imitating {config.imitate}: validation score {stats['score']:.3f}")
    n_before = len(history)

    class Evaluate(BaseCallback):
        def _on_training_start(self) -> None:
            for stats in history:  # the evaluation after imitation, once the logger exists
                log_evaluation(self.logger, stats)
                self.logger.dump(step=0)

        def _on_step(self) -> bool:
            if config.eval_freq and self.num_timesteps // config.eval_freq > len(history) - n_before:
                stats = evaluate_all(self.model)
                stats["timesteps"] = self.num_timesteps
                history.append(stats)
                log_evaluation(self.logger, stats)
                keep_if_best(stats, self.model)
                on_evaluation(stats)
            return True

    t0 = time.perf_counter()
    if config.total_timesteps > 0:
        model.learn(
            total_timesteps=config.total_timesteps,
            callback=Evaluate(),
            progress_bar=config.progress,
            tb_log_name="train",
        )
    seconds = time.perf_counter() - t0
    venv.close()

    # --- save the final model with everything needed to load it again
    final = evaluate_all(model)
    summary = {
        "train_seconds": seconds,
        "steps_per_second": config.total_timesteps / seconds if seconds > 0 else float("nan"),
        "imitation": imitation,
        "baselines": {
            name: {rule: {f: float(np.mean(v[f])) for f in ("return", *HEADLINE_KEYS)} for rule, v in rules.items()}
            for name, rules in baselines.items()
        },
        "final_evaluation": final,
        "best_evaluation": best if history else None,
        "evaluations": history,
    }
    # One set of files (schedgym/_atomic.py): model.zip, its .json and, when the final model is the best,
    # best_model.zip and its .json appear together once all are complete, or none of them does.
    with output_set():
        save_model(model, run_dir / "model.zip")
        write_meta(run_dir / "model.json", config, finite(summary))
        # best_model.zip is always there: the final model when no evaluation during training did better.
        keep_if_best(final, model)
    # Last, once every file is written: a caller may end the process when it learns the run is over.
    on_evaluation({**final, "timesteps": model.num_timesteps, "final": True})
    if config.total_timesteps > 0:
        rate = config.total_timesteps / seconds
        print(f"trained {config.total_timesteps} steps in {seconds:.0f} s: {rate:,.0f} steps/s")
    print(format_evaluation(final, config.eval_baselines))
    print(f"saved {run_dir / 'model.zip'} and best_model.zip (validation score {best['score']:.3f})")
    return run_dir


def workload_names(config: TrainConfig) -> list[str]:
    if config.workloads:
        return list(config.workloads)
    return [str(env_config(config.env_id, config.env_kwargs).source.name)]


def _imitate(
    config: TrainConfig, model: Any, maskable: bool, kwargs_of: list[dict[str, Any]], expert: Any
) -> list[dict[str, Any]]:
    """Record the expert (:func:`load_expert`'s policy for ``config.imitate``, built once and reset before
    every run) on training workloads (drawn from the training split, cycling over the workloads) and fit the
    policy to it, ``imitate_rounds`` times (:mod:`agents.imitation`)."""
    from agents.imitation import Demonstrations, ImitationRecorder, pretrain
    from schedgym.experiments.runner import run_policy
    from schedgym.sim.cluster import resolve_cluster

    if config.imitate is None or expert is None:
        raise ConfigError("imitation needs an expert: set imitate (--imitate NAME)")
    demos = Demonstrations()
    rounds: list[dict[str, Any]] = []
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, 2]))  # apart from the environments' seeds
    configs = [env_config(config.env_id, kw) for kw in kwargs_of]
    clusters = [resolve_cluster(cfg.cluster_name) for cfg in configs]
    for r in range(config.imitate_rounds):
        learner = None
        if r > 0:
            learner = SB3Network(model, maskable)
        beta = 0.5**r
        t0 = time.perf_counter()
        target = len(demos) + config.imitate_decisions
        unmatched = 0
        k = 0
        while len(demos) < target:
            cfg, cluster = configs[k % len(configs)], clusters[k % len(configs)]
            k += 1
            workload = cfg.source.episode(rng, cluster, split=cfg.split)
            recorder = ImitationRecorder(
                expert,
                demos,
                max_candidates=cfg.max_candidates,
                estimate_noise=cfg.estimate_noise,
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
            epochs=config.imitate_epochs,
            batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            maskable=maskable,
            seed=config.seed + r,
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
            f"imitation round {r}: {int(fit['decisions']):,} decisions of {config.imitate}, "
            f"fit loss {fit['loss']:.3f}, agreement {fit['agreement']:.1%}"
        )
    return rounds


def format_evaluation(stats: dict[str, Any], rules: tuple[str, ...]) -> str:
    """The validation figures of every workload, and the paired differences to each rule."""
    lines = [f"validation (score {stats['score']:.3f}):"]
    for name, per in stats["workloads"].items():
        figs = ", ".join(f"{f} {v:.3f}" for f, v in per["figures"].items())
        lines.append(f"  {name}: return {per['mean_return']:.1f}, {figs}")
        for rule in rules:
            diffs = per.get("minus", {}).get(rule, {})
            text = ", ".join(f"{f} {d['mean']:+.3f} ± {d['ci95']:.3f}" for f, d in diffs.items())
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


__all__ = [
    "TrainConfig",
    "evaluate",
    "field_docs",
    "finite",
    "format_evaluation",
    "load",
    "load_expert",
    "model_kwargs",
    "network_parameters",
    "remove_empty_dirs",
    "save_model",
    "train",
    "validation_workloads",
    "workload_names",
    "write_meta",
]

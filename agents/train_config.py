"""The configuration of ``schedgym train``: :class:`TrainConfig`, one small dataclass per concern.

- :class:`CommonConfig`: what every trainer reads (the algorithm, the environment and its workloads, the
  budget, the seed, the validation, the run folder).
- :class:`ModelConfig`: the network and its optimisation, read by every algorithm (stable-baselines3's
  and RLlib's PPO train on the same settings, DQN on those that apply to it).
- :class:`SB3Config`: what only the stable-baselines3 algorithms read (the policy class, the vector
  environment, reward normalisation, TensorBoard).
- :class:`ImitationConfig`: imitation before reinforcement learning (:mod:`agents.imitation`).
- :class:`RLlibConfig`: what only ``rllib_ppo`` reads (:mod:`agents.rllib_train`).

Each group checks its own fields in its ``__post_init__``; :class:`TrainConfig` checks the combinations
(:func:`check_combination`). Every field name is unique across the groups: it is the command-line option
(``learning_rate`` is ``--learning-rate``), the key of the flat ``train_config`` a run's ``.json`` records,
and the name ``schedgym tune`` searches. :meth:`TrainConfig.of` builds a configuration from those flat
names, :meth:`TrainConfig.options` gives them back.

A field's command-line parsing follows from its annotation (:mod:`agents.commands`); a field that needs
more declares it in ``metadata["cli"]`` (argparse keywords: ``type``, ``metavar``, ...).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agents.learned import ALGOS
from agents.rllib_config import MAX_ENV_RUNNER_RESTARTS, MAX_ENV_RUNNERS, RLLIB_ALGO, rollout_size
from schedgym._fielddocs import option_fields
from schedgym.cli import int_type
from schedgym.errors import ConfigError, SchedGymError
from schedgym.limits import MAX_PARAMETERS, MAX_SEED
from schedgym.rllib import DEFAULT_REWARD_SCALE, check_reward_scale

MAX_EVAL_WORKLOADS = 100
MAX_N_ENVS = 256
"""training environments (one process each) and torch threads at most"""


def _check_positive(config: object, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"Expected {name} > 0, got {value!r}")


def _as_names(config: object, name: str) -> None:
    """``config.name`` as a tuple of non-empty names (a frozen dataclass: set through object.__setattr__)."""
    value = getattr(config, name)
    if isinstance(value, str) or not all(isinstance(x, str) and x for x in value):
        raise ConfigError(f"Expected {name} to be a sequence of names, got {value!r}")
    object.__setattr__(config, name, tuple(value))


def _check_policy(field_name: str, spec: str) -> None:
    from schedgym.errors import UnknownNameError
    from schedgym.registry import check_spec

    try:
        check_spec(spec)
    except UnknownNameError as exc:
        raise ConfigError(f"{field_name}: {exc}") from None


@dataclass(frozen=True)
class CommonConfig:
    """What every trainer reads: the algorithm, the environment, the budget, the seed, the validation."""

    algo: str = "maskable_ppo"
    """maskable_ppo (reads action masks), ppo or dqn (both through IllegalActionAsWait), or rllib_ppo (RLlib's
    PPO with a masked module, schedgym/rllib; the rllib extra)"""
    env_id: str = "schedgym/Preemption-v1"
    """registered environment id"""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """EnvConfig overrides for the environment (JSON on the command line)"""
    workloads: tuple[str, ...] = ()
    """train on several workloads at once: environment i draws its episodes from workloads[i % len(workloads)]
    (synthetic presets or bundled traces, each on its own cluster unless env_kwargs names one); replaces
    env_kwargs' workload; validation covers each"""
    total_timesteps: int = 200_000
    """environment steps (decisions) to train for"""
    n_envs: int = 2
    """parallel training environments"""
    seed: int = field(default=0, metadata={"cli": {"type": int_type(0, MAX_SEED, "MAX_SEED")}})
    """seed for random, numpy, torch, the model and the environments"""
    eval_freq: int = 20_000
    """evaluate every this many total steps (0: never)"""
    n_eval_workloads: int = 5
    """validation workloads per evaluation"""
    eval_baselines: tuple[str, ...] = ("fitgpp", "k8s")
    """rules run once on the validation workloads; every evaluation reports the agent's differences to them"""
    run_dir: str = "runs"
    """where runs are written: {run_dir}/{env_id with / as _}__{algo}__{seed}__{timestamp}/"""
    progress: bool = True
    """show a progress bar"""
    torch_threads: int = 1
    """torch threads in this process (a small MLP gains nothing from more, and on few cores they oversubscribe)"""

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ConfigError(f"Expected algo in {sorted(ALGOS)}, got {self.algo!r}")
        _check_positive(self, "n_envs", "n_eval_workloads", "torch_threads")
        steps = self.total_timesteps
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise ConfigError(f"Expected total_timesteps >= 0, got {steps!r}")
        self._check_names()
        if self.eval_freq < 0:
            raise ConfigError(f"Expected eval_freq >= 0, got {self.eval_freq!r}")
        self._check_environment()
        self._check_limits()

    def _check_names(self) -> None:
        from schedgym.registry import policy_entry

        _as_names(self, "workloads")
        _as_names(self, "eval_baselines")
        for name in ("workloads", "eval_baselines"):  # a baseline given twice was run and reported twice
            names = getattr(self, name)
            if len(set(names)) != len(names):
                twice = sorted({x for x in names if names.count(x) > 1})
                raise ConfigError(
                    f"Expected distinct {name}, got {list(names)}: {', '.join(map(repr, twice))} more than once"
                )
        for spec in self.eval_baselines:
            _check_policy("eval_baselines", spec)
            if ":" in spec or policy_entry(spec).learned:
                raise ConfigError(f"eval_baselines are rules; {spec!r} is a learned agent")

    def _check_environment(self) -> None:
        import gymnasium as gym

        import schedgym  # noqa: F401  (registers the ids)

        if self.env_id not in gym.registry or not self.env_id.startswith("schedgym/"):
            ids = sorted(i for i in gym.registry if i.startswith("schedgym/"))
            raise ConfigError(f"Unknown env_id {self.env_id!r}; schedgym registers {ids}")
        check_env_kwargs(self.env_id, self.env_kwargs)
        if self.workloads and self.env_kwargs.get("trace") is not None:
            # A trace wins over the workload name: every "workload" would be the trace, labelled otherwise.
            raise ConfigError(f"--workloads {','.join(self.workloads)} and a trace in env_kwargs both set the workload")
        for kwargs in self.workload_kwargs():
            check_env_kwargs(self.env_id, kwargs)
        # Validation, compare and the bundled agents read a trained network through the victim-by-victim
        # protocol's version-1 rows (agents.learned.LearnedPolicy): other observations would not reach it.
        cfg = env_config(self.env_id, self.env_kwargs)
        if cfg.action_mode != "victim":
            raise ConfigError(
                f"schedgym train trains victim-by-victim agents; {self.env_id} is in the plan mode, which "
                "python -m agents.lean_ppo and python -m agents.evolve train"
            )
        if cfg.observation_version != 1:
            raise ConfigError(
                f"schedgym train trains on observation version 1, which compare gives a saved agent; got "
                f"observation_version {cfg.observation_version}"
            )

    def _check_limits(self) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"Expected seed from 0 to {MAX_SEED} (numpy's and torch's range), got {self.seed!r}")
        if self.n_envs > MAX_N_ENVS:
            raise ConfigError(f"Expected n_envs <= {MAX_N_ENVS} (one process each), got {self.n_envs}")
        if self.torch_threads > MAX_N_ENVS:
            raise ConfigError(f"Expected torch_threads <= {MAX_N_ENVS}, got {self.torch_threads}")
        if not isinstance(self.run_dir, str) or not self.run_dir.strip():
            raise ConfigError(f"Expected run_dir to name a directory, got {self.run_dir!r}")
        if self.n_eval_workloads > MAX_EVAL_WORKLOADS:
            raise ConfigError(f"Expected n_eval_workloads <= {MAX_EVAL_WORKLOADS}, got {self.n_eval_workloads}")

    def workload_kwargs(self) -> list[dict[str, Any]]:
        """``env_kwargs`` for each training workload (just ``env_kwargs`` without ``workloads``)."""
        if not self.workloads:
            return [dict(self.env_kwargs)]
        return [{**self.env_kwargs, "workload": w} for w in self.workloads]


@dataclass(frozen=True)
class ModelConfig:
    """The network and its optimisation: read by every algorithm (RLlib's PPO takes them as
    stable-baselines3's PPO does, :func:`agents.rllib_config.ppo_settings`)."""

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

    def __post_init__(self) -> None:
        _check_positive(self, "n_steps", "batch_size")
        if self.lr_schedule not in ("constant", "linear"):
            raise ConfigError(f"Expected lr_schedule 'constant' or 'linear', got {self.lr_schedule!r}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ConfigError(f"Expected a finite learning_rate > 0, got {self.learning_rate!r}")
        if not (math.isfinite(self.gamma) and 0 < self.gamma <= 1):
            raise ConfigError(f"Expected 0 < gamma <= 1, got {self.gamma!r}")
        if not (math.isfinite(self.ent_coef) and self.ent_coef >= 0):
            raise ConfigError(f"Expected a finite ent_coef >= 0, got {self.ent_coef!r}")
        if not self.net_arch or any(int(h) <= 0 for h in self.net_arch):
            raise ConfigError(f"Expected positive layer sizes in net_arch, got {self.net_arch!r}")
        object.__setattr__(self, "net_arch", tuple(self.net_arch))


@dataclass(frozen=True)
class SB3Config:
    """What only the stable-baselines3 algorithms (maskable_ppo, ppo, dqn) read."""

    policy: str = "mlp"
    """mlp (SB3's MLP over the flat observation), or rows (maskable_ppo and ppo: one small network scores every
    candidate row alike, agents/row_policy.py; net_arch sizes each of its MLPs)"""
    vec_env: str = "auto"
    """vector (the batched native vector environment, stepped in one call; maskable_ppo only), subproc (one
    process per environment), dummy (all in this process), or auto: vector for maskable_ppo, else subproc"""
    normalize_reward: bool = True
    """scale rewards by a running estimate of the return's spread (VecNormalize, training only)"""
    tensorboard: bool = True
    """log to TensorBoard (needs the tensorboard package)"""

    def __post_init__(self) -> None:
        if self.policy not in ("mlp", "rows"):
            raise ConfigError(f"Expected policy 'mlp' or 'rows', got {self.policy!r}")
        if self.vec_env not in ("auto", "vector", "subproc", "dummy"):
            raise ConfigError(f"Expected vec_env 'auto', 'vector', 'subproc' or 'dummy', got {self.vec_env!r}")


@dataclass(frozen=True)
class ImitationConfig:
    """Imitation of a registered policy before reinforcement learning (:mod:`agents.imitation`)."""

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

    def __post_init__(self) -> None:
        _check_positive(self, "imitate_decisions", "imitate_rounds", "imitate_epochs")
        if self.imitate is not None:
            _check_policy("imitate", self.imitate)


@dataclass(frozen=True)
class RLlibConfig:
    """What only ``rllib_ppo`` reads (:mod:`agents.rllib_train`)."""

    num_env_runners: int = 0
    """rllib_ppo: Ray actors collecting samples, n_envs environments each (0: the training process samples)"""
    address: str | None = field(default=None, metadata={"cli": {"metavar": "auto|HOST:PORT"}})
    """rllib_ppo: the Ray cluster to train on ('auto': the one 'ray start --head' started here, or HOST:PORT);
    None starts a local Ray for the run and stops it after"""
    reward_scale: float = DEFAULT_REWARD_SCALE
    """rllib_ppo: rewards are multiplied by this, so that returns (about -1,500) do not saturate PPO's
    value-function clip; evaluation reports unscaled returns"""
    max_env_runner_restarts: int | None = field(
        default=None, metadata={"cli": {"type": int_type(0, MAX_ENV_RUNNER_RESTARTS), "metavar": "N"}}
    )
    """rllib_ppo: times each env runner is restarted when its process or node is lost, training going on
    meanwhile (a run with a restart is not its seed's run: docs/rllib.md); 0: a lost env runner ends the run;
    None: 3 with --address, 0 on the local Ray"""

    def __post_init__(self) -> None:
        runners = self.num_env_runners
        if not isinstance(runners, int) or isinstance(runners, bool) or not 0 <= runners <= MAX_ENV_RUNNERS:
            raise ConfigError(f"Expected num_env_runners from 0 to {MAX_ENV_RUNNERS}, got {runners!r}")
        address = self.address
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(f"Expected address 'auto' or HOST:PORT of a Ray cluster, got {address!r}")
        check_reward_scale(self.reward_scale)
        restarts = self.max_env_runner_restarts
        if restarts is not None and (
            not isinstance(restarts, int) or isinstance(restarts, bool) or not 0 <= restarts <= MAX_ENV_RUNNER_RESTARTS
        ):
            raise ConfigError(f"Expected max_env_runner_restarts from 0 to {MAX_ENV_RUNNER_RESTARTS}, got {restarts!r}")

    def given(self) -> list[str]:
        """The fields set to other than their defaults (which the stable-baselines3 algorithms refuse)."""
        return _given(self, *(f.name for f in dataclasses.fields(self)))


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run depends on, one group per concern (:meth:`of` builds it from the flat
    option names the command line, the run's ``.json`` and ``schedgym tune`` use)."""

    common: CommonConfig = field(default_factory=CommonConfig)
    """what every trainer reads"""
    model: ModelConfig = field(default_factory=ModelConfig)
    """the network and its optimisation"""
    sb3: SB3Config = field(default_factory=SB3Config)
    """the stable-baselines3 algorithms' own settings"""
    imitation: ImitationConfig = field(default_factory=ImitationConfig)
    """imitation before reinforcement learning"""
    rllib: RLlibConfig = field(default_factory=RLlibConfig)
    """rllib_ppo's own settings"""

    def __post_init__(self) -> None:
        check_combination(self)
        maskable = ALGOS[self.common.algo][2]
        if self.sb3.vec_env == "auto" and self.common.algo != RLLIB_ALGO:  # resolved here: a run's .json records it
            resolved = dataclasses.replace(self.sb3, vec_env="vector" if maskable else "subproc")
            object.__setattr__(self, "sb3", resolved)

    @classmethod
    def option_names(cls) -> list[str]:
        """Every option (a field of one of the groups), in the order of the groups."""
        return [f.name for f, _ in option_fields(cls)]

    @classmethod
    def of(cls, **options: Any) -> TrainConfig:
        """The configuration with these options (flat field names, ``learning_rate=1e-3``), the others at
        their defaults."""
        groups: dict[str, dict[str, Any]] = {g.name: {} for g in dataclasses.fields(cls)}
        owner = {f.name: group for group, f in _option_groups(cls)}
        for name, value in options.items():
            if name not in owner:
                close = difflib.get_close_matches(str(name), list(owner), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"Unknown TrainConfig option {name!r}{hint}")
            groups[owner[name]][name] = value
        built = {g.name: g.default_factory(**groups[g.name]) for g in dataclasses.fields(cls)}  # type: ignore[misc,operator]
        return cls(**built)

    def options(self) -> dict[str, Any]:
        """The flat options: :meth:`of` of them gives this configuration again."""
        return {f.name: getattr(getattr(self, group), f.name) for group, f in _option_groups(type(self))}

    def replace(self, **options: Any) -> TrainConfig:
        """This configuration with some options changed (checked anew)."""
        return self.of(**{**self.options(), **options})

    def workload_kwargs(self) -> list[dict[str, Any]]:
        """``env_kwargs`` for each training workload (just ``env_kwargs`` without ``workloads``)."""
        return self.common.workload_kwargs()

    @property
    def run_name(self) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        c = self.common
        return f"{c.env_id.replace('/', '_')}__{c.algo}__{c.seed}__{stamp}"


def _option_groups(cls: type) -> Iterator[tuple[str, dataclasses.Field]]:
    """``(group name, field)`` of every option of ``cls`` (a dataclass of groups)."""
    for group in dataclasses.fields(cls):
        for f in dataclasses.fields(group.default_factory):  # type: ignore[arg-type]
            yield group.name, f


# --- the combinations: the one place where a group's value is checked against another's


def check_combination(config: TrainConfig) -> None:
    """Check what no group can check alone: that the algorithm does what the other groups ask of it, that
    the workloads have environments, and that the networks fit :data:`~schedgym.limits.MAX_PARAMETERS`."""
    common = config.common
    if common.total_timesteps == 0 and config.imitation.imitate is None:
        raise ConfigError("Expected total_timesteps > 0 (0 is allowed only with --imitate: imitation alone)")
    if common.algo == "dqn":
        if config.sb3.policy == "rows":
            raise ConfigError("policy 'rows' needs an actor-critic algorithm (maskable_ppo or ppo), not dqn")
        if config.imitation.imitate is not None:
            raise ConfigError("imitate needs an actor-critic algorithm (maskable_ppo or ppo), not dqn")
    if len(common.workloads) > common.n_envs:
        raise ConfigError(
            f"{len(common.workloads)} workloads need at least as many environments; n_envs is {common.n_envs}"
        )
    if config.sb3.vec_env == "vector" and not ALGOS[common.algo][2]:
        # The vector environment's sub-environments cannot be wrapped one by one (IllegalActionAsWait).
        raise ConfigError(f"vec_env 'vector' needs an algorithm that reads action masks, not {common.algo!r}")
    _check_read(config)
    _check_network_size(config)
    _check_rllib(config)


def _given(group: object, *names: str) -> list[str]:
    """Those of the fields ``names`` of the dataclass ``group`` set to other than their defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(group)}  # type: ignore[arg-type]
    return [name for name in names if getattr(group, name) != defaults[name]]


def _refuse_given(given: list[str], where: str) -> None:
    """Refuse the settings ``given`` (if any) in one line: ``a and b apply WHERE``."""
    if given:
        verb = "apply" if len(given) > 1 else "applies"
        raise ConfigError(f"{' and '.join(given)} {verb} {where}")


def _check_read(config: TrainConfig) -> None:
    """That every setting given is one the run reads: an option the run would ignore, or clamp, is refused
    rather than recorded in the run's ``.json`` as if it had shaped the model."""
    common, model = config.common, config.model
    if config.imitation.imitate is None:
        given = _given(config.imitation, "imitate_decisions", "imitate_rounds", "imitate_epochs")
        _refuse_given(given, "to imitation, which needs imitate (a policy to imitate)")
    if common.algo == "dqn":
        _refuse_given(
            _given(model, "n_steps", "ent_coef"), "to the PPO algorithms (maskable_ppo, ppo, rllib_ppo), not dqn"
        )
    elif common.algo != RLLIB_ALGO and common.total_timesteps > 0:
        # stable-baselines3's PPO silently takes the whole rollout as one minibatch when batch_size exceeds it.
        rollout = model.n_steps * common.n_envs
        if model.batch_size > rollout:
            raise ConfigError(
                f"Expected batch_size <= n_steps * n_envs = {rollout} (the samples of one update), "
                f"got {model.batch_size}"
            )


def _check_network_size(config: TrainConfig) -> None:
    count = network_parameters(config)  # counted, never allocated: before torch tries
    if count > MAX_PARAMETERS:
        n_inputs, n_actions = network_sizes(config.common.env_id, config.common.env_kwargs)
        raise ConfigError(
            f"net_arch {','.join(str(int(h)) for h in config.model.net_arch)}: {count:,} parameters in the policy "
            f"and value networks ({n_inputs} inputs, {n_actions} actions); expected at most {MAX_PARAMETERS:,} "
            "(schedgym.limits.MAX_PARAMETERS)"
        )


def _check_rllib(config: TrainConfig) -> None:
    """That the RLlib group is left alone by the stable-baselines3 algorithms, and that ``rllib_ppo`` is not
    asked for what it does not do (the row policy, imitation, several workloads at once, a vec_env)."""
    algo = config.common.algo
    if algo != RLLIB_ALGO:
        _refuse_given(config.rllib.given(), f"to algo {RLLIB_ALGO}, not {algo}")
        return
    if config.sb3.policy != "mlp":
        raise ConfigError(f"policy {config.sb3.policy!r} needs maskable_ppo or ppo; {RLLIB_ALGO} trains PPO's MLP")
    if config.imitation.imitate is not None:
        raise ConfigError(f"imitate needs maskable_ppo or ppo, not {RLLIB_ALGO}")
    if config.common.workloads:
        raise ConfigError(f"workloads (several at once) need a stable-baselines3 algorithm, not {RLLIB_ALGO}")
    if config.sb3.vec_env != "auto":
        raise ConfigError(f"vec_env is for the stable-baselines3 algorithms; {RLLIB_ALGO} steps RLlib's env runners")
    if config.model.batch_size > rollout_size(config):
        raise ConfigError(
            f"Expected batch_size <= n_steps * n_envs * max(1, num_env_runners) = {rollout_size(config)} (the "
            f"samples of one update), got {config.model.batch_size}"
        )


# --- the environment a configuration trains on


def check_env_kwargs(env_id: str, env_kwargs: object) -> None:
    """Check ``env_kwargs`` for training in this process, with one message, so that a bad value never
    reaches a worker process (where it would surface as a worker's EOFError): every key an
    :class:`~schedgym.envs.EnvConfig` field or ``max_episode_steps`` (an integer >= 1); the configuration
    valid; no ``render_mode`` (training renders nothing, and ``"human"`` would open a window per worker)."""
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
    n_inputs, n_actions = network_sizes(config.common.env_id, config.common.env_kwargs)
    hidden = [int(h) for h in config.model.net_arch]
    last = hidden[-1]
    if config.sb3.policy == "rows":
        from schedgym.decision.features import CANDIDATE_FEATURES, N_HEAD

        row = N_HEAD + len(CANDIDATE_FEATURES)
        pooled = N_HEAD + 2 * last + 1
        one_side = _mlp_parameters(row, hidden) + _mlp_parameters(pooled, hidden)
        return 2 * one_side + 3 * (last + 1)  # actor and critic; row_out, stop_out and the value head
    if config.common.algo == "dqn":
        return 2 * (_mlp_parameters(n_inputs, hidden) + last * n_actions + n_actions)  # q_net and q_net_target
    return 2 * _mlp_parameters(n_inputs, hidden) + (last * n_actions + n_actions) + (last + 1)


__all__ = [
    "MAX_EVAL_WORKLOADS",
    "MAX_N_ENVS",
    "CommonConfig",
    "ImitationConfig",
    "ModelConfig",
    "RLlibConfig",
    "SB3Config",
    "TrainConfig",
    "check_combination",
    "check_env_kwargs",
    "env_config",
    "network_parameters",
    "network_sizes",
]

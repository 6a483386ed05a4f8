"""The commands ``schedgym train`` and ``schedgym tune``, added to the ``schedgym`` command line through the
``schedgym.commands`` entry points of pyproject.toml (:data:`schedgym.cli.COMMANDS_GROUP`): each function takes
the subparsers, adds its command and returns the command's handler."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from schedgym import limits
from schedgym._atomic import check_output_dir, check_output_path
from schedgym._csvio import parse_integer, parse_number
from schedgym.cli import int_type, nonneg_int


def add_train(sub: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    """``schedgym train``: one option per TrainConfig field, its docstring as help."""
    tr = sub.add_parser(
        "train",
        help="train a learned agent (stable-baselines3, or RLlib)",
        description="Train MaskablePPO (default), PPO or DQN on a schedgym environment (the 'rl' extra), or RLlib's "
        "PPO with --algo rllib_ppo (the 'rllib' extra; --num-env-runners, --address, --reward-scale).",
    )
    _add_train_config_arguments(tr)
    return _train


def _add_train_config_arguments(
    tr: argparse.ArgumentParser, skip: Sequence[str] = (), helps: dict[str, str] | None = None
) -> list[str]:
    """One option per TrainConfig field but those in ``skip``, its docstring as help (or ``helps[field]``);
    return the fields given options (``schedgym train`` and ``schedgym tune`` share them)."""
    import dataclasses

    from agents.train import TrainConfig
    from schedgym._fielddocs import field_docs

    # argparse expands %-formats in help texts: a docstring's "i % n" must reach it as "%%".
    docs = {name: text.replace("%", "%%") for name, text in {**field_docs(TrainConfig), **(helps or {})}.items()}
    added = []
    for f in dataclasses.fields(TrainConfig):
        if f.name in skip:
            continue
        added.append(f.name)
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]
        help_text = f"{docs.get(f.name, '')} (default: {default})"
        if f.type in ("bool", bool):
            tr.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif f.name == "env_kwargs":
            tr.add_argument(flag, type=_json_object, default=default, metavar="JSON", help=help_text)
        elif f.name == "address":
            tr.add_argument(flag, default=default, metavar="auto|HOST:PORT", help=help_text)
        elif f.name == "net_arch":
            tr.add_argument(flag, type=_int_tuple, default=default, metavar="64,64", help=help_text)
        elif f.name in ("workloads", "eval_baselines"):
            shown = ",".join(default) if default else "none"
            tr.add_argument(
                flag,
                type=_name_tuple,
                default=default,
                metavar="A,B",
                help=f"{docs.get(f.name, '')} (default: {shown})",
            )
        else:
            if f.name == "seed":
                kind: Callable[[str], object] = int_type(0, limits.MAX_SEED, "MAX_SEED")
            else:
                kind = {"int": nonneg_int, "float": _finite_float}.get(str(f.type), str)
            tr.add_argument(flag, type=kind, default=default, help=help_text)
    return added


# tune's own options; a TrainConfig field of the same name is not offered by tune (it would clash), nor are
# the fields tune sets for every trial.
_TUNE_OPTIONS = ("search", "num_samples", "max_concurrent", "metric", "scheduler", "address", "run_dir", "json")
_TUNE_SETS = ("progress", "torch_threads")


def add_tune(sub: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    """``schedgym tune``: tune's options, then every TrainConfig field as in ``schedgym train``."""
    from agents.tune import DISTRIBUTIONS, MAX_TRIALS, METRICS, SCHEDULERS

    tu = sub.add_parser(
        "tune",
        help="search training hyperparameters on Ray Tune",
        description="Train one agent per trial with values drawn from the --search space, rank the trials on their "
        "validation figures and print the 'schedgym train' command of the best; needs the 'tune' extra. Every "
        "option of 'schedgym train' sets the value all trials share.",
    )
    tu.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="FIELD=KIND:VALUES",
        help=f"a searched field, KIND one of {', '.join(DISTRIBUTIONS)}: learning_rate=loguniform:1e-4,1e-3, "
        "ent_coef=choice:0,0.01, env.preemption_cost=uniform:0,5, net_arch=grid:64x64,128x128, n_steps=randint:"
        "256,1024 (both bounds included); repeat for each field (docs/tune.md lists the fields)",
    )
    tu.add_argument(
        "--num-samples",
        type=int_type(1, MAX_TRIALS),
        default=8,
        help="trials drawn, times every combination of the grid fields (default: 8)",
    )
    tu.add_argument(
        "--max-concurrent",
        type=int_type(1, 4096),
        default=None,
        help="trials at once (default: as many as the Ray cluster has CPUs; each trial requests one)",
    )
    tu.add_argument(
        "--metric",
        choices=METRICS,
        default="objective",
        help="what trials are ranked on, lower is better: a validation slowdown figure, or objective = "
        "(te_p95 + be_p95) / 2 (default: objective)",
    )
    tu.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default="fifo",
        help="fifo (every trial trains to the end) or asha (stops the worse trials at their evaluations)",
    )
    tu.add_argument(
        "--address",
        default=None,
        metavar="auto|HOST:PORT",
        help="the running Ray cluster to use ('auto': the one 'ray start --head' started on this machine); "
        "default: start a local Ray for this search",
    )
    tu.add_argument(
        "--run-dir",
        default="runs",
        help="where the search is written: RUN_DIR/tune__ENV__SEED__TIMESTAMP/ with Tune's results, each "
        "trial's training run and tune.json (default: runs)",
    )
    tu.add_argument("--json", metavar="PATH", help="also write the ranked trials and the best command as JSON")
    fields = _add_train_config_arguments(
        tu,
        skip=_TUNE_OPTIONS + _TUNE_SETS,
        helps={"seed": "the first trial's seed (trial i trains with seed + i), and the seed of the draws"},
    )
    tu.set_defaults(train_fields=fields)
    return _tune


def _tune(args: argparse.Namespace) -> int:
    from agents.tune import TuneConfig, best_command, format_table, import_tune, parse_search, run_tune, write_json

    config = TuneConfig(
        train={name: getattr(args, name) for name in args.train_fields},
        search=tuple(parse_search(spec) for spec in args.search),
        num_samples=args.num_samples,
        max_concurrent=args.max_concurrent,
        metric=args.metric,
        scheduler=args.scheduler,
        address=args.address,
        run_dir=args.run_dir,
    )
    # Output paths are checked before minutes of training, not after.
    if args.json is not None:
        check_output_path("--json", args.json)
    check_output_dir("--run-dir", args.run_dir)
    import_tune()  # not installed: say so now, before Ray or any trial starts
    result = run_tune(config)
    print(format_table(result))
    command = best_command(result)
    if command is None:
        print("no trial trained to the end with a finite figure: no best configuration")
    else:
        best = result.best
        assert best is not None
        print(f"best: trial {best.trial.index}, {config.metric} {best.figures[config.metric]:.3f}; to reproduce it:")
        print(f"  {command}")
    print(f"wrote {result.run_dir / 'tune.json'}")
    if args.json is not None:
        write_json(args.json, result)
        print(f"wrote {args.json}")
    return 0 if command is not None else 1


def _finite_float(text: str) -> float:
    value = parse_number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a finite number in ASCII decimal notation, got {text!r}")
    return value


def _json_object(text: str) -> dict:
    import json

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _int_tuple(text: str) -> tuple[int, ...]:
    sizes = [parse_integer(x) for x in text.split(",") if x.strip()]
    if not sizes or len(sizes) > 64 or any(v is None or not 1 <= v <= 1_000_000 for v in sizes):
        raise argparse.ArgumentTypeError(
            f"expected 1 to 64 comma-separated layer sizes from 1 to 1,000,000, got {text!r}"
        ) from None
    return tuple(v for v in sizes if v is not None)


def _name_tuple(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(","))
    if text.strip() == "":
        return ()
    if any(not x for x in names) or len(names) > 64:
        raise argparse.ArgumentTypeError(f"expected 1 to 64 comma-separated names, got {text!r}")
    return names


def _train(args: argparse.Namespace) -> int:
    import dataclasses

    from agents.train import TrainConfig, train

    config = TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)})
    train(config)
    return 0


__all__ = ["add_train", "add_tune"]

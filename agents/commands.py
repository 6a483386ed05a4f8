"""The commands ``schedgym train`` and ``schedgym tune``, added to the ``schedgym`` command line through the
``schedgym.commands`` entry points of pyproject.toml (:data:`schedgym.cli.COMMANDS_GROUP`): each function takes
the subparsers, adds its command and returns the command's handler."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from schedgym._atomic import check_output_dir, check_output_path
from schedgym._csvio import parse_integer, parse_number
from schedgym._fielddocs import option_fields
from schedgym.cli import nonneg_int


def add_train(sub: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    """``schedgym train``: one option per TrainConfig field (:func:`add_options`), its docstring as help."""
    from agents.train_config import TrainConfig

    tr = sub.add_parser(
        "train",
        help="train a learned agent (stable-baselines3, or RLlib)",
        description="Train MaskablePPO (default), PPO or DQN on a schedgym environment (the 'rl' extra), or RLlib's "
        "PPO with --algo rllib_ppo (the 'rllib' extra; --num-env-runners, --address, --reward-scale, "
        "--max-env-runner-restarts).",
    )
    add_options(tr, TrainConfig)
    return _train


def add_options(
    parser: argparse.ArgumentParser, cls: type, skip: Sequence[str] = (), helps: Mapping[str, str] | None = None
) -> list[str]:
    """One option per field of the configuration ``cls`` (:func:`~schedgym._fielddocs.option_fields`: the
    fields of its groups) but those in ``skip``, its docstring as help (or ``helps[field]``); return the
    options added. A field is read as its annotation says (:data:`_READERS`), with its ``metadata["cli"]``
    (argparse keywords) over that. A field whose ``metadata["cli"]["options"]`` names another configuration
    stands for that configuration's options, added in turn but for its ``skip``, and for those ``cls`` has
    itself (``parser.get_default("nested")[field]`` lists them)."""
    fields = option_fields(cls)
    own = {f.name for f, _ in fields}
    added = []
    for f, doc in fields:
        spec = dict(f.metadata.get("cli", {}))
        if "options" in spec:
            inner = add_options(parser, spec["options"], (*spec.get("skip", ()), *own), spec.get("helps", {}))
            parser.set_defaults(nested={**(parser.get_default("nested") or {}), f.name: inner})
            continue
        if f.name in skip:
            continue
        added.append(f.name)
        doc = (helps or {}).get(f.name, doc)
        parser.add_argument("--" + f.name.replace("_", "-"), **_argument(cls, f, doc, spec))
    return added


def _argument(cls: type, f: dataclasses.Field, doc: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``add_argument`` for field ``f``."""
    reader = _READERS.get(str(f.type))
    if reader is None and not spec:
        raise TypeError(
            f"{cls.__name__}.{f.name}: no command-line reading of {f.type!r}; declare one in metadata['cli']"
        )
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]
    kwargs = {**(reader or {}), "default": default, **spec}
    # argparse expands %-formats in help texts: a docstring's "i % n" must reach it as "%%".
    kwargs["help"] = f"{doc} (default: {_shown(kwargs['default'])})".replace("%", "%%")
    return kwargs


def _shown(default: object) -> str:
    """A default as --help shows it: names joined by commas (none for none), anything else as Python prints it."""
    if isinstance(default, (tuple, list)) and all(isinstance(x, str) for x in default):
        return ",".join(default) if default else "none"
    return str(default)


def _finite_float(text: str) -> float:
    value = parse_number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a finite number in ASCII decimal notation, got {text!r}")
    return value


def _json_object(text: str) -> dict:
    from agents import strict_json

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    try:
        value = strict_json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _int_tuple(text: str) -> tuple[int, ...]:
    # A blank item is refused, not skipped: '64,,64' may have meant three layers.
    sizes = [parse_integer(x) for x in text.split(",")]
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


_READERS: dict[str, dict[str, Any]] = {
    "bool": {"action": argparse.BooleanOptionalAction},
    "int": {"type": nonneg_int},
    "float": {"type": _finite_float},
    "str": {"type": str},
    "str | None": {"type": str},
    "dict[str, Any]": {"type": _json_object, "metavar": "JSON"},
    "tuple[int, ...]": {"type": _int_tuple, "metavar": "64,64"},
    "tuple[str, ...]": {"type": _name_tuple, "metavar": "A,B"},
}
"""a field's annotation -> how the command line reads it (argparse keywords); a field of another annotation
declares its reading in ``metadata["cli"]``"""


def _train(args: argparse.Namespace) -> int:
    from agents.train import TrainConfig, train

    train(TrainConfig.of(**{name: getattr(args, name) for name in TrainConfig.option_names()}))
    return 0


def _config(cls: type, args: argparse.Namespace) -> Any:
    """``cls`` from the parsed options :func:`add_options` added: each field its option's value, a field
    that stands for another configuration's options (``nested``) the mapping of those."""
    nested = getattr(args, "nested", None) or {}
    kwargs = {}
    for f in dataclasses.fields(cls):
        kwargs[f.name] = {n: getattr(args, n) for n in nested[f.name]} if f.name in nested else getattr(args, f.name)
    return cls(**kwargs)


def add_tune(sub: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    """``schedgym tune``: one option per TuneConfig field, then every TrainConfig field as in ``schedgym train``
    but those tune sets or has itself (:func:`add_options`), and ``--json``."""
    from agents.tune import TuneConfig

    tu = sub.add_parser(
        "tune",
        help="search training hyperparameters on Ray Tune",
        description="Train one agent per trial with values drawn from the --search space, rank the trials on their "
        "validation figures and print the 'schedgym train' command of the best; needs the 'tune' extra. Every "
        "option of 'schedgym train' sets the value all trials share.",
    )
    add_options(tu, TuneConfig)
    tu.add_argument("--json", metavar="PATH", help="also write the ranked trials and the best command as JSON")
    return _tune


def _tune(args: argparse.Namespace) -> int:
    from agents.tune import TuneConfig, best_command, format_table, import_tune, run_tune, write_json

    config = _config(TuneConfig, args)
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


__all__ = ["add_train", "add_tune"]

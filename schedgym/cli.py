"""The ``schedgym`` command line. User errors print one line and exit with status 2, without a traceback."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import io
import os
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from schedgym import limits
from schedgym._atomic import atomic_open, check_output_dir, check_output_path, output_set
from schedgym._atomic import is_stream as _is_stream
from schedgym._csvio import parse_bool, parse_integer, parse_number
from schedgym._optional import interrupt_in
from schedgym.errors import ConfigError, SchedGymError, Terminated

_GIVEN = "_schedgym_given"
"""the namespace attribute in which :class:`_StoreOnce` notes the options given, removed after parsing"""


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, but an option given a second time is an error: argparse's own lets the last
    value win, so ``--json a.json --json b.json`` wrote b.json alone and said nothing of a.json."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        given = namespace.__dict__.setdefault(_GIVEN, set())
        if self.dest in given:
            first = getattr(namespace, self.dest)
            raise argparse.ArgumentError(self, f"given twice ({first!r}, then {values!r}); give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line ``schedgym: error: ...`` on stderr, status 2
    (argparse's own prints the usage too), and an option given twice refused (:class:`_StoreOnce`; the
    subcommands' parsers, this class too, inherit it). ``schedgym CMD --help`` still shows the usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, rest = super().parse_known_args(args, namespace)
        parsed.__dict__.pop(_GIVEN, None)  # a subcommand's parser is done: what it noted is not an option
        return parsed, rest

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("schedgym").strip()
        print(f"schedgym: error: {where + ': ' if where else ''}{message}", file=sys.stderr)
        sys.exit(2)


_MAX_PARSED = 10**18 - 1  # parse_integer reads at most 18 digits


def _policy_names() -> list[str]:
    from schedgym.registry import policy_names

    return policy_names()


def int_type(minimum: int, maximum: int, limit: str = "") -> Callable[[str], int]:
    """An argparse type: ASCII decimal digits (Python's int() also takes '١٢', '１０' and '1_0') in
    ``minimum..maximum``; ``limit`` names the constant of :mod:`schedgym.limits` that sets the maximum."""
    maximum = min(maximum, _MAX_PARSED)  # the message states the range that is accepted, no more

    def parse(text: str) -> int:
        value = parse_integer(text)
        if value is None or not minimum <= value <= maximum:
            bound = f" (schedgym.limits.{limit})" if limit else ""
            raise argparse.ArgumentTypeError(
                f"expected an integer from {minimum:,} to {maximum:,}{bound}, in ASCII digits, got {text!r}"
            )
        return value

    parse.__name__ = "integer"
    return parse


def _float_type(minimum: float, maximum: float, limit: str = "") -> Callable[[str], float]:
    """An argparse type: a finite ASCII decimal number in ``minimum..maximum``."""

    def parse(text: str) -> float:
        value = parse_number(text)
        if value is None or not minimum <= value <= maximum:
            bound = f" (schedgym.limits.{limit})" if limit else ""
            raise argparse.ArgumentTypeError(
                f"expected a number from {minimum:g} to {maximum:g}{bound}, in ASCII decimal notation, got {text!r}"
            )
        return value

    parse.__name__ = "number"
    return parse


def _input_path(text: str) -> str:
    """An argparse type: a file to read, not empty (``''`` named no file, and the error said no path)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a file name, got {text!r}")
    return text


def _load_type(text: str) -> float:
    """An argparse type: the offered load of a synthetic workload, a finite ASCII decimal number with
    MIN_LOAD <= load < MAX_LOAD (SyntheticConfig's bounds)."""
    from schedgym.workloads.synthetic import MAX_LOAD, MIN_LOAD

    value = parse_number(text)
    if value is None or not MIN_LOAD <= value < MAX_LOAD:
        raise argparse.ArgumentTypeError(
            f"expected a number from {MIN_LOAD:g} to below {MAX_LOAD:g}, in ASCII decimal notation, got {text!r}"
        )
    return value


_load_type.__name__ = "load"

_positive_int = int_type(1, 2**63 - 1)
nonneg_int = int_type(0, 2**63 - 1)
_nonneg_float = _float_type(0.0, limits.MAX_TIME, "MAX_TIME")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="schedgym", description="Preemptive DL-cluster scheduling simulator.")
    sub = parser.add_subparsers(dest="command", required=True)

    cmp = sub.add_parser(
        "compare",
        help="compare policies on identical workloads",
        description="Run every policy on the same workloads and print slowdown, wait, preemptions and "
        "GPU utilisation per policy, with ratios to fifo.",
    )
    from schedgym.experiments.compare import CompareConfig

    _add_workload_options(cmp, ",".join(CompareConfig.policies))
    _add_rule_options(cmp)
    cmp.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    cmp.add_argument("--csv", metavar="PATH", help="write means, 95%% CIs and paired differences as CSV")
    cmp.add_argument("--markdown", metavar="PATH", help="write the results table (means, CIs, verdicts) as Markdown")
    cmp.add_argument(
        "--plot", metavar="PATH", help="write slowdown tails and a TE p95 / BE p99 scatter (needs matplotlib)"
    )
    cmp.add_argument("--log-dir", metavar="DIR", help="write jobs.csv and segments.csv per policy and seed")
    cmp.add_argument(
        "--split",
        choices=("test", "validation"),
        default="test",
        help="which evaluation workloads the seeds are: test (default; report results on these) or validation "
        "(model selection: synthetic seeds 100,000 + i, a bundled trace's validation windows, mix levels "
        "100,000 + i; docs/workloads.md)",
    )
    cmp.add_argument(
        "--suite",
        metavar="NAME",
        default=None,
        help="compare on every workload of a suite instead of one: 'shifts' (paper, realistic, load 0.8 and 1.2, "
        "4 and 64 nodes, 20,000 jobs, TE durations x3, Philly, contended Alibaba; docs/suite.md); one table "
        "of objectives and verdicts against fitgpp and k8s. --jobs then caps the synthetic workloads' jobs",
    )
    _add_executor_options(cmp)
    _track_given(cmp, [dest for dest, _ in _NOT_WITH_SUITE.values()])
    _add_sweep_parser(sub)
    handlers = _add_plugin_commands(sub)
    _add_trace_parser(sub)
    parser.set_defaults(command_handlers=handlers)
    return parser


COMMANDS_GROUP = "schedgym.commands"
"""the entry-point group of the commands that packages above schedgym add (``agents``: train, tune): each
entry a function that takes the subparsers (``argparse._SubParsersAction``), adds its command's parser and
returns the command's handler (arguments -> exit status)"""


def _add_plugin_commands(sub: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    """The commands of the :data:`COMMANDS_GROUP` entry points, in their names' order; their handlers by name."""
    from importlib.metadata import entry_points

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}
    for ep in sorted(entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name):
        if ep.name not in handlers:  # a distribution found twice on the path lists its entries twice
            handlers[ep.name] = ep.load()(sub)
    return handlers


def _add_workload_options(cmd: argparse.ArgumentParser, policies: str) -> None:
    """compare's and sweep's workloads and policies: --workload or --trace, --cluster, --policies (default
    ``policies``), --seeds, --first-seed, --jobs, --load."""
    src = cmd.add_mutually_exclusive_group()
    src.add_argument(
        "--workload",
        default="paper",
        help="synthetic preset (paper, realistic), bundled trace (philly, alibaba2023) or mix (a distribution of "
        "workloads and clusters); default: paper",
    )
    src.add_argument(
        "--trace", metavar="PATH", type=_input_path, help="trace CSV to replay instead of a synthetic workload"
    )
    cmd.add_argument(
        "--cluster",
        default=None,
        metavar="NAME|PATH",
        help="cluster preset (paper, small, large, philly), bundled cluster (alibaba2023, alibaba2023-contended) "
        "or CSV (default: the workload's own; paper for synthetic workloads)",
    )
    cmd.add_argument(
        "--policies",
        default=policies,
        help=f"comma-separated policies: {', '.join(_policy_names())} (ppo is the bundled learned agent), or "
        f"NAME:PATH for an agent saved by 'schedgym train', shown as NAME (default: {policies}). "
        "schedgym reads a saved model with a numpy reader that loads weights only and refuses any pickled object "
        "but a tensor, so it runs no code from the file; but a .zip saved by stable-baselines3 is a pickle, which "
        "SB3's own load() (and torch) executes as code: load only model files you trust",
    )
    cmd.add_argument(
        "--seeds",
        type=int_type(1, limits.MAX_SEEDS, "MAX_SEEDS"),
        default=0,
        help="number of workloads/seeds (default: 20, or every test window of a bundled trace that has fewer; "
        f"at most {limits.MAX_SEEDS:,})",
    )
    cmd.add_argument(
        "--first-seed", type=int_type(0, limits.MAX_SEED, "MAX_SEED"), default=0, help="first seed (default: 0)"
    )
    cmd.add_argument(
        "--jobs",
        type=int_type(1, limits.MAX_JOBS, "MAX_JOBS"),
        default=None,
        help=f"jobs per synthetic workload (at most {limits.MAX_JOBS:,})",
    )
    cmd.add_argument(
        "--load",
        type=_load_type,
        default=None,
        help="offered GPU load of a synthetic workload: GPU-seconds submitted per second over the cluster's GPUs, "
        "from 0.01 to below 10 (default: the preset's, 1.0)",
    )


def _add_rule_options(cmd: argparse.ArgumentParser) -> None:
    """The simulator's rules (SimConfig) as compare's and sweep's options."""
    cmd.add_argument(
        "--max-preemptions",
        type=int_type(0, limits.MAX_PREEMPTIONS, "MAX_PREEMPTIONS"),
        default=1,
        help="cap P on preemptions per job (default: 1)",
    )
    cmd.add_argument(
        "--restart-overhead", type=_nonneg_float, default=0.0, help="seconds charged on each restart (at most 1e10)"
    )
    cmd.add_argument("--no-backfill", action="store_true", help="strict head-of-line blocking")
    cmd.add_argument("--placement", choices=("best-fit", "first-fit"), default="best-fit")


def _add_executor_options(cmd: argparse.ArgumentParser) -> None:
    """--no-progress, --executor, --workers, --address (compare's and sweep's)."""
    cmd.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    cmd.add_argument(
        "--executor",
        choices=("serial", "process", "ray"),
        default="serial",
        help="where the runs execute: serial (this process, the default), process (a pool of --workers "
        "processes) or ray (Ray tasks; pip install 'schedgym[ray]'); the results are the same",
    )
    cmd.add_argument(
        "--workers",
        type=int_type(1, 4096),
        default=None,
        help="runs at once: processes for --executor process (default: the CPU count), concurrent Ray tasks for "
        "--executor ray (default: the Ray cluster's CPUs)",
    )
    cmd.add_argument(
        "--address",
        default=None,
        metavar="auto|HOST:PORT",
        help="--executor ray only: the running Ray cluster to use ('auto': the one 'ray start --head' started on "
        "this machine); default: start a local Ray for this run",
    )
    cmd.add_argument(
        "--retries",
        type=int_type(0, 1000),
        default=None,
        help="--executor process or ray: times a batch of runs is run again after its worker process or node "
        "died (default 3); a run that fails by its own error ends the command at once",
    )
    cmd.add_argument(
        "--batch",
        type=int_type(1, 100_000),
        default=None,
        metavar="RUNS",
        help="--executor process or ray: runs per task (default: about 8 tasks per worker, at most 64)",
    )
    kept = cmd.add_mutually_exclusive_group()
    kept.add_argument(
        "--run-dir",
        metavar="FOLDER",
        default=None,
        help="keep each finished run in FOLDER (new or empty) as it finishes, so that an interrupted command "
        "can be resumed with --resume FOLDER",
    )
    kept.add_argument(
        "--resume",
        metavar="FOLDER",
        default=None,
        help="run only the runs FOLDER (of --run-dir) does not hold yet, then write the outputs as an "
        "uninterrupted run would; refused if the command's grid differs from the folder's",
    )


def _add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    """``schedgym sweep``: compare's workload, policy, rule and executor options, and ``--set`` per swept field."""
    from schedgym.experiments.sweep import DEFAULT_POLICIES, SIM_FIELDS, SYNTHETIC_FIELDS, WORKLOAD_FIELDS

    sw = sub.add_parser(
        "sweep",
        help="sweep simulator and workload settings x policies x seeds",
        description="Run every policy on the same seeds under every combination of the --set values (the "
        "Cartesian product) and print, per setting and policy, TE p95, BE p50, BE p95 and BE p99 (means and 95% "
        "CIs over seeds) with the paired differences to fitgpp and k8s. The other options set what is not swept.",
        epilog=f"fields: simulator {', '.join(SIM_FIELDS)}; workload {', '.join(WORKLOAD_FIELDS)}; synthetic "
        f"preset {', '.join(SYNTHETIC_FIELDS)} (its tables from Python only). Example: schedgym sweep --set "
        "max_preemptions=1,2,4 --set load=0.9,1.0,1.1",
    )
    _add_workload_options(sw, ",".join(DEFAULT_POLICIES))
    _add_rule_options(sw)
    sw.add_argument(
        "--set",
        dest="grid",
        action="append",
        default=[],
        metavar="FIELD=v1,v2,...",
        help="a field to sweep and its values (repeat for more fields; every combination runs)",
    )
    sw.add_argument("--json", metavar="PATH", help="write every setting's summary (and per-seed figures) as JSON")
    sw.add_argument("--csv", metavar="PATH", help="write one row per setting and policy: figures, CIs, differences")
    sw.add_argument(
        "--plot", metavar="PATH", help="write each figure against each swept field, a line per policy (matplotlib)"
    )
    _add_executor_options(sw)
    _track_given(sw, [dest for _, dest in _SWEPT_OPTIONS.values()])  # the options a --set may contradict


def _track_given(parser: argparse.ArgumentParser, dests: Sequence[str]) -> None:
    """Options refused beside another (``--suite``, a ``--set`` of the same field) even at their default value:
    while parsing, their default is SUPPRESS, so that one not given is absent; :func:`_given_options` then
    records which were given and puts the defaults in. (Compared with the default, ``--max-preemptions 1``
    beside ``--set max_preemptions=0,2`` was dropped without a word.)"""
    defaults = {}
    for action in parser._actions:
        if action.dest in dests:
            defaults[action.dest] = action.default
            action.default = argparse.SUPPRESS
    parser.set_defaults(option_defaults=defaults)


def _given_options(args: argparse.Namespace) -> None:
    """``args.given``: the tracked options given on the command line; the others at their defaults."""
    defaults = getattr(args, "option_defaults", {})
    args.given = {dest for dest in defaults if hasattr(args, dest)}
    for dest, value in defaults.items():
        if dest not in args.given:
            setattr(args, dest, value)


_SWEPT_OPTIONS = {  # a swept field: the option that sets it when it is not swept
    "max_preemptions": ("--max-preemptions", "max_preemptions"),
    "restart_overhead": ("--restart-overhead", "restart_overhead"),
    "backfill": ("--no-backfill", "no_backfill"),
    "placement": ("--placement", "placement"),
    "load": ("--load", "load"),
    "n_jobs": ("--jobs", "jobs"),
    "cluster": ("--cluster", "cluster"),
    "workload": ("--workload", "workload"),
}


def _sweep(args: argparse.Namespace) -> int:
    from schedgym.experiments.sweep import SweepConfig, format_table, parse_set, run_sweep, write_csv, write_json
    from schedgym.experiments.sweep import write_plot as write_sweep_plot

    executor = _executor(args)
    if not args.grid:
        raise ConfigError("Expected at least one --set FIELD=v1,v2,... (the fields to sweep), got none")
    grid = tuple(parse_set(text) for text in args.grid)
    for name, _ in grid:
        flag, dest = _SWEPT_OPTIONS.get(name, (None, None))
        if dest is not None and dest in args.given:
            raise ConfigError(f"{flag} and --set {name}=... both set {name}; give one")
        if name == "workload" and args.trace is not None:
            raise ConfigError(f"--trace and --set {name}=... both set the workload; give one")
    base = _compare_config(args)
    swept_clusters = [str(v) for name, values in grid if name == "cluster" for v in values]
    _check_outputs(
        (("--json", args.json), ("--csv", args.csv), ("--plot", args.plot)),
        _read_files(args, base.policies, swept_clusters),
        _written_files(args),
    )
    if args.plot:
        _check_plot(args.plot)
    config = SweepConfig(base, grid)
    _run_and_write(
        lambda: run_sweep(
            config,
            executor=executor,
            progress=False if args.no_progress else None,
            **_kept_runs(args),
        ),
        format_table,
        ((args.json, write_json), (args.csv, write_csv), (args.plot, write_sweep_plot)),
    )
    return 0


def _run_and_write(
    run: Callable[[], Any],
    table: Callable[[Any], str],
    writers: Sequence[tuple[str | None, Callable[[str, Any], None]]],
) -> None:
    """compare's and sweep's end: run, print the table, write each output given, as one set: what ``run``
    writes as it goes (compare's logs), the table and the files written here appear together at the end,
    or, on any error or Ctrl-C, none of them (and no folder this run created). "wrote PATH" once they are in
    place."""
    with output_set() as outputs:
        result = run()
        outputs.print(table(result))
        for path, write in writers:
            if path is not None:
                write(path, result)
    for path, _ in writers:
        if path is not None:
            print(f"wrote {path}")


def _add_trace_parser(sub: argparse._SubParsersAction) -> None:
    """``schedgym trace convert --format NAME IN OUT``: every rule of the format settable with --set."""
    import dataclasses

    from schedgym._fielddocs import field_docs
    from schedgym.workloads.convert import FORMATS, converter

    epilog = []
    for name in FORMATS:
        try:
            _, rules = converter(name)
        except ImportError:  # a converter module that is not there cannot be offered
            continue
        docs = field_docs(rules)
        epilog.append(f"rules of {name} (--set FIELD=VALUE):")
        for f in dataclasses.fields(rules):
            epilog.append(f"  {f.name} = {f.default!r}: {docs.get(f.name, '')}")
    trace = sub.add_parser("trace", help="convert public traces to the schedgym trace format")
    tsub = trace.add_subparsers(dest="trace_command", required=True)
    cv = tsub.add_parser(
        "convert",
        help="convert a trace (philly, alibaba2023, swf)",
        description="Convert a public trace to the schedgym trace CSV (a .gz output is compressed) and print "
        "how many rows were kept, changed and dropped, by reason.",
        epilog="\n".join(epilog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cv.add_argument("--format", required=True, choices=sorted(FORMATS))
    cv.add_argument("input", type=_input_path, help="the trace in its own format")
    cv.add_argument("output", help="where to write the converted trace")
    cv.add_argument("--set", dest="rules", action="append", default=[], metavar="FIELD=VALUE", help="a rule")
    cv.add_argument(
        "--nodes",
        metavar="PATH",
        type=_input_path,
        help="alibaba2023: the node list; jobs that fit no node are dropped",
    )
    cv.add_argument("--cluster-out", metavar="PATH", help="alibaba2023: also write --nodes as a cluster CSV")


def _rule_kind(kind: str) -> str:
    """A converter rule's type (``int``, ``float | None``, ...) in words, for a message."""
    words = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string"}
    base = kind.replace(" | None", "")
    return words.get(base, f"a {base} value") + (" or none" if "None" in kind else "")


def _rule_value(text: str, kind: str) -> object:
    if text.lower() in ("none", "null") and "None" in kind:
        return None
    if kind.startswith("bool"):
        flag = parse_bool(text)
        if flag is None:
            raise ValueError(text)
        return flag
    if kind.startswith("int"):
        value = parse_integer(text)
        if value is None:
            raise ValueError(text)
        return value
    if kind.startswith("float"):
        number = parse_number(text)
        if number is None:
            raise ValueError(text)
        return number
    return text


def _trace(args: argparse.Namespace) -> int:
    import dataclasses

    from schedgym.sim.cluster import save_cluster_csv
    from schedgym.workloads.convert import converter
    from schedgym.workloads.trace import write_trace

    convert, rules_cls = converter(args.format)
    kinds = {f.name: str(f.type) for f in dataclasses.fields(rules_cls)}
    values: dict[str, object] = {}
    given: dict[str, str] = {}
    for item in args.rules:
        key, sep, text = item.partition("=")
        if not sep or key not in kinds:
            raise ConfigError(f"--set {item!r}: expected FIELD=VALUE with FIELD one of {sorted(kinds)}")
        if key in given:  # the last would silently win
            raise ConfigError(f"--set {key}=... given twice ({given[key]!r}, then {text!r}); give it once")
        given[key] = text
        try:
            values[key] = _rule_value(text, kinds[key])
        except ValueError:
            raise ConfigError(f"--set {item!r}: expected {_rule_kind(kinds[key])}, got {text!r}") from None
    rules = rules_cls(**values)
    if args.nodes is not None or args.cluster_out is not None:
        if args.format != "alibaba2023":
            raise ConfigError("--nodes and --cluster-out apply to --format alibaba2023")
        if not args.nodes:
            raise ConfigError("--cluster-out needs --nodes")
    # Every output is checked before the input is read, and written only once the conversion succeeded.
    check_output_path("OUTPUT", args.output)
    if args.cluster_out is not None:
        check_output_path("--cluster-out", args.cluster_out)
        if _same_file(args.cluster_out, args.output):
            raise ConfigError(f"--cluster-out {args.cluster_out!r} is the output trace too; give it its own name")
    for flag, path in (("OUTPUT", args.output), ("--cluster-out", args.cluster_out)):
        if path is not None and any(_same_file(path, given) for given in (args.input, args.nodes) if given):
            raise ConfigError(f"{flag} {path!r} is an input file too; give the output its own name")
    extra: dict[str, object] = {}
    cluster = None
    if args.nodes:
        from schedgym.workloads.convert.alibaba import load_alibaba_cluster

        cluster = load_alibaba_cluster(args.nodes)
        extra["cluster"] = cluster
    workload, report = convert(args.input, rules, **extra)
    with output_set() as outputs:  # both files (and the report) appear only if both were written
        with atomic_open(args.output, newline="") as fh:
            write_trace(fh, workload.jobs)
        if args.cluster_out is not None and cluster is not None:
            save_cluster_csv(args.cluster_out, cluster)
        outputs.print(str(report))
    print(
        f"wrote {len(workload)} jobs to {args.output}"
        + (f" and the cluster to {args.cluster_out}" if args.cluster_out else "")
    )
    return 0


def _same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once resolved, or two hard links to it."""
    try:
        return Path(a).resolve() == Path(b).resolve() or os.path.samefile(a, b)
    except (OSError, RuntimeError, ValueError):
        return False


def _executor(args: argparse.Namespace):  # noqa: ANN202
    """compare's and sweep's ExecutorConfig; Ray not installed is an error now, before anything runs."""
    from schedgym.experiments.executors import DEFAULT_RETRIES, ExecutorConfig, import_ray

    if args.retries is not None and args.executor == "serial":
        raise ConfigError("--retries applies to --executor process or ray, not serial")
    retries = DEFAULT_RETRIES if args.retries is None else args.retries
    executor = ExecutorConfig(
        kind=args.executor, workers=args.workers, address=args.address, retries=retries, batch=args.batch
    )
    if executor.kind == "ray":
        import_ray()
    return executor


def _kept_runs(args: argparse.Namespace) -> dict[str, Any]:
    """``run_dir`` and ``resume`` of compare's and sweep's --run-dir FOLDER / --resume FOLDER."""
    for flag, folder in (("--run-dir", args.run_dir), ("--resume", args.resume)):
        if folder is not None and not folder.strip():  # Path("") is the current folder: not what was meant
            raise ConfigError(f"{flag} needs a folder name, got {folder!r}")
    if args.resume is not None:
        return {"run_dir": args.resume, "resume": True}
    return {"run_dir": args.run_dir, "resume": False}


def _compare_config(args: argparse.Namespace):  # noqa: ANN202
    """The CompareConfig of compare's (and sweep's) workload, policy and rule options."""
    from schedgym.experiments.compare import CompareConfig
    from schedgym.sim.simulator import SimConfig

    names = [p.strip() for p in args.policies.split(",")]
    if any(names) and not all(names):  # 'fifo,,k8s' or 'fifo,': a name left out, not a list to tidy
        raise ConfigError(f"--policies {args.policies!r}: expected comma-separated names, got an empty one")
    policies = tuple(name for name in names if name)
    return CompareConfig(
        policies=policies,
        workload=None if args.trace else args.workload,
        trace=args.trace,
        cluster=args.cluster,
        seeds=args.seeds,
        first_seed=args.first_seed,
        n_jobs=args.jobs,
        load=args.load,
        split=getattr(args, "split", "test"),  # compare's option; sweep evaluates on the test split
        sim=SimConfig(
            backfill=not args.no_backfill,
            placement=args.placement,
            max_preemptions=args.max_preemptions,
            restart_overhead=args.restart_overhead,
        ),
    )


def _check_outputs(
    given: Sequence[tuple[str, str | None]],
    inputs: Sequence[tuple[str, str | None]] = (),
    written: Sequence[tuple[str, str]] = (),
) -> None:
    """Each output path can be written; no two name the same file (a hard link included); none is a file the
    command reads (``inputs``: what, path) or one it writes by itself (``written``: what, a file or a folder
    whose every file). A trace given as ``--csv`` too was replaced by the results, with exit status 0."""
    outputs = [(flag, path) for flag, path in given if path is not None]
    for flag, path in outputs:
        check_output_path(flag, path)
    for k, (flag, path) in enumerate(outputs):
        if _is_stream(path):  # --json /dev/null --csv /dev/null is fine
            continue
        for other, earlier in outputs[:k]:
            if _same_file(path, earlier):
                raise ConfigError(f"{other} and {flag} name the same file {path!r}; give each its own")
        for what, source in inputs:
            if source and _same_file(path, source):
                raise ConfigError(f"{flag} {path!r} is {what} too; give the output its own name")
        for what, place in written:
            if _same_file(path, place) or Path(path).resolve().is_relative_to(Path(place).resolve()):
                raise ConfigError(f"{flag} {path!r} is among {what}, which the command writes itself")


def _read_files(
    args: argparse.Namespace, policies: Sequence[str], clusters: Sequence[str] = ()
) -> list[tuple[str, str | None]]:
    """compare's and sweep's input files, as (what, path): the trace, a cluster file (``clusters``: a sweep's
    too), each saved agent (``NAME:RUN/model`` without a suffix: its ``.zip`` and ``.npz``) and its ``.json``."""
    from schedgym.sim.cluster import cluster_file

    inputs: list[tuple[str, str | None]] = [("the trace", args.trace)]
    for cluster in (args.cluster, *clusters):
        if cluster is not None:
            inputs.append(("a cluster file", cluster_file(cluster)))
    for spec in policies:
        name, sep, path = spec.partition(":")
        if sep and path:
            files = [path] + ([path + ".zip", path + ".npz"] if not Path(path).suffix else [])
            inputs += [(f"{name}'s saved agent", f) for f in files]
            inputs.append((f"{name}'s description", str(Path(path).with_suffix(".json"))))
    return inputs


def _written_files(args: argparse.Namespace, log_names: Iterable[str] = ()) -> list[tuple[str, str]]:
    """What compare or sweep writes besides its reports: each policy's ``--log-dir`` folder (``log_names``:
    their names, from :func:`log_folders`), and a run folder's ``grid.json`` and ``units/``."""
    written = []
    if getattr(args, "log_dir", None):
        written += [("the --log-dir logs", str(Path(args.log_dir) / folder)) for folder in log_names]
    for folder in (args.run_dir, args.resume):
        if folder:
            written += [("the run folder's files", str(Path(folder) / name)) for name in ("grid.json", "units")]
    return written


def _check_plot(path: str) -> None:
    from schedgym.experiments.plotting import check_figure_name

    check_figure_name("--plot", path)


_SETS_EACH_WORKLOAD = ", which sets each workload itself"
_NO_SUITE_FORM = ": it has no suite form (a suite writes --json, --markdown and --plot)"
_NOT_WITH_SUITE = {
    "--run-dir": ("run_dir", ": it has no suite form (a suite keeps no run folder)"),
    "--resume": ("resume", ": it has no suite form (a suite keeps no run folder)"),
    "--workload": ("workload", _SETS_EACH_WORKLOAD),
    "--trace": ("trace", _SETS_EACH_WORKLOAD),
    "--cluster": ("cluster", _SETS_EACH_WORKLOAD),
    "--load": ("load", _SETS_EACH_WORKLOAD),
    "--csv": ("csv", _NO_SUITE_FORM),
    "--log-dir": ("log_dir", _NO_SUITE_FORM),
}
"""compare's options refused with --suite, by flag: (their dest, why). A suite chooses each workload itself,
and some outputs have no suite form (docs/suite.md)."""


def _compare_suite(args: argparse.Namespace) -> int:
    """``compare --suite NAME``: every workload of the suite, one table (schedgym.experiments.suite)."""
    from schedgym.experiments.suite import format_table, run_suite, suite_configs, write_json, write_markdown
    from schedgym.experiments.suite import write_plot as write_suite_plot

    for flag, (dest, why) in _NOT_WITH_SUITE.items():
        if dest in args.given:
            raise ConfigError(f"{flag} does not apply to --suite{why}")
    executor = _executor(args)
    base = _compare_config(args)  # the policies and the simulator's rules, checked
    # What suite_configs checks now and run_suite runs later: the same suite.
    suite = dict(
        seeds=args.seeds if args.seeds else 20,
        sim=base.sim,
        max_jobs=args.jobs,
        split=args.split,
        first_seed=args.first_seed,
    )
    suite_configs(args.suite, base.policies, **suite)
    _check_outputs(
        (("--json", args.json), ("--markdown", args.markdown), ("--plot", args.plot)), _read_files(args, base.policies)
    )
    if args.plot:
        _check_plot(args.plot)
    _run_and_write(
        lambda: run_suite(
            args.suite,
            base.policies,
            **suite,
            executor=executor,
            progress=False if args.no_progress else None,
        ),
        format_table,
        ((args.json, write_json), (args.markdown, write_markdown), (args.plot, write_suite_plot)),
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    if args.suite is not None:
        return _compare_suite(args)
    from schedgym.experiments.compare import run_comparison
    from schedgym.experiments.report import (
        format_table,
        write_csv,
        write_json,
        write_logs,
        write_markdown,
        write_plot,
    )

    executor = _executor(args)
    config = _compare_config(args)
    folders = log_folders(config.labels) if args.log_dir is not None else {}
    # Output paths are checked before minutes of simulation, not after.
    _check_outputs(
        (("--json", args.json), ("--csv", args.csv), ("--markdown", args.markdown), ("--plot", args.plot)),
        _read_files(args, config.policies),
        _written_files(args, folders.values()),
    )
    if args.log_dir is not None:
        check_output_dir("--log-dir", args.log_dir)
    if args.plot:
        _check_plot(args.plot)
    log_dir = args.log_dir

    def on_run(label: str, seed: int, result) -> None:  # noqa: ANN001
        if log_dir is not None:
            write_logs(Path(log_dir) / folders[label] / f"seed{seed}", result)

    _run_and_write(
        lambda: run_comparison(
            config,
            executor=executor,
            progress=False if args.no_progress else None,
            on_run=on_run,
            **_kept_runs(args),
        ),
        format_table,
        ((args.json, write_json), (args.csv, write_csv), (args.markdown, write_markdown), (args.plot, write_plot)),
    )
    if args.log_dir is not None:
        print(f"wrote logs under {args.log_dir}")
    return 0


def _safe(label: str) -> str:
    """A policy label as a folder name: letters, digits, '-', '_' and '.' kept, anything else '_'; never
    hidden, '.' or '..'."""
    name = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "_" for ch in label)
    return "_" + name if name.startswith(".") or not name else name


def log_folders(labels: Sequence[str]) -> dict[str, str]:
    """The ``--log-dir`` folder of each policy label. Two labels that map to one folder (``a/b`` and
    ``a_b``; or ``A`` and ``a``, one folder on a case-insensitive file system) are refused: a second policy
    must not overwrite the first one's logs."""
    folders: dict[str, str] = {}
    taken: dict[str, str] = {}
    for label in labels:
        folder = _safe(label)
        other = taken.get(folder.casefold())
        if other is not None:
            raise ConfigError(
                f"--log-dir: policies {other!r} and {label!r} would both write to the folder {folder!r}; "
                "give one of them another NAME"
            )
        taken[folder.casefold()] = label
        folders[label] = folder
    return folders


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``schedgym`` with ``argv`` (default: the command line); return the exit status: 0, 1 when a
    command found nothing to report (tune), 2 for a user error (one line on stderr), 130 on Ctrl-C, 143 on
    SIGTERM (with the ``schedgym`` command; both after the same clean-up). Called with ``argv`` from a Python
    process, it leaves that process's ``sys.unraisablehook`` and stdout/stderr error handlers as they were; as
    the command (no ``argv``), it keeps them changed until the interpreter exits."""
    if argv is None:
        return _main(argv)
    hook = sys.unraisablehook
    errors = [(s, s.errors) for s in (sys.stdout, sys.stderr) if isinstance(s, io.TextIOWrapper)]
    try:
        return _main(argv)
    finally:
        sys.unraisablehook = hook
        for stream, handler in errors:
            with contextlib.suppress(ValueError):  # a stream closed meanwhile
                stream.reconfigure(errors=handler)


def _main(argv: Sequence[str] | None) -> int:
    _take_over_interrupts()
    _plain_text_fallback()
    _RECEIVED.clear()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        _given_options(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "trace":
            return _trace(args)
        if args.command in args.command_handlers:
            return args.command_handlers[args.command](args)
        parser.error(f"unknown command {args.command!r}")
    except SchedGymError as exc:
        if _RECEIVED:  # an error the interrupt caused (matplotlib's, interrupted while it saves a figure)
            return _interrupted(None)
        _stdout_unwritable(argv is None)
        print(f"schedgym: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except BrokenPipeError:
        if _RECEIVED:
            return _interrupted(None)
        # The reader went away (schedgym compare | head): not an error worth a traceback. Point stdout at
        # devnull so that Python's own flush at exit does not raise again.
        _stdout_unwritable(command=True, failed=True)
        return 141
    except OSError as exc:
        # Our own files fail as SchedGymError naming them; an OSError of a full disk without a file name is
        # the write of a print.
        command = argv is None
        if _RECEIVED or not (
            _stdout_unwritable(command) or (command and exc.filename is None and exc.errno in _DISK_FULL)
        ):
            raise
        _stdout_unwritable(command, failed=True)
        # `schedgym train > log` on a full disk: what failed is stdout, not a file of ours
        print(f"schedgym: error: cannot write standard output: {os.strerror(exc.errno or 0)}", file=sys.stderr)
        return 2
    except Exception as exc:
        # Ctrl-C during an import (matplotlib's, by --plot at the end) can reach us as another exception caused
        # by the KeyboardInterrupt: "ImportError: initialization failed" from an extension module, or
        # "RuntimeError: Error calling __set_name__" from a class being built.
        interrupt = interrupt_in(exc)
        if interrupt is None and not _RECEIVED:
            raise
        return _interrupted(interrupt)
    return 2


_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _stdout_unwritable(command: bool, failed: bool = False) -> bool:
    """Whether stdout cannot take what was printed (``> file`` on a full disk), or ``failed``. As the command
    (``command``), stdout is then pointed at the null device, so that the flush at exit does not fail again
    with a traceback and status 120; ``main(argv)`` in a Python process leaves that process's stdout alone."""
    stdout = sys.stdout
    if stdout is None:  # closed (>&-): Python writes nowhere, and nothing fails
        return False
    if not failed:
        try:
            stdout.flush()
            return False
        except (OSError, ValueError):
            pass
    if command and stdout is sys.__stdout__:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)  # sys.__stdout__'s descriptor
            os.close(devnull)
    return True


# The signals (SIGINT, SIGTERM) that have stopped this command. An interrupt can land where a library turns it
# into another error, or where Python can only print it ("Exception ignored in ..."), leaving a state that
# fails later: once one has arrived, whatever ends the command is reported as that interrupt.
_RECEIVED: list[int] = []


def _interrupted(interrupt: KeyboardInterrupt | None) -> int:
    """The one line and status of Ctrl-C (or of SIGTERM, a :class:`Terminated`). Objects half built when it
    landed (pyparsing's, during --plot's imports) may fail in ``__del__`` as they are collected at exit: noise
    after the user asked to stop, so such messages are not printed."""
    sys.unraisablehook = lambda unraisable: None
    if isinstance(interrupt, Terminated) or (interrupt is None and _RECEIVED[:1] == [signal.SIGTERM]):
        print("schedgym: terminated", file=sys.stderr)
        return 143
    print("schedgym: interrupted", file=sys.stderr)
    return 130


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """An encoding error handler: ``±`` as ``+-``, any other character the terminal cannot show as ``?``."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join("+-" if c == "\u00b1" else "?" for c in bad), exc.end


def _plain_text_fallback() -> None:
    """Tables print intervals as ``mean ± half``; on a terminal or pipe whose encoding lacks ``±`` (ASCII,
    ``PYTHONIOENCODING=ascii``) print ``+-`` instead of failing with a traceback after the work is done."""
    codecs.register_error("schedgym-plain", _ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="schedgym-plain")


def _take_over_interrupts() -> None:
    """From here on Ctrl-C is a KeyboardInterrupt, and SIGTERM a :class:`Terminated`, that main() turns into
    one line and status 130 (143), after every output set has removed what it created. Until now the
    command's launcher (``schedgym/bin/schedgym``) ended the process on either, with that line, during the
    imports. Only the launcher's handlers are replaced: a signal the parent ignores stays ignored, and
    ``main()`` called in a Python process (a test) leaves that process's handlers alone."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if getattr(signal.getsignal(sig), "schedgym_launcher", False):
            signal.signal(sig, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> NoReturn:
    _RECEIVED.append(signum)
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

"""Every validated checkpoint of some `agents.lean_ppo` runs on the plane of BE p50 against BE p99, with the rules.

    python examples/frontier.py runs/lean_ppo runs/nowait_pc10 ... --plot frontier.png

Each RUN is a folder `python -m agents.lean_ppo --out RUN` wrote (its `training.json`); the runs must share
their validation workloads (the rules' means in each `training.json` must agree). For each run it prints
one markdown row: the ranges of the validation means of BE p50, BE p99 and TE p95 over its checkpoints from
`--from-update` on, and how many of them are at or below the better rule's mean on all four headline
figures (TE p95, BE p50, BE p95, BE p99: dominance of both rules on the means). `--plot FILE` draws the
checkpoints (one colour per run) and the rules (.png, .pdf or .svg; needs matplotlib). `--compare FILE`
adds the policies of a `schedgym compare --split validation --seeds N --json FILE` on the same workloads
(its fitgpp and k8s must have the runs' rules' BE p50 and BE p99) as labelled points.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from agents.evolve import FIGURES  # the headline figures, as training.json names them
from agents.lean_ppo import dominated_figures
from schedgym.errors import SchedGymError
from schedgym.experiments.plotting import check_figure_name


def fail(message: str) -> NoReturn:
    """One line on stderr and status 2, as for any user error."""
    print(f"frontier.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load(run: Path) -> dict[str, Any]:
    """A run's training.json; SystemExit with one line if it is missing or not one."""
    path = run / "training.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        rules, curve = report["validation_rules"], report["curve"]
        # Every figure this script compares, present and a number (a missing one would pass all() unseen).
        if not rules or any(not isinstance(r[k], (int, float)) for r in rules.values() for k in FIGURES):
            raise ValueError("no rules' means")
        if any(not isinstance(p[k], (int, float)) for p in curve for k in (*FIGURES, "update")):
            raise ValueError("a checkpoint without its figures")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        fail(f"{path}: not a training.json of agents.lean_ppo ({exc})")
    return report


def row(name: str, points: list[dict[str, float]], rules: dict[str, dict[str, float]]) -> str:
    def span(key: str, digits: int) -> str:
        values = [p[key] for p in points]
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}"

    n_below = sum(dominated_figures(p, rules) == 0 for p in points)  # at or below both rules on all four
    return (f"| {name} | {len(points)} | {span('be_p50', 3)} | {span('be_p99', 1)} | {span('te_p95', 3)} | "
            f"{n_below} |")  # fmt: skip


def compared_points(path: Path, rules: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The BE p50 and BE p99 means of each policy of a compare ``--json`` file other than the rules; SystemExit
    with one line if its rules' means are not the runs' (other workloads)."""
    try:
        policies = json.loads(path.read_text(encoding="utf-8"))["policies"]
        points = {name: {"be_p50": float(p["be"]["slowdown_p50"]), "be_p99": float(p["be"]["slowdown_p99"]),
                         "te_p95": float(p["te"]["slowdown_p95"])} for name, p in policies.items()}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"{path}: not a compare --json file ({exc})")
    for name, values in rules.items():
        # Compare's means are the same runs' means summed in another order: equal up to float rounding.
        theirs = points.get(name)
        if theirs is None or any(abs(theirs[k] - values[k]) > 1e-9 * abs(values[k]) for k in ("be_p50", "be_p99")):
            fail(f"{path}: its {name} is not the runs' (other workloads?)")
    return {name: values for name, values in points.items() if name not in rules}


def plot(runs: dict[str, list[dict[str, float]]], rules: dict[str, dict[str, float]], path: Path,
         others: dict[str, dict[str, float]]) -> None:  # fmt: skip
    from schedgym.experiments.plotting import new_figure, save_figure  # matplotlib only when drawing

    def draw() -> Any:
        fig = new_figure((8.0, 5.5))
        ax = fig.add_subplot(1, 1, 1)
        for i, (name, points) in enumerate(runs.items()):
            marker = "o^sv"[i // 10 % 4]  # ten colours, then the next marker
            ax.plot([p["be_p50"] for p in points], [p["be_p99"] for p in points], ls="", marker=marker, ms=3,
                    alpha=0.6, color=f"C{i % 10}", label=name)  # fmt: skip
        for shape, (name, values) in zip(("s", "D"), rules.items(), strict=False):
            ax.plot([values["be_p50"]], [values["be_p99"]], ls="", marker=shape, ms=10, color="black", label=name)
        for name, values in others.items():  # policies from a comparison on the same workloads, labelled
            ax.plot([values["be_p50"]], [values["be_p99"]], ls="", marker="*", ms=12, color="black")
            ax.annotate(name, (values["be_p50"], values["be_p99"]), textcoords="offset points", xytext=(6, 4),
                        fontsize=7)  # fmt: skip
        best = {k: min(r[k] for r in rules.values()) for k in ("be_p50", "be_p99")}
        ax.axvline(best["be_p50"], color="grey", ls=":", lw=1)
        ax.axhline(best["be_p99"], color="grey", ls=":", lw=1)
        ax.set_xlabel("BE p50 slowdown (validation mean)")
        ax.set_ylabel("BE p99 slowdown (validation mean)")
        ax.set_title("checkpoints; dominating both rules needs the lower left of the dotted lines", fontsize=9)
        ax.legend(fontsize=6, loc="upper right", ncol=2)
        return fig

    save_figure(path, draw, dpi=150)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders written by python -m agents.lean_ppo --out")
    parser.add_argument("--from-update", type=int, default=100, help="leave out the checkpoints before it")
    parser.add_argument("--plot", type=Path, default=None, help="the figure (.png, .pdf or .svg)")
    parser.add_argument("--compare", type=Path, default=None, help="a compare --json file on the same workloads")
    args = parser.parse_args()
    names = [run.absolute().name for run in args.runs]  # not resolved: a symlink's own name labels the run
    if len(set(names)) < len(names):
        fail("two runs have the same folder name (the name labels a run)")
    reports = {name: load(run) for name, run in zip(names, args.runs, strict=True)}
    rules = next(iter(reports.values()))["validation_rules"]
    for name, report in reports.items():
        if report["validation_rules"] != rules:  # the same workloads give the same rules' means, to the bit
            fail(f"{name} was validated on other workloads (its rules' means differ)")
    runs = {name: [p for p in r["curve"] if p["update"] >= args.from_update] for name, r in reports.items()}
    if not any(runs.values()):
        fail(f"no run has a checkpoint from update {args.from_update} on")
    others = compared_points(args.compare, rules) if args.compare is not None else {}  # before any output
    if args.plot is not None:
        try:
            check_figure_name("--plot", args.plot)
        except SchedGymError as exc:
            fail(str(exc))
    print("| run | checkpoints | BE p50 | BE p99 | TE p95 | at or below both rules on all four |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, points in runs.items():
        print(row(name, points, rules) if points else f"| {name} | 0 | | | | 0 |")
    for name, values in rules.items():
        print(f"| `{name}` (rule) | | {values['be_p50']:.3f} | {values['be_p99']:.1f} | {values['te_p95']:.3f} | |")
    for name, values in others.items():
        print(f"| `{name}` (compare) | | {values['be_p50']:.3f} | {values['be_p99']:.1f} | {values['te_p95']:.3f} | |")
    if args.plot is not None:
        try:
            plot({name: points for name, points in runs.items() if points}, rules, args.plot, others)
        except SchedGymError as exc:
            fail(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

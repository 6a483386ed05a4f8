"""Every validated checkpoint of some `agents.lean_ppo` runs on the plane of BE p50 against BE p99, with the rules.

    python examples/frontier.py runs/lean_ppo runs/nowait_pc10 ... --plot frontier.png

Each RUN is a folder `python -m agents.lean_ppo --out RUN` wrote (its `training.json`); the runs must share
their validation workloads (the rules' means in each `training.json` must agree). For each run it prints
one markdown row: the ranges of the validation means of BE p50, BE p99 and TE p95 over its checkpoints from
`--from-update` on, and how many of them are at or below the better rule's mean on all four headline
figures (TE p95, BE p50, BE p95, BE p99: dominance of both rules on the means). `--plot FILE` draws the
checkpoints (one colour per run) and the rules (.png, .pdf or .svg; needs matplotlib).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FIGURES = ("te_p95", "be_p50", "be_p95", "be_p99")  # the headline figures, as training.json names them


def load(run: Path) -> dict[str, Any]:
    """A run's training.json; SystemExit with one line if it is missing or not one."""
    path = run / "training.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        report["curve"], report["validation_rules"]  # noqa: B018  (the keys this script reads)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"frontier.py: error: {path}: not a training.json of agents.lean_ppo ({exc})") from None
    return report


def below_both(point: dict[str, float], rules: dict[str, dict[str, float]]) -> bool:
    """Whether a checkpoint's four validation means are at or below the better rule's, figure by figure."""
    return all(point[k] <= min(r[k] for r in rules.values()) for k in FIGURES)


def row(name: str, points: list[dict[str, float]], rules: dict[str, dict[str, float]]) -> str:
    def span(key: str, digits: int) -> str:
        values = [p[key] for p in points]
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}"

    n_below = sum(below_both(p, rules) for p in points)
    return (f"| {name} | {len(points)} | {span('be_p50', 3)} | {span('be_p99', 1)} | {span('te_p95', 3)} | "
            f"{n_below} |")  # fmt: skip


def plot(runs: dict[str, list[dict[str, float]]], rules: dict[str, dict[str, float]], path: Path) -> None:
    from schedgym.experiments.plotting import new_figure, save_figure

    def draw() -> Any:
        fig = new_figure((8.0, 5.5))
        ax = fig.add_subplot(1, 1, 1)
        for i, (name, points) in enumerate(runs.items()):
            marker = "o^sv"[i // 10 % 4]  # ten colours, then the next marker
            ax.plot([p["be_p50"] for p in points], [p["be_p99"] for p in points], ls="", marker=marker, ms=3,
                    alpha=0.6, color=f"C{i % 10}", label=name)  # fmt: skip
        for shape, (name, values) in zip(("s", "D"), rules.items(), strict=False):
            ax.plot([values["be_p50"]], [values["be_p99"]], ls="", marker=shape, ms=10, color="black", label=name)
        best = {k: min(r[k] for r in rules.values()) for k in ("be_p50", "be_p99")}
        ax.axvline(best["be_p50"], color="grey", ls=":", lw=1)
        ax.axhline(best["be_p99"], color="grey", ls=":", lw=1)
        ax.set_xlabel("BE p50 slowdown (validation mean)")
        ax.set_ylabel("BE p99 slowdown (validation mean)")
        ax.set_title("checkpoints; dominating both rules needs the lower left of the dotted lines", fontsize=9)
        ax.legend(fontsize=6, loc="upper right", ncol=2)
        fig.tight_layout()
        return fig

    save_figure(path, draw, dpi=150)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders written by python -m agents.lean_ppo --out")
    parser.add_argument("--from-update", type=int, default=100, help="leave out the checkpoints before it")
    parser.add_argument("--plot", type=Path, default=None, help="the figure (.png, .pdf or .svg)")
    args = parser.parse_args()
    reports = {run.name: load(run) for run in args.runs}
    rules = next(iter(reports.values()))["validation_rules"]
    for name, report in reports.items():
        if report["validation_rules"] != rules:
            print(f"frontier.py: error: {name} was validated on other workloads (its rules' means differ)",
                  file=sys.stderr)  # fmt: skip
            return 2
    runs = {name: [p for p in r["curve"] if p["update"] >= args.from_update] for name, r in reports.items()}
    print("| run | checkpoints | BE p50 | BE p99 | TE p95 | at or below both rules on all four |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, points in runs.items():
        if points:
            print(row(name, points, rules))
    for name, values in rules.items():
        print(f"| `{name}` (rule) | | {values['be_p50']:.3f} | {values['be_p99']:.1f} | {values['te_p95']:.3f} | |")
    if args.plot is not None:
        plot(runs, rules, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

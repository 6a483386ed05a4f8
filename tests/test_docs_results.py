"""The figures of the README and of docs/results are the commands' output: the README's table is exactly what
its command writes, and each committed results table holds, row for row, what its command writes today for a
quick subset of its policies (the lookaheads, which take minutes, are left out; a row depends only on its own
policy and on fitgpp and k8s, against which it is judged); the shift suite's tables likewise, for the rules'
rows. Checked on the native engine, the one that made
them; tests/test_results_do_not_move.py holds the two engines to the same results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schedgym.cli import main

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
START, END = "<!-- generated: schedgym compare --markdown -->\n", "<!-- end generated -->"


@pytest.fixture(autouse=True)
def _native_only(engine: str) -> None:
    if engine != "native":
        pytest.skip("the committed results were made on the native engine")


def _markdown(tmp_path: Path, *argv: str) -> str:
    out = tmp_path / "table.md"
    assert main(["compare", "--no-progress", "--markdown", str(out), *argv]) == 0
    return out.read_text(encoding="utf-8")


def _rows(table: str) -> dict[str, str]:
    return {m[1]: line for line in table.splitlines() if (m := re.match(r"\| `([^`]+)` \|", line))}


def test_the_readmes_table_is_what_its_command_writes(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme[readme.index(START) + len(START) : readme.index(END)]
    assert shown == _markdown(tmp_path), "run: schedgym compare --markdown table.md, and paste table.md"


CASES = {
    "rules": ((), "fifo,priority,k8s,random,fitgpp,fitgpp-fitness,fitgpp-gracefirst"),
    "paper": ((), "fifo,priority,fitgpp,k8s,random,ppo,dagger,dagger-nowait,lean-ppo,lean-ppo-nowait,dagger-mix"),
    "realistic": (("--workload", "realistic"), "fitgpp,k8s,ppo,dagger-realistic,lean-ppo,lean-ppo-nowait"),
    "philly": (("--workload", "philly"), "fifo,priority,k8s,fitgpp,ppo,dagger-philly,lean-ppo,lean-ppo-nowait"),
    "alibaba": (
        ("--workload", "alibaba2023", "--cluster", "alibaba2023-contended"),
        "fitgpp,k8s,ppo,dagger,lean-ppo,lean-ppo-nowait",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_results_table_holds_what_its_command_writes(name, tmp_path, capsys):
    argv, policies = CASES[name]
    committed = _rows((RESULTS / f"{name}.md").read_text(encoding="utf-8"))
    now = _rows(_markdown(tmp_path, *argv, "--policies", policies))
    assert set(now) <= set(committed), sorted(set(now) - set(committed))
    moved = {p: (committed[p], row) for p, row in now.items() if committed[p] != row}
    assert not moved, f"docs/results/{name}.md differs from its command for {sorted(moved)}: {moved}"


def test_the_papers_comparison_on_the_results_page_is_what_compare_computes(tmp_path, capsys):
    """docs/results/index.md's fitgpp-vs-fifo rows (the ratios and the paired differences) from its command."""
    import json

    out = tmp_path / "out.json"
    assert (
        main(["compare", "--no-progress", "--workload", "paper", "--policies", "fifo,fitgpp", "--json", str(out)]) == 0
    )
    policies = json.loads(out.read_text())["policies"]
    fifo, fitgpp = policies["fifo"], policies["fitgpp"]
    figures = [("te", "slowdown_p95", 2), ("be", "slowdown_p50", 3), ("be", "slowdown_p95", 2)]
    ratios = [f"**{fitgpp[c][f] / fifo[c][f]:.3f}**" for c, f, _ in figures]
    paired = [fitgpp["paired"]["fifo"][c][f] for c, f, _ in figures]
    diffs = [
        f"{p['mean']:+.{d}f} ± {p['ci95']:.{d}f}".replace("+-", "-")
        for p, (_, _, d) in zip(paired, figures, strict=True)
    ]
    page = (RESULTS / "index.md").read_text(encoding="utf-8")
    ratio_row = next(line for line in page.splitlines() if line.startswith("| schedgym (ratio) |"))
    diff_row = next(line for line in page.splitlines() if line.startswith("| schedgym (paired difference) |"))
    assert [cell.split(" (")[0] for cell in ratio_row.strip("|").split(" | ")[1:]] == ratios
    assert diff_row.strip("| ").split(" | ")[1:] == diffs


# --- the shift suite's tables: each row keyed by (workload, policy); the rules' rows, which take seconds
SUITE_CASES = {
    "shifts": ((), "fifo,priority,random,fitgpp,fitgpp-fitness,fitgpp-gracefirst,k8s"),
    "shifts_lookahead": (("--seeds", "3", "--jobs", "5000"), "fitgpp,k8s"),
    "evolve_suite": ((), "fitgpp,k8s"),
}


def _suite_rows(table: str) -> dict[tuple[str, str], str]:
    return {(m[1], m[2]): line for line in table.splitlines() if (m := re.match(r"\| ([^|]+?) \| `([^`]+)` \|", line))}


@pytest.mark.parametrize("name", sorted(SUITE_CASES))
def test_a_shift_suite_table_holds_what_its_command_writes(name, tmp_path, capsys):
    argv, policies = SUITE_CASES[name]
    committed = _suite_rows((RESULTS / f"{name}.md").read_text(encoding="utf-8"))
    now = _suite_rows(_markdown(tmp_path, "--suite", "shifts", *argv, "--policies", policies))
    assert len(now) == 10 * len(policies.split(","))  # every workload of the suite, every policy
    assert set(now) <= set(committed), sorted(set(now) - set(committed))
    moved = {key: (committed[key], row) for key, row in now.items() if committed[key] != row}
    assert not moved, f"docs/results/{name}.md differs from its command for {sorted(moved)}: {moved}"


def test_the_sweep_pages_excerpt_is_what_its_command_prints(capsys):
    """docs/sweep.md shows part of its example's on-screen table: each of those lines, as printed."""
    page = (ROOT / "docs" / "sweep.md").read_text(encoding="utf-8")
    block = page[page.index("```\nmax_preemptions  load  policy") + 4 :]
    shown = block[: block.index("```")].splitlines()
    assert len(shown) == 6
    argv = ["sweep", "--no-progress", "--set", "max_preemptions=1,2,4", "--set", "load=0.9,1.0,1.1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    missing = [line for line in shown if line not in printed]
    assert not missing, f"docs/sweep.md's excerpt is not what `schedgym {' '.join(argv)}` prints: {missing}"
    # The prose after it: at load 1.1 (one preemption), k8s's BE p95 advantage over fitgpp (-6.9 ± 2.6) and
    # fitgpp's BE p99 advantage over k8s (-33.6 ± 7.1), from the paired tables.
    paired = {line.split()[2]: line for line in printed if line.startswith("1                1.1   ") and "±" in line}
    assert "-6.930 ± 2.639" in paired["k8s"] and "-33.574 ± 7.141" in paired["fitgpp"]
    assert "(-6.9 ± 2.6 at load 1.1" in page and "(-33.6 ± 7.1 at load 1.1)" in page

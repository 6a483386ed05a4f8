"""The README's code runs as written: every Python block is executed, and every ``schedgym`` command in a
shell block is parsed by the real command-line parser (running them all would take minutes; the CLI tests
run the main ones end to end)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README.read_text(), flags=re.S)
PYTHON = [code for lang, code in BLOCKS if lang == "python"]
COMMANDS = [
    line.strip()
    for lang, code in BLOCKS
    if lang == "bash"
    for line in code.splitlines()
    if line.strip().startswith("schedgym ") or " && schedgym " in line
]


def test_the_readme_has_code():
    assert len(PYTHON) >= 4 and len(COMMANDS) >= 5


@pytest.mark.parametrize(
    "code",
    [pytest.param(c, marks=pytest.mark.slow) if ".learn(" in c else c for c in PYTHON],
    ids=[f"python-{i}" for i in range(len(PYTHON))],
)
def test_python_block_runs(code, tmp_path, monkeypatch, capsys):
    if "sb3_contrib" in code:
        pytest.importorskip("sb3_contrib")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})


@pytest.mark.parametrize("command", COMMANDS)
def test_schedgym_command_parses(command):
    from schedgym.cli import build_parser

    words = shlex.split(command.split("&& ", 1)[-1])
    assert words[0] == "schedgym"
    if words[1:] == ["train", "--help"]:
        return
    build_parser().parse_args(words[1:])  # exits (SystemExit) on an unknown option

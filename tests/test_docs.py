"""The README and the documentation pages run as written: every Python block of the README and of the pages
moved out of it (getting started, the user guide, results, the experiment log, development) is executed;
every ``schedgym`` command in a shell block of the README or of any page is parsed by the real command-line
parser (running them all would take minutes; the CLI tests run the main ones end to end); every relative link
of the README and the pages leads to a file that exists, and to a heading of it where it names one."""

from __future__ import annotations

import re
import shlex
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
# The pages whose Python blocks run here. The older pages' blocks are run by their own tests where they are
# (docs/architecture.md: tests/test_architecture.py; docs/workloads.md: tests/test_mix_compare.py;
# docs/clients.md: tests/clients/), or need Ray, torch or minutes.
RUN = [README, DOCS / "index.md", *sorted((DOCS / "guide").glob("*.md")), DOCS / "log.md", DOCS / "development.md"]
RUN += sorted((DOCS / "results").glob("*.md"))


def _blocks(path: Path) -> list[tuple[str, str]]:
    return re.findall(r"```(\w*)\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


PYTHON = [(path, code) for path in RUN for lang, code in _blocks(path) if lang == "python"]
COMMANDS = [
    (path, line.strip())
    for path in PAGES
    for lang, code in _blocks(path)
    if lang == "bash"
    for line in code.replace("\\\n", " ").splitlines()
    if line.strip().startswith("schedgym ") or " && schedgym " in line
]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_readme_and_the_guide_have_code():
    assert sum(1 for p, _ in PYTHON if p == README) >= 1
    assert len(PYTHON) >= 6 and len(COMMANDS) >= 20


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def _marks(code: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] * (".learn(" in code) + [pytest.mark.rl] * ("sb3_contrib" in code)  # rl: conftest.py


@pytest.mark.parametrize(
    "path, code",
    [pytest.param(p, c, marks=_marks(c)) for p, c in PYTHON],
    ids=[f"{_name(p)}-python-{i}" for i, (p, _) in enumerate(PYTHON)],
)
def test_python_block_runs(path, code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(path), "exec"), {"__name__": "docs"})


@pytest.mark.parametrize("path, command", COMMANDS, ids=[f"{_name(p)}-{i}" for i, (p, _) in enumerate(COMMANDS)])
def test_schedgym_command_parses(path, command):
    from schedgym.cli import build_parser

    words = shlex.split(command.split("&& ", 1)[-1])
    assert words[0] == "schedgym"
    if words[1:] in (["train", "--help"], ["compare"]):
        return
    build_parser().parse_args(words[1:])  # exits (SystemExit) on an unknown option


# --- links


def slug(heading: str) -> str:
    """A heading's anchor as the site (Python-Markdown's toc) and GitHub make it, for the headings used here."""
    text = re.sub(r"[`*]", "", heading).strip()
    text = unicodedata.normalize("NFKD", text).lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[-\s]+", "-", text).strip("-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_relative_links_lead_somewhere(path):
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{_name(path)}: " + "; ".join(broken)


def test_slugs_are_those_of_the_site():
    assert slug("2026-11-30: `dagger-nowait`, and the unmerged `feat-v2` features") == (
        "2026-11-30-dagger-nowait-and-the-unmerged-feat-v2-features"
    )
    assert slug("Comparisons and sweeps: `--executor`") == "comparisons-and-sweeps-executor"


def test_the_env_docstrings_version_history_names_every_id():
    """The env's reference page is its docstring: every registered id and every retired one is in its
    version history."""
    import gymnasium as gym

    import schedgym
    from schedgym.envs import PreemptionEnv

    history = PreemptionEnv.__doc__.split("## Version History", 1)[1]
    ids = {i for i in gym.registry if i.startswith("schedgym/")} | set(schedgym.SUPERSEDED)
    assert ids and not {i for i in ids if f"``{i}``" not in history}

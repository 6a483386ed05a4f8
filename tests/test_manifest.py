"""The bundled agents' manifest (agents/bundled/manifest.json): it lists exactly the files beside it, with their
SHA-256 sums and their own training command, the registry lists exactly its agents, and a missing or extra
file, a changed file or a malformed manifest is a SchedGymError that says which."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agents import learned
from agents.manifest import BUNDLED_DIR, MANIFEST, check_bundled, read_manifest, sha256_of
from schedgym.errors import SchedGymError
from schedgym.registry import policy_entry, policy_names

# the command that trains each algorithm's bundled agents
TRAINERS = {"maskable_ppo": "schedgym train ", "lean_ppo": "python -m agents.lean_ppo --out DIR "}


def test_manifest_matches_the_bundled_files():
    agents = check_bundled()  # every listed file with its sum, nothing unlisted
    listed = {MANIFEST.name} | {file for agent in agents.values() for file in agent.files()}
    assert listed == {p.name for p in BUNDLED_DIR.iterdir()}
    for agent in agents.values():
        assert sha256_of(BUNDLED_DIR / agent.model) == agent.model_sha256
        meta = json.loads((BUNDLED_DIR / agent.metadata).read_text())
        # what the manifest says of an agent is what its own .json recorded when it was trained
        assert (agent.algo, agent.env_id) == (meta["algo"], meta["env_id"])
        assert agent.workload == meta["env_kwargs"].get("workload", "paper")
        assert agent.train_command == meta["train_command"]
        assert agent.train_command.startswith(TRAINERS[agent.algo])


def test_learned_derives_from_the_manifest():
    agents = read_manifest()
    assert learned.BUNDLED == {name: BUNDLED_DIR / agent.model for name, agent in agents.items()}
    assert learned.BUNDLED_SHA256 == {f: d for agent in agents.values() for f, d in agent.files().items()}
    for name in agents:
        learned.verify_bundled(name)


def test_registry_lists_exactly_the_manifests_agents():
    agents = read_manifest()
    registered = {name for name in policy_names() if policy_entry(name).learned}
    assert registered == set(agents)
    for name, agent in agents.items():
        entry = policy_entry(name)
        assert entry.entry_point == "agents.learned:bundled_agent"
        assert entry.kwargs == {"name": name}
        assert entry.description == agent.description


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "bundled"
    shutil.copytree(BUNDLED_DIR, folder)
    return folder


def test_a_missing_extra_or_changed_file_is_named(tmp_path):
    folder = _copy(tmp_path)
    check_bundled(folder)
    (folder / "stray.zip").write_bytes(b"x")
    with pytest.raises(SchedGymError, match="does not list: stray.zip"):
        check_bundled(folder)
    (folder / "stray.zip").unlink()
    (folder / "dagger_paper.json").unlink()
    with pytest.raises(SchedGymError, match=r"'dagger' is missing .*dagger_paper.json"):
        check_bundled(folder)
    shutil.copy(BUNDLED_DIR / "dagger_paper.json", folder)
    with open(folder / "ppo_paper.zip", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(SchedGymError, match=r"'ppo' does not match its recorded checksum"):
        check_bundled(folder)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda m: m.update(format=2), "'format': 1"),
        (lambda m: m["agents"][0].pop("train_command"), r"with the keys \[.*\] \(and optionally \['fallback'\]\)"),
        (lambda m: m["agents"][0].update(extra=1), r"and optionally \['fallback'\]"),
        (
            lambda m: m["agents"][0].update(fallback="fitgpp"),
            "'fallback' must be an object with 'rule' and 'max_nodes'",
        ),
        (lambda m: m["agents"][0].update(fallback={"rule": "fitgpp"}), "'fallback' must be an object"),
        (lambda m: m["agents"][0].update(fallback=None), "'fallback' must be an object"),
        (lambda m: m["agents"][0].update(fallback={"rule": "", "max_nodes": 8}), "fallback.rule must be a policy name"),
        (
            lambda m: m["agents"][0].update(fallback={"rule": "mine:x", "max_nodes": 8}),
            "fallback.rule must be a policy",
        ),
        (
            lambda m: m["agents"][0].update(fallback={"rule": "fitgpp", "max_nodes": 0}),
            "max_nodes must be an integer >= 1",
        ),
        (
            lambda m: m["agents"][0].update(fallback={"rule": "fitgpp", "max_nodes": True}),
            "max_nodes must be an integer",
        ),
        (
            lambda m: m["agents"][0].update(fallback={"rule": "fitgpp", "max_nodes": 8.0}),
            "max_nodes must be an integer",
        ),
        (lambda m: m["agents"][0]["model"].update(sha256="ABC"), "64 lowercase hex digits"),
        (lambda m: m["agents"][0]["model"].update(file="../x.zip"), "file name in agents/bundled/"),
        (lambda m: m["agents"][0]["model"].update(file="x.pt"), r"a \.zip or \.npz file name"),
        (lambda m: m["agents"][0]["metadata"].update(file="ppo_paper.npz"), r"a \.json file name"),
        (lambda m: m["agents"][1].update(name=m["agents"][0]["name"]), "unique"),
        (lambda m: m["agents"][1].update(model=m["agents"][0]["model"]), "its .json must sit beside"),
        (lambda m: m["agents"][0].update(description=""), "non-empty string"),
    ],
)
def test_a_malformed_manifest_is_refused(tmp_path, change, needle):
    manifest = json.loads(MANIFEST.read_text())
    change(manifest)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    with pytest.raises(SchedGymError, match=needle):
        read_manifest(path)


def test_an_unreadable_manifest_is_refused(tmp_path):
    with pytest.raises(SchedGymError, match="cannot read the bundled agents' manifest"):
        read_manifest(tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(SchedGymError, match="not JSON"):
        read_manifest(tmp_path / "manifest.json")

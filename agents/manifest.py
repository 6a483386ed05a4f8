"""The bundled agents' manifest, ``agents/bundled/manifest.json``: one entry per agent (registry name, one-line
description, model and ``.json`` file names with their SHA-256 sums, algorithm, environment id and workload it
was trained and chosen on, the training command that made it; optionally ``fallback``, the rule that decides
instead of the agent on clusters of at most ``max_nodes`` nodes: ``{"rule": "fitgpp", "max_nodes": 8}``).

Standard library only, so that :mod:`schedgym.registry` registers the bundled agents from it without importing
numpy or the agents' code; :mod:`agents.learned` derives ``BUNDLED`` and ``BUNDLED_SHA256`` from it and checks a
bundled agent's files against it before loading them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import strict_json
from schedgym.errors import SchedGymError

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
MANIFEST = BUNDLED_DIR / "manifest.json"
FORMAT = 1
_FIELDS = ("name", "description", "model", "metadata", "algo", "env_id", "workload", "train_command")
_OPTIONAL = ("fallback",)


@dataclass(frozen=True)
class BundledAgent:
    """One manifest entry."""

    name: str
    description: str
    model: str  # file name in agents/bundled/ (.zip: stable-baselines3; .npz: numpy arrays, read without pickle)
    model_sha256: str
    metadata: str  # the model's .json beside it
    metadata_sha256: str
    algo: str
    env_id: str
    workload: str
    train_command: str
    fallback: tuple[str, int] | None = None  # (rule, max_nodes): the rule decides on clusters that small

    def files(self) -> dict[str, str]:
        """File name -> SHA-256, the model's and its ``.json``'s."""
        return {self.model: self.model_sha256, self.metadata: self.metadata_sha256}


def _bad(path: Path, why: str) -> SchedGymError:
    return SchedGymError(f"the bundled agents' manifest {path} is not valid: {why}; reinstall schedgym")


def _file_entry(path: Path, name: str, key: str, value: Any, suffixes: tuple[str, ...]) -> tuple[str, str]:
    if not isinstance(value, dict) or set(value) != {"file", "sha256"}:
        raise _bad(path, f"agent {name!r}: {key!r} must be an object with 'file' and 'sha256'")
    file, digest = value["file"], value["sha256"]
    named = isinstance(file, str) and Path(file).name == file and not file.startswith(".")
    if not named or Path(file).suffix not in suffixes:
        kind = " or ".join(suffixes)
        raise _bad(path, f"agent {name!r}: {key}.file must be a {kind} file name in agents/bundled/, got {file!r}")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise _bad(path, f"agent {name!r}: {key}.sha256 must be 64 lowercase hex digits, got {digest!r}")
    return file, digest


def read_manifest(path: Path = MANIFEST) -> dict[str, BundledAgent]:
    """The manifest's agents by name, in its order; :class:`SchedGymError` if it is missing or malformed."""
    try:
        raw = strict_json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchedGymError(
            f"cannot read the bundled agents' manifest {path} ({exc.strerror}); reinstall schedgym"
        ) from None
    except ValueError as exc:
        raise _bad(path, f"not JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("agents"), list):
        raise _bad(path, f"expected an object with 'format': {FORMAT} and a list 'agents'")
    agents: dict[str, BundledAgent] = {}
    files: set[str] = set()
    for entry in raw["agents"]:
        if not isinstance(entry, dict) or not set(_FIELDS) <= set(entry) <= set(_FIELDS + _OPTIONAL):
            raise _bad(
                path,
                f"each agent must be an object with the keys {list(_FIELDS)} (and optionally "
                f"{list(_OPTIONAL)}), got {entry!r}",
            )
        name = entry["name"]
        for key in ("name", "description", "algo", "env_id", "workload", "train_command"):
            if not isinstance(entry[key], str) or not entry[key]:
                raise _bad(path, f"agent {name!r}: {key!r} must be a non-empty string")
        if ":" in name or name in agents:
            raise _bad(path, f"agent names must be unique and contain no ':', got {name!r}")
        # which suffix an algorithm saves is agents.learned's to check (load_agent): this module reads no numpy
        model, model_sha = _file_entry(path, name, "model", entry["model"], (".zip", ".npz"))
        meta, meta_sha = _file_entry(path, name, "metadata", entry["metadata"], (".json",))
        if Path(meta).stem != Path(model).stem:
            raise _bad(
                path, f"agent {name!r}: its .json must sit beside its model ({Path(model).stem}.json), got {meta!r}"
            )
        if {model, meta} & files or meta == path.name:
            raise _bad(path, f"agent {name!r}: a file listed twice ({model!r} or {meta!r})")
        files |= {model, meta}
        agents[name] = BundledAgent(
            name, entry["description"], model, model_sha, meta, meta_sha, entry["algo"], entry["env_id"],
            entry["workload"], entry["train_command"], _fallback(path, name, entry) if "fallback" in entry else None,
        )  # fmt: skip
    return agents


def _fallback(path: Path, name: str, entry: dict[str, Any]) -> tuple[str, int]:
    value = entry["fallback"]  # present: null is not "no fallback", which is leaving the key out
    if not isinstance(value, dict) or set(value) != {"rule", "max_nodes"}:
        raise _bad(path, f"agent {name!r}: 'fallback' must be an object with 'rule' and 'max_nodes'")
    rule, nodes = value["rule"], value["max_nodes"]
    # whether the rule exists is the registry's to say (when the agent is made): this module imports no rules
    if not isinstance(rule, str) or not rule or ":" in rule:
        raise _bad(path, f"agent {name!r}: fallback.rule must be a policy name, got {rule!r}")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise _bad(path, f"agent {name!r}: fallback.max_nodes must be an integer >= 1, got {nodes!r}")
    return rule, nodes


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_file(agent: str, path: Path, expected: str) -> None:
    """:class:`SchedGymError` unless the file at ``path`` exists and has SHA-256 ``expected``."""
    try:
        actual = sha256_of(path)
    except OSError as exc:
        raise SchedGymError(
            f"the bundled agent {agent!r} is missing {path} ({exc.strerror}); reinstall schedgym"
        ) from None
    if actual != expected:
        raise SchedGymError(
            f"the bundled agent {agent!r} does not match its recorded checksum: {path} has SHA-256 {actual}, "
            f"expected {expected} (agents/bundled/manifest.json); reinstall schedgym"
        )


def check_bundled(directory: Path = BUNDLED_DIR, manifest: Path | None = None) -> dict[str, BundledAgent]:
    """The manifest of ``directory`` held to the files there: every listed file present with its SHA-256, and
    no file that it does not list. Returns the agents; :class:`SchedGymError` names the first discrepancy."""
    manifest = directory / MANIFEST.name if manifest is None else manifest
    agents = read_manifest(manifest)
    listed = {manifest.name}
    for agent in agents.values():
        for file, digest in agent.files().items():
            check_file(agent.name, directory / file, digest)
            listed.add(file)
    extra = sorted(p.name for p in directory.iterdir() if p.name not in listed)
    if extra:
        raise SchedGymError(
            f"{directory} holds files its manifest ({manifest.name}) does not list: {', '.join(extra)}; "
            "add them to it or remove them"
        )
    return agents


__all__ = ["BUNDLED_DIR", "MANIFEST", "BundledAgent", "check_bundled", "check_file", "read_manifest", "sha256_of"]

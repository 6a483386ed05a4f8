"""Clusters: an ordered tuple of nodes with (gpus, cpus, mem_gb) capacities.

Node order is stable and meaningful: placement ties and policy ties are broken towards the lower index.
"""

from __future__ import annotations

import csv
import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from schedgym._atomic import atomic_open
from schedgym._csvio import CsvRows, number_problem, parse_integer
from schedgym.errors import ConfigError, TraceError, UnknownNameError
from schedgym.limits import MAX_NODES, check_amount


def _amount(owner: str, field: str, value: object) -> float:
    """``value`` as a Python float if it is a finite number >= 0 (not a bool), else a ConfigError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{owner}: expected {field} to be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"{owner}: expected {field} >= 0 (finite), got {v!r}")
    if v < 0:
        raise ConfigError(f"{owner}: expected {field} >= 0, got {v!r}")
    return v


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine. Amounts are floats so that fractional GPUs can be modelled.

    Construction checks the fields (a :class:`~schedgym.errors.ConfigError` names node, field and value):
    ``name`` a non-empty string; ``gpus``, ``cpus`` and ``mem_gb`` finite numbers >= 0, not all 0, stored as
    Python floats (ints and numpy scalars are converted; booleans and strings are rejected).
    """

    name: str
    gpus: float
    cpus: float
    mem_gb: float
    gpu_model: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.name, str) and self.name.strip()):
            raise ConfigError(f"Expected node name to be a non-empty string, got {self.name!r}")
        if type(self.name) is not str:
            object.__setattr__(self, "name", str(self.name))
        owner = f"Node {self.name!r}"
        for field_name in ("gpus", "cpus", "mem_gb"):
            object.__setattr__(self, field_name, _amount(owner, field_name, getattr(self, field_name)))
        if not isinstance(self.gpu_model, str):
            raise ConfigError(f"{owner}: expected gpu_model to be a string, got {self.gpu_model!r}")
        if self.gpus + self.cpus + self.mem_gb <= 0:
            raise ConfigError(f"Node {self.name!r} has no resources at all")


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """An ordered set of nodes (homogeneous or not).

    ``nodes`` may be given as any sequence of :class:`NodeSpec` (stored as a tuple); there must be at least
    one and at most :data:`~schedgym.limits.MAX_NODES`, with unique names. ``name`` is a non-empty string.
    """

    nodes: tuple[NodeSpec, ...]
    name: str = "custom"

    def __post_init__(self) -> None:
        nodes = self.nodes
        if isinstance(nodes, (str, bytes, NodeSpec)) or not isinstance(nodes, (tuple, list)):
            raise ConfigError(f"Expected cluster nodes to be a tuple or list of NodeSpec, got {type(nodes).__name__}")
        if type(nodes) is not tuple:
            nodes = tuple(nodes)
            object.__setattr__(self, "nodes", nodes)
        if not (isinstance(self.name, str) and self.name.strip()):
            raise ConfigError(f"Expected cluster name to be a non-empty string, got {self.name!r}")
        if not nodes:
            raise ConfigError("Expected a cluster with at least one node, got 0 nodes")
        if len(nodes) > MAX_NODES:
            raise ConfigError(f"Expected at most {MAX_NODES:,} nodes (schedgym.limits.MAX_NODES), got {len(nodes):,}")
        for i, n in enumerate(nodes):
            if not isinstance(n, NodeSpec):
                raise ConfigError(f"Expected cluster node {i} to be a NodeSpec, got {type(n).__name__} {n!r}")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"Node names must be unique, {dup!r} appears more than once")

    @classmethod
    def homogeneous(cls, n_nodes: int, gpus: float, cpus: float, mem_gb: float, name: str = "custom") -> ClusterSpec:
        """``n_nodes`` identical nodes named ``node0``, ``node1``, ..."""
        if isinstance(n_nodes, (bool, np.bool_)) or not isinstance(n_nodes, numbers.Integral) or n_nodes <= 0:
            raise ConfigError(f"Expected n_nodes > 0 (an integer), got {n_nodes!r}")
        if n_nodes > MAX_NODES:
            raise ConfigError(f"Expected at most {MAX_NODES:,} nodes (schedgym.limits.MAX_NODES), got {n_nodes!r}")
        return cls(tuple(NodeSpec(f"node{i}", gpus, cpus, mem_gb) for i in range(int(n_nodes))), name=name)

    @property
    def capacity(self) -> np.ndarray:
        """Capacities as a float array of shape (n_nodes, 3): gpus, cpus, mem_gb."""
        return np.array([[n.gpus, n.cpus, n.mem_gb] for n in self.nodes], dtype=np.float64)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def total(self) -> np.ndarray:
        total: np.ndarray = self.capacity.sum(axis=0)
        return total


# Presets. "paper" is our reconstruction of a contended DL-development cluster (see docs/semantics.md):
# 16 nodes of 8 GPUs, 64 CPUs and 512 GB, i.e. 128 GPUs.
CLUSTER_PRESETS: dict[str, tuple[int, float, float, float]] = {
    "paper": (16, 8, 64, 512),
    "small": (4, 8, 64, 512),
    "large": (64, 8, 64, 512),
    # For the Philly trace: 64 x 8 GPUs makes its Oct-2017 load (about 550 GPUs) contended; CPUs and memory
    # match the converter's imputation (12 CPUs and 48 GB per GPU).
    "philly": (64, 8, 96, 384),
}

# Heterogeneous clusters shipped as CSV files in schedgym/data/.
BUNDLED_CLUSTERS: dict[str, str] = {"alibaba2023": "alibaba2023_nodes.csv"}
_DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class ClusterSubset:
    """A cluster made of some of the nodes of a bundled cluster, chosen by the rule its fields state (no
    randomness): of every node *shape* (GPU model, GPUs, CPUs, memory), the first ``round(count / one_in)``
    nodes of that shape in the file's order (halves round up), plus the nodes named in ``also``. The nodes keep
    the file's order."""

    source: str
    """the bundled cluster (:data:`BUNDLED_CLUSTERS`) whose nodes are taken"""
    one_in: int
    """one node in ``one_in`` of each shape is kept"""
    also: tuple[str, ...] = ()
    """nodes kept by name whatever their shape's count (say why where the subset is defined)"""

    def select(self, cluster: ClusterSpec) -> tuple[NodeSpec, ...]:
        """The kept nodes of ``cluster`` (the source cluster), in its order."""
        by_shape: dict[tuple[str, float, float, float], list[int]] = {}
        for i, n in enumerate(cluster.nodes):
            by_shape.setdefault((n.gpu_model, n.gpus, n.cpus, n.mem_gb), []).append(i)
        keep = {i for idx in by_shape.values() for i in idx[: math.floor(len(idx) / self.one_in + 0.5)]}
        names = {n.name: i for i, n in enumerate(cluster.nodes)}
        for name in self.also:
            if name not in names:
                raise ConfigError(f"Cluster {self.source!r} has no node {name!r}")
            keep.add(names[name])
        return tuple(cluster.nodes[i] for i in sorted(keep))


SUBSET_CLUSTERS: dict[str, ClusterSubset] = {
    # The Alibaba 2023 trace on a cluster small enough to queue (docs/workloads.md): as simulated, its test
    # windows need at most 17.3 to 39.8 GPUs at once, and the whole cluster has 6,212. One node in 400 of each
    # shape keeps one G2 node (8 GPUs, 96 CPUs, 384 GB) and one T4 node (2 GPUs, 104 CPUs, 512 GB);
    # openb-node-0022, the first G3 node (8 GPUs, 128 CPUs, 768 GB), is added because 5 pods (8 GPUs, 120 CPUs,
    # 625 to 720 GB) fit no other node. 18 GPUs, 328 CPUs, 1,664 GB: every pod fits.
    "alibaba2023-contended": ClusterSubset("alibaba2023", one_in=400, also=("openb-node-0022",)),
}


def cluster_names() -> list[str]:
    """Every named cluster: presets, bundled clusters and subsets of them."""
    return sorted(CLUSTER_PRESETS) + sorted(BUNDLED_CLUSTERS) + sorted(SUBSET_CLUSTERS)


def cluster_preset(name: str) -> ClusterSpec:
    """A named homogeneous cluster from :data:`CLUSTER_PRESETS`."""
    try:
        n, g, c, m = CLUSTER_PRESETS[name]
    except KeyError:
        raise UnknownNameError(
            f"Unknown cluster {name!r}; expected one of {cluster_names()} or a path to a CSV file"
        ) from None
    return ClusterSpec.homogeneous(n, g, c, m, name=name)


_CLUSTER_COLUMNS = ("name", "gpus", "cpus", "mem_gb")


def load_cluster_csv(path: str | Path) -> ClusterSpec:
    """Read a cluster from a CSV with columns ``name,gpus,cpus,mem_gb`` and optional ``count`` (the row is
    repeated ``count`` times, names suffixed ``-0``, ``-1``, ...) and ``gpu_model``.

    The header is a set (no other, empty or repeated column); amounts are finite ASCII decimal numbers from 0
    to :data:`~schedgym.limits.MAX_AMOUNT`; the nodes, ``count`` included, number at most
    :data:`~schedgym.limits.MAX_NODES` (checked before any node is built). Any problem raises
    :class:`TraceError` naming file, line, column and value."""
    path = str(path)
    rows = CsvRows(path, "cluster file", required=_CLUSTER_COLUMNS, optional=("count", "gpu_model"))
    specs: list[tuple[int, str, int, str, dict[str, float]]] = []  # (line, name, count, model, amounts)
    total = 0
    for line, row in rows:
        values: dict[str, float] = {}
        for col in ("gpus", "cpus", "mem_gb"):
            raw = row[col]
            problem = number_problem(raw) if raw.strip() else "missing value"
            if problem is not None:
                raise TraceError(problem, path=path, line=line, column=col, value=raw)
            v = float(raw.strip(" \t"))
            if v < 0:
                raise TraceError("expected a number >= 0", path=path, line=line, column=col, value=raw)
            problem = check_amount(v)
            if problem is not None:
                raise TraceError(problem, path=path, line=line, column=col, value=raw)
            values[col] = v
        count = 1
        raw = row.get("count", "")
        if raw.strip():
            parsed = parse_integer(raw)
            if parsed is None:
                raise TraceError("expected an integer (ASCII digits)", path=path, line=line, column="count", value=raw)
            if parsed < 1:
                raise TraceError("expected count >= 1", path=path, line=line, column="count", value=raw)
            count = parsed
        total += count
        if total > MAX_NODES:
            raise TraceError(
                f"the cluster would have more than {MAX_NODES:,} nodes (schedgym.limits.MAX_NODES)",
                path=path,
                line=line,
                column="count" if count > 1 else None,
                value=raw if count > 1 else None,
            )
        name = row["name"].strip()
        if not name:
            raise TraceError("empty node name", path=path, line=line, column="name", value=row["name"])
        specs.append((line, name, count, row.get("gpu_model", "").strip(), values))
    nodes: list[NodeSpec] = []
    for line, name, count, model, values in specs:
        try:
            for i in range(count):
                nodes.append(NodeSpec(name if count == 1 else f"{name}-{i}", gpu_model=model, **values))
        except ConfigError as exc:
            raise TraceError(str(exc), path=path, line=line) from None
    try:
        return ClusterSpec(tuple(nodes), name=Path(path).stem)
    except ConfigError as exc:
        raise TraceError(str(exc), path=path) from None


def save_cluster_csv(path: str | Path, cluster: ClusterSpec) -> None:
    """Write ``cluster`` as a CSV that :func:`load_cluster_csv` reads back (one row per node), atomically:
    on any failure nothing is left at ``path``."""
    with atomic_open(path, newline="") as fh:
        write_cluster_csv(fh, cluster)


def write_cluster_csv(fh: IO[str], cluster: ClusterSpec) -> None:
    """Write ``cluster`` in the cluster CSV format to an open text file (``newline=""``)."""
    w = csv.writer(fh)
    w.writerow(["name", "gpus", "cpus", "mem_gb", "gpu_model"])
    for n in cluster.nodes:
        w.writerow([n.name, repr(n.gpus), repr(n.cpus), repr(n.mem_gb), n.gpu_model])


def cluster_argument(name: str, value: object) -> str:
    """``value``, the cluster argument ``name`` (``cluster``...), as a string: a name or a path given as a
    string or an ``os.PathLike`` (``pathlib.Path``). Anything else (an int, bytes, a list, an empty string)
    raises a :class:`ConfigError` naming its type and value."""
    text = value
    if isinstance(value, os.PathLike):
        try:
            text = os.fspath(value)
        except TypeError:  # its __fspath__ gives neither str nor bytes
            text = None
    if isinstance(text, str) and text.strip():
        return text
    raise ConfigError(f"Expected {name} to be a preset name or a path, got {type(value).__name__} {value!r}")


def _is_file(path: str) -> bool:
    """Whether ``path`` names an existing file system entry; False for what cannot be a path at all (a name
    too long for the file system, a NUL character)."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def cluster_file(name_or_path: str | os.PathLike[str]) -> str | None:
    """The file :func:`resolve_cluster` reads for ``name_or_path`` when it is a path to a cluster CSV; None for
    a name (a preset, bundled or subset cluster, even when a file of that name exists): a command checks its
    outputs against it."""
    text = os.fspath(name_or_path)
    if text in CLUSTER_PRESETS or text in BUNDLED_CLUSTERS or text in SUBSET_CLUSTERS:
        return None
    return text if text.endswith(".csv") or _is_file(text) else None


def resolve_cluster(name_or_path: str | os.PathLike[str]) -> ClusterSpec:
    """A preset name, a bundled cluster name, the name of a subset of one (:data:`SUBSET_CLUSTERS`), or a path
    to a cluster CSV (a string or a ``pathlib.Path``); anything else raises :class:`ConfigError`."""
    name_or_path = cluster_argument("cluster", name_or_path)
    if name_or_path in CLUSTER_PRESETS:
        return cluster_preset(name_or_path)
    if name_or_path in BUNDLED_CLUSTERS:
        spec = load_cluster_csv(_DATA_DIR / BUNDLED_CLUSTERS[name_or_path])
        return ClusterSpec(spec.nodes, name=name_or_path)
    if name_or_path in SUBSET_CLUSTERS:
        subset = SUBSET_CLUSTERS[name_or_path]
        return ClusterSpec(subset.select(resolve_cluster(subset.source)), name=name_or_path)
    if name_or_path.endswith(".csv") or _is_file(name_or_path):
        return load_cluster_csv(name_or_path)
    return cluster_preset(name_or_path)  # raises with the list of names

"""Clusters: an ordered tuple of nodes with (gpus, cpus, mem_gb) capacities.

Node order is stable and meaningful: placement ties and policy ties are broken towards the lower index.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedgym._csvio import read_text
from schedgym.errors import ConfigError, TraceError, UnknownNameError


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine. Amounts are floats so that fractional GPUs can be modelled."""

    name: str
    gpus: float
    cpus: float
    mem_gb: float
    gpu_model: str = ""

    def __post_init__(self) -> None:
        for field_name in ("gpus", "cpus", "mem_gb"):
            value = getattr(self, field_name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"Expected node {self.name!r} {field_name} >= 0, got {value!r}")
        if self.gpus + self.cpus + self.mem_gb <= 0:
            raise ConfigError(f"Node {self.name!r} has no resources at all")


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """An ordered set of nodes (homogeneous or not)."""

    nodes: tuple[NodeSpec, ...]
    name: str = "custom"

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError("Expected a cluster with at least one node, got 0 nodes")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"Node names must be unique, {dup!r} appears more than once")

    @classmethod
    def homogeneous(cls, n_nodes: int, gpus: float, cpus: float, mem_gb: float, name: str = "custom") -> ClusterSpec:
        """``n_nodes`` identical nodes named ``node0``, ``node1``, ..."""
        if not isinstance(n_nodes, int) or n_nodes <= 0:
            raise ConfigError(f"Expected n_nodes > 0, got {n_nodes!r}")
        return cls(tuple(NodeSpec(f"node{i}", gpus, cpus, mem_gb) for i in range(n_nodes)), name=name)

    @property
    def capacity(self) -> np.ndarray:
        """Capacities as a float array of shape (n_nodes, 3): gpus, cpus, mem_gb."""
        return np.array([[n.gpus, n.cpus, n.mem_gb] for n in self.nodes], dtype=np.float64)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def total(self) -> np.ndarray:
        return self.capacity.sum(axis=0)


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


def cluster_preset(name: str) -> ClusterSpec:
    """A named homogeneous cluster from :data:`CLUSTER_PRESETS`."""
    try:
        n, g, c, m = CLUSTER_PRESETS[name]
    except KeyError:
        raise UnknownNameError(
            f"Unknown cluster {name!r}; expected one of {sorted(CLUSTER_PRESETS) + sorted(BUNDLED_CLUSTERS)} "
            "or a path to a CSV file"
        ) from None
    return ClusterSpec.homogeneous(n, g, c, m, name=name)


_CLUSTER_COLUMNS = ("name", "gpus", "cpus", "mem_gb")


def load_cluster_csv(path: str | Path) -> ClusterSpec:
    """Read a cluster from a CSV with columns ``name,gpus,cpus,mem_gb`` and optional ``count`` (the row is
    repeated ``count`` times, names suffixed ``-0``, ``-1``, ...) and ``gpu_model``."""
    path = str(path)
    fh = io.StringIO(read_text(path, "cluster file"), newline="")
    nodes: list[NodeSpec] = []
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in _CLUSTER_COLUMNS:
            if col not in header:
                raise TraceError(f"missing required column '{col}' (header is {header})", path=path, line=1)
        for row in reader:
            line = reader.line_num
            values: dict[str, float] = {}
            for col in ("gpus", "cpus", "mem_gb"):
                raw = row.get(col)
                try:
                    v = float(raw)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    raise TraceError("expected a number", path=path, line=line, column=col, value=raw) from None
                if not math.isfinite(v) or v < 0:
                    raise TraceError("expected a finite number >= 0", path=path, line=line, column=col, value=raw)
                values[col] = v
            count = 1
            if row.get("count") not in (None, ""):
                raw = row["count"]
                try:
                    count = int(raw)
                except ValueError:
                    raise TraceError("expected an integer", path=path, line=line, column="count", value=raw) from None
                if count < 1:
                    raise TraceError("expected count >= 1", path=path, line=line, column="count", value=raw)
            name = (row.get("name") or "").strip()
            if not name:
                raise TraceError("empty node name", path=path, line=line, column="name", value=row.get("name"))
            model = (row.get("gpu_model") or "").strip()
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
    """Write ``cluster`` as a CSV that :func:`load_cluster_csv` reads back (one row per node)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "gpus", "cpus", "mem_gb", "gpu_model"])
        for n in cluster.nodes:
            w.writerow([n.name, repr(n.gpus), repr(n.cpus), repr(n.mem_gb), n.gpu_model])


def resolve_cluster(name_or_path: str) -> ClusterSpec:
    """A preset name, a bundled cluster name, or a path to a cluster CSV."""
    if name_or_path in CLUSTER_PRESETS:
        return cluster_preset(name_or_path)
    if name_or_path in BUNDLED_CLUSTERS:
        spec = load_cluster_csv(_DATA_DIR / BUNDLED_CLUSTERS[name_or_path])
        return ClusterSpec(spec.nodes, name=name_or_path)
    if name_or_path.endswith(".csv") or Path(name_or_path).exists():
        return load_cluster_csv(name_or_path)
    return cluster_preset(name_or_path)  # raises with the list of names

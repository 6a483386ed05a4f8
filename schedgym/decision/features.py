"""The observation schema, declared once.

An observation is three groups of features: the waiting TE job and the attempt in progress
(:data:`JOB_FEATURES`), the cluster (:data:`CLUSTER_FEATURES`), and one row per candidate victim
(:data:`CANDIDATE_FEATURES`, ``max_candidates`` rows, zero-padded). These tuples are the only place the
layout is written: the observation builder fills values by name in this order, the environment's ``Box``
takes its size from :func:`observation_size`, and the documentation table is :func:`observation_table`
(the environment's docstring and ``docs/observation.md`` are generated from it; a test keeps the file in
step). Each feature's normaliser is its ``scale``, written only here: both engines' protocols read it.

Every value lies in [0, 1]. Resources are divided by the largest node's capacity (per resource), cluster
totals by the cluster's total; unbounded times and counts are squashed with ``x / (x + scale)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Feature:
    """One observation feature: its name (unique within its group), what it means, and its scale.

    ``scale`` is the one place a feature's normaliser is written: the squash scale ``x / (x + scale)`` of an
    unbounded time or count, or the divisor of a capped ratio (``running_be``). Both engines read it from
    here (:func:`feature_scales`, handed to the native decision core at its construction), and the meaning
    shows it through its ``{scale}`` placeholder. None for features normalised by the cluster's capacity
    or not at all."""

    name: str
    meaning: str
    scale: float | None = None

    def __post_init__(self) -> None:
        if (self.scale is None) == ("{scale}" in self.meaning):
            raise ValueError(f"Feature {self.name!r}: a scale and a '{{scale}}' in its meaning go together")
        if self.scale is not None and not self.scale > 0:
            raise ValueError(f"Feature {self.name!r}: expected a scale > 0, got {self.scale!r}")

    def describe(self) -> str:
        """The meaning with the scale written in."""
        return self.meaning if self.scale is None else self.meaning.replace("{scale}", f"{self.scale:g}")


JOB_FEATURES: tuple[Feature, ...] = (
    Feature("gpus", "the waiting TE job's per-node GPU demand"),
    Feature("cpus", "its per-node CPU demand"),
    Feature("mem_gb", "its per-node memory demand"),
    Feature("gang", "its gang size / number of nodes in the cluster"),
    Feature("wait", "seconds since its submission, squashed (scale {scale} s)", 600.0),
    Feature("duration_estimate", "its duration, estimated, squashed (scale {scale} s)", 600.0),
    Feature("victims_chosen", "victims chosen so far in this attempt / max_candidates, at most 1"),
    Feature("continuing", "1 if this decision continues an attempt (a victim was chosen already)"),
    Feature("missing_gpus", "GPUs the target node still lacks (0 before a target is chosen)"),
    Feature("missing_cpus", "CPUs the target node still lacks"),
    Feature("missing_mem_gb", "memory the target node still lacks"),
)
CLUSTER_FEATURES: tuple[Feature, ...] = (
    Feature("unused_gpus", "GPUs no running or grace-period job occupies, fraction of the cluster's"),
    Feature("unused_cpus", "the same for CPUs"),
    Feature("unused_mem_gb", "the same for memory"),
    Feature("reserved_gpus", "unused GPUs set aside for reserved TE jobs, fraction of the cluster's"),
    Feature("reserved_cpus", "the same for CPUs"),
    Feature("reserved_mem_gb", "the same for memory"),
    Feature("queued_te", "TE jobs waiting, reserved ones included, squashed (scale {scale})", 10.0),
    Feature("queued_be", "BE jobs waiting, squashed (scale {scale})", 100.0),
    Feature("running_be", "preemptible BE jobs running / ({scale} x nodes), at most 1", 8.0),
)
CANDIDATE_FEATURES: tuple[Feature, ...] = (
    Feature("valid", "1 for a real candidate row, 0 for padding"),
    Feature("gpus", "the candidate's per-node GPU demand"),
    Feature("cpus", "its per-node CPU demand"),
    Feature("mem_gb", "its per-node memory demand"),
    Feature("node_room_gpus", "its node's room for the TE job in GPUs, counting victims already chosen"),
    Feature("node_room_cpus", "the same for CPUs"),
    Feature("node_room_mem_gb", "the same for memory"),
    Feature("fits_alone", "1 if preempting it (with those already chosen) lets the TE job fit on its node"),
    Feature("grace_period", "its grace period, squashed (scale {scale} s)", 60.0),
    Feature("elapsed", "seconds since it last started, squashed (scale {scale} s)", 3600.0),
    Feature("preemptions", "its preemptions so far / the cap P"),
    Feature("remaining_estimate", "its remaining work, estimated, squashed (scale {scale} s)", 3600.0),
    Feature("is_gang", "1 if it runs on several nodes"),
)

N_HEAD = len(JOB_FEATURES) + len(CLUSTER_FEATURES)
"""Features before the first candidate row."""


def observation_size(max_candidates: int) -> int:
    """Length of the flat observation vector (from the tuples as they stand)."""
    return len(JOB_FEATURES) + len(CLUSTER_FEATURES) + len(CANDIDATE_FEATURES) * max_candidates


@dataclass(frozen=True)
class Layout:
    """The declaration as the encoders use it: names and scales per group (``head``: :data:`JOB_FEATURES`
    then :data:`CLUSTER_FEATURES`; ``row``: :data:`CANDIDATE_FEATURES`), in observation order, a scale 0.0
    where a feature has none."""

    head_names: tuple[str, ...]
    row_names: tuple[str, ...]
    head_scale: dict[str, float]
    row_scale: dict[str, float]
    head_scale_array: np.ndarray  # float64, read-only: what the native decision core is handed
    row_scale_array: np.ndarray


_layout_cache: tuple[tuple[tuple[Feature, ...], ...], Layout] | None = None


def layout() -> Layout:
    """The current declaration's :class:`Layout`, built once per declaration (every reset asks for it)."""
    global _layout_cache
    key = (JOB_FEATURES, CLUSTER_FEATURES, CANDIDATE_FEATURES)
    cached = _layout_cache
    if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
        return cached[1]
    head, row = (*JOB_FEATURES, *CLUSTER_FEATURES), CANDIDATE_FEATURES
    arrays = [np.array([f.scale or 0.0 for f in group], dtype=np.float64) for group in (head, row)]
    for a in arrays:
        a.setflags(write=False)
    built = Layout(
        head_names=tuple(f.name for f in head),
        row_names=tuple(f.name for f in row),
        head_scale={f.name: f.scale or 0.0 for f in head},
        row_scale={f.name: f.scale or 0.0 for f in row},
        head_scale_array=arrays[0],
        row_scale_array=arrays[1],
    )
    _layout_cache = (key, built)
    return built


def feature_scales() -> dict[str, tuple[float, ...]]:
    """Every feature's scale, by group (``"head"``: :data:`JOB_FEATURES` then :data:`CLUSTER_FEATURES`;
    ``"row"``: :data:`CANDIDATE_FEATURES`), in observation order, 0.0 where a feature has none: what the
    decision encoder and the native decision core normalise with."""
    lay = layout()
    return {"head": tuple(lay.head_scale_array.tolist()), "row": tuple(lay.row_scale_array.tolist())}


def squash(x: float, scale: float) -> float:
    """Map [0, inf) onto [0, 1): ``x / (x + scale)``. Keeps unbounded times finite and ordered."""
    return x / (x + scale) if x > 0 else 0.0


def observation_table() -> str:
    """The layout as a Markdown table (index, group, feature, meaning); ``i`` numbers candidate rows."""
    lines = ["| index | group | feature | meaning |", "|---|---|---|---|"]
    i = 0
    for group, features in (("job", JOB_FEATURES), ("cluster", CLUSTER_FEATURES)):
        for f in features:
            lines.append(f"| {i} | {group} | `{f.name}` | {f.describe()} |")
            i += 1
    width = len(CANDIDATE_FEATURES)
    for j, f in enumerate(CANDIDATE_FEATURES):
        lines.append(f"| {N_HEAD} + {width} i + {j} | candidate i | `{f.name}` | {f.describe()} |")
    return "\n".join(lines)


def observation_doc() -> str:
    """The contents of ``docs/observation.md`` (regenerate with ``python -m schedgym.decision.features``)."""
    return (
        "# The observation\n\n"
        "Generated from `schedgym/decision/features.py` by `python -m schedgym.decision.features > "
        "docs/observation.md`; a test keeps it in step.\n\n"
        f"A flat `float32` vector of `{N_HEAD} + {len(CANDIDATE_FEATURES)} * max_candidates` values in [0, 1]: "
        "the waiting TE job, the cluster, then one row per candidate victim (zero rows pad the rest). "
        "Resources are divided by the largest node's capacity (cluster totals by the cluster's total); "
        "unbounded times and counts are squashed with `x / (x + scale)`. Duration and remaining-work "
        "estimates are the true values times a per-job lognormal error with sigma `estimate_noise` "
        "(default 0.3).\n\n" + observation_table() + "\n"
    )


if __name__ == "__main__":
    print(observation_doc(), end="")


def names(features: tuple[Feature, ...]) -> tuple[str, ...]:
    """The names of a group, in observation order."""
    return tuple(f.name for f in features)

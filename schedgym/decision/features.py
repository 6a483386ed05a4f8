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


def feature_scales() -> dict[str, tuple[float, ...]]:
    """Every feature's scale, by group (``"head"``: :data:`JOB_FEATURES` then :data:`CLUSTER_FEATURES`;
    ``"row"``: :data:`CANDIDATE_FEATURES`), in observation order, 0.0 where a feature has none: what the
    decision encoder and the native decision core normalise with."""
    return {
        "head": tuple(f.scale or 0.0 for f in (*JOB_FEATURES, *CLUSTER_FEATURES)),
        "row": tuple(f.scale or 0.0 for f in CANDIDATE_FEATURES),
    }


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

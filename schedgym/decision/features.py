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
    """The contents of ``docs/observation.md`` (regenerate with ``python -m schedgym.decision.features``):
    version 1, then version 2 (:func:`observation_doc_v2`)."""
    return (
        "# The observation\n\n"
        "Generated from `schedgym/decision/features.py` by `python -m schedgym.decision.features > "
        "docs/observation.md`; a test keeps it in step.\n\n"
        "## Version 1 (`observation_version=1`, the default of the victim-by-victim ids)\n\n"
        f"A flat `float32` vector of `{N_HEAD} + {len(CANDIDATE_FEATURES)} * max_candidates` values in [0, 1]: "
        "the waiting TE job, the cluster, then one row per candidate victim (zero rows pad the rest). "
        "Resources are divided by the largest node's capacity (cluster totals by the cluster's total); "
        "unbounded times and counts are squashed with `x / (x + scale)`. Duration and remaining-work "
        "estimates are the true values times a per-job lognormal error with sigma `estimate_noise` "
        "(default 0.3).\n\n" + observation_table() + "\n" + observation_doc_v2()
    )


def names(features: tuple[Feature, ...]) -> tuple[str, ...]:
    """The names of a group, in observation order."""
    return tuple(f.name for f in features)


# ---------------------------------------------------------------------------------------------------- version 2
# The scale-free, queue-aware observation (``observation_version=2``, both action modes). No time is divided by a
# fixed number of seconds: every time is a ratio to another time of the same workload (the waiting TE job's
# estimate, the running median of the estimates of the jobs of a class submitted so far), squashed with
# x / (x + 1); counts of jobs are per node. Multiplying every time of a workload by k > 0 leaves it unchanged,
# and permuting the nodes permutes the rows only (tests/test_scale_free.py).

JOB_FEATURES_V2: tuple[Feature, ...] = (
    Feature("gpus", "the waiting TE job's per-node GPU demand / the largest node's GPUs"),
    Feature("cpus", "its per-node CPU demand, the same way"),
    Feature("mem_gb", "its per-node memory demand, the same way"),
    Feature("gang", "its gang size / number of nodes in the cluster"),
    Feature("wait", "its wait so far / its own estimated duration, squashed x / (x + 1)"),
    Feature("estimate", "its estimated duration / the median TE estimate so far, squashed x / (x + 1)"),
    Feature("victims_chosen", "victim mode: victims chosen in this attempt / max_candidates, at most 1 (plan mode: 0)"),
    Feature("continuing", "victim mode: 1 if a victim was chosen already in this attempt (plan mode: 0)"),
    Feature("missing_gpus", "victim mode: GPUs the target node still lacks / the largest node's (plan mode: 0)"),
    Feature("missing_cpus", "the same for CPUs"),
    Feature("missing_mem_gb", "the same for memory"),
)
CLUSTER_FEATURES_V2: tuple[Feature, ...] = (
    *CLUSTER_FEATURES[:6],  # unused and reserved resources: fractions of the cluster's, scale-free already
    Feature("queued_te", "TE jobs waiting (reserved ones included) per node, squashed x / (x + 1)"),
    Feature("queued_be", "BE jobs waiting per node, squashed x / (x + 1)"),
    Feature("running_be", "preemptible BE jobs running per node, squashed x / (x + 1)"),
    Feature("te_scale", "the median TE estimate / (it + the median BE estimate): the classes' time scales"),
)
QUEUE_FEATURES: tuple[Feature, ...] = (
    Feature("valid", "1 for a queued job, 0 for padding"),
    Feature("is_te", "1 for a TE job, 0 for a BE job"),
    Feature("gang", "its gang size / number of nodes"),
    Feature("gpus", "its per-node GPU demand / the largest node's GPUs"),
    Feature("cpus", "its per-node CPU demand, the same way"),
    Feature("mem_gb", "its per-node memory demand, the same way"),
    Feature("wait", "its wait so far / the median estimate of its class, squashed x / (x + 1)"),
    Feature("estimate", "its estimated duration / the median estimate of its class, squashed x / (x + 1)"),
    Feature("slowdown", "its wait so far / its own estimated duration, squashed x / (x + 1)"),
    Feature("preemptions", "its preemptions so far / the cap P, at most 1"),
    Feature("fits_now", "1 if it would fit on the unused, unreserved resources now"),
)
CANDIDATE_FEATURES_V2: tuple[Feature, ...] = (
    Feature("valid", "1 for a real candidate row, 0 for padding"),
    Feature("gpus", "the candidate's per-node GPU demand / the largest node's GPUs"),
    Feature("cpus", "its per-node CPU demand, the same way"),
    Feature("mem_gb", "its per-node memory demand, the same way"),
    Feature("node_room_gpus", "its node's room for the TE job in GPUs, counting victims already chosen"),
    Feature("node_room_cpus", "the same for CPUs"),
    Feature("node_room_mem_gb", "the same for memory"),
    Feature("fits_alone", "1 if preempting it (with those already chosen) lets the TE job fit on its node"),
    Feature("grace_period", "its grace period / the TE job's estimated duration, squashed x / (x + 1)"),
    Feature("elapsed", "time since it last started / the median BE estimate, squashed x / (x + 1)"),
    Feature("preemptions", "its preemptions so far / the cap P"),
    Feature("remaining", "its remaining work, estimated, / the median BE estimate, squashed x / (x + 1)"),
    Feature("remaining_vs_te", "its remaining work, estimated, / the TE job's estimate, squashed x / (x + 1)"),
    Feature("is_gang", "1 if it runs on several nodes"),
)
PLAN_RULES: tuple[str, ...] = ("fitgpp", "k8s")
"""The rules whose plans the plan-level action mode offers (:mod:`schedgym.decision.plan_mode`), in order."""
PLAN_FEATURES: tuple[Feature, ...] = (
    Feature("valid", "1 for a real option, 0 for padding"),
    Feature("wait", "1 for the wait option (preempt nothing; the TE job waits)"),
    *(Feature(f"by_{rule}", f"1 if the rule {rule} answers the request with this plan") for rule in PLAN_RULES),
    Feature("per_node", "1 if it is the fewest victims that make room on one node"),
    Feature("victims", "the number of victims, squashed x / (x + 1)"),
    Feature("gang_victims", "victims running on several nodes / victims"),
    Feature("nodes_touched", "distinct nodes the victims run on / number of nodes"),
    Feature("freed_gpus", "GPUs the victims free (all their nodes) / the cluster's"),
    Feature("freed_cpus", "the same for CPUs"),
    Feature("freed_mem_gb", "the same for memory"),
    Feature("surplus_gpus", "GPUs left on the TE job's nodes once it is placed / (gang x the largest node's)"),
    Feature(
        "start_delay",
        "the longest grace period of the victims (when the TE job starts) / its estimate, squashed x / (x + 1)",
    ),
    Feature(
        "remaining", "the victims' remaining work, estimated, summed / the median BE estimate, squashed x / (x + 1)"
    ),
    Feature("remaining_vs_te", "the same / the TE job's estimate, squashed x / (x + 1)"),
    Feature(
        "elapsed", "the victims' time since they last started, summed / the median BE estimate, squashed x / (x + 1)"
    ),
    Feature("preemptions", "the victims' largest preemption count so far / the cap P"),
    Feature("last_chance", "victims this preemption brings to the cap P (no longer preemptible) / victims"),
    Feature(
        "starts_te",
        "queue rows' TE jobs that fit once the plan is done (victims gone, the TE job placed; "
        "greedily in queue order), squashed x / (x + 1)",
    ),
    Feature("starts_be", "the same for the queue rows' BE jobs"),
    Feature(
        "unused_gpus_after",
        "unused, unreserved GPUs once the plan is done and those queue rows' jobs have started / the cluster's",
    ),
    Feature(
        "fragmentation_after",
        "1 - the largest node's unused GPUs / all unused GPUs, at the same point (0 when none is unused)",
    ),
)

N_HEAD_V2 = len(JOB_FEATURES_V2) + len(CLUSTER_FEATURES_V2)
"""Features of version 2 before the queue rows."""


@dataclass(frozen=True)
class Schema:
    """One observation layout: a head (job and cluster features), ``queue_rows`` rows of :data:`QUEUE_FEATURES`
    per job class (TE rows, then BE rows; version 2 only), then one row per option of the action (candidate
    victims in the victim mode, plans in the plan mode). :meth:`size` is the flat length."""

    version: int
    mode: str  # "victim" or "plan"
    head: tuple[Feature, ...]
    queue: tuple[Feature, ...]
    row: tuple[Feature, ...]

    def size(self, n_rows: int, queue_rows: int) -> int:
        """Length of the flat observation with ``n_rows`` option rows and ``queue_rows`` queue rows per class."""
        return len(self.head) + 2 * queue_rows * len(self.queue) + n_rows * len(self.row)

    def table(self) -> str:
        """The layout as a Markdown table (index, group, feature, meaning); ``q`` numbers queue rows, ``i``
        option rows, ``Q`` is ``queue_rows``."""
        lines = ["| index | group | feature | meaning |", "|---|---|---|---|"]
        n_job = len(JOB_FEATURES_V2 if self.version == 2 else JOB_FEATURES)
        for i, f in enumerate(self.head):
            lines.append(f"| {i} | {'job' if i < n_job else 'cluster'} | `{f.name}` | {f.describe()} |")
        h, qw, rw = len(self.head), len(self.queue), len(self.row)
        for j, f in enumerate(self.queue):
            lines.append(f"| {h} + {qw} q + {j} | queue q | `{f.name}` | {f.describe()} |")
        start = f"{h} + {2 * qw} Q" if self.queue else f"{h}"
        label = "candidate i" if self.mode == "victim" else "plan i"
        for j, f in enumerate(self.row):
            lines.append(f"| {start} + {rw} i + {j} | {label} | `{f.name}` | {f.describe()} |")
        return "\n".join(lines)


def schema(version: int, mode: str) -> Schema:
    """The layout of observation ``version`` (1 or 2) in action ``mode`` (``"victim"`` or ``"plan"``; the plan
    mode has version 2 only)."""
    if version == 1 and mode == "victim":
        return Schema(1, mode, (*JOB_FEATURES, *CLUSTER_FEATURES), (), CANDIDATE_FEATURES)
    if version == 2 and mode in ("victim", "plan"):
        row = CANDIDATE_FEATURES_V2 if mode == "victim" else PLAN_FEATURES
        return Schema(2, mode, (*JOB_FEATURES_V2, *CLUSTER_FEATURES_V2), QUEUE_FEATURES, row)
    raise ValueError(f"No observation version {version!r} in action mode {mode!r}")


def observation_doc_v2() -> str:
    """The version-2 part of ``docs/observation.md``."""
    return (
        "\n## Version 2: scale-free and queue-aware (`observation_version=2`)\n\n"
        "The observation of `schedgym/PreemptionPlan-v1` (plan level), and of the victim-by-victim ids with "
        '`observation_version=2` (`gym.make("schedgym/Preemption-v1", observation_version=2)`). No time is '
        "divided by a fixed number of seconds: a time is a ratio to another time of the same "
        "workload (the waiting TE job's estimate, or the median estimated duration of the jobs of a class "
        "submitted so far), squashed with `x / (x + 1)`; job counts are per node. Multiplying every time of a "
        "workload (arrivals, durations, grace periods, restart overheads) by any k > 0 leaves every "
        "observation, mask and decision unchanged, and permuting the nodes permutes the option rows only "
        "(tested). The queue appears as rows: the `queue_rows` oldest waiting TE jobs, then the `queue_rows` "
        "oldest waiting BE jobs (default 4 each; the TE job being decided and reserved jobs are not among "
        "them), each class in queue order: queue row q is a TE job for q < queue_rows, a BE job after.\n\n"
        f"A flat `float32` vector of `{N_HEAD_V2} + {2 * len(QUEUE_FEATURES)} * queue_rows + "
        f"{len(CANDIDATE_FEATURES_V2)} * max_candidates` values (victim mode) or `{N_HEAD_V2} + "
        f"{2 * len(QUEUE_FEATURES)} * queue_rows + {len(PLAN_FEATURES)} * max_plans` values (plan mode), in [0, 1].\n\n"
        "### Victim mode\n\n" + schema(2, "victim").table() + "\n\n"
        "### Plan mode\n\n"
        "Option rows in the order of `schedgym.decision.plans.plan_options`: wait (always row 0), then the "
        f"plans of {', '.join(f'`{r}`' for r in PLAN_RULES)}, then the fewest-victim plan of each node in node "
        "order (jobs of one node only); a plan proposed by several is one row with each proposer's flag. "
        "Options beyond `max_plans` are cut from the end.\n\n" + schema(2, "plan").table() + "\n"
    )


if __name__ == "__main__":
    print(observation_doc(), end="")

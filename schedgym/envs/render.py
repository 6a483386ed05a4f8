"""Text and image views of a :class:`~schedgym.envs.PreemptionEnv` (no plotting dependency)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from schedgym.sim.job import JobClass, JobState

if TYPE_CHECKING:
    from schedgym.envs.preemption_env import PreemptionEnv

# Colours of GPU cells in the image: free, TE running, BE running, BE preempting (grace), reserved.
COLOURS = {
    "free": (235, 235, 235),
    "te": (46, 160, 67),
    "be": (52, 101, 164),
    "grace": (230, 140, 30),
    "held": (240, 200, 40),
    "candidate": (170, 60, 160),
}


def _node_cells(env: PreemptionEnv, n: int) -> list[str]:
    """One entry per GPU slot of node ``n`` (rounded), in the order running TE, BE, grace, held, free."""
    sim = env.sim
    assert sim is not None
    cap = int(round(sim.capacity[n, 0]))
    rows = {v.idx for v, _ in env.candidate_rows}
    cells: list[str] = []
    for i in sorted(sim.running_on(n)):
        job = sim.jobs[i]
        g = int(round(job.member[0]))
        if job.state == JobState.PREEMPTING:
            kind = "grace"
        elif job.spec.job_class == JobClass.TE:
            kind = "te"
        else:
            kind = "candidate" if i in rows else "be"
        cells += [kind] * g
    cells += ["held"] * int(round(sim.held[n, 0]))
    cells += ["free"] * max(0, cap - len(cells))
    return cells[:cap]


def render_ansi(env: PreemptionEnv) -> str:
    sim = env.sim
    assert sim is not None
    symbols = {"free": ".", "te": "T", "be": "B", "grace": "g", "held": "h", "candidate": "C"}
    q_te, q_be = sim.queue_lengths
    lines = [
        f"t={sim.now:.0f}s  queued TE={q_te} BE={q_be}  preemptions={sim.n_preemptions}  decisions={env.n_decisions}"
    ]
    for n in range(sim.cluster.n_nodes):
        cells = "".join(symbols[c] for c in _node_cells(env, n))
        lines.append(f"  {sim.cluster.nodes[n].name:>8} [{cells}]")
    req = env.pending_request
    if req is None:
        lines.append("  no decision pending (episode over)")
    else:
        j = req.job
        lines.append(
            f"  decision: TE {j.job_id} needs {j.gang_size} x (gpus={j.demand[0]:g}, cpus={j.demand[1]:g}, "
            f"mem_gb={j.demand[2]:g}), waiting {sim.now - j.submit_time:.0f}s; chosen "
            f"{[v.job_id for v in env.chosen_victims]}"
        )
        for i, (c, n) in enumerate(env.candidate_rows, start=1):
            lines.append(
                f"    {i:>2}: {c.job_id} on node {n} gpus={c.demand[0]:g} grace={c.grace_period:g}s "
                f"ran {sim.now - c.run_start:.0f}s"
            )
        # Plan mode: each option, who proposed it, its nodes and victims.
        names = {c.idx: c.job_id for cands in req.candidates.values() for c in cands}
        for i, option in enumerate(env.plan_options):
            victims = [names[v] for v in option.plan.victims]
            lines.append(
                f"    {i:>2}: {'+'.join(sorted(option.sources))}: nodes {list(option.plan.nodes)} victims {victims}"
            )
    lines.append("  legend: T TE, B BE, C candidate, g grace period, h reserved, . free")
    return "\n".join(lines) + "\n"


def render_rgb(env: PreemptionEnv, cell: int = 12) -> np.ndarray:
    """An image with one row of GPU cells per node (uint8, H x W x 3)."""
    sim = env.sim
    assert sim is not None
    n_nodes = sim.cluster.n_nodes
    width = max(1, int(round(sim.capacity[:, 0].max())))
    img = np.full((n_nodes * cell, width * cell, 3), 255, dtype=np.uint8)
    for n in range(n_nodes):
        for i, kind in enumerate(_node_cells(env, n)):
            y, x = n * cell, i * cell
            img[y + 1 : y + cell - 1, x + 1 : x + cell - 1] = COLOURS[kind]
    return img

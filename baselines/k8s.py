"""What Kubernetes' default preemption does among victims of equal priority.

Per node (kube-scheduler's ``selectVictimsOnNode``): remove every candidate, then reprieve them one by one,
most important first (equal priority, so the earliest-started first), keeping each one that the job can
spare. Across nodes (``pickOneNodeForPreemption`` with equal priorities and no PodDisruptionBudgets): fewest
victims, then the node whose earliest-started victim started latest, then node order.
"""

from __future__ import annotations

from baselines.base import NodeByNodePolicy, freed
from schedgym.sim.job import Job
from schedgym.sim.policy import PreemptionRequest, QueueDiscipline
from schedgym.sim.resources import Vec, covers


class K8s(NodeByNodePolicy):
    """Kubernetes-like preemption: fewest victims, ties towards the most recently started."""

    name = "k8s"
    queue = QueueDiscipline.PRIORITY

    def native_rule(self) -> tuple[str, dict[str, float | str]] | None:
        return ("k8s", {}) if type(self) is K8s else None  # a subclass may decide otherwise

    def _evaluate_node(
        self, request: PreemptionRequest, node: int, deficit: Vec, candidates: list[Job]
    ) -> tuple[tuple, list[Job]] | None:
        victims = list(candidates)
        for c in sorted(candidates, key=lambda j: (j.run_start, j.idx)):
            rest = [v for v in victims if v is not c]
            if covers(freed(rest), deficit):
                victims = rest
        earliest = min(v.run_start for v in victims)
        return (len(victims), -earliest), victims

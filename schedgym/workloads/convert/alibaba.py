"""Alibaba GPU cluster trace 2023 ("openb", Weng et al., ATC'23) -> the schedgym trace format.

Pod file columns: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
deletion_time, scheduled_time`` (times in seconds from the start of the trace). Node file columns:
``sn, cpu_milli, memory_mib, gpu, model``. The rules (each a parameter of :class:`AlibabaRules`):

- only pods that were scheduled are kept: a pod with an empty ``scheduled_time`` never ran (the trace has
  them in phase ``Pending``) and is dropped as "never scheduled". Pods that ran and then ``Failed`` are kept:
  they held their resources until deleted;
- ``submit_time`` = ``creation_time`` minus the window start (``start``, or the earliest ``creation_time``
  kept); ``duration`` = ``deletion_time - scheduled_time``. The wait between creation and scheduling in the
  real cluster is *not* part of the job: in the simulator the pod waits again, under the policy being tested;
- ``cpus = cpu_milli / 1000``; ``mem_gb = memory_mib / 1024`` (GiB, the unit the node loader uses too);
- GPUs: ``num_gpu`` whole GPUs when ``gpu_milli >= 1000``; a pod with ``num_gpu = 1`` and ``gpu_milli < 1000``
  holds a fraction ``gpu_milli / 1000`` of one shared GPU. The simulator treats a node's GPUs as one divisible
  amount, so it ignores *which* physical GPU is shared: two 0.6-GPU pods fit a 2-GPU node in the simulator,
  as in reality, but three do too (1.8 <= 2), which the real cluster could not place (0.6 + 0.6 > 1 on
  one GPU). ``round_fractional_gpus = True`` rounds every fraction up to one whole GPU instead (counted as
  changed). A pod with ``num_gpu > 1`` and ``gpu_milli < 1000`` (none in the 2023 file) is taken as
  ``num_gpu`` whole GPUs (counted as changed);
- ``nodes = 1``: the trace is per pod and a pod runs on one node;
- class: ``qos == "BE"`` is BE. The other classes (``LS`` latency-sensitive, ``Burstable``, ``Guaranteed``)
  are TE when ``duration <= te_max_duration``. Such a service running longer is not an interactive
  trial-and-error job; ``long_services_as = "BE"`` turns it into a BE job (counted as changed), ``"drop"``
  drops it (counted);
- grace period by class: ``grace_te`` for TE jobs, ``grace_be`` for BE jobs (only BE jobs are preempted, so
  ``grace_te`` is recorded in the trace but does not act in the simulator);
- the window ``[start, end)`` applies to ``creation_time``; rows outside it are dropped (counted);
- ``job_id`` = the pod ``name``.

Errors: a broken *file* raises :class:`TraceError` naming file, line, column and value (a missing column, a
row with the wrong number of fields, a non-numeric value in a numeric column). A well-formed but unusable
*row* (an empty required value, a non-positive duration, an inconsistent GPU request, an unknown ``qos``, a
duplicate name, a time < 0 or > 1e10 s, a value beyond :mod:`schedgym.limits`, ...) is dropped and counted
with its reason in the :class:`ConversionReport`, so the output always loads with the trace reader. Numbers
are ASCII decimal; the header may hold only the columns above. With a cluster
given, :func:`convert_alibaba2023` also drops (and counts) the pods that fit no single node of it.

Data notes (2023 file): ``pod_phase`` is the last phase recorded before deletion, and every pod has a
``deletion_time``; only 34 pods end exactly at the end of the trace (12,902,960 s): they were still running,
so their durations are lower bounds. Every deletion falls in the last 34 days (from 9,964,972 s): pods that
ended earlier are not in the file, and the 33 pods created before then (the first at t = 0) are long-lived
survivors, so without ``start`` the converted workload opens with a long, almost empty stretch
(``start=9964972`` skips it). ``gpu_spec`` is always empty and one pod asks for 0 MiB of memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedgym._csvio import CsvRows, number_problem
from schedgym.errors import ConfigError, TraceError
from schedgym.limits import MAX_NODES, MAX_TIME, check_amount
from schedgym.sim.cluster import ClusterSpec, NodeSpec
from schedgym.sim.job import JobClass, JobSpec
from schedgym.sim.resources import fits_on
from schedgym.workloads.convert._rules import check_nonnegative, check_times, check_window, finish, out_of_limits
from schedgym.workloads.convert.report import ConversionReport
from schedgym.workloads.trace import Workload

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos", "creation_time",
               "deletion_time", "scheduled_time")  # fmt: skip
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
QOS_CLASSES = ("LS", "BE", "Burstable", "Guaranteed")
LONG_SERVICES_AS = ("BE", "drop")


@dataclass(frozen=True)
class AlibabaRules:
    """Conversion rules for the Alibaba 2023 GPU trace (see the module docstring)."""

    start: float | None = None
    """window start, in seconds of creation_time (None: the earliest kept pod)"""
    end: float | None = None
    """window end, exclusive, in seconds of creation_time (None: no end)"""
    te_max_duration: float = 3600.0
    """non-BE pods running at most this long (s) are TE"""
    long_services_as: str = "BE"
    """what becomes of non-BE pods running longer than te_max_duration: 'BE' or 'drop'"""
    round_fractional_gpus: bool = False
    """round a fractional (shared) GPU up to one whole GPU"""
    grace_te: float = 30.0
    """grace period of TE jobs (s)"""
    grace_be: float = 30.0
    """grace period of BE jobs (s)"""

    def __post_init__(self) -> None:
        check_nonnegative(self, ("te_max_duration", "grace_te", "grace_be"))
        check_times(self, ("grace_te", "grace_be"))
        check_window(self)
        if self.long_services_as not in LONG_SERVICES_AS:
            raise ConfigError(f"Expected long_services_as in {list(LONG_SERVICES_AS)}, got {self.long_services_as!r}")
        if not isinstance(self.round_fractional_gpus, bool):
            raise ConfigError(f"Expected round_fractional_gpus to be a bool, got {self.round_fractional_gpus!r}")


POD_OPTIONAL = ("gpu_spec", "pod_phase")  # documented columns the conversion does not read
NODE_OPTIONAL: tuple[str, ...] = ()


def _number(row: dict, col: str, path: str, line: int) -> float | None:
    """The column's value; None when empty. Text that is not a finite ASCII decimal number means the file
    is broken."""
    raw = row[col]
    if raw.strip() == "":
        return None
    problem = number_problem(raw)
    if problem is not None:
        raise TraceError(problem, path=path, line=line, column=col, value=raw)
    return float(raw.strip(" \t"))


def load_alibaba_cluster(node_path: str | Path) -> ClusterSpec:
    """The cluster of the trace's node file: one node per row, ``name = sn``, ``gpus = gpu``,
    ``cpus = cpu_milli / 1000``, ``mem_gb = memory_mib / 1024``, ``gpu_model = model``.

    Any malformed row (empty or non-numeric value, negative amount, empty or duplicate ``sn``, a node with
    no resources) raises :class:`TraceError` naming file, line, column and value: a cluster is not repaired.
    """
    path = str(node_path)
    rows = CsvRows(path, "Alibaba node list", required=NODE_COLUMNS, optional=NODE_OPTIONAL, max_rows=MAX_NODES,
                   limit_name="MAX_NODES")  # fmt: skip
    nodes: list[NodeSpec] = []
    first_line: dict[str, int] = {}
    for line, row in rows:
        values = {}
        for col in ("gpu", "cpu_milli", "memory_mib"):
            v = _number(row, col, path, line)
            if v is None:
                raise TraceError("missing value", path=path, line=line, column=col, value=row[col])
            if v < 0:
                raise TraceError("expected a number >= 0", path=path, line=line, column=col, value=row[col])
            scaled = v if col == "gpu" else v / (1000 if col == "cpu_milli" else 1024)
            problem = check_amount(scaled)
            if problem is not None:
                raise TraceError(f"{problem} after conversion to {'gpus' if col == 'gpu' else col}", path=path,
                                 line=line, column=col, value=row[col])  # fmt: skip
            values[col] = v
        name = row["sn"].strip()
        if not name:
            raise TraceError("empty node name", path=path, line=line, column="sn", value=row["sn"])
        if name in first_line:
            raise TraceError(f"duplicate node name (first on line {first_line[name]})", path=path, line=line,
                             column="sn", value=name)  # fmt: skip
        first_line[name] = line
        try:
            node = NodeSpec(name, values["gpu"], values["cpu_milli"] / 1000, values["memory_mib"] / 1024,
                            gpu_model=row["model"].strip())  # fmt: skip
        except ConfigError as exc:
            raise TraceError(str(exc), path=path, line=line) from None
        nodes.append(node)
    if not nodes:
        raise TraceError("the node list holds no nodes", path=path)
    return ClusterSpec(tuple(nodes), name=Path(path).stem)


def convert_alibaba2023(
    pod_path: str | Path, rules: AlibabaRules | None = None, cluster: ClusterSpec | None = None
) -> tuple[Workload, ConversionReport]:
    """Read the pod list at ``pod_path`` and convert it by ``rules``; with ``cluster``, drop (and count)
    the pods that fit no single node of it."""
    rules = rules or AlibabaRules()
    path = str(pod_path)
    report = ConversionReport(source=path)
    rows = CsvRows(path, "Alibaba pod list", required=POD_COLUMNS, optional=POD_OPTIONAL)
    cap = cluster.capacity if cluster is not None else None
    seen: set[str] = set()
    parsed: list[tuple[float, int, JobSpec]] = []  # (creation_time, line, job with submit_time unset)
    for line, row in rows:
        report.rows += 1
        num = {col: _number(row, col, path, line) for col in POD_COLUMNS if col not in ("name", "qos")}
        name = row["name"].strip()
        if not name:
            report.drop("empty pod name", line)
            continue
        if name in seen:
            report.drop("duplicate pod name", line)
            continue
        times = _pod_times(num, rules)
        if isinstance(times, str):
            report.drop(times, line)
            continue
        created, duration = times
        cpu_milli, memory_mib = num["cpu_milli"], num["memory_mib"]
        if cpu_milli is None or memory_mib is None:
            report.drop("cpu_milli or memory_mib missing", line)
            continue
        if cpu_milli < 0 or memory_mib < 0:
            report.drop("cpu_milli or memory_mib < 0", line)
            continue
        gpus, changes = _gpus(num["num_gpu"], num["gpu_milli"], rules, report, line)
        if gpus is None:
            continue
        cpus, mem_gb = cpu_milli / 1000, memory_mib / 1024
        if gpus + cpus + mem_gb <= 0:
            report.drop("requests no resources", line)
            continue
        job_class = _job_class(row["qos"].strip(), duration, rules, changes)
        if isinstance(job_class, str):
            report.drop(job_class, line)
            continue
        limit = out_of_limits(duration, gpus, cpus, mem_gb, 1)
        if limit is not None:
            report.drop(limit, line)
            continue
        if cap is not None and not fits_on(cap, np.array([gpus, cpus, mem_gb])).any():
            report.drop("fits no node of the cluster", line)
            continue
        seen.add(name)
        for reason in changes:  # counted only now: a row that is dropped is not also counted as changed
            report.change(reason, line)
        grace = rules.grace_te if job_class == JobClass.TE else rules.grace_be
        job = JobSpec(name, 0.0, duration, gpus, cpus, mem_gb, 1, job_class, grace)
        parsed.append((created, line, job))
    return finish(parsed, report, rules.start, path, "alibaba2023")


def _pod_times(num: dict[str, float | None], rules: AlibabaRules) -> tuple[float, float] | str:
    """A pod's creation time and duration (deletion - scheduling), or why its row is dropped."""
    created = num["creation_time"]
    if created is None:
        return "creation_time missing"
    if (rules.start is not None and created < rules.start) or (rules.end is not None and created >= rules.end):
        return "outside the time window"
    scheduled, deleted = num["scheduled_time"], num["deletion_time"]
    if scheduled is None:
        return "never scheduled"
    if deleted is None:
        return "deletion_time missing"
    if not all(0 <= t <= MAX_TIME for t in (created, scheduled, deleted)):
        return f"a time < 0 or > {MAX_TIME:g} s (schedgym.limits.MAX_TIME)"
    duration = deleted - scheduled
    if duration <= 0:
        return "duration (deletion_time - scheduled_time) <= 0"
    return created, duration


def _job_class(qos: str, duration: float, rules: AlibabaRules, changes: list[str]) -> JobClass | str:
    """A pod's class by its qos and duration, or why its row is dropped; a long-running service taken as BE
    adds that to ``changes``."""
    if qos not in QOS_CLASSES:
        return "unknown qos"
    if qos == "BE":
        return JobClass.BE
    if duration <= rules.te_max_duration:
        return JobClass.TE
    if rules.long_services_as == "drop":
        return "long-running service (qos not BE, duration > te_max_duration)"
    changes.append("long-running service (qos not BE, duration > te_max_duration) taken as BE")
    return JobClass.BE


def _gpus(num_gpu: float | None, gpu_milli: float | None, rules: AlibabaRules, report: ConversionReport,
          line: int) -> tuple[float | None, list[str]]:  # fmt: skip
    """The pod's GPUs by the rules of the module docstring and the changes made to them; None after counting
    why the row is dropped."""
    if num_gpu is None or gpu_milli is None:
        report.drop("num_gpu or gpu_milli missing", line)
        return None, []
    if num_gpu < 0 or num_gpu != int(num_gpu):
        report.drop("num_gpu not a whole number >= 0", line)
        return None, []
    if not 0 <= gpu_milli <= 1000:
        report.drop("gpu_milli outside 0..1000", line)
        return None, []
    if num_gpu == 0:
        if gpu_milli > 0:
            report.drop("gpu_milli > 0 with num_gpu 0", line)
            return None, []
        return 0.0, []
    if gpu_milli == 0:
        report.drop("num_gpu > 0 with gpu_milli 0", line)
        return None, []
    if gpu_milli >= 1000:
        return float(num_gpu), []
    if num_gpu > 1:
        return float(num_gpu), ["multi-GPU pod with gpu_milli < 1000 taken as whole GPUs"]
    if rules.round_fractional_gpus:
        return 1.0, ["fractional GPU rounded up to 1"]
    return gpu_milli / 1000, []

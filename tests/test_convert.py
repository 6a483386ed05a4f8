"""Trace converters (Philly, Alibaba 2023, SWF): hand-checked conversions of small excerpts, every dropped or
changed row counted with its reason, broken files rejected with file/line/column/value, and the real files
(when present) converted with the counts the data really holds.

The policy of all three converters: a broken FILE (missing column, wrong number of fields, and for Alibaba and
SWF a non-numeric value in a numeric field) raises a TraceError; a well-formed but unusable ROW is dropped
and its reason counted. (The Philly converter predates this and drops a non-numeric duration as a row.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from schedgym.errors import ConfigError, TraceError
from schedgym.experiments import run_policy
from schedgym.registry import make_policy
from schedgym.sim import ClusterSpec, JobClass, JobSpec, NodeSpec
from schedgym.workloads import load_trace, save_trace
from schedgym.workloads.convert.alibaba import AlibabaRules, convert_alibaba2023, load_alibaba_cluster
from schedgym.workloads.convert.philly import PhillyRules, convert_philly
from schedgym.workloads.convert.report import ConversionReport
from schedgym.workloads.convert.swf import SwfRules, convert_swf

TE, BE = JobClass.TE, JobClass.BE
TRACES = Path("/work/shared/traces")


def write(tmp_path: Path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def accounted(report: ConversionReport) -> None:
    """Nothing silently dropped: every row read is either kept or dropped for a counted reason."""
    assert report.rows == report.kept + sum(report.dropped.values())
    assert all(report.examples[r] for r in list(report.dropped) + list(report.changed))


def by_id(workload) -> dict[str, JobSpec]:
    return {j.job_id: j for j in workload.jobs}


def round_trip(tmp_path: Path, workload) -> None:
    """The converted jobs are a valid schedgym trace and survive a save/load unchanged."""
    out = tmp_path / "converted.csv"
    save_trace(out, workload.jobs)
    assert load_trace(out).jobs == workload.jobs


# ---------------------------------------------------------------- Philly

PHILLY = (
    "timestamp,duration,num_gpus,gpu_time,cluster\n"
    "2017-10-01 00:01:40,600.0,1,600.0,a\n"  # line 2: submit 100 s, TE (600 <= 900, 1 GPU)
    "2017-10-01 00:00:00,3600,4,14400,a\n"  # line 3: the first job -> submit 0; BE (3600 > 900)
    "2017-10-01 00:10:00,100,9,900,b\n"  # line 4: 9 GPUs -> 2 nodes, rounded up to 10 (changed); BE (> 8 GPUs)
    "2017-10-01 00:20:00,300,16,4800,b\n"  # line 5: 16 GPUs -> 2 nodes of 8, no change; BE
    "yesterday,10,1,10,a\n"  # line 6: unparsable timestamp
    "2017-10-01 00:30:00,abc,1,0,a\n"  # line 7: non-numeric duration
    "2017-10-01 00:30:00,0,1,0,a\n"  # line 8: duration 0
    "2017-10-01 00:30:00,10,0,0,a\n"  # line 9: no GPU
)


def test_philly_hand_checked_rows(tmp_path):
    wl, report = convert_philly(write(tmp_path, PHILLY, "philly.csv"))
    assert [j.job_id for j in wl.jobs] == ["philly-3", "philly-2", "philly-4", "philly-5"]  # sorted by time
    jobs = by_id(wl)
    # 1 GPU: 12 CPUs and 48 GB imputed per GPU, grace_small; TE
    assert jobs["philly-2"] == JobSpec("philly-2", 100.0, 600.0, 1.0, 12.0, 48.0, 1, TE, 30.0)
    assert jobs["philly-3"] == JobSpec("philly-3", 0.0, 3600.0, 4.0, 48.0, 192.0, 1, BE, 60.0)
    # 9 GPUs over 2 nodes is rounded up to 5 + 5; more than 8 GPUs: BE with grace_large
    assert jobs["philly-4"] == JobSpec("philly-4", 600.0, 100.0, 10.0, 120.0, 480.0, 2, BE, 120.0)
    assert jobs["philly-5"] == JobSpec("philly-5", 1200.0, 300.0, 16.0, 192.0, 768.0, 2, BE, 120.0)
    assert (report.rows, report.kept) == (8, 4)
    assert report.changed == {"gang GPUs rounded up to an even split over its nodes": 1}
    assert report.dropped == {
        "unparsable timestamp": 1,
        "non-numeric duration or num_gpus": 1,
        "duration missing or <= 0": 1,
        "num_gpus missing or <= 0": 1,
    }
    assert report.examples["unparsable timestamp"] == [6]
    accounted(report)
    round_trip(tmp_path, wl)


def test_philly_window_and_rules(tmp_path):
    rules = PhillyRules(start="2017-10-01 00:05:00", end="2017-10-01 00:15:00", te_max_gpus=16, grace_large=99)
    wl, report = convert_philly(write(tmp_path, PHILLY, "philly.csv"), rules)
    # only line 4 is inside; its submit time counts from the window start, not from the first job
    assert wl.jobs == (JobSpec("philly-4", 300.0, 100.0, 10.0, 120.0, 480.0, 2, TE, 99.0),)
    assert report.dropped == {"outside the time window": 6, "unparsable timestamp": 1}
    accounted(report)


def test_philly_broken_file_raises(tmp_path):
    path = write(tmp_path, "timestamp,num_gpus\n2017-10-01 00:00:00,1\n", "philly.csv")
    with pytest.raises(TraceError, match="missing required column 'duration'") as exc:
        convert_philly(path)
    assert (exc.value.path, exc.value.line) == (path, 1)


@pytest.mark.skipif(not (TRACES / "philly/philly.csv").exists(), reason="real Philly trace not present")
def test_philly_real_file():
    wl, report = convert_philly(str(TRACES / "philly/philly.csv"))
    # The file is clean: every one of its 82,247 jobs converts, none is changed (every gang of more than 8
    # GPUs is a multiple of the gang size: 12, 16, 24, 32, 64, 128).
    assert (report.rows, report.kept) == (82_247, 82_247)
    assert not report.dropped and not report.changed
    assert sum(j.job_class == TE for j in wl.jobs) == 37_748
    assert max(j.gang_size for j in wl.jobs) == 16  # the 128-GPU jobs
    assert wl.jobs[0].submit_time == 0.0
    accounted(report)


# ---------------------------------------------------------------- Alibaba 2023

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
PODS = POD_HEADER + (
    "p-ls-short,4000,8192,1,1000,,LS,Succeeded,1000,1700,1100\n"  # 2: waited 100 s; runs 600 s: TE
    "p-be,2500,1536,1,470,,BE,Failed,1500,10000,1500\n"  # 3: 0.47 of a GPU; BE by qos
    "p-ls-long,8000,16384,2,1000,,LS,Running,2000,9000,2060\n"  # 4: an LS service running 6940 s: BE (changed)
    "p-cpu,1000,1024,0,0,,Burstable,Running,3000,3010,3000\n"  # 5: CPU only, 10 s: TE
    "p-pending,1000,1024,1,1000,,LS,Pending,2500,2600,\n"  # 6: never scheduled
    "p-zero,1000,1024,1,1000,,BE,Failed,4000,4000,4000\n"  # 7: deleted as it was scheduled
    "p-guar,6000,12288,1,250,,Guaranteed,Running,5000,8600,5000\n"  # 8: exactly te_max_duration: TE
    "p-odd,1000,1024,1,1000,,XX,Running,5000,5100,5000\n"  # 9: unknown qos
)


def test_alibaba_hand_checked_rows(tmp_path):
    wl, report = convert_alibaba2023(write(tmp_path, PODS, "pods.csv"), AlibabaRules(grace_te=5, grace_be=50))
    jobs = by_id(wl)
    assert [j.job_id for j in wl.jobs] == ["p-ls-short", "p-be", "p-ls-long", "p-cpu", "p-guar"]
    # submit = creation - 1000 (the earliest kept creation); duration = deletion - scheduled (the 100 s the
    # pod waited in the real cluster is not work); cpus = milli / 1000; mem_gb = MiB / 1024; one node
    assert jobs["p-ls-short"] == JobSpec("p-ls-short", 0.0, 600.0, 1.0, 4.0, 8.0, 1, TE, 5.0)
    assert jobs["p-be"] == JobSpec("p-be", 500.0, 8500.0, 0.47, 2.5, 1.5, 1, BE, 50.0)
    assert jobs["p-ls-long"] == JobSpec("p-ls-long", 1000.0, 6940.0, 2.0, 8.0, 16.0, 1, BE, 50.0)
    assert jobs["p-cpu"] == JobSpec("p-cpu", 2000.0, 10.0, 0.0, 1.0, 1.0, 1, TE, 5.0)
    assert jobs["p-guar"] == JobSpec("p-guar", 4000.0, 3600.0, 0.25, 6.0, 12.0, 1, TE, 5.0)
    assert (report.rows, report.kept) == (8, 5)
    assert report.dropped == {
        "never scheduled": 1,
        "duration (deletion_time - scheduled_time) <= 0": 1,
        "unknown qos": 1,
    }
    assert report.changed == {"long-running service (qos not BE, duration > te_max_duration) taken as BE": 1}
    assert report.examples["never scheduled"] == [6]
    assert wl.lines == (2, 3, 4, 5, 8)
    accounted(report)
    round_trip(tmp_path, wl)


def test_alibaba_rounding_long_services_and_te_limit(tmp_path):
    path = write(tmp_path, PODS, "pods.csv")
    rules = AlibabaRules(round_fractional_gpus=True, long_services_as="drop", te_max_duration=3599)
    wl, report = convert_alibaba2023(path, rules)
    jobs = by_id(wl)
    assert "p-ls-long" not in jobs
    assert jobs["p-be"].gpus == 1.0
    # 3600 s is now over the TE limit: the Guaranteed pod is a long service, dropped as well
    assert "p-guar" not in jobs
    assert report.changed == {"fractional GPU rounded up to 1": 1}
    assert report.dropped["long-running service (qos not BE, duration > te_max_duration)"] == 2
    assert report.kept == 3
    accounted(report)


def test_alibaba_window(tmp_path):
    wl, report = convert_alibaba2023(write(tmp_path, PODS, "pods.csv"), AlibabaRules(start=1200, end=3000))
    # creation in [1200, 3000): p-be (1500), p-ls-long (2000) and p-pending (2500, never scheduled);
    # submit times count from the window start
    assert [(j.job_id, j.submit_time) for j in wl.jobs] == [("p-be", 300.0), ("p-ls-long", 800.0)]
    assert report.dropped == {"outside the time window": 5, "never scheduled": 1}
    accounted(report)


GPU_ROWS = POD_HEADER + (
    "g-multi,1000,1024,2,500,,BE,Running,0,10,0\n"  # 2: 2 GPUs at 500 milli: taken as 2 whole GPUs (changed)
    "g-ghost,1000,1024,0,300,,BE,Running,0,10,0\n"  # 3: a GPU share without a GPU
    "g-none,1000,1024,1,0,,BE,Running,0,10,0\n"  # 4: one GPU, no share of it
    "g-big,1000,1024,1,1200,,BE,Running,0,10,0\n"  # 5: over 1000 milli
    "g-half,1000,1024,1.5,1000,,BE,Running,0,10,0\n"  # 6: not a whole number of GPUs
    "g-nocpu,,1024,1,1000,,BE,Running,0,10,0\n"  # 7: empty cpu_milli
    "g-nothing,0,0,0,0,,BE,Running,0,10,0\n"  # 8: no resources at all
    "g-multi,1000,1024,1,1000,,BE,Running,0,10,0\n"  # 9: the name again
    ",1000,1024,1,1000,,BE,Running,0,10,0\n"  # 10: no name
    "g-nodel,1000,1024,1,1000,,BE,Running,0,,0\n"  # 11: no deletion time
)


def test_alibaba_unusable_rows_are_dropped_and_counted(tmp_path):
    wl, report = convert_alibaba2023(write(tmp_path, GPU_ROWS, "pods.csv"))
    assert wl.jobs == (JobSpec("g-multi", 0.0, 10.0, 2.0, 1.0, 1.0, 1, BE, 30.0),)
    assert report.changed == {"multi-GPU pod with gpu_milli < 1000 taken as whole GPUs": 1}
    assert report.dropped == {
        "gpu_milli > 0 with num_gpu 0": 1,
        "num_gpu > 0 with gpu_milli 0": 1,
        "gpu_milli outside 0..1000": 1,
        "num_gpu not a whole number >= 0": 1,
        "cpu_milli or memory_mib missing": 1,
        "requests no resources": 1,
        "duplicate pod name": 1,
        "empty pod name": 1,
        "deletion_time missing": 1,
    }
    assert report.examples["duplicate pod name"] == [9]
    accounted(report)


@pytest.mark.parametrize(
    ("text", "line", "column", "value"),
    [
        (POD_HEADER.replace(",qos", ",quality") + "a,1000,1024,1,1000,,BE,Running,0,10,0\n", 1, None, None),
        (
            POD_HEADER + "a,1000,1024,1,1000,,BE,Running,0,10,0\nb,12k,1024,1,1000,,BE,Running,0,10,0\n",
            3,
            "cpu_milli",
            "12k",
        ),  # fmt: skip
        (POD_HEADER + "a,1000,1024,1,1000,,BE,Running,0,10,0,extra\n", 2, None, None),
        (POD_HEADER + "a,1000,1024,1,1000,,BE,Running,0,10\n", 2, None, None),
        (POD_HEADER + "a,1000,1024,1,1000,,BE,Running,0,inf,0\n", 2, "deletion_time", "inf"),
        (POD_HEADER + "a,1000,1024,1,1000,,BE,Pending,0,10,\n", None, None, None),  # nothing left to convert
    ],
)
def test_alibaba_broken_file_raises(tmp_path, text, line, column, value):
    path = write(tmp_path, text, "pods.csv")
    with pytest.raises(TraceError) as exc:
        convert_alibaba2023(path)
    assert (exc.value.path, exc.value.line, exc.value.column, exc.value.value) == (path, line, column, value)


NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-t4,8000,32768,1,T4\nn-v100,96000,393216,8,V100M32\nn-cpu,16000,65536,0,\n"


def test_alibaba_cluster_loader(tmp_path):
    cluster = load_alibaba_cluster(write(tmp_path, NODES, "nodes.csv"))
    assert cluster.nodes == (
        NodeSpec("n-t4", 1.0, 8.0, 32.0, "T4"),
        NodeSpec("n-v100", 8.0, 96.0, 384.0, "V100M32"),
        NodeSpec("n-cpu", 0.0, 16.0, 64.0, ""),
    )
    assert cluster.name == "nodes"


@pytest.mark.parametrize(
    ("row", "column", "value"),
    [
        ("n-x,8000,32768,two,T4", "gpu", "two"),
        ("n-x,,32768,1,T4", "cpu_milli", ""),
        ("n-x,8000,-1,1,T4", "memory_mib", "-1"),
        (",8000,32768,1,T4", "sn", ""),
        ("n-t4,8000,32768,1,T4", "sn", "n-t4"),  # duplicate of line 2
        ("n-x,0,0,0,T4", None, None),  # a node with nothing on it
        ("n-x,8000,32768,1", None, None),  # short row
    ],
)
def test_alibaba_cluster_loader_rejects_bad_rows(tmp_path, row, column, value):
    path = write(tmp_path, NODES + row + "\n", "nodes.csv")
    with pytest.raises(TraceError) as exc:
        load_alibaba_cluster(path)
    assert (exc.value.path, exc.value.line, exc.value.column, exc.value.value) == (path, 5, column, value)


def test_alibaba_cluster_loader_missing_column(tmp_path):
    path = write(tmp_path, "sn,cpu_milli,memory_mib,gpu\nn,1000,1024,1\n", "nodes.csv")
    with pytest.raises(TraceError, match="missing required column 'model'") as exc:
        load_alibaba_cluster(path)
    assert exc.value.line == 1


def test_alibaba_pods_that_fit_no_node_are_dropped(tmp_path):
    cluster = load_alibaba_cluster(write(tmp_path, NODES, "nodes.csv"))
    pods = write(
        tmp_path,
        POD_HEADER + "big,4000,8192,8,1000,,BE,Running,0,100,0\n"  # 8 GPUs: only n-v100
        "wide,100000,8192,1,1000,,BE,Running,0,100,0\n"  # 100 CPUs: more than any node
        "fat,1000,409600,0,0,,BE,Running,0,100,0\n"  # 400 GiB: more than any node
        "mixed,20000,8192,1,500,,BE,Running,0,100,0\n"  # 20 CPUs and a GPU share: only n-v100
        "heavy,16000,65537,0,0,,BE,Running,0,100,0\n",  # 64 GiB + 1 MiB and 16 CPUs: only n-v100
        "pods.csv",
    )
    whole, _ = convert_alibaba2023(pods)
    with pytest.raises(TraceError, match="larger than every node"):
        whole.check_fits(cluster)  # without the cluster, the converter keeps them all
    wl, report = convert_alibaba2023(pods, cluster=cluster)
    assert [j.job_id for j in wl.jobs] == ["big", "mixed", "heavy"]
    assert report.dropped == {"fits no node of the cluster": 2}
    wl.check_fits(cluster)
    accounted(report)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(long_services_as="TE"),
        dict(te_max_duration=-1),
        dict(grace_be=float("nan")),
        dict(start=10, end=10),
        dict(start="0"),
        dict(round_fractional_gpus=1),
    ],
)
def test_alibaba_rules_are_validated(kwargs):
    with pytest.raises(ConfigError):
        AlibabaRules(**kwargs)


ALIBABA = TRACES / "alibaba2023"


@pytest.mark.skipif(not (ALIBABA / "openb_pod_list_default.csv").exists(), reason="real Alibaba trace not present")
def test_alibaba_real_files():
    cluster = load_alibaba_cluster(str(ALIBABA / "openb_node_list_gpu_node.csv"))
    assert cluster.n_nodes == 1213 and cluster.total[0] == 6212  # as SOURCE.md says
    assert {n.gpu_model for n in cluster.nodes} == {"P100", "T4", "V100M16", "V100M32", "A10", "G2", "G3"}
    wl, report = convert_alibaba2023(str(ALIBABA / "openb_pod_list_default.csv"), cluster=cluster)
    # 8,152 pods. The 897 Pending pods are exactly those with an empty scheduled_time; no other row is unusable
    # (every scheduled pod has deletion_time > scheduled_time), and every pod fits some node of the real
    # cluster (the largest asks 120.2 CPUs and 720 GiB: a G3 node has 128 and 768).
    assert (report.rows, report.kept) == (8152, 7255)
    assert report.dropped == {"never scheduled": 897}
    # LS/Burstable/Guaranteed pods that ran more than an hour (services) become BE
    assert report.changed == {"long-running service (qos not BE, duration > te_max_duration) taken as BE": 874}
    assert sum(j.job_class == TE for j in wl.jobs) == 3424
    assert sum(0 < j.gpus < 1 for j in wl.jobs) == 2573  # fractional GPU shares
    assert sum(j.gpus == 0 for j in wl.jobs) == 1052  # of the 1,088 CPU-only pods, 36 never ran
    assert all(j.gang_size == 1 for j in wl.jobs)
    wl.check_fits(cluster)
    # 33 pods were created before 9,964,972 s; the first at t = 0, so the workload opens with a long lull
    assert wl.jobs[0].submit_time == 0.0 and wl.jobs[33].submit_time > 9.9e6
    accounted(report)


# ---------------------------------------------------------------- SWF

SWF = """\
; Version: 2.2
; MaxProcs: 64

1     100  5  600   4  -1 2097152  4  1000  -1     1 1 1 1 1 1 -1 -1
2      50  0  3600 -1  -1 -1      16  7200  1048576 1 2 1 1 1 1 -1 -1
3     200  0  60   12  -1 -1      12  -1    -1      0 3 1 1 1 1 -1 -1
4     300  0  100   9  -1 -1       9  100   -1      5 3 1 1 1 1 -1 -1
   ; an indented comment
5     400  0  0     1  -1 -1       1  100   -1      1 1 1 1 1 1 -1 -1
6     500  0  -1    1  -1 -1       1  100   -1      1 1 1 1 1 1 -1 -1
7     600  0  100  -1  -1 -1      -1  100   -1      1 1 1 1 1 1 -1 -1
8     700  0  100   1  -1 -1       1  100   -1      2 1 1 1 1 1 -1 -1
1     800  0  100   1  -1 -1       1  100   -1      1 1 1 1 1 1 -1 -1
9      -1  0  100   1  -1 -1       1  100   -1      1 1 1 1 1 1 -1 -1
"""
# line 4: job 1: 4 processors, used memory 2 GiB (2**21 KB) per processor -> 8 GB; requested 1000 s > 900: BE
# line 5: job 2: the first submit (50); allocated missing -> 16 requested (changed), 2 nodes of 8;
#         requested memory 1 GiB per processor (changed) -> 16 GB; BE
# line 6: job 3: 12 processors -> 2 nodes of 6; no memory (imputed 0, changed); requested time missing, run
#         time 60 s, but 12 processors > 8: BE
# line 7: job 4: 9 processors -> 2 nodes, rounded up to 10 (changed); 100 s and 10 processors: BE
# lines 9-14: run time 0, run time missing, no processors, a partial-execution line, job 1 again, no submit


def test_swf_hand_checked_rows(tmp_path):
    wl, report = convert_swf(write(tmp_path, SWF, "log.swf"), SwfRules(grace_te=5, grace_be=50))
    assert [j.job_id for j in wl.jobs] == ["swf-2", "swf-1", "swf-3", "swf-4"]
    jobs = by_id(wl)
    assert jobs["swf-1"] == JobSpec("swf-1", 50.0, 600.0, 0.0, 4.0, 8.0, 1, BE, 50.0)
    assert jobs["swf-2"] == JobSpec("swf-2", 0.0, 3600.0, 0.0, 16.0, 16.0, 2, BE, 50.0)
    assert jobs["swf-3"] == JobSpec("swf-3", 150.0, 60.0, 0.0, 12.0, 0.0, 2, BE, 50.0)
    assert jobs["swf-4"] == JobSpec("swf-4", 250.0, 100.0, 0.0, 10.0, 0.0, 2, BE, 50.0)
    assert (report.rows, report.kept) == (10, 4)
    assert report.changed == {
        "requested processors used (allocated processors missing)": 1,
        "requested memory used (used memory missing)": 1,
        "memory missing, mem_gb_per_processor imputed": 2,
        "gang processors rounded up to an even split over its nodes": 1,
    }
    assert report.dropped == {
        "run time 0 (under 0.5 s)": 1,
        "run time missing": 1,
        "processors missing": 1,
        "partial-execution line (status 2, 3 or 4; the summary line is kept)": 1,
        "duplicate job number": 1,
        "submit time missing": 1,
    }
    assert report.examples["duplicate job number"] == [13]
    assert wl.lines == (5, 4, 6, 7)
    accounted(report)
    round_trip(tmp_path, wl)


def test_swf_rules(tmp_path):
    path = write(tmp_path, SWF, "log.swf")
    rules = SwfRules(te_time="run", te_max_procs=16, procs_per_node=4, gpus_per_processor=0.5,
                     mem_per_processor=False, mem_gb_per_processor=2.0)  # fmt: skip
    jobs = by_id(convert_swf(path, rules)[0])
    # by run time job 1 (600 s) is TE; its used memory is now the job's total: 2 GiB
    assert jobs["swf-1"] == JobSpec("swf-1", 50.0, 600.0, 2.0, 4.0, 2.0, 1, TE, 30.0)
    # 16 processors on 4 per node: 4 nodes; 3600 s: BE
    assert jobs["swf-2"] == JobSpec("swf-2", 0.0, 3600.0, 8.0, 16.0, 1.0, 4, BE, 30.0)
    # 12 processors, 60 s: TE now; imputed memory 2 GB per processor
    assert jobs["swf-3"] == JobSpec("swf-3", 150.0, 60.0, 6.0, 12.0, 24.0, 3, TE, 30.0)
    # 9 processors on 4 per node: 3 nodes of 3, no rounding
    assert jobs["swf-4"] == JobSpec("swf-4", 250.0, 100.0, 4.5, 9.0, 18.0, 3, TE, 30.0)


def test_swf_status_filter_and_window(tmp_path):
    path = write(tmp_path, SWF, "log.swf")
    wl, report = convert_swf(path, SwfRules(keep_status=(1,)))
    # job 3 failed (0) and job 4 was cancelled (5); the status-1 summary line of job 1 on line 14 is a duplicate
    assert [j.job_id for j in wl.jobs] == ["swf-2", "swf-1"]
    assert report.dropped["status not in keep_status"] == 2
    accounted(report)
    wl, report = convert_swf(path, SwfRules(start=100, end=300, keep_status="0,1"))
    assert [(j.job_id, j.submit_time) for j in wl.jobs] == [("swf-1", 0.0), ("swf-3", 100.0)]
    assert report.dropped["outside the time window"] == 7
    accounted(report)


@pytest.mark.parametrize(
    ("bad", "column", "value"),
    [
        ("10 100 0 60 1 -1 -1 1 100 -1 1 1 1 1 1 1 -1", None, None),  # 17 fields
        ("10 100 0 60 1 -1 -1 1 100 -1 1 1 1 1 1 1 -1 -1 7", None, None),  # 19 fields
        ("10 100 0 6O 1 -1 -1 1 100 -1 1 1 1 1 1 1 -1 -1", "field 4 (run time)", "6O"),
        ("10 100 0 60 1 -1 -1 1 100 -1 1 1 1 1 1 x -1 -1", "field 16 (partition)", "x"),
        ("10.5 100 0 60 1 -1 -1 1 100 -1 1 1 1 1 1 1 -1 -1", "field 1 (job number)", "10.5"),
        ("10 nan 0 60 1 -1 -1 1 100 -1 1 1 1 1 1 1 -1 -1", "field 2 (submit time)", "nan"),
    ],
)
def test_swf_broken_line_raises(tmp_path, bad, column, value):
    path = write(tmp_path, "; header\n1 0 0 60 1 -1 -1 1 100 -1 1 1 1 1 1 1 -1 -1\n" + bad + "\n", "log.swf")
    with pytest.raises(TraceError) as exc:
        convert_swf(path)
    assert (exc.value.path, exc.value.line, exc.value.column, exc.value.value) == (path, 3, column, value)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(procs_per_node=0),
        dict(procs_per_node=2.0),
        dict(te_time="requested time"),
        dict(keep_status=()),
        dict(keep_status="one"),
        dict(keep_status=(1.0,)),
        dict(gpus_per_processor=-1),
        dict(start=5, end=1),
    ],
)
def test_swf_rules_are_validated(kwargs):
    with pytest.raises(ConfigError):
        SwfRules(**kwargs)


def test_swf_keep_status_forms():
    assert SwfRules(keep_status="5, 1").keep_status == (1, 5)  # as `--set keep_status=5,1` passes it
    assert SwfRules(keep_status=1).keep_status == (1,)
    assert SwfRules(keep_status=[1, 0]).keep_status == (0, 1)


@pytest.mark.parametrize("text", ["1_0", "\u0661", "1,,5", "1,", "0x1"])
def test_swf_keep_status_text_is_ascii_integers_every_item(text):
    # int() read '1_0' as 10 and '\u0661' (Arabic-Indic one) as 1, and an empty item was skipped: the
    # statuses kept were not those written (docs/input.md: numbers are ASCII decimal).
    with pytest.raises(ConfigError, match="keep_status"):
        SwfRules(keep_status=text)


# ---------------------------------------------------------------- the converted jobs in the simulator


def test_fractional_gpus_pack_on_one_node(tmp_path):
    nodes = load_alibaba_cluster(write(tmp_path, "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\n", "n.csv"))
    pods = write(
        tmp_path,
        POD_HEADER + "half-a,1000,1024,1,500,,BE,Running,0,100,0\n"
        "half-b,1000,1024,1,500,,BE,Running,0,100,0\n"
        "whole,1000,1024,1,1000,,BE,Running,0,100,0\n",
        "pods.csv",
    )
    wl, _ = convert_alibaba2023(pods, cluster=nodes)
    result = run_policy(make_policy("fifo"), nodes, wl)
    assert result.first_start.tolist() == [0.0, 0.0, 0.0]  # 0.5 + 0.5 + 1 = 2 GPUs: all run at once
    # control: rounded to whole GPUs the three need 3 GPUs, so one waits for the first to finish
    rounded, _ = convert_alibaba2023(pods, AlibabaRules(round_fractional_gpus=True), cluster=nodes)
    result = run_policy(make_policy("fifo"), nodes, rounded)
    assert sorted(result.first_start.tolist()) == [0.0, 0.0, 100.0]


def test_heterogeneous_cluster_jobs_land_only_on_big_enough_nodes(tmp_path):
    cluster = load_alibaba_cluster(write(tmp_path, NODES, "nodes.csv"))
    pods = write(
        tmp_path,
        POD_HEADER + "eight,4000,8192,8,1000,,BE,Running,0,100,0\n"  # only n-v100 has 8 GPUs
        "wide,40000,8192,1,1000,,BE,Running,0,50,0\n"  # 40 CPUs: only n-v100, so it waits for 'eight'
        "small,2000,4096,1,1000,,BE,Running,0,50,0\n"  # fits n-t4 (best fit)
        "cpu,12000,4096,0,0,,BE,Running,0,50,0\n",  # 12 CPUs, no GPU: n-cpu (n-t4 has 8 CPUs)
        "pods.csv",
    )
    wl, report = convert_alibaba2023(pods, cluster=cluster)
    assert report.kept == 4
    result = run_policy(make_policy("fifo"), cluster, wl)
    node_of = {result.job_ids[s.job]: cluster.nodes[s.node].name for s in result.segments}
    assert node_of == {"eight": "n-v100", "wide": "n-v100", "small": "n-t4", "cpu": "n-cpu"}
    start = dict(zip(result.job_ids, result.first_start.tolist(), strict=True))
    # a pooled 9-GPU/120-CPU cluster would start 'wide' at 0; per node it waits for 'eight' to leave n-v100
    assert start == {"eight": 0.0, "wide": 100.0, "small": 0.0, "cpu": 0.0}
    assert np.isclose(result.completion.max(), 150.0)


def test_cluster_spec_from_loader_is_heterogeneous(tmp_path):
    cluster = load_alibaba_cluster(write(tmp_path, NODES, "nodes.csv"))
    assert isinstance(cluster, ClusterSpec)
    assert cluster.capacity.tolist() == [[1.0, 8.0, 32.0], [8.0, 96.0, 384.0], [0.0, 16.0, 64.0]]

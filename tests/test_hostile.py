"""Hostile input (issue 10): every case listed under "Why" in the issue, as a regression test.

Each user error is one line ``schedgym: error: ...`` on stderr with exit status 2 (or a
:class:`SchedGymError` from the library), nothing is left behind, and nothing is silently accepted.
Nothing here depends on the simulation engine, so this module overrides the suite's per-engine fixture and
runs once; the simulations at the edges of the time range run on both engines in ``test_limits_sim.py``.
"""

from __future__ import annotations

import base64
import errno
import gzip
import io
import json
import os
import pickle
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import run_python_without_ray_settings

import schedgym._atomic
from agents import learned
from agents.learned import BUNDLED, BUNDLED_SHA256, load_agent, sha256_of, verify_bundled
from schedgym import limits
from schedgym.cli import main
from schedgym.errors import ConfigError, SchedGymError, TraceError
from schedgym.sim.cluster import load_cluster_csv
from schedgym.workloads.convert.alibaba import convert_alibaba2023, load_alibaba_cluster
from schedgym.workloads.convert.philly import convert_philly
from schedgym.workloads.convert.swf import convert_swf
from schedgym.workloads.trace import load_trace

BIG = "x" * (limits.MAX_FIELD_CHARS + 10)
TRACE_HEADER = "job_id,submit_time,duration,gpus,class"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"
GOOD_POD = "p-ok,1000,1024,1,1000,,LS,Running,100,200,100"
GOOD_SWF = "1 100 0 600 4 -1 -1 4 1000 -1 1 1 1 1 1 1 -1 -1"


@pytest.fixture(scope="module", autouse=True)
def engine():
    """Overrides conftest's per-engine fixture: nothing here simulates more than a few jobs."""
    yield "native"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def one_line_error(capsys) -> str:  # noqa: ANN001
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("schedgym: error:"), err
    assert "Traceback" not in err
    return lines[0]


def cli_error(capsys, *argv: str) -> str:  # noqa: ANN001
    """Run ``schedgym ARGV`` in-process; it must exit 2 with one error line, which is returned."""
    try:
        status = main(list(argv))
    except SystemExit as exc:  # argparse's errors
        status = exc.code
    assert status == 2
    return one_line_error(capsys)


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- a CSV field over the limit: one line with file and line, in every reader ------------------------


def test_long_field_in_cluster_file(tmp_path, capsys):
    path = write(tmp_path, "c.csv", f"name,gpus,cpus,mem_gb\n{BIG},8,64,512\n")
    line = cli_error(capsys, "compare", "--cluster", path, "--policies", "fifo", "--seeds", "1", "--jobs", "5")
    assert f"{path}:2" in line and "MAX_FIELD_CHARS" in line


def test_long_field_in_philly_row(tmp_path, capsys):
    path = write(tmp_path, "p.csv", f"{PHILLY_HEADER}\n2017-10-01 00:00:00,100,1,100,{BIG}\n")
    line = cli_error(capsys, "trace", "convert", "--format", "philly", path, str(tmp_path / "o.csv"))
    assert f"{path}:2" in line and "MAX_FIELD_CHARS" in line
    assert files_in(tmp_path) == ["p.csv"]


def test_long_field_in_alibaba_pod_header(tmp_path, capsys):
    path = write(tmp_path, "pods.csv", f"{POD_HEADER},{BIG}\n{GOOD_POD}\n")
    line = cli_error(capsys, "trace", "convert", "--format", "alibaba2023", path, str(tmp_path / "o.csv"))
    assert f"{path}:1" in line and "MAX_FIELD_CHARS" in line


def test_long_field_in_nodes_header(tmp_path, capsys):
    pods = write(tmp_path, "pods.csv", f"{POD_HEADER}\n{GOOD_POD}\n")
    nodes = write(tmp_path, "nodes.csv", f"{NODE_HEADER},{BIG}\nn,8000,32768,1,T4\n")
    line = cli_error(
        capsys, "trace", "convert", "--format", "alibaba2023", pods, str(tmp_path / "o.csv"), "--nodes", nodes
    )
    assert f"{nodes}:1" in line


def test_long_field_in_trace_and_swf(tmp_path):
    trace = write(tmp_path, "t.csv", f"{TRACE_HEADER}\n{BIG},0,10,1,TE\n")
    with pytest.raises(TraceError, match="MAX_FIELD_CHARS"):
        load_trace(trace)
    swf = write(tmp_path, "s.swf", GOOD_SWF.replace("600", "6" * 400_000) + "\n")
    with pytest.raises(TraceError):  # an SWF field is a number: this one overflows a float64
        convert_swf(swf)


# --- --seeds, --jobs: bounded, checked before any work ----------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--seeds", "99999999999999999999999"], "MAX_SEEDS"),
        (["--seeds", "1000000000000"], "MAX_SEEDS"),
        (["--jobs", "10000000000000"], "MAX_JOBS"),
        (["--seeds", "100000000", "--jobs", "10"], "MAX_SEEDS"),
        (["--seeds", "10000", "--jobs", "100000"], "MAX_TOTAL_JOBS"),
        (["--first-seed", "4294967295", "--seeds", "2"], "MAX_SEED"),
        (["--jobs", "１０"], "ASCII"),
        (["--jobs", "1_0"], "ASCII"),
        (["--restart-overhead", "1e308"], "MAX_TIME"),
    ],
)
def test_huge_or_odd_counts_are_one_line_errors(capsys, argv, needle):
    line = cli_error(capsys, "compare", "--policies", "fifo", "--no-progress", *argv)
    assert needle in line


def test_huge_seeds_with_a_trace(tmp_path, capsys):
    trace = write(tmp_path, "t.csv", f"{TRACE_HEADER}\na,0,10,1,TE\n")
    assert "MAX_SEEDS" in cli_error(capsys, "compare", "--trace", trace, "--seeds", "1000000000000")


def test_seeds_times_trace_rows_is_bounded(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "MAX_TOTAL_JOBS", 5)
    trace = write(tmp_path, "t.csv", f"{TRACE_HEADER}\na,0,10,1,TE\nb,0,10,1,BE\n")
    line = cli_error(capsys, "compare", "--trace", trace, "--seeds", "3", "--policies", "fifo", "--no-progress")
    assert "MAX_TOTAL_JOBS" in line


# --- policies and saved models ------------------------------------------------------------------------


def saved_model(tmp_path: Path, name: str, meta: object = None, zip_bytes: bytes | None = None) -> str:
    """A copy of the bundled agent as ``name.zip`` (or ``zip_bytes``) with ``meta`` as its ``.json``."""
    zip_path = tmp_path / f"{name}.zip"
    if zip_bytes is None:
        shutil.copy(BUNDLED["ppo"], zip_path)
    else:
        zip_path.write_bytes(zip_bytes)
    good = json.loads(BUNDLED["ppo"].with_suffix(".json").read_text())
    (tmp_path / f"{name}.json").write_text(json.dumps(good if meta is None else meta))
    return str(zip_path)


def bundled_meta(**changes: object) -> dict:
    meta = json.loads(BUNDLED["ppo"].with_suffix(".json").read_text())
    meta.update(changes)
    return meta


def test_policy_without_a_path(capsys):
    assert "NAME:PATH" in cli_error(capsys, "compare", "--policies", "ppo:", "--seeds", "1", "--jobs", "5")


def no_model_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("notes.txt", "no model here")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("meta", "zip_bytes", "needle"),
    [
        (None, b"not a zip at all", "not a zip file"),
        (None, no_model_zip(), "not a stable-baselines3 model"),
        (bundled_meta(algo="dqn"), None, "not a dqn model"),
        (bundled_meta(env_id="schedgym/Nope-v0"), None, "unknown environment"),
        (bundled_meta(env_id="CartPole-v1"), None, "expected a schedgym/ id"),
        ([1, 2], None, "a JSON list, not an object"),
        (bundled_meta(algo=["maskable_ppo"]), None, "expected 'algo' to be a JSON string"),
        (bundled_meta(env_kwargs={"max_candidates": 3}), None, "the model takes 228 inputs"),
        (bundled_meta(env_kwargs={"render_mode": "human"}), None, "bad env_kwargs"),
    ],
)
def test_bad_saved_model_is_one_line(tmp_path, capsys, meta, zip_bytes, needle):
    path = saved_model(tmp_path, "m", meta, zip_bytes)
    line = cli_error(capsys, "compare", "--policies", f"mine:{path}", "--seeds", "1", "--jobs", "5", "--no-progress")
    assert needle in line


def test_foreign_env_id_imports_nothing(tmp_path, capsys):
    sys.modules.pop("this", None)
    path = saved_model(tmp_path, "m", bundled_meta(env_id="this:Nope-v0"))
    line = cli_error(capsys, "compare", "--policies", f"mine:{path}", "--seeds", "1", "--jobs", "5")
    assert "expected a schedgym/ id" in line
    assert "this" not in sys.modules  # importing 'this' would print the Zen of Python


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_pickled_code_in_a_model_does_not_run(tmp_path, monkeypatch):
    """A model whose pickled ``lr_schedule`` runs ``os.system`` (issue 10) is evaluated without running it:
    the numpy reader never unpickles the model's data; and a ``policy.pth`` that holds such an object is
    refused."""
    monkeypatch.chdir(tmp_path)
    with zipfile.ZipFile(BUNDLED["ppo"]) as z:
        entries = {name: z.read(name) for name in z.namelist()}
    data = json.loads(entries["data"])
    evil = base64.b64encode(pickle.dumps(_Boom())).decode()
    data["lr_schedule"] = {":type:": "<class 'function'>", ":serialized:": evil}
    entries["data"] = json.dumps(data).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, raw in entries.items():
            z.writestr(name, raw)
    path = saved_model(tmp_path, "evil", zip_bytes=buf.getvalue())
    assert main(["compare", "--policies", f"evil:{path}", "--seeds", "1", "--jobs", "50", "--no-progress"]) == 0
    assert not (tmp_path / "pwned").exists()  # evaluated, and the pickled call never ran

    # The same object inside policy.pth (the state dict's pickle) is refused by the restricted unpickler.
    entries["data"] = json.dumps(json.loads(zipfile.ZipFile(BUNDLED["ppo"]).read("data"))).encode()
    pth = io.BytesIO()
    with zipfile.ZipFile(pth, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"x": _Boom()}))
        z.writestr("archive/byteorder", "little")
    entries["policy.pth"] = pth.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, raw in entries.items():
            z.writestr(name, raw)
    path = saved_model(tmp_path, "evil2", zip_bytes=buf.getvalue())
    with pytest.raises(SchedGymError, match="refusing policy.pth"):
        load_agent(path)
    assert not (tmp_path / "pwned").exists()


def test_bundled_agent_checksums_are_recorded_and_verified(tmp_path, monkeypatch):
    for name, digest in BUNDLED_SHA256.items():
        assert sha256_of(BUNDLED["ppo"].parent / name) == digest
    verify_bundled("ppo")
    tampered = tmp_path / "ppo_paper.zip"
    raw = bytearray(BUNDLED["ppo"].read_bytes())
    raw[-1] ^= 1  # one bit of the zip's trailer comment length: still a readable file
    tampered.write_bytes(bytes(raw))
    shutil.copy(BUNDLED["ppo"].with_suffix(".json"), tmp_path / "ppo_paper.json")
    monkeypatch.setitem(learned.BUNDLED, "ppo", tampered)
    with pytest.raises(SchedGymError, match="does not match its recorded checksum"):
        learned.bundled_agent("ppo")


def test_help_says_models_are_code(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "load only model files you trust" in out
    assert "numpy reader" in out


# --- schedgym train: arguments checked in this process, no empty run folder ---------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--env-kwargs", '{"render_mode": "human"}'], "render_mode"),
        (["--env-kwargs", '{"max_episode_steps": -3}'], "max_episode_steps"),
        (["--env-kwargs", '{"n_jobz": 3}'], "did you mean 'n_jobs'"),
        (["--env-kwargs", '{"te_weight": NaN}'], "NaN"),
        (["--env-kwargs", '{"max_candidates": 10000000000}'], "max_candidates"),
        (["--seed", "99999999999999999999"], "MAX_SEED"),
        (["--env-id", "this:Nope-v0"], "Unknown env_id"),
        (["--n-envs", "100000"], "n_envs"),
    ],
)
def test_train_arguments_are_checked_first(tmp_path, capsys, argv, needle):
    runs = tmp_path / "runs"
    line = cli_error(capsys, "train", "--run-dir", str(runs), "--total-timesteps", "64", "--no-progress", *argv)
    assert needle in line
    assert not runs.exists()


# --- trace convert: outputs checked first, written last -----------------------------------------------


@pytest.fixture
def alibaba_files(tmp_path):
    pods = write(tmp_path, "pods.csv", f"{POD_HEADER}\n{GOOD_POD}\n")
    nodes = write(tmp_path, "nodes.csv", f"{NODE_HEADER}\nn,8000,32768,1,T4\n")
    return pods, nodes


def convert_argv(pods: str, nodes: str, out: str, cluster_out: str) -> list[str]:
    return ["trace", "convert", "--format", "alibaba2023", pods, out, "--nodes", nodes, "--cluster-out", cluster_out]


def test_a_rule_given_twice_is_refused(tmp_path, capsys, alibaba_files):
    # The last --set of a field silently won: the report and the trace followed a rule the user also contradicted.
    argv = convert_argv(*alibaba_files, str(tmp_path / "o.csv"), str(tmp_path / "c.csv"))
    line = cli_error(capsys, *argv, "--set", "grace_te=10", "--set", "grace_te=20")
    assert line == "schedgym: error: --set grace_te=... given twice ('10', then '20'); give it once"
    assert files_in(tmp_path) == ["nodes.csv", "pods.csv"]


def test_cluster_out_into_a_missing_directory(tmp_path, capsys, alibaba_files):
    line = cli_error(capsys, *convert_argv(*alibaba_files, str(tmp_path / "o.csv"), str(tmp_path / "no" / "c.csv")))
    assert "does not exist" in line
    assert files_in(tmp_path) == ["nodes.csv", "pods.csv"]


def test_cluster_out_is_an_existing_directory(tmp_path, capsys, alibaba_files):
    (tmp_path / "d").mkdir()
    line = cli_error(capsys, *convert_argv(*alibaba_files, str(tmp_path / "o.csv"), str(tmp_path / "d")))
    assert "is a directory" in line
    assert files_in(tmp_path) == ["d", "nodes.csv", "pods.csv"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_cluster_out_into_a_read_only_directory(tmp_path, capsys, alibaba_files):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        line = cli_error(capsys, *convert_argv(*alibaba_files, str(tmp_path / "o.csv"), str(ro / "c.csv")))
    finally:
        ro.chmod(0o755)
    assert "not writable" in line


def test_read_only_directory_check(tmp_path, monkeypatch):
    # As root, os.access says yes to everything; the check itself is exercised by faking its answer.
    monkeypatch.setattr(schedgym._atomic.os, "access", lambda path, mode: False)
    with pytest.raises(SchedGymError, match="not writable"):
        schedgym._atomic.check_output_path("--cluster-out", str(tmp_path / "c.csv"))


def test_failed_conversion_leaves_no_cluster_out(tmp_path, capsys, alibaba_files):
    pods, nodes = alibaba_files
    Path(pods).write_text(f"{POD_HEADER}\np,1000,1024,1,1000,,LS,Pending,100,,\n")  # nothing left to convert
    line = cli_error(capsys, *convert_argv(pods, nodes, str(tmp_path / "o.csv"), str(tmp_path / "c.csv")))
    assert "no job left" in line
    assert files_in(tmp_path) == ["nodes.csv", "pods.csv"]


def test_conversion_writes_both_outputs(tmp_path, capsys, alibaba_files):
    assert main(convert_argv(*alibaba_files, str(tmp_path / "o.csv"), str(tmp_path / "c.csv"))) == 0
    assert len(load_trace(tmp_path / "o.csv").jobs) == 1
    assert load_cluster_csv(tmp_path / "c.csv").n_nodes == 1


# --- times near 1e308: rejected before anything runs, no partial JSON ---------------------------------


def test_times_near_float_max_are_rejected_and_no_json_is_left(tmp_path, capsys):
    trace = write(tmp_path, "t.csv", f"{TRACE_HEADER}\na,1e308,10,1,TE\nb,0,10,1,BE\n")
    out = tmp_path / "out.json"
    line = cli_error(capsys, "compare", "--trace", trace, "--policies", "fifo", "--json", str(out))
    assert "MAX_TIME" in line and f"{trace}:2" in line
    assert not out.exists()


def test_json_never_holds_infinity(tmp_path, monkeypatch):
    from schedgym.experiments import report

    class Result:
        def summary(self):
            return {"policies": {"fifo": {"te": {"slowdown_p95": float("inf")}, "be": {"x": float("nan")}}}}

    with pytest.raises(SchedGymError, match=r"policies\.fifo\.te\.slowdown_p95 is not a finite number"):
        report.write_json(str(tmp_path / "o.json"), Result())  # type: ignore[arg-type]
    assert files_in(tmp_path) == []


# --- converters never write what the loader rejects ---------------------------------------------------


def test_alibaba_times_of_1e308_are_dropped_and_counted(tmp_path):
    rows = [
        GOOD_POD,
        "p-big,1000,1024,1,1000,,LS,Running,1e308,1e308,1e308",
        "p-neg,1000,1024,1,1000,,LS,Running,-1e308,10,0",
    ]
    path = write(tmp_path, "pods.csv", POD_HEADER + "\n" + "\n".join(rows) + "\n")
    workload, report = convert_alibaba2023(path)
    assert [j.job_id for j in workload.jobs] == ["p-ok"]
    assert sum(report.dropped.values()) == 2
    assert any("MAX_TIME" in reason for reason in report.dropped)


def test_swf_memory_of_1e308_is_dropped_and_counted(tmp_path):
    bad = "2 100 0 600 4 -1 1e308 4 1000 -1 1 1 1 1 1 1 -1 -1"
    path = write(tmp_path, "s.swf", f"{GOOD_SWF}\n{bad}\n")
    workload, report = convert_swf(path)
    assert [j.job_id for j in workload.jobs] == ["swf-1"]
    assert any("MAX_AMOUNT" in reason for reason in report.dropped)


def test_philly_gpus_of_1e308_are_dropped_and_counted(tmp_path):
    path = write(
        tmp_path, "p.csv", f"{PHILLY_HEADER}\n2017-10-01 00:00:00,100,1,100,a\n2017-10-01 00:00:10,100,1e308,1,a\n"
    )
    workload, report = convert_philly(path)
    assert [j.job_id for j in workload.jobs] == ["philly-2"]
    assert any("MAX_AMOUNT" in reason for reason in report.dropped)


@pytest.mark.parametrize("fmt", ["philly", "alibaba2023", "swf"])
def test_converted_trace_loads(tmp_path, capsys, fmt):
    text = {
        "philly": f"{PHILLY_HEADER}\n2017-10-01 00:00:00,100,1,100,a\n2017-10-01 00:00:10,1e308,1e308,1,a\n",
        "alibaba2023": f"{POD_HEADER}\n{GOOD_POD}\np-x,1e308,1e308,1,1000,,BE,Running,100,1e10,100\n",
        "swf": f"{GOOD_SWF}\n2 1e300 0 1e300 4 -1 1e308 4 1000 -1 1 1 1 1 1 1 -1 -1\n",
    }[fmt]
    path = write(tmp_path, "in.txt", text)
    out = tmp_path / "out.csv"
    assert main(["trace", "convert", "--format", fmt, path, str(out)]) == 0
    assert len(load_trace(out).jobs) == 1


# --- headers are sets ---------------------------------------------------------------------------------


def test_duplicated_column_is_refused(tmp_path):
    path = write(tmp_path, "t.csv", f"{TRACE_HEADER},duration\na,0,10,1,TE,20\n")
    with pytest.raises(TraceError, match="column 'duration' appears twice"):
        load_trace(path)


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        (f"{TRACE_HEADER},gpu", "unknown column 'gpu' (did you mean 'gpus'?)"),
        (f"{TRACE_HEADER},comment", "unknown column 'comment';"),
        (f"{TRACE_HEADER},", "column 6 of the header has no name"),
        ("job_id,submit_time,duraton,gpus,class", "did you mean 'duration'?"),
    ],
)
def test_unknown_or_empty_trace_columns(tmp_path, header, needle):
    fields = len(header.split(","))
    path = write(tmp_path, "t.csv", f"{header}\n" + ",".join(["a", "0", "10", "1", "TE", "1"][:fields]) + "\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    assert needle in str(exc.value)
    assert exc.value.line == 1


@pytest.mark.parametrize(
    ("reader", "text"),
    [
        (load_cluster_csv, "name,gpus,cpus,mem_gb,gpus\nn,8,64,512,8\n"),
        (load_cluster_csv, "name,gpus,cpus,mem_gb,gpu_modle\nn,8,64,512,A\n"),
        (load_alibaba_cluster, f"{NODE_HEADER},gpu\nn,8000,32768,1,T4,1\n"),
        (convert_alibaba2023, f"{POD_HEADER},qos\n{GOOD_POD},LS\n"),
        (convert_philly, f"{PHILLY_HEADER},duraton\n2017-10-01 00:00:00,100,1,100,a,1\n"),
    ],
)
def test_headers_of_every_reader_are_sets(tmp_path, reader, text):
    with pytest.raises(TraceError) as exc:
        reader(write(tmp_path, "f.csv", text))
    assert exc.value.line == 1
    assert "appears twice" in str(exc.value) or "unknown column" in str(exc.value)


# --- numbers are ASCII decimal, finite, within the documented range -----------------------------------


@pytest.mark.parametrize("raw", ["١٢", "１０", "1_0", "0x10", "infinity", "-nan", "1e999", "١.٥", "²"])
def test_numbers_are_ascii_decimal_and_finite(tmp_path, raw):
    path = write(tmp_path, "t.csv", f"{TRACE_HEADER}\na,{raw},10,1,TE\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    assert (exc.value.line, exc.value.column, exc.value.value) == (2, "submit_time", raw)


@pytest.mark.parametrize(
    ("reader", "text", "column"),
    [
        (load_cluster_csv, "name,gpus,cpus,mem_gb,count\nn,８,64,512,1\n", "gpus"),
        (load_cluster_csv, "name,gpus,cpus,mem_gb,count\nn,8,64,512,１\n", "count"),
        (load_alibaba_cluster, f"{NODE_HEADER}\nn,1_000,32768,1,T4\n", "cpu_milli"),
        (convert_alibaba2023, f"{POD_HEADER}\np,1000,1024,1,1000,,LS,Running,١٠,200,100\n", "creation_time"),
    ],
)
def test_non_ascii_digits_in_other_readers(tmp_path, reader, text, column):
    with pytest.raises(TraceError) as exc:
        reader(write(tmp_path, "f.csv", text))
    assert exc.value.column == column


def test_non_ascii_digits_in_swf_and_philly(tmp_path):
    swf = write(tmp_path, "s.swf", GOOD_SWF.replace("600", "６00") + "\n")
    with pytest.raises(TraceError, match="ASCII"):
        convert_swf(swf)
    philly = write(
        tmp_path, "p.csv", f"{PHILLY_HEADER}\n2017-10-01 00:00:00,100,1,100,a\n２017-10-01 00:00:00,100,1,100,a\n"
    )
    workload, report = convert_philly(philly)  # Philly's rules drop (and count) an unparsable timestamp
    assert len(workload.jobs) == 1
    assert report.dropped["unparsable timestamp"] == 1


@pytest.mark.parametrize(
    ("row", "column"),
    [
        ("a,1e16,1,1,TE", "submit_time"),  # completed "at its own submission time" before the limit
        ("a,0,1e10,1,TE", None),  # exactly MAX_TIME: accepted
        ("a,1e10,0.001,1,TE", None),  # the far edge: accepted
        ("a,10000000001,1,1,TE", "submit_time"),
        ("a,0,10000000001,1,TE", "duration"),
        ("a,0,0.0009,1,TE", "duration"),
        ("a,0,10,1000001,TE", "gpus"),
    ],
)
def test_time_and_amount_range(tmp_path, row, column):
    path = write(tmp_path, "t.csv", f"{TRACE_HEADER}\n{row}\n")
    if column is None:
        assert len(load_trace(path).jobs) == 1
        return
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    assert exc.value.column == column
    assert "schedgym.limits." in str(exc.value)


# --- unbounded cost: refused before the work ----------------------------------------------------------


def test_cluster_count_of_ten_million_is_refused_at_once(tmp_path, capsys):
    path = write(tmp_path, "c.csv", "name,gpus,cpus,mem_gb,count\nn,8,64,512,10000000\n")
    line = cli_error(capsys, "compare", "--cluster", path, "--policies", "fifo", "--seeds", "1", "--jobs", "5")
    assert "MAX_NODES" in line and f"{path}:2" in line


def test_nodes_summed_over_rows(tmp_path, monkeypatch):
    monkeypatch.setattr("schedgym.sim.cluster.MAX_NODES", 10)
    path = write(tmp_path, "c.csv", "name,gpus,cpus,mem_gb,count\nn,8,64,512,6\nm,8,64,512,5\n")
    with pytest.raises(TraceError, match="more than 10 nodes") as exc:
        load_cluster_csv(path)
    assert exc.value.line == 3


def test_gzip_bomb_is_stopped_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 1 << 20)
    path = tmp_path / "bomb.csv.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(f"{TRACE_HEADER}\n".encode())
        for _ in range(16):
            fh.write(b"0" * (1 << 20))
    assert path.stat().st_size < 100_000
    with pytest.raises(TraceError, match="decompresses to more than 1,048,576 bytes"):
        load_trace(path)


def test_plain_file_over_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 100)
    path = write(tmp_path, "t.csv", f"{TRACE_HEADER}\n" + "".join(f"j{i},0,10,1,TE\n" for i in range(20)))
    with pytest.raises(TraceError, match="MAX_TEXT_BYTES"):
        load_trace(path)


def test_row_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_ROWS", 3)
    path = write(tmp_path, "t.csv", f"{TRACE_HEADER}\n" + "".join(f"j{i},0,10,1,TE\n" for i in range(5)))
    with pytest.raises(TraceError, match="more than 3 rows") as exc:
        load_trace(path)
    assert exc.value.line == 5
    swf = write(tmp_path, "s.swf", "\n".join(GOOD_SWF.replace("1 100", f"{i} 100", 1) for i in range(1, 6)) + "\n")
    with pytest.raises(TraceError, match="more than 3 jobs"):
        convert_swf(swf)


# --- partial or lost output ---------------------------------------------------------------------------


@pytest.fixture
def full_disk(monkeypatch):
    """Every write to an output fails with ENOSPC (schedgym._atomic writes bytes through one function)."""

    def write(fd, data):  # noqa: ANN001
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(schedgym._atomic, "_write_raw", write)


@pytest.mark.parametrize("flag", ["--json", "--csv", "--markdown"])
def test_full_disk_leaves_no_partial_report(tmp_path, capsys, full_disk, flag):
    out = tmp_path / "out.file"
    line = cli_error(
        capsys, "compare", "--policies", "fifo", "--seeds", "1", "--jobs", "20", flag, str(out), "--no-progress"
    )
    assert "No space left on device" in line
    assert files_in(tmp_path) == []


def test_full_disk_leaves_no_converted_trace(tmp_path, capsys, full_disk, alibaba_files):
    line = cli_error(capsys, *convert_argv(*alibaba_files, str(tmp_path / "o.csv"), str(tmp_path / "c.csv")))
    assert "No space left on device" in line
    assert files_in(tmp_path) == ["nodes.csv", "pods.csv"]


@pytest.mark.parametrize("flag", ["--log-dir", "--json", "--csv", "--markdown", "--plot"])
def test_empty_output_paths_are_refused(capsys, flag):
    line = cli_error(capsys, "compare", "--policies", "fifo", "--seeds", "1", "--jobs", "5", flag, "")
    assert flag in line


def test_log_dir_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "f"
    target.write_text("x")
    line = cli_error(capsys, "compare", "--policies", "fifo", "--seeds", "1", "--jobs", "5", "--log-dir", str(target))
    assert "is a file" in line


def test_log_folders_never_collide(tmp_path, capsys):
    a, b = saved_model(tmp_path, "a"), saved_model(tmp_path, "b")
    logs = str(tmp_path / "logs")
    common = ["--seeds", "1", "--jobs", "5", "--log-dir", logs]
    line = cli_error(capsys, "compare", "--policies", f"a/b:{a},a_b:{b}", *common)
    assert "would both write to the folder 'a_b'" in line
    line = cli_error(capsys, "compare", "--policies", f"X:{a},x:{b}", *common)  # one folder on macOS
    assert "would both write" in line
    line = cli_error(capsys, "compare", "--policies", f"ppo:{tmp_path}/a/b.zip,ppo:{tmp_path}/a_b.zip", *common)
    assert "distinct" in line
    assert not (tmp_path / "logs").exists()


def test_dot_labels_stay_inside_the_log_dir():
    from schedgym.cli import log_folders

    assert log_folders(["..", ".", ".hidden", "é"]) == {"..": "_..", ".": "_.", ".hidden": "_.hidden", "é": "_"}


def test_cluster_node_count_in_the_python_api():
    from schedgym.errors import ConfigError
    from schedgym.sim.cluster import ClusterSpec

    with pytest.raises(ConfigError, match="MAX_NODES"):
        ClusterSpec.homogeneous(10**8, 8, 64, 512)  # refused before a node is built


def test_failed_training_leaves_no_empty_run_folder(tmp_path, monkeypatch, capsys):
    import agents.train

    def fail(*args, **kwargs):
        raise SchedGymError("stopped before writing anything")

    monkeypatch.setattr(agents.train, "_train", fail)
    runs = tmp_path / "deep" / "runs"
    line = cli_error(capsys, "train", "--run-dir", str(runs), "--total-timesteps", "64", "--no-progress")
    assert "stopped before writing anything" in line
    assert files_in(tmp_path) == []  # runs/<run> and the folders created for it are gone
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "f").write_text("x")
    cli_error(capsys, "train", "--run-dir", str(tmp_path / "keep"), "--total-timesteps", "64", "--no-progress")
    assert files_in(tmp_path / "keep") == ["f"]  # a folder that existed before is left as it was


# --- issue 19: grids bounded before any work, the Ray address, messages that leak -------------------------


def test_a_grid_of_a_hundred_million_runs_is_refused_before_it_is_built(capsys):
    import time

    values = ",".join(str(i) for i in range(100))
    start = time.perf_counter()
    line = cli_error(
        capsys, "sweep", "--seeds", "10000", "--jobs", "1", "--policies", "fifo",
        "--set", f"max_preemptions={values}", "--set", f"restart_overhead={values}",
    )  # fmt: skip
    assert "100,000,000 runs" in line and "MAX_RUNS" in line
    assert time.perf_counter() - start < 10  # the grid is counted, not built


def test_compare_bounds_policies_seeds_and_jobs(capsys, monkeypatch):
    from schedgym import limits

    monkeypatch.setattr(limits, "MAX_TOTAL_JOBS", 100)
    line = cli_error(capsys, "compare", "--policies", "fifo,fitgpp", "--seeds", "2", "--jobs", "30")
    assert "2 policies x 2 seeds of 30 jobs make 120 job results" in line and "MAX_TOTAL_JOBS" in line
    monkeypatch.setattr(limits, "MAX_RUNS", 3)
    line = cli_error(capsys, "compare", "--policies", "fifo,fitgpp", "--seeds", "2", "--jobs", "1")
    assert "4 runs" in line and "MAX_RUNS" in line


def test_no_ray_at_an_address_is_one_line_within_seconds():
    import time

    from schedgym.experiments.executors import check_ray_address

    start = time.perf_counter()
    with pytest.raises(ConfigError, match="no Ray cluster answers there"):
        check_ray_address("127.0.0.1:1")
    assert time.perf_counter() - start < 30
    for address in ("localhost", "127.0.0.1:\u0666\u0663\u0667\u0669", "127.0.0.1:\uff11\uff12\uff13"):
        # Arabic-Indic and full-width digits: int() reads them, and Ray would have been sought at 6379 or 123.
        with pytest.raises(ConfigError, match="expected auto or HOST:PORT"):
            check_ray_address(address)
    check_ray_address("auto")  # Ray's to resolve


@pytest.mark.ray
def test_no_ray_at_an_address_from_the_command_line(tmp_path):
    pytest.importorskip("ray")
    import time

    start = time.perf_counter()
    proc = run_python_without_ray_settings(
        ["-m", "schedgym.cli", "compare", "--policies", "fifo", "--seeds", "1", "--jobs", "20",
         "--executor", "ray", "--address", "127.0.0.1:1"],
        home=tmp_path,
        cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "schedgym: error: --address '127.0.0.1:1': no Ray cluster answers there (Connection refused)"
    ]
    assert time.perf_counter() - start < 30


def test_integer_options_state_the_range_they_accept(capsys):
    line = cli_error(capsys, "train", "--total-timesteps", "9223372036854775807")
    assert "from 0 to 999,999,999,999,999,999" in line


def test_same_file_names_the_two_options(tmp_path, capsys):
    out = str(tmp_path / "x")
    line = cli_error(capsys, "compare", "--seeds", "1", "--jobs", "5", "--json", out, "--csv", out)
    assert line == f"schedgym: error: --json and --csv name the same file {out!r}; give each its own"


def test_plot_on_a_full_disk_is_one_line_without_warnings(tmp_path, capsys, full_disk):
    pytest.importorskip("matplotlib")
    line = cli_error(
        capsys, "compare", "--policies", "fifo", "--seeds", "1", "--jobs", "20", "--no-progress",
        "--plot", str(tmp_path / "o.png"), "--json", str(tmp_path / "o.json"),
    )  # fmt: skip
    assert "No space left on device" in line
    assert files_in(tmp_path) == []

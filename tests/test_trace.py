"""Trace and cluster file validation: a malformed file is rejected whole with a TraceError naming file, line,
column and value."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.errors import TraceError
from schedgym.sim import ClusterSpec, JobClass, JobSpec, NodeSpec, load_cluster_csv, resolve_cluster
from schedgym.workloads import OPTIONAL_DEFAULTS, Workload, load_trace, save_trace

HEADER = "job_id,submit_time,duration,gpus,cpus,mem_gb,nodes,class,grace_period"
GOOD_ROW = "a,0,100,2,8,32,1,BE,15"


def write(tmp_path, text: str, name: str = "trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def load_error(tmp_path, text: str) -> tuple[TraceError, str]:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    return exc.value, str(path)


def test_good_trace_loads_with_defaults(tmp_path):
    path = write(
        tmp_path,
        "job_id,submit_time,duration,gpus,class\n"  # only required columns
        "a,0,100,2,BE\n"
        "b, 5.5 ,60,0.5,te\n",  # spaces and lower-case class are accepted
    )
    wl = load_trace(path)
    assert wl.jobs == (
        JobSpec("a", 0.0, 100.0, 2.0, 0.0, 0.0, 1, JobClass.BE, OPTIONAL_DEFAULTS["grace_period"]),
        JobSpec("b", 5.5, 60.0, 0.5, 0.0, 0.0, 1, JobClass.TE, OPTIONAL_DEFAULTS["grace_period"]),
    )
    assert wl.lines == (2, 3)
    assert wl.path == str(path)
    assert wl.name == "trace"


def test_columns_in_any_order(tmp_path):
    # (A column outside the format is an error: tests/test_hostile.py.)
    path = write(tmp_path, "class,gpus,duration,submit_time,job_id,nodes\nBE,16,10,3,g,2\n")
    (job,) = load_trace(path).jobs
    assert (job.job_id, job.submit_time, job.duration, job.gpus, job.gang_size, job.job_class) == (
        "g",
        3.0,
        10.0,
        16.0,
        2,
        JobClass.BE,
    )
    assert job.member_demand[0] == 8.0


def test_missing_required_column(tmp_path):
    err, path = load_error(tmp_path, "job_id,submit_time,gpus,class\na,0,1,BE\n")
    assert (err.path, err.line) == (path, 1)
    assert "missing required column 'duration'" in str(err)
    assert str(err).startswith(f"{path}:1")


@pytest.mark.parametrize(
    ("row", "column", "value", "problem"),
    [
        ("b,zero,100,2,8,32,1,BE,15", "submit_time", "zero", "expected a number"),
        ("b,0,100,two,8,32,1,BE,15", "gpus", "two", "expected a number"),
        ("b,-1,100,2,8,32,1,BE,15", "submit_time", "-1", ">= 0"),
        ("b,0,100,2,-8,32,1,BE,15", "cpus", "-8", ">= 0"),
        ("b,0,100,2,8,32,1,BE,-5", "grace_period", "-5", ">= 0"),
        ("b,0,nan,2,8,32,1,BE,15", "duration", "nan", "finite"),
        ("b,0,100,inf,8,32,1,BE,15", "gpus", "inf", "finite"),
        ("b,0,0,2,8,32,1,BE,15", "duration", "0", "> 0"),
        ("b,0,100,2,8,32,0,BE,15", "nodes", "0", ">= 1"),
        ("b,0,100,2,8,32,1.5,BE,15", "nodes", "1.5", "whole number"),
        ("b,0,100,2,8,32,1,XX,15", "class", "XX", "unknown class"),
        ("b,,100,2,8,32,1,BE,15", "submit_time", "", "missing value"),
        (",0,100,2,8,32,1,BE,15", "job_id", "", "empty job_id"),
    ],
)
def test_bad_value_names_file_line_column_and_value(tmp_path, row, column, value, problem):
    # The bad row is on line 3 (header on 1, a good row on 2).
    err, path = load_error(tmp_path, f"{HEADER}\n{GOOD_ROW}\n{row}\n")
    assert (err.path, err.line, err.column) == (path, 3, column)
    assert err.value.strip() == value
    msg = str(err)
    assert msg.startswith(f"{path}:3")
    assert f"column '{column}'" in msg
    assert problem in msg
    assert repr(err.value) in msg


def test_duplicate_job_id_points_at_both_lines(tmp_path):
    err, path = load_error(tmp_path, f"{HEADER}\n{GOOD_ROW}\nb,0,1,1,0,0,1,TE,0\n{GOOD_ROW}\n")
    assert (err.line, err.column, err.value) == (4, "job_id", "a")
    assert "first seen on line 2" in str(err)


def test_short_row(tmp_path):
    err, path = load_error(tmp_path, f"{HEADER}\n{GOOD_ROW}\na2,0,100,2\n")
    assert (err.path, err.line) == (path, 3)
    assert "short" in str(err)


def test_long_row(tmp_path):
    err, path = load_error(tmp_path, f"{HEADER}\n{GOOD_ROW},extra\n")
    assert (err.path, err.line) == (path, 2)
    assert "expected 9 fields, got 10" in str(err)


def test_empty_file(tmp_path):
    err, path = load_error(tmp_path, "")
    assert (err.path, err.line) == (path, 1)
    assert "empty file" in str(err)


def test_header_only(tmp_path):
    err, path = load_error(tmp_path, HEADER + "\n")
    assert err.path == path
    assert "no jobs" in str(err)


def test_job_with_no_resources(tmp_path):
    err, path = load_error(tmp_path, f"{HEADER}\na,0,100,0,0,0,1,BE,15\n")
    assert (err.path, err.line) == (path, 2)
    assert "no resources" in str(err)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(TraceError, match="cannot open trace") as exc:
        load_trace(path)
    assert exc.value.path == str(path)


def test_line_numbers_count_blank_lines(tmp_path):
    # csv skips the blank line but the reported line is the physical one (5).
    err, path = load_error(tmp_path, f"{HEADER}\n{GOOD_ROW}\n\nb,0,1,1,0,0,1,TE,0\nc,0,x,1,0,0,1,TE,0\n")
    assert (err.line, err.column, err.value) == (5, "duration", "x")


def test_non_utf8_trace_is_a_trace_error(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("job_id,submit_time,duration,gpus,class\nj\u00e9,0,10,1,BE\n".encode("latin-1"))
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    # 'j\xe9' is on line 2 of the file; the message says the file is not UTF-8.
    assert (exc.value.path, exc.value.line) == (str(path), 2)
    assert "not UTF-8" in str(exc.value)


def test_trace_with_a_byte_order_mark_is_read(tmp_path):
    # Spreadsheets save "UTF-8 with BOM"; the BOM must not become part of the first column's name.
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffjob_id,submit_time,duration,gpus,class\nj1,0,10,1,BE\n".encode("utf-8"))
    wl = load_trace(path)
    assert [j.job_id for j in wl.jobs] == ["j1"]


def test_non_utf8_cluster_csv_is_a_trace_error(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("name,gpus,cpus,mem_gb\nn\u00e9,8,64,512\n".encode("latin-1"))
    with pytest.raises(TraceError) as exc:
        load_cluster_csv(path)
    assert exc.value.path == str(path)


CELLS = st.one_of(
    st.sampled_from(["0", "1", "-1", "1.5", "nan", "inf", "1e400", "TE", "BE", "", " ", '"a,b"', '"', "x", "\x00"]),
    st.text(max_size=4),
)
ROWS = st.lists(st.lists(CELLS, max_size=11).map(",".join), max_size=5)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    header=st.sampled_from(["job_id,submit_time,duration,gpus,class", HEADER, "", "job_id"]),
    rows=ROWS,
)
def test_any_text_either_loads_or_raises_trace_error(tmp_path, header, rows):
    path = tmp_path / "fuzz.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    try:
        wl = load_trace(path)
    except TraceError as exc:
        assert exc.path == str(path)
        return
    for job in wl.jobs:  # whatever loads is valid
        assert job.duration > 0 and job.submit_time >= 0 and job.gang_size >= 1
        assert job.gpus + job.cpus + job.mem_gb > 0


# ----------------------------------------------------------------------------------------------------------
# Workload.check_fits
# ----------------------------------------------------------------------------------------------------------


def test_job_larger_than_every_node(tmp_path):
    path = write(tmp_path, f"{HEADER}\n{GOOD_ROW}\nbig,0,100,9,8,32,1,BE,15\n")
    wl = load_trace(path)
    with pytest.raises(TraceError) as exc:
        wl.check_fits(ClusterSpec.homogeneous(2, 8, 64, 512))
    err = exc.value
    assert (err.path, err.line, err.column, err.value) == (str(path), 3, "gpus", 9.0)
    assert "larger than every node" in str(err)
    assert "needs 9" in str(err) and "largest node has 8" in str(err)


def test_job_too_large_in_memory_names_the_memory_column(tmp_path):
    path = write(tmp_path, f"{HEADER}\nm,0,100,1,1,600,1,BE,15\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path).check_fits(ClusterSpec.homogeneous(2, 8, 64, 512))
    assert (exc.value.line, exc.value.column, exc.value.value) == (2, "mem_gb", 600.0)


def test_gang_larger_than_cluster(tmp_path):
    path = write(tmp_path, f"{HEADER}\n{GOOD_ROW}\ng,0,100,24,0,0,3,BE,15\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path).check_fits(ClusterSpec.homogeneous(2, 8, 64, 512))
    err = exc.value
    assert (err.path, err.line, err.column, err.value) == (str(path), 3, "nodes", 3)
    assert "needs 3 nodes" in str(err) and "has 2" in str(err)


def test_gang_needing_more_big_nodes_than_exist(tmp_path):
    # Members of 8 GPUs fit only the one 8-GPU node; the gang needs two of them.
    path = write(tmp_path, f"{HEADER}\ng,0,100,16,0,0,2,BE,15\n")
    nodes = ClusterSpec((NodeSpec("big", 8, 64, 512), NodeSpec("small", 4, 64, 512)))
    with pytest.raises(TraceError) as exc:
        load_trace(path).check_fits(nodes)
    assert (exc.value.line, exc.value.column) == (2, "nodes")
    assert "has only 1" in str(exc.value)


def test_check_fits_accepts_a_fitting_workload(tmp_path):
    wl = load_trace(write(tmp_path, f"{HEADER}\n{GOOD_ROW}\ng,0,100,16,0,0,2,BE,15\n"))
    wl.check_fits(ClusterSpec.homogeneous(2, 8, 64, 512))  # no exception


def test_check_fits_without_a_file():
    wl = Workload((JobSpec("x", 0.0, 1.0, 16.0),))
    with pytest.raises(TraceError) as exc:
        wl.check_fits(ClusterSpec.homogeneous(1, 8, 64, 512))
    assert exc.value.path is None and exc.value.column == "gpus"


def test_save_trace_writes_every_column(tmp_path):
    path = tmp_path / "out.csv"
    save_trace(path, [JobSpec("x", 1.25, 10.0, 0.5, 2.0, 4.0, 1, JobClass.TE, 7.0)])
    assert path.read_text().splitlines() == [HEADER, "x,1.25,10.0,0.5,2.0,4.0,1,TE,7.0"]


# ----------------------------------------------------------------------------------------------------------
# Cluster CSV
# ----------------------------------------------------------------------------------------------------------


def test_heterogeneous_cluster_csv(tmp_path):
    path = write(
        tmp_path,
        "name,gpus,cpus,mem_gb,count,gpu_model\nv100,8,64,512,2,V100\ncpu,0,32,128,,\nhalf,0.5,8,16,1,T4\n",
        name="mycluster.csv",
    )
    cl = load_cluster_csv(path)
    assert cl.name == "mycluster"
    assert [n.name for n in cl.nodes] == ["v100-0", "v100-1", "cpu", "half"]
    assert cl.capacity.tolist() == [[8, 64, 512], [8, 64, 512], [0, 32, 128], [0.5, 8, 16]]
    assert cl.nodes[0].gpu_model == "V100"
    assert resolve_cluster(str(path)).capacity.tolist() == cl.capacity.tolist()


@pytest.mark.parametrize(
    ("row", "column", "value"),
    [
        ("b,eight,64,512,1", "gpus", "eight"),
        ("b,8,-1,512,1", "cpus", "-1"),
        ("b,8,64,nan,1", "mem_gb", "nan"),
        ("b,8,64,512,0", "count", "0"),
        ("b,8,64,512,two", "count", "two"),
        (",8,64,512,1", "name", ""),
    ],
)
def test_cluster_csv_bad_value(tmp_path, row, column, value):
    path = write(tmp_path, f"name,gpus,cpus,mem_gb,count\na,8,64,512,1\n{row}\n")
    with pytest.raises(TraceError) as exc:
        load_cluster_csv(path)
    err = exc.value
    assert (err.path, err.line, err.column, err.value) == (str(path), 3, column, value)
    assert str(err).startswith(f"{path}:3")


def test_cluster_csv_missing_column(tmp_path):
    path = write(tmp_path, "name,gpus,cpus\na,8,64\n")
    with pytest.raises(TraceError, match="missing required column 'mem_gb'") as exc:
        load_cluster_csv(path)
    assert exc.value.line == 1


def test_cluster_csv_duplicate_names_and_empty(tmp_path):
    with pytest.raises(TraceError, match="unique"):
        load_cluster_csv(write(tmp_path, "name,gpus,cpus,mem_gb\na,8,64,512\na,8,64,512\n"))
    with pytest.raises(TraceError, match="at least one node"):
        load_cluster_csv(write(tmp_path, "name,gpus,cpus,mem_gb\n", name="empty.csv"))


def test_cluster_csv_node_without_resources(tmp_path):
    path = write(tmp_path, "name,gpus,cpus,mem_gb\na,8,64,512\nz,0,0,0\n")
    with pytest.raises(TraceError, match="no resources") as exc:
        load_cluster_csv(path)
    assert exc.value.line == 3


def test_unknown_cluster_name():
    from schedgym.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="expected one of"):
        resolve_cluster("nosuchcluster")
    assert resolve_cluster("small").n_nodes == 4

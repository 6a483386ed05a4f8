"""Fuzzing every reader, converter and the command line (issue 10, item 7).

The property, for any input: a valid result or a clean error (:class:`SchedGymError` from the library; from
the CLI, exit status 2 with one ``schedgym: error:`` line), never another exception, a traceback or a hang.
A valid result also obeys :mod:`schedgym.limits`, and a converter's output loads with the trace reader.

The default run is bounded in time (a few dozen examples per test, each under a deadline); ``-m slow`` runs
many more. Nothing here simulates, so the module runs once, not once per engine.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym import limits
from schedgym.cli import main
from schedgym.errors import SchedGymError
from schedgym.sim.cluster import load_cluster_csv
from schedgym.workloads.convert.alibaba import POD_COLUMNS, convert_alibaba2023, load_alibaba_cluster
from schedgym.workloads.convert.philly import convert_philly
from schedgym.workloads.convert.swf import convert_swf
from schedgym.workloads.trace import COLUMNS, Workload, load_trace, save_trace

FAST = settings(
    max_examples=40, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow], database=None
)
SLOW = settings(
    max_examples=1500, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow], database=None
)


@pytest.fixture(scope="module", autouse=True)
def engine():
    """Overrides conftest's per-engine fixture: nothing here depends on the engine."""
    yield "native"


BIG = "z" * (limits.MAX_FIELD_CHARS + 1)
NUMBERS = [
    "0", "1", "2", "8", "100", "0.5", "1e3", "-1", "-0", "1e308", "-1e308", "1e999", "1e16", "1e10", "10000000001",
    "0.0001", "0.001", "nan", "inf", "-inf", "１０", "١٢", "1_0", "0x10", " 7 ", "", "abc", "2e-320", "1000001",
    "10000000", "+3", ".5", "5.", "1e", "--1",
]  # fmt: skip
WORDS = ["TE", "BE", "te", "Be", "x", '"', '"a,b"', "\x00", "\n", "\r", ";", "LS", "Burstable", "Guaranteed", "T4", "é"]
TIMES = [
    "2017-10-01 00:00:00", "2017-10-01 00:00:10", "２017-10-01 00:00:00", "2017-13-01 00:00:00", "yesterday",
    "9999-12-31 23:59:59", "0001-01-01 00:00:00", "2017-10-01", "",
]  # fmt: skip

field = st.one_of(
    st.sampled_from(NUMBERS),
    st.sampled_from(WORDS),
    st.sampled_from(TIMES),
    st.text(max_size=6),
    st.just(BIG),
)


def csv_text(columns: list[str], extra: list[str]) -> st.SearchStrategy[str]:
    """A header (usually the real columns, shuffled; sometimes with extra, missing or repeated names) and a
    few rows of hostile fields, written by csv.writer or joined raw (so quoting may be broken too)."""
    header = st.one_of(
        st.permutations(columns).map(list),
        st.lists(st.sampled_from(columns + extra), min_size=1, max_size=len(columns) + 2),
    )

    @st.composite
    def build(draw: Callable) -> str:  # type: ignore[type-arg]
        names = draw(header)
        rows = draw(st.lists(st.lists(field, min_size=len(names) - 1, max_size=len(names) + 1), max_size=5))
        if draw(st.booleans()):
            buf = io.StringIO()
            writer = csv.writer(buf)
            writer.writerow(names)
            writer.writerows(rows)
            return buf.getvalue()
        return "\n".join(",".join(r) for r in [names, *rows]) + "\n"

    return build()


def swf_text() -> st.SearchStrategy[str]:
    line = st.one_of(
        st.lists(st.sampled_from([n for n in NUMBERS if n.strip() and "," not in n]), min_size=18, max_size=18),
        st.lists(st.sampled_from(NUMBERS + WORDS), min_size=0, max_size=20),
    ).map(lambda tokens: " ".join(t for t in tokens if t.strip()))
    return st.lists(st.one_of(line, st.just("; comment"), st.just("")), max_size=6).map(lambda ls: "\n".join(ls) + "\n")


def write_input(text: str, name: str, compress: bool) -> str:
    directory = Path(tempfile.mkdtemp(prefix="fuzz"))
    path = directory / (name + (".gz" if compress else ""))
    data = text.encode("utf-8", errors="surrogatepass")
    path.write_bytes(gzip.compress(data) if compress else data)
    return str(path)


def within_limits(workload: Workload) -> None:
    for job in workload.jobs:
        assert 0 <= job.submit_time <= limits.MAX_TIME
        assert limits.MIN_DURATION <= job.duration <= limits.MAX_TIME
        assert job.grace_period <= limits.MAX_TIME
        assert max(job.gpus, job.cpus, job.mem_gb) <= limits.MAX_AMOUNT
        assert job.gang_size <= limits.MAX_NODES


def reads_back(workload: Workload) -> None:
    """A converter's output is written and read back by the trace reader without error."""
    within_limits(workload)
    out = Path(tempfile.mkdtemp(prefix="fuzzout")) / "out.csv"
    save_trace(out, workload.jobs)
    again = load_trace(out)
    assert [j.job_id for j in again.jobs] == [j.job_id for j in workload.jobs]


def clean(call: Callable[[], object]) -> object | None:
    """``call()``'s result, or None after a SchedGymError; any other exception fails the test."""
    try:
        return call()
    except SchedGymError as exc:
        assert str(exc).strip() and "\n" not in str(exc).strip()  # one line, saying something
        return None


TRACE = csv_text(list(COLUMNS), ["gpu", "comment", "", "duration", "job_id "])
CLUSTER = csv_text(["name", "gpus", "cpus", "mem_gb", "count", "gpu_model"], ["gpu", "", "name"])
PHILLY = csv_text(["timestamp", "duration", "num_gpus", "gpu_time", "cluster"], ["num_gpu", "", "duration"])
PODS = csv_text([*POD_COLUMNS, "gpu_spec", "pod_phase"], ["qos", "", "num_gpus"])
NODES = csv_text(["sn", "cpu_milli", "memory_mib", "gpu", "model"], ["sn", "", "gpus"])


def check_trace(text: str, compress: bool) -> None:
    wl = clean(lambda: load_trace(write_input(text, "t.csv", compress)))
    if wl is not None:
        within_limits(wl)  # type: ignore[arg-type]


def check_cluster(text: str, compress: bool) -> None:
    spec = clean(lambda: load_cluster_csv(write_input(text, "c.csv", compress)))
    if spec is not None:
        assert spec.n_nodes <= limits.MAX_NODES  # type: ignore[attr-defined]
    spec = clean(lambda: load_alibaba_cluster(write_input(text, "n.csv", compress)))


def check_converter(convert: Callable, text: str, compress: bool) -> None:  # type: ignore[type-arg]
    result = clean(lambda: convert(write_input(text, "in.csv", compress)))
    if result is not None:
        workload, report = result  # type: ignore[misc]
        assert report.kept == len(workload.jobs)
        reads_back(workload)


@FAST
@given(TRACE, st.booleans())
def test_fuzz_trace_reader(text, compress):
    check_trace(text, compress)


@FAST
@given(st.one_of(CLUSTER, NODES), st.booleans())
def test_fuzz_cluster_readers(text, compress):
    check_cluster(text, compress)


@FAST
@given(PHILLY, st.booleans())
def test_fuzz_philly(text, compress):
    check_converter(convert_philly, text, compress)


@FAST
@given(PODS, st.booleans())
def test_fuzz_alibaba(text, compress):
    check_converter(convert_alibaba2023, text, compress)


@FAST
@given(swf_text(), st.booleans())
def test_fuzz_swf(text, compress):
    check_converter(convert_swf, text, compress)


@FAST
@given(st.binary(max_size=300), st.sampled_from(["t.csv", "t.csv.gz", "s.swf"]))
def test_fuzz_raw_bytes(data, name):
    directory = Path(tempfile.mkdtemp(prefix="fuzz"))
    path = directory / name
    path.write_bytes(data)
    for reader in (load_trace, load_cluster_csv, convert_philly, convert_swf, convert_alibaba2023):
        clean(lambda reader=reader: reader(str(path)))


# --- the command line ---------------------------------------------------------------------------------


class _Ran(Exception):
    """Raised by the stand-ins for the long-running parts: arguments were accepted."""


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "t.csv").write_text("job_id,submit_time,duration,gpus,class\na,0,10,1,TE\nb,1,20,2,BE\n")
    (d / "c.csv").write_text("name,gpus,cpus,mem_gb,count\nn,8,64,512,2\n")
    (d / "p.csv").write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,100,1,100,a\n")
    (d / "bad.csv").write_text("job_id,submit_time\n")
    (d / "dir").mkdir()
    return d


OPTION_VALUES = ["0", "1", "2", "-1", "99999999999999999999", "１０", "1_0", "nan", "inf", "1e308", "", "x"]


def argv_strategy(d: Path) -> st.SearchStrategy[list[str]]:
    paths = [str(d / n) for n in ("t.csv", "c.csv", "p.csv", "bad.csv", "dir", "missing.csv")]
    outputs = [str(d / "o.json"), str(d / "dir"), str(d / "no" / "o.csv"), "", str(d / "o.png"), str(d / "o.csv")]
    values = st.sampled_from(OPTION_VALUES + paths + outputs)
    compare_opts = {
        "--workload": st.sampled_from(["paper", "philly", "nope", ""]),
        "--trace": st.sampled_from(paths),
        "--cluster": st.sampled_from(["small", "paper", "nope", *paths]),
        "--policies": st.sampled_from(["fifo", "ppo:", "a/b:x.zip,a_b:y.zip", "fifo,fifo", "nope", ",", "ppo"]),
        "--seeds": values,
        "--first-seed": values,
        "--jobs": values,
        "--max-preemptions": values,
        "--restart-overhead": values,
        "--placement": st.sampled_from(["best-fit", "worst-fit"]),
        "--json": st.sampled_from(outputs),
        "--csv": st.sampled_from(outputs),
        "--plot": st.sampled_from(outputs),
        "--log-dir": st.sampled_from(outputs),
    }
    train_opts = {
        "--seed": values,
        "--env-kwargs": st.sampled_from(
            ['{"render_mode":"human"}', '{"max_episode_steps":-3}', "[1]", "{", '{"n_jobs": 1e400}', "{}", "NaN"]
        ),
        "--env-id": st.sampled_from(["this:Nope-v0", "schedgym/Preemption-v1", "CartPole-v1"]),
        "--algo": st.sampled_from(["dqn", "a2c", "ppo"]),
        "--n-envs": values,
        "--net-arch": st.sampled_from(["64,64", "0", "a", "", "1_0"]),
        "--learning-rate": values,
        "--run-dir": st.sampled_from(outputs),
    }

    @st.composite
    def build(draw: Callable) -> list[str]:  # type: ignore[type-arg]
        command = draw(st.sampled_from(["compare", "train", "convert", "other"]))
        if command == "other":
            return draw(st.lists(st.sampled_from(["frobnicate", "--seeds", "1", "compare", "-h", ""]), max_size=3))
        if command == "convert":
            argv = ["trace", "convert", "--format", draw(st.sampled_from(["philly", "swf", "alibaba2023", "x"]))]
            argv += [draw(st.sampled_from(paths)), draw(st.sampled_from(outputs))]
            for flag in draw(st.lists(st.sampled_from(["--set", "--nodes", "--cluster-out"]), max_size=2)):
                argv += [flag, draw(st.sampled_from(["start=١٢", "te_max_duration=1_0", "x=1", *paths, *outputs]))]
            return argv
        opts = compare_opts if command == "compare" else train_opts
        chosen = draw(st.lists(st.sampled_from(sorted(opts)), max_size=4, unique=True))
        argv = [command]
        for flag in chosen:
            argv += [flag, draw(opts[flag])]
        return argv

    return build()


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    import agents.train
    import schedgym.experiments.compare

    def ran(*args: object, **kwargs: object) -> None:
        raise _Ran

    monkeypatch.setattr(schedgym.experiments.compare, "run_comparison", ran)
    monkeypatch.setattr(agents.train, "train", ran)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
        except _Ran:
            status = 0
    return status, err.getvalue()


def check_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    status, err = run_main(argv, monkeypatch)
    assert status in (0, 2), (argv, status, err)
    if status == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("schedgym: error:"), (argv, err)
    assert "Traceback" not in err


def test_fuzz_cli(cli_files, monkeypatch):
    @FAST
    @given(argv_strategy(cli_files))
    def inner(argv):
        check_cli(argv, monkeypatch)

    inner()


# --- longer runs: python -m pytest -m slow ------------------------------------------------------------


@pytest.mark.slow
@SLOW
@given(TRACE, CLUSTER, PHILLY, PODS, swf_text(), st.booleans())
def test_fuzz_every_reader_long(trace, cluster, philly, pods, swf, compress):
    check_trace(trace, compress)
    check_cluster(cluster, compress)
    check_converter(convert_philly, philly, compress)
    check_converter(convert_alibaba2023, pods, compress)
    check_converter(convert_swf, swf, compress)


@pytest.mark.slow
def test_fuzz_cli_long(cli_files, monkeypatch):
    @SLOW
    @given(argv_strategy(cli_files))
    def inner(argv):
        check_cli(argv, monkeypatch)

    inner()

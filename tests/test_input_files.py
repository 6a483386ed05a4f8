"""Input files that are not what they seem (issue 19, items 5 and 7), as regression tests.

Item 5: a FIFO with no writer, a device (``/dev/zero``) or a ``/proc`` file as a trace, a cluster file, a
converter's source, a saved model or its ``.json``: each is refused (or, for ``/proc``, read under the size
limit) at once, never blocking. Item 7: a saved model whose headers claim (or whose entries inflate to) more
than :data:`schedgym.limits.MAX_MODEL_ENTRY_BYTES` is refused before anything that size is allocated.

Every test that could hang on a regression runs under :func:`deadline` (``SIGALRM``) or in a subprocess with
a timeout, so that it fails instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import struct
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from helpers import run_cli

import schedgym  # noqa: F401  (registers the environments)
from agents.inference import load_policy_network, load_rllib_network
from agents.learned import BUNDLED, load_agent
from schedgym import limits
from schedgym._csvio import open_input, read_text
from schedgym.cli import main
from schedgym.errors import SchedGymError, TraceError
from schedgym.rllib import NPZ_FORMAT
from schedgym.sim.cluster import load_cluster_csv
from schedgym.workloads.convert.alibaba import convert_alibaba2023, load_alibaba_cluster
from schedgym.workloads.convert.philly import convert_philly
from schedgym.workloads.convert.swf import convert_swf
from schedgym.workloads.trace import load_trace

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or sys.platform == "win32", reason="POSIX files only")

SECONDS = 20  # far more than any of these takes; a reader that blocks fails here instead of hanging the suite
PROC_FILE = "/proc/self/status"
LIMIT = "(schedgym.limits.MAX_MODEL_ENTRY_BYTES)"
LIMIT_RE = re.escape(LIMIT)


@pytest.fixture(scope="module", autouse=True)
def engine():
    """Overrides conftest's per-engine fixture: nothing here simulates more than a few jobs."""
    yield "native"


class Hung(BaseException):
    """Raised by :func:`deadline`: a BaseException, so that no ``except Exception`` (or OSError) hides it."""


@contextlib.contextmanager
def deadline(seconds: int = SECONDS) -> Iterator[None]:
    """Fail with :class:`Hung` if the block takes longer than ``seconds`` (a blocking open() is interrupted)."""

    def hung(signum, frame):  # noqa: ANN001
        raise Hung(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cli_error(capsys, *argv: str) -> str:  # noqa: ANN001
    """Run ``schedgym ARGV`` in-process under :func:`deadline`: exit 2 and one ``schedgym: error:`` line."""
    with deadline():
        try:
            status = main(list(argv))
        except SystemExit as exc:
            status = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("schedgym: error:") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    """A FIFO with no writer, named like a CSV file: opening it for reading the usual way blocks forever."""
    path = tmp_path / "input.csv"
    os.mkfifo(path)
    return str(path)


def linked(tmp_path: Path, name: str, target: str) -> str:
    """``tmp_path/name``, a symbolic link to ``target`` (a device or a /proc file under a reader's name)."""
    path = tmp_path / name
    path.symlink_to(target)
    return str(path)


# --- item 5: FIFOs, devices, /proc ---------------------------------------------------------------------


def test_fifo_as_trace_in_a_fresh_process(fifo):
    """The case of the issue as a user meets it: ``schedgym compare --trace FIFO`` blocked forever."""
    proc = run_cli("compare", "--trace", fifo, "--seeds", "1", "--no-progress", timeout=SECONDS)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == f"schedgym: error: {fifo}: cannot read trace: it is a FIFO (named pipe), not a regular file"


def test_fifo_as_cluster(capsys, fifo):
    line = cli_error(capsys, "compare", "--cluster", fifo, "--seeds", "1", "--jobs", "5", "--no-progress")
    assert f"{fifo}: cannot read cluster file: it is a FIFO (named pipe), not a regular file" in line


def test_fifo_as_swept_cluster(capsys, fifo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = cli_error(capsys, "sweep", "--set", f"cluster={fifo}", "--policies", "fifo", "--seeds", "1", "--jobs", "5",
                     "--no-progress")  # fmt: skip
    assert "is a FIFO (named pipe), not a regular file" in line and fifo in line


def test_fifo_as_the_environments_trace(fifo):
    with deadline(), pytest.raises(TraceError, match="it is a FIFO .named pipe., not a regular file") as info:
        gym.make("schedgym/Preemption-v1", trace=fifo)
    assert info.value.path == fifo


READERS = {
    "trace": load_trace,
    "cluster": load_cluster_csv,
    "philly": convert_philly,
    "swf": convert_swf,
    "alibaba pods": convert_alibaba2023,
    "alibaba nodes": load_alibaba_cluster,
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_every_reader_refuses_a_fifo_and_a_device(tmp_path, reader, suffix):
    pipe = tmp_path / f"pipe{suffix}"
    os.mkfifo(pipe)
    zero = linked(tmp_path, f"zero{suffix}", "/dev/zero")
    with deadline():
        with pytest.raises(TraceError, match=r"pipe\.csv(\.gz)?: cannot read .*: it is a FIFO \(named pipe\), not a"):
            reader(str(pipe))
        with pytest.raises(TraceError, match=r"zero\.csv(\.gz)?: cannot read .*: it is a character device, not a"):
            reader(zero)


def test_dev_zero_as_trace_is_refused_without_reading_it(capsys):
    # Before: read 1 GiB of zeros into memory, then refused it as too long.
    started = time.perf_counter()
    line = cli_error(capsys, "compare", "--trace", "/dev/zero", "--seeds", "1", "--no-progress")
    assert line == "schedgym: error: /dev/zero: cannot read trace: it is a character device, not a regular file"
    assert time.perf_counter() - started < 5


def test_proc_file_is_read_under_the_size_limit(capsys, monkeypatch):
    """A /proc file is a regular file reporting size 0: it is read (documented), at most MAX_TEXT_BYTES + 1
    bytes of it, and is then a trace like any other (here: a wrong one)."""
    assert os.stat(PROC_FILE).st_size == 0
    line = cli_error(capsys, "compare", "--trace", PROC_FILE, "--seeds", "1", "--no-progress")
    assert line.startswith(f"schedgym: error: {PROC_FILE}:1: unknown column 'Name:")
    with deadline():
        assert read_text(PROC_FILE, "trace").startswith("Name:")
        monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 16)
        with pytest.raises(TraceError, match=r"trace is more than 16 bytes \(schedgym.limits.MAX_TEXT_BYTES\)"):
            load_trace(PROC_FILE)


def test_directories_keep_their_message(tmp_path):
    with pytest.raises(TraceError, match="cannot open trace: it is a directory"):
        load_trace(tmp_path)
    with pytest.raises(TraceError, match="cannot open model: it is a directory"):
        open_input(tmp_path, "model")


def test_open_input_leaves_missing_files_to_the_caller(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_input(tmp_path / "none.csv", "trace")
    with pytest.raises(TraceError, match=r"none\.csv: cannot open trace: No such file or directory"):
        load_trace(tmp_path / "none.csv")


def test_fifo_and_device_as_a_saved_model_or_its_description(tmp_path, capsys):
    meta = BUNDLED["ppo"].with_suffix(".json")
    (tmp_path / "pipe").mkdir()
    os.mkfifo(tmp_path / "pipe" / "m.zip")
    shutil.copy(meta, tmp_path / "pipe" / "m.json")
    (tmp_path / "zero").mkdir()
    linked(tmp_path / "zero", "m.zip", "/dev/zero")
    shutil.copy(meta, tmp_path / "zero" / "m.json")
    (tmp_path / "desc").mkdir()
    shutil.copy(BUNDLED["ppo"], tmp_path / "desc" / "m.zip")
    os.mkfifo(tmp_path / "desc" / "m.json")
    for folder, name, kind in (("pipe", "m.zip", "FIFO"), ("zero", "m.zip", "character device"),
                               ("desc", "m.json", "FIFO")):  # fmt: skip
        model = tmp_path / folder / "m.zip"
        line = cli_error(capsys, "compare", "--policies", f"mine:{model}", "--seeds", "1", "--jobs", "5")
        assert f"{tmp_path / folder / name}: cannot read " in line and f"it is a {kind}" in line, line
    for given in (tmp_path / "pipe", tmp_path / "pipe" / "m.zip"):  # without a suffix: not "No model at" either
        line = cli_error(capsys, "compare", "--policies", f"mine:{str(given).removesuffix('.zip')}", "--seeds", "1")
        assert "cannot open model: it is a directory" in line or "it is a FIFO" in line, line
    with deadline():
        for loader in (lambda p: load_policy_network(p, "maskable_ppo"), load_rllib_network):
            with pytest.raises(TraceError, match="cannot read model: it is a FIFO"):
                loader(tmp_path / "pipe" / "m.zip")
            with pytest.raises(TraceError, match="cannot read model: it is a character device"):
                loader(tmp_path / "zero" / "m.zip")
            with pytest.raises(SchedGymError, match="not a stable-baselines3 model|not an actor exported"):
                loader(PROC_FILE)  # a regular file of size 0: not a zip


# --- item 7: model files that claim or inflate to more than MAX_MODEL_ENTRY_BYTES ---------------------


def npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    """A valid version 1.0 ``.npy`` header claiming ``shape`` (padded to 64 bytes, as numpy writes it)."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def write_zip(path: Path, entries: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> str:
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, raw in entries.items():
            z.writestr(name, raw)
    return str(path)


def rllib_meta(tmp_path: Path, name: str) -> None:
    meta = json.loads(BUNDLED["ppo"].with_suffix(".json").read_text())
    meta["algo"] = "rllib_ppo"
    (tmp_path / f"{name}.json").write_text(json.dumps(meta))


def test_npz_claiming_a_200000_by_200000_array(tmp_path, capsys):
    """The issue's 2 KB .npz: numpy allocated 320 GB for it (``_ArrayMemoryError``); its header is read first."""
    header = npy_header((200000, 200000))
    path = write_zip(tmp_path / "m.npz", {"weight0.npy": header + b"\0" * 1800})
    assert os.path.getsize(path) < 2200
    rllib_meta(tmp_path, "m")
    line = cli_error(capsys, "compare", "--policies", f"mine:{path}", "--seeds", "1", "--jobs", "5")
    assert line == (
        f"schedgym: error: {path}: array weight0.npy of shape (200000, 200000) (float64) takes "
        f"320,000,000,000 bytes, more than {limits.MAX_MODEL_ENTRY_BYTES:,} {LIMIT}"
    )


def test_npz_array_whose_header_disagrees_with_its_size(tmp_path):
    header = npy_header((1000,), "<f4")
    path = write_zip(tmp_path / "m.npz", {"weight0.npy": header + b"\0" * 40})
    with pytest.raises(SchedGymError) as info:
        load_rllib_network(path)
    assert str(info.value) == (
        f"{path}: array weight0.npy is {len(header) + 40:,} bytes, but its header (shape (1000,), float32) says "
        f"{len(header) + 4000:,}"
    )


def actor_arrays() -> dict[str, np.ndarray]:
    """An exported actor (100 inputs, 3 hidden units, 2 actions) with a Fortran-ordered weight."""
    rng = np.random.default_rng(0)
    return {
        "format": np.array(NPZ_FORMAT),
        "activations": np.array(["Tanh", ""]),
        "weight0": rng.normal(size=(3, 100)).astype(np.float32),
        "bias0": rng.normal(size=3).astype(np.float32),
        "weight1": np.asfortranarray(rng.normal(size=(2, 3))),
        "bias1": rng.normal(size=2),
    }


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz_reads_as_numpy_reads_it(tmp_path, save):
    path = tmp_path / "m.npz"
    save(path, **actor_arrays())
    network = load_rllib_network(path)
    with np.load(path) as npz:
        expected = [(npz[f"weight{i}"].astype(np.float64), npz[f"bias{i}"].astype(np.float64)) for i in range(2)]
    assert network.activations == ("Tanh", "")
    for (weight, bias), (w, b) in zip(network.layers, expected, strict=True):
        assert weight.shape == w.shape and np.array_equal(weight, w) and np.array_equal(bias, b)


def test_npz_members_over_the_limit(tmp_path, monkeypatch):
    arrays = actor_arrays()
    path = tmp_path / "m.npz"
    np.savez(path, **arrays)
    with zipfile.ZipFile(path) as z:
        biggest = max(z.infolist(), key=lambda info: info.file_size)
        total = sum(info.file_size for info in z.infolist())
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", total)
    load_rllib_network(path)  # every member and all of them together within the limit: read
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", biggest.file_size - 1)
    with pytest.raises(SchedGymError, match=f"entry {biggest.filename} is {biggest.file_size:,} bytes, more than"):
        load_rllib_network(path)
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", total - 1)
    with pytest.raises(SchedGymError, match=r"the entries of the zip hold more than [0-9,]+ bytes in all"):
        load_rllib_network(path)


def bundled_entries() -> dict[str, bytes]:
    with zipfile.ZipFile(BUNDLED["ppo"]) as z:
        return {name: z.read(name) for name in z.namelist()}


def test_model_zip_members_over_the_limit(tmp_path, monkeypatch):
    """The model's entries read (``data`` and ``policy.pth``) at exactly the limit load; one byte less is
    refused, by the entry's declared size or by their sum."""
    entries = bundled_entries()
    read = len(entries["data"]) + len(entries["policy.pth"])
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", read)
    assert load_agent(BUNDLED["ppo"]).max_candidates == 16  # the bundled model loads at its own size
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", read - 1)
    with pytest.raises(
        SchedGymError, match=f"the entries of the zip hold more than {read - 1:,} bytes in all {LIMIT_RE}"
    ):
        load_policy_network(BUNDLED["ppo"], "maskable_ppo")
    size = len(entries["policy.pth"])
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", size - 1)
    with pytest.raises(SchedGymError, match=f"entry policy.pth is {size:,} bytes, more than {size - 1:,} {LIMIT_RE}"):
        load_policy_network(BUNDLED["ppo"], "maskable_ppo")


def test_a_small_zip_whose_entry_inflates_past_the_limit(tmp_path, monkeypatch):
    """The issue's 7.4 MB zip inflating to 1.5 GiB, scaled down: refused from its declared size, before
    anything is inflated."""
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", 64 << 10)
    entries = bundled_entries()
    entries["data"] = entries["data"] + b" " * (1 << 20)  # still valid JSON, and compresses 1000:1
    path = write_zip(tmp_path / "m.zip", entries, zipfile.ZIP_DEFLATED)
    with pytest.raises(
        SchedGymError, match=f"entry data is {len(entries['data']):,} bytes, more than 65,536 {LIMIT_RE}"
    ):
        load_policy_network(path, "maskable_ppo")


def test_a_nested_storage_over_the_limit(tmp_path, monkeypatch):
    """A storage of policy.pth (its own zip archive) is held to the same bound, by its declared size."""
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", 200_000)
    with zipfile.ZipFile(io.BytesIO(bundled_entries()["policy.pth"])) as z:
        inner = {name: z.read(name) for name in z.namelist()}
    inner = {name: b"\0" * len(raw) if "/data/" in name else raw for name, raw in inner.items()}  # compressible
    inner["archive/data/0"] = b"\0" * 200_001
    pth = io.BytesIO()
    with zipfile.ZipFile(pth, "w", zipfile.ZIP_DEFLATED) as z:
        for name, raw in inner.items():
            z.writestr(name, raw)
    entries = {**bundled_entries(), "policy.pth": pth.getvalue()}
    path = write_zip(tmp_path / "m.zip", entries)
    with pytest.raises(SchedGymError, match="policy.pth entry archive/data/0 is 200,001 bytes, more than 200,000"):
        load_policy_network(path, "maskable_ppo")


def test_a_zip_header_that_lies_about_the_size(tmp_path, monkeypatch):
    """A member that says it holds 100 bytes but inflates to 16 MB: no more than the declared size is
    inflated, and the member is refused (as damaged) in one message, promptly."""
    monkeypatch.setattr(limits, "MAX_MODEL_ENTRY_BYTES", 4096)
    entries = bundled_entries()
    path = Path(write_zip(tmp_path / "m.zip", {"data": b" " * (16 << 20), "policy.pth": entries["policy.pth"]},
                          zipfile.ZIP_DEFLATED))  # fmt: skip
    with zipfile.ZipFile(path) as z:
        central = z.start_dir  # the central directory's first entry: "data"
    raw = bytearray(path.read_bytes())
    assert raw[central : central + 4] == b"PK\x01\x02" and raw[central + 46 : central + 50] == b"data"
    raw[central + 24 : central + 28] = struct.pack("<I", 100)  # its uncompressed size: 100 bytes
    path.write_bytes(bytes(raw))
    with zipfile.ZipFile(path) as z:
        assert z.getinfo("data").file_size == 100
    started = time.perf_counter()
    with deadline(), pytest.raises(SchedGymError, match="not a stable-baselines3 model .not a zip file, or a damaged"):
        load_policy_network(path, "maskable_ppo")
    assert time.perf_counter() - started < 5

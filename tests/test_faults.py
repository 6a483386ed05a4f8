"""Faults while writing: a full disk or an I/O error at every write, Ctrl-C at random moments, devices, FIFOs
and other file kinds as outputs (issue 19; the contract is docs/input.md, "Outputs").

After each fault: exit status 2 (130 on Ctrl-C, 143 on SIGTERM), one stderr line, and the output folder
exactly as it was before, listing and bytes, including the files that the failed command was to replace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import schedgym_command
from test_hostile import GOOD_POD, NODE_HEADER, POD_HEADER

import schedgym._atomic
from schedgym._atomic import atomic_dir, atomic_open, check_output_path, output_set
from schedgym.cli import main
from schedgym.errors import ConfigError, SchedGymError, Terminated

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="mknod and mount need root")


def snapshot(directory: Path) -> dict[str, object]:
    """Every entry below ``directory``: a file's bytes and mode, a folder, or another kind by name."""
    out: dict[str, object] = {}
    for path in sorted(directory.rglob("*")):
        st = path.lstat()
        key = str(path.relative_to(directory))
        if stat.S_ISREG(st.st_mode):
            out[key] = (path.read_bytes(), stat.S_IMODE(st.st_mode))
        elif stat.S_ISDIR(st.st_mode):
            out[key] = "dir"
        elif stat.S_ISLNK(st.st_mode):
            out[key] = ("link", os.readlink(path))
        else:
            out[key] = stat.filemode(st.st_mode)[0]
    return out


def run(capsys, argv: list[str]) -> tuple[int, list[str]]:  # noqa: ANN001
    """``schedgym ARGV`` in this process: its status and its stderr lines."""
    capsys.readouterr()
    try:
        status = main(argv)
    except SystemExit as exc:
        status = int(exc.code or 0)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return status, err


@pytest.fixture
def one_engine(engine: str) -> None:
    # Writing is the same code on both engines; these loops run many commands, so once is enough.
    if engine == "python":
        pytest.skip("outputs are written by the same code on both engines")


def _compare(d: Path) -> list[str]:
    return [
        "compare", "--policies", "fifo,fitgpp", "--seeds", "2", "--jobs", "30", "--no-progress",
        "--json", str(d / "o.json"), "--csv", str(d / "o.csv"), "--markdown", str(d / "o.md"),
        "--plot", str(d / "o.png"), "--log-dir", str(d / "logs"),
    ]  # fmt: skip


def _sweep(d: Path) -> list[str]:
    return [
        "sweep", "--policies", "fifo,fitgpp", "--seeds", "2", "--jobs", "30", "--no-progress",
        "--set", "max_preemptions=0,1", "--json", str(d / "s.json"), "--csv", str(d / "s.csv"),
        "--plot", str(d / "s.png"),
    ]  # fmt: skip


def _convert(d: Path) -> list[str]:
    return [
        "trace", "convert", "--format", "alibaba2023", str(d / "in" / "pods.csv"), str(d / "t.csv.gz"),
        "--nodes", str(d / "in" / "nodes.csv"), "--cluster-out", str(d / "c.csv"),
    ]  # fmt: skip


COMMANDS = {"compare": _compare, "sweep": _sweep, "convert": _convert}


def _prepare(d: Path, old_outputs: bool) -> None:
    """The inputs, and (``old_outputs``) earlier results where the command writes, which a failure must keep."""
    if d.exists():
        shutil.rmtree(d)
    (d / "in").mkdir(parents=True)
    (d / "in" / "pods.csv").write_text(f"{POD_HEADER}\n{GOOD_POD}\n")
    (d / "in" / "nodes.csv").write_text(f"{NODE_HEADER}\nn,8000,32768,1,T4\n")
    if old_outputs:
        for name in ("o.json", "o.csv", "s.json", "c.csv"):
            (d / name).write_text(f"earlier {name}\n")
            os.chmod(d / name, 0o640)
        (d / "logs" / "fifo").mkdir(parents=True)
        (d / "logs" / "fifo" / "notes.txt").write_text("mine\n")


class Inject:
    """Counts calls of schedgym._atomic's ``_write_raw`` and ``_open_raw``; fails the ``fail_at``-th one."""

    def __init__(self, monkeypatch, name: str, fail_at: int | None = None, code: int = errno.ENOSPC):  # noqa: ANN001
        self.calls, self.fail_at, self.code = 0, fail_at, code
        real = getattr(schedgym._atomic, name)

        def fake(*args, **kwargs):  # noqa: ANN002, ANN003
            self.calls += 1
            if self.calls - 1 == self.fail_at:
                raise OSError(self.code, os.strerror(self.code))
            return real(*args, **kwargs)

        monkeypatch.setattr(schedgym._atomic, name, fake)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("where", ["_write_raw", "_open_raw"])
def test_a_failure_at_every_write_changes_nothing(tmp_path, capsys, monkeypatch, one_engine, command, where):
    d = tmp_path / "w"
    argv = COMMANDS[command](d)
    _prepare(d, old_outputs=False)
    with pytest.MonkeyPatch.context() as mp:
        counter = Inject(mp, where)
        assert run(capsys, argv)[0] == 0
    n = counter.calls
    assert n >= 2  # every command writes at least two files
    for k in range(n):
        _prepare(d, old_outputs=k % 2 == 1)  # every other time, earlier results stand where it writes
        before = snapshot(d)
        code = (errno.ENOSPC, errno.EIO)[k % 2]
        with pytest.MonkeyPatch.context() as mp:
            Inject(mp, where, fail_at=k, code=code)
            status, err = run(capsys, argv)
        assert status == 2, (k, err)
        assert len(err) == 1 and err[0].startswith("schedgym: error: cannot write "), (k, err)
        assert os.strerror(code) in err[0]
        assert snapshot(d) == before, f"{command}: failure at {where} call {k} of {n} changed the folder"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_success_writes_the_same_files_as_before(tmp_path, capsys, one_engine, command):
    """Replacing earlier results keeps their permissions and leaves nothing else behind."""
    d = tmp_path / "w"
    argv = COMMANDS[command](d)
    _prepare(d, old_outputs=False)
    assert run(capsys, argv)[0] == 0
    fresh = snapshot(d)
    _prepare(d, old_outputs=True)
    assert run(capsys, argv)[0] == 0
    again = snapshot(d)
    assert set(fresh) <= set(again)
    for name, entry in fresh.items():
        if name.endswith(".json"):  # holds wall times
            continue
        assert again[name][0] == entry[0] if isinstance(entry, tuple) else again[name] == entry, name  # type: ignore[index]
    for name in ("o.json", "o.csv", "s.json", "c.csv"):
        if name in fresh:
            assert again[name][1] == 0o640  # type: ignore[index]
    assert not [n for n in again if Path(n).name.startswith(".")]  # no temporary or backup file left


def test_a_failed_rename_puts_back_what_was_replaced(tmp_path, monkeypatch):
    (tmp_path / "a").write_text("old a")
    (tmp_path / "b").write_text("old b")
    before = snapshot(tmp_path)
    real_replace = os.replace
    calls = []

    def replace(src, dst):  # noqa: ANN001
        calls.append(dst)
        if len(calls) == 2:  # the second rename of the commit
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(src, dst)

    monkeypatch.setattr(schedgym._atomic.os, "replace", replace)
    with pytest.raises(SchedGymError, match="Input/output error"):
        with output_set():
            for name in ("a", "b", "c"):
                with atomic_open(tmp_path / name) as fh:
                    fh.write(f"new {name}")
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


def test_ctrl_c_during_the_renames_is_held_then_undoes_them(tmp_path, monkeypatch):
    handler = signal.getsignal(signal.SIGINT)
    (tmp_path / "a").write_text("old a")
    before = snapshot(tmp_path)
    real_replace = os.replace

    def replace(src, dst):  # noqa: ANN001
        signal.raise_signal(signal.SIGINT)  # held: the rename still happens, then the set is undone
        return real_replace(src, dst)

    monkeypatch.setattr(schedgym._atomic.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        with output_set():
            for name in ("a", "b"):
                with atomic_open(tmp_path / name) as fh:
                    fh.write("new")
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert signal.getsignal(signal.SIGINT) is handler  # put back as it was


def test_sigterm_during_the_renames_is_held_then_undoes_them(tmp_path, monkeypatch):
    """SIGTERM as the schedgym command takes it (schedgym.cli raises it as Terminated in the main thread):
    held during the renames like Ctrl-C, then the set is undone and Terminated goes on up."""
    from schedgym import cli

    (tmp_path / "a").write_text("old a")
    before = snapshot(tmp_path)
    real_replace = os.replace

    def replace(src, dst):  # noqa: ANN001
        signal.raise_signal(signal.SIGTERM)
        return real_replace(src, dst)

    previous = signal.signal(signal.SIGTERM, cli._raise_interrupt)
    try:
        monkeypatch.setattr(schedgym._atomic.os, "replace", replace)
        with pytest.raises(Terminated):
            with output_set():
                for name in ("a", "b"):
                    with atomic_open(tmp_path / name) as fh:
                        fh.write("new")
        monkeypatch.undo()
        assert signal.getsignal(signal.SIGTERM) is cli._raise_interrupt  # put back as it was
    finally:
        signal.signal(signal.SIGTERM, previous)
        cli._RECEIVED.clear()
    assert snapshot(tmp_path) == before


def test_an_output_that_failed_is_never_renamed_even_if_the_caller_goes_on(tmp_path):
    with output_set():
        with pytest.raises(RuntimeError), atomic_open(tmp_path / "half") as fh:
            fh.write("half")
            raise RuntimeError("the producer failed")
        with atomic_open(tmp_path / "whole") as fh:
            fh.write("whole")
    assert snapshot(tmp_path) == {"whole": (b"whole", 0o666 & ~schedgym._atomic._umask())}


def test_atomic_dir_keeps_the_previous_folder_until_the_new_one_is_whole(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "weights").write_text("v1")
    with pytest.raises(RuntimeError), atomic_dir(ckpt) as tmp:
        (tmp / "weights").write_text("v2, half")
        raise RuntimeError("the save failed")
    assert snapshot(tmp_path) == {
        "ckpt": "dir",
        "ckpt/weights": (b"v1", (tmp_path / "ckpt/weights").stat().st_mode & 0o777),
    }
    with atomic_dir(ckpt) as tmp:
        (tmp / "weights").write_text("v2")
    assert (ckpt / "weights").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


# --- devices, FIFOs and other kinds of file -------------------------------------------------------------

SMALL = ["compare", "--policies", "fifo", "--seeds", "1", "--jobs", "20", "--no-progress"]


def test_dev_null_is_written_through(capsys):
    before = os.stat("/dev/null")
    status, err = run(capsys, [*SMALL, "--json", "/dev/null", "--csv", "/dev/null", "--markdown", "/dev/null"])
    assert (status, err) == (0, [])
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


@needs_root
def test_a_character_device_is_written_through_not_replaced(tmp_path, capsys):
    dev = tmp_path / "out"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # another /dev/null
    status, _ = run(capsys, [*SMALL, "--json", str(dev), "--log-dir", str(tmp_path / "logs")])
    assert status == 0
    assert stat.S_ISCHR(dev.lstat().st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_fifo_is_written_through(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    status, _ = run(capsys, [*SMALL, "--json", str(fifo), "--csv", str(tmp_path / "o.csv")])
    reader.join(timeout=30)
    assert status == 0 and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert run(capsys, [*SMALL, "--json", str(tmp_path / "o.json")])[0] == 0
    assert len(got) == 1 and _no_times(got[0]) == _no_times((tmp_path / "o.json").read_bytes())  # as a file gets


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_leaves_the_error_alone_without_the_table(tmp_path, capsys):
    # The table is printed once the outputs are in place: above the error it would read as success.
    capsys.readouterr()
    try:
        status = main([*SMALL, "--markdown", "/dev/full", "--json", str(tmp_path / "o.json")])
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.splitlines() == ["schedgym: error: cannot write /dev/full: No space left on device"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["compare", "sweep", "trace convert"])
def test_stdout_on_a_full_disk_is_one_line_and_changes_no_output(tmp_path, command):
    """``> file`` on a full disk: one line and status 2, and the outputs as they were (until 2026-12-05 a
    traceback and status 1; trace convert had replaced its output before it printed its report)."""
    out = tmp_path / "out.csv"
    out.write_text("OLD\n")
    swf = tmp_path / "log.swf"
    swf.write_text("1 0 10 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1\n2 5 10 50 8 -1 -1 8 60 -1 1 1 1 1 1 -1 -1 -1\n")
    argv = {
        "compare": [*SMALL, "--csv", str(out)],
        "sweep": ["sweep", "--set", "max_preemptions=0,1", *SMALL[1:], "--csv", str(out)],
        "trace convert": ["trace", "convert", "--format", "swf", str(swf), str(out)],
    }[command]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "schedgym.cli", *argv], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120
        )
    line = "schedgym: error: cannot write standard output: No space left on device\n"
    assert (proc.returncode, proc.stderr) == (2, line)
    assert out.read_text() == "OLD\n" and sorted(p.name for p in tmp_path.iterdir()) == ["log.swf", "out.csv"]


def _no_times(text: bytes) -> list[bytes]:
    return [line for line in text.splitlines() if b"wall_time" not in line]


@needs_root
def test_a_block_device_is_refused_before_any_work(tmp_path, capsys):
    dev = tmp_path / "disk"
    os.mknod(dev, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    status, err = run(capsys, [*SMALL, "--csv", str(dev)])
    assert status == 2 and len(err) == 1 and "is a block device" in err[0]
    assert stat.S_ISBLK(dev.lstat().st_mode)


def test_a_socket_is_refused(tmp_path, capsys):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        status, err = run(capsys, [*SMALL, "--markdown", str(path)])
    assert status == 2 and len(err) == 1 and "is a socket" in err[0]


def test_a_symlink_stays_a_symlink(tmp_path, capsys):
    target = tmp_path / "real.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    assert run(capsys, [*SMALL, "--json", str(tmp_path / "link.json")])[0] == 0
    assert os.readlink(tmp_path / "link.json") == "real.json"
    assert target.read_text().startswith("{")


def test_dev_stdout_appends_to_the_shells_file(tmp_path):
    """``--csv /dev/stdout > out``: the CSV follows the table in the shell's file, which is not replaced."""
    out = tmp_path / "out"
    with open(out, "w") as fh:
        subprocess.run(
            [sys.executable, "-m", "schedgym.cli", *SMALL, "--csv", "/dev/stdout"], stdout=fh, check=True, timeout=120
        )
    text = out.read_text()
    assert text.index("TE p95") < text.index("policy,class,metric") < text.index("wrote /dev/stdout")


def test_same_device_twice_is_fine_but_same_file_is_named(tmp_path, capsys):
    status, err = run(capsys, [*SMALL, "--json", str(tmp_path / "x"), "--csv", str(tmp_path / "x")])
    assert status == 2 and err == [
        f"schedgym: error: --json and --csv name the same file {str(tmp_path / 'x')!r}; give each its own"
    ]


OUTPUT_IS_INPUT = [
    "trace", "cluster", "agent", "agent without suffix", "agent description", "hard link", "log dir", "run dir",
    "sweep trace", "sweep cluster",
]  # fmt: skip


@pytest.mark.parametrize("case", OUTPUT_IS_INPUT)
def test_an_output_that_is_an_input_or_written_otherwise_is_refused_before_any_work(tmp_path, capsys, case):
    """Until 2026-12-05 compare and sweep replaced their own trace, cluster file or agent description with a
    report (exit 0), and a report inside a --log-dir folder replaced a log."""
    trace, nodes = tmp_path / "t.csv", tmp_path / "nodes.csv"
    trace.write_text("job_id,submit_time,duration,gpus,class,grace_period\nb1,0,1000,8,BE,10\nt1,100,100,8,TE,0\n")
    nodes.write_text("name,gpus,cpus,mem_gb\nonly,8,64,512\n")
    bundled = Path(__file__).parent.parent / "agents" / "bundled"
    for suffix in (".npz", ".json"):
        shutil.copy(bundled / f"lean_ppo_paper{suffix}", tmp_path / f"me{suffix}")
    os.link(tmp_path / "t.csv", tmp_path / "link.csv")
    (tmp_path / "r").mkdir()  # an empty folder can start a grid
    (tmp_path / "fifo" / "seed0").mkdir(parents=True)  # fifo's logs from an earlier --log-dir run
    compare = ["compare", "--policies", f"fifo,me:{tmp_path / 'me.npz'}", "--seeds", "1", "--no-progress"]
    on_trace = [*compare, "--trace", str(trace), "--cluster", str(nodes)]
    sweep = ["sweep", "--policies", "fifo", "--seeds", "1", "--trace", str(trace)]
    argv, output, message = {
        "trace": (on_trace, ["--csv", str(trace)], "is the trace too"),
        "cluster": (on_trace, ["--json", str(nodes)], "is a cluster file too"),
        "agent": (on_trace, ["--json", str(tmp_path / "me.npz")], "is me's saved agent too"),
        "agent without suffix": (
            [*on_trace[:2], f"fifo,me:{tmp_path / 'me'}", *on_trace[3:]],
            ["--json", str(tmp_path / "me.npz")],
            "is me's saved agent too",
        ),
        "agent description": (on_trace, ["--markdown", str(tmp_path / "me.json")], "is me's description too"),
        "hard link": (on_trace, ["--json", str(tmp_path / "link.csv")], "is the trace too"),
        "log dir": (
            [*on_trace, "--log-dir", str(tmp_path)],
            ["--csv", str(tmp_path / "fifo" / "seed0" / "jobs.csv")],
            "is among the --log-dir logs",
        ),
        "run dir": (on_trace, ["--run-dir", str(tmp_path / "r"), "--json", str(tmp_path / "r" / "grid.json")], "run"),
        "sweep trace": (
            [*sweep, "--set", "max_preemptions=0,1"],
            ["--cluster", str(nodes), "--json", str(trace)],
            "trace",
        ),
        "sweep cluster": ([*sweep, "--set", f"cluster={nodes},small"], ["--csv", str(nodes)], "is a cluster file too"),
    }[case]

    def files() -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    before = files()
    status, err = run(capsys, [*argv, *output])
    assert status == 2 and len(err) == 1 and message in err[0], err
    assert files() == before and list((tmp_path / "r").iterdir()) == []


def test_outputs_beside_what_a_command_reads_or_writes_are_fine(tmp_path, capsys, monkeypatch):
    """The checks above refuse only the files themselves: a report at the top of --log-dir, and a file named
    like a cluster preset (``--cluster small --csv small``, run twice: the second run read no file 'small')."""
    monkeypatch.chdir(tmp_path)
    assert run(capsys, [*SMALL, "--log-dir", ".", "--json", "cmp.json"])[0] == 0
    for _ in range(2):
        assert run(capsys, [*SMALL, "--cluster", "small", "--csv", "small"]) == (0, [])


@pytest.mark.parametrize("command", ["compare", "trace convert"])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, command):
    """``schedgym compare | true``: status 141 and nothing on stderr, as before the table was printed with
    the output set (it then said "cannot write standard output: Broken pipe", status 2)."""
    swf = tmp_path / "log.swf"
    swf.write_text("1 0 10 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1\n")
    argv = SMALL if command == "compare" else ["trace", "convert", "--format", "swf", str(swf), str(tmp_path / "o")]
    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write fails with EPIPE
    with open(write, "w") as pipe:
        proc = subprocess.run(
            [sys.executable, "-m", "schedgym.cli", *argv], stdout=pipe, stderr=subprocess.PIPE, text=True, timeout=120
        )
    assert (proc.returncode, proc.stderr) == (141, "")


def test_a_closed_stdout_leaves_a_user_error_one_line(tmp_path):
    """``schedgym compare --json /nonexistent/x >&-``: one line and status 2 (a traceback until 2026-12-05, as
    sys.stdout is None then)."""
    proc = subprocess.run(
        [sys.executable, "-m", "schedgym.cli", *SMALL, "--json", str(tmp_path / "no" / "x.json")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 (the child's own stdout, closed before exec)
    )
    assert proc.returncode == 2 and proc.stderr.startswith("schedgym: error:") and proc.stderr.count("\n") == 1


def test_check_output_path_kinds(tmp_path):
    check_output_path("--json", "/dev/null")
    check_output_path("--json", "/dev/stdout")
    with pytest.raises(ConfigError, match="is a directory"):
        check_output_path("--json", tmp_path)


@needs_root
def test_a_real_full_disk(tmp_path, capsys, one_engine):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (disk / "o.json").write_text("earlier\n")
        before = snapshot(disk)
        argv = ["compare", "--policies", "fifo", "--seeds", "2", "--jobs", "300", "--no-progress"]  # each option once
        argv += ["--json", str(disk / "o.json"), "--plot", str(disk / "o.png"), "--log-dir", str(disk / "logs")]
        status, err = run(capsys, argv)
        assert status == 2 and len(err) == 1 and "No space left on device" in err[0], err
        assert snapshot(disk) == before
    finally:
        subprocess.run(["umount", str(disk)], check=True)


# --- Ctrl-C ---------------------------------------------------------------------------------------------


def default_sigint() -> None:
    """Ctrl-C as a terminal's command gets it: a test run started in the background (``pytest &``) ignores
    SIGINT, its children inherit that, and schedgym rightly leaves an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_ignored_signal_stays_ignored(tmp_path, sig):
    """``nohup schedgym ...`` (or a supervisor ignoring SIGTERM): the parent's choice stands; the command runs
    to its end."""
    proc = subprocess.Popen(
        [schedgym_command(), *SMALL, "--json", str(tmp_path / "o.json")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN),
    )
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, "")
    assert (tmp_path / "o.json").exists()


def _interrupt(argv: list[str], delay: float, cwd: Path, sig: int = signal.SIGINT) -> tuple[int, str]:
    proc = subprocess.Popen(
        [schedgym_command(), *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


# What the command says and returns when it has cleaned up after each signal.
STOPPED = {signal.SIGINT: (130, "schedgym: interrupted\n"), signal.SIGTERM: (143, "schedgym: terminated\n")}


@pytest.mark.parametrize("delay", [0.03, 0.06, 0.1, 0.15, 0.2, 0.3])
def test_ctrl_c_during_the_imports_is_one_line(tmp_path, one_engine, delay):
    status, err = _interrupt(["compare", "--seeds", "1", "--jobs", "50"], delay, tmp_path)
    # Before the interpreter has installed its handler the kernel ends it (status -2, 130 to a shell, no line).
    # On a loaded machine the signal can still land in the interpreter's own start-up (its init_* steps: the
    # standard streams, site and its .pth files), before the launcher's first line: Python's traceback, which
    # no code of ours can prevent (docs/input.md, "Signals"); anything later must be our one line.
    if status == 1 and err.startswith("Fatal Python error: init_"):
        assert "KeyboardInterrupt" in err and "schedgym/bin" not in err
        return
    assert (status, err) in ((130, "schedgym: interrupted\n"), (-signal.SIGINT, "")), err


@pytest.mark.parametrize("delay", [0.03, 0.1, 0.2, 0.3])
def test_sigterm_during_the_imports_is_one_line(tmp_path, one_engine, delay):
    """Python does not handle SIGTERM in its own start-up: before the launcher's first line the kernel ends
    the process (-15, no line). Once the launcher has taken it (seen in /proc: SIGTERM among the caught
    signals), the one line and 143 at any moment (before, -15 and nothing)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the caught signals from /proc")
    proc = subprocess.Popen(
        [schedgym_command(), "compare", "--seeds", "1", "--jobs", "50"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) in (STOPPED[signal.SIGTERM], (0, "")), err  # (0: it had finished)


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux: /proc/PID/status, SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_ctrl_c_at_random_moments_leaves_the_folder_as_it_was(tmp_path, one_engine, command, sig):
    d = tmp_path / "w"
    _prepare(d, old_outputs=True)
    argv = COMMANDS[command](d)
    argv[argv.index("--jobs") + 1] = "3000"
    argv[argv.index("--seeds") + 1] = "3"
    before = snapshot(d)
    start = time.perf_counter()
    subprocess.run([schedgym_command(), *argv], check=True, capture_output=True, timeout=300)
    whole = time.perf_counter() - start
    rng = random.Random(19)
    interrupted = 0
    for delay in sorted(rng.uniform(0.2, 0.85) * whole for _ in range(6)):
        _prepare(d, old_outputs=True)
        status, err = _interrupt(argv, delay, tmp_path, sig)
        if status == 0:  # it finished first
            continue
        interrupted += 1
        assert (status, err) == STOPPED[sig], (delay, whole, err)
        assert snapshot(d) == before, f"{sig!r} after {delay:.2f} s of {whole:.2f} s changed the folder"
    assert interrupted >= 2  # (on a loaded machine some runs end before their signal)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_the_wait_for_a_fifo_reader(tmp_path, one_engine, sig):
    """A FIFO without a reader makes the command wait at the end, as ``echo > fifo`` does; Ctrl-C (or SIGTERM)
    ends it."""
    os.mkfifo(tmp_path / "pipe")
    proc = subprocess.Popen(
        [schedgym_command(), *SMALL, "--json", str(tmp_path / "pipe"), "--csv", str(tmp_path / "o.csv")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".o.csv") for p in tmp_path.iterdir()):  # the CSV is staged: it waits now
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == STOPPED[sig]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("whom", ["group", "every process"])
def test_sigterm_to_the_process_group_stops_the_worker_pool_cleanly(tmp_path, whom):
    """``timeout`` sends SIGTERM to the whole process group, Slurm, systemd and ``pkill -f`` to each process,
    the process executor's workers included: only the command handles it (the workers finish the batch in
    hand), so it ends with its one line, 143, and nothing of its outputs (before, it left the per-seed log
    folders and hidden temporary files; a worker killed while sending its results hung the command)."""
    if whom == "every process" and not hasattr(signal, "sigwaitinfo"):
        pytest.skip("workers tell the pool's SIGTERM from another one with sigwaitinfo (not on macOS)")
    d = tmp_path / "w"
    d.mkdir()
    argv = [
        "compare", "--policies", "fifo,fitgpp,k8s", "--seeds", "40", "--jobs", "3000", "--no-progress",
        "--executor", "process", "--workers", "2", "--json", str(d / "o.json"), "--log-dir", str(d / "logs"),
    ]  # fmt: skip
    proc = subprocess.Popen(
        [schedgym_command(), *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not (d / "logs").exists():  # the log folders are made as runs finish: the pool is at work
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    pids = {proc.pid, *_descendants(proc.pid)}
    try:
        if whom == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        _kill_running(pids)  # a hang, what this guards against, leaves nothing running on the machine
    assert (proc.returncode, err) == STOPPED[signal.SIGTERM]
    assert sorted(p.name for p in d.iterdir()) == []


def _kill_running(pids: set[int]) -> None:
    for pid in pids:
        if _running(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_the_installed_command_runs_the_process_executor():
    """The process executor's workers import the launcher again as ``__mp_main__``: it must not run the command
    there (it did, and every worker ended, and the pool with it)."""
    args = ["compare", "--policies", "fitgpp,k8s", "--seeds", "2", "--jobs", "100", "--no-progress"]
    serial = subprocess.run([schedgym_command(), *args], capture_output=True, text=True, timeout=120)
    process = subprocess.run(
        [schedgym_command(), *args, "--executor", "process", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert serial.returncode == 0 and process.returncode == 0, process.stderr
    assert process.stdout == serial.stdout


def test_ctrl_c_while_an_extension_initialises_is_not_taken_for_its_absence(monkeypatch):
    """An extension module interrupted in its initialisation fails with ImportError caused by the
    KeyboardInterrupt; taken for "not built", the command went on with the Python fallback and ended 0 (seen in
    CI: test_ctrl_c_during_the_imports_is_one_line, status 0 with nothing on stderr)."""
    from schedgym import _optional
    from schedgym.decision import scalefree
    from schedgym.sim import simulator
    from schedgym.workloads import synthetic

    def interrupted(name: str) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None  # the interrupt stays its context

    def missing(name: str) -> None:
        raise ImportError(f"No module named {name!r}")

    probes = (simulator.native_available, synthetic._load_native, scalefree._fast_prefix_lower_medians)
    monkeypatch.setattr(_optional.importlib, "import_module", interrupted)
    for probe in probes:
        with pytest.raises(KeyboardInterrupt):
            probe()
    monkeypatch.setattr(_optional.importlib, "import_module", missing)
    assert simulator.native_available() is False and synthetic._load_native() is None
    assert scalefree._fast_prefix_lower_medians() is scalefree.prefix_lower_medians


def test_ctrl_c_while_torch_initialises_is_not_taken_for_a_missing_extra(monkeypatch):
    """The same for the agents' torch imports: an interrupted import said "needs the 'rl' extra", status 2."""
    import builtins

    from agents import lean_ppo, learned
    from schedgym.errors import SchedGymError

    real_import = builtins.__import__

    def importer(interrupt: bool) -> object:
        def fake(name: str, *args: object, **kwargs: object) -> object:
            if name.split(".")[0] not in ("torch", "sb3_contrib", "stable_baselines3"):
                return real_import(name, *args, **kwargs)
            if not interrupt:
                raise ImportError(f"No module named {name!r}")
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                raise ImportError("initialization failed") from None

        return fake

    monkeypatch.setattr(builtins, "__import__", importer(True))
    for probe in (lean_ppo._torch, lambda: learned.algo_class("maskable_ppo")):
        with pytest.raises(KeyboardInterrupt):
            probe()
    monkeypatch.setattr(builtins, "__import__", importer(False))
    for probe in (lean_ppo._torch, lambda: learned.algo_class("maskable_ppo")):
        with pytest.raises(SchedGymError, match="pip install 'schedgym\\[rl\\]'"):
            probe()


@pytest.mark.parametrize("kind", [KeyboardInterrupt, Terminated])
def test_main_ends_an_interrupt_with_its_own_line_and_status(monkeypatch, capsys, kind):
    """Ctrl-C: ``schedgym: interrupted``, 130; SIGTERM (raised as Terminated by the command's handler):
    ``schedgym: terminated``, 143; also when it reaches main as the cause of another error (an import that
    it broke)."""
    from schedgym import cli

    expected = (143, "schedgym: terminated\n") if kind is Terminated else (130, "schedgym: interrupted\n")

    def raises(args: object) -> int:
        raise kind

    def broken_import(args: object) -> int:
        try:
            raise kind
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None  # the interrupt stays its context

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # main silences it for the exit to follow
    for command in (raises, broken_import):
        monkeypatch.setattr(cli, "_compare", command)
        status = main(["compare"])
        assert (status, capsys.readouterr().err) == expected


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_error_after_an_interrupt_is_reported_as_the_interrupt(monkeypatch, capsys, sig):
    """An interrupt can land where a library turns it into another error (CI saw a Ctrl-C in matplotlib's
    savefig end as "cannot write s.png: Invalid bounding box", status 2) or where Python only prints it: once
    the command's handler has seen the signal, whatever ends the command is that interrupt."""
    from schedgym import cli

    def fails(args: object) -> int:
        with contextlib.suppress(KeyboardInterrupt):  # swallowed, as in a __del__ or a library's clean-up
            cli._raise_interrupt(sig, None)
        raise SchedGymError("cannot write s.png: Invalid bounding box")

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(cli, "_compare", fails)
    expected = STOPPED[sig]
    assert (main(["compare"]), capsys.readouterr().err) == expected
    monkeypatch.setattr(cli, "_compare", lambda args: 1 // 0 if cli._raise_interrupt(sig, None) else 0)
    assert (main(["compare"]), capsys.readouterr().err) == expected  # the interrupt itself reaches main
    cli._RECEIVED.clear()


def test_main_in_a_python_process_leaves_its_signal_handlers_alone(capsys):
    """Only the schedgym command's launcher hands SIGINT and SIGTERM to main; a caller's own handlers (a
    test runner's, a notebook's) stay as they were."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert main([*SMALL]) == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize("kind", [KeyboardInterrupt, Terminated])
def test_an_interrupted_import_raises_the_same_kind_of_interrupt(kind):
    from schedgym._optional import raise_if_interrupted

    try:
        try:
            raise kind
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None
    except ImportError as exc:
        with pytest.raises(KeyboardInterrupt) as caught:
            raise_if_interrupted(exc)
    assert type(caught.value) is kind


def _descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (Linux: /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the processes through /proc")
def test_the_process_executors_workers_end_when_the_command_is_killed():
    """The workers run in sessions of their own (so that the command's SIGTERM and Ctrl-C reach only the
    command, which shuts the pool down); killed outright, the command cannot, so each worker ends itself once
    the command is gone. The fork server ends with its last worker."""
    argv = [
        "compare", "--policies", "fifo,fitgpp,k8s", "--seeds", "3000", "--jobs", "3000", "--no-progress",
        "--executor", "process", "--workers", "2",
    ]  # fmt: skip
    proc = subprocess.Popen([schedgym_command(), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(below := _descendants(proc.pid)) < 3:  # the fork server (and the resource tracker) and 2 workers
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    below = _descendants(proc.pid)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    left = below
    try:
        while left := [pid for pid in below if _running(pid)]:
            assert time.monotonic() < deadline, f"still running after the command was killed: {left}"
            time.sleep(0.1)
    finally:
        _kill_running(set(left))  # a failed test leaves nothing running

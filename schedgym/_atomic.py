"""How schedgym writes the files that users and other programs read (docs/input.md, "Outputs").

- **Whole or absent.** A regular file is written to a temporary name beside it and renamed onto it only once
  complete (flushed and synced), so a reader never sees a truncated file, and a failure (a full disk, an
  error while producing the content, Ctrl-C) leaves what was there before.
- **Devices are written through.** A character device or a FIFO (``--json /dev/null``, ``--csv /dev/stdout``)
  is opened and written, never replaced by a rename: the content is staged and copied to it at the end.
  A directory, a block device or a socket is refused before any work (:func:`check_output_path`).
- **A command's outputs are a set.** Inside :func:`output_set`, every :func:`atomic_open` is staged, and the
  renames happen together when the block ends without error; on any error or interrupt, every temporary
  file and every folder this run created is removed and the files that were there are left untouched. Even
  a failure during the renames themselves is rolled back (the previous files are kept as hard links until
  the last rename succeeded). A Ctrl-C during the renames is held until they are done or undone.
- **Folders.** :func:`atomic_dir` builds a folder under a temporary name and swaps it in whole (an RLlib
  checkpoint: the previous one is kept until the new one is complete).

A SIGKILL or a power cut during a run can leave a hidden ``.NAME.*.tmp`` beside a target (during the
renames also a ``.NAME.PID.N.bak``, the hard link kept to roll back; for a folder a ``.NAME.*.old``), never a
partial target.
"""

from __future__ import annotations

import contextlib
import contextvars
import gzip
import io
import os
import re
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from schedgym._csvio import file_kind
from schedgym.errors import ConfigError, SchedGymError

# The paths that name this process's own open files: written through like a device, whatever they point at
# (``--csv /dev/stdout > out.csv`` must append to the shell's out.csv, not rename a new file over it).
_OWN_FDS = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/fd/\d+")


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def is_stream(path: str | Path) -> bool:
    """True when ``path`` is written through rather than replaced: an existing character device or FIFO, or a
    name of one of this process's open files (``/dev/stdout``, ``/dev/fd/N``)."""
    if _OWN_FDS.fullmatch(os.path.abspath(str(path))):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def check_output_path(flag: str, path: str | Path | None) -> None:
    """Raise :class:`ConfigError` unless ``path`` can name a file to be written: a new name or a regular
    file in an existing writable directory, or a character device or FIFO (written through). A directory, a
    block device or a socket is refused. ``flag`` names the option in the message."""
    if path is None or not str(path).strip():
        raise ConfigError(f"{flag} needs a file name, got {str(path) if path is not None else ''!r}")
    if is_stream(path):
        own = _own_fd(str(path))
        try:
            if own is not None:
                os.fstat(own)
        except OSError:
            raise ConfigError(f"{flag} {str(path)!r}: this process has no file descriptor {own} open") from None
        return
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ConfigError(f"{flag} {str(path)!r}: {exc.strerror or exc}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise ConfigError(f"{flag} {str(path)!r} is a directory; expected a file name")
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(
            f"{flag} {str(path)!r} is {file_kind(mode)}; expected a regular file, a new name, a character device "
            "or a FIFO"
        )
    parent = Path(os.path.realpath(path)).parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {str(path)!r}: the directory {str(Path(path).parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {str(path)!r}: the directory {str(parent)!r} is not writable")


def check_output_dir(flag: str, path: str | Path | None) -> None:
    """Raise :class:`ConfigError` unless ``path`` can name a directory to write into: not empty, not an
    existing file, and either an existing writable directory or one whose nearest existing ancestor is
    writable (it is created when the first file is written)."""
    if path is None or not str(path).strip():
        raise ConfigError(f"{flag} needs a directory name, got {str(path) if path is not None else ''!r}")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a file; expected a directory")
    existing = p
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {str(path)!r}: {str(existing)!r} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {str(path)!r}: the directory {str(existing)!r} is not writable")


def _error(path: str | Path, exc: OSError) -> SchedGymError:
    # The errno's own words: some libraries (pyarrow) put a paragraph of theirs into strerror.
    reason = os.strerror(exc.errno) if exc.errno else exc.strerror or str(exc) or type(exc).__name__
    return SchedGymError(f"cannot write {path}: {reason}")


def _open_raw(path: str, flags: int, mode: int = 0o666) -> int:
    """``os.open``: the one place files are opened for writing, so that tests can inject a full disk."""
    return os.open(path, flags, mode)


class _RawWriter(io.RawIOBase):
    """An unbuffered binary file on a descriptor whose every write goes through :func:`_write_raw`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return _write_raw(self.fd, bytes(data))

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self.fd)
            finally:
                super().close()

    def fileno(self) -> int:
        return self.fd

    # Seekable as a plain file is: zipfile (a stable-baselines3 model) writes other bytes to a stream it
    # cannot seek, and the file must be the same as one written directly.
    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self.fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self.fd, 0, os.SEEK_CUR)


def _write_raw(fd: int, data: bytes) -> int:
    """``os.write``: the one place bytes reach an output, so that tests can inject ENOSPC or EIO."""
    return os.write(fd, data)


@dataclass
class _Staged:
    """One output of a set: its temporary file (or, for a stream, its content) waiting to be put in place."""

    target: str  # the path given (for messages)
    real: str  # where the rename goes: the target's real path, so that a symlink stays a symlink
    tmp: str | None  # the temporary file beside ``real``; None for a stream
    content: bytes | None = None  # a stream's content, written through at commit
    backup: str | None = None  # a hard link to the file that was at ``real``, kept until the commit is whole
    existed: bool = False
    placed: bool = False


@dataclass
class OutputSet:
    """The outputs of one command, written as a set: see the module's docstring. Use :func:`output_set`."""

    staged: list[_Staged] = field(default_factory=list)
    created_dirs: list[Path] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)

    def print(self, text: str) -> None:
        """Print ``text`` on stdout at the commit: after devices and FIFOs are written, before the streams
        that name this process's own descriptors. A table printed before ``--markdown /dev/full`` failed
        would read as success above the error; ``--csv /dev/stdout`` still follows the table."""
        self.printed.append(text)

    def make_parents(self, directory: Path) -> None:
        """Create ``directory`` and its missing parents, remembering which this set created."""
        missing = []
        d = directory
        while not d.exists():
            missing.append(d)
            if d.parent == d:
                break
            d = d.parent
        for d in reversed(missing):
            # Remembered before it is made: a Ctrl-C between the two must not leave a folder nobody removes.
            self.created_dirs.append(d)
            try:
                d.mkdir()
            except FileExistsError:  # made meanwhile by someone else: not ours to remove
                self.created_dirs.remove(d)
            except OSError as exc:
                self.created_dirs.remove(d)
                raise _error(d, exc) from None

    def commit(self) -> None:
        """Write the streams through (devices and FIFOs, the printed text, this process's own descriptors),
        then rename every staged file into place; undo everything on failure."""
        try:
            # Streams first, and interruptible: a FIFO waits for its reader as long as it takes, and Ctrl-C must
            # still end that wait (what went to a device cannot be taken back either way).
            for s in self.staged:
                if s.tmp is None and _own_fd(s.target) is None:
                    _write_stream(s)
            for text in self.printed:
                try:
                    print(text, flush=True)
                except BrokenPipeError:  # the reader went away (| head): main() ends quietly with 141
                    raise
                except OSError as exc:  # `> file` on a full disk: the set is discarded, one line says why
                    raise _error("standard output", exc) from None
            for s in self.staged:
                if s.tmp is None and _own_fd(s.target) is not None:
                    _write_stream(s)
        except BaseException:
            self.discard()
            raise
        with _signals_held() as interrupted:
            try:
                for s in self.staged:
                    if s.tmp is not None:
                        s.existed = os.path.lexists(s.real)
                        if s.existed:
                            s.backup = _link_backup(s.real)
                for s in self.staged:
                    if s.tmp is not None:
                        try:
                            os.replace(s.tmp, s.real)
                        except OSError as exc:
                            raise _error(s.target, exc) from None
                        s.placed = True
                if interrupted():
                    raise KeyboardInterrupt
            except BaseException:
                self._undo()
                raise
        for s in self.staged:
            if s.backup is not None:
                with contextlib.suppress(OSError):
                    os.unlink(s.backup)
        self.staged.clear()
        self.created_dirs.clear()
        self.printed.clear()

    def discard(self) -> None:
        """Remove every temporary file and every folder this set created; leave every target as it was. A
        second Ctrl-C must not stop this halfway: signals are held meanwhile."""
        with _signals_held():
            self._undo()

    def _undo(self) -> None:
        for s in reversed(self.staged):
            if s.placed:
                with contextlib.suppress(OSError):
                    if s.backup is not None:
                        os.replace(s.backup, s.real)
                        s.backup = None
                    elif not s.existed:
                        os.unlink(s.real)
            for name in (s.tmp, s.backup):
                if name is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(name)
        self.staged.clear()
        for d in reversed(self.created_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()  # only if empty: never what someone else put there meanwhile
        self.created_dirs.clear()
        self.printed.clear()


_ACTIVE: contextvars.ContextVar[OutputSet | None] = contextvars.ContextVar("schedgym_output_set", default=None)


@contextlib.contextmanager
def output_set() -> Iterator[OutputSet]:
    """Make every :func:`atomic_open` (and :func:`make_output_dir`) inside the block part of one set: nothing
    is put in place until the block ends, then all of it is; on an exception (Ctrl-C included) none of it is,
    and the exception goes on. Nested blocks join the outermost set."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer
        return
    outputs = OutputSet()
    token = _ACTIVE.set(outputs)
    try:
        yield outputs
    except BaseException:
        _ACTIVE.reset(token)
        outputs.discard()
        raise
    _ACTIVE.reset(token)
    outputs.commit()


@contextlib.contextmanager
def outside_output_set() -> Iterator[None]:
    """Inside the block, :func:`atomic_open` puts each file in place when it is written, not with the
    enclosing output set: a run folder's finished runs must outlive a command that fails or is interrupted."""
    token = _ACTIVE.set(None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def make_output_dir(directory: str | Path) -> Path:
    """Create ``directory`` (and its parents) for outputs; inside :func:`output_set`, the folders created
    are removed again if the set fails."""
    directory = Path(directory)
    outputs = _ACTIVE.get()
    if outputs is not None:
        outputs.make_parents(directory)
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _error(directory, exc) from None
    return directory


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", newline: str | None = None) -> Iterator[IO[Any]]:
    """Open ``path`` for writing as an output (``mode`` ``"w"`` for UTF-8 text, ``"wb"`` for bytes; a ``.gz``
    path is gzip-compressed in text mode): a temporary file beside it, renamed onto it if the block succeeds
    (at the end of the enclosing :func:`output_set`, if there is one); a device or FIFO is written through.

    An OSError becomes a :class:`SchedGymError` naming ``path``; any other exception is re-raised after the
    temporary file is removed."""
    with output_set() as outputs:
        staged = _stage(path)
        outputs.staged.append(staged)
        try:
            if staged.tmp is None:
                buffer = io.BytesIO()
                with _wrap(buffer, mode, newline, str(path)) as fh:
                    yield fh
                staged.content = buffer.getvalue()
            else:
                with io.BufferedWriter(_RawWriter(_create_tmp(staged)), 1 << 16) as binary:
                    with _wrap(binary, mode, newline, str(path)) as fh:
                        yield fh
                    binary.flush()
                    os.fsync(binary.fileno())  # a rename after a crash must not name an empty file
                os.chmod(staged.tmp, _mode_for(staged.real))
        except BaseException as exc:
            # This output is dropped from the set whatever the caller does next: a partial file is never renamed.
            outputs.staged.remove(staged)
            if staged.tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(staged.tmp)
            if isinstance(exc, OSError):
                raise _error(path, exc) from None
            raise


@contextlib.contextmanager
def os_errors_surface() -> Iterator[None]:
    """Re-raise the OSError behind an exception of the block: a write that fails inside ``torch.save`` (each
    tensor file of an SB3 zip) or ``zipfile`` surfaces as their own error (torch: ``RuntimeError: unexpected
    pos``, zipfile: ``ValueError``), raised while they clean up after the OSError; atomic_open turns the
    OSError into ``cannot write PATH: ...``."""
    try:
        yield
    except Exception as exc:
        seen: set[int] = set()
        cause: BaseException | None = exc
        while cause is not None and id(cause) not in seen and not isinstance(cause, OSError):
            seen.add(id(cause))
            cause = cause.__cause__ or cause.__context__
        if cause is None or cause is exc:
            raise
        raise cause.with_traceback(None) from None


@contextlib.contextmanager
def _wrap(binary: IO[bytes], mode: str, newline: str | None, name: str) -> Iterator[IO[Any]]:
    """The file object the caller writes: ``binary`` itself, a UTF-8 text layer, or gzip and text. The
    layers are flushed and detached on success; the caller's ``with`` closes ``binary``."""
    if mode == "wb":
        yield binary
        return
    if name.endswith(".gz"):
        # mtime=0 and no name in the header: the same content makes the same bytes, run after run.
        with gzip.GzipFile(fileobj=binary, mode="wb", filename="", mtime=0) as gz:
            with _text(gz, newline) as fh:
                yield fh
    else:
        with _text(binary, newline) as fh:
            yield fh


@contextlib.contextmanager
def _text(binary: Any, newline: str | None) -> Iterator[IO[str]]:
    fh = io.TextIOWrapper(binary, encoding="utf-8", newline=newline)
    try:
        yield fh
        fh.flush()
    finally:
        with contextlib.suppress(ValueError, OSError):
            fh.detach()


def _stage(path: str | Path) -> _Staged:
    target = str(path)
    if is_stream(target):
        return _Staged(target=target, real=target, tmp=None)
    real = os.path.realpath(target)
    directory, name = os.path.split(real)
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise _error(target, exc) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise SchedGymError(f"cannot write {target}: it is {file_kind(mode)}, not a regular file")
    return _Staged(target=target, real=real, tmp=_tmp_name(directory, name))


def _tmp_name(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


def _create_tmp(staged: _Staged) -> int:
    """Create ``staged.tmp`` (a new name if it is taken) and return its descriptor. The name is in the set
    before the file exists, so that a Ctrl-C at any moment leaves nothing the set does not know of."""
    assert staged.tmp is not None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            return _open_raw(staged.tmp, flags, 0o600)
        except FileExistsError:
            directory, _ = os.path.split(staged.tmp)
            staged.tmp = _tmp_name(directory, os.path.basename(staged.real))


def _mode_for(real: str) -> int:
    """The permissions of the file being replaced, or the usual ones of a new file (mkstemp makes 0600)."""
    try:
        return stat.S_IMODE(os.stat(real).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _write_stream(s: _Staged) -> None:
    assert s.content is not None
    for std in (sys.stdout, sys.stderr):  # what the command printed comes first: --csv /dev/stdout after the table
        with contextlib.suppress(Exception):
            std.flush()
    own = _own_fd(s.target)
    try:
        # A name of one of our own descriptors is written to that descriptor: reopening /dev/stdout when the
        # shell points it at a file (``> out``) would give a second file offset, and one of the two writers
        # would overwrite the other.
        fd = own if own is not None else _open_raw(s.target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _error(s.target, exc) from None
    try:
        view = memoryview(s.content)
        while view:
            written = _write_raw(fd, bytes(view[: 1 << 20]))
            view = view[written:]
    except OSError as exc:
        raise _error(s.target, exc) from None
    finally:
        if own is None:
            os.close(fd)


def _own_fd(path: str) -> int | None:
    """The descriptor that ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names."""
    match = _OWN_FDS.fullmatch(os.path.abspath(path))
    if match is None or (
        match.group(2) is not None and match.group(2) not in ("self", "thread-self", str(os.getpid()))
    ):
        return None
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return {"stdout": 1, "stderr": 2}.get(name, int(name) if name.isdigit() else None)


def _link_backup(real: str) -> str | None:
    """A hard link to the file at ``real`` under a temporary name, to put it back if the commit fails; None
    where the file system has no hard links (the commit is then not undone past that file)."""
    directory, name = os.path.split(real)
    for attempt in range(100):
        backup = os.path.join(directory, f".{name}.{os.getpid()}.{attempt}.bak")
        try:
            os.link(real, backup, follow_symlinks=False)
            return backup
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


@contextlib.contextmanager
def _signals_held() -> Iterator[Any]:
    """Hold SIGINT (and SIGTERM) while the block runs, so that a commit is done or undone, never half done;
    yields a function telling whether one arrived. Outside the main thread signals go to the main thread
    anyway, and nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    received: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) == signal.SIG_IGN:  # the parent's choice (nohup) stands: not an interrupt here
            continue
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: received.append(signum))
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            pass
    try:
        yield lambda: bool(received)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if signal.SIGTERM in received and previous.get(signal.SIGTERM) not in (signal.SIG_IGN, None):
            signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Build the folder ``path`` under a temporary name beside it and put it in place whole if the block
    succeeds: an existing folder at ``path`` is kept until the new one is complete, then removed. On failure
    the temporary folder is removed and ``path`` is left as it was."""
    path = Path(os.path.realpath(path))
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; the folder gets the usual permissions
    except OSError as exc:
        raise _error(path, exc) from None
    try:
        yield tmp
        with _signals_held() as interrupted:
            old = None
            if os.path.lexists(path):
                if not path.is_dir():
                    raise SchedGymError(f"cannot write {path}: it exists and is not a directory")
                old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
                os.replace(path, old / "previous")  # into a fresh folder of ours: the name is free
            try:
                os.replace(tmp, path)
                if interrupted():
                    os.replace(path, tmp)
                    raise KeyboardInterrupt
            except BaseException:
                if old is not None:
                    os.replace(old / "previous", path)
                    old.rmdir()
                raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _error(path, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

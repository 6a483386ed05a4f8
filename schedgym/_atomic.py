"""Files that users or other programs read are written atomically: to a temporary name beside the target,
renamed onto it only once complete. A failed write (a full disk, an error while producing the content, an
interrupt) leaves nothing behind, and never a truncated file where a reader expects a complete one.

:func:`check_output_path` checks a target before any work is done, so that a run is not lost at its end.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from schedgym.errors import ConfigError, SchedGymError


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def check_output_path(flag: str, path: str | Path | None) -> None:
    """Raise :class:`ConfigError` unless ``path`` can name a file to be written: not empty, not an existing
    directory, in an existing directory that is writable. ``flag`` names the option in the message."""
    if path is None or not str(path).strip():
        raise ConfigError(f"{flag} needs a file name, got {str(path) if path is not None else ''!r}")
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a directory; expected a file name")
    parent = p.parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {str(path)!r}: the directory {str(parent)!r} does not exist")
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


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", newline: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` for UTF-8 text, ``"wb"`` for
    bytes; a ``.gz`` path is gzip-compressed in text mode); rename it to ``path`` only if the block succeeds.

    An OSError becomes a :class:`SchedGymError` naming ``path``; any other exception is re-raised after the
    temporary file is removed."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise SchedGymError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        if mode == "wb":
            with os.fdopen(fd, "wb") as fh:
                yield fh
        elif path.name.endswith(".gz"):
            with os.fdopen(fd, "wb") as raw, gzip.open(raw, "wt", newline=newline, encoding="utf-8") as fh:
                yield fh
        else:
            with os.fdopen(fd, "w", newline=newline, encoding="utf-8") as fh:
                yield fh
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise SchedGymError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

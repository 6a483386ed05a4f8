"""Reading user files with errors that say where the problem is, within :mod:`schedgym.limits`.

Every input file, saved models included, is opened by :func:`open_input`: regular files only, and opening
never blocks (a FIFO without a writer, ``/dev/zero`` and sockets are refused by name).
Every reader of a user file (trace, cluster, converters) goes through here: the text is read with a size cap
(a ``.gz`` file is decompressed as a stream, stopped at the cap), CSV rows come from :class:`CsvRows`
(header checked as a set, row count capped, ``csv.Error`` turned into a :class:`TraceError` with file and
line), and numbers are read by :func:`parse_number`, which accepts ASCII decimal notation only.
"""

from __future__ import annotations

import csv
import difflib
import errno
import gzip
import io
import math
import os
import re
import stat
import zlib
from collections.abc import Iterator, Sequence
from typing import BinaryIO, Protocol

from schedgym import limits
from schedgym.errors import TraceError
from schedgym.limits import MAX_FIELD_CHARS

csv.field_size_limit(MAX_FIELD_CHARS)  # the default already; set so that the documented limit is the one in force

_CHUNK = 1 << 20


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message: "a FIFO (named pipe)", "a socket", ... (the
    readers here and the writers of :mod:`schedgym._atomic` name it alike)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


# Opening never waits: O_NONBLOCK makes open() of a FIFO without a writer (or a serial line without carrier)
# return at once, so that fstat can refuse it. The flag stays on: a regular file ignores it, and a pseudo
# file whose read would wait (/proc/kmsg) fails instead of hanging. O_NOCTTY: opening a terminal never makes
# it ours.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


def open_input(path: str | os.PathLike[str], what: str) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (a symbolic link to one is fine).

    The one way schedgym opens a file it reads (traces, cluster files, converter sources, saved models and
    their descriptions): a directory, a FIFO, a device (``/dev/zero``) or a socket is refused with a
    :class:`TraceError` naming the path and what it is, without blocking and without reading from it. A
    pseudo file of ``/proc`` or ``/sys`` is a regular file that reports size 0: it is opened, and its reader
    reads it under its size limit (:func:`read_text` reads at most ``max_bytes + 1`` bytes). An OSError of
    the open itself (no such file, no permission) is left to the caller, which knows what it was reading.
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TraceError(f"cannot open {what}: it is a directory", path=os.fsdecode(path))
        if not stat.S_ISREG(mode):
            raise TraceError(f"cannot read {what}: it is {file_kind(mode)}, not a regular file", path=os.fsdecode(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _none_would_block(data: bytes | None) -> bytes:
    """``data`` as read; None (what a non-blocking read that would wait gives) is an OSError."""
    if data is None:
        raise BlockingIOError(errno.EAGAIN, "reading it would block")
    return data


class _Readable(Protocol):
    def read(self, n: int, /) -> bytes | None: ...


def read_bounded(fh: _Readable, n: int) -> bytes:
    """At most ``n`` bytes of ``fh``, read in chunks: a compressed stream is inflated no further than ``n``
    bytes, whatever its header says. A caller that allows ``limit`` bytes reads ``limit + 1`` and refuses
    what reaches that."""
    parts: list[bytes] = []
    size = 0
    while size < n and (chunk := _none_would_block(fh.read(min(_CHUNK, n - size)))):
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


def read_text(path: str, what: str, max_bytes: int | None = None) -> str:
    """The file's text as UTF-8 (a byte-order mark, as spreadsheets write, is accepted and skipped); a
    ``.gz`` file is decompressed first, as a stream that stops at ``max_bytes`` (default
    :data:`~schedgym.limits.MAX_TEXT_BYTES`). The file is opened by :func:`open_input`: regular files only.

    Raises :class:`TraceError` naming the file (and the line of the first undecodable byte) instead of an
    OSError, a decompression error, a UnicodeDecodeError or a MemoryError.
    """
    if max_bytes is None:
        max_bytes = limits.MAX_TEXT_BYTES
    try:
        with open_input(path, what) as fh:
            if path.endswith(".gz"):
                with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                    data = read_bounded(gz, max_bytes + 1)
                if len(data) > max_bytes:
                    raise TraceError(
                        f"{what} decompresses to more than {max_bytes:,} bytes (schedgym.limits.MAX_TEXT_BYTES)",
                        path=path,
                    )
            else:
                size = os.fstat(fh.fileno()).st_size
                if size > max_bytes:
                    raise TraceError(
                        f"{what} is {size:,} bytes, more than {max_bytes:,} (schedgym.limits.MAX_TEXT_BYTES)",
                        path=path,
                    )
                data = _none_would_block(fh.read(max_bytes + 1))
                if len(data) > max_bytes:  # a file that grew, or a pseudo file reporting size 0
                    raise TraceError(f"{what} is more than {max_bytes:,} bytes (schedgym.limits.MAX_TEXT_BYTES)",
                                     path=path)  # fmt: skip
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise TraceError(f"cannot decompress {what}: {exc or type(exc).__name__}", path=path) from None
    except OSError as exc:  # (a directory is open_input's TraceError)
        raise TraceError(f"cannot open {what}: {exc.strerror or exc}", path=path) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(
            f"{what} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); save it as UTF-8",
            path=path,
            line=line,
        ) from None


# ASCII decimal notation only: Python's float() and int() also take other scripts' digits ('١٢', '１０'),
# underscores ('1_0'), 'inf', 'nan' and 'infinity', none of which a trace means as a number.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_NON_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)
_BLANK = " \t"


def number_problem(raw: str) -> str | None:
    """Why ``raw`` (surrounding spaces allowed) is not a finite ASCII decimal number, or None."""
    text = raw.strip(_BLANK)
    if _DECIMAL.fullmatch(text) is None:
        if _NON_FINITE.fullmatch(text):
            return "expected a finite number"
        return "expected a number (ASCII decimal digits, e.g. 12 or 1.5e3)"
    if not math.isfinite(float(text)):
        return "expected a finite number (this one overflows a float64)"
    return None


def parse_number(raw: str) -> float | None:
    """``raw`` as a float if it is a finite ASCII decimal number, else None (see :func:`number_problem`)."""
    text = raw.strip(_BLANK)
    if _DECIMAL.fullmatch(text) is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_integer(raw: str) -> int | None:
    """``raw`` as an int if it is ASCII decimal digits with an optional sign (at most 18 digits), else None."""
    text = raw.strip(_BLANK)
    if _INTEGER.fullmatch(text) is None or len(text.lstrip("+-")) > 18:
        return None
    return int(text)


_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def parse_bool(raw: str) -> bool | None:
    """``raw`` as a bool if it is true/yes/1 or false/no/0 (any case, blanks around), else None: one table for
    every option that takes a bool as text (``--set``, a sweep's and a search's values)."""
    return _BOOLEANS.get(raw.strip(_BLANK).lower())


def is_ascii_digits(text: str) -> bool:
    """True if ``text`` holds only the ASCII digits 0-9 (and is not empty)."""
    return bool(text) and text.isascii() and text.isdigit()


def check_header(
    header: Sequence[str] | None,
    *,
    path: str,
    what: str,
    required: Sequence[str],
    optional: Sequence[str] = (),
) -> list[str]:
    """The header's names (spaces stripped), checked as a set: not empty, no empty or duplicate name, every
    required name present and no name outside ``required + optional`` (listed, with a hint for near misses)."""
    if not header:
        raise TraceError(f"empty file: expected a header row naming the {what}'s columns", path=path, line=1)
    names = [h.strip() for h in header]
    for i, name in enumerate(names):
        if not name:
            raise TraceError(f"column {i + 1} of the header has no name (header is {names})", path=path, line=1)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TraceError(f"column '{name}' appears twice in the header (header is {names})", path=path, line=1)
        seen.add(name)
    known = list(required) + list(optional)
    unknown = [n for n in names if n not in known]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hints.append(f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        article = "an" if what[:1].lower() in "aeiou" else "a"
        raise TraceError(
            f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; {article} {what} has the columns "
            f"{', '.join(required)}" + (f" and optionally {', '.join(optional)}" if optional else ""),
            path=path,
            line=1,
        )
    for col in required:
        if col not in names:
            raise TraceError(f"missing required column '{col}' (header is {names})", path=path, line=1)
    return names


def _csv_problem(exc: csv.Error) -> str:
    if "field larger than field limit" in str(exc):
        return f"a field is longer than {MAX_FIELD_CHARS:,} characters (schedgym.limits.MAX_FIELD_CHARS)"
    return f"CSV syntax error: {exc}"


class CsvRows:
    """The rows of a CSV file as ``(line, {column: text})``, after :func:`check_header`.

    A row with too many or too few fields, more than ``max_rows`` rows, and any ``csv.Error`` (a field over
    :data:`~schedgym.limits.MAX_FIELD_CHARS`, a NUL byte, ...) raise :class:`TraceError` with file and line.
    """

    def __init__(
        self,
        path: str,
        what: str,
        *,
        required: Sequence[str],
        optional: Sequence[str] = (),
        max_rows: int | None = None,
        limit_name: str = "MAX_ROWS",
    ):
        self.path, self.what, self.limit_name = path, what, limit_name
        self.max_rows = limits.MAX_ROWS if max_rows is None else max_rows
        self._reader = csv.reader(io.StringIO(read_text(path, what), newline=""))
        try:
            first = next(self._reader, None)
        except csv.Error as exc:
            raise TraceError(_csv_problem(exc) + " (in the header)", path=path, line=1) from None
        self.header = check_header(first, path=path, what=what, required=required, optional=optional)

    def __iter__(self) -> Iterator[tuple[int, dict[str, str]]]:
        header, n = self.header, len(self.header)
        reader, rows = self._reader, 0
        while True:
            try:
                fields = next(reader, None)
            except csv.Error as exc:
                raise TraceError(_csv_problem(exc), path=self.path, line=reader.line_num) from None
            if fields is None:
                return
            line = reader.line_num
            if not fields:  # a blank line, as csv.DictReader skips it
                continue
            rows += 1
            if rows > self.max_rows:
                raise TraceError(
                    f"more than {self.max_rows:,} rows (schedgym.limits.{self.limit_name}); split the file",
                    path=self.path,
                    line=line,
                )
            if len(fields) > n:
                raise TraceError(f"expected {n} fields, got {len(fields)}", path=self.path, line=line)
            if len(fields) < n:
                raise TraceError(f"expected {n} fields, got {len(fields)} (the row is short)", path=self.path,
                                 line=line)  # fmt: skip
            yield line, dict(zip(header, fields, strict=True))

"""Reading user CSV files with errors that say where the problem is."""

from __future__ import annotations

import gzip

from schedgym.errors import TraceError


def read_text(path: str, what: str) -> str:
    """The file's text as UTF-8 (a byte-order mark, as spreadsheets write, is accepted and skipped); a
    ``.gz`` file is decompressed first.

    Raises :class:`TraceError` naming the file (and the line of the first undecodable byte) instead of an
    OSError or UnicodeDecodeError.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise TraceError(f"cannot open {what}: {exc.strerror}", path=path) from None
    if path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TraceError(f"cannot decompress {what}: {exc}", path=path) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(
            f"{what} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); save it as UTF-8",
            path=path,
            line=line,
        ) from None

"""A run folder: the finished runs of a comparison or sweep kept on disk as they finish, so that an interrupted
grid (Ctrl-C, a lost driver, a reboot) resumes where it stopped (``--run-dir FOLDER``, then ``--resume FOLDER``).

A folder holds ``grid.json``, what identifies the grid (the policies and any saved agent's file digest, every
setting's configuration and cluster, the seeds, the engine and its version, the schedgym version), and
``units/``, one file per finished run, each written whole under a temporary name and renamed (a Ctrl-C or a
SIGKILL leaves at most a hidden ``.NAME.*.tmp``, which is ignored). A run is a pure function of its inputs, so
a kept run is what running it again would give, and a resumed grid's outputs are those of an uninterrupted one
(the measured wall times aside: a kept run keeps the time it took).

- A comparison keeps each run whole (``.npz``: the per-job arrays its report, plot and logs read).
- A sweep keeps each run's summary (``.json``), which is all a sweep reports; the floats are written with
  ``repr`` and read back exactly.

Resuming a folder made for another grid is refused, naming the first thing that differs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import json
import math
import os
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from schedgym import __version__, limits
from schedgym._atomic import atomic_open, outside_output_set
from schedgym._csvio import open_input
from schedgym.errors import ConfigError, SchedGymError, TraceError
from schedgym.sim.metrics import PER_JOB_ARRAYS, RunResult, SegmentTable
from schedgym.sim.simulator import engine_version

FORMAT = 1
"""The run folder's layout version (``grid.json``'s ``format``)."""

_UNIT = re.compile(r"u(\d{7})\.(npz|json)")
_SEGMENT_COLUMNS = ("seg_job", "seg_node", "seg_start", "seg_end", "seg_completed")
MAX_UNIT_BYTES = limits.MAX_TEXT_BYTES
"""A unit file larger than this is not one this package wrote (bounded reads of a folder given by a user)."""


def describe(value: Any) -> Any:
    """``value`` as plain JSON data, the same for equal configurations: dataclasses by field, tuples as lists,
    enums by name; anything else by ``repr``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: describe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return describe(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)


def file_digest(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file, or of a folder's files (names and contents, in name order); ``missing`` if
    there is nothing there, or not a regular file (a later build of the policy says why: a FIFO or a device
    read here would block or never end)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    try:
        for file in files:
            digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode() + b"\0")
            with open_input(file, "an agent file") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    except (OSError, TraceError):
        return "missing"
    return digest.hexdigest()


def _callable_name(entry_point: Any) -> Any:
    """A registry entry point as plain data, the same in every process (repr would give an address)."""
    if isinstance(entry_point, str):
        return entry_point
    if isinstance(entry_point, functools.partial):
        return {"partial of": _callable_name(entry_point.func), "args": describe(entry_point.args),
                "kwargs": describe(entry_point.keywords)}  # fmt: skip
    name = getattr(entry_point, "__qualname__", type(entry_point).__qualname__)
    return f"{getattr(entry_point, '__module__', None) or type(entry_point).__module__}:{name}"


def grid_identity(command: str, context: Any, n_units: int, keep: str) -> dict[str, Any]:
    """What makes two grids the same: a resumed grid must match its folder's in every entry.
    ``context``: the grid's :class:`~schedgym.experiments.executors.RunContext`."""
    settings = context.settings
    engine = engine_version(settings[0].config.sim.engine)
    agents = {}
    for spec in context.policies:
        _, sep, path = spec.partition(":")
        if sep:
            agents[spec] = file_digest(path)
    # What a registered name stands for: its factory, arguments and files (a bundled agent's weights), so that
    # a folder is not resumed after the name came to mean another policy.
    entries = {
        entry.name: {
            "entry point": _callable_name(entry.entry_point),
            "kwargs": describe(entry.kwargs),
            "files": {os.path.basename(f): file_digest(f) for f in entry.files},
        }
        for entry in context.entries
    }
    traces = {}
    for s in settings:
        trace = s.config.trace
        if trace is not None and trace not in traces:
            traces[trace] = file_digest(trace)
    return {
        "format": FORMAT,
        "command": command,
        "policies": list(context.policies),
        "agent files": agents,
        "registered policies": entries,
        "seeds": settings[0].config.seed_list,
        "settings": [{"config": describe(s.config), "cluster": describe(s.cluster)} for s in settings],
        "trace files": traces,
        "engine": engine,
        "schedgym": __version__,
        "keeps": keep,
        "runs": n_units,
    }


def first_difference(kept: Any, now: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """The first place (``settings[2].config.load``) where two identities differ, with both values."""
    if isinstance(kept, dict) and isinstance(now, dict):
        for key in [*kept, *(k for k in now if k not in kept)]:
            if key not in kept or key not in now:
                return (f"{where}.{key}" if where else key, kept.get(key), now.get(key))
            found = first_difference(kept[key], now[key], f"{where}.{key}" if where else key)
            if found is not None:
                return found
        return None
    if isinstance(kept, list) and isinstance(now, list) and len(kept) == len(now):
        for i, (a, b) in enumerate(zip(kept, now, strict=True)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found is not None:
                return found
        return None
    return None if kept == now else (where, kept, now)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RunStore:
    """The run folder of one grid. :meth:`create` starts one (``--run-dir``), :meth:`resume` opens one
    (``--resume``); :meth:`finished` reads the runs it holds, :meth:`save` adds one."""

    def __init__(self, folder: Path, identity: dict[str, Any]):
        self.folder = folder
        self.identity = identity
        self.units = folder / "units"
        self.keep = identity["keeps"]
        self.made: list[Path] | None = None  # create(): the folders it made, the run folder first
        self.saved = 0

    @classmethod
    def create(cls, folder: str | os.PathLike[str], identity: dict[str, Any], flag: str = "--run-dir") -> RunStore:
        """Start a run folder at ``folder``: a new or empty folder (one holding a grid is refused: resume it
        or give another). Created now, outside the command's output set: it outlives a failed or
        interrupted command, which is its purpose."""
        path = Path(folder)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{flag} {folder}: not a folder")
        if path.is_dir() and any(path.iterdir()):
            what = "holds a grid: resume it with --resume" if (path / "grid.json").exists() else "is not empty"
            raise ConfigError(f"{flag} {folder}: the folder {what}")
        made = [path, *path.parents]
        made = made[: next((i for i, d in enumerate(made) if d.exists()), len(made))]
        try:
            (path / "units").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{flag} {folder}: cannot create the folder ({exc.strerror or exc})") from None
        store = cls(path, identity)
        store.made = made
        with outside_output_set(), atomic_open(path / "grid.json") as fh:
            json.dump(identity, fh, indent=1)
            fh.write("\n")
        return store

    @classmethod
    def resume(cls, folder: str | os.PathLike[str], identity: dict[str, Any], flag: str = "--resume") -> RunStore:
        """Open the run folder ``folder`` for the grid ``identity``, refusing one made for another grid."""
        path = Path(folder)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{flag} {folder}: not a folder")
        if not path.is_dir():
            raise ConfigError(f"{flag} {folder}: no such folder (start one with --run-dir)")
        try:
            with open_input(path / "grid.json", "grid.json") as fh:
                kept = json.loads(fh.read(MAX_UNIT_BYTES))
        except FileNotFoundError:
            raise ConfigError(f"{flag} {folder}: not a run folder (no grid.json)") from None
        except TraceError as exc:  # a FIFO or a device: refused without reading
            raise ConfigError(f"{flag} {folder}/grid.json: unreadable ({exc.problem})") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{flag} {folder}/grid.json: unreadable ({exc})") from None
        if not isinstance(kept, dict) or kept.get("format") != FORMAT:
            raise ConfigError(f"{flag} {folder}/grid.json: not a run folder of this schedgym (format {FORMAT})")
        found = first_difference(kept, json.loads(json.dumps(identity)))
        if found is not None:
            where, was, now = found
            raise ConfigError(
                f"{flag} {folder}: the folder holds another grid: {where} is {_short(was)} there, {_short(now)} here"
            )
        if not (path / "units").is_dir():
            raise ConfigError(f"{flag} {folder}: not a run folder (no units/)")
        return cls(path, identity)

    def _path(self, index: int) -> Path:
        return self.units / f"u{index:07d}.{'npz' if self.keep == 'result' else 'json'}"

    def finished(self, tasks: Sequence[Any]) -> dict[int, Any]:
        """The kept outcomes of ``tasks`` (:class:`~schedgym.experiments.executors.RunOutcome`), by task
        index. A unit file that is not a finished run of this grid is an error naming it."""
        from schedgym.experiments.executors import RunOutcome

        by_index = {task.index: task for task in tasks}
        out: dict[int, Any] = {}
        for entry in sorted(os.listdir(self.units)):
            match = _UNIT.fullmatch(entry)
            if match is None:
                continue  # a temporary file a killed process left (.NAME.*.tmp), or anything else
            index = int(match[1])
            path = self.units / entry
            if index not in by_index or path != self._path(index):
                raise ConfigError(f"{path}: not a run of this grid ({len(by_index)} runs); delete it")
            try:
                result, wall = self._read(path, index)
            except SchedGymError as exc:
                raise ConfigError(f"{path}: not a finished run ({exc}); delete it to run it again") from None
            out[index] = RunOutcome(by_index[index], result, wall)
        return out

    def remove_if_unused(self) -> None:
        """Undo :meth:`create` while no run has been saved: a grid that fails before its first run is kept (a
        model file that is not there) leaves no folder that holds nothing to resume. Not after Ctrl-C, which
        leaves the folder resumable."""
        if self.made is None or self.saved:
            return
        with contextlib.suppress(OSError):
            (self.folder / "grid.json").unlink()
        for d in (self.units, *self.made):
            with contextlib.suppress(OSError):
                d.rmdir()  # only if empty: never what someone else put there meanwhile
        self.made = None

    def save(self, outcome: Any) -> Any:
        """Write ``outcome``'s run to the folder, whole or not at all, and return the outcome as it will be
        read back (a sweep's: its summary)."""
        index = outcome.task.index
        with outside_output_set():
            if self.keep == "result":
                arrays: dict[str, Any] = _result_arrays(outcome.result)
                arrays["wall_time"] = np.float64(outcome.wall_time)
                arrays["index"] = np.int64(index)  # a unit copied over another one's name is refused on reading
                with atomic_open(self._path(index), "wb") as fh:
                    np.savez(fh, **arrays)
                self.saved += 1  # after the write: a first save that fails still leaves nothing
                return outcome
            from schedgym.experiments.compare import SummarisedRun

            summary = SummarisedRun(outcome.result)
            with atomic_open(self._path(index)) as fh:
                json.dump({"index": index, "wall_time": outcome.wall_time, "summary": summary.summary()}, fh)
            self.saved += 1
        return dataclasses.replace(outcome, result=summary)

    def _read(self, path: Path, index: int) -> tuple[Any, float]:
        try:
            fh = open_input(path, "a kept run")  # a FIFO or a device put there is refused, not read for ever
        except (OSError, TraceError) as exc:
            raise SchedGymError(exc.problem if isinstance(exc, TraceError) else str(exc)) from None
        with fh:
            if os.fstat(fh.fileno()).st_size > MAX_UNIT_BYTES:
                raise SchedGymError(f"larger than {MAX_UNIT_BYTES:,} bytes")
            if self.keep == "result":
                try:
                    with np.load(fh, allow_pickle=False) as data:
                        arrays = {name: data[name] for name in data.files}
                except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
                    raise SchedGymError(str(exc) or type(exc).__name__) from None
                if _scalar(arrays, "index", int) != index:
                    raise SchedGymError(f"the run of index {int(arrays['index'])}, not {index}")
                return _result_from_arrays(arrays), _scalar(arrays, "wall_time", float)
            try:
                kept = json.loads(fh.read())
            except (OSError, ValueError) as exc:
                raise SchedGymError(str(exc)) from None
        from schedgym.experiments.compare import SummarisedRun

        if not isinstance(kept, dict) or kept.get("index") != index or not isinstance(kept.get("summary"), dict):
            raise SchedGymError("not a run summary")
        wall = kept.get("wall_time")
        if not isinstance(wall, float):
            raise SchedGymError("no wall_time")
        return SummarisedRun.from_summary(kept["summary"]), wall


def _result_arrays(result: RunResult) -> dict[str, np.ndarray]:
    if result.whole_run_utilization is not None:
        raise ValueError("a grid's runs are whole runs, not subsets")
    segments = result.segments
    columns = (
        segments.columns
        if isinstance(segments, SegmentTable)
        else SegmentTable.from_segments(segments).columns  # the Python engine's list of Segment
    )
    arrays = {name: getattr(result, name) for name in PER_JOB_ARRAYS}
    arrays.update(zip(_SEGMENT_COLUMNS, columns, strict=True))
    arrays["job_ids"] = np.array(result.job_ids, dtype=str)
    arrays["capacity_total"] = result.capacity_total
    arrays["n_preemptions"] = np.int64(result.n_preemptions)
    arrays["n_requests"] = np.int64(result.n_requests)
    return arrays


def _scalar(arrays: dict[str, np.ndarray], name: str, kind: type) -> Any:
    value = arrays.get(name)
    if value is None or value.shape != () or value.dtype.kind != ("f" if kind is float else "i"):
        raise SchedGymError(f"{name}: missing or not a {kind.__name__}")
    return kind(value)


def _result_from_arrays(arrays: dict[str, np.ndarray]) -> RunResult:
    try:
        job_ids = arrays["job_ids"]
        n = len(job_ids)
        columns = {name: arrays[name] for name in (*PER_JOB_ARRAYS, *_SEGMENT_COLUMNS, "capacity_total")}
    except KeyError as exc:
        raise SchedGymError(f"no array {exc}") from None
    if job_ids.dtype.kind != "U" or any(columns[name].shape != (n,) for name in PER_JOB_ARRAYS):
        raise SchedGymError("per-job arrays of different lengths")
    m = len(columns["seg_job"])
    if any(columns[name].shape != (m,) for name in _SEGMENT_COLUMNS):
        raise SchedGymError("segment columns of different lengths")
    segments = SegmentTable(*(columns[name] for name in _SEGMENT_COLUMNS))
    per_job: dict[str, Any] = {name: columns[name] for name in PER_JOB_ARRAYS}
    return RunResult(
        job_ids=[str(j) for j in job_ids],
        **per_job,
        segments=segments,
        capacity_total=columns["capacity_total"],
        n_preemptions=_scalar(arrays, "n_preemptions", int),
        n_requests=_scalar(arrays, "n_requests", int),
    )


def open_store(
    run_dir: str | os.PathLike[str] | None, resume: bool, command: str, context: Any, n_units: int, keep: str
) -> RunStore | None:
    """The run folder of a grid: None without ``run_dir``; a new one (``--run-dir``), or, with ``resume``,
    the one there, which must have been made for this grid (``--resume``)."""
    if run_dir is None:
        if resume:
            raise ConfigError("resume needs the run folder to resume")
        return None
    identity = grid_identity(command, context, n_units, keep)
    return RunStore.resume(run_dir, identity) if resume else RunStore.create(run_dir, identity)


__all__ = ["RunStore", "describe", "file_digest", "first_difference", "grid_identity", "open_store"]

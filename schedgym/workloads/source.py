"""Where workloads come from, written once for the environment, ``schedgym compare`` and training.

A :class:`WorkloadSource` is one of three kinds:

- ``synthetic``: a preset of :mod:`schedgym.workloads.synthetic`. Evaluation workload ``i`` of the *test*
  split is the draw for seed ``i`` (what ``schedgym compare --first-seed i`` runs); of the *validation*
  split, seed ``VALIDATION_SEED0 + i``, so that model selection never sees a test workload. An episode
  draws a fresh workload from the environment's generator.
- ``bundled``: a converted trace shipped with the package (:mod:`schedgym.workloads.named`). Evaluation
  workload ``i`` of a split is its ``i``-th time window (with warm-up); an episode is a window of
  ``n_jobs`` consecutive jobs of the split, from a random start.
- ``file``: a trace CSV. Evaluation on the test split replays the whole trace (every seed sees the same
  jobs: :attr:`varies` is False); on the validation split, ``count`` windows of ``n_jobs`` jobs at evenly
  spaced starts; an episode is a window of ``n_jobs`` consecutive jobs from a random start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from schedgym.errors import ConfigError
from schedgym.sim.cluster import ClusterSpec
from schedgym.sim.job import JobTable
from schedgym.workloads.named import SPLITS, TRACE_WORKLOADS
from schedgym.workloads.synthetic import PRESETS, SyntheticConfig, check_load, check_overrides, generate, preset
from schedgym.workloads.trace import Workload, load_trace

VALIDATION_SEED0 = 100_000
"""Synthetic validation workloads are seeds 100,000, 100,001, ...; test workloads are seeds 0, 1, 2, ..."""


MIX = "mix"
"""The workload distribution's name (:mod:`schedgym.workloads.distribution`): every episode a new level,
cluster included."""


def workload_names() -> list[str]:
    """Every workload name: synthetic presets, then bundled traces, then the distribution ``mix``."""
    return sorted(PRESETS) + sorted(TRACE_WORKLOADS) + [MIX]


@dataclass(frozen=True)
class WorkloadSource:
    """A workload by name (``workload``) or a trace file (``trace``, which wins), with ``n_jobs`` per
    synthetic draw or trace window (None: the preset's own; for a trace window it is required) and, for a
    synthetic workload, its offered GPU ``load`` (None: the preset's own) and ``synthetic``, other fields of its
    preset replaced: ``(field, value)`` pairs of :class:`~schedgym.workloads.synthetic.SyntheticConfig` (a
    mapping is taken too), checked when the source is made. The arrival rate follows from the load, so longer
    durations mean fewer arrivals per second, not more load."""

    workload: str | None = "paper"
    trace: str | None = None
    n_jobs: int | None = None
    load: float | None = None
    synthetic: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.trace is None and self.workload not in workload_names():
            message = f"Expected workload in {workload_names()}, got {self.workload!r}"
            # A path where a name goes: say where a trace file goes instead (no name holds a dot or a slash).
            if isinstance(self.workload, str) and any(c in self.workload for c in "./\\"):
                message += (
                    "; a trace file is given as trace=PATH (schedgym compare --trace PATH), not as a workload name"
                )
            raise ConfigError(message)
        if self.n_jobs is not None and (
            not isinstance(self.n_jobs, (int, np.integer)) or isinstance(self.n_jobs, bool) or self.n_jobs < 1
        ):
            raise ConfigError(f"Expected n_jobs to be an integer >= 1, got {self.n_jobs!r}")
        if self.load is not None:
            check_load(self.load)
            if self.kind == "mix":
                raise ConfigError("load applies to synthetic presets; 'mix' draws its load per level")
            if self.kind != "synthetic":
                raise ConfigError(
                    f"load applies to synthetic workloads ({', '.join(sorted(PRESETS))}); {self.name!r} is a trace"
                )
        object.__setattr__(self, "synthetic", check_overrides(self.synthetic))
        if self.synthetic:
            if self.kind != "synthetic":
                names = ", ".join(name for name, _ in self.synthetic)
                raise ConfigError(
                    f"{names} applies to synthetic workloads ({', '.join(sorted(PRESETS))}); {self.name!r} is not one"
                )
            self.synthetic_config()  # the values are checked now, by SyntheticConfig, each naming its field

    @property
    def kind(self) -> str:
        """``synthetic``, ``bundled``, ``file`` or ``mix``."""
        if self.trace is not None:
            return "file"
        if self.workload == MIX:
            return "mix"
        return "bundled" if self.workload in TRACE_WORKLOADS else "synthetic"

    @property
    def name(self) -> str:
        return self.trace if self.trace is not None else str(self.workload)

    @property
    def default_cluster(self) -> str:
        """The cluster this workload runs on unless told otherwise: a bundled trace's own, else ``paper``."""
        if self.kind == "bundled":
            return TRACE_WORKLOADS[str(self.workload)].cluster
        return "paper"

    @property
    def varies(self) -> bool:
        """Whether evaluation workloads of the test split differ from one seed to the next."""
        return self.kind != "file"

    # ------------------------------------------------------------------ evaluation
    def evaluation(self, split: str, index: int, cluster: ClusterSpec, *, count: int = 1) -> Workload:
        """Evaluation workload ``index`` of ``split`` (``test`` or ``validation``), checked against ``cluster``.

        ``count`` (how many the caller takes) matters only for a trace file's evenly spaced validation windows.
        """
        _check_split(split)
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool) or index < 0:
            raise ConfigError(f"Expected a workload index >= 0, got {index!r}")
        kind = self.kind
        if kind == "synthetic":
            seed = int(index) + (VALIDATION_SEED0 if split == "validation" else 0)
            wl = self.seeded(seed, cluster)
        elif kind == "bundled":
            tw = TRACE_WORKLOADS[str(self.workload)]
            available = len(tw.windows(split))
            if index >= available:
                raise ConfigError(
                    f"Workload {self.workload!r} has {available} {split} windows; workload {index} was asked for"
                )
            wl = tw.window(split, int(index))
        elif kind == "mix":  # a level has its own cluster, which the caller's would contradict
            raise ConfigError("A 'mix' level runs on its own cluster: take it with mix_level(level_seed(split, i))")
        elif split == "test":
            wl = self._file()
        else:
            jobs = self._file().jobs
            n = min(self._window_jobs(), len(jobs))
            starts = np.unique(np.linspace(0, len(jobs) - n, max(count, 1)).astype(int)).tolist()
            if index >= len(starts):
                raise ConfigError(
                    f"The trace has {len(starts)} distinct validation windows of {n} jobs and window {index} (from 0) "
                    f"was asked for: ask for at most {len(starts)} (schedgym train --n-eval-workloads)"
                )
            wl = self.window_at(starts[index], n)
        wl.check_fits(cluster)
        return wl

    def n_evaluation(self, split: str) -> int | None:
        """How many evaluation workloads ``split`` has (None: unbounded)."""
        _check_split(split)
        if self.kind == "bundled":
            return len(TRACE_WORKLOADS[str(self.workload)].windows(split))
        return None

    def seeded(self, seed: int, cluster: ClusterSpec) -> Workload:
        """The synthetic workload of ``seed`` (the same for the environment's ``workload_seed`` and compare)."""
        if self.kind != "synthetic":
            what = "a distribution of levels (mix_level)" if self.kind == "mix" else "a trace"
            raise ConfigError(f"Seeded workloads are synthetic; {self.name!r} is {what}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ConfigError(f"Expected workload_seed to be an integer >= 0, got {seed!r}")
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0]))
        return self.draw(rng, cluster)

    # ------------------------------------------------------------------ episodes
    def draw(self, rng: np.random.Generator, cluster: ClusterSpec) -> Workload:
        """A fresh synthetic workload from ``rng``."""
        return generate(self.synthetic_config(), cluster, rng, name=str(self.workload))

    def synthetic_config(self) -> SyntheticConfig:
        """The synthetic preset with ``synthetic``, ``n_jobs`` and ``load`` applied."""
        # Made once per source: an environment draws a workload at every reset.
        config = self.__dict__.get("_config")
        if config is None:
            overrides: dict[str, Any] = dict(self.synthetic)
            if self.n_jobs is not None:
                overrides["n_jobs"] = int(self.n_jobs)
            if self.load is not None:
                overrides["load"] = float(self.load)
            config = preset(str(self.workload), **overrides)
            object.__setattr__(self, "_config", config)
        return config

    def mix_level(self, seed: int) -> tuple[ClusterSpec, Workload, float]:
        """The ``mix`` level of level seed ``seed``: its cluster, its jobs (drawn from a Generator seeded from
        the level seed alone) and its estimate noise."""
        from schedgym.workloads.distribution import MIX as DISTRIBUTION
        from schedgym.workloads.distribution import draw_level

        if self.kind != "mix":
            raise ConfigError(f"Levels belong to the 'mix' workload; {self.name!r} is not it")
        level = draw_level(DISTRIBUTION, seed)
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0]))
        wl = generate(level.workload, level.cluster, rng, name=f"mix[{seed}]")
        return level.cluster, wl, level.estimate_noise

    def pool(self, split: str) -> Workload:
        """The jobs that trace episodes are cut from: a bundled trace's split, or the whole trace file."""
        _check_split(split)
        if self.kind == "bundled":
            # Cut once per source and split: an environment cuts an episode from it at every reset.
            pools = self.__dict__.setdefault("_pools", {})
            if split not in pools:
                pools[split] = TRACE_WORKLOADS[str(self.workload)].split_jobs(split)
            return pools[split]
        if self.kind == "file":
            return self._file()
        raise ConfigError(f"{self.name!r} is synthetic: it has no pool of trace jobs")

    def window_at(self, start: int, n: int | None = None, split: str = "train") -> Workload:
        """``n`` consecutive jobs of the pool from index ``start``, shifted to start at time 0."""
        pool = self.pool(split) if self.kind == "bundled" else self._file()
        size = len(pool)
        n = min(n if n is not None else self._window_jobs(), size)
        if not (isinstance(start, (int, np.integer)) and not isinstance(start, bool) and 0 <= start <= size - n):
            raise ConfigError(f"Expected window_start in [0, {size - n}], got {start!r}")
        # Cut from the pool's columns: the jobs in submit order (a stable sort, as sorted() is), shifted by
        # the first submit time (the same float subtraction per job as on JobSpecs).
        col = pool.table.columns
        order = start + np.argsort(col["submit"][start : start + n], kind="stable")
        submit = col["submit"][order]
        ids = col["job_id"]
        table = JobTable(
            job_id=tuple(ids[i] for i in order.tolist()),
            submit_time=submit - submit[0],
            duration=col["duration"][order],
            gpus=col["gpus"][order],
            cpus=col["cpus"][order],
            mem_gb=col["mem_gb"][order],
            gang_size=col["gang"][order],
            job_class=col["job_class"][order],
            grace_period=col["grace"][order],
            restart_overhead=None if col["restart"] is None else col["restart"][order],
        )
        base = self.name if self.kind == "file" else f"{self.workload}/{split}"
        return Workload.from_table(table, name=f"{base}[{start}:{start + n}]")

    def episode(self, rng: np.random.Generator, cluster: ClusterSpec, split: str = "train") -> Workload:
        """A training episode's workload from ``rng``: a fresh synthetic draw, or a random window of the
        trace's ``split``."""
        if self.kind == "synthetic":
            return self.draw(rng, cluster)
        if self.kind == "mix":  # a level brings its own cluster, which the caller's would contradict
            raise ConfigError("A 'mix' episode runs on its own cluster: take it with mix_level(level_seed('train', i))")
        return self.random_window(rng, split=split)

    def random_window(self, rng: np.random.Generator, split: str = "train") -> Workload:
        """A window of ``n_jobs`` consecutive jobs of the pool, from a start drawn from ``rng``."""
        size = len(self.pool(split))
        n = min(self._window_jobs(), size)
        return self.window_at(int(rng.integers(0, size - n + 1)), n, split)

    def _window_jobs(self) -> int:
        if self.n_jobs is None:
            raise ConfigError("A trace window needs n_jobs")
        return int(self.n_jobs)

    def _file(self) -> Workload:
        # Read once per source (not per process: the file may change between sources).
        cached = self.__dict__.get("_loaded")
        if cached is None:
            assert self.trace is not None
            cached = load_trace(self.trace)
            object.__setattr__(self, "_loaded", cached)
        return cached


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ConfigError(f"Expected split in {list(SPLITS)}, got {split!r}")


__all__ = ["MIX", "VALIDATION_SEED0", "WorkloadSource", "workload_names"]

"""Reference results that a refactor must not move (issue 20), and the code that computes them.

``tests/data/golden_results.json`` holds what the pristine code (the commit named in its ``recorded_from``)
gave for:

* ``compare``: every registered policy (the rules, the lookahead variants and the bundled agents) on
  ``paper``, ``realistic`` and ``philly``, per seed: the per-seed summaries of ``schedgym compare --json``
  (:meth:`~schedgym.experiments.compare.ComparisonResult.summary`'s ``per_seed``, figures in clear text) and a
  sha256 of each run's per-job results and segments; besides, the aggregates of the summary (means, intervals,
  paired differences; ``wall_time_s`` left out, it is a clock reading) as a sha256 per policy;
* ``episodes``: seeded environment episodes (``gymnasium.make`` and the vector environment), stepped with
  actions drawn by a seeded generator among the legal ones: per episode the number of steps, the sum of the
  rewards, a few end figures in clear text, and a sha256 of each stream (observations, masks, rewards, flags).

Every case is computed on both engines; they agree, so one set of results is stored and both must reproduce
it (were they to disagree when the file is written, each engine's results would be stored apart, under
``per_engine``). ``tests/test_results_do_not_move.py`` recomputes the cases in the working tree and compares
them with the file exactly: floats by their ``repr``, NaN as null, an int is not a float.

Regenerating the file
---------------------
``python tests/golden.py --write`` (from the repository root, as a script: ``python -m`` would put the
working directory's ``schedgym`` first on the path) computes every case, default and slow, on both engines
and rewrites the file (some ten minutes on one core; ``--case NAME`` recomputes only the cases named and
keeps the others). ``python tests/golden.py --check`` compares without writing.

Regenerating is legitimate only for a deliberate change of behaviour (a rule, a workload generator, the
observation, the reward...), made in the same commit as that change and said in its message, with the figures
that moved. It must never be done to make a refactor pass: a refactor whose results move is a bug in the
refactor, and that is what this file is for.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

GOLDEN_PATH = Path(__file__).resolve().parent / "data" / "golden_results.json"
FORMAT = 1

POLICIES = (
    "dagger",
    "dagger-mix",
    "dagger-nowait",
    "dagger-philly",
    "dagger-realistic",
    "fifo",
    "fitgpp",
    "fitgpp-fitness",
    "fitgpp-gracefirst",
    "k8s",
    "lean-ppo",
    "lean-ppo-nowait",
    "lookahead",
    "lookahead-6h",
    "lookahead-nowait-pc10",
    "lookahead-pc10",
    "ppo",
    "priority",
    "random",
)
"""the policies registered when the file was recorded (``schedgym.registry.policy_names()``)"""

LOOKAHEAD = ("lookahead", "lookahead-6h", "lookahead-nowait-pc10", "lookahead-pc10")
"""the registered policies that play each option out on clones: by far the slowest (a philly window takes
them 100-400 s each on the native engine)"""


# ---------------------------------------------------------------------------------------------- canonical form
def canonical(value: Any) -> Any:
    """``value`` as JSON-ready data compared exactly: numpy scalars and arrays as Python numbers and lists,
    tuples as lists, NaN as None. Floats stay floats (``json`` writes them with ``repr``, which reads back
    to the same float); ints stay ints."""
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return canonical(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if math.isnan(f):
            return None
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "value"):  # an Enum
        return canonical(value.value)
    raise TypeError(f"Cannot canonicalise {type(value).__name__}: {value!r}")


def _same(a: Any, b: Any) -> bool:
    """Exact equality of two canonical leaves: the same type, and floats with the same ``repr``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


def differences(old: Any, new: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every ``(path, old, new)`` where two canonical values differ (a key only in one has ``"<absent>"``
    on the other side)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:
            sub = f"{path}.{k}" if path else k
            if k not in new:
                yield sub, old[k], "<absent>"
            elif k not in old:
                yield sub, "<absent>", new[k]
            else:
                yield from differences(old[k], new[k], sub)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            yield f"{path} (length)", len(old), len(new)
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            yield from differences(a, b, f"{path}[{i}]")
    elif not _same(old, new):
        yield path, old, new


def _sha(*chunks: bytes) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(len(c).to_bytes(8, "little"))  # lengths too: two streams cut elsewhere hash differently
        h.update(c)
    return h.hexdigest()


def _f64(values: Any) -> bytes:
    return np.ascontiguousarray(np.asarray(values, dtype=np.float64)).tobytes()


def _i64(values: Any) -> bytes:
    return np.ascontiguousarray(np.asarray(values, dtype=np.int64)).tobytes()


def _json_sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(canonical(value), sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class CompareCase:
    """One ``compare`` run: ``policies`` (None: :data:`POLICIES` but ``exclude``) on ``seeds`` workloads
    of ``workload`` from ``first_seed`` (for a bundled trace, its test windows), ``n_jobs`` each (synthetic)."""

    name: str
    workload: str
    seeds: int
    first_seed: int = 0
    n_jobs: int | None = None
    policies: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    slow: bool = False
    python_engine: bool = True
    """False: too slow on the Python engine to be run there (recorded and checked on the native engine only)"""

    def policy_names(self) -> list[str]:
        return [p for p in (self.policies if self.policies is not None else POLICIES) if p not in self.exclude]


COMPARE_CASES: tuple[CompareCase, ...] = (
    # The default test: every policy on two small synthetic workloads of each preset, and every policy but
    # the lookahead variants on philly's second test window (5,745 jobs on 64 nodes, warm-up included; the
    # first has 7,684 and takes twice as long on the Python engine).
    CompareCase("paper", "paper", seeds=2, n_jobs=300),
    CompareCase("realistic", "realistic", seeds=2, n_jobs=300),
    CompareCase("philly", "philly", seeds=1, first_seed=1, exclude=LOOKAHEAD),
    # Slow (-m slow): more seeds and jobs, a second philly window, and the lookahead variants on philly.
    CompareCase("paper-slow", "paper", seeds=3, first_seed=2, n_jobs=1000, slow=True),
    CompareCase("realistic-slow", "realistic", seeds=3, first_seed=2, n_jobs=1000, slow=True),
    CompareCase("philly-slow", "philly", seeds=1, exclude=LOOKAHEAD, slow=True),
    # The lookahead variants on philly's second test window, on the native engine only: 15 s for lookahead-6h
    # and 180 s for the three others there (on the first window, 100 s and 410 s each), hours on the Python
    # engine (30 times slower on paper).
    CompareCase(
        "philly-lookahead-6h",
        "philly",
        seeds=1,
        first_seed=1,
        policies=("lookahead-6h",),
        slow=True,
        python_engine=False,
    ),
    CompareCase(
        "philly-lookahead",
        "philly",
        seeds=1,
        first_seed=1,
        policies=("lookahead", "lookahead-nowait-pc10", "lookahead-pc10"),
        slow=True,
        python_engine=False,
    ),
)


def run_digest(result: Any) -> str:
    """sha256 of one run's per-job results (in job order) and its segments."""
    segs = list(result.segments)
    return _sha(
        "\0".join(result.job_ids).encode(),
        _i64(result.job_class),
        *(_f64(getattr(result, name)) for name in ("submit", "duration", "gpus", "cpus", "first_start", "completion")),
        _i64(result.preemptions),
        *(_f64(getattr(result, name)) for name in ("grace_time", "overhead_time", "run_time")),
        _i64([s.job for s in segs]),
        _i64([s.node for s in segs]),
        _f64([s.start for s in segs]),
        _f64([s.end for s in segs]),
        "\0".join(s.end_reason for s in segs).encode(),
        _f64(result.capacity_total),
        _i64([result.n_preemptions, result.n_requests]),
    )


def compute_compare(case: CompareCase) -> dict[str, Any]:
    """``case`` computed in this process on the engine ``$SCHEDGYM_ENGINE`` selects (serial executor)."""
    from schedgym.experiments.compare import CompareConfig, run_comparison

    config = CompareConfig(
        policies=tuple(case.policy_names()),
        workload=case.workload,
        seeds=case.seeds,
        first_seed=case.first_seed,
        n_jobs=case.n_jobs,
    )
    result = run_comparison(config, executor="serial", progress=False)
    summary = result.summary()
    policies: dict[str, Any] = {}
    for label, entry in summary["policies"].items():
        per_seed = [
            {**{k: v for k, v in s.items() if "wall" not in k}, "runs_sha256": run_digest(run)}
            for s, run in zip(entry["per_seed"], result.runs[label], strict=True)
        ]
        aggregates = {k: v for k, v in entry.items() if k != "per_seed" and "wall" not in k}
        policies[label] = {"aggregates_sha256": _json_sha(aggregates), "per_seed": per_seed}
    head = {k: v for k, v in summary.items() if k != "policies"}
    return canonical({**head, "policies": policies})


# ---------------------------------------------------------------------------------------------- episodes
@dataclass(frozen=True)
class EpisodeCase:
    """A seeded episode: ``gymnasium.make(env_id, **kwargs)`` (``num_envs``: the vector environment,
    ``gymnasium.make_vec``) reset with ``seed`` and ``options``, stepped ``max_steps`` times or to the end of
    the episode (a vector environment: ``max_steps`` steps, across autoresets), with actions drawn by
    ``np.random.default_rng(seed)`` uniformly among the legal ones."""

    name: str
    seed: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    env_id: str = "schedgym/Preemption-v1"
    max_steps: int = 200
    options: dict[str, Any] | None = None
    num_envs: int | None = None


EPISODE_CASES: tuple[EpisodeCase, ...] = (
    # The registered environments as they are made by default (n_jobs 1000; Large: 64 nodes, 32 candidates).
    EpisodeCase("v1-default", 0),
    EpisodeCase("large-v1-load1.5", 1, {"n_jobs": 2000, "load": 1.5}, env_id="schedgym/PreemptionLarge-v1"),
    # Busier synthetic workloads (load above the preset's 1.0): a hundred decisions and more.
    EpisodeCase("paper-load2-to-end", 2, {"load": 2.0}, max_steps=10_000),
    EpisodeCase("paper-3000jobs-load1.5", 3, {"n_jobs": 3000, "load": 1.5}),
    EpisodeCase(
        "bounded-weighted-costly-to-end",
        4,
        {"load": 1.5, "reward": "bounded_slowdown", "preemption_cost": 1.5, "te_weight": 2.0, "be_weight": 0.5},
        max_steps=10_000,
    ),
    EpisodeCase("realistic-load1.5", 5, {"workload": "realistic", "load": 1.5}),
    # Philly: a window drawn from the training split, one pinned in the test split, one from validation.
    EpisodeCase("philly-train", 16, {"workload": "philly", "n_jobs": 4000}),  # seed 16: a busy window
    EpisodeCase(
        "philly-test-window-0", 7, {"workload": "philly", "split": "test", "n_jobs": 3000}, options={"window_start": 0}
    ),
    EpisodeCase("philly-validation", 8, {"workload": "philly", "split": "validation", "n_jobs": 3000}),
    # Other clusters, candidate counts and simulator rules; a pinned workload (compare's seed 3).
    EpisodeCase(
        "small-cluster-4-candidates-p2-first-fit",
        9,
        {
            "cluster": "small",
            "n_jobs": 500,
            "load": 1.5,
            "max_candidates": 4,
            "sim": {"max_preemptions": 2, "placement": "first-fit"},
        },
    ),
    EpisodeCase(
        "priority-no-backfill-exact-32-candidates",
        10,
        {"load": 2.0, "estimate_noise": 0.0, "max_candidates": 32, "sim": {"queue": "priority", "backfill": False}},
        options={"workload_seed": 3},
    ),
    # The vector environment (gymnasium.make_vec), three sub-environments on three workloads/clusters, 200 steps
    # across their autoresets.
    EpisodeCase(
        "vector-3-mixed",
        11,
        {"n_jobs": 300, "load": 2.0, "sub_env_kwargs": [{}, {"workload": "realistic"}, {"cluster": "small"}]},
        num_envs=3,
    ),
)


class _Streams:
    """The bytes of every observation, mask, reward and flag of an episode, in order."""

    def __init__(self) -> None:
        self.obs: list[bytes] = []
        self.mask: list[bytes] = []
        self.reward: list[bytes] = []
        self.flags: list[bytes] = []

    def add(self, obs: Any, mask: Any, reward: Any = None, terminated: Any = None, truncated: Any = None) -> None:
        self.obs.append(_f64(obs))
        self.mask.append(np.ascontiguousarray(np.asarray(mask, dtype=bool)).tobytes())
        if reward is not None:
            self.reward.append(_f64(reward))
            self.flags.append(np.asarray([terminated, truncated], dtype=bool).tobytes())

    def digests(self) -> dict[str, str]:
        return {
            "observations_sha256": _sha(*self.obs),
            "masks_sha256": _sha(*self.mask),
            "rewards_sha256": _sha(*self.reward),
            "flags_sha256": _sha(*self.flags),
        }


def _legal(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def compute_episode(case: EpisodeCase) -> dict[str, Any]:
    """``case`` played in this process on the engine ``$SCHEDGYM_ENGINE`` selects."""
    import gymnasium as gym

    import schedgym  # noqa: F401 - registers the environments

    rng = np.random.default_rng(case.seed)
    streams = _Streams()
    if case.num_envs is not None:
        return _vector_episode(case, rng, streams)
    env = gym.make(case.env_id, **case.kwargs)
    try:
        obs, info = env.reset(seed=case.seed, options=case.options)
        mask = info["action_mask"]
        if not np.array_equal(mask, env.unwrapped.action_masks()):
            raise AssertionError(f"{case.name}: info['action_mask'] differs from action_masks() at reset")
        streams.add(obs, mask)
        steps, total, terminated, truncated = 0, 0.0, False, False
        while steps < case.max_steps and not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(_legal(rng, mask))
            mask = info["action_mask"]
            if not np.array_equal(mask, env.unwrapped.action_masks()):
                raise AssertionError(f"{case.name}: info['action_mask'] differs from action_masks() at step {steps}")
            streams.add(obs, mask, reward, terminated, truncated)
            steps += 1
            total += float(reward)
        return canonical(
            {
                "steps": steps,
                "reward_sum": total,
                "terminated": terminated,
                "truncated": truncated,
                "sim_time": info["sim_time"],
                "decisions": info["decisions"],
                "preemptions": info["preemptions"],
                **streams.digests(),
            }
        )
    finally:
        env.close()


def _vector_episode(case: EpisodeCase, rng: np.random.Generator, streams: _Streams) -> dict[str, Any]:
    import gymnasium as gym

    envs = gym.make_vec(
        case.env_id, num_envs=case.num_envs, vectorization_mode="vector_entry_point", n_threads=1, **case.kwargs
    )
    try:
        obs, _ = envs.reset(seed=case.seed, options=case.options)
        masks = envs.action_masks()
        streams.add(obs, masks)
        total = np.zeros(case.num_envs)
        ended = np.zeros(case.num_envs, dtype=np.int64)
        for _ in range(case.max_steps):
            actions = np.array([_legal(rng, m) for m in masks], dtype=np.int64)
            obs, reward, terminated, truncated, _ = envs.step(actions)
            masks = envs.action_masks()
            streams.add(obs, masks, reward, terminated, truncated)
            total += reward
            ended += terminated | truncated
        return canonical(
            {
                "steps": case.max_steps,
                "reward_sum": [float(x) for x in total],
                "episodes_ended": ended,
                "preemptions": [e.sim.n_preemptions for e in envs.unwrapped.envs],
                **streams.digests(),
            }
        )
    finally:
        envs.close()


# ---------------------------------------------------------------------------------------------- the file
def compute(kind: str, name: str) -> dict[str, Any]:
    if kind == "compare":
        return compute_compare(next(c for c in COMPARE_CASES if c.name == name))
    return compute_episode(next(c for c in EPISODE_CASES if c.name == name))


def load() -> dict[str, Any]:
    return json.loads(GOLDEN_PATH.read_text())


def expected(data: dict[str, Any], engine: str, kind: str, name: str) -> Any:
    """The stored results of case ``name`` (``kind`` "compare" or "episodes") for ``engine``."""
    per_engine = data.get("per_engine", {}).get(engine, {})
    if name in per_engine.get(kind, {}):
        return per_engine[kind][name]
    return data["results"][kind][name]


def _provenance() -> dict[str, Any]:
    import gymnasium

    import schedgym

    root = Path(schedgym.__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    return {
        "recorded_from": git("rev-parse", "HEAD"),
        "recorded_from_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "source": str(root),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gymnasium": gymnasium.__version__,
        "machine": platform.machine(),
    }


def _all_cases() -> list[tuple[str, str, bool]]:
    return [("compare", c.name, c.python_engine) for c in COMPARE_CASES] + [
        ("episodes", c.name, True) for c in EPISODE_CASES
    ]


def _on_engine(engine: str, kind: str, name: str) -> tuple[Any, float]:
    from schedgym.sim.simulator import ENV_VAR

    previous = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = engine
    try:
        start = time.perf_counter()
        value = compute(kind, name)
        return value, time.perf_counter() - start
    finally:
        if previous is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = previous


def main(argv: list[str] | None = None) -> int:
    from schedgym.sim.simulator import ENGINES, native_available

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="compute the cases and rewrite the file")
    mode.add_argument("--check", action="store_true", help="compute the cases and compare them with the file")
    parser.add_argument("--case", action="append", default=[], help="only this case (repeatable)")
    parser.add_argument("--engine", choices=ENGINES, action="append", help="only this engine (--check)")
    parser.add_argument("--out", type=Path, default=GOLDEN_PATH, help="the file written (--write)")
    args = parser.parse_args(argv)
    if not native_available():
        parser.error("the native engine is not built: both engines are needed")
    cases = [c for c in _all_cases() if not args.case or c[1] in args.case]
    if args.case and len(cases) != len(set(args.case)):
        parser.error(f"unknown case in {args.case}; cases are {[c[1] for c in _all_cases()]}")
    engines = args.engine or list(ENGINES)
    if args.write and engines != list(ENGINES):
        parser.error("--write computes on both engines")
    import schedgym

    print(f"schedgym from {Path(schedgym.__file__).resolve().parent}", file=sys.stderr)
    old = load() if (args.check or args.case) and GOLDEN_PATH.exists() else None
    results: dict[str, dict[str, Any]] = {"compare": {}, "episodes": {}}
    per_engine: dict[str, dict[str, dict[str, Any]]] = {}
    timings: dict[str, dict[str, float]] = {}
    failed = False
    for kind, name, on_python in cases:
        values: dict[str, Any] = {}
        for engine in engines:
            if engine == "python" and not on_python:
                continue
            values[engine], seconds = _on_engine(engine, kind, name)
            timings.setdefault(engine, {})[name] = round(seconds, 2)
            print(f"{kind} {name} on {engine}: {seconds:.1f} s", file=sys.stderr, flush=True)
            if args.check:
                diffs = list(differences(expected(old, engine, kind, name), values[engine]))
                failed |= bool(diffs)
                for path, a, b in diffs[:20]:
                    print(f"  MOVED {path}: {a!r} -> {b!r}", file=sys.stderr)
        first, *others = values.values()
        if all(not any(differences(first, v)) for v in others):
            results[kind][name] = first
        else:
            print(f"  the engines disagree on {kind} {name}", file=sys.stderr)
            for engine, value in values.items():
                per_engine.setdefault(engine, {"compare": {}, "episodes": {}})[kind][name] = value
    if args.check:
        print("everything reproduced" if not failed else "SOME RESULTS MOVED", file=sys.stderr)
        return int(failed)
    if old is not None:  # --case: keep the other cases as they were
        for engine, seconds in old.get("seconds_to_compute", {}).items():
            timings[engine] = {**seconds, **timings.get(engine, {})}
        for kind in ("compare", "episodes"):
            results[kind] = {**old["results"][kind], **results[kind]}
        for engine, kinds in old.get("per_engine", {}).items():
            for kind, named in kinds.items():
                for name, value in named.items():
                    if name not in results[kind]:
                        per_engine.setdefault(engine, {"compare": {}, "episodes": {}})[kind].setdefault(name, value)
    data = {
        "format": FORMAT,
        "about": "Reference results for tests/test_results_do_not_move.py; see tests/golden.py before changing.",
        **_provenance(),
        "seconds_to_compute": timings,
        "results": results,
        **({"per_engine": per_engine} if per_engine else {}),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

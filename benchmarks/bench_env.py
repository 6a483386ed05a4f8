"""Environment throughput: decisions per second with random legal actions, beside CartPole-v1.

Usage:
    python benchmarks/bench_env.py                     # README figures
    python benchmarks/bench_env.py --seconds 5 --cpu 1

Both environments are created with ``gymnasium.make`` (so with Gymnasium's default wrappers) and stepped
in the same process, one after the other, for about ``--seconds`` each, resetting when an episode ends;
reset time is included. For schedgym the time is split into: advancing the simulator between decisions
(the scheduling passes and events between decisions), generating workloads at reset, building
observations, and the rest (simulator construction at reset, candidate rows, action checks, rewards,
info, Gymnasium's wrappers, drawing the random action).

Then the vector environment (``gymnasium.make_vec``, vector entry point) with 1 and 16 sub-environments,
the latter stepped on one thread and on the default number (one per core); see :func:`run_vector` for
how its time is split. ``--cpu`` pins to one core, where threads cannot help: for the vector figures on
two cores, run ``taskset -c 0,1 python benchmarks/bench_env.py``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import gymnasium as gym
import numpy as np

import schedgym  # noqa: F401  (registers the environments)
from schedgym.decision.backend import CoreBackend, PythonBackend
from schedgym.decision.batch import NativeBatch
from schedgym.envs.preemption_env import PreemptionEnv


def run_cartpole(seconds: float, seed: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            steps += 1
            if term or trunc:
                env.reset()
    return steps / (time.perf_counter() - t0)


class Timers:
    """Wrap methods to accumulate their wall time: ``targets`` maps a label to ``(object, method name)`` pairs
    (an object or a class; a class's method is timed for all its instances, such as every episode's backend)."""

    def __init__(self, targets: dict[str, list[tuple[object, str]]]):
        self.total = dict.fromkeys(targets, 0.0)
        self._undo: list[tuple[object, str, object]] = []
        for label, places in targets.items():
            for obj, name in places:
                original = getattr(obj, name)

                def timed(*args, __orig=original, __label=label, **kwargs):
                    t = time.perf_counter()
                    try:
                        return __orig(*args, **kwargs)
                    finally:
                        self.total[__label] += time.perf_counter() - t

                self._undo.append((obj, name, obj.__dict__[name] if isinstance(obj, type) else None))
                setattr(obj, name, timed)

    def restore(self) -> None:
        for obj, name, original in reversed(self._undo):
            if isinstance(obj, type):
                setattr(obj, name, original)
            else:
                delattr(obj, name)


def run_schedgym(env_id: str, seconds: float, seed: int, profile: bool, **kwargs) -> dict:
    env = gym.make(env_id, **kwargs)
    raw: PreemptionEnv = env.unwrapped  # type: ignore[assignment]
    backends = (CoreBackend, PythonBackend)  # the classes that define _advance and observe_into
    timers = (
        Timers(
            {
                "simulate": [(cls, "_advance") for cls in backends],
                "observe": [(cls, "observe_into") for cls in backends],
                "generate": [(raw, "_draw_workload")],
            }
        )
        if profile
        else None
    )
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    steps = episodes = jobs = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        legal = np.flatnonzero(info["action_mask"])
        obs, _, term, trunc, info = env.step(int(legal[rng.integers(len(legal))]))
        steps += 1
        if term or trunc:
            episodes += 1
            jobs += len(raw._workload)  # not .jobs or sim.jobs: they would make JobSpecs or Job records
            obs, info = env.reset()
    elapsed = time.perf_counter() - t0
    out = {"steps_per_s": steps / elapsed, "steps": steps, "episodes": episodes, "jobs_per_step": jobs / max(steps, 1)}
    if timers is not None:
        timers.restore()
        out["share_simulate"] = timers.total["simulate"] / elapsed
        out["share_observe"] = timers.total["observe"] / elapsed
        out["share_generate"] = timers.total["generate"] / elapsed
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this core (Linux)")
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    print(f"python {platform.python_version()}, numpy {np.__version__}, gymnasium {gym.__version__}, pinned={args.cpu}")
    cart = run_cartpole(args.seconds, args.seed)
    print(f"\nCartPole-v1 (gymnasium.make, random actions): {cart:,.0f} steps/s\n")
    print(
        "| environment | decisions/s | vs CartPole | jobs simulated per decision | simulating | generating workloads "
        "| building observations | the rest |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    cases = [
        ("schedgym/Preemption-v1", {}),
        ("schedgym/PreemptionLarge-v1", {}),
        ("schedgym/PreemptionPlan-v1", {}),
    ]
    for env_id, kwargs in cases:
        r = run_schedgym(env_id, args.seconds, args.seed, profile=True, **kwargs)
        label = env_id + ("" if not kwargs else f" {kwargs}")
        print(
            f"| {label} | {r['steps_per_s']:,.0f} | {cart / r['steps_per_s']:.1f}x slower | {r['jobs_per_step']:.1f} "
            f"| {100 * r['share_simulate']:.0f}% | {100 * r['share_generate']:.0f}% | {100 * r['share_observe']:.0f}% "
            f"| {100 * (1 - r['share_simulate'] - r['share_generate'] - r['share_observe']):.0f}% |"
        )
    print(
        "\n| vector environment (make_vec, vector entry point) | sub-environments | threads "
        "| decisions/s, all together | native stepping | resets | drawing actions | the rest |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    vector_cases = [("schedgym/Preemption-v1", n, t) for n, t in ((1, 1), (16, 1), (16, None), (32, None), (64, None))]
    # The plan mode's sub-environments are stepped one by one (PythonBatch), each deciding in C++ (PlanCore).
    vector_cases += [("schedgym/PreemptionPlan-v1", n, None) for n in (1, 16)]
    for env_id, num_envs, n_threads in vector_cases:
        r = run_vector(env_id, num_envs, args.seconds, args.seed, n_threads)
        rest = 1 - r["share_native"] - r["share_reset"] - r["share_actions"]
        print(
            f"| {env_id} | {num_envs} | {r['threads']} | {r['steps_per_s']:,.0f} "
            f"| {100 * r['share_native']:.0f}% | {100 * r['share_reset']:.0f}% | {100 * r['share_actions']:.0f}% "
            f"| {100 * rest:.0f}% |"
        )


class _TimedStepper:
    """The vector environment's native batch stepper, timing the calls that step (finish() steps what the
    worker threads have not, and waits for them)."""

    def __init__(self, stepper: object):
        self._stepper = stepper
        self.total = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(self._stepper, name)

    def finish(self) -> None:
        t = time.perf_counter()
        try:
            self._stepper.finish()  # type: ignore[attr-defined]
        finally:
            self.total += time.perf_counter() - t


def run_vector(env_id: str, num_envs: int, seconds: float, seed: int, n_threads: int | None) -> dict:
    """Decisions per second, summed over the sub-environments of ``gymnasium.make_vec`` (vector entry
    point), with random legal actions drawn from the batched masks (vectorised, as an agent's batched
    sampling would be). The time is split into native stepping (waiting for the batch stepper, after this
    thread has reset the sub-environments whose episodes ended: the worker threads step meanwhile), resets,
    drawing the actions (``action_masks()`` included) and the rest (the vector environment's Python: checking
    actions, building infos, copying arrays out)."""
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", n_threads=n_threads)
    raw = venv.unwrapped
    raw.reset(seed=seed)
    batch = raw._batch  # type: ignore[attr-defined]
    stepper = None
    if isinstance(batch, NativeBatch):  # the native engine
        stepper = batch.stepper = _TimedStepper(batch.stepper)
    resets = Timers({"reset": [(env, "reset") for env in raw.envs]})  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    steps = 0
    t_actions = 0.0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        t = time.perf_counter()
        masks = raw.action_masks()  # type: ignore[attr-defined]
        k = rng.integers(masks.sum(axis=1))  # the k-th legal action of each sub-environment
        actions = (np.cumsum(masks, axis=1) > k[:, None]).argmax(axis=1)
        t_actions += time.perf_counter() - t
        # A sub-environment whose episode ended at the previous step is reset by this one (next-step
        # autoreset): its action is ignored and it makes no decision, so it is not counted.
        steps += num_envs - int(raw._autoreset.sum())  # type: ignore[attr-defined]
        raw.step(actions)
    elapsed = time.perf_counter() - t0
    return {
        "steps_per_s": steps / elapsed,
        "threads": batch.stepper.n_threads if isinstance(batch, NativeBatch) else 1,
        "share_native": (stepper.total if stepper is not None else 0.0) / elapsed,
        "share_reset": resets.total["reset"] / elapsed,
        "share_actions": t_actions / elapsed,
    }


if __name__ == "__main__":
    main()

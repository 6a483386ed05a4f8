"""Executors side by side: wall time and CPU time of one comparison and one sweep under serial, process and Ray.

Usage:
    python benchmarks/bench_executors.py             # the README figures (a few minutes on 2 cores)
    python benchmarks/bench_executors.py --quick     # a tiny grid: checks that the benchmark runs
    python benchmarks/bench_executors.py --executors serial,process --workers 2

The two grids:
    (a) schedgym compare --policies fifo,priority,fitgpp,fitgpp-fitness,fitgpp-gracefirst,k8s,random --seeds 20
        (7 policies x 20 seeds of the 5,000-job paper workload: 140 runs)
    (b) schedgym sweep --set max_preemptions=1,2,4 --set load=0.9,1.0,1.1 --policies fifo,fitgpp,k8s --seeds 20
        (9 settings x 3 policies x 20 seeds: 540 runs)
each run once per executor (``--executor serial``, ``process`` and ``ray``; Ray when it is installed), in one
invocation of this script, which prints a Markdown table.

What is measured. Each case is the real command line (``python -m schedgym.cli ...``) run as a child
process, end to end: interpreter start, imports, workload generation, the runs, the report, and for Ray the
start and stop of its local cluster (``ray.init``), which is part of what a user waits for.

- Wall time: from starting the child to its exit.
- CPU time: user + system time of the child and of *every process descended from it*: the process pool's
  workers (children of multiprocessing's fork server, itself a child of the command), and Ray's processes
  (``ray.init`` starts the GCS server, a raylet and helper processes; the raylet starts the worker processes
  that run the tasks, and its own agents). It is counted in two parts:

  1. ``getrusage(RUSAGE_CHILDREN)``: a process's CPU time once it has terminated and been waited for,
     including its own waited-for descendants'. A process whose parent exits without waiting for it (the
     fork server, once the command exits) would be reparented to init and lost, so this script first makes
     itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): every orphaned descendant is
     reparented to it instead, and after each case it waits for all of them (``waitpid(-1)``) until none is
     left ("reaped" in the table). Without ``prctl`` (not Linux), orphans are not counted, and it says so.
  2. A process whose parent *ignores SIGCHLD* is reaped by the kernel itself, and its CPU time reaches no
     one's ``RUSAGE_CHILDREN``. Ray's raylet does this: its workers' CPU time (most of a Ray run's) would be
     missing from part 1. So a thread samples ``/proc`` every 20 ms during each case: every descendant's own
     CPU time (``utime + stime`` of ``/proc/PID/stat``), its parent and whether it ignores SIGCHLD
     (``SigIgn`` of ``/proc/PID/status``). The last sample of every process below a SIGCHLD-ignoring parent
     is added ("sampled" in the table: the part that comes from samples). That part misses at most each such
     process's last 20 ms, and any that lived less than 20 ms.

  Every process of a case is counted once: by part 1 if its chain of parents up to the command waited for
  it, by part 2 otherwise. A case whose descendants are still running 60 s after the command exited is
  reported as incomplete. The last column is this script's own CPU time during the case (the sampling; not
  included in "CPU s"), which the measured case competes with on a small machine.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import resource
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
COMPARE = ["compare", "--policies", "fifo,priority,fitgpp,fitgpp-fitness,fitgpp-gracefirst,k8s,random", "--seeds", "20"]
SWEEP = ["sweep", "--set", "max_preemptions=1,2,4", "--set", "load=0.9,1.0,1.1", "--policies", "fifo,fitgpp,k8s"]
SWEEP += ["--seeds", "20"]
QUICK = ["--jobs", "200", "--cluster", "small", "--seeds", "2"]
QUICK_COMPARE = ["compare", "--policies", "fifo,fitgpp,k8s", *QUICK]
QUICK_SWEEP = ["sweep", "--set", "max_preemptions=1,2", "--set", "load=0.9,1.1", "--policies", "fifo,fitgpp", *QUICK]


def become_subreaper() -> bool:
    """Make orphaned descendants this process's children (Linux), so that their CPU time can be collected."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_orphans(timeout: float = 60.0) -> tuple[int, bool]:
    """Wait for every remaining descendant (orphans reparented here); (how many, whether all were)."""
    reaped = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left
            return reaped, True
        if pid:
            reaped += 1
        elif time.monotonic() > deadline:
            return reaped, False
        else:
            time.sleep(0.05)


class TreeSampler:
    """Samples this process's descendants from ``/proc`` every ``interval`` seconds (Linux): for each process
    (by pid and start time, so that a reused pid is another process) its own CPU time, its parent and
    whether it ignores SIGCHLD, as last seen."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.seen: dict[tuple[int, int], tuple[float, int, bool]] = {}  # (pid, start) -> (cpu s, ppid, ignores)
        self._descendants: set[int] = set()
        self._others: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.available = os.path.isdir("/proc/self")

    def __enter__(self) -> TreeSampler:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.available:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        # Only processes not seen before (and known descendants) are read: reading every process's stat at
        # every sample would cost this script a good part of a core, taken from the case it measures.
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid in self._others or pid == me:
                continue
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()  # after "pid (comm)"
            except OSError:  # gone meanwhile
                continue
            # fields[k] is stat's field k + 3: ppid (4), utime (14), stime (15), starttime (22)
            ppid, start = int(fields[1]), int(fields[19])
            if ppid != me and ppid not in self._descendants:
                # Not below this script now; a process is started by its parent, so it never will be (an
                # orphan reparented here was below it before).
                self._others.add(pid)
                continue
            self._descendants.add(pid)
            cpu = (int(fields[11]) + int(fields[12])) / self._hz
            self.seen[(pid, start)] = (cpu, ppid, _ignores_sigchld(pid))

    def unaccounted(self) -> float:
        """The CPU time of every process below a parent that ignores SIGCHLD (auto-reaped: missing from
        ``RUSAGE_CHILDREN``), as last sampled."""
        by_pid = {pid: value for (pid, _), value in self.seen.items()}  # the latest process of each pid

        def missing(pid: int, depth: int = 0) -> bool:
            parent = by_pid.get(pid)
            if parent is None or depth > 64:
                return False
            ppid = parent[1]
            return (ppid in by_pid and by_pid[ppid][2]) or missing(ppid, depth + 1)

        return sum(cpu for (pid, _), (cpu, _, _) in self.seen.items() if missing(pid))


def _ignores_sigchld(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (17 - 1)))  # SIGCHLD is 17 on Linux
    except OSError:
        pass
    return False


def measure(argv: list[str]) -> dict:
    """Run ``schedgym ARGV`` as a child process; its wall time and the CPU time of it and its descendants."""
    reap_orphans(0)  # nothing of an earlier case may be counted here
    cpu0 = children_cpu()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": os.environ.get("RAY_USAGE_STATS_ENABLED", "0")}
    own0 = resource.getrusage(resource.RUSAGE_SELF)
    with TreeSampler() as sampler:
        t0 = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "schedgym.cli", *argv, "--no-progress"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        _, err = child.communicate()
        wall = time.perf_counter() - t0
        if child.returncode != 0:
            raise SystemExit(f"schedgym {' '.join(argv)} failed ({child.returncode}): {err.strip()}")
        reaped, complete = reap_orphans()
    sampled = sampler.unaccounted()
    own1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "overhead": own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime,
        "wall": wall,
        "cpu": children_cpu() - cpu0 + sampled,
        "sampled": sampled,
        "reaped": reaped,
        "complete": complete and sampler.available,
    }


def runs(argv: list[str]) -> int:
    """How many (policy, setting, seed) runs a command makes."""
    policies = len(argv[argv.index("--policies") + 1].split(","))
    seeds = int(argv[argv.index("--seeds") + 1])
    settings = 1
    for i, arg in enumerate(argv):
        if arg == "--set":
            settings *= len(argv[i + 1].split("=", 1)[1].split(","))
    return policies * seeds * settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny grids (200 jobs, 2 seeds): a check that it runs")
    parser.add_argument(
        "--executors", default=None, help="comma-separated (default: serial,process and ray if installed)"
    )
    parser.add_argument("--workers", type=int, default=None, help="--workers for process and ray (default: theirs)")
    args = parser.parse_args()
    try:
        import ray

        ray_version = ray.__version__
    except ImportError:
        ray_version = None
    executors = (
        args.executors.split(",") if args.executors else ["serial", "process"] + (["ray"] if ray_version else [])
    )
    counted = become_subreaper()
    grids = [("compare", QUICK_COMPARE if args.quick else COMPARE), ("sweep", QUICK_SWEEP if args.quick else SWEEP)]
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, ray {ray_version or 'not installed'}, "
        f"orphaned descendants {'counted (child subreaper)' if counted else 'NOT counted (no prctl)'}\n"
    )
    print("| grid | runs | executor | wall s | CPU s | CPU / wall | of which sampled | reaped | sampler's CPU s |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, argv in grids:
        for executor in executors:
            extra = ["--executor", executor]
            if args.workers is not None and executor != "serial":
                extra += ["--workers", str(args.workers)]
            m = measure([*argv, *extra])
            note = "" if m["complete"] else " (CPU incomplete: descendants still running, or no /proc)"
            print(
                f"| {name} | {runs(argv)} | {executor} | {m['wall']:.1f} | {m['cpu']:.1f} | "
                f"{m['cpu'] / m['wall']:.2f} | {m['sampled']:.1f} | {m['reaped']}{note} | {m['overhead']:.2f} |",
                flush=True,
            )
    print("\ncommands (each with --executor E --no-progress):")
    for _, argv in grids:
        print("  schedgym " + " ".join(argv))


if __name__ == "__main__":
    main()

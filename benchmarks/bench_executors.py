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
import contextlib
import ctypes
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
COMPARE = ["compare", "--policies", "fifo,priority,fitgpp,fitgpp-fitness,fitgpp-gracefirst,k8s,random", "--seeds", "20"]
SWEEP = ["sweep", "--set", "max_preemptions=1,2,4", "--set", "load=0.9,1.0,1.1", "--policies", "fifo,fitgpp,k8s"]
SWEEP += ["--seeds", "20"]
# (c) 20 settings x 5 policies x 200 seeds: 20,000 runs (issue 25's grid), on Ray clusters started beforehand.
LARGE = ["sweep", "--set", "max_preemptions=1,2,4,8", "--set", "load=0.8,0.9,1.0,1.1,1.2"]
LARGE += ["--policies", "fifo,priority,fitgpp,k8s,random", "--seeds", "200"]
QUICK_LARGE = ["sweep", "--set", "max_preemptions=1,2", "--set", "load=0.9,1.1", "--policies", "fifo,k8s"]
QUICK_LARGE += ["--jobs", "200", "--cluster", "small", "--seeds", "10"]
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


def reap_orphans(timeout: float = 60.0, keep: frozenset[int] = frozenset()) -> tuple[int, bool]:
    """Wait for every remaining descendant (orphans reparented here) but the children ``keep`` (a Ray
    cluster's nodes); (how many, whether all were)."""
    reaped = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left
            return reaped, True
        if pid:
            reaped += 1
        elif not (_children() - keep):
            return reaped, True
        elif time.monotonic() > deadline:
            return reaped, False
        else:
            time.sleep(0.05)


def _children() -> set[int]:
    """This process's live children, from /proc (Linux; elsewhere an empty set)."""
    me, out = os.getpid(), set()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                    if int(fields[1]) == me and fields[0] != "Z":
                        out.add(int(entry))
    return out


class TreeSampler:
    """Samples this process's descendants from ``/proc`` every ``interval`` seconds (Linux): for each process
    (by pid and start time, so that a reused pid is another process) its own CPU time, its parent and
    whether it ignores SIGCHLD, as last seen."""

    def __init__(self, interval: float = 0.02, skip_sessions: frozenset[int] = frozenset()):
        self.interval = interval
        self.skip_sessions = skip_sessions
        """processes of these sessions (a Ray cluster's nodes, counted apart) are not sampled"""
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
            if int(fields[3]) in self.skip_sessions or (ppid != me and ppid not in self._descendants):
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


def measure(argv: list[str], cluster: frozenset[int] = frozenset()) -> dict:
    """Run ``schedgym ARGV`` as a child process; its wall time and the CPU time of it and its descendants.
    ``cluster``: the pids of a Ray cluster's nodes (children of this script, sessions of their own), which
    are neither waited for nor sampled."""
    reap_orphans(0, cluster)  # nothing of an earlier case may be counted here
    cpu0 = children_cpu()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": os.environ.get("RAY_USAGE_STATS_ENABLED", "0")}
    own0 = resource.getrusage(resource.RUSAGE_SELF)
    with TreeSampler(skip_sessions=cluster) as sampler:
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
        reaped, complete = reap_orphans(keep=cluster)
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RayCluster:
    """A Ray cluster on this machine started with ``ray start --block`` (a head and ``len(cpus) - 1`` more
    nodes, node i with ``cpus[i]`` CPUs, each in a session of its own, a token of its own), for the commands
    to reach by ``--address``. :meth:`cpu` is the CPU time its processes have used so far (by session)."""

    def __init__(self, cpus: list[int]):
        self.tmp = tempfile.mkdtemp(prefix="sgbench", dir="/tmp")  # short: Ray's socket paths go under it
        self.address = f"127.0.0.1:{_free_port()}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
        }
        self.nodes: list[subprocess.Popen] = []
        for i, n in enumerate(cpus):
            argv = ["--num-cpus", str(n), "--block", "--object-store-memory", str(200 * 1024 * 1024)]
            argv += ["--dashboard-agent-listen-port", str(_free_port()), "--metrics-export-port", str(_free_port())]
            if i == 0:
                port = self.address.rpartition(":")[2]
                argv += ["--head", "--port", port, "--include-dashboard", "false", "--temp-dir", f"{self.tmp}/r"]
                argv += ["--ray-client-server-port", str(_free_port())]
            else:
                argv += ["--address", self.address]
            self.nodes.append(
                subprocess.Popen(
                    [shutil.which("ray") or "ray", "start", *argv],
                    env={**self.env, "HOME": tempfile.mkdtemp(dir=self.tmp)},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            if i == 0:
                self._wait(1)
        self._wait(len(cpus))

    def _wait(self, n: int) -> None:
        code = f"import ray; ray.init(address={self.address!r}, logging_level='ERROR'); "
        code += "print(sum(x['Alive'] for x in ray.nodes()))"
        for _ in range(120):
            done = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True)
            if done.returncode == 0 and done.stdout.strip() == str(n):
                return
            time.sleep(1)
        raise SystemExit(f"the Ray cluster did not reach {n} nodes")

    def cpu(self) -> dict[tuple[int, int], float]:
        """CPU seconds of every live process of the cluster's sessions, by (pid, start time)."""
        sessions = {node.pid for node in self.nodes}
        hz = os.sysconf("SC_CLK_TCK")
        out = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) in sessions:  # stat's field 6, the session id
                out[(int(entry), int(fields[19]))] = (int(fields[11]) + int(fields[12])) / hz
        return out

    def stop(self) -> None:
        for node in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def measure_on(cluster: RayCluster, argv: list[str], interval: float = 0.1) -> dict:
    """:func:`measure` of ``argv`` by ``--address`` on ``cluster``, adding the CPU time the cluster's
    processes used during the case: sampled every ``interval`` s, each process's last sample less its CPU time
    before the case (Ray ends a job's workers when its driver leaves: they are counted up to their last
    sample, so at most ``interval`` s of each is missed)."""
    before = cluster.cpu()
    last: dict[tuple[int, int], float] = dict(before)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            last.update(cluster.cpu())
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    saved = dict(os.environ)
    os.environ.update(cluster.env)
    sampler.start()
    try:
        m = measure([*argv, "--executor", "ray", "--address", cluster.address], frozenset(n.pid for n in cluster.nodes))
    finally:
        stop.set()
        sampler.join()
        os.environ.clear()
        os.environ.update(saved)
    last.update(cluster.cpu())
    used = sum(cpu - before.get(key, 0.0) for key, cpu in last.items())
    return {**m, "cpu": m["cpu"] + used, "sampled": m["sampled"] + used}


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
    parser.add_argument(
        "--large",
        action="store_true",
        help="also the 20,000-run sweep: serial, process, and Ray clusters of 1 node (2 CPUs, with --batch 1 and "
        "the default batches) and 2 nodes (1 CPU each) started by 'ray start' beforehand (about 15 minutes)",
    )
    parser.add_argument("--only-large", action="store_true", help="--large without the two small grids")
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
    if args.only_large:
        args.large, grids = True, []
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
    if args.large and ray_version:
        # Clusters started before the case, as a user's is: the rows measure the grid, not Ray's start.
        large = QUICK_LARGE if args.quick else LARGE
        cases: list[tuple[str, list[str], list[int] | None]] = [
            ("serial", ["--executor", "serial"], None),
            ("process, 2 workers", ["--executor", "process", "--workers", "2"], None),
            ("ray, 1 node of 2 CPUs, --batch 1 (a task per run)", ["--batch", "1"], [2]),
            ("ray, 1 node of 2 CPUs", [], [2]),
            ("ray, 2 nodes of 1 CPU", [], [1, 1]),
        ]
        for label, extra, cpus in cases:
            if cpus is None:
                m = measure([*large, *extra])
            else:
                cluster = RayCluster(cpus)
                try:
                    m = measure_on(cluster, [*large, *extra])
                finally:
                    cluster.stop()
            note = "" if m["complete"] else " (CPU incomplete)"
            print(
                f"| large | {runs(large)} | {label} | {m['wall']:.1f} | {m['cpu']:.1f} | "
                f"{m['cpu'] / m['wall']:.2f} | {m['sampled']:.1f} | {m['reaped']}{note} | {m['overhead']:.2f} |",
                flush=True,
            )
        grids.append(("large", large))
    print("\ncommands (each with --executor E --no-progress; large: on clusters started before, by --address):")
    for _, argv in grids:
        print("  schedgym " + " ".join(argv))


if __name__ == "__main__":
    main()

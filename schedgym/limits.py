"""The limits on what schedgym reads and accepts, in one place.

Every reader, converter and command-line option checks its input against these values *before* doing the
work or allocating the memory the input asks for, and a value beyond a limit is a user error (one line,
exit status 2 from the CLI), never a crash, a hang or a silent change. The values are generous: each is
well above what the public traces and the bundled workloads need (noted beside it). ``docs/input.md``
lists them with the error contract.
"""

from __future__ import annotations

import math

MAX_FIELD_CHARS = 131_072
"""Characters in one CSV field (Python's ``csv`` default, set explicitly so that it is ours to document).
The longest field of the bundled and public traces is a 36-character pod name."""

MAX_TEXT_BYTES = 1 << 30
"""Bytes of text read from one input file (1 GiB), after decompression for a ``.gz`` file: a small gzip
that expands without bound is stopped at this size, not when memory runs out. The whole Philly trace is
3.4 MB."""

MAX_ROWS = 2_000_000
"""Data rows (jobs, pods, SWF lines) in one trace or source file. A million jobs simulate in about 3 s and
0.9 GB (README, "Speed"); the full Philly trace has 82,247 rows."""

MAX_NODES = 100_000
"""Nodes in one cluster, counting a cluster file's ``count`` repetitions (checked before any node is
built), and the gang size of one job. The Alibaba 2023 cluster has 1,213 nodes."""

MAX_SEEDS = 10_000
"""``--seeds``: workloads in one comparison (each seed's workload is built when its runs start)."""

MAX_JOBS = MAX_ROWS
"""``--jobs`` and ``n_jobs``: jobs in one synthetic workload, the same bound as a trace's rows."""

MAX_TOTAL_JOBS = 50_000_000
"""Policies x seeds x jobs per workload in one comparison: every run's per-job results are kept for the
report, so this bounds its memory (the default comparison is 6 x 20 x 5,000 = 600,000)."""

MAX_RUNS = 250_000
"""Runs in one ``compare`` or ``sweep``: policies x settings x seeds, counted from the option values before
any grid is built or any workload drawn (a grid of 10**8 runs once grew 60 MB/s before its first run). A
sweep keeps about 2.5 KB per finished run, so this bounds it to about 0.6 GB. The default comparison is
6 x 20 = 120 runs, the README's sweep 540."""

MAX_PARAMETERS = 50_000_000
"""Parameters of one network that ``schedgym train`` builds (``--net-arch`` with the env's observation and
action sizes, policy and value networks together), counted before torch allocates anything: 200 MB of
float32 weights, 600 MB with Adam's two moments. The bundled agents have under 20,000."""

MAX_MODEL_ENTRY_BYTES = 1 << 30
"""Bytes of one entry of a saved model (a member of a model ``.zip``, an array of an ``.npz``), checked
from the file's headers before anything is inflated or allocated, and enforced while reading (a header
may lie); the entries read from one archive together are held to the same bound. :data:`MAX_PARAMETERS`
float32 weights with Adam's state take 600 MB; the bundled models are under 200 KB."""

MAX_PREEMPTIONS = 1_000_000
"""Largest ``max_preemptions`` (the cap P), from every front end (``--max-preemptions``, ``sweep --set``, the
environment's ``sim``, Python): a job preempted a million times has spent at least a million grace periods
and restarts; the default is 1."""

MAX_SEED = 2**32 - 1
"""Largest seed of ``schedgym train --seed`` and of ``--first-seed`` + ``--seeds`` (numpy and torch both
take seeds in 0..2**32-1)."""

MAX_TIME = 1e10
"""Largest submit time, duration, grace period and restart overhead, in seconds (317 years).

Why this bound: the simulator's clock is a float64, whose spacing at ``t`` is ``t * 2**-52``. At
``MAX_TIME`` it is 2**-19 s = 1.9 us, so a job of :data:`MIN_DURATION` (1 ms) submitted at ``MAX_TIME``
still ends 1 ms +- 0.2% later, and ``completion - submit >= duration`` holds up to the simulator's
tolerance. The clock can run past ``MAX_TIME`` by the work queued behind the last submission; its spacing
stays finer than 1 ms up to 2**42 s (4.4e12 s, 440 jobs of ``MAX_TIME`` run back to back). Without a bound, a
job submitted at 1e16 s (spacing 2 s) of 1 s "completed" at its own submission time."""

MIN_DURATION = 1e-3
"""Shortest duration of a job, in seconds (see :data:`MAX_TIME`). Public traces record whole seconds."""

MAX_AMOUNT = 1e6
"""Largest amount of one resource (GPUs, CPUs, GB of memory) of a job or a node. At 1e6 the float64
spacing is 1.2e-10, below the simulator's fit tolerance (``schedgym.sim.resources.EPS`` = 1e-9), so adding
and removing amounts on a node keeps "does it fit" exact within that tolerance. The largest amount of the
bundled data is a 2,048 GB Alibaba node."""


def check_time(value: float) -> str | None:
    """Why ``value`` (finite, >= 0) is not a usable time in seconds, or None when it is."""
    if value > MAX_TIME:
        return f"expected at most {MAX_TIME:g} s (schedgym.limits.MAX_TIME)"
    return None


def check_duration(value: float) -> str | None:
    """Why ``value`` (finite, > 0) is not a usable duration, or None when it is."""
    if value < MIN_DURATION:
        return f"expected at least {MIN_DURATION:g} s (schedgym.limits.MIN_DURATION)"
    return check_time(value)


def check_amount(value: float) -> str | None:
    """Why ``value`` (finite, >= 0) is not a usable resource amount, or None when it is."""
    if value > MAX_AMOUNT:
        return f"expected at most {MAX_AMOUNT:g} (schedgym.limits.MAX_AMOUNT)"
    return None


assert math.ulp(MAX_TIME) * 100 < MIN_DURATION  # the claim of MAX_TIME's docstring, kept true

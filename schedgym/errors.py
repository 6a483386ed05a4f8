"""Exceptions raised by schedgym.

Every error a user can cause derives from :class:`SchedGymError`, so a caller (and the CLI) can tell a
user mistake from a bug with one ``except``. Internal invariants use ``assert`` instead.
"""

from __future__ import annotations


class SchedGymError(Exception):
    """Base class of every error caused by input, configuration or an illegal decision."""


class ConfigError(SchedGymError, ValueError):
    """A configuration value is out of range or of the wrong kind."""


class UnknownArgumentError(ConfigError, TypeError):
    """A keyword argument nobody takes. A ``TypeError`` too, worded as Python words it ("got an unexpected
    keyword argument"), because clients probe with it: TorchRL's ``GymEnv`` retries without ``frameskip``
    only on such a ``TypeError``."""


class TraceError(SchedGymError, ValueError):
    """A trace or cluster file is malformed; the message names file, line, column and value."""

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: str | None = None,
        value: object = None,
    ) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        self.column = column
        self.value = value
        where = []
        if path is not None:
            where.append(f"{path}" + (f":{line}" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column '{column}'")
        prefix = ", ".join(where)
        suffix = f" (got {value!r})" if value is not None else ""
        super().__init__(f"{prefix}: {problem}{suffix}" if prefix else f"{problem}{suffix}")


class ImpossibleJobError(SchedGymError, ValueError):
    """A job can never run on the given cluster (it is larger than every node, or needs too many nodes)."""


class IllegalDecisionError(SchedGymError, ValueError):
    """A preemption plan (or an environment action) breaks the rules of the current decision."""


class UnknownNameError(SchedGymError, KeyError, ValueError):
    """A policy, workload or cluster name is not registered: a KeyError (a lookup that failed) and, as every
    other bad argument of ``gym.make``, a ValueError."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a batch scheduler ending a job), raised in the ``schedgym`` command's main thread.
    A KeyboardInterrupt, so that it gets Ctrl-C's clean-up everywhere Ctrl-C does; the command then says
    ``schedgym: terminated`` and exits 143 (128 + 15, as a shell reports a process ended by SIGTERM)."""

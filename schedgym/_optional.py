"""Importing a module that may be missing (the compiled extensions), without mistaking Ctrl-C for its absence.

A KeyboardInterrupt that lands while an extension module initialises reaches the importer as
``ImportError: initialization failed`` (its cause the KeyboardInterrupt). A bare ``except ImportError`` would
take that for "not built" and go on with the Python fallback: the command would finish, status 0, the user's
Ctrl-C silently dropped (a CI run of tests/test_faults.py saw exactly that). :func:`import_optional` re-raises
the interrupt instead.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The first KeyboardInterrupt (Ctrl-C, or a :class:`~schedgym.errors.Terminated`) in the chain of causes
    and contexts of ``exc``, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def raise_if_interrupted(exc: ImportError) -> None:
    """Raise KeyboardInterrupt (from ``exc``; a Terminated if SIGTERM caused it) if the failed import ``exc``
    was caused by an interrupt; for the callers that turn any other ImportError into "not installed"."""
    interrupt = interrupt_in(exc)
    if interrupt is not None:
        raise type(interrupt)() from exc


def import_optional(name: str) -> ModuleType | None:
    """The module ``name``, or None where it cannot be imported; an import that failed because of Ctrl-C
    raises KeyboardInterrupt."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise_if_interrupted(exc)
        return None

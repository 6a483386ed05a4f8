"""Checks shared by the converters' rules dataclasses."""

from __future__ import annotations

import math
from typing import Any

from schedgym.errors import ConfigError


def finite(value: object) -> bool:
    """A real number (not a bool) that is neither infinite nor NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_nonnegative(rules: object, names: tuple[str, ...]) -> None:
    """Every named field is a finite number >= 0."""
    for name in names:
        value = getattr(rules, name)
        if not finite(value) or value < 0:
            raise ConfigError(f"Expected {name} >= 0, got {value!r}")


def check_window(rules: Any) -> None:
    """``start`` and ``end`` are None or finite seconds, with start < end when both are set."""
    for name in ("start", "end"):
        value = getattr(rules, name)
        if value is not None and not finite(value):
            raise ConfigError(f"Expected {name} to be a finite number of seconds or None, got {value!r}")
    start, end = rules.start, rules.end
    if start is not None and end is not None and start >= end:
        raise ConfigError(f"Expected start < end, got {start!r} and {end!r}")

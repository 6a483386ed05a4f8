"""JSON read from users (``--env-kwargs``, a saved agent's ``.json``, the data entry of a model's zip) with each
object's keys distinct: :func:`json.loads` lets the last of a duplicated key win, silently dropping the others
(``{"n_jobs": 30, "n_jobs": 40}`` was read as 40)."""

from __future__ import annotations

import json
from typing import Any


def _distinct_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's ``(key, value)`` pairs as a dict; a ValueError naming the first key given twice."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"key {key!r} given twice")
        obj[key] = value
    return obj


def loads(text: str | bytes, **kwargs: Any) -> Any:
    """:func:`json.loads` with ``kwargs``, but a ValueError for an object (at any depth) that gives a key twice."""
    return json.loads(text, object_pairs_hook=_distinct_keys, **kwargs)


__all__ = ["loads"]

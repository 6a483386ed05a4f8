"""Converters from public trace formats to the schedgym trace format.

Each format has a rules dataclass (every choice a documented parameter) and a function returning the
converted :class:`~schedgym.workloads.Workload` with a :class:`ConversionReport` that counts the rows kept,
changed and dropped, by reason. ``schedgym trace convert --format NAME IN OUT`` runs them from the shell.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from schedgym.errors import UnknownNameError
from schedgym.workloads.convert.report import ConversionReport


@dataclass(frozen=True)
class Format:
    """Where a converter lives: ``module``, its convert function and its rules class."""

    module: str
    convert: str
    rules: str
    description: str

    def load(self) -> tuple[Any, type]:
        mod = importlib.import_module(self.module)
        return getattr(mod, self.convert), getattr(mod, self.rules)


FORMATS: dict[str, Format] = {
    "philly": Format(
        "schedgym.workloads.convert.philly", "convert_philly", "PhillyRules", "Microsoft Philly (Pollux's philly.csv)"
    ),
    "alibaba2023": Format(
        "schedgym.workloads.convert.alibaba",
        "convert_alibaba2023",
        "AlibabaRules",
        "Alibaba GPU trace 2023 (openb_pod_list_*.csv)",
    ),
    "swf": Format(
        "schedgym.workloads.convert.swf",
        "convert_swf",
        "SwfRules",
        "Standard Workload Format (Parallel Workloads Archive)",
    ),
}


def converter(name: str) -> tuple[Any, type]:
    """``(convert_function, rules_class)`` of format ``name``."""
    try:
        return FORMATS[name].load()
    except KeyError:
        raise UnknownNameError(f"Unknown trace format {name!r}; expected one of {sorted(FORMATS)}") from None


__all__ = ["FORMATS", "ConversionReport", "Format", "converter"]

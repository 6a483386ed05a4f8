"""Workloads: the trace file format and seeded synthetic generators."""

from schedgym.workloads.synthetic import PRESETS, SyntheticConfig, generate, preset
from schedgym.workloads.trace import COLUMNS, OPTIONAL_DEFAULTS, REQUIRED_COLUMNS, Workload, load_trace, save_trace

__all__ = [
    "COLUMNS",
    "OPTIONAL_DEFAULTS",
    "PRESETS",
    "REQUIRED_COLUMNS",
    "SyntheticConfig",
    "Workload",
    "generate",
    "load_trace",
    "preset",
    "save_trace",
]

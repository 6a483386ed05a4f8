"""
The synthetic generator's draws in C++ (schedgym/workloads/native/synthetic.cpp).
"""

from collections.abc import Sequence
from typing import Annotated

import numpy
from numpy.typing import NDArray


SYNTHETIC_VERSION: int = ...

NUMPY_VERSION: str = ...

def draw_jobs(capsule: object, te_fraction: float, te_duration: Sequence[float], be_duration: Sequence[float], te_gpus: tuple[Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)]], be_gpus: tuple[Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)]], cpus_per_gpu: tuple[Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)]], mem_per_gpu: tuple[Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)]], grace: Sequence[float], te_grace: float, gpus_per_node: float, floats: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu')], gang: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')], job_class: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')], member: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu')]) -> tuple[float, list[float], list[float], float, int, int, int, int]:
    """
    Everything synthetic.generate draws before the arrivals, from the bit generator behind capsule (the caller holds its lock), into floats (rows duration to grace of a JobTable's float columns), gang, job_class and member (per-node demands). Returns the mean of gpus * duration; the smallest and the largest duration, gpus, cpus, mem_gb and grace; the smallest gpus + cpus + mem_gb; the smallest and largest gang size and class. Releases the GIL.
    """

def draw_submit(capsule: object, scale: float, submit: Annotated[NDArray[numpy.float64], dict(order='C', device='cpu')]) -> tuple[float, float]:
    """
    The arrivals of synthetic.generate: np.round(np.cumsum(rng.exponential(scale, n)), 3), into submit; returns their smallest and largest. Releases the GIL.
    """

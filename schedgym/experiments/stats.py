"""Statistics of a comparison: means, 95% confidence intervals of the mean, paired differences.

Seeds are independent workloads, so a figure's per-seed values are a sample; its interval is Student's t
interval of the mean. A paired difference (policy A minus policy B, seed by seed, on the same workloads)
cancels the workload's own noise and is far tighter than the intervals of the two means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# Two-sided 95% quantiles of Student's t, t(0.975, df) for df = 1..200, to 4 decimals (generated with
# scipy.stats.t.ppf; tests/test_stats.py checks them against scipy). Beyond 200 degrees of freedom the
# Cornish-Fisher expansion below is exact to better than 1e-6. A table, not scipy: the core install needs
# only numpy and gymnasium.
_T975 = (
    12.7062,
    4.3027,
    3.1824,
    2.7764,
    2.5706,
    2.4469,
    2.3646,
    2.3060,
    2.2622,
    2.2281,
    2.2010,
    2.1788,
    2.1604,
    2.1448,
    2.1314,
    2.1199,
    2.1098,
    2.1009,
    2.0930,
    2.0860,
    2.0796,
    2.0739,
    2.0687,
    2.0639,
    2.0595,
    2.0555,
    2.0518,
    2.0484,
    2.0452,
    2.0423,
    2.0395,
    2.0369,
    2.0345,
    2.0322,
    2.0301,
    2.0281,
    2.0262,
    2.0244,
    2.0227,
    2.0211,
    2.0195,
    2.0181,
    2.0167,
    2.0154,
    2.0141,
    2.0129,
    2.0117,
    2.0106,
    2.0096,
    2.0086,
    2.0076,
    2.0066,
    2.0057,
    2.0049,
    2.0040,
    2.0032,
    2.0025,
    2.0017,
    2.0010,
    2.0003,
    1.9996,
    1.9990,
    1.9983,
    1.9977,
    1.9971,
    1.9966,
    1.9960,
    1.9955,
    1.9949,
    1.9944,
    1.9939,
    1.9935,
    1.9930,
    1.9925,
    1.9921,
    1.9917,
    1.9913,
    1.9908,
    1.9905,
    1.9901,
    1.9897,
    1.9893,
    1.9890,
    1.9886,
    1.9883,
    1.9879,
    1.9876,
    1.9873,
    1.9870,
    1.9867,
    1.9864,
    1.9861,
    1.9858,
    1.9855,
    1.9853,
    1.9850,
    1.9847,
    1.9845,
    1.9842,
    1.9840,
    1.9837,
    1.9835,
    1.9833,
    1.9830,
    1.9828,
    1.9826,
    1.9824,
    1.9822,
    1.9820,
    1.9818,
    1.9816,
    1.9814,
    1.9812,
    1.9810,
    1.9808,
    1.9806,
    1.9804,
    1.9803,
    1.9801,
    1.9799,
    1.9798,
    1.9796,
    1.9794,
    1.9793,
    1.9791,
    1.9790,
    1.9788,
    1.9787,
    1.9785,
    1.9784,
    1.9782,
    1.9781,
    1.9780,
    1.9778,
    1.9777,
    1.9776,
    1.9774,
    1.9773,
    1.9772,
    1.9771,
    1.9769,
    1.9768,
    1.9767,
    1.9766,
    1.9765,
    1.9763,
    1.9762,
    1.9761,
    1.9760,
    1.9759,
    1.9758,
    1.9757,
    1.9756,
    1.9755,
    1.9754,
    1.9753,
    1.9752,
    1.9751,
    1.9750,
    1.9749,
    1.9748,
    1.9747,
    1.9746,
    1.9745,
    1.9744,
    1.9744,
    1.9743,
    1.9742,
    1.9741,
    1.9740,
    1.9739,
    1.9739,
    1.9738,
    1.9737,
    1.9736,
    1.9735,
    1.9735,
    1.9734,
    1.9733,
    1.9732,
    1.9732,
    1.9731,
    1.9730,
    1.9729,
    1.9729,
    1.9728,
    1.9727,
    1.9727,
    1.9726,
    1.9725,
    1.9725,
    1.9724,
    1.9723,
    1.9723,
    1.9722,
    1.9721,
    1.9721,
    1.9720,
    1.9720,
    1.9719,
)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval with ``df`` degrees of freedom (NaN if df < 1)."""
    if df < 1:
        return float("nan")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975  # Abramowitz & Stegun 26.7.5
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def finite(values: Sequence[float]) -> np.ndarray:
    """The values that are not NaN (a class with no jobs in a run reports NaN), as a float array."""
    arr = np.asarray(values, dtype=float)
    return arr[~np.isnan(arr)]


def mean(values: Sequence[float]) -> float:
    """Mean of the non-NaN values (NaN if there are none)."""
    vals = finite(values)
    return float(vals.mean()) if vals.size else float("nan")


def ci95(values: Sequence[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (t distribution); NaN for fewer than 2 values."""
    vals = finite(values)
    if vals.size < 2:
        return float("nan")
    return float(t975(vals.size - 1) * vals.std(ddof=1) / math.sqrt(vals.size))


def paired(mine: Sequence[float], reference: Sequence[float]) -> dict[str, float]:
    """Mean and CI half-width of the per-seed differences ``mine - reference``."""
    d = [a - b for a, b in zip(mine, reference, strict=True)]
    return {"mean": mean(d), "ci95": ci95(d)}


__all__ = ["ci95", "finite", "mean", "paired", "t975"]

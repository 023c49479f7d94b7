"""Interval estimates used by every report (CLI, harness analysis, MCPP predict)."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score 95% interval of a binomial proportion (``(0, 1)`` when n = 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference(a, b, z: float = 1.959963984540054) -> tuple[float, float, float]:
    """Mean of a - b over paired trials with a normal 95% interval: (mean, lo, hi)."""
    n = len(a)
    if n == 0:
        return math.nan, math.nan, math.nan
    d = [float(x) - float(y) for x, y in zip(a, b)]
    mean = sum(d) / n
    if n == 1:
        return mean, math.nan, math.nan
    var = sum((x - mean) ** 2 for x in d) / (n - 1)
    half = z * math.sqrt(var / n)
    return mean, mean - half, mean + half

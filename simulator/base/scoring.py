"""Interval estimates used by every report (CLI, harness analysis, MCPP predict, benchmarks).

One definition each, so a rate and its interval mean the same in the
``simulate`` output, the harness tables and the benchmark files:

* :func:`wilson_interval`: Wilson score 95% interval of a binomial proportion
  (:func:`wilson_bounds`: the same for arrays, the one formula);
* :func:`paired_difference`: mean of paired differences (two methods on the
  same (DAG, trial), common random numbers) with a trial-level and a
  group(DAG)-clustered 95% interval, win/loss counts and the exact McNemar
  (sign test) p-value;
* :func:`clustered_difference`: the same mean with a DAG-clustered Student-t
  interval at any level (the claims report: verdicts at 95%, and
  Bonferroni-simultaneous intervals when a difference is taken to the best of
  several methods).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: two-sided 95% normal quantile
Z95 = 1.959963984540054


def wilson_interval(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``successes`` in ``n`` trials; ``(0, 1)`` when n = 0.

    Why ``(0, 1)`` for n = 0: with no trial every proportion is possible, and
    it is the limit of the interval as n shrinks to 0 (centre 1/2, half-width
    1/2), so a table of intervals needs no special value.
    """
    if n <= 0:
        return 0.0, 1.0
    lo, hi = wilson_bounds(np.float64(successes), np.float64(n), z)
    return float(lo), float(hi)


def wilson_bounds(successes: Any, n: Any, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Element-wise Wilson score interval of ``successes`` in ``n`` trials (arrays or scalars).

    The one formula behind :func:`wilson_interval` (the MCPP racing bound and
    the prediction surface read it on whole arrays); ``(0, 1)`` where n = 0.
    """
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = s / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    empty = n <= 0
    return np.where(empty, 0.0, np.maximum(0.0, centre - half)), np.where(empty, 1.0, np.minimum(1.0, centre + half))


def paired_difference(d: Any, groups: Any = None, z: float = Z95) -> dict[str, Any]:
    """Mean of the paired differences ``d`` (e.g. success of A minus success of B, per trial).

    Returns ``n_pairs``, ``n_dags`` (distinct ``groups``), ``diff`` (the mean),
    ``ci_low``/``ci_high`` (normal interval at the trial level) and
    ``ci_low_dag``/``ci_high_dag`` (clustered by ``groups``: more honest when
    generalising over DAGs), both clipped to [-1, 1] (the range of a
    difference of two success indicators), ``wins``/``losses`` (d > 0 / d < 0)
    and ``mcnemar_p`` (exact two-sided sign test on the discordant pairs).
    ``groups=None`` puts every pair in a group of its own.

    An interval needs two pairs (two groups for the clustered one); without
    them it is the whole range [-1, 1], for the reason :func:`wilson_interval`
    gives (0, 1) at n = 0. With no pair ``diff`` is NaN (counts 0, p-value 1).
    """
    d = np.asarray(d, dtype=float)
    n = len(d)
    groups = np.arange(n) if groups is None else np.asarray(groups)
    if n == 0:
        return {"n_pairs": 0, "n_dags": 0, "diff": math.nan, "ci_low": -1.0, "ci_high": 1.0, "ci_low_dag": -1.0,
                "ci_high_dag": 1.0, "wins": 0, "losses": 0, "mcnemar_p": 1.0}  # fmt: skip

    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    se_c, G = _clustered_se(d, groups, mean)
    wins = int((d > 0).sum())
    losses = int((d < 0).sum())
    p = sign_test_p(wins, wins + losses) if wins + losses else 1.0
    return {
        "n_pairs": n,
        "n_dags": G,
        "diff": mean,
        "ci_low": max(-1.0, mean - z * se),
        "ci_high": min(1.0, mean + z * se),
        "ci_low_dag": max(-1.0, mean - z * se_c),
        "ci_high_dag": min(1.0, mean + z * se_c),
        "wins": wins,
        "losses": losses,
        "mcnemar_p": p,
    }


def sign_test_p(k: int, n: int) -> float:
    """Exact two-sided sign test: ``scipy.stats.binomtest(k, n, 0.5).pvalue``, the same float, without scipy.stats.

    The same steps as scipy's ``binomtest`` (two-sided: the probability of
    every outcome no likelier than ``k``, found by its binary search) on the
    same compiled binomial functions (``scipy.special``, boost), with
    ``scipy.stats.binom``'s rules at the ends of the support; importing
    ``scipy.stats`` took a second of the analysis's start. ``tests/test_scoring.py``
    checks it equals ``binomtest`` bit for bit.
    """
    from scipy.special import _ufuncs as scu

    p = 0.5

    def pmf(x):
        return min(1.0, max(0.0, float(scu._binom_pmf(x, n, p)))) if 0 <= x <= n and x == math.floor(x) else 0.0

    def cdf(x):
        return 1.0 if x >= n else 0.0 if x < 0 else min(1.0, max(0.0, float(scu._binom_cdf(math.floor(x), n, p))))

    def sf(x):
        return 0.0 if x >= n else 1.0 if x < 0 else min(1.0, max(0.0, float(scu._binom_sf(math.floor(x), n, p))))

    def search(a, d, lo, hi):  # scipy.stats._binomtest._binary_search_for_binom_tst
        while lo < hi:
            mid = lo + (hi - lo) // 2
            midval = a(mid)
            if midval < d:
                lo = mid + 1
            elif midval > d:
                hi = mid - 1
            else:
                return mid
        return lo if a(lo) <= d else lo - 1

    d = pmf(k)
    rerr = 1 + 1e-7
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = search(lambda x1: -pmf(x1), -d * rerr, float(math.ceil(p * n)), n)
        y = n - ix + int(d * rerr == pmf(ix))
        pval = cdf(k) + sf(n - y)
    else:
        ix = search(lambda x1: pmf(x1), d * rerr, 0, float(math.floor(p * n)))
        y = ix + 1
        pval = cdf(y - 1) + sf(k - 1)
    return min(1.0, pval)


def _clustered_se(d: np.ndarray, groups: Any, mean: float) -> tuple[float, int]:
    """Cluster-robust standard error of the mean of ``d`` (CR1: factor G/(G-1)) and the cluster count G.

    With equal cluster sizes it equals sd(cluster means) / sqrt(G): the DAG,
    not the trial, is the unit of replication, so G counts DAGs however many
    trials each has. ``inf`` with fewer than two clusters.
    """
    import pandas as pd  # its grouped sum is compensated (the published tables were made with it)

    resid = pd.Series(d - mean).groupby(groups).sum().to_numpy()
    G = len(resid)
    se_c = math.sqrt(G / (G - 1) * float((resid**2).sum())) / len(d) if G > 1 else math.inf
    return se_c, G


def clustered_difference(d: Any, groups: Any, level: float = 0.95) -> dict[str, Any]:
    """Mean of paired differences ``d`` with a two-sided cluster-robust Student-t interval (G - 1 df).

    Why Student-t and not the normal quantile of :func:`paired_difference`:
    the claims report decides verdicts from these intervals on pools of a few
    DAGs (8 in the example), where the normal quantile is too narrow.
    ``level`` above 0.95 gives Bonferroni-simultaneous intervals (level
    1 - 0.05 / J for J comparisons). Returns ``n_pairs``, ``n_dags``,
    ``diff``, ``se``, ``ci_low``, ``ci_high`` (clipped to [-1, 1]) and
    ``level``; with fewer than two DAGs the interval is [-1, 1] (nothing is
    known about the spread between DAGs), with no pair ``diff`` is NaN.
    """
    from scipy.stats import t as student_t

    d = np.asarray(d, dtype=float)
    n = len(d)
    if n == 0:
        return {"n_pairs": 0, "n_dags": 0, "diff": math.nan, "se": math.inf, "ci_low": -1.0, "ci_high": 1.0,
                "level": level}  # fmt: skip
    mean = float(d.mean())
    se, G = _clustered_se(d, groups, mean)
    if G < 2:
        lo, hi = -1.0, 1.0
    else:
        q = float(student_t.ppf(0.5 + level / 2.0, G - 1))
        lo, hi = max(-1.0, mean - q * se), min(1.0, mean + q * se)
    return {"n_pairs": n, "n_dags": G, "diff": mean, "se": se, "ci_low": lo, "ci_high": hi, "level": level}

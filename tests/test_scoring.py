"""The one Wilson interval and the one paired difference (simulator/base/scoring.py) every report uses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.base.scoring import Z95, paired_difference, wilson_interval


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    lo0, hi0 = wilson_interval(0, 20)
    assert lo0 == 0.0 and hi0 == pytest.approx(0.1611, abs=1e-4)
    lo1, hi1 = wilson_interval(20, 20)
    assert hi1 == 1.0 and lo1 == pytest.approx(1 - 0.1611, abs=1e-4)


def test_wilson_interval_with_no_trial_is_the_whole_range():
    """n = 0: every proportion is possible; it is also the interval's limit as n -> 0."""
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0.5e-9, 1e-9)  # half successes out of a vanishing n
    assert lo == pytest.approx(0.0, abs=1e-6) and hi == pytest.approx(1.0, abs=1e-6)


def test_paired_difference():
    d = np.array([1, 0, 0, 1, -1, 0, 1, 0], dtype=float)
    dags = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    r = paired_difference(d, dags)
    assert r["diff"] == pytest.approx(0.25)
    assert r["wins"] == 3 and r["losses"] == 1 and r["n_dags"] == 4 and r["n_pairs"] == 8
    se = d.std(ddof=1) / math.sqrt(8)
    assert r["ci_high"] - r["diff"] == pytest.approx(Z95 * se, rel=1e-12)
    assert r["ci_low_dag"] < r["diff"] < r["ci_high_dag"]
    assert r["mcnemar_p"] == pytest.approx(0.625)  # 3 wins, 1 loss: P(|W - 2| >= 1) under Bin(4, 1/2)
    z = paired_difference(np.zeros(6), np.arange(6))
    assert z["diff"] == 0 and z["ci_low"] == 0 and z["ci_high"] == 0 and z["mcnemar_p"] == 1.0


def test_paired_difference_without_groups_clusters_nothing():
    d = np.array([1.0, 0.0, -1.0, 1.0, 1.0])
    r = paired_difference(d)
    assert r["n_dags"] == 5
    # one pair per group: the clustered interval equals the trial-level one
    half, half_c = r["ci_high"] - r["diff"], r["ci_high_dag"] - r["diff"]
    assert half_c == pytest.approx(half, rel=1e-12)


@pytest.mark.parametrize("n", [0, 1])
def test_paired_difference_with_too_few_pairs(n):
    r = paired_difference(np.ones(n), np.zeros(n))
    assert r["n_pairs"] == n and r["wins"] == n and r["losses"] == 0
    # no interval can be estimated: the whole range, as the Wilson interval at n = 0
    assert (r["ci_low"], r["ci_high"], r["ci_low_dag"], r["ci_high_dag"]) == (-1.0, 1.0, -1.0, 1.0)
    assert math.isnan(r["diff"]) if n == 0 else r["diff"] == 1.0


def test_the_sign_test_is_scipys_binomtest_bit_for_bit():
    """paired_difference's McNemar p-value without importing scipy.stats: the same float as binomtest."""
    from scipy.stats import binomtest

    from simulator.base.scoring import sign_test_p

    cases = [(k, n) for n in range(1, 61) for k in range(n + 1)]
    cases += [(k, n) for n in (199, 200, 1000, 4001) for k in (0, 1, n // 3, n // 2 - 1, n // 2, n // 2 + 1, n - 1, n)]
    for k, n in cases:
        assert sign_test_p(k, n) == float(binomtest(k, n, 0.5).pvalue), (k, n)

"""The statistical gate of learning pools from traces, small enough for CI (slow; the full one: benchmarks/README.md).

The loopback world serving the example pool is the truth. Exploring it and
rebuilding the pool from the traces must recover its rows' means within
sampling error (z-scores about standard normal), a perturbed world (one pair's
success -0.1, latency x 1.3) must be told apart, and on runs whose siblings
are cancelled the naive estimate (censored requests dropped) must fail where
the Kaplan-Meier one passes. ``python -m benchmarks.learn_gate`` runs the same
functions over 20 seed pairs.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.learn_gate import aggregate, censoring_demo, rejected, replicate

pytestmark = pytest.mark.slow


def test_rebuilt_pool_matches_the_worlds_truth_and_a_perturbed_world_is_rejected():
    zs = []
    for seed in (0, 1, 2):
        one = replicate(seed, per_pair=20)
        assert not rejected(one), seed
        zs += one
    agg = aggregate(zs)
    # 168 z-scores: the gate's bands, widened for the smaller sample (the mean's SE is 1/sqrt(168) = 0.08)
    assert abs(agg["mean"]) <= 0.3 and 0.75 <= agg["sd"] <= 1.3 and agg["beyond_2"] <= 0.12, agg
    for seed in (100, 101):
        assert rejected(replicate(seed, per_pair=20, perturb=True)), seed


def test_naive_estimate_fails_where_kaplan_meier_passes():
    d = censoring_demo(runs=120)
    naive = np.array([p["z"] for p in d["pairs"] if p["estimate"] == "naive"])
    km = np.array([p["z"] for p in d["pairs"] if p["estimate"] == "kaplan_meier"])
    assert len(naive) >= 3 and len(km) == len(naive)
    assert (np.abs(naive) > 3).sum() >= 3  # dropping cancelled requests: latencies far too short
    assert (np.abs(km) < 3).all(), d["pairs"]

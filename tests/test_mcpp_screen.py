"""MCPP kernel's latency screen: a batch's largest latency and a sure fit, from few draws, exactly.

The kernel (``simulator.mcpp.kernel.run_pair``) skips drawing most attempts of a
parametric batch: an attempt whose first normal uniform reaches
``fits_surely_threshold`` is taken to fit without its draw, and a batch's
largest latency comes from ``batch_max_latency``. These tests draw every
attempt in full and compare, bit for bit, on the laws and at the boundaries
where a rounding could matter (rooms equal to a drawn latency, latencies at the
1e-3 floor, tiny and huge spreads).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from simulator.base.rng import COS_LOWER_MARGIN, GOLDEN, cos_2pi_lower, fold, normal, normal_lower, uniform
from simulator.mcpp.kernel import (
    LAT_FIXED,
    LAT_GAUSSIAN,
    LAT_LOGNORMAL,
    _attempt_latency_lower,
    _latency,
    batch_max_latency,
    fits_surely_threshold,
    latency_params,
)


@njit(cache=True)
def _max_both(kind, c0, c1, k, bkey):
    """(batch_max_latency, the largest of every attempt's latency drawn in full)."""
    full = 0.0
    for a in range(k):
        lat = _latency(kind, c0, c1, bkey + uint64(a) * GOLDEN)
        if lat > full:
            full = lat
    return batch_max_latency(kind, c0, c1, k, bkey), full


@njit(cache=True)
def _screen_misses(kind, c0, c1, room, keys):
    """Attempts the screen lets through (first uniform >= threshold) whose latency is above ``room``."""
    thr = fits_surely_threshold(kind, c0, c1, room, np.log(room))
    bad = 0
    passed = 0
    for i in range(keys.shape[0]):
        if uniform(keys[i], 1) >= thr:
            passed += 1
            if _latency(kind, c0, c1, keys[i]) > room:
                bad += 1
    return bad, passed


def _laws():
    """(kind, c0, c1) of lognormal and Gaussian laws from tight to the widest spread, and near the floor."""
    means = np.array([[0.002, 0.5, 6.0, 116.0, 5e4]])
    out = []
    for dist, kind in ((0, LAT_LOGNORMAL), (2, LAT_GAUSSIAN)):
        for cv in (0.02, 0.35, 1.0, 5.0):
            k, c0, c1 = latency_params(dist, means, means * cv)
            for q in range(means.shape[1]):
                if k[0, q] == kind:
                    out.append((int(kind), float(c0[0, q]), float(c1[0, q])))
    return out


def test_batch_max_latency_equals_every_draw():
    laws = _laws() + [(LAT_FIXED, 3.25, 0.0)]
    assert len(laws) > 20
    for kind, c0, c1 in laws:
        for k in (2, 3, 7, 16, 64, 200):
            for s in range(40):
                fast, full = _max_both(kind, c0, c1, k, np.uint64(fold(np.uint64(12345), s * 1000 + k)))
                assert fast == full, (kind, c0, c1, k, s, fast, full)


def test_screen_never_passes_a_late_attempt_at_drawn_boundaries():
    keys = np.array([fold(np.uint64(99), i) for i in range(4000)], dtype=np.uint64)
    for kind, c0, c1 in _laws():
        # rooms at drawn latencies (the boundary itself), a hair either side, and at the 1e-3 floor
        lats = np.array([_max_both(kind, c0, c1, 1, keys[i])[1] for i in range(0, 4000, 97)])
        rooms = np.concatenate([lats, np.nextafter(lats, 0), np.nextafter(lats, np.inf), [1e-3, 1.5e-3]])
        for room in rooms:
            if room < 1e-3:
                continue
            bad, _passed = _screen_misses(kind, c0, c1, float(room), keys)
            assert bad == 0, (kind, c0, c1, room)


def test_screen_lets_most_attempts_through_when_the_room_is_wide():
    """The point of the screen: far from the boundary, nearly no attempt needs its full draw."""
    keys = np.array([fold(np.uint64(7), i) for i in range(4000)], dtype=np.uint64)
    kind, c0, c1 = [law for law in _laws() if law[0] == LAT_LOGNORMAL][5]
    median = float(np.exp(c0))
    _bad, passed = _screen_misses(kind, c0, c1, median * np.exp(3.0 * c1), keys)
    assert passed > 0.9 * len(keys)


@njit(cache=True)
def _cos_lower_worst(n):
    """Over n evenly spread u in (0, 1) and the uniforms' own extremes: (largest lower - cos, largest gap)."""
    above = -np.inf
    gap = 0.0
    for i in range(n + 4):
        if i < n:
            u = (i + 0.5) / n
        else:  # the least and largest uniforms, and the fold points 1/4, 3/4 from either side
            u = (0.5 * 2.0**-53, 1.0 - 2.0**-54, 0.25 + 2.0**-54, 0.75 - 2.0**-53)[i - n]
        d = cos_2pi_lower(u) - np.cos(2.0 * np.pi * u)
        above = max(above, d)
        gap = max(gap, -d)
    return above, gap


def test_cos_lower_is_below_cos_and_close_to_it():
    """The screen's cosine is a lower bound everywhere (a dense grid and the extremes) within 1.1e-9."""
    above, gap = _cos_lower_worst(2_000_003)
    assert above < -0.5 * COS_LOWER_MARGIN  # below np.cos with room to spare
    assert gap < 1.1e-9


@njit(cache=True)
def _lower_latency_misses(kind, c0, c1, keys):
    """(draws whose lower bound is above the latency, the largest gap relative to latency + spread) for one law."""
    bad = 0
    worst = 0.0
    lat_c0 = np.full((1, 1), c0)
    lat_c1 = np.full((1, 1), c1)
    lat_kind = np.full((1, 1), kind)
    no_rows = np.zeros(2, dtype=np.int64)
    for i in range(keys.shape[0]):
        exact = _latency(kind, c0, c1, keys[i])
        low = _attempt_latency_lower(no_rows, np.empty(0), lat_kind, lat_c0, lat_c1, 1, 0, 0, keys[i])
        if low > exact:
            bad += 1
        worst = max(worst, (exact - low) / (exact + c1))
        if normal_lower(keys[i], 1) > normal(keys[i], 1):
            bad += 1
    return bad, worst


def test_screen_latency_bound_never_exceeds_the_draw():
    """The chain screen's latency (a lower bound) is never above the drawn latency, on every law, at
    200,000 keys each, and within 1e-7 of it relative to latency + spread: a screen stop stays a certain
    failure, and the screen stops nearly as often as with the draw itself."""
    keys = np.array([fold(uint64(977), i) for i in range(200_000)], dtype=np.uint64)
    for kind, c0, c1 in _laws():
        bad, worst = _lower_latency_misses(kind, c0, c1, keys)
        assert bad == 0, (kind, c0, c1)
        assert worst < 1e-7, (kind, c0, c1, worst)

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

from simulator.base.rng import GOLDEN, fold, uniform
from simulator.mcpp.kernel import (
    LAT_FIXED,
    LAT_GAUSSIAN,
    LAT_LOGNORMAL,
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

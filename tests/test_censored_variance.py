"""The uncertainty of the Kaplan-Meier rows' mean (poolbuild.censored): by hand, an identity, and against a world.

The learning gate compares the mean latency of a learned pool's rows with the
world's truth in units of the rows' own standard error. That error has two
parts: the KM mean's sampling error (the Greenwood-type variance of the
restricted mean) and the noise of the donors drawn for censored requests.
Here: both by hand on five observations; with nothing censored, the plug-in
variance of a sample mean on any sample; and against a world whose truth is
known, the z-scores of the rows that ``live_rows`` makes are standard normal.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolbuild.censored import donor_var, imputed_mean_var, km_jumps, km_mean, km_mean_var
from poolbuild.from_traces import Obs, live_rows


def test_the_variances_by_hand():
    """x = 1..5, 2 and 5 censored: S = 0.8, 8/15, 4/15 at 1, 3, 4 (tau = 4); the areas from each observed value to
    tau are A(1) = 0.8 * 2 + 8/15 * 1 = 32/15, A(3) = 8/15, A(4) = 0, so Var = A(1)^2 / (5 * 4) + A(3)^2 / (3 * 2).
    The value censored at 2 takes 3 or 4 (equal KM jumps): variance 1/4; the one at 5 has no donor and is dropped,
    so the rows are 3 observed + 1 imputed."""
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    seen = np.array([True, False, True, True, False])
    expected = (32 / 15) ** 2 / 20 + (8 / 15) ** 2 / 6
    assert km_mean_var(x, seen) == pytest.approx(expected)
    w = km_jumps(x, seen)
    cand = np.flatnonzero(seen)
    assert donor_var(x, w, cand, 2.0, True) == pytest.approx(0.25)
    assert donor_var(x, w, cand, 5.0, True) is None
    assert imputed_mean_var(x, seen) == pytest.approx((expected, 0.25 / 16))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 100.0, allow_nan=False), min_size=2, max_size=40, unique=True))
def test_with_nothing_censored_it_is_the_plug_in_variance_of_a_mean(xs):
    x = np.array(xs)
    seen = np.ones(len(x), dtype=bool)
    assert km_mean_var(x, seen) == pytest.approx(x.var() / len(x), rel=1e-9, abs=1e-12)
    assert imputed_mean_var(x, seen)[1] == 0.0
    assert km_mean(x, seen) == pytest.approx(x.mean())


def test_the_rows_z_is_standard_normal_against_a_known_world():
    """A world of 40 rows (lognormal latencies, mean 2.92), 150 attempts per replication censored independently at
    uniform(0, 2 x the longest row) (about 25% censored), 400 replications (fixed seeds). Over them: the KM mean's
    spread agrees with the root of its mean estimated variance within 12% (the spread of 400 draws is itself known
    to about 3.5%), and the z of the rows ``live_rows`` makes (their mean against the truth over the root of both
    variances) has mean within 0.2 of 0 (its standard error: 0.05) and sd within 0.13 of 1."""
    world = np.random.default_rng(0).lognormal(1.0, 0.6, 40)
    truth = float(world.mean())
    rng = np.random.default_rng(1)
    means, variances, zs = [], [], []
    for rep in range(400):
        lat = rng.choice(world, 150)
        cut = rng.uniform(0.0, 2.0 * world.max(), 150)
        seen = lat <= cut
        vals = np.minimum(lat, cut)
        obs = [Obs(0, "m", float(v), bool(s), 10.0, True, 1, f"r{rep}:{i}") for i, (v, s) in enumerate(zip(vals, seen))]
        rows, _, _ = live_rows(obs, seed=0)
        v_km, v_imp = imputed_mean_var(vals, seen)
        means.append(km_mean(vals, seen))
        variances.append(v_km)
        zs.append((np.mean([r["latency"] for r in rows]) - truth) / np.sqrt(v_km + v_imp))
    assert np.std(means) == pytest.approx(np.sqrt(np.mean(variances)), rel=0.12)
    assert abs(np.mean(zs)) < 0.2 and abs(np.std(zs) - 1.0) < 0.13


def test_the_donors_noise_is_the_imputation_variance():
    """One sample from the world above with heavier censoring (37%), its rows rebuilt with 400 imputation
    seeds: the spread of their means is the root of the imputation variance within 10% (the spread of 400 draws
    is itself known to about 3.5%); that part is a sixth of the whole variance here."""
    world = np.random.default_rng(0).lognormal(1.0, 0.6, 40)
    rng = np.random.default_rng(2)
    lat = rng.choice(world, 150)
    cut = rng.uniform(0.0, 1.2 * world.max(), 150)
    seen = lat <= cut
    vals = np.minimum(lat, cut)
    obs = [Obs(0, "m", float(v), bool(s), 10.0, True, 1, f"t:{i}") for i, (v, s) in enumerate(zip(vals, seen))]
    rebuilt = [np.mean([r["latency"] for r in live_rows(obs, seed=k)[0]]) for k in range(400)]
    v_km, v_imp = imputed_mean_var(vals, seen)
    assert np.std(rebuilt) == pytest.approx(np.sqrt(v_imp), rel=0.10)
    assert 0.1 < v_imp / (v_km + v_imp) < 0.3

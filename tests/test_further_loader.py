"""LOADER decision math (docs/further_baselines.md, section 2) on hand-worked examples, plus hand-checked edge cases.

The DAGs are those of tests/further_dags.py; the expected values were worked out by hand from the
published behaviour described in docs/further_baselines.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import lambertw

from simulator.baselines.further.loader import (
    FIX_CLAMP_A,
    FIX_LAMBERT1,
    FIX_RCUR0,
    FIX_UNITS,
    LoaderParams,
    Snapshot,
    c_tilde,
    d_tilde,
    discretise,
    lambert_r,
    lambert_wm1,
    loader_all_paths_decision,
    loader_colgen_decision,
    loader_dual_decision,
    loader_static_plan,
    norm_simplex,
    units_scale,
)
from tests.further_dags import CHAIN, DIAMOND, graph, inputs

# ---------------------------------------------------------------------------
# helpers (section 7.1)
# ---------------------------------------------------------------------------

LAMBERT_COLS = [(1, 1), (0.25, 1), (1, 0.1), (1, 0.01), (1, 1e-3), (1, 1e-8), (1, 1e-12), (1e-3, 5)]
LAMBERT_TABLE = {
    0.05: [5.92803, 3.041, 16.9052, 41.112, 78.5898, 301.218, 480.781, 1],
    0.3: [2.07661, 1.1062, 5.21639, 10.3679, 16.5304, 48.7552, 74.578, 1],
    0.5: [1.42134, 1, 3.35892, 6.22163, 9.45263, 26.0467, 39.3344, 1],
    0.8: [1, 1, 1.86429, 3.18022, 4.59094, 11.7411, 17.4638, 1],
    0.95: [1, 1, 1.18198, 1.9109, 2.67312, 6.51522, 9.58971, 1],
    0.999: [1, 1, 1, 64, 1.27999, 2.94645, 4.27978, 1],
    1.0: [1, 1, 1, 64, 64, 64, 1.12012, 1],
}


@pytest.mark.parametrize("p", sorted(LAMBERT_TABLE))
def test_lambert_closed_form_table(p):
    got = [lambert_r(p, w, b, 1.0, False) for w, b in LAMBERT_COLS]
    want = LAMBERT_TABLE[p]
    for g, w in zip(got, want):
        # the table prints 6 significant digits
        assert g == pytest.approx(w, rel=6e-6, abs=6e-6)


def test_lambert_closed_form_values_and_brute_force():
    for (p, w, beta), want in (((0.5, 1, 1), 1.421343), ((0.3, 0.5, 0.01), 8.656213), ((0.8, 1, 0.05), 2.240122)):
        r = lambert_r(p, w, beta, 1.0, False)
        assert r == pytest.approx(want, abs=1e-6)
        grid = np.arange(1.0, 40.0, 3e-4)
        a = 1.0 - p
        brute = grid[np.argmin((w + beta * grid) / (1.0 - a**grid))]
        assert abs(brute - r) < 1e-4 + 3e-4


def test_lambert_wm1_matches_scipy():
    for c in (1.0 + 1e-6, 1.001, 1.5, 2.0, 5.0, 30.0, 200.0, 499.0):
        z = -math.exp(-c)
        assert lambert_wm1(z) == pytest.approx(lambertw(z, k=-1).real, rel=1e-9)


def test_lambert_d4_correction_returns_one():
    # faithful: 64 for p = 1, w = 1 and every beta in about (2.8e-11, 0.055), including the 1e-8 floor
    for beta in (3e-11, 1e-8, 1e-4, 0.05):
        assert lambert_r(1.0, 1.0, beta, 1.0, False) == 64.0
        assert lambert_r(1.0, 1.0, beta, 1.0, True) == 1.0
    assert lambert_r(1.0, 1.0, 0.06, 1.0, False) == 1.0
    assert lambert_r(1.0, 1.0, 2e-11, 1.0, False) < 2.0
    assert lambert_r(0.999, 1.0, 0.01, 1.0, False) == 64.0
    assert lambert_r(0.999, 1.0, 1e-3, 1.0, False) == pytest.approx(1.27999, abs=1e-5)


def test_surrogates():
    d = lambda delta, p, rc, r: d_tilde(delta, 10.0, p, rc, r, False)  # noqa: E731
    c = lambda delta, p, rc, r: c_tilde(delta, 10.0, p, rc, r, 0.0, False, False)  # noqa: E731
    for (p, rc, r), (dw, cw) in {
        (0.5, 0, 1): (20, 20), (0.5, 0, 2): (13.3333, 26.6667), (0.5, 0, 4): (10.6667, 42.6667),
        (0.5, 1, 1): (10, 10), (0.5, 1, 2): (6.66667, 13.3333), (0.8, 0, 1): (12.5, 12.5), (0.8, 1, 1): (2.5, 2.5),
    }.items():  # fmt: skip
        assert d(0.0, p, rc, r) == pytest.approx(dw, rel=1e-5)
        assert c(0.0, p, rc, r) == pytest.approx(cw, rel=1e-5)
    assert d(0.0, 1.0, 0, 3) == 0.0 and c(0.0, 1.0, 0, 3) == 0.0  # see `_clamp`: p = 1 costs nothing
    assert d(5.0, 0.5, 2, 3) == pytest.approx(7.857143, abs=1e-6)
    assert c(5.0, 0.5, 2, 3) == pytest.approx(33.571429, abs=1e-6)


def test_discretise_and_simplex():
    assert discretise(2.3) == (2, 3)
    assert discretise(0.4) == (1, 1)
    assert discretise(math.nan) == (1, 1)
    assert discretise(math.inf) == (1, 1)
    lam = norm_simplex(np.concatenate([norm_simplex(np.array([0.7, 0.3])) * 0.95, [0.05]]))
    np.testing.assert_allclose(lam, [0.665, 0.285, 0.05], atol=1e-12)
    np.testing.assert_allclose(norm_simplex(np.array([0.0, -1.0])), [0.5, 0.5])


# ---------------------------------------------------------------------------
# loader_static (section 7.2)
# ---------------------------------------------------------------------------

STATIC_TABLE = {
    10: ((1, 1, 1), (1, 1, 1)),
    60: ((1, 1, 1), (3, 2, 1)),
    150: ((3, 2, 1), (3, 2, 1)),
    400: ((26, 12, 7), (26, 12, 7)),
    5000: ((26, 12, 7), (26, 12, 7)),
}


@pytest.mark.parametrize("B", sorted(STATIC_TABLE))
def test_loader_static_chain_table(B):
    g, t, p, k = inputs(CHAIN)
    orig, bf = STATIC_TABLE[B]
    assert tuple(loader_static_plan(g, t, p, k, B, 0)) == orig
    assert tuple(loader_static_plan(g, t, p, k, B, 0, bf=True)) == bf


def _starts(spec, B, seed=0, bf=False):
    g, t, p, k = inputs(spec)
    starts = []
    plan = loader_static_plan(g, t, p, k, B, seed, bf=bf, starts=starts)
    return tuple(plan), [(tuple(s.plan) if s.plan is not None else None, s.score) for s in starts]


def test_loader_static_restarts():
    plan, starts = _starts(CHAIN, 150)
    assert plan == (3, 2, 1)
    assert starts[0][0] == (2, 1, 1) and starts[0][1] == pytest.approx(17.41228, abs=1e-5)
    for s in starts[1:]:
        assert s[0] == (3, 2, 1) and s[1] == pytest.approx(15.09085, abs=1e-5)
    # B = 60: the stable plan overrides the feasible ones (best feasible = largest cost) in every restart
    plan, starts = _starts(CHAIN, 60)
    assert plan == (1, 1, 1)
    assert all(s[0] == (1, 1, 1) and s[1] == pytest.approx(24.07895, abs=1e-5) for s in starts)
    plan, starts = _starts(CHAIN, 60, bf=True)
    assert plan == (3, 2, 1)
    assert all(s[0] == (3, 2, 1) and s[1] == pytest.approx(15.09085, abs=1e-5) for s in starts[1:])


def test_loader_static_other_seeds_and_diamond():
    assert _starts(CHAIN, 150, seed=1)[0] == (5, 3, 2)
    assert _starts(CHAIN, 150, seed=7)[0] == (2, 1, 1)
    plan, starts = _starts(DIAMOND, 150)
    assert plan == (2, 3, 1, 1)
    assert [s[0] for s in starts] == [(1, 1, 1, 1), (1, 1, 1, 1), (2, 3, 1, 1)]
    np.testing.assert_allclose([s[1] for s in starts], [108.5714, 108.5714, 55.95129], atol=1e-4)


def test_loader_static_is_independent_of_the_cost_mode():
    """LOADER ignores kappa (see `_units`): the same plan whatever kappa is."""
    g, t, p, k = inputs(CHAIN)
    a = loader_static_plan(g, t, p, k, 150, 0)
    b = loader_static_plan(g, t, p, k * 1e6, 150, 0)
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------
# receding LOADER, first decision (section 7.3)
# ---------------------------------------------------------------------------


def _first(spec, B, kind, trace=False):
    g, t, p, k = inputs(spec)
    snap = Snapshot(np.ones(g.n, bool), np.zeros(g.n), np.zeros(g.n))
    if kind == "dual":
        return loader_dual_decision(g, snap, t, p, k, B, trace=trace)
    if kind == "bf":
        return loader_dual_decision(g, snap, t, p, k, B, bf=True, trace=trace)
    if kind == "all":
        return loader_all_paths_decision(g, snap, t, p, k, B, trace=trace)
    return loader_colgen_decision(g, snap, t, p, k, B)


@pytest.mark.parametrize(
    "spec,B,want",
    [(CHAIN, B, (1, 1, 1, 1)) for B in (10, 60, 150, 400)]
    + [(CHAIN, 5000, (26, 26, 39, 39))]
    + [(DIAMOND, B, (1, 1, 1, 1)) for B in (10, 60, 150, 400)]
    + [(DIAMOND, 5000, (20, 20, 30, 30))],
)
def test_receding_first_action_table(spec, B, want):
    got = tuple(int(_first(spec, B, kind).counts[0]) for kind in ("dual", "bf", "all", "colgen"))
    assert got == want


def test_loader_dual_chain_trace():
    r = _first(CHAIN, 150, "dual", trace=True)
    assert r.iterations == 6
    np.testing.assert_allclose(r.trace[:, 0], [1, 1e-8, 35, 31.7039, 28.4079, 25.1118], rtol=1e-5)
    plans = [tuple(x) for x in r.trace_plans]
    assert plans == [(1, 1, 1), (26, 12, 7)] + [(1, 1, 1)] * 4
    assert r.trace[0, 1] == pytest.approx(40 + 12.5 + 31.579, abs=1e-3)  # (1,1,1) costs 84.08 <= 150
    assert tuple(r.counts) == (1, 1, 1) and r.n_paths == 1


def test_loader_all_paths_diamond_trace():
    r = _first(DIAMOND, 400, "all", trace=True)
    assert r.n_paths == 2  # [0,1,3] and [0,2,3]
    np.testing.assert_allclose(r.trace[:, 2], [0.5, 0.5621, 0.6055, 0.6803, 0.7468, 0.8035], atol=1e-4)
    np.testing.assert_allclose(r.trace[:, 0], [1, 1e-12, 173.0, 162.762, 152.524, 142.286], rtol=1e-5)
    assert tuple(r.trace_plans[0]) == (1, 2, 1, 1)
    assert tuple(r.trace_plans[1]) == (30, 73, 12, 23)
    assert all(tuple(x) == (1, 1, 1, 1) for x in r.trace_plans[2:])
    # No iteration looks feasible at first sight, but the beta steps imply costs 218.8 and 195.2 (<= 400) for (1,2,1,1) and (1,1,1,1). Either way the
    # action on node 0 is 1.
    assert r.counts[0] == 1


def test_top_k_and_colgen_on_the_diamond():
    assert _first(DIAMOND, 150, "dual").n_paths == 1  # [[0, 1, 3]] only: halving keeps it critical
    r = _first(DIAMOND, 150, "colgen")
    assert r.cg_rounds == 1 and r.n_paths == 1


# ---------------------------------------------------------------------------
# corrections and edge cases (sections 5 and 6)
# ---------------------------------------------------------------------------


def test_p_one_node_is_free_unless_clamped():
    assert d_tilde(0.0, 10.0, 1.0, 0.0, 1.0, False) == 0.0
    assert d_tilde(2.0, 10.0, 1.0, 0.0, 1.0, False) == 2.0  # d = delta
    assert d_tilde(0.0, 10.0, 1.0, 0.0, 1.0, True) == pytest.approx(10.0, rel=1e-6)  # `_clamp`: d = t


def test_p_zero_node():
    d = d_tilde(0.0, 10.0, 0.0, 0.0, 3.0, False)
    assert d == pytest.approx(1e13, rel=1e-3)  # y_fut clipped: d ~ 1e12 t
    assert lambert_r(0.0, 1.0, 1.0, 1.0, False) == 1.0  # alpha = 1e-12 <= 1e-10
    r = lambert_r(0.0, 1.0, 1e-8, 1.0, False)
    assert math.isfinite(r) and 1e9 < r < 1e11  # ill-conditioned: about 1e10 at the dual floor


def test_d2_correction_changes_static_surrogates():
    g, t, p, k = inputs(CHAIN)
    faithful = loader_static_plan(g, t, p, k, 150, 0)
    fixed = loader_static_plan(g, t, p, k, 150, 0, fixes=FIX_RCUR0)
    # r_cur = 0 costs each node 1/(1 - p) more: at B = 150 the corrected plan is more frugal
    assert fixed.sum() <= faithful.sum()


def test_units_correction_uses_kappa():
    """Units mismatch (`_units`): in money mode the faithful plan is Retry-1; the units fix spends the cent budget on retries."""
    g, t, p, k = inputs(CHAIN)
    snap = Snapshot(np.ones(3, bool), np.zeros(3), np.zeros(3))
    faithful = loader_dual_decision(g, snap, t, p, k, 0.05)
    assert tuple(faithful.counts) == (1, 1, 1)
    fixed = loader_dual_decision(g, snap, t, p, k, 0.05, fixes=FIX_UNITS)
    assert fixed.planned and fixed.counts[0] > 1
    cost = sum(c_tilde(0.0, t[v], p[v], 0.0, float(fixed.counts[v]), k[v], False, True) for v in range(3))
    assert cost <= 0.05
    np.testing.assert_allclose(units_scale(np.array([10.0, 0.0, 5.0]), np.array([2.0, 0.0, 0.0])), [5, 0, np.inf])


def test_money_mode_faithful_is_retry_one():
    """Money mode (docs/further_baselines.md, "What to expect"): budgets of a few cents make every LOADER policy ask for 1."""
    for spec in (CHAIN, DIAMOND):
        g, t, p, k = inputs(spec)
        snap = Snapshot(np.ones(g.n, bool), np.zeros(g.n), np.zeros(g.n))
        for B in (0.01, 0.03, 0.05):
            assert all(x == 1 for x in loader_static_plan(g, t, p, k, B, 0))
            for fn in (loader_dual_decision, loader_all_paths_decision, loader_colgen_decision):
                assert fn(g, snap, t, p, k, B).counts[0] == 1


def test_single_node_dag():
    g = graph([[]])
    t, p, k = np.array([10.0]), np.array([0.5]), np.array([1.0])
    # huge budget: beta sinks to its 1e-8 floor, r* = 26.0467 for p = 0.5 (7.1), floor wins
    assert tuple(loader_static_plan(g, t, p, k, 1e6, 0)) == (26,)
    snap = Snapshot(np.ones(1, bool), np.zeros(1), np.zeros(1))
    for fn in (loader_dual_decision, loader_all_paths_decision, loader_colgen_decision):
        r = fn(g, snap, t, p, k, 10.0)
        assert r.counts.shape == (1,) and r.counts[0] >= 1


def test_zero_latency_and_zero_budget():
    g = graph([[], [0]])
    t, p, k = np.array([0.0, 10.0]), np.array([0.5, 0.5]), np.array([1.0, 1.0])
    plan = loader_static_plan(g, t, p, k, 100.0, 3)  # r_max uses max(t, 1e-9): no division by zero
    assert plan.shape == (2,) and (plan >= 1).all()
    snap = Snapshot(np.ones(2, bool), np.zeros(2), np.zeros(2))
    r = loader_all_paths_decision(g, snap, t, p, k, 0.0)
    assert not r.planned and tuple(r.counts) == (1, 1)  # nothing feasible: 1s
    r = loader_dual_decision(g, snap, t, p, k, 0.0)
    assert tuple(r.counts) == (1, 1)  # the stable (infeasible) plan: Retry-1


def test_in_flight_snapshot_enters_the_surrogates():
    """A node with attempts in flight is planned with its delta and rho (cost r_cur delta + r d)."""
    g, t, p, k = inputs(DIAMOND)
    alive = np.array([False, True, True, True])
    snap = Snapshot(alive, np.array([0.0, 12.0, 0.0, 0.0]), np.array([0.0, 3.0, 0.0, 0.0]))
    r = loader_dual_decision(g, snap, t, p, k, 5000.0, trace=True)
    c0 = (3 * 12.0 + r.trace_plans[0][1] * d_tilde(12.0, 40.0, 0.3, 3.0, float(r.trace_plans[0][1]), False)
          + sum(c_tilde(0.0, t[v], p[v], 0.0, float(r.trace_plans[0][v]), k[v], False, False) for v in (2, 3)))  # fmt: skip
    assert r.trace[0, 1] == pytest.approx(c0)


def test_all_paths_cap_falls_back_to_ones():
    # 3 layers of 3 nodes, complete between layers: 27 paths
    parents = [[], [], []] + [[0, 1, 2]] * 3 + [[3, 4, 5]] * 3
    g = graph(parents)
    n = g.n
    t, p, k = np.full(n, 10.0), np.full(n, 0.5), np.ones(n)
    snap = Snapshot(np.ones(n, bool), np.zeros(n), np.zeros(n))
    ok = loader_all_paths_decision(g, snap, t, p, k, 1e5, LoaderParams(max_paths=27))
    assert ok.n_paths == 27 and ok.planned
    capped = loader_all_paths_decision(g, snap, t, p, k, 1e5, LoaderParams(max_paths=26))
    assert not capped.planned and (capped.counts == 1).all()
    # column generation's pricing enumeration is capped the same way and stays bounded
    r = loader_colgen_decision(g, snap, t, p, k, 1e5, LoaderParams(max_paths=5))
    assert r.counts.shape == (n,)


def test_fix_bits_are_distinct():
    assert len({FIX_UNITS, FIX_RCUR0, FIX_CLAMP_A, FIX_LAMBERT1}) == 4

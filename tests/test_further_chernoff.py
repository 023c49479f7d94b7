"""Chernoff-deadline decision math (docs/further_baselines.md, section 3) on hand-worked examples, plus edge cases.

The DAGs are those of tests/further_dags.py; the expected values were worked out by hand from the
published behaviour described in docs/further_baselines.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.baselines.further.chernoff import (
    DeadlineParams,
    DualInputs,
    RoundingInputs,
    cost,
    dcost,
    dpsi,
    node_subproblem,
    phi_and_weights,
    psi,
    q_of,
    r_min_of,
    receding_targets,
    reservation_alpha,
    round_receding,
    solve_deadline,
    solve_theta,
    static_counts,
    success_lower_bound,
    theta_grid,
)
from simulator.baselines.further.graph import remaining, topo_order
from simulator.costs.arrays import CostSetting
from tests.further_dags import CHAIN, DIAMOND, graph, inputs

# ---------------------------------------------------------------------------
# helpers (section 7.4)
# ---------------------------------------------------------------------------

PSI_TABLE = [
    ((0.01, 20, 0.5, 1), (0.4502613863, -0.3942081717, 0.2885400082)),
    ((0.01, 20, 0.5, 3), (0.232139965, -0.02587382309, 0.2885400082)),
    ((0.05, 20, 0.5, 1), (math.inf, -math.inf, 1.442696041)),
    ((0.05, 20, 0.5, 1.5), (3.809411012, -16.72712263, 1.442696041)),
    ((0.05, 20, 0.5, 2), (1.850410789, -1.238985014, 1.442696041)),
    ((0.001, 10, 0.9, 1), (0.01111730919, -0.002860152521, 0.004343944819)),
    ((0.001, 10, 1.0, 1), (0.01, -2.776963789e-13, 0.0003629120683)),
]


@pytest.mark.parametrize("args,want", PSI_TABLE)
def test_psi_table(args, want):
    theta, tau, p, r = args
    q = q_of(p)
    got = (psi(theta, tau, q, r), dpsi(theta, tau, q, r), r_min_of(theta, tau, q))
    for g, w in zip(got, want):
        if math.isinf(w):
            assert g == w
        else:
            assert g == pytest.approx(w, rel=1e-9)


def test_cost_surrogate():
    q = q_of(0.5)
    np.testing.assert_allclose([cost(2, q, a, 3) for a in (0, 0.5, 1)], [6, 6.428571, 6.857143], atol=1e-6)
    np.testing.assert_allclose([dcost(2, q, a, 3) for a in (0, 0.5, 1)], [2, 1.803356, 1.606713], atol=1e-6)


def _csr(g):
    return g.parent_ptr, g.parent_idx, g.child_ptr, g.child_idx


def test_phi_and_path_weights_on_the_diamond():
    g, *_ = inputs(DIAMOND)
    alive = np.ones(4, bool)
    order, count = topo_order(*_csr(g), alive)
    w = np.zeros(4)
    phi = phi_and_weights(*_csr(g), alive, order, count, np.array([0.2, 0.5, 0.1, 0.3]), w)
    assert phi == pytest.approx(0.5 + math.log(math.exp(0.5) + math.exp(0.1)), abs=1e-12)
    assert phi == pytest.approx(1.51301525, abs=1e-8)
    np.testing.assert_allclose(w, [1, 0.598688, 0.401312, 1], atol=1e-6)


def test_success_lower_bound():
    got = [success_lower_bound(J) for J in (0.5, 0, -0.1, -1, -60)]
    np.testing.assert_allclose(got, [0, 0, 0.0951626, 0.6321206, 1], atol=1e-7)


@pytest.mark.parametrize("beta,want", [(0, 62.5), (0.01, 10.77509), (0.1, 7.46807), (1, 4.28323), (10, 1.79787)])
def test_node_subproblem(beta, want):
    q = q_of(0.5)
    theta = 0.001
    r, ok = node_subproblem(theta, 20.0, q, 0.0008, 0.0, r_min_of(theta, 20.0, q), 1.0, beta, 0.05, 1e-4)
    assert ok
    assert r == pytest.approx(want, abs=5e-6)


def _chain_money():
    return inputs(CHAIN)


def test_theta_grids_chain_money():
    g, t, p, k = _chain_money()
    alive = np.ones(3, bool)
    grid = theta_grid(t, p, k, alive, 0.05)
    want = [1.109102e-09, 8.701538e-04, 1.0576226e-03, 1.0980115e-03, 1.1067130e-03, 1.1085877e-03,
            1.1089916e-03, 1.1090786e-03, 1.1090973e-03, 1.1091014e-03]  # fmt: skip
    np.testing.assert_allclose(grid, want, rtol=5e-7)
    lin = theta_grid(t, p, k, alive, 0.05, DeadlineParams(theta_grid_size=5, theta_grid_spacing="linear"))
    np.testing.assert_allclose(lin, [1.109102e-09, 2.772762e-04, 5.545512e-04, 8.318263e-04, 1.1091014e-03], rtol=5e-7)
    assert list(theta_grid(t, p, k, alive, 0.0)) == [1e-12]  # no budget: upper = 0
    assert list(theta_grid(t, p, k, np.zeros(3, bool), 0.05)) == [1e-12]  # empty R


def test_chain_largest_theta_solve_trace():
    g, t, p, k = _chain_money()
    alive = np.ones(3, bool)
    rem = remaining(_csr(g), alive, g.node_ids)
    theta = 0.001109101388198
    plan = np.zeros(3)
    w = np.zeros(3)
    trace = np.full((25, 4), np.nan)
    inp = DualInputs(np.maximum(t, 1e-9), np.clip(1 - p, 1e-12, 1 - 1e-12), k, np.zeros(3), 0.05, 25, 0.2, 1e-4)
    phi, status, its, beta = solve_theta(rem, inp, theta, plan, w, trace)
    assert status == 1 and its == 25  # does not converge: the 25-iteration cap fixes the result
    assert phi == pytest.approx(0.0666151429, abs=1e-10)
    assert beta == pytest.approx(0.0308, abs=5e-5)
    np.testing.assert_allclose(plan, [9.093552, 4.435101, 2.497613], atol=1e-6)
    C, b, ph, pd = trace[0]
    assert C == pytest.approx(0.15) and b == pytest.approx(1.49182, abs=1e-5) and ph == pytest.approx(0.066546, abs=1e-6)
    assert trace[1, 0] == pytest.approx(0.00601259, abs=1e-8)
    assert trace[1, 1] == pytest.approx(1.25113, abs=1e-5)
    assert trace[1, 2] == pytest.approx(0.069289517, abs=1e-9)
    assert trace[2, 0] == pytest.approx(0.00632328, abs=1e-8)
    assert trace[2, 1] == pytest.approx(1.05058, abs=1e-5)
    assert trace[2, 2] == pytest.approx(0.068864584, abs=1e-9)
    assert trace[24, 0] == pytest.approx(0.0130451, abs=1e-7)
    assert trace[24, 1] == pytest.approx(0.0308, abs=5e-5)
    assert trace[24, 2] == pytest.approx(0.066615143, abs=1e-9)
    assert trace[24, 3] == pytest.approx(0.214, abs=5e-4)


def test_chain_scores_over_the_grid():
    g, t, p, k = _chain_money()
    sol = solve_deadline(g, np.ones(3, bool), t, p, k, 0.05, 120.0)
    want = [1.2425769e-06, -0.052142834, -0.06338882, -0.065811741, -0.066333741, -0.066446207, -0.066470437,
            -0.066475658, -0.066476782, -0.066477024]  # fmt: skip
    np.testing.assert_allclose(sol.scores, want, rtol=1e-6, atol=1e-12)
    assert sol.index == 9 and sol.theta == pytest.approx(0.001109101388198, abs=1e-15)
    sol600 = solve_deadline(g, np.ones(3, bool), t, p, k, 0.05, 600.0)
    assert sol600.theta == sol.theta


# ---------------------------------------------------------------------------
# the policies on the two DAGs (section 7.5)
# ---------------------------------------------------------------------------

POLICY_TABLE = [
    (CHAIN, 0.003, 60, 6.6546e-11, [0.0125, 0.0083, 0.0052], (1, 1, 1), 1),
    (CHAIN, 0.01, 60, 2.2182e-10, [0.0230, 0.0151, 0.0096], (1, 1, 1), 1),
    (CHAIN, 0.01, 120, 2.2182e-04, [4.61465, 2.48136, 1.44176], (5, 2, 1), 5),
    (CHAIN, 0.05, 120, 1.109101388e-03, [9.09355, 4.43510, 2.49761], (9, 4, 2), 10),
    (CHAIN, 0.05, 600, 1.109101388e-03, [9.09355, 4.43510, 2.49761], (9, 4, 2), 10),
    (DIAMOND, 0.01, 120, 6.84057e-05, [1.77954, 2.26531, 1.00805, 1.69085], (2, 2, 1, 2), 2),
    (DIAMOND, 0.05, 120, 3.42028e-04, [4.68485, 7.92312, 2.25568, 4.02291], (5, 8, 2, 4), 5),
    (DIAMOND, 0.05, 600, 3.42028e-04, [4.68485, 7.92312, 2.25568, 4.02291], (5, 8, 2, 4), 5),
]


@pytest.mark.parametrize("spec,B,D,theta,plan,static,first", POLICY_TABLE)
def test_deadline_policies_table(spec, B, D, theta, plan, static, first):
    g, t, p, k = inputs(spec)
    alive = np.ones(g.n, bool)
    sol = solve_deadline(g, alive, t, p, k, B, D)
    # the table prints 5 significant digits of theta and 4-6 of the plan
    assert sol.theta == pytest.approx(theta, rel=1e-4)
    np.testing.assert_allclose(sol.plan, plan, rtol=5e-4, atol=5e-5)
    assert tuple(static_counts(sol, g.n)) == static
    targets, _ = receding_targets(g, alive, np.array([0]), t, p, k, B, sol)
    assert int(targets[0]) == first


@pytest.mark.parametrize(
    "spec,B,D,J,lb",
    [(CHAIN, 0.05, 120, -0.066477, 0.0643156), (CHAIN, 0.05, 600, -0.598846, 0.450554), (DIAMOND, 0.05, 600, 0.508158, 0)],
)
def test_scores_and_bounds(spec, B, D, J, lb):
    g, t, p, k = inputs(spec)
    sol = solve_deadline(g, np.ones(g.n, bool), t, p, k, B, D)
    assert sol.score == pytest.approx(J, abs=1e-6)
    assert sol.lower_bound == pytest.approx(lb, abs=1e-6)


def _diamond_after_root(B):
    g, t, p, k = inputs(DIAMOND)
    alive = np.array([False, True, True, True])
    sol = solve_deadline(g, alive, t, p, k, B, 120.0)
    targets, mode = receding_targets(g, alive, np.array([1, 2]), t, p, k, B, sol)
    return sol, targets, mode


def test_receding_after_the_root_completes():
    sol, targets, mode = _diamond_after_root(0.05)
    assert sol.theta == pytest.approx(3.69622e-04, rel=1e-5)
    np.testing.assert_allclose(sol.plan[1:], [8.90158, 2.42144, 4.3388], atol=1e-5)
    assert mode == 1 and (int(targets[1]), int(targets[2])) == (9, 3)
    _, targets, _ = _diamond_after_root(0.003)  # one each affordable (0.00288)
    assert (int(targets[1]), int(targets[2])) == (1, 1)
    # one each not affordable; node 2 at 0 has a finite Phi at the tiny theta (zero-count candidates scored at r = 1e-9): no safety fallback
    _, targets, _ = _diamond_after_root(0.0025)
    assert (int(targets[1]), int(targets[2])) == (1, 0)


@pytest.mark.parametrize("mode", ["token", "latency"])
def test_token_and_latency_modes_collapse_to_one(mode):
    """The published theta bound (see `_kappa`): only the smallest theta is feasible, plans are about 0.01-0.05, so r_v = 1."""
    g, t, p, k = inputs(CHAIN, CostSetting(cost_mode=mode))
    B = 20 * float(k.sum())
    sol = solve_deadline(g, np.ones(3, bool), t, p, k, B, 120.0)
    assert sol.index == 0 and sol.plan.max() < 0.5
    assert tuple(static_counts(sol, 3)) == (1, 1, 1)
    fixed = solve_deadline(g, np.ones(3, bool), t, p, k, B, 120.0, use_kappa=True)
    assert static_counts(fixed, 3).sum() > 3  # the exact bound makes the budget count


# ---------------------------------------------------------------------------
# edge cases, reservation modes and the greedy rounding
# ---------------------------------------------------------------------------


def test_p_one_and_p_zero():
    q1 = q_of(1.0)
    assert -math.log(q1) == pytest.approx(27.631, abs=1e-3)
    assert psi(0.01, 10.0, q1, 1.0) == pytest.approx(0.1, abs=1e-12)  # one attempt: psi = theta tau
    q0 = q_of(0.0)
    assert r_min_of(0.01, 10.0, q0) > 1e10  # b ~ 1e-12
    g = graph([[]])
    one = (np.array([10.0]), np.array([0.0]), np.array([1.0]))
    sol = solve_deadline(g, np.ones(1, bool), *one, 5.0, 100.0)
    # grid [1e-12]; r_min = 1e-12 * 10 / 1e-12 ~ 10 attempts cost 10 > 5: infeasible, r_v = 1
    assert list(sol.grid) == [1e-12] and not sol.solved
    assert tuple(static_counts(sol, 1)) == (1,)
    sol = solve_deadline(g, np.ones(1, bool), *one, 50.0, 100.0)
    assert sol.solved and sol.plan[0] >= 10.0


def test_single_node_phi_is_psi():
    g = graph([[]])
    sol = solve_deadline(g, np.ones(1, bool), np.array([10.0]), np.array([0.5]), np.array([1.0]), 10.0, 100.0)
    assert sol.solved
    assert sol.phi == pytest.approx(psi(sol.theta, 10.0, q_of(0.5), sol.plan[0]), rel=1e-12)
    assert sol.weights[0] == 1.0


def test_zero_latency_and_zero_budget():
    g = graph([[], [0]])
    sol = solve_deadline(g, np.ones(2, bool), np.array([0.0, 5.0]), np.array([0.5, 0.5]), np.array([1.0, 1.0]), 4.0, 50.0)
    assert sol.solved and np.isfinite(sol.plan).all()
    none = solve_deadline(g, np.ones(2, bool), np.array([1.0, 5.0]), np.array([0.5, 0.5]), np.array([1.0, 1.0]), 0.0, 50.0)
    assert list(none.grid) == [1e-12]
    targets, mode = receding_targets(g, np.ones(2, bool), np.array([0]), np.array([1.0, 5.0]), np.array([0.5, 0.5]),
                                     np.array([1.0, 1.0]), 0.0, none)  # fmt: skip
    assert int(targets[0]) == 0  # nothing affordable


def test_no_solution_targets_in_pool_order():
    g = graph([[], [], []])
    t, p, k = np.full(3, 10.0), np.full(3, 0.0), np.array([2.0, 5.0, 1.0])
    sol = solve_deadline(g, np.ones(3, bool), t, p, k, 3.5, 100.0)
    assert not sol.solved  # p = 0: r_min unaffordable at every theta
    targets, mode = receding_targets(g, np.ones(3, bool), np.array([0, 1, 2]), t, p, k, 3.5, sol)
    assert mode == 0 and tuple(targets) == (1, 0, 1)  # 2 fits, 5 does not, 1 fits in the rest


def test_reservation_modes():
    g, t, p, k = inputs(CHAIN)
    alive = np.ones(3, bool)
    order, count = topo_order(*_csr(g), alive)
    a = lambda **kw: reservation_alpha(g, alive, order, count, t, 120.0, DeadlineParams(**kw))  # noqa: E731
    assert (a() == 0).all()
    assert (a(budget_reservation_mode="continuation") == 1).all()
    assert (a(budget_reservation_mode="fixed_alpha", budget_reservation_alpha=0.3) == 0.3).all()
    # adaptive: down = (40, 30, 0); W = floor((120 - down) / tau) = (4, 9, 4); alpha = 1 - 2 / W
    np.testing.assert_allclose(a(budget_reservation_mode="adaptive"), [0.5, 1 - 2 / 9, 0.5])
    sol = solve_deadline(g, alive, t, p, k, 0.05, 120.0, DeadlineParams(budget_reservation_mode="continuation"))
    assert sol.solved


def test_greedy_rounding_beyond_4096_combinations():
    """8 ready roots with plan 2.5 give choices {1, 2, 3}: 3^8 = 6561 > 4096, so greedy."""
    n = 8
    g = graph([[] for _ in range(n)])
    rem = remaining(_csr(g), np.ones(n, bool), g.node_ids)
    ready = np.arange(n, dtype=np.int64)
    plan = np.full(n, 2.5)
    w = np.full(n, 0.125)
    kappa = np.ones(n)
    q = np.full(n, 0.5)
    lat = np.full(n, 10.0)
    targets = np.zeros(n, dtype=np.int64)
    # one each (8), raise to floor 2 (8 more), then the first of the equal gains gets the last attempt
    mode = round_receding(rem, RoundingInputs(ready, n, plan, w, 0.01, lat, lat, q, kappa, kappa, 17.0), targets)
    assert mode == 2
    assert tuple(targets) == (3, 2, 2, 2, 2, 2, 2, 2)
    targets[:] = 0
    mode = round_receding(rem, RoundingInputs(ready, n, plan, w, 0.01, lat, lat, q, kappa, kappa, 12.0), targets)
    assert mode == 2 and tuple(targets) == (2, 2, 2, 2, 1, 1, 1, 1)
    plan7 = plan.copy()
    plan7[7] = 1.5  # 3^7 * 2 = 4374 > 4096: still greedy
    targets[:] = 0
    assert round_receding(rem, RoundingInputs(ready, n, plan7, w, 0.01, lat, lat, q, kappa, kappa, 100.0), targets) == 2
    plan6 = plan.copy()
    plan6[6:] = 1.5  # 3^6 * 4 = 2916 <= 4096: exact
    targets[:] = 0
    assert round_receding(rem, RoundingInputs(ready, n, plan6, w, 0.01, lat, lat, q, kappa, kappa, 100.0), targets) == 1


def test_safety_fallback_counts_any_model():
    """All targets 0: the cheapest affordable ready node gets 1, if any model of a ready node fits."""
    n = 2
    g = graph([[], []])
    rem = remaining(_csr(g), np.ones(n, bool), g.node_ids)
    ready = np.arange(n, dtype=np.int64)
    lat, q = np.full(n, 10.0), np.full(n, 0.5)
    kappa = np.array([3.0, 2.0])
    # plan 0 and a huge theta: every candidate with an attempt is unaffordable or infinite -> all zeros first
    args = (ready, n, np.zeros(n), np.ones(n), 1.0, lat, lat, q, kappa)
    t = np.zeros(n, dtype=np.int64)
    round_receding(rem, RoundingInputs(*args, kappa, 2.5), t)
    assert tuple(t) == (0, 1)  # need_one false (5 > 2.5); node 1 (2.0) fits: the fallback starts it
    t[:] = 0
    round_receding(rem, RoundingInputs(*args, np.array([3.0, 2.0]), 1.5), t)
    assert tuple(t) == (0, 0)  # nothing fits: no fallback
    t[:] = 0
    round_receding(rem, RoundingInputs(*args, np.array([1.0, 2.0]), 1.5), t)
    assert tuple(t) == (0, 0)  # another model of node 0 fits (check passes), but no legacy kappa does

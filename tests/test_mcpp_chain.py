"""The surface's screens end only failures: every simulation, with them and without, on captured decisions.

``simulator.mcpp.kernel.run_pair`` screens a surface pair's simulations
before it simulates any in full (the quick kill: one first attempt past its
room; the chain screen: each node's batches followed in their keys until one
succeeds, against the cut at the charges counted so far), then simulates the
ones they could not end. Exactness means: a simulation that succeeds without
the screens, inside a cell of the staircase, is recorded by the screened run
with the very same total cost and finishing time, and the screened run
records nothing else. Checked here simulation by simulation on decisions
captured from real trees (lognormal, Gaussian and gamma laws on a 9-node
CodeFlow DAG, tight axes where the screens end most simulations; the example
pool's empirical rows), every pair of a sample against every cell of its
decision, with no pair stopped early (``min_wins`` 0).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numba import njit

import simulator.surface.decide as decide
from simulator.costs.arrays import dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.mcpp.kernel import START_UNKNOWN, pair_scratch, run_pair
from simulator.pools.pool import load_pool
from simulator.simulate import RunSettings, policy_for
from simulator.surface.tree import mcpp_trial_cells

MCPP_SMALL = {"M": 8, "max_candidate_actions": 2048}
SIMS = 64  # simulations compared per pair (keys 0..63: more than the planner's M, the same keys)


@njit(cache=False)
def _screened_and_plain(arr, bounds, dec, c, pm, limits, stair, rec):
    """run_pair on one pair with the surface's staircase (screens on) and without (none), recording both."""
    budget, horizon = limits
    stair_b, stair_h = stair
    cost_s, fin_s, cost_p, fin_p = rec
    none = np.empty(0)
    no_stair = np.empty((0, 0))
    no_cells = np.empty(0, dtype=np.int64)
    work_i, work_f, work_b = pair_scratch(dec.completed.shape[0], 0, cost_s.shape[0])
    n = cost_s.shape[0]
    w_s = run_pair(arr, bounds, dec, c, pm, 0, n, cost_s, fin_s, 0, budget, horizon, stair_b, stair_h, none, none,
                   no_cells, work_i, work_f, work_b, START_UNKNOWN)
    w_p = run_pair(arr, bounds, dec, c, pm, 0, n, cost_p, fin_p, 0, budget, horizon, none, no_stair, none, none,
                   no_cells, work_i, work_f, work_b, START_UNKNOWN)
    return w_s, w_p


def _stair(bvals, hvals, cell_i, cell_j):
    """The staircase of cells whose best is 0 (every cell open), built by the surface's own function."""
    stair_b = np.empty(len(bvals))
    stair_h = np.empty((len(bvals), SIMS + 1))
    best = np.zeros(len(cell_i), dtype=np.int64)
    decide._staircase(bvals, hvals, cell_i, cell_j, best, SIMS, stair_b, stair_h)
    return stair_b, stair_h


def _captured(arr, names, budgets, deadlines, trial):
    """(bounds, dec, pairs, grid) of every decision of one tree trial."""
    pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, names)
    seen = []
    original = decide.decide_cells_kernel

    def capture(arr_, bounds, dec, pairs, M, grid, best, track):
        seen.append((bounds, dec, pairs, grid))
        return original(arr_, bounds, dec, pairs, M, grid, best, track)

    decide.decide_cells_kernel = capture
    try:
        mcpp_trial_cells(arr, pol, budgets, deadlines, 42, 0, trial)
    finally:
        decide.decide_cells_kernel = original
    return seen


def _check(arr, decisions, n_decisions=10, n_pairs=12):
    """Compare screened and plain runs on a sample of decisions and pairs; returns (simulations, screened off)."""
    rng = np.random.default_rng(7)
    total = ended = 0
    picks = rng.choice(len(decisions), size=min(n_decisions, len(decisions)), replace=False)
    for d in sorted(picks):
        bounds, dec, (pair_c, pair_m, _pilot), (bvals, hvals, cell_i, cell_j) = decisions[d]
        stair = _stair(bvals, hvals, cell_i, cell_j)
        limits = (float(bvals.max()), float(hvals.max()))
        for p in rng.choice(len(pair_c), size=min(n_pairs, len(pair_c)), replace=False):
            rec = tuple(np.full(SIMS, np.inf) for _ in range(4))
            w_s, w_p = _screened_and_plain(arr, bounds, dec, int(pair_c[p]), int(pair_m[p]), limits, stair, rec)
            cost_s, fin_s, cost_p, fin_p = rec
            for s in range(SIMS):
                total += 1
                if cost_s[s] != np.inf:  # recorded with the screens: the plain run's very success
                    assert (cost_s[s], fin_s[s]) == (cost_p[s], fin_p[s]), (d, p, s)
                elif cost_p[s] != np.inf:  # a success the screened run did not record: in no cell, surely
                    ended += 1
                    inside = (cost_p[s] <= bvals[cell_i] * (1 + 1e-6)) & (fin_p[s] <= hvals[cell_j] * (1 + 1e-6))
                    assert not inside.any(), (d, p, s, cost_p[s], fin_p[s])
                else:
                    ended += 1
            assert w_s <= w_p
    return total, ended


@pytest.mark.parametrize("law", ["lognormal", "gaussian", "gamma"])
def test_screens_end_only_failures_on_a_parametric_dag(cf_pool, law):
    cost = dataclasses.replace(RunSettings().cost, latency_dist=law)
    arr = dag_arrays(cf_pool, 0, cost)
    nb, nd = nominal_budget(arr, ""), nominal_deadline(arr, "")
    budgets, deadlines = np.geomspace(0.3 * nb, 3 * nb, 3), np.geomspace(0.15 * nd, 1.2 * nd, 5)
    decisions = _captured(arr, cf_pool[0].model_ids, budgets, deadlines, trial=1)
    total, ended = _check(arr, decisions)
    assert total >= 5000 and ended > total // 4  # the screens had work to do


def test_screens_end_only_failures_on_empirical_rows(example_pool_path):
    pool = load_pool(example_pool_path)
    dag = 3
    arr = dag_arrays(pool, dag, RunSettings().cost)
    assert arr.row_ptr[-1] > 0  # rows: the quick kill's and the chain's row path
    nb, nd = nominal_budget(arr, ""), nominal_deadline(arr, "")
    budgets, deadlines = np.geomspace(0.3 * nb, 3 * nb, 3), np.geomspace(0.15 * nd, 1.2 * nd, 5)
    decisions = _captured(arr, pool[dag].model_ids, budgets, deadlines, trial=0)
    total, ended = _check(arr, decisions)
    assert total >= 2000 and ended > 0

"""The surface decision's exact cuts on a lognormal CodeFlow DAG: the chain screen and the pilot pairs.

The chain screen (``simulator.mcpp.kernel.run_pair``, surface only) ends a
simulation before it launches anything when the first attempts of the
first batches it will launch already finish the DAG past every cell the
pair can still change; the pilot pairs (``simulator.surface.decide``) run
the last winners of the same ready set first, only to raise the bar below
which a pair cannot matter. Neither may change a cell: tight deadlines on a
parametric (lognormal) pool, where the screen decides most simulations,
are compared cell by cell with the cells' own episodes, and hostile pilots
with none (``docs/surface.md``, "What the published set costs").
"""

from __future__ import annotations

import numpy as np

from simulator.costs.arrays import dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.engine.loop import REASONS
from simulator.simulate import RunSettings, policy_for
from simulator.surface.tree import mcpp_trial_cells

MCPP_SMALL = {"M": 8, "max_candidate_actions": 2048}


def _tight_axes(arr):
    nb, nd = nominal_budget(arr, ""), nominal_deadline(arr, "")
    return np.geomspace(0.3 * nb, 3 * nb, 3), np.geomspace(0.15 * nd, 1.2 * nd, 5)


def test_lognormal_tree_at_tight_deadlines_equals_each_cell_episode(cf_pool):
    """Reason, makespan and total cost per cell, bit for bit, where most simulations end in the chain screen."""
    arr = dag_arrays(cf_pool, 0, RunSettings().cost)
    assert arr.row_ptr[-1] == 0  # parametric draws only: the screen's lognormal path
    budgets, deadlines = _tight_axes(arr)
    names = cf_pool[0].model_ids
    tree_pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, names)
    cell_pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, names)
    reasons = set()
    for trial in range(2):
        out = mcpp_trial_cells(arr, tree_pol, budgets, deadlines, 42, 0, trial)
        k = 0
        for B in budgets:
            for D in deadlines:
                r = run_policy_episode(arr, cell_pol, float(B), float(D), 42, 0, trial)
                assert (REASONS[out.reason[k]], out.makespan[k], out.total_cost[k]) == (
                    r.termination_reason, r.makespan, r.total_cost), (trial, B, D)
                reasons.add(r.termination_reason)
                k += 1
    assert {"completed", "deadline_exhausted"} <= reasons


class _HostilePilots(dict):
    """Pilot pairs that are no one's winners: the first, the middle and the last pair of every decision."""

    def get(self, key, default=None):
        n_pairs = key[0] * key[1]
        return np.array([0, n_pairs // 2, n_pairs - 1], dtype=np.int64)

    def __setitem__(self, key, value):
        pass


def test_pilot_pairs_never_change_a_cell(cf_pool):
    """The same cells with the last winners as pilots, with hostile pilots and with none."""
    import simulator.surface.decide as decide

    arr = dag_arrays(cf_pool, 0, RunSettings().cost)
    budgets, deadlines = _tight_axes(arr)
    names = cf_pool[0].model_ids
    outs = []
    for pilots in (None, _HostilePilots(), "off"):
        pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, names)
        if isinstance(pilots, dict):
            pol._surface_pilots = pilots
        saved = decide.N_PILOTS
        decide.N_PILOTS = 0 if pilots == "off" else saved
        try:
            o = mcpp_trial_cells(arr, pol, budgets, deadlines, 42, 0, 1)
        finally:
            decide.N_PILOTS = saved
        outs.append((o.reason.tolist(), o.makespan.tolist(), o.total_cost.tolist()))
    assert outs[0] == outs[1] == outs[2]


def test_a_pilot_run_stands_for_its_pair_in_order(cf_pool):
    """The loop reuses a pilot's run when it reaches the pilot's pair in order, instead of simulating the pair
    again: on every decision of a tree, any pilots (the winners, losers, random ones, none) give every cell the
    same count and the same pair."""
    import simulator.surface.decide as decide

    arr = dag_arrays(cf_pool, 0, RunSettings().cost)
    budgets, deadlines = _tight_axes(arr)
    pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, cf_pool[0].model_ids)
    seen = []
    original = decide.decide_cells_kernel

    def capture(arr_, bounds, dec, pairs, M, grid, best, track):
        seen.append((bounds, dec, pairs[0], pairs[1], M, grid, best[0].copy(), best[1].copy(), track))
        return original(arr_, bounds, dec, pairs, M, grid, best, track)

    decide.decide_cells_kernel = capture
    try:
        mcpp_trial_cells(arr, pol, budgets, deadlines, 42, 0, 2)
    finally:
        decide.decide_cells_kernel = original
    assert len(seen) >= 20
    rng = np.random.default_rng(5)
    n_reused = 0
    for bounds, dec, pair_c, pair_m, M, grid, w0, p0, track in seen:

        def choose(pilot, bounds=bounds, dec=dec, pair_c=pair_c, pair_m=pair_m, M=M, grid=grid, w0=w0, p0=p0,
                   track=track):  # fmt: skip
            bw, bp = w0.copy(), p0.copy()
            original(arr, bounds, dec, (pair_c, pair_m, np.sort(np.asarray(pilot, dtype=np.int64))), M, grid,
                     (bw, bp), track)  # fmt: skip
            return bw.tolist(), bp.tolist()

        ref = choose([])
        winners = sorted(set(p for w, p in zip(*ref, strict=True) if w > 0))
        n = len(pair_c)
        picks = [winners, winners[:1], [n - 1], rng.choice(n, size=min(3, n), replace=False)]
        for pilot in picks:
            n_reused += len(pilot)
            assert choose(pilot) == ref, (pilot, winners)
    assert n_reused > 0

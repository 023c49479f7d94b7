"""One MCPP decision for many (budget, horizon) cells at once, identical to deciding each cell alone.

Why it is exact (``docs/surface.md``): the candidates and the simulation keys
do not depend on the budget or the horizon, and under the atomic launch rule
a simulation's draws do not either, up to the first check that fails. Run
once with the largest budget and horizon of the cells (with the kernel's
exact pruning), a simulation either fails there, and then fails in every
smaller cell (every check is monotone in the budget or the horizon), or
completes with total cost C and finishing time F, and then succeeds in cell
(b, h) exactly when C <= b and F <= h. Floating-point rounding only matters
when b is within a relative 1e-9 of C, or h of F: such (simulation, cell)
pairs are simulated again with the cell's own budget and horizon by the
planner's own kernel. Each cell then takes the first strict maximum of its
success counts in (candidate, member) order, and the first base action when
every count is 0, as :meth:`MCPortfolioPolicy.decide` does.
"""

from __future__ import annotations

import numpy as np

from simulator.base.jit import njit
from simulator.mcpp.kernel import run_pairs_outcomes, run_pairs_serial
from simulator.mcpp.policy import MCPortfolioPolicy

#: relative band around a simulation's cost (finishing time) inside which a cell is re-simulated exactly
TOL = 1e-9


@njit(cache=True, nogil=True)
def _best_per_cell(wins_max, ib, jh, bands, cell_i, cell_j, nb, nh, *, corr_ptr, corr_i, corr_j, p0, best_w, best_p):
    """Per cell: the first pair with the strictly largest success count, and that count.

    ``ib[p, s]`` / ``jh[p, s]`` are the first budget / horizon indices where
    simulation s of pair p certainly succeeds (nb / nh: nowhere; failures have
    nb); the exact re-simulations of the uncertain (simulation, cell) pairs
    add their successes through ``corr_*`` (pair p's are
    ``corr_ptr[p]:corr_ptr[p+1]``). Updates ``best_w`` / ``best_p`` in
    place (pairs are numbered from ``p0``). A pair whose count at the
    largest cell cannot beat every cell's best so far is skipped (counts
    only fall with budget and horizon; -1: the kernel stopped it early).
    """
    K = cell_i.shape[0]
    table = np.zeros((nb + 1, nh + 1), dtype=np.int64)
    lowest = best_w[0]
    for k in range(1, K):
        if best_w[k] < lowest:
            lowest = best_w[k]
    for p in range(wins_max.shape[0]):
        if wins_max[p] <= lowest:
            continue
        table[:, :] = 0
        for s in range(ib.shape[1]):
            table[ib[p, s], jh[p, s]] += 1
        for i in range(nb):  # 2-D running sums: table[i, j] = successes with ib <= i and jh <= j
            for j in range(nh):
                v = table[i, j]
                if i > 0:
                    v += table[i - 1, j]
                if j > 0:
                    v += table[i, j - 1]
                if i > 0 and j > 0:
                    v -= table[i - 1, j - 1]
                table[i, j] = v
        if bands:
            for q in range(corr_ptr[p], corr_ptr[p + 1]):
                table[corr_i[q], corr_j[q]] += 1
        for k in range(K):
            w = table[cell_i[k], cell_j[k]]
            if w > best_w[k]:
                best_w[k] = w
                best_p[k] = p0 + p
        lowest = best_w[0]
        for k in range(1, K):
            if best_w[k] < lowest:
                lowest = best_w[k]


def _first_certain(vals: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first index certainly >= x, first index not certainly < x) in the increasing ``vals``."""
    return (np.searchsorted(vals, x * (1.0 + TOL), side="left"),
            np.searchsorted(vals, x * (1.0 - TOL), side="left"))  # fmt: skip


def decide_cells(policy: MCPortfolioPolicy, view, budgets: np.ndarray, horizons: np.ndarray):
    """MCPP's candidate for each cell (budget left ``budgets[k]``, time left ``horizons[k]``) at ``view``.

    ``view`` is the shared state (its budget and deadline are ignored).
    Returns ``(candidate index per cell (int64 array), cand_model, cand_count,
    ready)`` or None when MCPP has no action (a ready node without a
    portfolio model: the same for every cell). Equal to calling
    ``policy.decide`` on each cell's own view (``tests/test_surface.py``).
    """
    budgets = np.asarray(budgets, dtype=np.float64)
    horizons = np.asarray(horizons, dtype=np.float64)
    bmax, hmax = float(budgets.max()), float(horizons.max())
    prep = policy.prepare(view)
    if prep is None:
        return None
    _mode, _n_base, cand_model, cand_count, members, dec = prep
    dec = dec._replace(budget=bmax, horizon=hmax)  # the largest cell: every smaller one is decided from it
    tb = policy.episode_tables
    C, Pm, M = cand_model.shape[0], len(members), policy.params.M
    pair_c = np.repeat(np.arange(C, dtype=np.int64), Pm)
    pair_m = np.tile(np.arange(Pm, dtype=np.int64), C)
    N = C * Pm
    K = len(budgets)
    best_w = np.zeros(K, dtype=np.int64)
    best_p = np.zeros(K, dtype=np.int64)
    active = np.ones(K, dtype=bool)
    lo = 0
    step = max(Pm, N // 16)
    while lo < N and active.any():
        # the pairs in order, in chunks: a cell whose best is M can no longer change (strict maximum), so
        # the next chunk is simulated at the largest still open cell, and a pair that cannot beat every
        # open cell's best stops early (both exact: only each cell's first strict maximum is needed, and
        # counts only fall with budget and horizon)
        hi = min(N, lo + step)
        b_open, h_open = budgets[active], horizons[active]
        top = dec._replace(budget=float(b_open.max()), horizon=float(h_open.max()))
        _evaluate_chunk(tb, top, pair_c[lo:hi], pair_m[lo:hi], M, int(best_w[active].min()) + 1, lo,
                        budgets=b_open, horizons=h_open, best_w=best_w, best_p=best_p, active=active)  # fmt: skip
        active &= best_w < M
        lo = hi
    cand = np.where(best_w > 0, pair_c[best_p], 0)
    return cand, cand_model, cand_count, dec.ready


def _evaluate_chunk(tb, dec, pc, pm, M, min_wins, p0, *, budgets, horizons, best_w, best_p, active) -> None:
    """Simulate one chunk of pairs at ``dec``'s limits and update the open cells' best pairs."""
    N = len(pc)
    wins = np.zeros(N, dtype=np.int64)
    cost = np.full((N, M), np.inf)
    fin = np.full((N, M), np.inf)
    run_pairs_outcomes(tb.arr, tb.bounds, dec, pc, pm, 0, M, wins, cost, fin, min_wins)
    bvals, cell_i = np.unique(budgets, return_inverse=True)
    hvals, cell_j = np.unique(horizons, return_inverse=True)
    nb, nh = len(bvals), len(hvals)
    ok = np.isfinite(cost)
    ok[wins < 0] = False  # stopped early: cannot change any cell
    ib, ib_lo = _first_certain(bvals, np.where(ok, cost, 0.0))
    jh, jh_lo = _first_certain(hvals, np.where(ok, fin, 0.0))
    ib[~ok] = nb
    jh[~ok] = nh
    uncertain = ok & ((ib_lo < ib) | (jh_lo < jh))
    corr_ptr = np.zeros(N + 1, dtype=np.int64)
    corr_i = np.zeros(0, dtype=np.int64)
    corr_j = np.zeros(0, dtype=np.int64)
    if uncertain.any():
        corr_ptr, corr_i, corr_j = _resimulate(tb, dec, pc, pm, uncertain, ib=ib, ib_lo=ib_lo, jh=jh, jh_lo=jh_lo,
                                               cell_i=cell_i, cell_j=cell_j, bvals=bvals, hvals=hvals)  # fmt: skip
    bw, bp = best_w[active], best_p[active]
    _best_per_cell(wins, ib.astype(np.int64), jh.astype(np.int64), bool(uncertain.any()), cell_i.astype(np.int64),
                   cell_j.astype(np.int64), nb, nh, corr_ptr=corr_ptr, corr_i=corr_i, corr_j=corr_j, p0=p0,
                   best_w=bw, best_p=bp)  # fmt: skip
    best_w[active], best_p[active] = bw, bp


def _resimulate(tb, dec, pair_c, pair_m, uncertain, *, ib, ib_lo, jh, jh_lo, cell_i, cell_j, bvals, hvals):
    """Exact successes of the uncertain (simulation, cell) pairs, by the planner's kernel with the cell's limits.

    A (simulation, cell) is uncertain when the cell's budget lies in the
    simulation's rounding band on the budget axis and its horizon is not
    certainly too short, or the other way round. Returns the successes as
    (per-pair pointer, budget index, horizon index) entries.
    """
    present = set(zip(cell_i.tolist(), cell_j.tolist()))
    entries: list[tuple[int, int, int]] = []
    one = np.zeros(1, dtype=np.int64)
    for p, s in zip(*np.nonzero(uncertain)):
        for i, j in present:
            in_b, in_h = ib_lo[p, s] <= i < ib[p, s], jh_lo[p, s] <= j < jh[p, s]
            if not (in_b or in_h) or i < ib_lo[p, s] or j < jh_lo[p, s]:
                continue  # certain: counted by the table, or certainly a failure
            exact = dec._replace(budget=float(bvals[i]), horizon=float(hvals[j]))
            run_pairs_serial(tb.arr, tb.bounds, exact, pair_c[p : p + 1], pair_m[p : p + 1], int(s), int(s) + 1, one)
            if one[0]:
                entries.append((int(p), i, j))
    entries.sort()
    N = len(pair_c)
    ptr = np.zeros(N + 1, dtype=np.int64)
    for p, _, _ in entries:
        ptr[p + 1] += 1
    ptr = np.cumsum(ptr)
    ci = np.array([e[1] for e in entries], dtype=np.int64)
    cj = np.array([e[2] for e in entries], dtype=np.int64)
    return ptr, ci, cj

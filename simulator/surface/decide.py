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

from simulator.base.jit import borrowed, compiled_only, inlined, njit
from simulator.mcpp.kernel import (
    START_UNKNOWN,
    PairStart,
    candidate_charge,
    first_at_least,
    inside_stair,
    pair_check_tables,
    pair_fails,
    pair_scratch,
    run_pair_surface,
    with_steps_inlined,
)
from simulator.mcpp.policy import MCPortfolioPolicy

#: relative band around a simulation's cost (finishing time) inside which a cell is re-simulated exactly
TOL = 1e-9
#: relative widening of the cells' limits in the kernel's staircase (far beyond any rounding; only stops less)
STAIR_WIDEN = 1e-7
#: pilot pairs run first at a decision (the pairs that won most cells at the last decision of the same ready set)
N_PILOTS = 2
NO_PILOT = np.empty(0, dtype=np.int64)
#: most cells whose counts the kernel keeps per simulation to stop a pair early (each success costs a pass over them)
TRACK_CELLS = 1024


@njit(cache=True, nogil=True)
def _staircase(bvals, hvals, cell_i, cell_j, best_w, M, stair_b, stair_h):
    """Fill the kernel's staircase (:func:`simulator.mcpp.kernel.inside_stair`) from the cells' bests.

    ``stair_h[i, u]``: the largest horizon of the cells with budget index >= i
    whose best count is below u (only those can still change: a pair that can
    reach at most u successes beats no other cell). Both axes are widened by
    a relative ``STAIR_WIDEN``: a simulation the kernel stops there is a
    certain failure in every such cell, whatever the rounding.
    Returns (the cells' smallest best, the largest budget and horizon of
    the cells below M).
    """
    nb = bvals.shape[0]
    stair_h[:, :] = -np.inf
    lowest = M
    top_b = -np.inf
    top_h = -np.inf
    for i in range(nb):
        stair_b[i] = bvals[i] * (1.0 + STAIR_WIDEN)
    for k in range(cell_i.shape[0]):
        w = best_w[k]
        if w < lowest:
            lowest = w
        if w >= M:
            continue
        b = bvals[cell_i[k]]
        h = hvals[cell_j[k]]
        if b > top_b:
            top_b = b
        if h > top_h:
            top_h = h
        hw = h * (1.0 + STAIR_WIDEN)
        if hw > stair_h[cell_i[k], w + 1]:
            stair_h[cell_i[k], w + 1] = hw
    for i in range(nb):  # cells below u are below every larger level too
        for u in range(1, M + 1):
            if stair_h[i, u - 1] > stair_h[i, u]:
                stair_h[i, u] = stair_h[i, u - 1]
    for i in range(nb - 2, -1, -1):  # and fit every smaller budget
        for u in range(M + 1):
            if stair_h[i + 1, u] > stair_h[i, u]:
                stair_h[i, u] = stair_h[i + 1, u]
    return lowest, top_b, top_h


@compiled_only
def _member_floors(tables, mem_model, m, prune):
    """The least ``need0`` of the members the pair check lets run, and per model whether such a member uses it
    (once per decision, for :func:`_candidate_fits_no_cell`).

    With ``prune`` a member whose model a pending node lacks fails every pair (``tables.lacks``) and
    counts in neither; without it every member counts, at need0 0 (the decide loop's own values).
    """
    need_min = np.inf
    uses = np.zeros(m, dtype=np.bool_)
    for pm in range(mem_model.shape[0]):
        if prune and tables.lacks[pm]:
            continue
        uses[mem_model[pm]] = True
        need = tables.need0[pm] if prune else 0.0
        if need < need_min:
            need_min = need
    return need_min, uses


@compiled_only
def _candidate_fits_no_cell(tables, floors, bounds, dec, stair, M, c):
    """Whether every pair of candidate c fails the decide loop's per-pair checks, from one check.

    ``floors`` is :func:`_member_floors`' answer, ``stair`` the staircase ``(stair_b, stair_h)``. The
    candidate's least charge from the least ``need0``, and the earliest end over the models those members
    use, fitting no open cell (level M): every pair of c then has a charge and an end at least these
    (floating-point sums are monotone), so it fits none either, nor later (the staircase only shrinks).
    """
    need_min, uses = floors
    if need_min == np.inf:
        return True  # every member fails the pair check
    end_min = np.inf
    for j in range(uses.shape[0]):
        if uses[j]:
            end = max(tables.inf_tail[j], tables.lat_end[c, j])
            if end < end_min:
                end_min = end
    cost = candidate_charge(bounds.min_charge, dec.ready, dec.cand_model, dec.cand_count, c, need_min)
    return not inside_stair(stair[0], stair[1], M, cost, end_min)


#: the decide loop's pair checks inlined here, where they run once per pair (simulator.base.jit)
_candidate_charge_here = inlined(candidate_charge.py_func)
_pair_fails_here = inlined(pair_fails.py_func)
_inside_stair_here = inlined(with_steps_inlined(inside_stair.py_func))
_fits_no_cell_here = inlined(_candidate_fits_no_cell.py_func)


@njit(cache=True, nogil=True)
def decide_cells_kernel(arr, bounds, dec, pairs, M, grid, best, track):
    """Every cell's first strictly best pair, the pairs simulated in (candidate, member) order.

    ``pairs`` is ``(pair_c, pair_m, pilot)`` (``pilot``: pair indices run
    first, only to raise the bar a pair must pass; any pairs give the same
    choice), ``grid`` is ``(bvals, hvals, cell_i,
    cell_j)`` and ``best`` is ``(best_w, best_p)`` (tuples keep the call's
    arguments named by what they are: tests/test_signatures.py).
    Cell k has budget ``bvals[cell_i[k]]`` and horizon ``hvals[cell_j[k]]``
    (both axes increasing). Each pair is simulated once at the largest
    budget and horizon of the cells that can still change (best < M), with
    the kernel's early stops for a pair that cannot beat any cell
    (``min_wins``) and for a simulation that fits no cell the pair can still
    change (the staircase); each success's (cost, finishing time) then
    counts in every cell that certainly admits it (a 2-D running sum over the
    axes), and the (simulation, cell) pairs within a relative ``TOL`` of a
    limit are simulated again with the cell's own limits. With ``track``,
    the kernel also counts each pair's successes per cell, to stop a pair as
    soon as no cell can get more than its best. Updates ``best_w``
    (successes of the best pair, 0: none) and ``best_p`` (its pair index).
    """
    # the caller's references keep the arguments alive for the call: borrowed, reading their fields and passing
    # them on counts no references (simulator.base.jit.borrowed)
    arr, bounds, dec, pairs, grid, best = (borrowed(arr), borrowed(bounds), borrowed(dec), borrowed(pairs),
                                           borrowed(grid), borrowed(best))
    pair_c, pair_m, pilot = pairs
    bvals, hvals, cell_i, cell_j = grid
    best_w, best_p = best
    nb = bvals.shape[0]
    nh = hvals.shape[0]
    K = cell_i.shape[0]
    stair_b = np.empty(nb)
    stair_h = np.empty((nb, M + 1))
    cost = np.empty(M)
    fin = np.empty(M)
    ib = np.empty(M, dtype=np.int64)
    jh = np.empty(M, dtype=np.int64)
    ib_lo = np.empty(M, dtype=np.int64)
    jh_lo = np.empty(M, dtype=np.int64)
    table = np.zeros((nb + 1, nh + 1), dtype=np.int64)
    none = np.empty(0)
    no_stair = np.empty((0, 0))
    one = np.empty(0)
    work_i, work_f, work_b = pair_scratch(dec.completed.shape[0], K if track else 0, M)
    cell_b = np.empty(K if track else 0)
    cell_h = np.empty(K if track else 0)
    for k in range(cell_b.shape[0]):
        cell_b[k] = bvals[cell_i[k]] * (1.0 + STAIR_WIDEN)
        cell_h[k] = hvals[cell_j[k]] * (1.0 + STAIR_WIDEN)
    no_cells = np.empty(0, dtype=np.int64)
    # bar[k]: a pair matters in cell k only with more successes than this: its best so far, or one less
    # than a pilot pair's certain count there (the best pair has at least that count, so a pair below it
    # is never the first strict maximum); every stop reads bar, the choice reads best_w / best_p
    bar = best_w.copy()
    cell_best = bar if track else no_cells
    lowest, top_b, top_h = _staircase(bvals, hvals, cell_i, cell_j, bar, M, stair_b, stair_h)
    cost[:] = np.inf
    fin[:] = np.inf
    dirty = False
    tables = pair_check_tables(arr, bounds, dec)
    inf_tail_t, lat_end_t = tables.inf_tail, tables.lat_end
    min_charge = bounds.min_charge
    mem_model, cand_model, cand_count, ready = dec.mem_model, dec.cand_model, dec.cand_count, dec.ready
    prune = dec.prune
    n_inf = dec.inf_node.shape[0]
    n_pilot = pilot.shape[0]
    pilot_w = np.full(n_pilot, -1, dtype=np.int64)  # each pilot run's count (-1: ended before or by its stops)
    pilot_cost = np.empty((n_pilot, M))  # and its records
    pilot_fin = np.empty((n_pilot, M))
    # A candidate whose pairs' least cost and earliest end (over the members the pair check lets run) fit
    # no open cell: each of its pairs fails the checks below (charges and ends only grow with a member's
    # need and model, floating-point sums are monotone, the staircase only shrinks), so all are skipped
    # with one check instead of one per member (most pairs of a decision end there).
    floors = _member_floors(borrowed(tables), mem_model, arr.m, prune)
    stair = (borrowed(stair_b), borrowed(stair_h))  # the same memory, refilled in place by _staircase
    floor_c = -1  # the candidate last checked, and whether its pairs are all skipped
    floor_out = False
    for step in range(n_pilot + pair_c.shape[0]):
        if lowest >= M:
            break  # every cell has a pair with M successes: no later pair can beat it
        is_pilot = step < n_pilot
        p = pilot[step] if is_pilot else step - n_pilot
        again = -1  # a pilot pair reached in order: its pilot run stands for this one
        for q in range(0 if is_pilot else n_pilot):
            if pilot[q] == p:
                again = q
        if again >= 0:
            # Its pilot run met a lower bar (bars only rise), so it stopped no simulation that this run would
            # keep: its records hold every success in every cell the pair can still change, at the same
            # cost and finishing time. Those are the counts this run would give wherever they matter; a
            # larger count where they do not (at most the cell's bar) is overtaken by the pilot that set
            # that bar, which the loop has yet to reach. A pilot run that beat no cell then beats none now.
            w = pilot_w[again]
            if w <= lowest:
                continue
            cost[:] = pilot_cost[again]
            fin[:] = pilot_fin[again]
            dirty = True
        else:
            # run_pair's first checks without the call (a pair they end gets 0 there, with nothing recorded)
            pc = pair_c[p]
            pm = pair_m[p]
            j = mem_model[pm]
            if pc != floor_c:
                floor_c = pc
                floor_out = _fits_no_cell_here(borrowed(tables), floors, bounds, dec, stair, M, pc)
            if floor_out:
                continue
            if prune and _pair_fails_here(borrowed(tables), pc, pm, j, n_inf, top_b, top_h):
                continue
            # the staircase check: need0, then the candidate's charges
            need0 = borrowed(tables).need0[pm] if prune else 0.0
            first_cost = _candidate_charge_here(min_charge, ready, cand_model, cand_count, pc, need0)
            first_end = max(inf_tail_t[j], lat_end_t[pc, j])
            if not _inside_stair_here(stair_b, stair_h, M, first_cost, first_end):
                continue
            if dirty:  # only a pair that recorded a success left entries to clear
                cost[:] = np.inf
                fin[:] = np.inf
            w = run_pair_surface(arr, bounds, dec, pair_c[p], pair_m[p], 0, M, borrowed(cost), borrowed(fin),
                                 lowest + 1, top_b, top_h, borrowed(stair_b), borrowed(stair_h), borrowed(cell_b),
                                 borrowed(cell_h), borrowed(cell_best), borrowed(work_i), borrowed(work_f),
                                 borrowed(work_b), PairStart(True, need0, first_cost, first_end, inf_tail_t[j]))
            dirty = w != 0  # 0: no simulation succeeded, nothing recorded
            if is_pilot:
                pilot_w[step] = w
                pilot_cost[step] = cost
                pilot_fin[step] = fin
            if w <= lowest:
                continue  # beats no cell (-1: stopped early)
        table[:, :] = 0
        uncertain = False
        for s in range(M):
            if cost[s] == np.inf:
                ib[s] = nb
                jh[s] = nh
                ib_lo[s] = nb
                jh_lo[s] = nh
                continue
            ib[s] = first_at_least(bvals, cost[s] * (1.0 + TOL))
            ib_lo[s] = first_at_least(bvals, cost[s] * (1.0 - TOL))
            jh[s] = first_at_least(hvals, fin[s] * (1.0 + TOL))
            jh_lo[s] = first_at_least(hvals, fin[s] * (1.0 - TOL))
            table[ib[s], jh[s]] += 1
            if ib_lo[s] < ib[s] or jh_lo[s] < jh[s]:
                uncertain = True
        for i in range(nb):  # 2-D running sums: table[i, j] = certain successes with ib <= i and jh <= j
            for j in range(nh):
                v = table[i, j]
                if i > 0:
                    v += table[i - 1, j]
                if j > 0:
                    v += table[i, j - 1]
                if i > 0 and j > 0:
                    v -= table[i - 1, j - 1]
                table[i, j] = v
        changed = False
        for k in range(K):
            if bar[k] >= w:
                continue  # the pair's count here is at most w: it matters only above bar
            i = cell_i[k]
            j = cell_j[k]
            c = table[i, j]
            if is_pilot:  # the certain count is at most the pair's count: the best has at least that
                if c - 1 > bar[k]:
                    bar[k] = c - 1
                    changed = True
                continue
            if uncertain:  # the (simulation, cell) pairs in a rounding band: simulated with the cell's limits
                for s in range(M):
                    if ib[s] == nb or i < ib_lo[s] or j < jh_lo[s] or (i >= ib[s] and j >= jh[s]):
                        continue  # failed, certainly too tight, or certainly counted by the table
                    c += run_pair_surface(arr, bounds, dec, pair_c[p], pair_m[p], s, s + 1, one, one, 0, bvals[i],
                                          hvals[j], none, no_stair, none, none, no_cells, borrowed(work_i),
                                          borrowed(work_f), borrowed(work_b), START_UNKNOWN)
            if c > best_w[k]:
                best_w[k] = c
                best_p[k] = p
                if c > bar[k]:
                    bar[k] = c
                    changed = True
        if changed:
            lowest, top_b, top_h = _staircase(bvals, hvals, cell_i, cell_j, bar, M, stair_b, stair_h)


@njit(cache=True, nogil=True)
def _axis(x):
    """``np.unique(x, return_inverse=True)`` for the cells' limits: the distinct values, increasing, and
    each cell's index among them (compiled: the decide loop's Python is a share of a surface's time)."""
    order = np.argsort(x, kind="mergesort")
    vals = np.empty(x.shape[0])
    index = np.empty(x.shape[0], dtype=np.int64)
    nv = 0
    for q in range(x.shape[0]):
        i = order[q]
        if nv == 0 or x[i] != vals[nv - 1]:
            vals[nv] = x[i]
            nv += 1
        index[i] = nv - 1
    return vals[:nv].copy(), index


@njit(cache=True, nogil=True)
def _choices(best_w, best_p, pair_c, n_pilots):
    """Each cell's candidate (0 where no pair won a simulation: the first base action), and the next
    pilots of this ready set: the ``n_pilots`` pairs that are best in most cells (ties: the earlier
    pair), in pair order. Compiled: a decision's few array steps cost more in numpy than its kernel
    on the smallest decisions."""
    cand = np.zeros(best_w.shape[0], dtype=np.int64)
    wins = np.zeros(pair_c.shape[0], dtype=np.int64)
    for k in range(best_w.shape[0]):
        if best_w[k] > 0:
            cand[k] = pair_c[best_p[k]]
            wins[best_p[k]] += 1
    top = np.empty(n_pilots, dtype=np.int64)
    n_top = 0
    while n_top < n_pilots:
        most = -1
        for p in range(wins.shape[0]):
            if wins[p] > 0 and (most < 0 or wins[p] > wins[most]):
                most = p
        if most < 0:
            break
        top[n_top] = most
        n_top += 1
        wins[most] = 0
    return cand, np.sort(top[:n_top])


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
    prep = policy.prepare(view)
    if prep is None:
        return None
    _mode, _n_base, cand_model, cand_count, members, dec = prep
    tb = policy.episode_tables
    C, Pm, M = cand_model.shape[0], len(members), policy.params.M
    pair_c, pair_m = tb.pair_indices(C, Pm)
    K = len(budgets)
    bvals, cell_i = _axis(budgets)
    hvals, cell_j = _axis(horizons)
    best_w = np.zeros(K, dtype=np.int64)
    best_p = np.zeros(K, dtype=np.int64)
    grid = (bvals, hvals, cell_i, cell_j)
    pilots = policy.__dict__.setdefault("_surface_pilots", {})  # speed only: any pairs give the same choice
    ready_key = (C, Pm, *dec.ready.tolist())
    pilot = pilots.get(ready_key, NO_PILOT)
    decide_cells_kernel(tb.arr, tb.bounds, dec, (pair_c, pair_m, pilot), M, grid, (best_w, best_p), K <= TRACK_CELLS)
    cand, top = _choices(best_w, best_p, pair_c, N_PILOTS)
    if len(top):
        pilots[ready_key] = top
    return cand, cand_model, cand_count, dec.ready

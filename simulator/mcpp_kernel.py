"""MCPP's compiled Monte Carlo kernel: many simulated continuations of one decision.

One simulation = apply a candidate action with the atomic launch rule, then
follow one portfolio member Seq-(m, k) (every ready node gets (m, k)) until
the DAG completes (success), time runs out or a launch is infeasible
(failure). The semantics are those of the simulator (``docs/simulator.md``): the
same :func:`~simulator.engine.draw_attempt` (row resampling, or parametric
draws), one queue entry per batch (end = max latency, success = OR), pops in
end-time order with ties to the lower node position, and "all completed" checked
before ``t >= D`` (finishing exactly at D counts), as in ``engine.advance``.

Randomness is keyed, never streamed: simulation s of (candidate c, member p)
at a decision uses the key (run seed, DAG, trial, decision, c, p, s), and
batch number b of node v inside it the sub-key (v, b). Results therefore do
not depend on the number of threads. With common random numbers (CRN) the
candidate index is left out of the key, so every candidate meets the same
luck on the same node batch.

Everything here works on flat arrays (:class:`~simulator.arrays.DagArrays`
plus the decision's state arrays); :func:`run_pairs` spreads (candidate,
member) pairs over threads with ``prange``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, uint64

from .costs import charge_of_draw
from .engine import sample_latency
from .rng import _GOLDEN, fold, randint, uniform

#: key field for "every candidate" (common random numbers)
CRN_CANDIDATE = 0x7FFFFFFF
_BATCH_SHIFT = 4294967296  # 2**32: sub-key of batch b of node v is v * 2**32 + b


@njit(cache=True, nogil=True)
def attempt_bounds(arr):
    """Per (node, model): smallest possible charged cost and latency of one attempt.

    Used to reject a batch that cannot fit before drawing it (k attempts cost
    at least k x min charge): an exact shortcut, the outcome is a failure
    whatever the draws. Unavailable models get +inf.
    """
    n, m = arr.n, arr.m
    min_charge = np.full((n, m), np.inf)
    min_lat = np.full((n, m), np.inf)
    for v in range(n):
        for j in range(m):
            if not arr.available[v, j]:
                continue
            k = v * m + j
            lo, hi = arr.row_ptr[k], arr.row_ptr[k + 1]
            if hi > lo:
                mc = np.inf
                ml = np.inf
                for r in range(lo, hi):
                    c = arr.row_lat[r] if arr.charge_is_latency else arr.row_charge[r]
                    if c < mc:
                        mc = c
                    if arr.row_lat[r] < ml:
                        ml = arr.row_lat[r]
            else:
                mean, std = arr.lat_mean[v, j], arr.lat_std[v, j]
                if std <= 0.0 or mean <= 0.0:
                    ml = max(mean, 1e-3)
                else:
                    ml = 1e-3
                mc = ml if arr.charge_is_latency else arr.tmpl_charge[v, j]
            min_charge[v, j] = mc
            min_lat[v, j] = ml
    return min_charge, min_lat


def child_tails(arr, min_lat: np.ndarray) -> np.ndarray:
    """(n, m): per model j, the longest path of min latencies strictly below node v.

    ``tail[v, j] = min_lat[v, j] + max over children of tail``; ``child_tail``
    is the max over v's children (0 for a sink). A batch of v ending at e
    cannot let the DAG complete before ``e + child_tail[v, j]`` when the rest
    is run with model j (inf when a descendant lacks model j).
    """
    from .pool import topological_order

    order = topological_order(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx)
    tail = np.zeros((arr.n, arr.m))
    child = np.zeros((arr.n, arr.m))
    for v in reversed(order):
        for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
            child[v] = np.maximum(child[v], tail[arr.child_idx[e]])
        tail[v] = min_lat[v] + child[v]
    return child


@njit(cache=True, nogil=True, inline="always")
def _batch_key(skey, v, b):
    return fold(skey, v * _BATCH_SHIFT + b)


@njit(cache=True, nogil=True, inline="always")
def draw_flat(row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge, m, lat_dist, cil, v, j, key):
    """:func:`simulator.engine.draw_attempt` on unpacked arrays (bit-identical results).

    The kernel passes arrays one by one: reading them through the DagArrays
    tuple in the hot loop is about twice slower (the compiler reloads them).
    A test checks equality with ``draw_attempt`` on rows and parametric draws.
    """
    k = v * m + j
    lo = row_ptr[k]
    hi = row_ptr[k + 1]
    if hi > lo:
        r = lo + randint(key, 0, hi - lo)
        lat = row_lat[r]
        succ = row_succ[r]
        charge = row_charge[r]
    else:
        succ = uniform(key, 0) < p[v, j]
        lat = sample_latency(lat_dist, lat_mean[v, j], lat_std[v, j], key, 1)
        charge = tmpl_charge[v, j]
    return lat, succ, charge_of_draw(cil, charge, lat)


@njit(cache=True, nogil=True)
def draw_batch(arr, v, j, k, bkey, room_t, room_b, min_charge, min_lat):
    """Draw a batch of k attempts of node v with model j: (feasible, end, success, cost).

    Not feasible when a drawn latency exceeds ``room_t`` or the batch cost
    exceeds ``room_b`` (the atomic rule; both are a failure for the planner).
    Attempt a uses the key ``bkey + a * golden`` (a Weyl sequence, as in
    SplitMix64: one mixing round per uniform). (Reference version on DagArrays;
    the kernel inlines the same steps on unpacked arrays.)
    """
    return _draw_batch(
        arr.row_ptr, arr.row_lat, arr.row_succ, arr.row_charge, arr.p, arr.lat_mean, arr.lat_std,
        arr.tmpl_charge, arr.m, arr.lat_dist, arr.charge_is_latency, v, j, k, bkey, room_t, room_b,
        min_charge, min_lat,
    )


@njit(cache=True, nogil=True, inline="always")
def _draw_batch(
    row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge, m, lat_dist, cil,
    v, j, k, bkey, room_t, room_b, min_charge, min_lat,
):
    if min_lat[v, j] > room_t or k * min_charge[v, j] > room_b:
        return False, 0.0, False, 0.0
    end = 0.0
    cost = 0.0
    succ = False
    for a in range(k):
        lat, s, ch = draw_flat(
            row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge, m, lat_dist,
            cil, v, j, bkey + uint64(a) * _GOLDEN,
        )
        if lat > room_t:
            return False, 0.0, False, 0.0
        cost += ch
        if cost > room_b:
            return False, 0.0, False, 0.0
        if lat > end:
            end = lat
        succ = succ or s
    return True, end, succ, cost


@njit(cache=True, nogil=True)
def _run_pair(
    row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge, m, lat_dist, cil,
    available, child_ptr, child_idx, parent_ptr,
    ready, cm, cc, mem_model, mem_k, completed0, parents_done0,
    inf_node, inf_model, inf_end, inf_nrem, inf_already,
    budget, horizon, min_charge, min_lat, child_tail, prune, max_steps, pkey, s_lo, s_hi,
):
    """Successes among simulations s_lo..s_hi-1 of one (candidate, member) pair.

    One simulation: in-flight batches keep their known ends, their success is
    redrawn per unfinished attempt (batch number 0 of the node) unless one
    already succeeded; the candidate is launched atomically over the ready
    nodes; then at every batch end the member launches (mem_model, mem_k) on
    the nodes that became ready (the failed node, or children just unlocked:
    every other ready node was launched before). Times are relative to the
    decision (deadline = ``horizon``).

    With ``prune``, simulations (or the whole pair) stop as soon as failure is
    certain, which never changes a result: every node not yet launched still
    needs a member batch costing >= k x its min charge, and a batch ending at
    e leaves at least ``child_tail`` (longest path of min latencies below the
    node, member model) before the DAG can complete.
    """
    n = completed0.shape[0]
    mm = mem_model
    # -- pair-level checks: failure certain for every simulation
    busy = np.zeros(n, dtype=np.bool_)
    for r in range(ready.shape[0]):
        busy[ready[r]] = True
    for q in range(inf_node.shape[0]):
        busy[inf_node[q]] = True
    need0 = 0.0
    if prune:
        for v in range(n):
            if not completed0[v] and not busy[v]:
                if not available[v, mm]:
                    return 0
                need0 += mem_k * min_charge[v, mm]
        first = 0.0
        for r in range(ready.shape[0]):
            v = ready[r]
            first += cc[r] * min_charge[v, cm[r]]
            if min_lat[v, cm[r]] + child_tail[v, mm] > horizon:
                return 0
        if first + need0 > budget:
            return 0
        for q in range(inf_node.shape[0]):
            if inf_end[q] + child_tail[inf_node[q], mm] > horizon:
                return 0
    completed = np.empty(n, dtype=np.bool_)
    parents_done = np.empty(n, dtype=np.int64)
    flist = np.empty(n, dtype=np.int64)
    bend = np.empty(n)
    bsucc = np.empty(n, dtype=np.bool_)
    bno = np.empty(n, dtype=np.int64)
    newready = np.empty(n, dtype=np.int64)
    ncomp0 = 0
    for v in range(n):
        if completed0[v]:
            ncomp0 += 1
    wins = 0
    for s_idx in range(s_lo, s_hi):
        skey = fold(pkey, s_idx)
        ncomp = ncomp0
        for v in range(n):
            completed[v] = completed0[v]
            parents_done[v] = parents_done0[v]
            bno[v] = 1
        nf = 0
        for q in range(inf_node.shape[0]):
            v = inf_node[q]
            s = inf_already[q]
            if not s:
                pv = p[v, inf_model[q]]
                ikey = _batch_key(skey, v, 0)
                for a in range(inf_nrem[q]):
                    if uniform(ikey, a) < pv:
                        s = True
                        break
            bend[v] = inf_end[q]
            bsucc[v] = s
            flist[nf] = v
            nf += 1
        # the candidate action (atomic launch over every ready node)
        t = 0.0
        cost = 0.0
        alive = True
        for r in range(ready.shape[0]):
            v = ready[r]
            ok, end, s, c = _draw_batch(
                row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge, m,
                lat_dist, cil, v, cm[r], cc[r], _batch_key(skey, v, bno[v]), horizon,
                budget - cost, min_charge, min_lat,
            )
            if not ok:
                alive = False
                break
            if prune and end + child_tail[v, mm] > horizon:
                alive = False
                break
            cost += c
            bno[v] += 1
            bend[v] = end
            bsucc[v] = s
            flist[nf] = v
            nf += 1
        if not alive:
            continue
        b = budget - cost
        need = need0
        if prune and b < need:
            continue
        steps = 0
        while True:
            if ncomp == n:  # completion first: finishing exactly at D counts (engine.advance)
                wins += 1
                break
            if t >= horizon:
                break
            if nf == 0:
                break
            best = 0
            for q in range(1, nf):
                u = flist[q]
                w = flist[best]
                if bend[u] < bend[w] or (bend[u] == bend[w] and u < w):
                    best = q
            v = flist[best]
            if bend[v] > horizon:
                break
            flist[best] = flist[nf - 1]
            nf -= 1
            t = bend[v]
            steps += 1
            if steps > max_steps:
                break
            nr = 0
            if bsucc[v]:
                completed[v] = True
                ncomp += 1
                for e in range(child_ptr[v], child_ptr[v + 1]):
                    c_ = child_idx[e]
                    parents_done[c_] += 1
                    if parents_done[c_] == parent_ptr[c_ + 1] - parent_ptr[c_]:
                        newready[nr] = c_
                        nr += 1
            else:
                newready[nr] = v
                nr += 1
            if ncomp < n and t < horizon and nr > 0:
                # the member's decision: (mem_model, mem_k) on every ready node, atomic launch
                cost = 0.0
                for r in range(nr):
                    u = newready[r]
                    if not available[u, mem_model]:
                        alive = False
                        break
                    ok, end, s, c = _draw_batch(
                        row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge,
                        m, lat_dist, cil, u, mem_model, mem_k, _batch_key(skey, u, bno[u]),
                        horizon - t, b - cost, min_charge, min_lat,
                    )
                    if not ok or (prune and t + end + child_tail[u, mm] > horizon):
                        alive = False
                        break
                    if prune and bno[u] == 1 and not busy[u]:
                        need -= mem_k * min_charge[u, mm]  # first launch of a node counted in need
                    cost += c
                    bno[u] += 1
                    bend[u] = t + end
                    bsucc[u] = s
                    flist[nf] = u
                    nf += 1
                if not alive:
                    break
                b -= cost
                if prune and b < need:
                    break
    return wins


@njit(cache=True, nogil=True, inline="always")
def _pair(arr, ready, cand_model, cand_count, i, pair_cand, pair_mem, mem_model, mem_k, completed0,
          parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon,
          min_charge, min_lat, child_tail, prune, max_steps, dkey, crn, s_lo, s_hi):
    c = pair_cand[i]
    pm = pair_mem[i]
    ckey = fold(dkey, CRN_CANDIDATE if crn else c)
    return _run_pair(
        arr.row_ptr, arr.row_lat, arr.row_succ, arr.row_charge, arr.p, arr.lat_mean, arr.lat_std,
        arr.tmpl_charge, arr.m, arr.lat_dist, arr.charge_is_latency, arr.available, arr.child_ptr,
        arr.child_idx, arr.parent_ptr, ready, cand_model[c], cand_count[c], mem_model[pm], mem_k[pm],
        completed0, parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget,
        horizon, min_charge, min_lat, child_tail, prune, max_steps, fold(ckey, pm), s_lo, s_hi,
    )


@njit(cache=True, nogil=True, parallel=True)
def run_pairs(
    arr, ready, cand_model, cand_count, pair_cand, pair_mem, mem_model, mem_k, completed0,
    parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon,
    min_charge, min_lat, child_tail, prune, max_steps, dkey, crn, s_lo, s_hi, out_wins,
):
    """Simulations s_lo..s_hi-1 of every listed (candidate, member) pair, over threads.

    ``out_wins[i]`` receives the number of successful simulations of pair i
    (``pair_cand[i]``, ``pair_mem[i]``). ``dkey`` is the decision's key; the
    key of a simulation folds in the candidate (or ``CRN_CANDIDATE``), the
    member and the sample index, so the result is the same for any thread count.
    """
    for i in prange(pair_cand.shape[0]):
        out_wins[i] = _pair(
            arr, ready, cand_model, cand_count, i, pair_cand, pair_mem, mem_model, mem_k,
            completed0, parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget,
            horizon, min_charge, min_lat, child_tail, prune, max_steps, dkey, crn, s_lo, s_hi,
        )


@njit(cache=True, nogil=True)
def run_pairs_serial(
    arr, ready, cand_model, cand_count, pair_cand, pair_mem, mem_model, mem_k, completed0,
    parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon,
    min_charge, min_lat, child_tail, prune, max_steps, dkey, crn, s_lo, s_hi, out_wins,
):
    """Single-threaded twin of :func:`run_pairs` (same keys, same results)."""
    for i in range(pair_cand.shape[0]):
        out_wins[i] = _pair(
            arr, ready, cand_model, cand_count, i, pair_cand, pair_mem, mem_model, mem_k,
            completed0, parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget,
            horizon, min_charge, min_lat, child_tail, prune, max_steps, dkey, crn, s_lo, s_hi,
        )

"""MCPP's compiled Monte Carlo kernel: many simulated continuations of one decision.

One simulation = apply a candidate action with the atomic launch rule, then
follow one portfolio member Seq-(m, k) (every ready node gets (m, k)) until
the DAG completes (success), time runs out or a launch is infeasible
(failure). The semantics are those of the simulator (``simulator.md``): the
same :func:`~simulator.engine.draw_attempt` (row resampling, or parametric
draws), one queue entry per batch (end = max latency, success = OR), pops in
end-time order with ties to the lower node position, and ``t >= D`` checked
before "all completed".

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
from numba import njit, prange

from .engine import draw_attempt
from .rng import fold, uniform

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


@njit(cache=True, nogil=True, inline="always")
def _batch_key(skey, v, b):
    return fold(skey, v * _BATCH_SHIFT + b)


@njit(cache=True, nogil=True)
def draw_batch(arr, v, j, k, bkey, room_t, room_b, min_charge, min_lat):
    """Draw a batch of k attempts of node v with model j: (feasible, end, success, cost).

    Not feasible when a drawn latency exceeds ``room_t`` or the batch cost
    exceeds ``room_b`` (the atomic rule; both are a failure for the planner).
    Attempt a uses the key ``fold(bkey, a)``.
    """
    if min_lat[v, j] > room_t or k * min_charge[v, j] > room_b:
        return False, 0.0, False, 0.0
    end = 0.0
    cost = 0.0
    succ = False
    for a in range(k):
        lat, s, ch = draw_attempt(arr, v, j, fold(bkey, a))
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
def simulate_once(
    arr,
    ready,
    cand_model,
    cand_count,
    mem_model,
    mem_k,
    completed0,
    parents_done0,
    inf_node,
    inf_model,
    inf_end,
    inf_nrem,
    inf_already,
    budget,
    horizon,
    min_charge,
    min_lat,
    max_steps,
    skey,
    completed,
    parents_done,
    flist,
    bend,
    bsucc,
    bno,
    newready,
):
    """One simulated continuation; True when the DAG completes in time and budget.

    Times are relative to the decision (t = 0, deadline = ``horizon``). The
    scratch arrays (``completed`` .. ``newready``, length n) are overwritten.
    """
    n = arr.n
    ncomp = 0
    for v in range(n):
        completed[v] = completed0[v]
        parents_done[v] = parents_done0[v]
        bno[v] = 1
        if completed0[v]:
            ncomp += 1
    # in-flight batches: known end, success redrawn per unfinished attempt (batch number 0)
    nf = 0
    for q in range(inf_node.shape[0]):
        v = inf_node[q]
        s = inf_already[q]
        if not s:
            pv = arr.p[v, inf_model[q]]
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
    for r in range(ready.shape[0]):
        v = ready[r]
        ok, end, s, c = draw_batch(
            arr, v, cand_model[r], cand_count[r], _batch_key(skey, v, bno[v]),
            horizon, budget - cost, min_charge, min_lat,
        )
        if not ok:
            return False
        cost += c
        bno[v] += 1
        bend[v] = end
        bsucc[v] = s
        flist[nf] = v
        nf += 1
    b = budget - cost
    steps = 0
    while True:
        if t >= horizon:
            return False
        if ncomp == n:
            return True
        if nf == 0:
            return False
        best = 0
        for q in range(1, nf):
            u = flist[q]
            w = flist[best]
            if bend[u] < bend[w] or (bend[u] == bend[w] and u < w):
                best = q
        v = flist[best]
        if bend[v] > horizon:
            return False
        flist[best] = flist[nf - 1]
        nf -= 1
        t = bend[v]
        steps += 1
        if steps > max_steps:
            return False
        nr = 0
        if bsucc[v]:
            completed[v] = True
            ncomp += 1
            for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
                c_ = arr.child_idx[e]
                parents_done[c_] += 1
                if parents_done[c_] == arr.parent_ptr[c_ + 1] - arr.parent_ptr[c_]:
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
                if not arr.available[u, mem_model]:
                    return False
                ok, end, s, c = draw_batch(
                    arr, u, mem_model, mem_k, _batch_key(skey, u, bno[u]),
                    horizon - t, b - cost, min_charge, min_lat,
                )
                if not ok:
                    return False
                cost += c
                bno[u] += 1
                bend[u] = t + end
                bsucc[u] = s
                flist[nf] = u
                nf += 1
            b -= cost


@njit(cache=True, nogil=True)
def _run_pair(
    arr, ready, cand_model, cand_count, c, mem_model, mem_k, completed0, parents_done0,
    inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon, min_charge, min_lat,
    max_steps, pkey, s_lo, s_hi,
):
    n = arr.n
    completed = np.empty(n, dtype=np.bool_)
    parents_done = np.empty(n, dtype=np.int64)
    flist = np.empty(n, dtype=np.int64)
    bend = np.empty(n)
    bsucc = np.empty(n, dtype=np.bool_)
    bno = np.empty(n, dtype=np.int64)
    newready = np.empty(n, dtype=np.int64)
    cm = cand_model[c]
    cc = cand_count[c]
    wins = 0
    for s in range(s_lo, s_hi):
        if simulate_once(
            arr, ready, cm, cc, mem_model, mem_k, completed0, parents_done0, inf_node, inf_model,
            inf_end, inf_nrem, inf_already, budget, horizon, min_charge, min_lat, max_steps,
            fold(pkey, s), completed, parents_done, flist, bend, bsucc, bno, newready,
        ):
            wins += 1
    return wins


@njit(cache=True, nogil=True, parallel=True)
def run_pairs(
    arr,
    ready,
    cand_model,
    cand_count,
    pair_cand,
    pair_mem,
    mem_model,
    mem_k,
    completed0,
    parents_done0,
    inf_node,
    inf_model,
    inf_end,
    inf_nrem,
    inf_already,
    budget,
    horizon,
    min_charge,
    min_lat,
    max_steps,
    dkey,
    crn,
    s_lo,
    s_hi,
    out_wins,
):
    """Simulations s_lo..s_hi-1 of every listed (candidate, member) pair, over threads.

    ``out_wins[i]`` receives the number of successful simulations of pair i
    (``pair_cand[i]``, ``pair_mem[i]``). ``dkey`` is the decision's key; the
    key of a simulation folds in the candidate (or ``CRN_CANDIDATE``), the
    member and the sample index, so the result is the same for any thread count.
    """
    for i in prange(pair_cand.shape[0]):
        c = pair_cand[i]
        p = pair_mem[i]
        ckey = fold(dkey, CRN_CANDIDATE if crn else c)
        out_wins[i] = _run_pair(
            arr, ready, cand_model, cand_count, c, mem_model[p], mem_k[p], completed0,
            parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon,
            min_charge, min_lat, max_steps, fold(ckey, p), s_lo, s_hi,
        )


@njit(cache=True, nogil=True)
def run_pairs_serial(
    arr, ready, cand_model, cand_count, pair_cand, pair_mem, mem_model, mem_k, completed0,
    parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon,
    min_charge, min_lat, max_steps, dkey, crn, s_lo, s_hi, out_wins,
):
    """Single-threaded twin of :func:`run_pairs` (same keys, same results)."""
    for i in range(pair_cand.shape[0]):
        c = pair_cand[i]
        p = pair_mem[i]
        ckey = fold(dkey, CRN_CANDIDATE if crn else c)
        out_wins[i] = _run_pair(
            arr, ready, cand_model, cand_count, c, mem_model[p], mem_k[p], completed0,
            parents_done0, inf_node, inf_model, inf_end, inf_nrem, inf_already, budget, horizon,
            min_charge, min_lat, max_steps, fold(ckey, p), s_lo, s_hi,
        )

"""MCPP's compiled Monte Carlo kernel: many simulated continuations of one decision.

One simulation = apply a candidate action with the atomic launch rule, then
follow one portfolio member Seq-(m, k) (every ready node gets (m, k)) until
the DAG completes (success), time runs out or a launch is infeasible
(failure). The semantics are those of the simulator (``docs/simulator.md``): the
same :func:`~simulator.engine.loop.draw_attempt` (row resampling, or parametric
draws), one queue entry per batch (end = max latency, success = OR), pops in
end-time order with ties to the lower node position, and "all completed" checked
before ``t >= D`` (finishing exactly at D counts), as in ``engine.advance``.

Randomness is keyed, never streamed: simulation s of (candidate c, member p)
at a decision uses the key (run seed, DAG, trial, decision, c, p, s), and
batch number b of node v inside it the sub-key (v, b). Results therefore do
not depend on the number of threads. With common random numbers (CRN) the
candidate index is left out of the key, so every candidate meets the same
luck on the same node batch.

Everything here works on flat arrays: the DAG's
:class:`~simulator.costs.arrays.DagArrays`, the episode's pruning bounds
(:class:`PlanBounds`) and the decision's state (:class:`DecisionState`), all
three NamedTuples of arrays and scalars built outside the hot loop.
:func:`run_pairs` spreads (candidate, member) pairs over threads
(:mod:`simulator.base.threads`); :func:`run_pair` unpacks the tuples once and runs the
simulations of one pair.
"""

from __future__ import annotations

import types
from typing import NamedTuple

import numpy as np
from numba import uint64

from simulator.base.jit import borrowed, compiled_only, inlined, njit
from simulator.base.rng import GOLDEN, cos_2pi_lower, fold, normal, normal_lower, randint, uniform
from simulator.base.rng import gamma as gamma_draw
from simulator.base.threads import run_chunked
from simulator.costs.charges import charge_of_draw
from simulator.engine.live_rules import END, WAIT, atomic_admission, atomic_reservation, capped_charge
from simulator.engine.loop import CV_MAX, CV_MIN, sample_latency_compiled

#: key field for "every candidate" (common random numbers)
CRN_CANDIDATE = 0x7FFFFFFF
_BATCH_SHIFT = 4294967296  # 2**32: sub-key of batch b of node v is v * 2**32 + b




class PlanBounds(NamedTuple):
    """Per-(DAG, episode) lower bounds for exact pruning (built once per episode, read by every decision).

    The bounds are float64 arrays of shape (n, m), +inf where the model is unavailable; the
    ``lat_*`` arrays are :func:`latency_params` (what parametric draws can compute once).
    """

    min_charge: np.ndarray  # smallest charged cost of one attempt (:func:`attempt_bounds`)
    min_lat: np.ndarray  # smallest latency of one attempt (:func:`attempt_bounds`)
    child_tail: np.ndarray  # longest path of min latencies strictly below each node (:func:`child_tails`)
    lat_kind: np.ndarray  # int64 (n, m): parametric latency law of (v, j) after the checks (:func:`latency_params`)
    lat_c0: np.ndarray  # float64 (n, m): its first constant
    lat_c1: np.ndarray  # float64 (n, m): its second constant


#: the ``ceiling`` of a decision that is not under the live rules (never read)
NO_CEILING = np.zeros((1, 1), dtype=np.float64)


class DecisionState(NamedTuple):
    """Everything one MCPP decision hands to the kernel (built once per decision).

    R = number of ready nodes, C = candidates, P = portfolio members, n = nodes,
    Q = in-flight batches. Times are relative to the decision (t = 0 now).
    """

    ready: np.ndarray  # int64 (R,): ready node positions, in the candidates' column order
    cand_model: np.ndarray  # int64 (C, R): model position of candidate c on ready node r
    cand_count: np.ndarray  # int64 (C, R): attempt count (>= 1) of candidate c on ready node r
    mem_model: np.ndarray  # int64 (P,): model position of member Seq-(m, k)
    mem_k: np.ndarray  # int64 (P,): its attempt count k
    completed: np.ndarray  # bool (n,): node completed at the decision
    parents_done: np.ndarray  # int64 (n,): completed parents of each node
    inf_node: np.ndarray  # int64 (Q,): node of each in-flight batch
    inf_model: np.ndarray  # int64 (Q,): its model position
    inf_end: np.ndarray  # float64 (Q,): its known end time (max remaining latency)
    inf_nrem: np.ndarray  # int64 (Q,): its attempts not yet finished (redrawn)
    inf_already: np.ndarray  # bool (Q,): one of its finished attempts already succeeded
    budget: float  # remaining budget b
    horizon: float  # remaining time D - t
    key: np.uint64  # the decision's key (run seed, DAG, trial, STREAM_PLANNER, decision index)
    crn: bool  # common random numbers: the candidate is left out of the simulation key
    prune: bool  # exact pruning (results unchanged; off only to test that)
    max_steps: int  # batch ends a simulation may process; one more is a failure
    per_attempt: bool = False  # simulate the per-attempt launch (execution-rule mode per_attempt) instead of atomic
    live: bool = False  # simulate the live rules (simulator.engine.live_rules) instead of atomic
    ceiling: np.ndarray = NO_CEILING  # float64 (n, m) under live: the largest charge of one attempt
    unit: float = 0.0  # under live: the reservation unit (1: whole tokens)


@njit(cache=True, nogil=True)
def attempt_bounds(arr):
    """Per (node, model): smallest possible charged cost and latency of one attempt.

    Used to reject a batch that cannot fit before drawing it (k attempts cost
    at least k x min charge): an exact shortcut, the outcome is a failure
    whatever the draws.

    Parameters
    ----------
    arr : DagArrays
        The planning statistics of the DAG (n nodes, m models).

    Returns
    -------
    min_charge : float64 (n, m)
        Smallest charge of one attempt in the cost mode (+inf if unavailable).
    min_lat : float64 (n, m)
        Smallest latency of one attempt (+inf if unavailable); for parametric
        draws the 1e-3 floor of :func:`~simulator.engine.loop.sample_latency`
        (the mean itself when the latency is deterministic).
    """
    n, m = arr.n, arr.m
    min_charge = np.empty((n, m), dtype=np.float64)  # np.empty + fill: the allocation forms the engine compiles
    min_charge[:, :] = np.inf
    min_lat = np.empty((n, m), dtype=np.float64)
    min_lat[:, :] = np.inf
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

    Parameters
    ----------
    arr : DagArrays
        The DAG (its child lists and topological order are used).
    min_lat : float64 (n, m)
        Smallest latency of one attempt, from :func:`attempt_bounds`.

    Returns
    -------
    child_tail : float64 (n, m)
    """
    from simulator.pools.graph import topological_order

    order = topological_order(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx)
    tail = np.zeros((arr.n, arr.m))
    child = np.zeros((arr.n, arr.m))
    for v in reversed(order):
        for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
            child[v] = np.maximum(child[v], tail[arr.child_idx[e]])
        tail[v] = min_lat[v] + child[v]
    return child


#: parametric latency laws of :func:`latency_params` (after the std/mean checks of sample_latency)
LAT_FIXED, LAT_LOGNORMAL, LAT_GAMMA, LAT_GAUSSIAN = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def latency_params(lat_dist, lat_mean, lat_std):
    """Per (node, model): the law and two constants of :func:`~simulator.engine.loop.sample_latency`.

    ``sample_latency`` recomputes from (mean, std) at every draw what does not
    depend on the draw (two logarithms, a square root, divisions); the kernel
    draws from these constants instead, with the same operations in the same
    order, so every latency is bit-identical (a test checks it on all laws).

    Returns
    -------
    kind : int64 (n, m)
        LAT_FIXED (c0 = the latency), LAT_LOGNORMAL (exp(c0 + c1 z)), LAT_GAMMA
        (gamma(shape c0) x c1) or LAT_GAUSSIAN (c0 + c1 z); every draw is then
        floored at 1e-3, as in ``sample_latency``.
    c0, c1 : float64 (n, m)
    """
    n, m = lat_mean.shape
    kind = np.empty((n, m), dtype=np.int64)  # np.empty + fill: the allocation forms the engine compiles
    kind[:, :] = 0
    c0 = np.empty((n, m), dtype=np.float64)
    c0[:, :] = 0.0
    c1 = np.empty((n, m), dtype=np.float64)
    c1[:, :] = 0.0
    for v in range(n):
        for j in range(m):
            mean, std = lat_mean[v, j], lat_std[v, j]
            if std <= 0.0 or mean <= 0.0 or std / mean < CV_MIN:
                kind[v, j] = LAT_FIXED
                c0[v, j] = max(mean, 1e-3)
                continue
            if std / mean > CV_MAX:
                std = mean * CV_MAX
            if lat_dist == 0:
                s2 = np.log(1.0 + (std / mean) ** 2)
                kind[v, j] = LAT_LOGNORMAL
                c0[v, j] = np.log(mean) - 0.5 * s2
                c1[v, j] = np.sqrt(s2)
            elif lat_dist == 1:
                kind[v, j] = LAT_GAMMA
                c0[v, j] = (mean / std) ** 2
                c1[v, j] = std * std / mean
            else:
                kind[v, j] = LAT_GAUSSIAN
                c0[v, j] = mean
                c1[v, j] = std
    return kind, c0, c1


@njit(cache=True, nogil=True, inline="always")
def _latency(kind, c0, c1, key):
    """A parametric latency from :func:`latency_params` (uniforms 1.. of ``key``, as ``sample_latency``)."""
    if kind == LAT_FIXED:
        return c0
    if kind == LAT_LOGNORMAL:
        x = np.exp(c0 + c1 * normal(key, 1))
    elif kind == LAT_GAMMA:
        x = gamma_draw(key, 1, c0) * c1
    else:
        x = c0 + c1 * normal(key, 1)
    return max(x, 1e-3)


#: relative margin of :func:`fits_surely_threshold` (far beyond the few roundings of a latency draw)
SCREEN_MARGIN = 1e-6


@compiled_only
def fits_surely_threshold(kind, c0, c1, room, log_room):
    """The least first normal uniform u1 with which a draw of :func:`_latency` certainly ends within ``room``.

    The normal is Box-Muller's sqrt(-2 ln u1) cos(2 pi u2) (:func:`simulator.base.rng.normal`), never above
    sqrt(-2 ln u1); a lognormal draw is exp(c0 + c1 z), a Gaussian one c0 + c1 z (c1 > 0), both floored
    at 1e-3 (``room`` >= 1e-3 here). So u1 >= exp(-zcut^2 / 2), with zcut the largest z that fits
    less a margin far beyond the roundings of the draw, means the latency is at most ``room`` without
    drawing it. Returns 2.0 (no uniform reaches it) when no such z is positive.
    """
    if kind == LAT_LOGNORMAL:
        zcut = (log_room - c0) / c1 - SCREEN_MARGIN * (1.0 + abs(log_room) + abs(c0)) / c1
    else:
        zcut = (room - c0) / c1 - SCREEN_MARGIN * (1.0 + abs(room) + abs(c0)) / c1
    if not zcut > 0.0:
        return 2.0
    return np.exp(-0.5 * zcut * zcut) * (1.0 + SCREEN_MARGIN)


@compiled_only
def batch_max_latency(kind, c0, c1, k, bkey):
    """The largest latency of the k parametric attempts of a batch (keys ``bkey + a * GOLDEN``), exactly.

    Equal to the largest :func:`_latency` of the k attempts, without drawing most of them: the
    attempt with the least first normal uniform is drawn, and then only the attempts whose first
    uniform is below :func:`fits_surely_threshold` at that latency (the others are certainly not
    above it). Lognormal and Gaussian laws (a fixed latency is its constant).
    """
    if kind == LAT_FIXED:
        return c0
    a_min = 0
    u_min = 2.0
    for a in range(k):
        u1 = uniform(bkey + uint64(a) * GOLDEN, 1)
        if u1 < u_min:
            u_min = u1
            a_min = a
    end = _latency(kind, c0, c1, bkey + uint64(a_min) * GOLDEN)
    thr = fits_surely_threshold(kind, c0, c1, end, np.log(end))
    for a in range(k):
        if a == a_min:
            continue
        akey = bkey + uint64(a) * GOLDEN
        if uniform(akey, 1) >= thr:
            continue
        lat = _latency(kind, c0, c1, akey)
        if lat > end:
            end = lat
    return end


def plan_bounds(arr) -> PlanBounds:
    """The pruning bounds and parametric latency constants of a DAG's planning statistics (once per episode)."""
    min_charge, min_lat = attempt_bounds(arr)
    kind, c0, c1 = latency_params(arr.lat_dist, arr.lat_mean, arr.lat_std)
    return PlanBounds(min_charge, min_lat, child_tails(arr, min_lat), kind, c0, c1)


@compiled_only
def _batch_key(sim_key, v, b):
    """Key of batch number b of node v inside a simulation."""
    return fold(sim_key, v * _BATCH_SHIFT + b)


@compiled_only
def _row_of(key, lo, hi):
    """Row drawn by an attempt of key ``key`` among rows lo..hi-1 (uniform with replacement)."""
    return lo + randint(key, 0, hi - lo)


@compiled_only
def _parametric(key, p, mean, std, lat_dist):
    """(success, latency) of a parametric attempt of key ``key`` (template p, mean, std)."""
    return uniform(key, 0) < p, sample_latency_compiled(lat_dist, mean, std, key, 1)


@njit(cache=True, nogil=True, inline="always")
def draw_flat(row_ptr, row_lat, row_succ, row_charge, p, lat_mean, lat_std, tmpl_charge, m, lat_dist, cil, v, j, key):
    """:func:`simulator.engine.loop.draw_attempt` on unpacked arrays (bit-identical results).

    The kernel's simulation loop writes this draw out in place from the same
    scalar pieces (:func:`_row_of`, :func:`_parametric`): an inlined call
    that takes arrays costs an atomic reference-count update per array and
    per call, which was most of a simulation's time. A test checks equality
    of this function with ``draw_attempt`` on rows and parametric draws.

    Parameters
    ----------
    row_ptr : int64 (n*m+1,)
        Rows of (node v, model j) are ``row_ptr[v*m+j] : row_ptr[v*m+j+1]``.
    row_lat, row_succ, row_charge : float64, bool, float64 (R,)
        The empirical rows (``DagArrays.row_*``).
    p, lat_mean, lat_std, tmpl_charge : float64 (n, m)
        The template (``DagArrays``; used when (v, j) has no rows).
    m : int
        Number of models.
    lat_dist : int
        Parametric latency law (0 lognormal, 1 gamma, 2 gaussian).
    cil : bool
        ``charge_is_latency``: an attempt is charged its latency.
    v, j : int
        Node and model positions.
    key : uint64
        The attempt's key.

    Returns
    -------
    latency : float64
    success : bool
    charge : float64
    """
    k = v * m + j
    lo = row_ptr[k]
    hi = row_ptr[k + 1]
    if hi > lo:
        r = _row_of(key, lo, hi)
        lat = row_lat[r]
        succ = row_succ[r]
        charge = row_charge[r]
    else:
        succ, lat = _parametric(key, p[v, j], lat_mean[v, j], lat_std[v, j], lat_dist)
        charge = tmpl_charge[v, j]
    return lat, succ, charge_of_draw(cil, charge, lat)


@njit(cache=True, nogil=True, inline="always")
def _latency_lower(kind, c0, c1, key):
    """A lower bound of :func:`_latency` (kind, c0, c1, key): the normal taken at
    :func:`~simulator.base.rng.normal_lower` (never above it, and without ``cos``); gamma and fixed laws
    exactly. Scalars only: the chain screen calls it once per node and batch."""
    if kind == LAT_LOGNORMAL:
        return max(np.exp(c0 + c1 * normal_lower(key, 1)) * (1.0 - 1e-12), 1e-3)
    if kind == LAT_GAUSSIAN:
        return max(c0 + c1 * normal_lower(key, 1), 1e-3)
    return _latency(kind, c0, c1, key)


@njit(cache=True, nogil=True)
def _attempt_latency_lower(row_ptr, row_lat, lat_kind, lat_c0, lat_c1, m, v, j, key):
    """A lower bound of an attempt's latency as :func:`run_pair`'s attempts draw it: its row (exact), else
    :func:`_latency_lower` (the chain screen writes the same two cases out in place). Only bounds are read
    from it, so a lower bound keeps every stop it makes exact."""
    k = v * m + j
    if row_ptr[k + 1] > row_ptr[k]:
        return row_lat[_row_of(key, row_ptr[k], row_ptr[k + 1])]
    return _latency_lower(lat_kind[v, j], lat_c0[v, j], lat_c1[v, j], key)


@compiled_only
def member_need(available, min_charge, completed0, busy, mem_model, mem_k):
    """(some node neither completed nor busy lacks the member's model, ``need0``).

    ``need0``: every such node still needs a first member batch costing at least ``mem_k`` x its min
    charge, summed in node order (the ``need`` a simulation starts from; partial when a node lacks the
    model). One place for the pair checks of :func:`run_pair` and of the surface's decide loop.
    """
    need0 = 0.0
    for v in range(completed0.shape[0]):
        if not completed0[v] and not busy[v]:
            if not available[v, mem_model]:
                return True, need0
            need0 += mem_k * min_charge[v, mem_model]
    return False, need0


@compiled_only
def inflight_end(inf_node, inf_end, child_tail, j):
    """The largest in-flight batch end plus ``child_tail`` (member model j): the DAG completes no earlier
    (-inf: nothing in flight)."""
    end = -np.inf
    for q in range(inf_node.shape[0]):
        x = inf_end[q] + child_tail[inf_node[q], j]
        if x > end:
            end = x
    return end


@compiled_only
def candidate_charge(min_charge, ready, cand_model, cand_count, c, start):
    """``start`` plus candidate c's least charge (count x min charge per ready node, summed in ready order)."""
    total = start
    for r in range(ready.shape[0]):
        total += cand_count[c, r] * min_charge[ready[r], cand_model[c, r]]
    return total


@compiled_only
def candidate_end(min_lat, child_tail, ready, cand_model, c, j):
    """The largest min latency plus ``child_tail`` (member model j) over candidate c's ready nodes: the DAG
    completes no earlier (-inf: no ready node)."""
    end = -np.inf
    for r in range(ready.shape[0]):
        v = ready[r]
        x = min_lat[v, cand_model[c, r]] + child_tail[v, j]
        if x > end:
            end = x
    return end


@compiled_only
def _pair_fails_surely(available, bounds, dec, c, mem_model, mem_k, busy, budget, horizon):
    """Pair-level exact pruning: is every simulation of this pair certainly a failure?

    Every node neither completed nor busy (ready or in flight) still needs a
    first member batch costing at least ``mem_k`` x its min charge; the
    candidate's batches cost at least count x min charge; a batch ending at e
    leaves at least ``child_tail`` before the DAG can complete.

    Parameters
    ----------
    available : bool (n, m)
    bounds : PlanBounds
    dec : DecisionState
    c : int
        The candidate (row of ``dec.cand_model`` / ``dec.cand_count``).
    mem_model, mem_k : int
        The member Seq-(m, k).
    busy : bool (n,)
        Node ready or in flight at the decision.
    budget, horizon : float
        The limits simulated (``dec.budget`` / ``dec.horizon``, or the prediction surface's).

    Returns
    -------
    fails : bool
    need0 : float
        Least cost of the first member batches of the nodes not yet launched
        (the ``need`` the simulations start from).
    """
    min_charge, child_tail = bounds.min_charge, bounds.child_tail
    lacks, need0 = member_need(available, min_charge, dec.completed, busy, mem_model, mem_k)
    if lacks or candidate_end(bounds.min_lat, child_tail, dec.ready, dec.cand_model, c, mem_model) > horizon:
        return True, need0
    if candidate_charge(min_charge, dec.ready, dec.cand_model, dec.cand_count, c, 0.0) + need0 > budget:
        return True, need0
    return inflight_end(dec.inf_node, dec.inf_end, child_tail, mem_model) > horizon, need0


class PairCheckTables(NamedTuple):
    """:func:`_pair_fails_surely`'s parts, by member and by candidate, for every pair of one decision.

    The pair check is made of per-member parts (:func:`member_need`;
    :func:`inflight_end` per member model) and per-candidate parts
    (:func:`candidate_charge`, :func:`candidate_end` per member model): the
    tables hold them once, and :func:`pair_fails` recombines them as
    :func:`_pair_fails_surely` does (P members, C candidates, m models).
    """

    need0: np.ndarray  # (P,) least cost of the first member batches of the nodes not launched yet
    lacks: np.ndarray  # (P,) bool: such a node lacks the member's model
    inf_tail: np.ndarray  # (m,) max(0, the in-flight batches' ends + child_tail), per member model
    first: np.ndarray  # (C,) the candidate's least charge, summed from 0 as _pair_fails_surely
    lat_end: np.ndarray  # (C, m) its ready nodes' largest min latency + child_tail, per member model


@compiled_only
def pair_check_tables(arr, bounds, dec):
    """The :class:`PairCheckTables` of decision ``dec``, by the very functions :func:`_pair_fails_surely` calls."""
    n, m = dec.completed.shape[0], arr.m
    P = dec.mem_model.shape[0]
    C, R = dec.cand_model.shape
    busy = np.zeros(n, dtype=np.bool_)
    for r in range(R):
        busy[dec.ready[r]] = True
    for q in range(dec.inf_node.shape[0]):
        busy[dec.inf_node[q]] = True
    need0 = np.zeros(P)
    lacks = np.zeros(P, dtype=np.bool_)
    for pm in range(P):
        lacks[pm], need0[pm] = member_need(arr.available, bounds.min_charge, dec.completed, busy, dec.mem_model[pm],
                                           dec.mem_k[pm])
    inf_tail = np.zeros(m)
    for j in range(m):
        inf_tail[j] = max(0.0, inflight_end(dec.inf_node, dec.inf_end, bounds.child_tail, j))
    first = np.zeros(C)
    lat_end = np.empty((C, m))
    for c in range(C):
        first[c] = candidate_charge(bounds.min_charge, dec.ready, dec.cand_model, dec.cand_count, c, 0.0)
        for j in range(m):
            lat_end[c, j] = candidate_end(bounds.min_lat, bounds.child_tail, dec.ready, dec.cand_model, c, j)
    return PairCheckTables(need0, lacks, inf_tail, first, lat_end)


@compiled_only
def pair_fails(tables, c, pm, j, n_inf, budget, horizon):
    """:func:`_pair_fails_surely` of pair (candidate c, member pm; j: its model) from the decision's tables.

    ``n_inf``: the decision's number of batches in flight (their tail only counts when there is one).
    """
    return (tables.lacks[pm] or tables.lat_end[c, j] > horizon or tables.first[c] + tables.need0[pm] > budget
            or (n_inf > 0 and tables.inf_tail[j] > horizon))


@njit(cache=True, nogil=True)
def surely_failing(arr, bounds, dec):
    """(C, P) bool: the pairs :func:`_pair_fails_surely` ends at the decision's own budget and horizon
    (the anytime planner's exact pruning: such a pair gets no simulation)."""
    tables = pair_check_tables(arr, bounds, dec)
    C = dec.cand_model.shape[0]
    P = dec.mem_model.shape[0]
    n_inf = dec.inf_node.shape[0]
    fails = np.zeros((C, P), dtype=np.bool_)
    for c in range(C):
        for pm in range(P):
            fails[c, pm] = pair_fails(tables, c, pm, dec.mem_model[pm], n_inf, dec.budget, dec.horizon)
    return fails


@njit(cache=True, nogil=True)
def pair_scratch(n, K=0, sims=0):
    """:func:`run_pair`'s scratch arrays for an n-node DAG, K surface cells and ``sims`` screened simulations."""
    return (np.empty((18, max(n, K, sims)), dtype=np.int64), np.empty((11, n), dtype=np.float64),
            np.empty((3, n), dtype=np.bool_))  # fmt: skip


@compiled_only
def first_at_least(vals, x):
    """The first index of the increasing ``vals`` whose value is >= x (``len(vals)``: none)."""
    lo = 0
    hi = vals.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if vals[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo



@compiled_only
def inside_stair(stair_b, stair_h, level, cost_lb, finish_lb):
    """Whether some cell a pair can still change admits cost ``cost_lb`` and finishing time ``finish_lb``.

    ``stair_b`` is increasing (the cells' budgets); ``stair_h[i, u]`` is the
    largest horizon of the cells with budget >= ``stair_b[i]`` whose best
    count is below ``u`` (-inf: none). Both are widened by the caller beyond
    any rounding, so a simulation stopped here fails in every such cell.
    """
    return _inside_stair_near(stair_b, stair_h, level, cost_lb, finish_lb, -1)[0]


@compiled_only
def _inside_stair_near(stair_b, stair_h, level, cost_lb, finish_lb, hint):
    """:func:`inside_stair`, its budget search tried first at ``hint`` (:func:`_at_least_near`); and that
    search's answer."""
    i = _at_least_near(stair_b, cost_lb, hint)
    return i < stair_b.shape[0] and stair_h[i, level] >= finish_lb, i


@compiled_only
def _at_least_near(vals, x, i):
    """:func:`first_at_least` (vals, x), tried first at ``i`` and ``i + 1``: a simulation's least cost moves
    a budget step at a time, so its last index is a good guess (a binary search costs about 30 ns)."""
    n = vals.shape[0]
    if 0 <= i <= n and (i == 0 or vals[i - 1] < x):
        if i == n or not vals[i] < x:
            return i
        if i + 1 == n or not vals[i + 1] < x:  # vals[i] < x here
            return i + 1
    return first_at_least(vals, x)


@compiled_only
def _first_below_near(stair_h, level, y, i):
    """The first budget index whose cells at ``level`` all end before ``y`` (``stair_h[:, level]`` never
    increases), tried first at ``i`` and ``i - 1``: a simulation's finishing bound only grows."""
    nb = stair_h.shape[0]
    if 0 <= i <= nb and (i == nb or stair_h[i, level] < y):
        if i == 0 or not stair_h[i - 1, level] < y:
            return i
        if i == 1 or not stair_h[i - 2, level] < y:  # stair_h[i - 1] < y here
            return i - 1
    lo = 0
    hi = nb
    while lo < hi:
        mid = (lo + hi) >> 1
        if stair_h[mid, level] >= y:
            lo = mid + 1
        else:
            hi = mid
    return lo


@compiled_only
def _stair_caps(stair_b, stair_h, level, cost_lb, finish_lb, hint_b, hint_f):
    """The largest budget and horizon a simulation can still use (:func:`inside_stair`'s cells; -inf: none).

    Budget: the largest of the cells whose horizon admits ``finish_lb``;
    horizon: the largest of the cells whose budget admits ``cost_lb``. A
    batch beyond either fails in every such cell. ``hint_b`` and ``hint_f`` are the two
    searches' last answers, returned with the caps (:func:`_at_least_near`, :func:`_first_below_near`).
    """
    nb = stair_b.shape[0]
    i = _at_least_near(stair_b, cost_lb, hint_b)
    cap_h = stair_h[i, level] if i < nb else -np.inf
    lo = _first_below_near(stair_h, level, finish_lb, hint_f)
    cap_b = stair_b[lo - 1] if lo > 0 else -np.inf
    return cap_b, cap_h, i, lo


class PairStart(NamedTuple):
    """What :func:`run_pair`'s first checks work out, when its caller has already run them.

    The surface's decide loop runs ``_pair_fails_surely`` and the staircase
    test for every pair of a decision from per-decision tables, and hands
    their results over so the kernel does not repeat them.
    """

    known: bool  # the caller ran the checks at run_pair's budget and horizon, and they passed
    need0: float  # least cost of the first batches of the nodes not launched yet
    first_cost: float  # the candidate's least charge plus need0
    first_end: float  # the earliest the DAG can complete after the candidate's launch
    tail0: float  # the earliest it can complete after the batches in flight


#: run_pair's ``start`` when its caller has not run the pair's first checks (run_pair runs them)
START_UNKNOWN = PairStart(False, 0.0, 0.0, 0.0, 0.0)

#: the chain screen runs on a pair's first CHAIN_PROBE simulations, then while it ends at least 1 in CHAIN_KEEP
CHAIN_PROBE = 2
CHAIN_KEEP = 16


@compiled_only
def _chain_order(completed0, busy, parent_ptr, parent_idx, placed, pend):
    """The nodes neither completed nor busy at the decision, parents first, into ``pend``; their number.

    Such a node is first launched by the member, batch 1 of its key, once its parents have completed;
    ``placed`` is scratch (overwritten).
    """
    n = completed0.shape[0]
    for v in range(n):
        placed[v] = completed0[v] or busy[v]
    n_pend = 0
    progress = True
    while progress:
        progress = False
        for v in range(n):
            if placed[v]:
                continue
            ok = True
            for e in range(parent_ptr[v], parent_ptr[v + 1]):
                if not placed[parent_idx[e]]:
                    ok = False
                    break
            if ok:
                pend[n_pend] = v
                n_pend += 1
                placed[v] = True
                progress = True
    return n_pend


#: the chain screen's kinds of node: a batch in flight, a ready node, a pending node
CH_INFLIGHT, CH_READY, CH_PENDING = 0, 1, 2
#: the relative widening of the chain screen's cut (far beyond the roundings of its sums)
CUT_WIDEN = 1.0 + 1e-9


@compiled_only
def _chain_items(dec, c, mem_model, mem_k, pend, n_pend, ch_node, ch_kind, ch_model, ch_count, ch_start):
    """The chain screen's nodes in the order it bounds them, with their first batch here; their number."""
    n_ch = 0
    for q in range(dec.inf_node.shape[0]):  # relaunched by the member if its batch fails
        ch_node[n_ch] = dec.inf_node[q]
        ch_kind[n_ch] = CH_INFLIGHT
        ch_model[n_ch] = mem_model
        ch_count[n_ch] = mem_k
        ch_start[n_ch] = dec.inf_end[q]
        n_ch += 1
    for r in range(dec.ready.shape[0]):  # launched by the candidate
        ch_node[n_ch] = dec.ready[r]
        ch_kind[n_ch] = CH_READY
        ch_model[n_ch] = dec.cand_model[c, r]
        ch_count[n_ch] = dec.cand_count[c, r]
        ch_start[n_ch] = 0.0
        n_ch += 1
    for i in range(n_pend):  # launched by the member once its parents completed
        ch_node[n_ch] = pend[i]
        ch_kind[n_ch] = CH_PENDING
        ch_model[n_ch] = mem_model
        ch_count[n_ch] = mem_k
        ch_start[n_ch] = -1.0
        n_ch += 1
    return n_ch


@compiled_only
def _after_parents(parent_ptr, parent_idx, done_by, v):
    """The largest ``done_by`` over node v's parents (0.0 without parents): the earliest v can start when
    each parent completes no earlier than its ``done_by`` (the quick kill's floors, the chain screen's bounds)."""
    start = 0.0
    for e in range(parent_ptr[v], parent_ptr[v + 1]):
        if done_by[parent_idx[e]] > start:
            start = done_by[parent_idx[e]]
    return start


#: the quick kill's kinds of first attempt: never tested, always past its room, a normal draw's z past
#: ``q_z``, a row's latency past ``q_z``
Q_NEVER, Q_ALWAYS, Q_Z, Q_ROW = 0, 1, 2, 3
#: the quick kill's thresholds are recomputed once the cut has fallen below this fraction of theirs
Q_STALE = 0.9
#: most batches of one node the chain screen follows (stopping earlier only weakens its bound)
CHAIN_BATCHES = 16


@compiled_only
def _quick_list(arr, bounds, mem_model, items, n_ch, flo, q_node, q_model, q_base):
    """The first attempts the quick kill tests, with the draw-free part of their bound; their number.

    ``items`` are the chain screen's nodes (:func:`_chain_items`: node, kind, model of its first batch
    here, start). Every ready and pending node's first attempt is tested; such a node starts no earlier
    than its parents' floors (a batch in flight: its end; any other node: its start plus its first
    batch's min latency) and the DAG completes no earlier than its end plus ``child_tail``.
    ``q_base``: that start plus the tail; ``q_model``: the attempt's model.
    """
    min_lat, child_tail = bounds.min_lat, bounds.child_tail
    parent_ptr, parent_idx = arr.parent_ptr, arr.parent_idx
    ch_node, ch_kind, ch_model, ch_start = items
    for v in range(flo.shape[0]):
        flo[v] = 0.0
    n_q = 0
    for i in range(n_ch):  # in flight, ready, then pending parents first: every floor read is written
        v = ch_node[i]
        if ch_kind[i] == CH_INFLIGHT:
            flo[v] = ch_start[i]
            continue
        start = ch_start[i]
        if start < 0.0:  # after its parents
            start = _after_parents(parent_ptr, parent_idx, flo, v)
        flo[v] = start + min_lat[v, ch_model[i]]
        q_node[n_q] = v
        q_model[n_q] = ch_model[i]
        q_base[n_q] = start + child_tail[v, mem_model]
        n_q += 1
    return n_q


@compiled_only
def _quick_thresholds(arr, bounds, cut, n_q, q_node, q_model, q_kind, q_base, q_z, q_u, prob):
    """Each listed first attempt's kill test at ``cut``, most likely first (the quick kill in :func:`run_pair`).

    Past ``room`` (``cut`` less the attempt's start floor and tail, widened beyond any rounding) the
    attempt ends the DAG past the cut. A row is compared as drawn; a lognormal or Gaussian draw is past
    it when its normal is above ``q_z`` (:func:`_normal_passes`); ``prob`` (scratch) orders the tests by
    how often they end a simulation.
    """
    row_ptr, row_lat, m = arr.row_ptr, arr.row_lat, arr.m
    lat_kind, lat_c0, lat_c1 = bounds.lat_kind, bounds.lat_c0, bounds.lat_c1
    for i in range(n_q):
        v = q_node[i]
        j = q_model[i]
        # past room, the DAG completes after cut (widened already), whatever the roundings of the floor
        room = cut - q_base[i] * (1.0 - 1e-9)
        k = v * m + j
        kind = lat_kind[v, j]
        c0 = lat_c0[v, j]
        c1 = lat_c1[v, j]
        q_u[i] = 0.0
        if row_ptr[k + 1] > row_ptr[k]:
            q_kind[i] = Q_ROW
            q_z[i] = room
            hits = 0
            for e in range(row_ptr[k], row_ptr[k + 1]):
                if row_lat[e] > room:
                    hits += 1
            prob[i] = hits / (row_ptr[k + 1] - row_ptr[k])
        elif room < 1e-3 and kind != LAT_GAMMA:  # every latency is >= 1e-3
            q_kind[i] = Q_ALWAYS
            prob[i] = 2.0
        elif kind == LAT_FIXED:
            q_kind[i] = Q_ALWAYS if c0 > room else Q_NEVER
            prob[i] = 2.0 if c0 > room else 0.0
        elif kind == LAT_LOGNORMAL or kind == LAT_GAUSSIAN:
            if room == np.inf:
                q_kind[i] = Q_NEVER
                prob[i] = 0.0
                continue
            x = np.log(room) if kind == LAT_LOGNORMAL else room
            z = (x - c0) / c1 + SCREEN_MARGIN * (1.0 + abs(x) + abs(c0)) / c1
            q_kind[i] = Q_Z
            q_z[i] = z
            tail = 0.5 * np.exp(-0.5 * z * z)  # P(N > |z|) <= tail: enough to order the tests
            q_u[i] = 2.0 * tail * (1.0 + SCREEN_MARGIN) if z > 0.0 else 2.0
            prob[i] = tail if z > 0.0 else 1.0 - tail
        else:
            q_kind[i] = Q_NEVER
            prob[i] = 0.0
    for i in range(1, n_q):  # most likely first (insertion sort: a few nodes)
        pv, nv, jv, kv, zv, uv, bv = prob[i], q_node[i], q_model[i], q_kind[i], q_z[i], q_u[i], q_base[i]
        h = i
        while h > 0 and prob[h - 1] < pv:
            prob[h], q_node[h], q_model[h], q_kind[h] = prob[h - 1], q_node[h - 1], q_model[h - 1], q_kind[h - 1]
            q_z[h], q_u[h], q_base[h] = q_z[h - 1], q_u[h - 1], q_base[h - 1]
            h -= 1
        prob[h], q_node[h], q_model[h], q_kind[h], q_z[h], q_u[h], q_base[h] = pv, nv, jv, kv, zv, uv, bv


@njit(cache=True, nogil=True, inline="always")
def _normal_passes(z, u_max, bkey):
    """Whether the normal of the draw of key ``bkey`` is certainly above ``z`` (the quick kill's test).

    The normal is at least :func:`~simulator.base.rng.normal_lower` (r cos_lower, r = sqrt(-2 ln u1)): below
    a negative z, a non-negative cos_lower already passes it; above a positive one, only u1 below
    ``u_max`` (exp(-z^2 / 2) and a margin) can, so most tests take one or two uniforms and no logarithm.
    """
    if z < 0.0:
        cl = cos_2pi_lower(uniform(bkey, 2))
        return cl >= 0.0 or np.sqrt(-2.0 * np.log(uniform(bkey, 1))) * cl > z
    u1 = uniform(bkey, 1)
    return u1 < u_max and np.sqrt(-2.0 * np.log(u1)) * cos_2pi_lower(uniform(bkey, 2)) > z


@compiled_only
def run_pair(arr, bounds, dec, c, pm, s_lo, s_hi, rec_cost, rec_fin, min_wins, budget, horizon, stair_b, stair_h,
              cell_b, cell_h, cell_best, work_i, work_f, work_b, start):
    """Successes among simulations s_lo..s_hi-1 of the pair (candidate c, member pm).

    One simulation: the in-flight batches are queued (:func:`_redraw_inflight`);
    the candidate is launched atomically over the ready nodes; then at every
    batch end (:func:`~simulator.engine.loop.pop_earliest`, as in the engine) the
    member launches (model, k) on the nodes that became ready (the failed
    node, or children just unlocked: every other ready node was launched
    before), with the same atomic rule. Success = every node completed when
    the loop checks, before ``t >= horizon`` (finishing exactly at the
    deadline counts, as in ``engine.advance``).

    With ``dec.prune``, simulations (or the whole pair,
    :func:`_pair_fails_surely`) stop as soon as failure is certain, which
    never changes a result: every node not yet launched still needs a member
    batch costing >= k x its min charge (``need``), and a batch ending at e
    leaves at least ``child_tail`` before the DAG can complete.

    Parameters
    ----------
    arr : DagArrays
        Planning statistics of the DAG (n nodes, m models).
    bounds : PlanBounds
        The episode's pruning bounds, float64 (n, m) each.
    dec : DecisionState
        The decision (times relative to it: deadline = ``dec.horizon``).
    c : int
        Candidate index (row of ``dec.cand_model`` / ``dec.cand_count``).
    pm : int
        Member index (into ``dec.mem_model`` / ``dec.mem_k``).
    s_lo, s_hi : int
        Simulation indices to run (keys ``fold(pair_key, s)``; successive
        halving runs a pair in several slices).
    rec_cost, rec_fin : float64 (s_hi - s_lo,) or (0,)
        When not empty (the prediction surface, :func:`simulator.surface.decide.decide_cells_kernel`):
        each winning simulation writes its total cost (summed launch by
        launch) and its finishing time there; the other entries are left
        as the caller filled them. Empty: nothing is recorded.
    min_wins : int
        Stop (returning -1) as soon as fewer than ``min_wins`` successes
        remain possible: the surface needs a pair only when it can beat a
        cell's best so far. 0 (the planner): never.
    budget, horizon : float
        The limits simulated: ``dec.budget`` and ``dec.horizon`` for the
        planner; the prediction surface passes its largest open cell's.
    stair_b, stair_h : float64 (nb,) and (nb, L) or empty
        The prediction surface's staircase (:func:`inside_stair`): a
        simulation stops, a failure, once its cost so far plus ``need`` and
        its earliest possible finishing time fit no cell that the pair can
        still change; each batch is held to the largest budget and horizon
        such cells allow (:func:`_stair_caps`). Atomic launches only (not
        ``per_attempt``, not ``live``). Empty (the planner): never.
    cell_b, cell_h : float64 (K,); cell_best : int64 (K,)
        The prediction surface's cells (limits widened like the staircase's)
        and their best counts so far: the pair stops (-1) once no cell can
        reach more than its best, counting each success in every cell that
        may admit it. Empty: only ``min_wins``.
    work_i, work_f, work_b : int64 (18, max(n, K, S)), float64 (11, n), bool (3, n)
        Scratch (:func:`pair_scratch`), overwritten. The screens run only with room for the
        S = s_hi - s_lo simulations they keep (the surface passes S = M).
    start : PairStart
        With ``start.known``, the caller has run the pair's first checks (:func:`_pair_fails_surely`,
        the staircase's) at this ``budget`` and ``horizon`` and they passed; the other fields are what
        they work out (the surface's decide loop, from its per-decision tables: one pass for all
        pairs). :data:`START_UNKNOWN`: run them here.

    Returns
    -------
    wins : int
        Number of successful simulations.
    """
    # unpack once: reading tuple fields inside the loops costs a reference-count update each
    row_ptr, row_lat, row_succ, row_charge = arr.row_ptr, arr.row_lat, arr.row_succ, arr.row_charge
    p, tmpl_charge = arr.p, arr.tmpl_charge
    m, cil = arr.m, arr.charge_is_latency
    available, child_ptr, child_idx, parent_ptr = arr.available, arr.child_ptr, arr.child_idx, arr.parent_ptr
    parent_idx = arr.parent_idx
    min_charge, min_lat, child_tail = bounds.min_charge, bounds.min_lat, bounds.child_tail
    lat_kind, lat_c0, lat_c1 = bounds.lat_kind, bounds.lat_c0, bounds.lat_c1
    ready, completed0, parents_done0 = dec.ready, dec.completed, dec.parents_done
    inf_node, inf_model, inf_end = dec.inf_node, dec.inf_model, dec.inf_end
    inf_nrem, inf_already = dec.inf_nrem, dec.inf_already
    prune, max_steps = dec.prune, dec.max_steps
    per_attempt = dec.per_attempt
    screen = not per_attempt and not dec.live  # the latency screen (exact only where a late attempt ends it)
    live, ceiling, unit, kappa = dec.live, dec.ceiling, dec.unit, arr.kappa
    act_model = dec.cand_model[c]  # (R,) the candidate's model per ready node
    act_count = dec.cand_count[c]
    mem_model = dec.mem_model[pm]
    mem_k = dec.mem_k[pm]
    pair_key = fold(fold(dec.key, CRN_CANDIDATE if dec.crn else c), pm)

    n = completed0.shape[0]
    R = ready.shape[0]
    # scratch from the caller (:func:`pair_scratch`): allocated once per batch of pairs, not per pair
    busy = work_b[0]  # ready or in flight at the decision
    busy[:] = False
    for r in range(R):
        busy[ready[r]] = True
    for q in range(inf_node.shape[0]):
        busy[inf_node[q]] = True
    need0, first_cost, first_end, tail0 = start.need0, start.first_cost, start.first_end, start.tail0
    stair = stair_b.shape[0] > 0
    top_level = stair_h.shape[1] - 1 if stair else 0
    if not start.known:
        need0 = 0.0
        if prune:
            fails, need0 = _pair_fails_surely(available, bounds, dec, c, mem_model, mem_k, busy, budget, horizon)
            if fails:
                return 0
        # the earliest the DAG can complete after the batches in flight
        tail0 = max(0.0, inflight_end(inf_node, inf_end, child_tail, mem_model))
        first_cost = 0.0
        if stair:  # the pair's least cost and earliest finish fit no cell it can change: every simulation fails
            first_cost = candidate_charge(min_charge, ready, dec.cand_model, dec.cand_count, c, need0)
            first_end = max(tail0, candidate_end(min_lat, child_tail, ready, dec.cand_model, c, mem_model))
            if not _inside_stair_near(stair_b, stair_h, min(s_hi - s_lo, top_level), first_cost, first_end, -1)[0]:
                return 0
    # per-simulation state (reset at every simulation)
    completed = work_b[1]
    batch_succ = work_b[2]
    parents_done = work_i[0]
    queue = work_i[1]  # nodes with a batch in flight (queue[:nq])
    batch_no = work_i[2]  # next batch number of the node (its key)
    new_ready = work_i[3]
    sel_u = work_i[4]  # a decision's batches: node, model, count
    sel_j = work_i[5]
    sel_k = work_i[6]
    n_par = work_i[7]
    batch_end = work_f[0]  # end time of the node's batch in flight
    extra = work_f[1]  # live rules: what a batch in flight holds beyond its charges
    thr_room = work_f[2]  # the screen's threshold of the candidate's node r, and the room it was made for
    thr_val = work_f[3]
    for r in range(R):
        thr_room[r] = np.nan
    n_completed0 = 0
    for v in range(n):
        if completed0[v]:
            n_completed0 += 1
    for v in range(n):
        n_par[v] = parent_ptr[v + 1] - parent_ptr[v]
    # No inlined call below takes an array: each would cost an atomic
    # reference-count update per array and per call (see draw_flat).
    record = rec_cost.shape[0] > 0
    K = cell_b.shape[0]
    cell_cnt = work_i[8]  # per cell: successes so far that it may admit
    slack = -(1 << 62)  # the largest (count - best) over the cells
    for k in range(K):
        cell_cnt[k] = 0
        if -cell_best[k] > slack:
            slack = -cell_best[k]
    # The screens (the surface only, atomic launches; see the two phases below): before a simulation
    # launches anything, bounds from its own draws end it when it certainly fails in every cell the pair
    # can still change. ``pend`` holds the nodes no launch has touched yet, parents first (_chain_order).
    chain = stair and prune and screen
    pend = work_i[9]
    comp_lb = work_f[4]  # per node: a lower bound of its completion time in this simulation
    n_pend = _chain_order(completed0, busy, parent_ptr, parent_idx, completed, pend) if chain else 0
    chain_tries = 0
    chain_hits = 0
    ch_node = work_i[13]  # the chain screen's nodes (in flight, ready, pending parents first)
    ch_kind = work_i[14]
    ch_model = work_i[15]  # the model and count of its first batch here
    ch_count = work_i[16]
    ch_start = work_f[10]  # its start (-1: after its parents)
    n_ch = _chain_items(dec, c, mem_model, mem_k, pend, n_pend, ch_node, ch_kind, ch_model, ch_count,
                        ch_start) if chain else 0
    # the quick kill (see _quick_list): one first attempt past its room, against draw-free floors
    q_node = work_i[10]
    q_kind = work_i[11]
    q_model = work_i[12]
    q_base = work_f[6]
    q_z = work_f[7]
    q_u = work_f[8]
    n_q = _quick_list(arr, bounds, mem_model, (ch_node, ch_kind, ch_model, ch_start), n_ch, work_f[9], q_node,
                      q_model, q_base) if chain else 0
    q_cut = np.nan
    n_stair = stair_b.shape[0]
    i_first = first_at_least(stair_b, first_cost) if chain else 0
    for v in range(n):  # a completed node's bound; every other node's is written before it is read
        comp_lb[v] = 0.0
    # Two phases. With the screens (the surface), phase 1 screens the simulations in order and keeps the
    # ones they cannot end (``surv``), until it has screened them all or the screen stops paying (the
    # rest, from ``s_tail``, are kept unscreened); phase 2 simulates the kept ones in full. A pair that
    # cannot beat its bar then stops on the screens' certain failures alone, before any full simulation.
    # Without them (the planner), phase 2 runs every simulation in order. The count is the same in any order.
    wins = 0
    surv = work_i[17]
    screening = chain and surv.shape[0] >= s_hi - s_lo
    n_surv = 0
    n_dead = 0
    s_tail = s_lo  # phase 1: the next simulation to screen; phase 2: the first of the unscreened ones
    i_run = 0  # phase 2: the next kept simulation to run
    while True:
        if screening and s_tail < s_hi and (chain_tries < CHAIN_PROBE or chain_hits * CHAIN_KEEP >= chain_tries):
            s_idx = s_tail
            s_tail += 1
            possible = (s_hi - s_lo) - n_dead  # most successes the pair can still have
        else:
            screening = False
            n_run = n_surv + (s_hi - s_tail)
            if i_run == n_run:
                break
            s_idx = surv[i_run] if i_run < n_surv else s_tail + (i_run - n_surv)
            possible = wins + (n_run - i_run)
            i_run += 1
        if possible < min_wins:
            return -1
        if K > 0 and slack + possible <= 0:
            return -1  # no cell can get more than its best
        level = min(possible, top_level)
        finish_lb = tail0  # a lower bound of the finishing time, raised at every launch
        sim_key = fold(pair_key, s_idx)
        cut = horizon
        if screening:
            chain_tries += 1
            # the latest finishing time in a cell the pair can still change, at its least cost (-inf: none),
            # widened beyond the roundings of the bounds compared with it
            cut = -np.inf if i_first >= n_stair else min(horizon, stair_h[i_first, level]) * CUT_WIDEN + 1e-9
            if not cut >= q_cut * Q_STALE:  # the cut only falls: thresholds of a larger one kill less, exactly
                q_cut = cut
                _quick_thresholds(arr, bounds, cut, n_q, q_node, q_model, q_kind, q_base, q_z, q_u, work_f[9])
            # the quick kill: a first attempt past its room (see _quick_list), most likely first
            killed = not cut >= 0.0
            for i in range(0 if killed else n_q):
                kind = q_kind[i]
                if kind == Q_NEVER:
                    break  # sorted last
                if kind == Q_ALWAYS:
                    killed = True
                    break
                bkey = _batch_key(sim_key, q_node[i], 1)
                if kind == Q_ROW:
                    kr = q_node[i] * m + q_model[i]
                    killed = row_lat[_row_of(bkey, row_ptr[kr], row_ptr[kr + 1])] > q_z[i]
                else:
                    killed = _normal_passes(q_z[i], q_u[i], bkey)
                if killed:
                    break
            if killed:
                chain_hits += 1
                n_dead += 1
                continue
        # the in-flight batches: known end; success redrawn per unfinished attempt
        # as Bernoulli(p) (key: batch 0 of the node) unless one already succeeded
        nq = 0
        for q in range(inf_node.shape[0]):
            v = inf_node[q]
            sq = inf_already[q]
            if not sq:
                pv = p[v, inf_model[q]]
                ikey = _batch_key(sim_key, v, 0)
                for a in range(inf_nrem[q]):
                    if uniform(ikey, a) < pv:
                        sq = True
                        break
            batch_end[v] = inf_end[q]
            batch_succ[v] = sq
            queue[nq] = v
            nq += 1
        if screening:
            # The chain screen. Before a simulation launches anything, each node's batches are followed in
            # its keys until one succeeds: the candidate's batch 1 on a ready node, the member's batches
            # after it (on a pending node, and on an in-flight node whose batch fails, from batch 1 of its
            # key). A node completes no earlier than its start (its parents' bounds; a batch in flight:
            # its end) plus the first attempt of each of these batches (a lower bound of that latency is
            # enough), the DAG no earlier than that plus ``child_tail``, and each batch charges at least
            # k x its min charge. A bound past the cut at the charges counted so far (the horizon, or
            # the staircase's: no cell the pair can still change) is a failure whatever else is drawn:
            # only such simulations are skipped, and none of them succeeds.
            dead = False
            cost_c = first_cost
            cut_c = cut
            i_c = i_first
            for i in range(n_ch):
                v = ch_node[i]
                t_c = ch_start[i]
                if t_c < 0.0:  # after its parents
                    t_c = _after_parents(parent_ptr, parent_idx, comp_lb, v)
                if not (ch_kind[i] == CH_INFLIGHT and batch_succ[v]):
                    j_c = ch_model[i]
                    k_c = ch_count[i]
                    cost_0 = cost_c
                    if ch_kind[i] == CH_INFLIGHT:  # its relaunch is not in first_cost
                        cost_c += k_c * min_charge[v, j_c]
                    for b in range(1, CHAIN_BATCHES + 1):
                        if b > 1:
                            j_c = mem_model
                            k_c = mem_k
                            cost_c += mem_k * min_charge[v, mem_model]
                        bkey = _batch_key(sim_key, v, b)
                        kr = v * m + j_c
                        lo = row_ptr[kr]
                        hi = row_ptr[kr + 1]
                        ok = False
                        if hi > lo:
                            t_c += row_lat[_row_of(bkey, lo, hi)]
                            for a in range(k_c):
                                if row_succ[_row_of(bkey + uint64(a) * GOLDEN, lo, hi)]:
                                    ok = True
                                    break
                        else:
                            t_c += _latency_lower(lat_kind[v, j_c], lat_c0[v, j_c], lat_c1[v, j_c], bkey)
                            for a in range(k_c):
                                if uniform(bkey + uint64(a) * GOLDEN, 0) < p[v, j_c]:
                                    ok = True
                                    break
                        if ok:
                            break
                    if cost_c > cost_0:
                        i_c = _at_least_near(stair_b, cost_c, i_c)
                        cut_c = -np.inf if i_c >= n_stair else min(horizon, stair_h[i_c, level]) * CUT_WIDEN + 1e-9
                comp_lb[v] = t_c
                if t_c + child_tail[v, mem_model] > cut_c:
                    dead = True
                    break
            if dead:
                chain_hits += 1
                n_dead += 1
            else:
                surv[n_surv] = s_idx
                n_surv += 1
            continue
        n_completed = n_completed0  # the simulation's own state (not read by the screen above)
        for v in range(n):
            completed[v] = completed0[v]
            parents_done[v] = parents_done0[v]
            batch_no[v] = 1
            extra[v] = 0.0
        t = 0.0
        budget_left = budget
        spent = 0.0  # what the launches charged (recorded for the surface)
        hint_b = 0  # the staircase searches' last answers in this simulation (their guesses)
        hint_f = n_stair
        need = need0  # least cost of the first batches of the nodes not launched yet
        steps = 0
        first = True  # the candidate action (atomic launch over every ready node), then the member's
        n_new = R
        n_wait = 0  # live rules: nodes whose launch waits for a batch in flight (new_ready[:n_wait])
        while True:
            if first or (n_completed < n and t < horizon and n_new > 0):
                # a decision: the candidate's batches, later (mem_model, mem_k) on every node that
                # became ready (the failed node, or children just unlocked), atomic launch; under the
                # live rules (simulator.engine.live_rules) admitted on expected costs, samples capped at
                # their reservations, no draw ending the simulation
                alive = True
                expected = 0.0
                for r in range(n_new):
                    if first:
                        sel_u[r] = ready[r]
                        sel_j[r] = act_model[r]
                        sel_k[r] = act_count[r]
                    else:
                        sel_u[r] = new_ready[r]
                        sel_j[r] = mem_model
                        sel_k[r] = mem_k
                        if not available[sel_u[r], mem_model]:
                            alive = False
                            break
                    expected += sel_k[r] * kappa[sel_u[r], sel_j[r]]
                if not alive:
                    break
                launch = True
                if live:
                    what = atomic_admission(expected, budget_left, nq)
                    if what == END:
                        break
                    if what == WAIT:  # the nodes wait for the next batch end (new_ready[:n_wait])
                        launch = False
                        for r in range(n_new):
                            new_ready[r] = sel_u[r]
                        n_wait = n_new
                room_t = horizon - t
                if screen:
                    # A latency beyond a node's time left ends the simulation, whichever check would
                    # have ended it first: look for one cheaply before drawing the batches. Each node's
                    # time left is the loop's below, or larger where the costs before it depend on draws
                    # (rows or latency charges: the last one known is kept, room only shrinks). An
                    # attempt whose first normal uniform reaches :func:`fits_surely_threshold` certainly
                    # fits; only the others are drawn in full.
                    room_s = room_t
                    cost_s = 0.0  # the launch's charges before node r, while they are draw-free
                    need_s = need
                    known = True
                    for r in range(n_new):
                        u = sel_u[r]
                        j = sel_j[r]
                        k = sel_k[r]
                        kr = u * m + j
                        param = row_ptr[kr + 1] == row_ptr[kr]
                        if stair and known:  # _stair_caps' horizon, at a cost never above the loop's
                            i_s = _at_least_near(stair_b, (spent + cost_s + need_s) * (1.0 - SCREEN_MARGIN), hint_b)
                            cap_h = stair_h[i_s, level] if i_s < stair_b.shape[0] else -np.inf
                            if cap_h - t < room_s:
                                room_s = cap_h - t
                        if not room_s >= 1e-3:
                            break  # the loop's own checks end it
                        kind = lat_kind[u, j]
                        if param and room_s < np.inf and (kind == LAT_LOGNORMAL or kind == LAT_GAUSSIAN):
                            if first and thr_room[r] == room_s:  # the same for most simulations of the pair
                                thr = thr_val[r]
                            else:
                                thr = fits_surely_threshold(kind, lat_c0[u, j], lat_c1[u, j], room_s, np.log(room_s))
                                if first:
                                    thr_room[r] = room_s
                                    thr_val[r] = thr
                            bkey = _batch_key(sim_key, u, batch_no[u])
                            for a in range(k):
                                akey = bkey + uint64(a) * GOLDEN
                                if uniform(akey, 1) >= thr:
                                    continue
                                if _latency(kind, lat_c0[u, j], lat_c1[u, j], akey) > room_s:
                                    alive = False
                                    break
                            if not alive:
                                break
                        if not param or cil:
                            known = False
                        else:
                            cb_s = 0.0
                            for _a in range(k):  # the loop's sum, in its order
                                cb_s += tmpl_charge[u, j]
                            cost_s += cb_s
                        if prune and batch_no[u] == 1 and not busy[u]:
                            need_s -= mem_k * min_charge[u, mem_model]
                    if not alive:
                        break
                cost = 0.0  # what the launch takes from the budget left (live: its reservations)
                charged = 0.0  # what it charges
                for r in range(n_new if launch else 0):
                    u = sel_u[r]
                    j = sel_j[r]
                    k = sel_k[r]
                    res = 0.0
                    room_b = budget_left - cost
                    if stair:  # the surface: only the limits of the cells the pair can still change
                        cap_b, cap_h, hint_b, hint_f = _stair_caps(stair_b, stair_h, level, spent + cost + need,
                                                                   finish_lb, hint_b, hint_f)
                        if cap_b - spent - cost < room_b:
                            room_b = cap_b - spent - cost
                        if cap_h - t < room_t:
                            room_t = cap_h - t
                    if live:
                        res = atomic_reservation(kappa[u, j], expected, budget_left, ceiling[u, j], unit)
                    # draw a batch of k attempts of u with model j (see draw_flat): not feasible when
                    # a latency exceeds room_t or the cost the budget left; rejected before any draw
                    # when even the cheapest, fastest attempts cannot fit. Attempt a uses the key
                    # bkey + a * golden (a Weyl sequence, one mixing round per uniform).
                    elif min_lat[u, j] > room_t or (1 if per_attempt else k) * min_charge[u, j] > room_b:
                        alive = False
                        break
                    bkey = _batch_key(sim_key, u, batch_no[u])
                    kr = u * m + j
                    lo = row_ptr[kr]
                    hi = row_ptr[kr + 1]
                    end = 0.0
                    cb = 0.0
                    sb = False
                    kind = lat_kind[u, j]
                    if screen and not cil and hi == lo and k > 1 and kind != LAT_GAMMA:
                        # the loop below, in a few draws: dead when its charges (fixed: summed in the
                        # loop's order) exceed room_b or its largest latency room_t, whichever attempt
                        # would have shown it first; else the largest latency and any success
                        for _a in range(k):
                            cb += tmpl_charge[u, j]
                        if cb > room_b:
                            alive = False
                        else:
                            end = batch_max_latency(kind, lat_c0[u, j], lat_c1[u, j], k, bkey)
                            if end > room_t:
                                alive = False
                            else:
                                for a in range(k):
                                    if uniform(bkey + uint64(a) * GOLDEN, 0) < p[u, j]:
                                        sb = True
                                        break
                    for a in range(0 if screen and not cil and hi == lo and k > 1 and kind != LAT_GAMMA else k):
                        akey = bkey + uint64(a) * GOLDEN
                        if hi > lo:
                            ri = _row_of(akey, lo, hi)
                            lat = row_lat[ri]
                            sa = row_succ[ri]
                            ch = row_charge[ri]
                        else:
                            sa = uniform(akey, 0) < p[u, j]  # as _parametric, from the precomputed constants
                            lat = _latency(lat_kind[u, j], lat_c0[u, j], lat_c1[u, j], akey)
                            ch = tmpl_charge[u, j]
                        ch = charge_of_draw(cil, ch, lat)
                        if live:  # cut at its cap: charged the cap, failed
                            ch, cut = capped_charge(ch, res)
                            sa = sa and not cut
                        else:
                            if per_attempt and cb + ch > room_b:  # refused: the attempts so far are the batch
                                if a == 0:
                                    alive = False
                                break
                            if lat > room_t:
                                alive = False
                                break
                        cb += ch
                        if cb > room_b and not live:
                            alive = False
                            break
                        if lat > end:
                            end = lat
                        sb = sb or sa
                    if stair and alive and t + end + child_tail[u, mem_model] > finish_lb:
                        finish_lb = t + end + child_tail[u, mem_model]
                    if not alive or (prune and t + end + child_tail[u, mem_model] > horizon):
                        alive = False
                        break
                    if prune and batch_no[u] == 1 and not busy[u]:
                        need -= mem_k * min_charge[u, mem_model]  # first launch of a node counted in need
                    charged += cb
                    if live:  # the batch holds its reservations until it ends
                        extra[u] = k * res - cb
                        cost += k * res
                    else:
                        cost += cb
                    batch_no[u] += 1
                    batch_end[u] = t + end
                    batch_succ[u] = sb
                    queue[nq] = u
                    nq += 1
                if not alive:
                    break
                budget_left -= cost
                spent += charged
                if launch:
                    n_wait = 0
                if prune and budget_left < need:
                    break
                if stair:
                    inside, hint_b = _inside_stair_near(stair_b, stair_h, level, spent + need, finish_lb, hint_b)
                    if not inside:
                        break
                first = False
            if n_completed == n:  # completion first: finishing exactly at D counts (engine.advance)
                wins += 1
                if record:
                    rec_cost[s_idx - s_lo] = spent
                    rec_fin[s_idx - s_lo] = t
                for k in range(K):
                    if cell_b[k] >= spent and cell_h[k] >= t:
                        cell_cnt[k] += 1
                        if cell_cnt[k] - cell_best[k] > slack:
                            slack = cell_cnt[k] - cell_best[k]
                break
            if t >= horizon:
                break
            if nq == 0:
                break
            # the next batch end (simulator.engine.loop.pop_earliest, written out: ties to the lower node)
            best = 0
            for q in range(1, nq):
                uq = queue[q]
                wq = queue[best]
                if batch_end[uq] < batch_end[wq] or (batch_end[uq] == batch_end[wq] and uq < wq):
                    best = q
            v = queue[best]
            if batch_end[v] > horizon:  # the earliest batch ends after the deadline
                break
            queue[best] = queue[nq - 1]
            nq -= 1
            t = batch_end[v]
            steps += 1
            if steps > max_steps:
                break
            n_new = n_wait
            if live:
                budget_left += extra[v]
                extra[v] = 0.0
            if batch_succ[v]:
                completed[v] = True
                n_completed += 1
                for e in range(child_ptr[v], child_ptr[v + 1]):
                    u = child_idx[e]
                    parents_done[u] += 1
                    if parents_done[u] == n_par[u]:
                        new_ready[n_new] = u
                        n_new += 1
            else:
                new_ready[n_new] = v
                n_new += 1
    return wins


def run_pairs(arr, bounds, dec, pair_cand, pair_mem, s_lo, s_hi, out_wins, threads=None, beat_best=False) -> None:
    """Simulations s_lo..s_hi-1 of every listed (candidate, member) pair, over threads.

    The key of a simulation folds into ``dec.key`` the candidate (or
    ``CRN_CANDIDATE``), the member and the sample index, so the result is the
    same for any thread count.

    Parameters
    ----------
    arr : DagArrays
        Planning statistics of the DAG.
    bounds : PlanBounds
        The episode's pruning bounds.
    dec : DecisionState
        The decision.
    pair_cand, pair_mem : int64 (N,)
        Candidate and member index of each pair to evaluate.
    s_lo, s_hi : int
        Simulation indices to run for every pair.
    out_wins : int64 (N,)
        Output: ``out_wins[i]`` = successful simulations of pair i.
    threads : int, optional
        Threads to use (default: numba's thread setting, :func:`simulator.base.threads.thread_count`).
    beat_best : bool
        Only the first strict maximum is wanted (:func:`run_pairs_serial`).
    """

    def chunk(lo: int, hi: int) -> None:
        run_pairs_serial(arr, bounds, dec, pair_cand[lo:hi], pair_mem[lo:hi], s_lo, s_hi, out_wins[lo:hi], beat_best)

    run_chunked(chunk, pair_cand.shape[0], threads)


#: :func:`run_pair` inlined into :func:`run_pairs_serial`'s loop (numba IR inlining; never compiled on its own, so
#: nothing of it is cached). Why: a call of ``run_pair`` unpacks about 35 arrays of its tuples and makes 18
#: scratch views, each an atomic reference-count update in and out, about 1 us a pair; under the live rules,
#: where most pairs stop after a few short simulations (``beat_best``), that was most of a decision (measured on
#: the README's quote: 0.17 of 0.20 s of kernel time). Inlined it is about 0.4 us: 1.9x less kernel time there.
#: The same code, so the same results (the prediction surface calls ``run_pair`` itself, pair by pair).
_run_pair_inline = inlined(run_pair.py_func)

#: run_pair's steps that take arrays and run once per pair or more (the pair checks, the screens' lists and
#: thresholds, the staircase searches)
PER_PAIR_STEPS = ("_pair_fails_surely", "member_need", "candidate_end", "candidate_charge", "inflight_end",
                  "_chain_order", "_chain_items", "_after_parents", "_quick_list", "_quick_thresholds", "_stair_caps",
                  "_inside_stair_near", "_at_least_near", "_first_below_near", "first_at_least")


def with_steps_inlined(fn, steps=PER_PAIR_STEPS):
    """``fn``'s code with the named compiled steps it calls (and they call) replaced by inlined copies.

    The same code object under other global bindings, so one source holds each rule. Where a function runs
    once per simulated pair, a call taking arrays costs an atomic reference-count update per array, in and
    out (about 8% of the surface's CPU); inlined, numba types the steps again in that caller, which costs
    compile time (``simulator.base.jit``). So the surface's copy of :func:`run_pair` (and of its pair checks)
    has them inlined, and the planner's keeps the calls: its cold start does not pay for them.
    """
    bound = dict(fn.__globals__)
    for name in steps:
        if name in fn.__code__.co_names:
            bound[name] = inlined(with_steps_inlined(fn.__globals__[name].py_func, steps))
    copy = types.FunctionType(fn.__code__, bound, fn.__name__ + "_steps_inlined", fn.__defaults__, fn.__closure__)
    copy.__qualname__ = fn.__qualname__ + "_steps_inlined"  # its own entries in numba's cache, not fn's
    return copy


#: :func:`run_pair` with its per-pair steps inlined: the prediction surface's copy (decide_cells_kernel).
#: Compiled on its own (inlining the whole of it into the decide loop measured no faster, and compiled longer).
run_pair_surface = compiled_only(with_steps_inlined(run_pair.py_func))


@njit(cache=True, nogil=True)
def run_pairs_serial(arr, bounds, dec, pair_cand, pair_mem, s_lo, s_hi, out_wins, beat_best):
    """The pairs one after the other on this thread (:func:`run_pairs` runs chunks of them on threads).

    With ``beat_best`` only the first strict maximum of the wins matters
    (the faithful and ``crn`` planners' argmax): a pair stops as soon as it
    cannot beat the best pair before it in this call, and gets -1. Exact: its
    count is at most that best, so it is not the first strict maximum, and the
    maximum's index and count are unchanged. It counts wins only, so it holds
    under every launch rule (the live rules included, where ``dec.prune``'s
    bounds do not); the planner passes it unless its shortcuts are off.
    """
    # the caller's references keep the arguments alive for the call: borrowed, reading their fields and passing
    # them on counts no references (simulator.base.jit.borrowed)
    arr, bounds, dec, pair_cand, pair_mem, out_wins = (borrowed(arr), borrowed(bounds), borrowed(dec),
                                                       borrowed(pair_cand), borrowed(pair_mem), borrowed(out_wins))
    none = np.empty(0, dtype=np.float64)
    no_stair = np.empty((0, 0), dtype=np.float64)
    no_cells = np.empty(0, dtype=np.int64)
    work_i, work_f, work_b = pair_scratch(dec.completed.shape[0])
    best = -1
    # Under the live rules with nothing in flight, a candidate whose launch is not admitted (its expected cost,
    # summed as run_pair sums it, above the budget) ends every simulation at its first step: 0 wins, never a
    # strict maximum once some pair is counted, so with ``beat_best`` it is not run (-1, as a stopped pair).
    end_at_once = beat_best and dec.live and dec.inf_node.shape[0] == 0
    ready, cand_model, cand_count, kappa = dec.ready, dec.cand_model, dec.cand_count, arr.kappa
    for i in range(pair_cand.shape[0]):
        if end_at_once and best >= 0:
            c = pair_cand[i]
            expected = 0.0
            for r in range(ready.shape[0]):
                expected += cand_count[c, r] * kappa[ready[r], cand_model[c, r]]
            if atomic_admission(expected, dec.budget, 0) == END:
                out_wins[i] = -1
                continue
        w = _run_pair_inline(arr, bounds, dec, pair_cand[i], pair_mem[i], s_lo, s_hi, borrowed(none), borrowed(none),
                             best + 1 if beat_best else 0, dec.budget, dec.horizon, borrowed(none), borrowed(no_stair),
                             borrowed(none), borrowed(none), borrowed(no_cells), borrowed(work_i), borrowed(work_f),
                             borrowed(work_b), START_UNKNOWN)
        out_wins[i] = w
        if w > best:
            best = w

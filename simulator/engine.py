"""The compiled episode engine: state, attempt draws, launches and the event loop.

Semantics are those of ``simulator.md``. One queue entry per batch: a node
has at most one batch in flight, whose end time is the max of its attempts'
latencies and whose success is the OR of their draws, so the cost of an
episode grows with the number of batches, not of attempts. The queue is the
compact list of in-flight nodes (``inflight_list``); popping scans it for the
earliest end time (ties to the lower node position).

Every function here is ``@njit(cache=True, nogil=True)`` and works on
:class:`~simulator.arrays.DagArrays` plus an :class:`EpisodeState` of flat
arrays, so the same code serves the all-compiled baseline loop
(``baselines.py``), the Python policy driver (``episode.py``) and tests.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .costs import charge_of_draw
from .rng import STREAM_ATTEMPT, fold, make_key, normal, randint, uniform
from .rng import gamma as gamma_draw

# termination reasons (index into REASONS)
COMPLETED, BUDGET_EXHAUSTED, DEADLINE_EXHAUSTED, STALLED, RUNNING = 0, 1, 2, 3, -1
REASONS = ("completed", "budget_exhausted", "deadline_exhausted", "stalled")

# scalar slots of EpisodeState.scal
T, BUDGET_LEFT, DEADLINE, BUDGET = 0, 1, 2, 3
# integer slots of EpisodeState.cnt
N_COMPLETED, N_INFLIGHT, PLANNER_CALLS, ROLLOUTS, REASON, DECISIONS = 0, 1, 2, 3, 4, 5

# advance() results
NEED_DECISION_IDLE, NEED_DECISION_EVENT, ENDED = 0, 1, 2


class EpisodeState(NamedTuple):
    """Mutable state of one episode (all flat arrays; see ``simulator.md``)."""

    scal: np.ndarray  # float64 [t, b, D, B]
    cnt: np.ndarray  # int64 [completed, in-flight batches, planner calls, rollouts, reason, decisions]
    key: np.ndarray  # uint64 [base key of (seed, DAG, trial, attempt stream)]
    completed: np.ndarray  # bool (n,)
    parents_done: np.ndarray  # int64 (n,)
    inflight: np.ndarray  # bool (n,)
    inflight_list: np.ndarray  # int64 (n,), first cnt[N_INFLIGHT] entries
    batch_end: np.ndarray  # float64 (n,)
    batch_succ: np.ndarray  # bool (n,)
    batch_nsucc: np.ndarray  # int64 (n,)
    batch_count: np.ndarray  # int64 (n,)
    batch_model: np.ndarray  # int64 (n,)
    num_started: np.ndarray  # int64 (n,)
    num_finished: np.ndarray  # int64 (n,)
    num_success: np.ndarray  # int64 (n,)
    node_cost: np.ndarray  # float64 (n,)
    attempt_no: np.ndarray  # int64 (n*m,) attempts drawn so far per (node, model): the key counter
    dispatched: np.ndarray  # bool (n,) static baselines: node already dispatched once


@njit(cache=True, nogil=True)
def new_state(n, m, budget, deadline, seed, dag, trial):
    """Fresh state at t = 0 with roots unlocked."""
    scal = np.empty(4)
    scal[T] = 0.0
    scal[BUDGET_LEFT] = budget
    scal[DEADLINE] = deadline
    scal[BUDGET] = budget
    cnt = np.zeros(6, dtype=np.int64)
    cnt[REASON] = RUNNING
    key = np.empty(1, dtype=np.uint64)
    key[0] = make_key(seed, dag, trial, STREAM_ATTEMPT, 0, 0, 0)
    return EpisodeState(
        scal,
        cnt,
        key,
        np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64),
        np.zeros(n),
        np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.zeros(n),
        np.zeros(n * m, dtype=np.int64),
        np.zeros(n, dtype=np.bool_),
    )


# ---------------------------------------------------------------------------
# draws
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def sample_latency(dist, mean, std, key, j):
    """Parametric latency with the given mean/std, floored at 1e-3 (uniforms j.. of key)."""
    if std <= 0.0 or mean <= 0.0:
        return max(mean, 1e-3)
    if dist == 0:  # lognormal, moment-matched
        s2 = np.log(1.0 + (std / mean) ** 2)
        x = np.exp(np.log(mean) - 0.5 * s2 + np.sqrt(s2) * normal(key, j))
    elif dist == 1:  # gamma
        shape = (mean / std) ** 2
        x = gamma_draw(key, j, shape) * (std * std / mean)
    else:  # gaussian
        x = mean + std * normal(key, j)
    return max(x, 1e-3)


@njit(cache=True, nogil=True)
def draw_attempt(arr, v, j, key):
    """One attempt of node v with model j from ``key``: (latency, success, charged cost).

    With empirical rows, latency, success and cost come from the same row
    (uniform with replacement); otherwise from the template (parametric).
    """
    k = v * arr.m + j
    lo = arr.row_ptr[k]
    hi = arr.row_ptr[k + 1]
    if hi > lo:
        r = lo + randint(key, 0, hi - lo)
        lat = arr.row_lat[r]
        succ = arr.row_succ[r]
        charge = arr.row_charge[r]
    else:
        succ = uniform(key, 0) < arr.p[v, j]
        lat = sample_latency(arr.lat_dist, arr.lat_mean[v, j], arr.lat_std[v, j], key, 1)
        charge = arr.tmpl_charge[v, j]
    return lat, succ, charge_of_draw(arr.charge_is_latency, charge, lat)


@njit(cache=True, nogil=True, inline="always")
def node_model_key(st, v, j):
    """Key of (run seed, DAG, trial, node v, model j); fold in the attempt index next."""
    return fold(fold(st.key[0], v), j)


# ---------------------------------------------------------------------------
# state helpers
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def is_ready(arr, st, v):
    """Unlocked (all parents completed), not completed, nothing in flight."""
    indeg = arr.parent_ptr[v + 1] - arr.parent_ptr[v]
    return (not st.completed[v]) and (not st.inflight[v]) and st.parents_done[v] == indeg


@njit(cache=True, nogil=True)
def ready_nodes(arr, st, out):
    """Fill ``out`` with ready node positions in pool order; returns their count."""
    c = 0
    for v in range(arr.n):
        if is_ready(arr, st, v):
            out[c] = v
            c += 1
    return c


@njit(cache=True, nogil=True)
def _start_batch(st, v, j):
    st.inflight[v] = True
    st.batch_end[v] = st.scal[T]
    st.batch_succ[v] = False
    st.batch_nsucc[v] = 0
    st.batch_count[v] = 0
    st.batch_model[v] = j


@njit(cache=True, nogil=True)
def _add_attempt(arr, st, v, j, lat, succ, charge):
    st.scal[BUDGET_LEFT] -= charge
    st.node_cost[v] += charge
    st.num_started[v] += 1
    st.attempt_no[v * arr.m + j] += 1
    st.cnt[ROLLOUTS] += 1
    end = st.scal[T] + lat
    if end > st.batch_end[v]:
        st.batch_end[v] = end
    if succ:
        st.batch_succ[v] = True
        st.batch_nsucc[v] += 1
    st.batch_count[v] += 1


@njit(cache=True, nogil=True)
def _enqueue(st, v):
    st.inflight_list[st.cnt[N_INFLIGHT]] = v
    st.cnt[N_INFLIGHT] += 1


@njit(cache=True, nogil=True)
def launch_per_attempt(arr, st, req_model, req_count, cap, order_buf):
    """Per-attempt launch (baselines) of the requests ``req_*`` (count 0 = none).

    Nodes are served in decreasing requested count, ties to the higher node
    id. Each attempt is drawn, then refused (nothing charged, the node's
    remaining attempts skipped) if it exceeds the remaining budget or the
    node's cap ``cap[v]`` on its cumulative cost.
    """
    c = 0
    for v in range(arr.n):
        if req_count[v] > 0 and is_ready(arr, st, v):
            # insertion sort: count desc, node id desc
            pos = c
            while pos > 0:
                u = order_buf[pos - 1]
                if req_count[u] > req_count[v] or (
                    req_count[u] == req_count[v] and arr.node_ids[u] > arr.node_ids[v]
                ):
                    break
                order_buf[pos] = u
                pos -= 1
            order_buf[pos] = v
            c += 1
    for q in range(c):
        v = order_buf[q]
        j = req_model[v]
        if j < 0 or not arr.available[v, j]:
            continue
        base = node_model_key(st, v, j)
        for _ in range(req_count[v]):
            lat, succ, charge = draw_attempt(arr, v, j, fold(base, st.attempt_no[v * arr.m + j]))
            if charge > st.scal[BUDGET_LEFT] or st.node_cost[v] + charge > cap[v]:
                break
            if st.batch_count[v] == 0 and not st.inflight[v]:
                _start_batch(st, v, j)
            _add_attempt(arr, st, v, j, lat, succ, charge)
        if st.inflight[v]:
            _enqueue(st, v)


@njit(cache=True, nogil=True)
def launch_atomic(arr, st, ready, n_ready, act_model, act_count, lat_out, succ_out):
    """Atomic launch (MCPP): every ready node must get a count >= 1.

    All attempts are drawn first; if the largest latency exceeds D - t the
    episode ends ``deadline_exhausted`` at t = D, else if the summed cost
    exceeds b it ends ``budget_exhausted``; else everything is charged and
    scheduled. The drawn latencies and successes are written in launch order
    to ``lat_out``/``succ_out`` (capacity = total count) for the planner's view.
    Returns True when the episode ended.
    """
    total = 0
    for q in range(n_ready):
        v = ready[q]
        j = act_model[v]
        if act_count[v] < 1 or j < 0 or not arr.available[v, j]:
            st.cnt[REASON] = STALLED
            return True
        total += act_count[v]
    charges = np.empty(total)
    i = 0
    max_lat = 0.0
    cost = 0.0
    for q in range(n_ready):
        v = ready[q]
        j = act_model[v]
        base = node_model_key(st, v, j)
        a0 = st.attempt_no[v * arr.m + j]
        for a in range(act_count[v]):
            lat, succ, charge = draw_attempt(arr, v, j, fold(base, a0 + a))
            lat_out[i] = lat
            succ_out[i] = succ
            charges[i] = charge
            cost += charge
            if lat > max_lat:
                max_lat = lat
            i += 1
    if max_lat > st.scal[DEADLINE] - st.scal[T]:
        st.scal[T] = st.scal[DEADLINE]
        st.cnt[REASON] = DEADLINE_EXHAUSTED
        return True
    if cost > st.scal[BUDGET_LEFT]:
        st.cnt[REASON] = BUDGET_EXHAUSTED
        return True
    i = 0
    for q in range(n_ready):
        v = ready[q]
        j = act_model[v]
        _start_batch(st, v, j)
        for _ in range(act_count[v]):
            _add_attempt(arr, st, v, j, lat_out[i], succ_out[i], charges[i])
            i += 1
        _enqueue(st, v)
    return False


@njit(cache=True, nogil=True)
def _finish_batch(arr, st, v):
    st.inflight[v] = False
    st.num_finished[v] += st.batch_count[v]
    st.num_success[v] += st.batch_nsucc[v]
    if st.batch_succ[v]:
        st.completed[v] = True
        st.cnt[N_COMPLETED] += 1
        for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
            st.parents_done[arr.child_idx[e]] += 1
    st.batch_count[v] = 0


@njit(cache=True, nogil=True)
def advance(arr, st):
    """Run the event loop until the policy must decide or the episode ends.

    Returns ``NEED_DECISION_IDLE`` (nothing in flight: step 2 of the loop),
    ``NEED_DECISION_EVENT`` (a batch just ended: step 4) or ``ENDED``.
    """
    while True:
        if st.cnt[REASON] != RUNNING:
            return ENDED
        if st.scal[T] >= st.scal[DEADLINE]:
            st.cnt[REASON] = DEADLINE_EXHAUSTED
            return ENDED
        if st.cnt[N_COMPLETED] == arr.n:
            st.cnt[REASON] = COMPLETED
            return ENDED
        nf = st.cnt[N_INFLIGHT]
        if nf == 0:
            return NEED_DECISION_IDLE
        best = 0
        for q in range(1, nf):
            u = st.inflight_list[q]
            w = st.inflight_list[best]
            if st.batch_end[u] < st.batch_end[w] or (st.batch_end[u] == st.batch_end[w] and u < w):
                best = q
        v = st.inflight_list[best]
        if st.batch_end[v] > st.scal[DEADLINE]:
            st.scal[T] = st.scal[DEADLINE]
            st.cnt[REASON] = DEADLINE_EXHAUSTED
            return ENDED
        st.inflight_list[best] = st.inflight_list[nf - 1]
        st.cnt[N_INFLIGHT] = nf - 1
        st.scal[T] = st.batch_end[v]
        _finish_batch(arr, st, v)
        if st.cnt[N_COMPLETED] < arr.n and st.scal[T] < st.scal[DEADLINE]:
            return NEED_DECISION_EVENT


@njit(cache=True, nogil=True)
def no_progress_reason(arr, st, model_mask, use_legacy, cap):
    """Why an idle episode cannot go on: deadline, budget (no affordable model) or stalled."""
    if st.scal[T] >= st.scal[DEADLINE]:
        return DEADLINE_EXHAUSTED
    for v in range(arr.n):
        if not is_ready(arr, st, v):
            continue
        room = min(st.scal[BUDGET_LEFT], cap[v] - st.node_cost[v])
        for j in range(arr.m):
            allowed = (j == arr.legacy[v]) if use_legacy else model_mask[j]
            if allowed and arr.available[v, j] and arr.kappa[v, j] <= room:
                return STALLED
    return BUDGET_EXHAUSTED


@njit(cache=True, nogil=True)
def total_cost(st):
    return st.scal[BUDGET] - st.scal[BUDGET_LEFT]

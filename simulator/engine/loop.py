"""The compiled episode engine: state, attempt draws, launches and the event loop.

Semantics are those of ``docs/simulator.md``. One queue entry per batch: a node
has at most one batch in flight, whose end time is the max of its attempts'
latencies and whose success is the OR of their draws, so the cost of an
episode grows with the number of batches, not of attempts. The queue is the
compact list of in-flight nodes; popping scans it for the earliest end time
(ties to the lower node position, :func:`pop_earliest`, shared with MCPP's kernel).

Layout for speed: the state is six flat arrays (:class:`EpisodeState`) and
the low-level functions take unpacked arrays, because every field access on a
numba tuple costs a reference-count update. Hot loops (baselines, MCPP's
kernel) unpack once and call them, so those other modules call are public:
a step is named after its tuple-taking wrapper at the bottom with the suffix
``_arrays`` (:func:`advance_arrays` for :func:`advance`), beside
:func:`node_is_ready`, :func:`pop_earliest` and :func:`sample_latency_compiled`;
the steps only this module uses are private (prefixed ``_``). The Python
policy driver uses the tuple-taking wrappers. The low-level functions are
``compiled_only``: compiled code calls them, Python code cannot
(:mod:`simulator.base.jit`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.base.jit import compiled_only, njit
from simulator.base.rng import STREAM_ATTEMPT, fold, make_key, normal, randint, uniform
from simulator.base.rng import gamma as gamma_draw
from simulator.costs.arrays import (
    ROW_CHARGE,
    ROW_LAT,
    ROW_SUCC,
    TMPL_CHARGE,
    TMPL_KAPPA,
    TMPL_LAT_MEAN,
    TMPL_LAT_STD,
    TMPL_P,
)
from simulator.costs.charges import charge_of_draw

# termination reasons (index into REASONS); event_limit: the hard bound on events was reached
COMPLETED, BUDGET_EXHAUSTED, DEADLINE_EXHAUSTED, STALLED, EVENT_LIMIT, RUNNING = 0, 1, 2, 3, 4, -1
from simulator.engine.reasons import REASONS  # noqa: E402, F401 (one tuple: the reports read it without numba)

#: Hard bound on the batch ends (events) of one episode. Ordinary episodes have
#: at most a few thousand; only a node that can succeed but almost never does,
#: with attempts that cost (almost) nothing, comes near it. Reaching it ends the
#: episode ``event_limit`` instead of spinning (docs/semantics.md).
MAX_EVENTS = 1_000_000

# EpisodeState.scal slots
T, BUDGET_LEFT, DEADLINE, BUDGET = 0, 1, 2, 3
# EpisodeState.cnt slots
N_COMPLETED, N_INFLIGHT, PLANNER_CALLS, ROLLOUTS, REASON, DECISIONS, EVENTS, EVENT_CAP = 0, 1, 2, 3, 4, 5, 6, 7
N_CNT = 8
# EpisodeState.ni rows (per node)
COMPLETED_, PARENTS_DONE, INFLIGHT, QUEUE, BATCH_SUCC, BATCH_NSUCC = 0, 1, 2, 3, 4, 5
BATCH_COUNT, BATCH_MODEL, STARTED, FINISHED, NSUCCESS, DISPATCHED = 6, 7, 8, 9, 10, 11
N_INT_ROWS = 12
# EpisodeState.nf rows (per node)
BATCH_END, NODE_COST = 0, 1

# advance() results
NEED_DECISION_IDLE, NEED_DECISION_EVENT, ENDED = 0, 1, 2


class EpisodeState(NamedTuple):
    """Mutable state of one episode (``docs/simulator.md``, "State")."""

    scal: np.ndarray  # float64 [t, b, D, B]
    cnt: np.ndarray  # int64 [completed, in-flight batches, planner calls, rollouts, reason, decisions,
    #                   events (batch ends), event cap]
    key: np.ndarray  # uint64 [key of (run seed, DAG, trial, attempt stream)]
    ni: np.ndarray  # int64 (12, n): per-node integer state, rows named above
    nf: np.ndarray  # float64 (2, n): batch end time, cumulative node cost
    attempt_no: np.ndarray  # int64 (n*m,): attempts drawn per (node, model) = key counter

    @property
    def completed(self) -> np.ndarray:
        return self.ni[COMPLETED_] > 0

    @property
    def num_started(self) -> np.ndarray:
        return self.ni[STARTED]

    @property
    def num_finished(self) -> np.ndarray:
        return self.ni[FINISHED]

    @property
    def num_success(self) -> np.ndarray:
        return self.ni[NSUCCESS]

    @property
    def node_cost(self) -> np.ndarray:
        return self.nf[NODE_COST]

    @property
    def inflight_list(self) -> np.ndarray:
        return self.ni[QUEUE]

    @property
    def batch_model(self) -> np.ndarray:
        return self.ni[BATCH_MODEL]


@njit(cache=True, nogil=True)
def new_state(n, m, budget, deadline, seed, dag, trial):
    """Fresh state at t = 0 (roots are unlocked: no parents to wait for).

    Allocated in compiled code, so that the trial loops' arrays are their own
    (LLVM then knows they do not alias: the baseline loop measured 10-20%
    slower on arrays passed in from Python), with ``np.empty`` only (one
    compiled allocation per dtype and rank), and filled by :func:`reset_state`.
    """
    st = EpisodeState(
        np.empty(4, dtype=np.float64),
        np.empty(N_CNT, dtype=np.int64),
        np.empty(1, dtype=np.uint64),
        np.empty((N_INT_ROWS, n), dtype=np.int64),
        np.empty((2, n), dtype=np.float64),
        np.empty(n * m, dtype=np.int64),
    )
    reset_state(st.scal, st.cnt, st.key, st.ni, st.nf, st.attempt_no, budget, deadline, seed, dag, trial)
    return st


@njit(cache=True, nogil=True)
def reset_state(scal, cnt, key, ni, nf, attempt_no, budget, deadline, seed, dag, trial):
    """Reuse a state's arrays for a new episode (no allocation in trial loops)."""
    scal[T] = 0.0
    scal[BUDGET_LEFT] = budget
    scal[DEADLINE] = deadline
    scal[BUDGET] = budget
    cnt[:] = 0
    cnt[REASON] = RUNNING
    cnt[EVENT_CAP] = MAX_EVENTS
    key[0] = make_key(seed, dag, trial, STREAM_ATTEMPT, 0, 0, 0)
    ni[:, :] = 0
    nf[:, :] = 0.0
    attempt_no[:] = 0


# ---------------------------------------------------------------------------
# draws
# ---------------------------------------------------------------------------


#: Limits of the coefficient of variation std/mean of a parametric latency (docs/semantics.md,
#: "Parametric latency"). Below CV_MIN the draw is the mean (gamma's shape (mean/std)^2 would
#: overflow to infinity and its sampler never accept); above CV_MAX std is taken as CV_MAX x mean
#: (std^2/mean^2 would overflow, giving NaN or a division by zero). No measured latency comes
#: near either: draws within the limits keep their exact bits.
CV_MIN = 1e-100
CV_MAX = 1e100


@compiled_only
def sample_latency_compiled(dist, mean, std, key, j):
    """Parametric latency with the given mean/std, floored at 1e-3 (uniforms j.. of key).

    Finite for every finite ``mean, std >= 0`` a pool may hold (both at most
    ``pool.MAX_POOL_VALUE``): the ratio std/mean is computed first and kept
    within [CV_MIN, CV_MAX], so no square overflows whatever the two values.
    """
    if std <= 0.0 or mean <= 0.0:
        return max(mean, 1e-3)
    cv = std / mean
    if cv < CV_MIN:
        return max(mean, 1e-3)
    if cv > CV_MAX:
        std = mean * CV_MAX
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
def sample_latency(dist, mean, std, key, j):
    """:func:`sample_latency_compiled`, callable from Python (compiled code calls that one: no wrapper to build)."""
    return sample_latency_compiled(dist, mean, std, key, j)


@compiled_only
def _draw(row_ptr, rows, tmpl, m, dist, cil, v, j, key):
    """One attempt of node v with model j from ``key``: (latency, success, charged cost).

    With empirical rows, latency, success and cost come from the same row
    (uniform with replacement); otherwise from the template (parametric).
    """
    k = v * m + j
    lo = row_ptr[k]
    hi = row_ptr[k + 1]
    if hi > lo:
        r = lo + randint(key, 0, hi - lo)
        lat = rows[ROW_LAT, r]
        succ = rows[ROW_SUCC, r] > 0.5
        charge = rows[ROW_CHARGE, r]
    else:
        succ = uniform(key, 0) < tmpl[TMPL_P, v, j]
        lat = sample_latency_compiled(dist, tmpl[TMPL_LAT_MEAN, v, j], tmpl[TMPL_LAT_STD, v, j], key, 1)
        charge = tmpl[TMPL_CHARGE, v, j]
    return lat, succ, charge_of_draw(cil, charge, lat)


@njit(cache=True, nogil=True, inline="always")
def node_model_key(base_key, v, j):
    """Key of (run seed, DAG, trial, node v, model j); fold in the attempt index next."""
    return fold(fold(base_key, v), j)


# ---------------------------------------------------------------------------
# low-level state operations (unpacked arrays)
# ---------------------------------------------------------------------------


@compiled_only
def node_is_ready(parent_ptr, ni, v):
    """Unlocked (all parents completed), not completed, nothing in flight."""
    return (
        ni[COMPLETED_, v] == 0
        and ni[INFLIGHT, v] == 0
        and ni[PARENTS_DONE, v] == parent_ptr[v + 1] - parent_ptr[v]
    )


@compiled_only
def _start_batch(scal, ni, nf, v, j):
    ni[INFLIGHT, v] = 1
    nf[BATCH_END, v] = scal[T]
    ni[BATCH_SUCC, v] = 0
    ni[BATCH_NSUCC, v] = 0
    ni[BATCH_COUNT, v] = 0
    ni[BATCH_MODEL, v] = j


@compiled_only
def _add_attempt(scal, cnt, ni, nf, attempt_no, m, v, j, lat, succ, charge):
    scal[BUDGET_LEFT] -= charge
    nf[NODE_COST, v] += charge
    ni[STARTED, v] += 1
    attempt_no[v * m + j] += 1
    cnt[ROLLOUTS] += 1
    end = scal[T] + lat
    if end > nf[BATCH_END, v]:
        nf[BATCH_END, v] = end
    if succ:
        ni[BATCH_SUCC, v] = 1
        ni[BATCH_NSUCC, v] += 1
    ni[BATCH_COUNT, v] += 1


@compiled_only
def _enqueue(cnt, ni, v):
    ni[QUEUE, cnt[N_INFLIGHT]] = v
    cnt[N_INFLIGHT] += 1


@compiled_only
def launch_per_attempt_arrays(
    n, m, node_ids, available, row_ptr, rows, tmpl, dist, cil,
    scal, cnt, key, ni, nf, attempt_no, req_model, req_count, cap, order_buf,
):  # fmt: skip
    """Per-attempt launch (baselines) of the requests ``req_*`` (count 0 = none).

    Nodes are served in decreasing requested count, ties to the higher node
    id. Each attempt is drawn, then refused (nothing charged, the node's
    remaining attempts skipped) if it exceeds the remaining budget or the
    node's cap ``cap[v]`` on its cumulative cost. A refused draw is consumed
    (its attempt number is used up), as in the published code, whose every
    launch attempt draws from the random stream: the node's next attempt,
    at a later decision, is a fresh draw. Requests must be on ready
    nodes only (the caller checks).
    """
    c = 0
    for v in range(n):
        if req_count[v] > 0:
            pos = c  # insertion sort: count desc, node id desc
            while pos > 0:
                u = order_buf[pos - 1]
                if req_count[u] > req_count[v] or (
                    req_count[u] == req_count[v] and node_ids[u] > node_ids[v]
                ):
                    break
                order_buf[pos] = u
                pos -= 1
            order_buf[pos] = v
            c += 1
    for q in range(c):
        v = order_buf[q]
        j = req_model[v]
        if j < 0 or not available[v, j]:
            continue
        base = node_model_key(key[0], v, j)
        for _ in range(req_count[v]):
            lat, succ, charge = _draw(row_ptr, rows, tmpl, m, dist, cil, v, j, fold(base, attempt_no[v * m + j]))
            if charge > scal[BUDGET_LEFT] or nf[NODE_COST, v] + charge > cap[v]:
                attempt_no[v * m + j] += 1  # the refused draw is consumed: the next attempt is a fresh draw
                break
            if ni[INFLIGHT, v] == 0:
                _start_batch(scal, ni, nf, v, j)
            _add_attempt(scal, cnt, ni, nf, attempt_no, m, v, j, lat, succ, charge)
        if ni[INFLIGHT, v] == 1:  # a batch started at this decision (the node was ready)
            _enqueue(cnt, ni, v)


@compiled_only
def _finish_batch(child_ptr, child_idx, cnt, ni, v):
    ni[INFLIGHT, v] = 0
    ni[FINISHED, v] += ni[BATCH_COUNT, v]
    ni[NSUCCESS, v] += ni[BATCH_NSUCC, v]
    if ni[BATCH_SUCC, v]:
        ni[COMPLETED_, v] = 1
        cnt[N_COMPLETED] += 1
        for e in range(child_ptr[v], child_ptr[v + 1]):
            ni[PARENTS_DONE, child_idx[e]] += 1
    ni[BATCH_COUNT, v] = 0


@compiled_only
def pop_earliest(queue, nq, end, limit):
    """Remove from ``queue[:nq]`` the node whose batch ends first (ties to the lower node) and return it.

    The one "next event" rule of the engine and of MCPP's kernel. Returns -1,
    leaving the queue as it is, when that earliest batch ends after ``limit``
    (the deadline). Otherwise the last entry takes the popped one's place and
    the caller shortens the queue by one.

    Parameters
    ----------
    queue : int64 (>= nq,)
        Node positions of the batches in flight, in no particular order.
    nq : int
        Queue length (>= 1).
    end : float64 (n,)
        End time of each node's batch in flight.
    limit : float
        Latest end time that may be popped.

    Returns
    -------
    v : int
        The popped node, or -1.
    """
    best = 0
    for q in range(1, nq):
        u = queue[q]
        w = queue[best]
        if end[u] < end[w] or (end[u] == end[w] and u < w):
            best = q
    v = queue[best]
    if end[v] > limit:
        return -1
    queue[best] = queue[nq - 1]
    return v


@compiled_only
def advance_arrays(n, child_ptr, child_idx, scal, cnt, ni, nf):
    """Run the event loop until the policy must decide or the episode ends.

    Returns ``NEED_DECISION_IDLE`` (nothing in flight: step 2 of the loop),
    ``NEED_DECISION_EVENT`` (a batch just ended: step 4) or ``ENDED``. An
    episode whose ``cnt[EVENT_CAP]``-th batch end leaves it unfinished ends
    ``event_limit``: every loop built on this one (baselines, the Python
    driver) is therefore bounded.
    """
    while True:
        if cnt[REASON] != RUNNING:
            return ENDED
        # completion is checked first: finishing exactly at D meets makespan <= D,
        # the same rule baselines are scored with (docs/semantics.md)
        if cnt[N_COMPLETED] == n:
            cnt[REASON] = COMPLETED
            return ENDED
        if scal[T] >= scal[DEADLINE]:
            cnt[REASON] = DEADLINE_EXHAUSTED
            return ENDED
        nq = cnt[N_INFLIGHT]
        if nq == 0:
            return NEED_DECISION_IDLE
        v = pop_earliest(ni[QUEUE], nq, nf[BATCH_END], scal[DEADLINE])
        if v < 0:  # the earliest batch ends after the deadline
            scal[T] = scal[DEADLINE]
            cnt[REASON] = DEADLINE_EXHAUSTED
            return ENDED
        cnt[N_INFLIGHT] = nq - 1
        scal[T] = nf[BATCH_END, v]
        _finish_batch(child_ptr, child_idx, cnt, ni, v)
        cnt[EVENTS] += 1
        if cnt[N_COMPLETED] < n and scal[T] < scal[DEADLINE]:
            if cnt[EVENTS] >= cnt[EVENT_CAP]:
                cnt[REASON] = EVENT_LIMIT
                return ENDED
            return NEED_DECISION_EVENT


@compiled_only
def no_progress_reason_arrays(
    n, m, parent_ptr, available, tmpl, legacy, scal, ni, nf, model_mask, use_legacy, cap
):  # fmt: skip
    """Why an idle episode cannot go on: deadline, budget (no affordable model) or stalled."""
    if scal[T] >= scal[DEADLINE]:
        return DEADLINE_EXHAUSTED
    for v in range(n):
        if not node_is_ready(parent_ptr, ni, v):
            continue
        room = min(scal[BUDGET_LEFT], cap[v] - nf[NODE_COST, v])
        for j in range(m):
            allowed = (j == legacy[v]) if use_legacy else model_mask[j]
            if allowed and available[v, j] and tmpl[TMPL_KAPPA, v, j] <= room:
                return STALLED
    return BUDGET_EXHAUSTED


@compiled_only
def first_uncompletable_arrays(n, m, available, tmpl, legacy, model_mask, use_legacy):
    """Position of the first node no allowed model can ever complete, or -1.

    A (node, model) can complete the node when the model is available there
    and its success probability (the rows' mean success when it has rows, so
    0 means no successful row) is > 0. Such an episode can never complete, so
    it ends ``stalled`` at once, before anything is spent (docs/semantics.md);
    without this, free attempts of a p = 0 node were retried for ever.
    """
    for v in range(n):
        ok = False
        for j in range(m):
            allowed = (j == legacy[v]) if use_legacy else model_mask[j]
            if allowed and available[v, j] and tmpl[0, v, j] > 0.0:
                ok = True
                break
        if not ok:
            return v
    return -1


# ---------------------------------------------------------------------------
# tuple-taking wrappers (Python driver, tests, planners)
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def draw_attempt(arr, v, j, key):
    """One attempt of node v with model j from ``key`` (see :func:`_draw`)."""
    return _draw(arr.row_ptr, arr.rows, arr.tmpl, arr.m, arr.lat_dist, arr.charge_is_latency, v, j, key)


@njit(cache=True, nogil=True)
def ready_nodes(arr, st, out):
    """Fill ``out`` with ready node positions in pool order; returns their count."""
    c = 0
    for v in range(arr.n):
        if node_is_ready(arr.parent_ptr, st.ni, v):
            out[c] = v
            c += 1
    return c


@njit(cache=True, nogil=True)
def advance(arr, st):
    return advance_arrays(arr.n, arr.child_ptr, arr.child_idx, st.scal, st.cnt, st.ni, st.nf)


@njit(cache=True, nogil=True)
def launch_per_attempt(arr, st, req_model, req_count, cap, order_buf):
    """Per-attempt launch; requests on nodes that are not ready are ignored."""
    for v in range(arr.n):
        if req_count[v] > 0 and not node_is_ready(arr.parent_ptr, st.ni, v):
            req_count[v] = 0
    launch_per_attempt_arrays(
        arr.n, arr.m, arr.node_ids, arr.available, arr.row_ptr, arr.rows, arr.tmpl, arr.lat_dist,
        arr.charge_is_latency, st.scal, st.cnt, st.key, st.ni, st.nf, st.attempt_no,
        req_model, req_count, cap, order_buf,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def no_progress_reason(arr, st, model_mask, use_legacy, cap):
    return no_progress_reason_arrays(
        arr.n, arr.m, arr.parent_ptr, arr.available, arr.tmpl, arr.legacy, st.scal, st.ni, st.nf,
        model_mask, use_legacy, cap,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def first_uncompletable(arr, model_mask, use_legacy):
    return first_uncompletable_arrays(arr.n, arr.m, arr.available, arr.tmpl, arr.legacy, model_mask, use_legacy)


@njit(cache=True, nogil=True)
def draw_launch(arr, key0, attempt_no, ready, n_ready, act_model, act_count, lat_out, succ_out, charge_out):
    """The draws of an atomic launch, in launch order: (largest latency, summed cost).

    Attempt a of ready node v with model j is the draw ``a0 + a`` of (v, j)
    (``a0`` = its attempts so far); latencies, successes and charges go to
    the ``*_out`` arrays. :func:`launch_atomic` checks them against the
    state's limits; the prediction surface against each cell's own.
    """
    m = arr.m
    i = 0
    max_lat = 0.0
    cost = 0.0
    for q in range(n_ready):
        v = ready[q]
        j = act_model[v]
        base = node_model_key(key0, v, j)
        a0 = attempt_no[v * m + j]
        for a in range(act_count[v]):
            lat, succ, charge = draw_attempt(arr, v, j, fold(base, a0 + a))
            lat_out[i] = lat
            succ_out[i] = succ
            charge_out[i] = charge
            cost += charge
            if lat > max_lat:
                max_lat = lat
            i += 1
    return max_lat, cost


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
    scal, cnt, ni, nf, attempt_no = st.scal, st.cnt, st.ni, st.nf, st.attempt_no
    m = arr.m
    total = 0
    for q in range(n_ready):
        v = ready[q]
        j = act_model[v]
        if act_count[v] < 1 or j < 0 or not arr.available[v, j]:
            cnt[REASON] = STALLED
            return True
        total += act_count[v]
    charges = np.empty(total, dtype=np.float64)
    max_lat, cost = draw_launch(arr, st.key[0], attempt_no, ready, n_ready, act_model, act_count, lat_out, succ_out,
                                charges)  # fmt: skip
    if max_lat > scal[DEADLINE] - scal[T]:
        scal[T] = scal[DEADLINE]
        cnt[REASON] = DEADLINE_EXHAUSTED
        return True
    if cost > scal[BUDGET_LEFT]:
        cnt[REASON] = BUDGET_EXHAUSTED
        return True
    i = 0
    for q in range(n_ready):
        v = ready[q]
        j = act_model[v]
        _start_batch(scal, ni, nf, v, j)
        for _ in range(act_count[v]):
            _add_attempt(scal, cnt, ni, nf, attempt_no, m, v, j, lat_out[i], succ_out[i], charges[i])
            i += 1
        _enqueue(cnt, ni, v)
    return False


@njit(cache=True, nogil=True)
def total_cost(st):
    return st.scal[BUDGET] - st.scal[BUDGET_LEFT]


@njit(cache=True, nogil=True)
def add_batch(arr, st, v, j, lats, succs, charges):
    """Start a batch of node v with model j from given draws (the ``live`` rules' launches), charging ``charges``.

    The attempts are numbers ``attempt_no[v, j]``... onwards (the caller drew
    them with those keys); the batch ends at the largest latency and succeeds
    when any ``succs`` is true.
    """
    scal, cnt, ni, nf = st.scal, st.cnt, st.ni, st.nf
    _start_batch(scal, ni, nf, v, j)
    for i in range(lats.shape[0]):
        _add_attempt(scal, cnt, ni, nf, st.attempt_no, arr.m, v, j, lats[i], succs[i], charges[i])
    _enqueue(cnt, ni, v)

"""The 12 baselines of ``policies.md``, with their decision rules compiled into the episode loop.

Sequential-k ("Retry"): every ready node gets k attempts of its legacy model
at every decision. Static dispatch-once: each node gets a budget share
``B_v`` (also a hard cap on its cumulative cost) and ``r_v = max(1,
floor(B_v / kappa_v))`` attempts, once, when it first becomes ready.

Baselines ignore time: they are simulated with D = inf and scored for every
deadline afterwards (:mod:`simulator.scoring`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .arrays import DagArrays
from .engine import (
    ENDED,
    N_INFLIGHT,
    NEED_DECISION_IDLE,
    PLANNER_CALLS,
    REASON,
    ROLLOUTS,
    T,
    advance,
    is_ready,
    launch_per_attempt,
    new_state,
    no_progress_reason,
    total_cost,
)
from .errors import ConfigError
from .rng import STREAM_STATIC, make_key, uniform

SEQUENTIAL_KS = {"sequential": 1, **{f"sequential_{k}": k for k in (2, 4, 8, 16, 32, 64)}}
STATIC_METHODS = (
    "uniform",
    "random",
    "latency_weighted",
    "success_rate_weighted",
    "critical_path_static",
)
BASELINE_METHODS = tuple(SEQUENTIAL_KS) + STATIC_METHODS
SHARE_RANDOM = 1  # index of "random" in STATIC_METHODS: Dirichlet weights drawn per trial
MAX_STATIC_COUNT = 1_000_000  # r_v cap when kappa_v is tiny (documented in docs/semantics.md)


def static_weights(arr: DagArrays, method: str) -> np.ndarray:
    """Unnormalised budget-share weights of a static baseline (legacy model statistics)."""
    n = arr.n
    legacy = arr.legacy
    lat = np.array([arr.lat_mean[v, legacy[v]] for v in range(n)])
    lat = np.where(np.isfinite(lat), lat, 0.0)
    if method in ("uniform", "random"):
        w = np.ones(n)
    elif method == "latency_weighted":
        w = lat
    elif method == "success_rate_weighted":
        w = np.array([1.0 - arr.p[v, legacy[v]] for v in range(n)])
    elif method == "critical_path_static":
        w = np.zeros(n)
        # reverse topological order: children before parents
        order = _topo(arr)
        for v in order[::-1]:
            best = 0.0
            for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
                best = max(best, w[arr.child_idx[e]])
            w[v] = lat[v] + best
    else:
        raise ConfigError(f"unknown static baseline {method!r}")
    if not np.isfinite(w).all() or w.sum() <= 0:
        w = np.ones(n)  # all-zero weights (e.g. every p = 1): fall back to uniform shares
    return w.astype(np.float64)


def _topo(arr: DagArrays) -> list[int]:
    from .pool import topological_order

    return topological_order(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx)


@njit(cache=True, nogil=True)
def _static_plan(arr, weights, random_shares, budget, seed, dag, trial, cap, count):
    """Fill per-node caps ``B_v`` and counts ``r_v`` of a static baseline."""
    n = arr.n
    w = np.empty(n)
    if random_shares:
        key = make_key(seed, dag, trial, STREAM_STATIC, 0, 0, 0)
        for v in range(n):
            w[v] = -np.log(uniform(key, v))  # Exp(1): normalised -> Dirichlet(1, ..., 1)
    else:
        for v in range(n):
            w[v] = weights[v]
    s = w.sum()
    for v in range(n):
        cap[v] = budget * w[v] / s
        kap = arr.kappa[v, arr.legacy[v]]
        r = np.floor(cap[v] / kap) if kap > 0 else MAX_STATIC_COUNT
        if not (r >= 1.0):
            r = 1.0
        if r > MAX_STATIC_COUNT:
            r = MAX_STATIC_COUNT
        count[v] = np.int64(r)


@njit(cache=True, nogil=True)
def run_baseline_episode(arr, st, seq_k, static_count, cap, buf_a, req_model, req_count):
    """Run one baseline episode to its end (state ``st`` fresh). ``seq_k`` = 0 means static."""
    n = arr.n
    mask = np.zeros(arr.m, dtype=np.bool_)
    while True:
        code = advance(arr, st)
        if code == ENDED:
            return
        st.cnt[PLANNER_CALLS] += 1
        for v in range(n):
            req_count[v] = 0
            req_model[v] = arr.legacy[v]
            if is_ready(arr, st, v):
                if seq_k > 0:
                    req_count[v] = seq_k
                elif not st.dispatched[v]:
                    req_count[v] = static_count[v]
                    st.dispatched[v] = True
        launch_per_attempt(arr, st, req_model, req_count, cap, buf_a)
        if code == NEED_DECISION_IDLE and st.cnt[N_INFLIGHT] == 0:
            st.cnt[REASON] = no_progress_reason(arr, st, mask, True, cap)
            return


@njit(cache=True, nogil=True)
def _one_trial(arr, seq_k, share_kind, weights, budget, seed, dag, trial, q, out_f, out_i, node_i, node_c):
    n = arr.n
    cap = np.full(n, np.inf)
    count = np.zeros(n, dtype=np.int64)
    if seq_k == 0:
        _static_plan(arr, weights, share_kind == SHARE_RANDOM, budget, seed, dag, trial, cap, count)
    st = new_state(n, arr.m, budget, np.inf, seed, dag, trial)
    buf = np.empty(n, dtype=np.int64)
    req_model = np.empty(n, dtype=np.int64)
    req_count = np.empty(n, dtype=np.int64)
    run_baseline_episode(arr, st, seq_k, count, cap, buf, req_model, req_count)
    done = 0
    for v in range(n):
        done += st.completed[v]
        node_i[q, v, 0] = st.completed[v]
        node_i[q, v, 1] = st.num_started[v]
        node_i[q, v, 2] = st.num_finished[v]
        node_i[q, v, 3] = st.num_success[v]
        node_c[q, v] = st.node_cost[v]
    out_f[q, 0] = st.scal[T]
    out_f[q, 1] = total_cost(st)
    out_f[q, 2] = done / n
    out_i[q, 0] = st.cnt[REASON]
    out_i[q, 1] = st.cnt[ROLLOUTS]
    out_i[q, 2] = st.cnt[PLANNER_CALLS]


@njit(cache=True, nogil=True)
def run_baseline_trials(arr, seq_k, share_kind, weights, budget, seed, dag, trials, out_f, out_i, node_i, node_c):
    """Simulate ``trials`` (D = inf) serially; outputs per trial row q.

    out_f[q] = (makespan, total_cost, completion_fraction); out_i[q] =
    (reason, total_rollouts, planner_calls); node_i[q, v] = (completed,
    started, finished, successes); node_c[q, v] = node cost.
    """
    for q in range(trials.shape[0]):
        _one_trial(arr, seq_k, share_kind, weights, budget, seed, dag, trials[q], q, out_f, out_i, node_i, node_c)


@njit(cache=True, nogil=True, parallel=True)
def run_baseline_trials_parallel(
    arr, seq_k, share_kind, weights, budget, seed, dag, trials, out_f, out_i, node_i, node_c
):
    """Same as :func:`run_baseline_trials`, trials spread over threads (keyed: same results)."""
    for q in prange(trials.shape[0]):
        _one_trial(arr, seq_k, share_kind, weights, budget, seed, dag, trials[q], q, out_f, out_i, node_i, node_c)


def baseline_params(arr: DagArrays, method: str) -> tuple[int, int, np.ndarray]:
    """(seq_k, share_kind, weights) of a baseline method for the compiled runner."""
    if method in SEQUENTIAL_KS:
        return SEQUENTIAL_KS[method], -1, np.ones(arr.n)
    if method in STATIC_METHODS:
        return 0, STATIC_METHODS.index(method), static_weights(arr, method)
    raise ConfigError(f"unknown baseline {method!r}; choose one of {', '.join(BASELINE_METHODS)}")


def is_finite_budget(budget: float) -> bool:
    return math.isfinite(budget) and budget >= 0

"""The 12 baselines of ``docs/policies.md``, with their decision rules compiled into the episode loop.

Sequential-k ("Retry"): every ready node gets k attempts of its legacy model
at every decision. Static dispatch-once: each node gets a budget share
``B_v`` (also a hard cap on its cumulative cost) and ``r_v = max(1,
floor(B_v / kappa_v))`` attempts, once, when it first becomes ready.

Baselines ignore time: they are simulated with D = inf and scored for every
deadline afterwards (:mod:`simulator.base.scoring`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from simulator.base.errors import ConfigError
from simulator.base.jit import compiled_only, njit
from simulator.base.rng import STREAM_STATIC, make_key, uniform
from simulator.base.threads import run_chunked
from simulator.costs.arrays import DagArrays
from simulator.engine.episode import Policy
from simulator.engine.loop import (
    BUDGET,
    BUDGET_LEFT,
    COMPLETED_,
    DISPATCHED,
    ENDED,
    FINISHED,
    N_INFLIGHT,
    NEED_DECISION_IDLE,
    NODE_COST,
    NSUCCESS,
    PLANNER_CALLS,
    REASON,
    ROLLOUTS,
    STALLED,
    STARTED,
    T,
    advance_arrays,
    first_uncompletable_arrays,
    launch_per_attempt_arrays,
    new_state,
    no_progress_reason_arrays,
    node_is_ready,
    reset_state,
)
from simulator.engine.registry import COMPILED_BASELINE, PER_ATTEMPT, SCORED, MethodSpec
from simulator.pools.graph import topological_order

SEQUENTIAL_KS = {"sequential": 1, **{f"sequential_{k}": k for k in (2, 4, 8, 16, 32, 64)}}
STATIC_METHODS = (
    "uniform",
    "random",
    "latency_weighted",
    "success_rate_weighted",
    "critical_path_static",
)
BASELINE_METHODS = tuple(SEQUENTIAL_KS) + STATIC_METHODS
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


class BaselineRule(NamedTuple):
    """The compiled form of a baseline's decision rule on one DAG (what the episode loop reads).

    ``seq_k > 0``: Sequential-k, k attempts of the legacy model for every
    ready node at every decision. ``seq_k == 0``: static dispatch-once with
    budget shares proportional to ``weights`` (or, with ``random_shares``,
    to Dirichlet(1, ..., 1) weights drawn per trial).
    """

    seq_k: int
    random_shares: bool
    weights: np.ndarray  # float64 (n,)


def sequential_rule(k: int, arr: DagArrays) -> BaselineRule:
    """Sequential-k ("Retry" for k = 1)."""
    return BaselineRule(int(k), False, np.ones(arr.n))


def static_rule(method: str, arr: DagArrays) -> BaselineRule:
    """A static dispatch-once baseline (shares from :func:`static_weights`)."""
    return BaselineRule(0, method == "random", static_weights(arr, method))


def _topo(arr: DagArrays) -> list[int]:
    return topological_order(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx)


@compiled_only
def _static_plan(arr, weights, random_shares, budget, seed, dag, trial, cap, count, w):
    """Fill per-node caps ``B_v`` and counts ``r_v`` of a static baseline (``w``: scratch of n floats)."""
    n = arr.n
    if random_shares:
        key = make_key(seed, dag, trial, STREAM_STATIC, 0, 0, 0)
        for v in range(n):
            w[v] = -np.log(uniform(key, v))  # Exp(1): normalised -> Dirichlet(1, ..., 1)
    else:
        for v in range(n):
            w[v] = weights[v]
    s = 0.0
    for v in range(n):  # in order from 0.0, as numpy-in-numba's w.sum()
        s += w[v]
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
def _static_plan_entry(arr, weights, random_shares, budget, seed, dag, trial, cap, count, w):
    """:func:`_static_plan`, callable from Python (the trial loop calls that one: no wrapper to build)."""
    _static_plan(arr, weights, random_shares, budget, seed, dag, trial, cap, count, w)


def static_plan(arr: DagArrays, rule: BaselineRule, budget: float, seed: int, dag: int, trial: int):
    """(caps ``B_v``, counts ``r_v``) of a static baseline in one trial: the compiled rule the episodes use."""
    cap, count = np.zeros(arr.n), np.zeros(arr.n, dtype=np.int64)
    _static_plan_entry(arr, rule.weights, rule.random_shares, float(budget), int(seed), int(dag), int(trial), cap,
                       count, np.empty(arr.n))  # fmt: skip
    return cap, count


@compiled_only
def _run_episode(
    n, m, parent_ptr, child_ptr, child_idx, node_ids, available, row_ptr, rows, tmpl, legacy, dist, cil,
    scal, cnt, key, ni, nf, attempt_no, seq_k, static_count, cap, buf, req_model, req_count, mask, use_legacy,
):  # fmt: skip
    """One baseline episode to its end on a fresh state (unpacked arrays; ``seq_k`` = 0: static)."""
    while True:
        code = advance_arrays(n, child_ptr, child_idx, scal, cnt, ni, nf)
        if code == ENDED:
            return
        cnt[PLANNER_CALLS] += 1
        for v in range(n):
            req_count[v] = 0
            req_model[v] = legacy[v]
            if node_is_ready(parent_ptr, ni, v):
                if seq_k > 0:
                    req_count[v] = seq_k
                elif ni[DISPATCHED, v] == 0:
                    req_count[v] = static_count[v]
                    ni[DISPATCHED, v] = 1
        launch_per_attempt_arrays(
            n, m, node_ids, available, row_ptr, rows, tmpl, dist, cil,
            scal, cnt, key, ni, nf, attempt_no, req_model, req_count, cap, buf,
        )  # fmt: skip
        if code == NEED_DECISION_IDLE and cnt[N_INFLIGHT] == 0:
            cnt[REASON] = no_progress_reason_arrays(
                n, m, parent_ptr, available, tmpl, legacy, scal, ni, nf, mask, use_legacy, cap
            )
            return


@njit(cache=True, nogil=True)
def trial_range(arr, rule, budget, seed, dag, trials, q0, q1, out_f, out_i, node_i, node_c, use_legacy):
    """Trials ``trials[q0:q1]``; arrays are unpacked and the state allocated once (reset per trial).

    The state and scratch are allocated here, not passed in: LLVM then knows
    they alias nothing (measured 10-20% faster than arrays from Python).
    ``use_legacy`` (True: the baselines run their legacy models) is an
    argument, not a constant, so that the checks it reaches are compiled
    for a plain bool, the signature simulator/base/prewarm.py's helper compiles.
    """
    n, m = arr.n, arr.m
    seq_k = rule.seq_k
    parent_ptr, child_ptr, child_idx = arr.parent_ptr, arr.child_ptr, arr.child_idx
    node_ids, available, row_ptr, rows, tmpl = arr.node_ids, arr.available, arr.row_ptr, arr.rows, arr.tmpl
    legacy, dist, cil = arr.legacy, arr.lat_dist, arr.charge_is_latency
    st = new_state(n, m, budget, np.inf, seed, dag, np.int64(0))  # np.int64: not a literal (one compile)
    scal, cnt, key, ni, nf, attempt_no = st.scal, st.cnt, st.key, st.ni, st.nf, st.attempt_no
    cap = np.empty(n, dtype=np.float64)  # np.empty only: one compiled allocation per dtype and rank
    cap[:] = np.inf
    count = np.empty(n, dtype=np.int64)
    count[:] = 0
    buf = np.empty(n, dtype=np.int64)
    req_model = np.empty(n, dtype=np.int64)
    req_count = np.empty(n, dtype=np.int64)
    mask = np.empty(m, dtype=np.bool_)
    mask[:] = False
    w = np.empty(n, dtype=np.float64)
    hopeless = first_uncompletable_arrays(n, m, available, tmpl, legacy, mask, use_legacy) >= 0
    for q in range(q0, q1):
        trial = trials[q]
        if seq_k == 0:
            _static_plan(arr, rule.weights, rule.random_shares, budget, seed, dag, trial, cap, count, w)
        reset_state(scal, cnt, key, ni, nf, attempt_no, budget, np.inf, seed, dag, trial)
        if hopeless:  # a node the legacy model can never complete: ends at once (loop.first_uncompletable)
            cnt[REASON] = STALLED
        else:
            _run_episode(
                n, m, parent_ptr, child_ptr, child_idx, node_ids, available, row_ptr, rows, tmpl, legacy, dist,
                cil, scal, cnt, key, ni, nf, attempt_no, seq_k, count, cap, buf, req_model, req_count, mask,
                use_legacy,
            )  # fmt: skip
        done = 0
        for v in range(n):
            done += ni[COMPLETED_, v]
            node_i[q, v, 0] = ni[COMPLETED_, v]
            node_i[q, v, 1] = ni[STARTED, v]
            node_i[q, v, 2] = ni[FINISHED, v]
            node_i[q, v, 3] = ni[NSUCCESS, v]
            node_c[q, v] = nf[NODE_COST, v]
        out_f[q, 0] = scal[T]
        out_f[q, 1] = scal[BUDGET] - scal[BUDGET_LEFT]
        out_f[q, 2] = done / n
        out_i[q, 0] = cnt[REASON]
        out_i[q, 1] = cnt[ROLLOUTS]
        out_i[q, 2] = cnt[PLANNER_CALLS]


def run_baseline_trials(arr, rule, budget, seed, dag, trials, out_f, out_i, node_i, node_c):
    """Simulate ``trials`` (D = inf) serially; outputs per trial row q.

    out_f[q] = (makespan, total_cost, completion_fraction); out_i[q] =
    (reason, total_rollouts, planner_calls); node_i[q, v] = (completed,
    started, finished, successes); node_c[q, v] = node cost.
    """
    _trial_chunk(arr, rule, budget, seed, dag, trials, out_f, out_i, node_i, node_c, 0, trials.shape[0])


def run_baseline_trials_parallel(arr, rule, budget, seed, dag, trials, out_f, out_i, node_i, node_c) -> None:
    """Same as :func:`run_baseline_trials`, chunks of trials on threads (keyed: same results)."""

    run_chunked(partial(_trial_chunk, arr, rule, budget, seed, dag, trials, out_f, out_i, node_i, node_c), trials.shape[0])


def _trial_chunk(arr, rule, budget, seed, dag, trials, out_f, out_i, node_i, node_c, q0: int, q1: int) -> None:
    """Trials q0..q1-1 (a thread's chunk, or all of them)."""
    trial_range(arr, rule, budget, seed, dag, trials, q0, q1, out_f, out_i, node_i, node_c, True)


class AtomicBaseline(Policy):
    """A compiled baseline's decisions as a Python policy, for the ``atomic`` execution-rule mode.

    Sequential-k: k attempts of the legacy model on every ready node at every
    decision, launched atomically (Seq-(legacy, k), MCPP's portfolio member
    when every node's legacy model is m). Static dispatch-once: at a node's
    first readiness its r_v attempts (the same shares and counts as the
    compiled rule, computed from the budget at the first decision), launched
    atomically with the other ready nodes; the atomic rule then replaces the
    per-node cap (any over-budget draw ends the episode), and a node whose
    one batch failed gets no attempt, which under the atomic rule ends the
    episode ``stalled`` (dispatch-once never retries). See docs/semantics.md.
    """

    legacy_only = True

    def __init__(self, name: str, rule) -> None:
        self.name = name
        self._rule_of = rule

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        self._arr, self._seed, self._dag, self._trial = arr, int(seed), int(dag), int(trial)
        self._rule = self._rule_of(arr)
        self._legacy = np.asarray(arr.legacy, dtype=np.int64)
        self._count: np.ndarray | None = None
        self._dispatched = np.zeros(arr.n, dtype=np.bool_)

    def act(self, view):
        n = view.arr.n
        count = np.zeros(n, dtype=np.int64)
        ready = np.asarray(view.ready, dtype=np.int64)
        if self._rule.seq_k > 0:
            count[ready] = self._rule.seq_k
            return self._legacy, count
        if self._count is None:  # the shares of the budget at the start (the first decision)
            _, self._count = static_plan(self._arr, self._rule, view.budget_left, self._seed, self._dag, self._trial)
        fresh = ready[~self._dispatched[ready]]
        count[fresh] = self._count[fresh]
        self._dispatched[fresh] = True
        return self._legacy, count

    def episode_diagnostics(self) -> dict:
        return {}


def _spec(name: str, rule, family: str, label: str = "") -> MethodSpec:
    sets = ("all", "baselines", "baseline_only", "seq" if family == "sequential" else "static")
    return MethodSpec(
        name, COMPILED_BASELINE, PER_ATTEMPT, SCORED, baseline=True, family=family, label=label, sets=sets, rule=rule,
    )


#: the registry entries of the twelve baselines (listed in simulator.methods)
METHODS: tuple[MethodSpec, ...] = tuple(
    _spec(name, partial(sequential_rule, k), "sequential")
    for name, k in SEQUENTIAL_KS.items()
) + tuple(_spec(name, partial(static_rule, name), "static") for name in STATIC_METHODS)



class LiveBaseline(AtomicBaseline):
    """A compiled baseline's decisions with its per-attempt launch and static caps, for a hard deadline.

    The ``live`` execution rules (and the live executor) run a baseline under
    the deadline D, which no run can pass: its decisions never depend on D,
    so these are the compiled rule's decisions, launched per attempt within
    the same per-node caps (static baselines: the budget's shares).
    """

    def budget_caps(self, arr: DagArrays, budget: float) -> np.ndarray:
        if self._rule.seq_k > 0:
            return np.full(arr.n, np.inf)
        return static_plan(arr, self._rule, budget, self._seed, self._dag, self._trial)[0]

"""LOADER: Lagrangian rollout allocation over path constraints (the decision math).

A LOADER policy chooses an integer attempt count ``r_v`` per node by a dual
method on the problem "minimise the longest path of expected node latencies
subject to the total expected work fitting the budget". The longest path is
replaced by a set of *active paths* with weights ``lambda_P`` (multiplicative
weights), the budget by a price ``beta`` (projected additive steps); for given
duals every node's best count has a closed form (Lambert W), rounded to the
better of floor and ceiling.

Everything here is a pure function of plain numpy arrays (per node of the
DAG, pool order): the latency ``t``, success probability ``p`` and expected
attempt cost ``kappa`` of the node's legacy model, plus the in-flight
snapshot ``delta`` (time until the node's batch ends) and ``rho`` (attempts in
flight). The compiled kernels (:func:`dual_loop` and the helpers) carry the
whole iteration; Python only orchestrates restarts, random draws and caches.

The published behaviour is reproduced by default, defects included; each
documented correction is a bit of ``fixes`` (``FIX_*``), off by default:

* ``FIX_UNITS`` (``_units``): the cost term in the cost mode's unit (``kappa``),
  not in seconds of latency;
* ``FIX_RCUR0`` (``_rcur0``): the static policy evaluates its surrogates with no
  attempt in flight (``r_cur = 0``) instead of ``r_cur = 1``;
* ``FIX_CLAMP_A`` (``_clamp``): the failure probability is clamped in the latency
  surrogate, so a node with ``p = 1`` still takes ``t`` seconds;
* ``FIX_LAMBERT1`` (``_lambert1``): the closed form's asymptotic branch returns
  ``max(r*, 1)``, not the fallback 64, when ``r* < 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from simulator.base.jit import njit
from simulator.baselines.further.graph import (
    all_paths,
    critical_path,
    dag_value,
    find_path,
    path_sums,
    remaining,
    top_k_paths,
)
from simulator.baselines.further.numeric import clip

FIX_UNITS, FIX_RCUR0, FIX_CLAMP_A, FIX_LAMBERT1 = 1, 2, 4, 8

BEST_LARGEST_COST = 0  # original static / top-k: largest feasible cost, the stable plan overrides it
BEST_SMALLEST_MAKESPAN = 1  # _bf, all-paths, colgen: smallest surrogate makespan, feasible plans only

LAMBERT_FALLBACK = 64.0
W_FLOOR = 1e-3
BETA_FLOOR_TOPK = 1e-8  # static, top-k and both _bf variants
BETA_FLOOR_PATHS = 1e-12  # all-paths and column generation

_INV_E = math.exp(-1.0)


# ---------------------------------------------------------------------------
# numeric helpers (section "numeric helpers shared by the LOADER family")
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def norm_simplex(x):
    """Entries floored at 1e-12 then divided by their sum (uniform if the sum is <= 0)."""
    out = np.empty_like(x)
    s = 0.0
    for i in range(x.shape[0]):
        out[i] = max(x[i], 1e-12)
        s += out[i]
    if not s > 0.0:
        for i in range(x.shape[0]):
            out[i] = 1.0 / x.shape[0]
        return out
    for i in range(x.shape[0]):
        out[i] = out[i] / s
    return out


@njit(cache=True, nogil=True)
def d_tilde(delta, t, p, r_cur, r, clamp_a):
    """Expected time until the node completes: ``delta + a^r_cur t / (1 - a^r)`` with the published clips."""
    a = 1.0 - p
    if clamp_a:
        a = clip(a, 1e-12, 1.0 - 1e-12)
    y_cur = a ** max(r_cur, 1e-9)
    y_fut = clip(a ** max(r, 1e-9), 1e-12, 1.0 - 1e-12)
    return delta + y_cur * t / (1.0 - y_fut)


@njit(cache=True, nogil=True)
def c_tilde(delta, t, p, r_cur, r, kappa, clamp_a, units):
    """Expected work of the node: ``r_cur delta + r d`` (seconds, faithful) or ``y_cur r kappa / (1 - y_fut)`` (units fix)."""
    if units:
        a = 1.0 - p
        if clamp_a:
            a = clip(a, 1e-12, 1.0 - 1e-12)
        y_cur = a ** max(r_cur, 1e-9)
        y_fut = clip(a ** max(r, 1e-9), 1e-12, 1.0 - 1e-12)
        return y_cur * r * kappa / (1.0 - y_fut)
    return r_cur * delta + r * d_tilde(delta, t, p, r_cur, r, clamp_a)


@njit(cache=True, nogil=True)
def lambert_wm1(z):
    """Real lower branch ``W_{-1}(z)`` for ``-1/e <= z < 0`` (NaN outside).

    Solved as ``u - ln u = L`` with ``u = -W``, ``L = -ln(-z)`` by Newton's
    method from the branch-point series (L near 1) or ``L + ln L``.
    """
    if not (z < 0.0) or z < -_INV_E - 1e-15:
        return np.nan
    L = -math.log(-z)
    if L <= 1.0:
        return -1.0
    if L < 3.0:
        q = math.sqrt(-2.0 * math.expm1(1.0 - L))
        u = 1.0 + q + q * q / 3.0 + 11.0 / 72.0 * q * q * q
    else:
        u = L + math.log(L)
    for _ in range(100):
        f = u - math.log(u) - L
        step = f / (1.0 - 1.0 / u)
        u_new = u - step
        if u_new <= 1.0:
            u_new = 0.5 * (u + 1.0)
        if abs(u_new - u) <= 4e-16 * u_new:
            u = u_new
            break
        u = u_new
    return -u


@njit(cache=True, nogil=True)
def lambert_r(p, w, beta, scale, lambert1):
    """Continuous minimiser ``r*`` of ``(w scale + beta r) / (1 - a^r)`` (``scale`` = 1 faithful, t/kappa units fix).

    Published guards: ``alpha <= 1e-10`` gives 1; the asymptotic branch
    (``1 + alpha > 500``) returns the fallback 64 when its ``r < 1`` unless
    ``lambert1`` (``_lambert1`` correction, then 1); every non-finite intermediate gives 64.
    """
    a = clip(1.0 - p, 1e-12, 1.0 - 1e-12)
    bb = -math.log(a)
    beta = max(beta, 1e-30)
    w = max(w, 0.0)
    alpha = bb * w * scale / beta
    if alpha <= 1e-10:
        return 1.0
    c = 1.0 + alpha
    if c > 500.0:
        y = clip(1.0 / (c + math.log(c)), 1e-15, 1.0 - 1e-12)
        r = -math.log(y) / bb
        if math.isfinite(r) and r >= 1.0:
            return r
        if lambert1 and math.isfinite(r):
            return max(r, 1.0)
        return LAMBERT_FALLBACK
    z = -math.exp(-c)
    if z <= -_INV_E:
        z = -_INV_E + 1e-12
    W = lambert_wm1(z)
    if not math.isfinite(W):
        return LAMBERT_FALLBACK
    y = -1.0 / W
    if not math.isfinite(y) or y <= 0.0:
        return LAMBERT_FALLBACK
    y = clip(y, 1e-12, 1.0 - 1e-12)
    r = -math.log(y) / bb
    if not math.isfinite(r):
        return LAMBERT_FALLBACK
    return max(r, 1.0)


@njit(cache=True, nogil=True)
def discretise(r_star):
    """``(lo, hi) = (max(1, floor r*), max(1, ceil r*))``; a non-finite ``r*`` gives (1, 1)."""
    if not math.isfinite(r_star):
        return 1, 1
    return max(1, int(math.floor(r_star))), max(1, int(math.ceil(r_star)))


@njit(cache=True, nogil=True)
def node_objective(w, beta, delta, t, p, r_cur, r, kappa, clamp_a, units):
    """``w d + beta c`` at count ``r``."""
    return w * d_tilde(delta, t, p, r_cur, r, clamp_a) + beta * c_tilde(delta, t, p, r_cur, r, kappa, clamp_a, units)


@njit(cache=True, nogil=True)
def best_count(w, beta, delta, t, p, r_cur, kappa, scale, flags):
    """The node's best response: the discretised closed form, ``lo`` unless ``hi`` is strictly better."""
    clamp_a = (flags & FIX_CLAMP_A) != 0
    units = (flags & FIX_UNITS) != 0
    rs = lambert_r(p, w, beta, scale if units else 1.0, (flags & FIX_LAMBERT1) != 0)
    lo, hi = discretise(rs)
    if lo == hi:
        return lo
    f_lo = node_objective(w, beta, delta, t, p, r_cur, float(lo), kappa, clamp_a, units)
    f_hi = node_objective(w, beta, delta, t, p, r_cur, float(hi), kappa, clamp_a, units)
    return lo if f_lo <= f_hi else hi


@njit(cache=True, nogil=True)
def path_weights(nodes, ptr, n_paths, lam, n):
    """``w_v`` = sum of ``lambda_P`` over the paths through ``v`` (path order), floored at 1e-3."""
    w = np.zeros(n)
    for k in range(n_paths):
        for i in range(ptr[k], ptr[k + 1]):
            w[nodes[i]] += lam[k]
    for v in range(n):
        w[v] = max(w[v], W_FLOOR)
    return w


@njit(cache=True, nogil=True)
def plan_best_response(id_order, n_alive, nodes, ptr, n_paths, lam, beta, delta, t, p, r_cur, kappa, scale, flags, plan):
    """Fill ``plan`` with every alive node's best response to ``(lambda, beta)``."""
    w = path_weights(nodes, ptr, n_paths, lam, plan.shape[0])
    for q in range(n_alive):
        v = id_order[q]
        plan[v] = best_count(w[v], beta, delta[v], t[v], p[v], r_cur[v], kappa[v], scale[v], flags)


@njit(cache=True, nogil=True)
def node_latencies(id_order, n_alive, delta, t, p, r_cur, plan, clamp_a, out):
    for q in range(n_alive):
        v = id_order[q]
        out[v] = d_tilde(delta[v], t[v], p[v], r_cur[v], float(plan[v]), clamp_a)


@njit(cache=True, nogil=True)
def plan_cost(id_order, n_alive, delta, t, p, r_cur, kappa, plan, clamp_a, units):
    """Total cost surrogate of a plan, summed in id order."""
    c = 0.0
    for q in range(n_alive):
        v = id_order[q]
        c += c_tilde(delta[v], t[v], p[v], r_cur[v], float(plan[v]), kappa[v], clamp_a, units)
    return c


# ---------------------------------------------------------------------------
# the dual loop
# ---------------------------------------------------------------------------


class NodeStats(NamedTuple):
    """Per-node inputs of the duals (pool order): in-flight time ``delta``, latency ``t``, success ``p``,
    attempts in flight ``r_cur``, expected attempt cost ``kappa``, the cost term's unit ``scale`` per node."""

    delta: np.ndarray
    t: np.ndarray
    p: np.ndarray
    r_cur: np.ndarray
    kappa: np.ndarray
    scale: np.ndarray


class PathSet(NamedTuple):
    """Active paths, flat: the nodes of path ``k`` are ``nodes[ptr[k]:ptr[k+1]]``."""

    nodes: np.ndarray
    ptr: np.ndarray
    n_paths: int


class DualRule(NamedTuple):
    """How the dual loop iterates and which plan it keeps (``best_mode``: ``BEST_*``; ``flags``: ``FIX_*``)."""

    budget: float
    max_iters: int
    stable_rounds: int
    eta_beta: float
    eta_lambda: float
    beta_floor: float
    best_mode: int
    flags: int


class DualOut(NamedTuple):
    """Arrays the dual loop fills: the kept plan and its ``[has_best, value]``, the last plan, the trace."""

    best_plan: np.ndarray
    best_val: np.ndarray
    last_plan: np.ndarray
    trace: np.ndarray
    trace_plans: np.ndarray


def dual_rule(params, budget: float, max_iters: int, beta_floor: float, best_mode: int, fixes: int) -> DualRule:
    """The :class:`DualRule` of a LOADER variant (types fixed, so the kernel compiles once)."""
    return DualRule(float(budget), int(max_iters), int(params.stable_rounds), float(params.eta_beta),
                    float(params.eta_lambda), float(beta_floor), int(best_mode), int(fixes))  # fmt: skip


@njit(cache=True, nogil=True)
def dual_loop(rem, stats, paths, lam, beta, rule, out):
    """Iterate best response / stability / dual steps on :class:`Remaining` ``rem``; returns (iterations, beta).

    ``lam`` is updated in place (MWU over the active paths). ``best_val`` =
    [has_best, value] is read and updated: the largest feasible cost with the
    stable plan adopted even if infeasible (``BEST_LARGEST_COST``) or the
    smallest feasible surrogate makespan (``BEST_SMALLEST_MAKESPAN``), the
    plan itself in ``best_plan``. ``last_plan`` receives the last iteration's
    plan (column generation prices with it). When ``trace`` has rows, row
    ``i`` receives (beta used for plan i, its cost C, lambda_0 used); the
    plans go to ``trace_plans[i]`` (the fields of ``out``).
    """
    parent_ptr, parent_idx, child_ptr, child_idx, alive, id_order, n_alive, order, count = rem
    delta, t, p, r_cur, kappa, scale = stats
    nodes, ptr, n_paths = paths
    budget, max_iters, stable_rounds, eta_beta, eta_lambda, beta_floor, best_mode, flags = rule
    best_plan, best_val, last_plan, trace, trace_plans = out
    n = alive.shape[0]
    clamp_a = (flags & FIX_CLAMP_A) != 0
    units = (flags & FIX_UNITS) != 0
    plan = np.ones(n, dtype=np.int64)
    prev = np.ones(n, dtype=np.int64)
    d = np.zeros(n)
    L = np.empty(max(n_paths, 1))
    stable = 0
    it = 0
    for step in range(max_iters):
        it = step + 1
        plan_best_response(id_order, n_alive, nodes, ptr, n_paths, lam, beta, delta, t, p, r_cur, kappa, scale, flags, plan)
        C = plan_cost(id_order, n_alive, delta, t, p, r_cur, kappa, plan, clamp_a, units)
        feasible = C <= budget
        if trace.shape[0] > step:
            trace[step, 0] = beta
            trace[step, 1] = C
            trace[step, 2] = lam[0] if n_paths > 0 else np.nan
            trace_plans[step, :] = plan
        node_latencies(id_order, n_alive, delta, t, p, r_cur, plan, clamp_a, d)
        if feasible:
            if best_mode == BEST_LARGEST_COST:
                if C > best_val[1]:
                    best_val[0] = 1.0
                    best_val[1] = C
                    best_plan[:] = plan
            else:
                score = dag_value(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, d)
                if score < best_val[1]:
                    best_val[0] = 1.0
                    best_val[1] = score
                    best_plan[:] = plan
        same = step > 0
        if same:
            for q in range(n_alive):
                v = id_order[q]
                if plan[v] != prev[v]:
                    same = False
                    break
        stable = stable + 1 if same else 0
        prev[:] = plan
        if stable >= stable_rounds:
            if best_mode == BEST_LARGEST_COST:
                best_val[0] = 1.0
                best_plan[:] = plan
            break
        beta = max(beta_floor, beta + eta_beta * (C - budget))
        if n_paths > 0:
            path_sums(nodes, ptr, n_paths, d, L)
            mx = L[0]
            for k in range(1, n_paths):
                if L[k] > mx:
                    mx = L[k]
            mx = max(mx, 1e-12)
            for k in range(n_paths):
                lam[k] = lam[k] * math.exp(eta_lambda * (L[k] / mx))
            lam[:n_paths] = norm_simplex(lam[:n_paths])
    last_plan[:] = plan
    return it, beta


@njit(cache=True, nogil=True)
def proxy_weights(id_order, n_alive, delta, t, p, r_ref, clamp_a, n):
    """Path proxy weights ``g_v = d(delta_v, t_v, p_v, r_ref_v, r_ref_v)``."""
    g = np.zeros(n)
    for q in range(n_alive):
        v = id_order[q]
        g[v] = d_tilde(delta[v], t[v], p[v], r_ref[v], r_ref[v], clamp_a)
    return g


# ---------------------------------------------------------------------------
# Python-level inputs and policies' decision functions
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LoaderGraph:
    """The DAG's structure (CSR in pool order) plus node ids, as the LOADER functions need it."""

    parent_ptr: np.ndarray
    parent_idx: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
    node_ids: np.ndarray

    @property
    def n(self) -> int:
        return int(self.node_ids.shape[0])

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.parent_ptr, self.parent_idx, self.child_ptr, self.child_idx


@dataclass(frozen=True)
class LoaderParams:
    """Parameters shared by the LOADER policies (defaults = the published ones)."""

    max_dual_iters: int = 30
    stable_rounds: int = 3
    eta_beta: float = 0.05
    eta_lambda: float = 0.5
    n_active_paths: int = 4
    n_restarts: int = 3
    max_paths: int = 5000
    max_cg_iters: int = 8
    inner_dual_iters: int = 8
    max_active_paths: int = 64
    add_path_tol: float = 1e-6


def units_scale(t: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """``t / kappa`` per node for the units fix's closed form (0/0 -> 0, t/0 -> inf)."""
    t = np.asarray(t, dtype=np.float64)
    kappa = np.asarray(kappa, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(kappa > 0, t / np.where(kappa > 0, kappa, 1.0), np.where(t > 0, np.inf, 0.0))
    return s.astype(np.float64)


@dataclass
class StaticStart:
    """One restart of the static policy: its plan (None: no plan) and score."""

    plan: np.ndarray | None
    score: float
    iterations: int = 0


def _no_trace(n: int, rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return np.full((rows, 3), np.nan), np.zeros((rows, n), dtype=np.int64)


def _f64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def static_start(
    g: LoaderGraph,
    t: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget: float,
    restart: int,
    rng: np.random.RandomState,
    params: LoaderParams,
    bf: bool,
    fixes: int = 0,
) -> StaticStart:
    """One start of ``loader_static`` (``bf``: the best-feasible variant), consuming ``rng`` in the published order."""
    n = g.n
    t, p, kappa = _f64(t), _f64(p), _f64(kappa)
    rem = remaining(g.csr(), np.ones(n, dtype=np.bool_), g.node_ids)  # the whole DAG
    _, _, _, _, alive, ids, n_alive, order, count = rem
    clamp_a = bool(fixes & FIX_CLAMP_A)
    if restart == 0:
        r0 = np.ones(n)
    else:
        r0 = np.ones(n)
        for q in range(n_alive):
            v = ids[q]
            r_max = max(2.0, budget / max(n, 1) / max(float(t[v]), 1e-9))
            r0[v] = rng.uniform(1.0, r_max)
    zeros = np.zeros(n)
    gw = proxy_weights(ids, n_alive, zeros, t, p, r0, clamp_a, n)
    nodes, ptr = top_k_paths(*g.csr(), alive, order, count, gw, int(params.n_active_paths))
    n_paths = len(ptr) - 1
    if n_paths == 0:
        return StaticStart(None, math.inf)
    if restart == 0:
        lam = np.full(n_paths, 1.0 / n_paths)
        beta = 1.0
    else:
        lam = np.asarray(rng.dirichlet(np.ones(n_paths)), dtype=np.float64)
        beta = math.exp(rng.uniform(math.log(0.01), math.log(10.0)))
    r_cur = np.zeros(n) if fixes & FIX_RCUR0 else np.ones(n)
    best_plan = np.ones(n, dtype=np.int64)
    best_val = np.array([0.0, math.inf if bf else -1.0])
    last = np.ones(n, dtype=np.int64)
    rule = dual_rule(params, budget, params.max_dual_iters, BETA_FLOOR_TOPK,
                     BEST_SMALLEST_MAKESPAN if bf else BEST_LARGEST_COST, fixes)  # fmt: skip
    its, _ = dual_loop(
        rem,
        NodeStats(zeros, t, p, r_cur, kappa, units_scale(t, kappa)), PathSet(nodes, ptr, n_paths),
        lam, float(beta), rule, DualOut(best_plan, best_val, last, *_no_trace(n)),
    )
    if best_val[0] == 0.0:
        return StaticStart(None, math.inf, its)
    if bf:
        return StaticStart(best_plan, float(best_val[1]), its)
    d = np.zeros(n)
    node_latencies(ids, n_alive, zeros, t, p, r_cur, best_plan, clamp_a, d)
    L = np.empty(n_paths)
    path_sums(nodes, ptr, n_paths, d, L)
    return StaticStart(best_plan, float(L.max()), its)


def loader_static_plan(
    g: LoaderGraph,
    t: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget: float,
    seed: int,
    params: LoaderParams = LoaderParams(),
    bf: bool = False,
    fixes: int = 0,
    starts: list | None = None,
) -> np.ndarray:
    """``r_v`` of ``loader_static`` (``bf``: ``loader_static_bf``): the best of ``n_restarts`` seeded starts.

    The generator is numpy's legacy ``RandomState(seed)``, consumed restart
    after restart as published. A later start replaces an earlier one only
    with a strictly smaller score; with no plan at all every node gets 1.
    ``starts`` (a list) receives each :class:`StaticStart` for inspection.
    """
    rng = np.random.RandomState(seed)
    best: np.ndarray | None = None
    best_score = math.inf
    for k in range(int(params.n_restarts)):
        s = static_start(g, t, p, kappa, budget, k, rng, params, bf, fixes)
        if starts is not None:
            starts.append(s)
        if s.plan is not None and (best is None or s.score < best_score):
            best, best_score = s.plan, s.score
    if best is None:
        return np.ones(g.n, dtype=np.int64)
    return best.astype(np.int64)


@dataclass
class RecedingResult:
    """A receding LOADER decision: counts per node (pool order) plus what led to them."""

    counts: np.ndarray  # int64 (n,): the plan (only ready nodes are acted on)
    planned: bool  # False: the published fallback (1 per ready node)
    iterations: int = 0
    n_paths: int = 0
    cg_rounds: int = 0
    beta: float = math.nan
    trace: np.ndarray | None = None  # (iterations, 3): beta used, cost C, lambda_0 (``trace=True``)
    trace_plans: np.ndarray | None = None  # (iterations, n)


@dataclass
class Snapshot:
    """State of the remaining DAG at a decision: alive nodes and the in-flight snapshot."""

    alive: np.ndarray  # bool (n,): not completed
    delta: np.ndarray  # float64 (n,): time until the node's in-flight batch ends (0 when none)
    rho: np.ndarray  # float64 (n,): attempts in flight (0 when none)


def _receding_setup(g: LoaderGraph, snap: Snapshot, t, p, fixes):
    rem = remaining(g.csr(), snap.alive, g.node_ids)
    delta = _f64(snap.delta)
    rho = _f64(snap.rho)
    r_ref = np.maximum(1.0, rho)
    gw = proxy_weights(rem.id_order, rem.n_alive, delta, _f64(t), _f64(p), r_ref, bool(fixes & FIX_CLAMP_A), g.n)
    return rem, delta, rho, gw


def loader_dual_decision(
    g: LoaderGraph,
    snap: Snapshot,
    t: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget_left: float,
    params: LoaderParams = LoaderParams(),
    bf: bool = False,
    fixes: int = 0,
    trace: bool = False,
) -> RecedingResult:
    """``loader_dual`` (``bf``: ``loader_dual_bf``) at one decision: top-k paths recomputed, duals from scratch."""
    n = g.n
    t, p, kappa = _f64(t), _f64(p), _f64(kappa)
    rem, delta, rho, gw = _receding_setup(g, snap, t, p, fixes)
    _, _, _, _, alive, ids, n_alive, order, count = rem
    nodes, ptr = top_k_paths(*g.csr(), alive, order, count, gw, int(params.n_active_paths))
    n_paths = len(ptr) - 1
    if n_paths == 0:
        return RecedingResult(np.ones(n, dtype=np.int64), False)
    tr, trp = _no_trace(n, int(params.max_dual_iters) if trace else 0)
    lam = np.full(n_paths, 1.0 / n_paths)
    best_plan = np.ones(n, dtype=np.int64)
    best_val = np.array([0.0, math.inf if bf else -1.0])
    last = np.ones(n, dtype=np.int64)
    rule = dual_rule(params, budget_left, params.max_dual_iters, BETA_FLOOR_TOPK,
                     BEST_SMALLEST_MAKESPAN if bf else BEST_LARGEST_COST, fixes)  # fmt: skip
    its, beta = dual_loop(
        rem, NodeStats(delta, t, p, rho, kappa, units_scale(t, kappa)), PathSet(nodes, ptr, n_paths),
        lam, 1.0, rule, DualOut(best_plan, best_val, last, tr, trp),
    )
    if best_val[0] == 0.0:
        return RecedingResult(np.ones(n, dtype=np.int64), False, its, n_paths, 0, beta, tr[:its], trp[:its])
    return RecedingResult(best_plan, True, its, n_paths, 0, beta, tr[:its], trp[:its])


def enumerate_paths(g: LoaderGraph, alive: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """All root-to-sink paths of the alive DAG (capped): (nodes, ptr, aborted)."""
    return all_paths(*g.csr(), np.ascontiguousarray(alive, dtype=np.bool_), int(cap))


def loader_all_paths_decision(
    g: LoaderGraph,
    snap: Snapshot,
    t: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget_left: float,
    params: LoaderParams = LoaderParams(),
    fixes: int = 0,
    paths: tuple[np.ndarray, np.ndarray, bool] | None = None,
    trace: bool = False,
) -> RecedingResult:
    """``loader_dual_all_paths`` at one decision.

    ``paths`` is the (possibly cached) result of :func:`enumerate_paths` for
    the same completed set; an aborted or empty enumeration gives the
    fallback of 1 per ready node.
    """
    n = g.n
    t, p, kappa = _f64(t), _f64(p), _f64(kappa)
    rem, delta, rho, _ = _receding_setup(g, snap, t, p, fixes)
    _, _, _, _, alive, ids, n_alive, order, count = rem
    if paths is None:
        paths = enumerate_paths(g, alive, params.max_paths)
    nodes, ptr, aborted = paths
    n_paths = len(ptr) - 1
    if aborted or n_paths == 0:
        return RecedingResult(np.ones(n, dtype=np.int64), False, 0, 0 if aborted else n_paths)
    tr, trp = _no_trace(n, int(params.max_dual_iters) if trace else 0)
    lam = np.full(n_paths, 1.0 / n_paths)
    best_plan = np.ones(n, dtype=np.int64)
    best_val = np.array([0.0, math.inf])
    last = np.ones(n, dtype=np.int64)
    rule = dual_rule(params, budget_left, params.max_dual_iters, BETA_FLOOR_PATHS, BEST_SMALLEST_MAKESPAN, fixes)
    its, beta = dual_loop(
        rem, NodeStats(delta, t, p, rho, kappa, units_scale(t, kappa)), PathSet(nodes, ptr, n_paths),
        lam, 1.0, rule, DualOut(best_plan, best_val, last, tr, trp),
    )
    if best_val[0] == 0.0:
        return RecedingResult(np.ones(n, dtype=np.int64), False, its, n_paths, 0, beta, tr[:its], trp[:its])
    return RecedingResult(best_plan, True, its, n_paths, 0, beta, tr[:its], trp[:its])


@njit(cache=True, nogil=True)
def _best_new_path(nodes, ptr, n_paths, act_nodes, act_ptr, n_act, g):
    """Highest-weight enumerated path not active (first maximum); returns its index or -1."""
    best = -1
    best_v = 0.0
    sums = np.empty(max(n_paths, 1))
    path_sums(nodes, ptr, n_paths, g, sums)
    for k in range(n_paths):
        if find_path(act_nodes, act_ptr, n_act, nodes[ptr[k] : ptr[k + 1]]) >= 0:
            continue
        if best < 0 or sums[k] > best_v:
            best = k
            best_v = sums[k]
    return best


def loader_colgen_decision(
    g: LoaderGraph,
    snap: Snapshot,
    t: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget_left: float,
    params: LoaderParams = LoaderParams(),
    fixes: int = 0,
) -> RecedingResult:
    """``loader_dual_colgen`` at one decision: start from the critical path, add priced columns.

    Pricing enumerates the paths of ``R`` only when the critical path is
    already active; that enumeration is capped at ``params.max_paths`` (a
    capped search stops adding columns). Because a path found that way is
    never longer than the active critical path, the cap cannot change the
    result, only bound the work (see the docs).
    """
    n = g.n
    t, p, kappa = _f64(t), _f64(p), _f64(kappa)
    clamp_a = bool(fixes & FIX_CLAMP_A)
    rem, delta, rho, gw = _receding_setup(g, snap, t, p, fixes)
    _, _, _, _, alive, ids, n_alive, order, count = rem
    first = critical_path(*g.csr(), alive, order, count, gw)
    if first.shape[0] == 0:
        return RecedingResult(np.ones(n, dtype=np.int64), False)
    cap_paths = max(int(params.max_active_paths), 1)
    act_nodes = np.empty(cap_paths * max(count, 1), dtype=np.int64)
    act_ptr = np.zeros(cap_paths + 1, dtype=np.int64)
    act_nodes[: first.shape[0]] = first
    act_ptr[1] = first.shape[0]
    n_act = 1
    lam = np.ones(1)
    beta = 1.0
    best_plan = np.ones(n, dtype=np.int64)
    best_val = np.array([0.0, math.inf])
    last = np.ones(n, dtype=np.int64)
    stats = NodeStats(delta, t, p, rho, kappa, units_scale(t, kappa))
    inner = min(int(params.inner_dual_iters), int(params.max_dual_iters))
    rule = dual_rule(params, budget_left, inner, BETA_FLOOR_PATHS, BEST_SMALLEST_MAKESPAN, fixes)
    total_its = 0
    rounds = 0
    for _cg in range(int(params.max_cg_iters)):
        rounds += 1
        its, beta = dual_loop(
            rem, stats, PathSet(act_nodes, act_ptr, n_act), lam, beta, rule,
            DualOut(best_plan, best_val, last, *_no_trace(n)),
        )
        total_its += its
        if its == 0:
            break
        gp = np.zeros(n)
        node_latencies(ids, n_alive, delta, t, p, rho, last, clamp_a, gp)
        cand = critical_path(*g.csr(), alive, order, count, gp)
        if find_path(act_nodes, act_ptr, n_act, cand) >= 0:
            nodes, ptr, aborted = enumerate_paths(g, alive, params.max_paths)
            if aborted:
                break
            k = _best_new_path(nodes, ptr, len(ptr) - 1, act_nodes, act_ptr, n_act, gp)
            if k < 0:
                break
            cand = nodes[ptr[k] : ptr[k + 1]].copy()
        act_vals = np.empty(n_act)
        path_sums(act_nodes, act_ptr, n_act, gp, act_vals)
        cv = 0.0
        for v in cand:
            cv += float(gp[v])
        if cv <= float(act_vals.max()) + float(params.add_path_tol):
            break
        if n_act >= cap_paths:
            break
        lo = act_ptr[n_act]
        act_nodes[lo : lo + cand.shape[0]] = cand
        act_ptr[n_act + 1] = lo + cand.shape[0]
        n_act += 1
        eps = min(max(0.05, 1e-6), 0.25)
        lam = norm_simplex(np.concatenate([norm_simplex(lam) * (1.0 - eps), [eps]]))
    if best_val[0] == 0.0:
        return RecedingResult(np.ones(n, dtype=np.int64), False, total_its, n_act, rounds, beta)
    return RecedingResult(best_plan, True, total_its, n_act, rounds, beta)

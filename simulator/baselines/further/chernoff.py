"""Chernoff-bound deadline policies: the decision math.

Model: one batch of ``r`` parallel attempts of node ``v`` takes ``tau_v``
seconds and fails with probability ``q_v^r``; the number of batches until
success is geometric. For ``theta > 0`` the log moment generating function of
the node's time is the *node risk cost* ``psi_v(theta, r)``. Bounding the
makespan by the sum over source-to-sink paths (independent node times) gives

    P(makespan > h) <= exp(Phi(theta, r) - theta h),
    Phi = ln sum_paths exp(sum_{v in path} psi_v)

computed on the remaining DAG by a forward and a backward log-sum-exp pass.
For each ``theta`` of a grid the counts ``r`` minimise ``Phi`` under the
expected-cost budget by a multiplicative dual method on the budget price
``beta`` (25 iterations, per-node bisection); the ``theta`` with the smallest
score ``J = Phi - theta h`` wins. The receding policy then rounds the
continuous plan for the ready nodes (exact floor/ceil enumeration up to 4096
combinations, else greedy).

Pure functions of numpy arrays per node (pool order); compiled where hot.
The published behaviour is the default; ``use_kappa`` is the documented
correction of the ``theta`` upper bound (``_kappa``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from simulator.base.jit import njit
from simulator.baselines.further.graph import remaining
from simulator.baselines.further.numeric import clip

LOG_1M = math.log(1.0 - 1e-12)
ENUM_LIMIT = 4096
BETA_FLOOR = 1e-9
BETA_CAP = 1e6
MAX_TARGET = 1_000_000  # launch counts are capped like the static baselines' r_v

SPACINGS = {"log_upper": "log_upper", "log": "log_upper", "analytic_upper_log_gap": "log_upper",
            "linear": "linear", "lin": "linear"}  # fmt: skip
RESERVATION_MODES = {
    "hard": "hard", "batch": "hard", "none": "hard", "0": "hard",
    "fixed_alpha": "fixed_alpha", "fixed": "fixed_alpha", "constant": "fixed_alpha",
    "constant_alpha": "fixed_alpha",
    "continuation": "continuation", "expected_continuation": "continuation", "infinite": "continuation",
    "1": "continuation",
    "adaptive": "adaptive", "deadline_adaptive": "adaptive", "deadline_adaptive_budget": "adaptive",
}  # fmt: skip


@dataclass(frozen=True)
class DeadlineParams:
    """Parameters of the Chernoff policies (defaults = the published ones)."""

    theta_grid_size: int = 10
    theta_grid_spacing: str = "log_upper"
    theta_upper_gap_ratio: float = 1e-6
    max_iters: int = 25
    dual_lr: float = 0.2
    tol: float = 1e-4
    budget_reservation_mode: str = "hard"
    budget_reservation_c: float = 2.0
    budget_reservation_alpha: float = 0.0


# ---------------------------------------------------------------------------
# the bound
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def q_of(p):
    """Failure probability of one attempt, clipped to [1e-12, 1 - 1e-12]."""
    return clip(1.0 - p, 1e-12, 1.0 - 1e-12)


@njit(cache=True, nogil=True)
def psi(theta, tau, q, r):
    """Node risk cost ``ln E exp(theta T_v)`` with ``r`` attempts per batch (+inf where undefined)."""
    log_y = max(r, 1e-9) * math.log(q)
    log_ay = theta * tau + log_y
    if log_ay >= LOG_1M:
        return np.inf
    y = clip(math.exp(log_y), 1e-300, 1.0 - 1e-15)
    ay = clip(math.exp(log_ay), 1e-300, 1.0 - 1e-15)
    return theta * tau + math.log1p(-y) - math.log1p(-ay)


@njit(cache=True, nogil=True)
def dpsi(theta, tau, q, r):
    """Derivative of :func:`psi` in ``r`` (-inf where undefined)."""
    log_y = max(r, 1e-9) * math.log(q)
    log_ay = theta * tau + log_y
    if log_ay >= LOG_1M:
        return -np.inf
    y = clip(math.exp(log_y), 1e-300, 1.0 - 1e-15)
    ay = clip(math.exp(log_ay), 1e-300, 1.0 - 1e-15)
    den = (1.0 - y) * (1.0 - ay)
    if den <= 1e-300:
        return -np.inf
    b = -math.log(q)
    return -b * (ay - y) / den


@njit(cache=True, nogil=True)
def r_min_of(theta, tau, q):
    """Smallest count with a finite ``psi``, plus a margin: ``max(1e-6, theta tau / b + 1e-6)``."""
    return max(1e-6, theta * tau / max(-math.log(q), 1e-12) + 1e-6)


@njit(cache=True, nogil=True)
def cost(kappa, q, alpha, r):
    """Expected-cost surrogate of ``r`` attempts with reservation weight ``alpha``."""
    r = max(r, 1e-9)
    y = q**r
    return (1.0 - alpha) * kappa * r + alpha * kappa * r / max(1.0 - y, 1e-12)


@njit(cache=True, nogil=True)
def dcost(kappa, q, alpha, r):
    r = max(r, 1e-9)
    y = q**r
    b = -math.log(q)
    return (1.0 - alpha) * kappa + alpha * kappa * (1.0 - y - r * b * y) / max((1.0 - y) ** 2, 1e-24)


@njit(cache=True, nogil=True)
def lse(xs):
    """Stable log-sum-exp: -inf for an empty list, an infinite maximum passes through unchanged."""
    if xs.shape[0] == 0:
        return -np.inf
    m = xs[0]
    for i in range(1, xs.shape[0]):
        if xs[i] > m:
            m = xs[i]
    if not math.isfinite(m):
        return m
    s = 0.0
    for i in range(xs.shape[0]):
        s += math.exp(xs[i] - m)
    return m + math.log(s)


@njit(cache=True, nogil=True)
def phi_forward(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, F):
    """Forward pass: ``F_v`` (fills ``F``) and ``Phi = LSE over sinks of F``."""
    buf = np.empty(max(parent_idx.shape[0], child_idx.shape[0], alive.shape[0], 1))
    for q in range(count):
        v = order[q]
        k = 0
        for e in range(parent_ptr[v], parent_ptr[v + 1]):
            u = parent_idx[e]
            if alive[u]:
                buf[k] = F[u]
                k += 1
        F[v] = psi_v[v] if k == 0 else psi_v[v] + lse(buf[:k])
    k = 0
    for v in range(alive.shape[0]):
        if alive[v]:
            sink = True
            for e in range(child_ptr[v], child_ptr[v + 1]):
                if alive[child_idx[e]]:
                    sink = False
                    break
            if sink:
                buf[k] = F[v]
                k += 1
    return lse(buf[:k])


@njit(cache=True, nogil=True)
def phi_and_weights(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, w):
    """``Phi`` and the path weights ``w_v = clip(exp(F_v + G_v - Phi), 0, 1)`` (fills ``w``)."""
    n = alive.shape[0]
    F = np.zeros(n)
    G = np.zeros(n)
    phi = phi_forward(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, F)
    buf = np.empty(max(child_idx.shape[0], 1))
    for q in range(count - 1, -1, -1):
        v = order[q]
        k = 0
        for e in range(child_ptr[v], child_ptr[v + 1]):
            c = child_idx[e]
            if alive[c]:
                buf[k] = psi_v[c] + G[c]
                k += 1
        G[v] = 0.0 if k == 0 else lse(buf[:k])
    for q in range(count):
        v = order[q]
        w[v] = clip(math.exp(F[v] + G[v] - phi), 0.0, 1.0)
    return phi


@njit(cache=True, nogil=True)
def success_lower_bound(J):
    """Reported lower bound on on-time success: 0 if J >= 0, 1 if J <= -50, else 1 - e^J."""
    if J >= 0.0:
        return 0.0
    if J <= -50.0:
        return 1.0
    return -math.expm1(J)


# ---------------------------------------------------------------------------
# one theta
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def node_subproblem(theta, tau, q, kappa, alpha, r_min, w, beta, b_hint, tol):
    """Minimise ``w psi(r) + beta cost(r)`` over ``r >= r_min``; returns (r, ok) (ok False: failed to bracket)."""
    if w <= 0.0 and beta <= 0.0:
        return r_min, True
    if beta <= 0.0:
        return max(r_min, b_hint / max(kappa, 1e-9)), True
    eps = max(1e-8, 1e-6 * max(1.0, r_min))
    lo = r_min + eps
    if w * dpsi(theta, tau, q, lo) + beta * dcost(kappa, q, alpha, lo) >= 0.0:
        return lo, True
    hi = max(lo + 1.0, 2.0 * lo + 1.0)
    k = 0
    while w * dpsi(theta, tau, q, hi) + beta * dcost(kappa, q, alpha, hi) < 0.0 and k < 60:
        hi *= 2.0
        k += 1
    if w * dpsi(theta, tau, q, hi) + beta * dcost(kappa, q, alpha, hi) < 0.0:
        return hi, False
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if w * dpsi(theta, tau, q, mid) + beta * dcost(kappa, q, alpha, mid) <= 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= tol * max(1.0, lo):
            break
    return 0.5 * (lo + hi), True


@njit(cache=True, nogil=True)
def _nanmax_abs_diff(a, b, id_order, n_alive):
    m = 0.0
    for i in range(n_alive):
        v = id_order[i]
        x = abs(a[v] - b[v])
        if x != x:
            return np.nan
        if x > m:
            m = x
    return m


class DualInputs(NamedTuple):
    """Per-node inputs of the deadline dual (pool order) and how it iterates.

    ``tau`` latencies (floored), ``q`` failure probabilities (clipped),
    ``kappa`` expected attempt costs, ``alpha`` reservation weights; the
    budget and the loop's ``max_iters``, ``dual_lr`` and ``tol``.
    """

    tau: np.ndarray
    q: np.ndarray
    kappa: np.ndarray
    alpha: np.ndarray
    budget: float
    max_iters: int
    dual_lr: float
    tol: float


class RoundingInputs(NamedTuple):
    """What the receding rounding reads: the ready nodes, the continuous plan and its weights at ``theta``,
    the node statistics (``lat_raw``: the unfloored latencies of the greedy gains) and the budget."""

    ready: np.ndarray
    n_ready: int
    plan: np.ndarray
    w: np.ndarray
    theta: float
    tau: np.ndarray
    lat_raw: np.ndarray
    q: np.ndarray
    kappa: np.ndarray
    kappa_any: np.ndarray
    budget: float


@njit(cache=True, nogil=True)
def solve_theta(rem, inp, theta, plan_out, w_out, trace):
    """The dual loop at one ``theta`` on :class:`Remaining` ``rem``; returns (Phi, status, iterations, final beta).

    status: 1 solved (best plan in ``plan_out``, its weights in ``w_out``),
    0 infeasible (``r_min`` unaffordable or no finite ``Phi``), -1 a node's
    bisection failed to bracket. ``trace`` (shape (max_iters, 4) or (0, 4))
    receives per-iteration (C, beta after the update, Phi_new, plan_delta).
    """
    parent_ptr, parent_idx, child_ptr, child_idx, alive, id_order, n_alive, order, count = rem
    tau, q, kappa, alpha, budget, max_iters, dual_lr, tol = inp
    n = alive.shape[0]
    plan = np.zeros(n)
    c_min = 0.0
    for i in range(n_alive):
        v = id_order[i]
        plan[v] = r_min_of(theta, tau[v], q[v])
        c_min += cost(kappa[v], q[v], alpha[v], plan[v])
    if c_min > budget + 1e-9:
        return np.inf, 0, 0, 0.0
    Bp = max(budget, 1e-9)
    psi_v = np.zeros(n)
    for i in range(n_alive):
        v = id_order[i]
        psi_v[v] = psi(theta, tau[v], q[v], plan[v])
    w = np.zeros(n)
    best_phi = phi_and_weights(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, w)
    plan_out[:] = plan
    w_out[:] = w
    beta = 0.0
    new = np.zeros(n)
    w_new = np.zeros(n)
    w_prev = np.zeros(n)
    its = 0
    for it in range(max_iters):
        its = it + 1
        C = 0.0
        for i in range(n_alive):
            v = id_order[i]
            r, ok = node_subproblem(
                theta, tau[v], q[v], kappa[v], alpha[v], r_min_of(theta, tau[v], q[v]), w[v], beta, Bp, tol
            )
            if not ok:
                return np.inf, -1, its, beta
            new[v] = r
            C += cost(kappa[v], q[v], alpha[v], r)
        viol = (C - Bp) / Bp
        if viol > 0.0:
            if beta <= 0.0:
                s = 0.0
                for i in range(n_alive):
                    s += max(w[id_order[i]], 0.0)
                beta = max(BETA_FLOOR, s / max(n_alive, 1))
            beta = min(BETA_CAP, beta * math.exp(dual_lr * viol))
        elif beta > 0.0:
            beta = max(0.0, beta * math.exp(dual_lr * viol))
            if beta < BETA_FLOOR:
                beta = 0.0
        for i in range(n_alive):
            v = id_order[i]
            psi_v[v] = psi(theta, tau[v], q[v], new[v])
        phi_new = phi_and_weights(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, w_new)
        if C <= Bp * (1.0 + tol) and phi_new < best_phi:
            best_phi = phi_new
            plan_out[:] = new
            w_out[:] = w_new
        plan_delta = _nanmax_abs_diff(new, plan, id_order, n_alive)
        weight_delta = 0.0 if it == 0 else _nanmax_abs_diff(w_new, w_prev, id_order, n_alive)
        if trace.shape[0] > it:
            trace[it, 0] = C
            trace[it, 1] = beta
            trace[it, 2] = phi_new
            trace[it, 3] = plan_delta
        w_prev[:] = w_new
        plan[:] = new
        w[:] = w_new
        if plan_delta <= tol and weight_delta <= tol:
            break
    if not math.isfinite(best_phi):
        return best_phi, 0, its, beta
    return best_phi, 1, its, beta


@njit(cache=True, nogil=True)
def solve_grid(rem, inp, grid, h, plan_out, w_out, scores):
    """Every ``theta`` of ``grid`` (ascending); keeps the smallest ``J = Phi - theta h``.

    Returns (index of the chosen theta or -1, its Phi, its J, a bracketing
    failure flag). ``scores[i]`` receives J (inf when infeasible).
    """
    n = rem.alive.shape[0]
    plan = np.zeros(n)
    w = np.zeros(n)
    empty = np.zeros((0, 4))
    best = -1
    best_j = np.inf
    best_phi = np.inf
    failed = False
    for i in range(grid.shape[0]):
        theta = grid[i]
        phi, status, _, _ = solve_theta(rem, inp, theta, plan, w, empty)
        if status == -1:
            failed = True
        if status != 1:
            scores[i] = np.inf
            continue
        J = phi - theta * h
        scores[i] = J
        if best < 0 or J < best_j:
            best = i
            best_j = J
            best_phi = phi
            plan_out[:] = plan
            w_out[:] = w
    return best, best_phi, best_j, failed


# ---------------------------------------------------------------------------
# receding rounding
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _leaf_phi(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, F):
    return phi_forward(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, F)


@njit(cache=True, nogil=True)
def round_receding(rem, inp, targets):
    """Integer targets for the ready nodes from the continuous plan (fills ``targets``; returns the mode).

    Mode 1: exact floor/ceil enumeration; 2: greedy (over 4096 combinations).
    Then the minimum enforcement and the safety fallback of the published code
    (which fires when some ready node can launch *any* of its models:
    ``kappa_any`` = the cheapest expected attempt cost over its models).
    ``inp`` is a :class:`RoundingInputs`.
    """
    parent_ptr, parent_idx, child_ptr, child_idx, alive, _, _, order, count = rem
    ready, n_ready, plan, w, theta, tau, lat_raw, q, kappa, kappa_any, budget = inp
    n = alive.shape[0]
    need_sum = 0.0
    for i in range(n_ready):
        need_sum += kappa[ready[i]]
    need_one = need_sum <= budget + 1e-12
    m0 = 1 if need_one else 0
    choices = np.zeros((max(n_ready, 1), 3), dtype=np.int64)
    n_choice = np.zeros(max(n_ready, 1), dtype=np.int64)
    combos = 1
    for i in range(n_ready):
        v = ready[i]
        x = max(0.0, plan[v])
        fl = max(m0, int(math.floor(min(x, 4e18))))
        ce = max(fl, int(math.ceil(min(x, 4e18))))
        vals = np.array([m0, fl, ce], dtype=np.int64)
        vals.sort()
        k = 0
        for j in range(3):
            if k == 0 or vals[j] != choices[i, k - 1]:
                choices[i, k] = vals[j]
                k += 1
        n_choice[i] = k
        if combos <= ENUM_LIMIT:
            combos *= k
    for i in range(n_ready):
        targets[ready[i]] = 0
    mode = 1
    if combos > ENUM_LIMIT:
        mode = 2
        available = budget
        if need_one:
            for i in range(n_ready):
                v = ready[i]
                targets[v] = 1
                available -= kappa[v]
        up = np.zeros(n_ready, dtype=np.int64)
        for i in range(n_ready):
            v = ready[i]
            x = max(0.0, plan[v])
            fl = max(m0, int(math.floor(min(x, 4e18))))
            up[i] = max(fl, int(math.ceil(min(x, 4e18))), 1)
            missing = fl - targets[v]
            if missing > 0:
                if kappa[v] > 0.0:
                    afford = math.floor((available + 1e-12) / kappa[v])
                    add = int(min(float(missing), max(afford, 0.0)))
                else:
                    add = missing
                targets[v] += add
                available -= add * kappa[v]
        while True:
            best = -1
            best_gain = -1.0
            for i in range(n_ready):
                v = ready[i]
                if targets[v] >= up[i] or not (available + 1e-12 >= kappa[v]):
                    continue
                r = max(float(targets[v]), 0.25)
                d = w[v] * (psi(theta, lat_raw[v], q[v], r) - psi(theta, lat_raw[v], q[v], r + 1.0))
                gain = (d if d > 0.0 else 0.0) / max(kappa[v], 1e-9)
                if gain > best_gain:
                    best_gain = gain
                    best = i
            if best < 0:
                break
            targets[ready[best]] += 1
            available -= kappa[ready[best]]
    else:
        psi_v = np.zeros(n)
        for v in range(n):
            if alive[v]:
                psi_v[v] = psi(theta, tau[v], q[v], max(plan[v], 1e-9))
        F = np.zeros(n)
        idx = np.zeros(max(n_ready, 1), dtype=np.int64)
        best_phi = np.inf
        best_cost = 0.0
        while True:
            c = 0.0
            for i in range(n_ready):
                v = ready[i]
                val = choices[i, idx[i]]
                c += val * kappa[v]
                psi_v[v] = psi(theta, tau[v], q[v], val if val > 0 else 1e-9)
            if c <= budget + 1e-12:
                phi = _leaf_phi(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, psi_v, F)
                if math.isfinite(phi):
                    if phi < best_phi - 1e-12 or (abs(phi - best_phi) <= 1e-12 and c < best_cost):
                        best_phi = phi
                        best_cost = c
                        for i in range(n_ready):
                            targets[ready[i]] = choices[i, idx[i]]
            j = n_ready - 1
            while j >= 0:
                idx[j] += 1
                if idx[j] < n_choice[j]:
                    break
                idx[j] = 0
                j -= 1
            if j < 0:
                break
    if need_one:
        spent = 0.0
        for i in range(n_ready):
            v = ready[i]
            if targets[v] < 1:
                targets[v] = 1
            spent += targets[v] * kappa[v]
        if spent > budget + 1e-12:
            for i in range(n_ready):
                targets[ready[i]] = 1
    all_zero = True
    any_fits = False
    spent = 0.0
    for i in range(n_ready):
        v = ready[i]
        if targets[v] > 0:
            all_zero = False
        if kappa_any[v] <= budget:
            any_fits = True
        spent += targets[v] * kappa[v]
    if all_zero and any_fits:
        available = budget - spent
        best = -1
        for i in range(n_ready):
            v = ready[i]
            if kappa[v] <= available + 1e-12 and (best < 0 or kappa[v] < kappa[ready[best]]):
                best = i
        if best >= 0:
            targets[ready[best]] = 1
    for i in range(n_ready):
        v = ready[i]
        if targets[v] > MAX_TARGET:
            targets[v] = MAX_TARGET
    return mode


@njit(cache=True, nogil=True)
def no_solution_targets(ready, n_ready, kappa, budget, targets):
    """No feasible theta: one attempt per ready node (pool order) while its expected cost fits."""
    available = budget
    for i in range(n_ready):
        v = ready[i]
        if kappa[v] <= available + 1e-12:
            targets[v] = 1
            available -= kappa[v]
        else:
            targets[v] = 0


# ---------------------------------------------------------------------------
# Python-level solve
# ---------------------------------------------------------------------------


def theta_grid(
    lat: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    alive: np.ndarray,
    budget: float,
    params: DeadlineParams = DeadlineParams(),
    use_kappa: bool = False,
) -> np.ndarray:
    """The ascending ``theta`` grid (published upper bound; ``use_kappa``: the exact one, ``_kappa``)."""
    sel = np.flatnonzero(alive)
    upper = 0.0
    if budget > 0 and sel.size:
        pc = np.clip(p[sel], 1e-12, 1 - 1e-12)
        b = np.maximum(-np.log1p(-pc), 1e-12)
        terms = np.maximum(lat[sel], 1e-12) / b
        if use_kappa:
            terms = terms * kappa[sel]
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = float(budget / float(np.sum(terms)))
        if not math.isfinite(upper) or upper <= 0:
            upper = 0.0
    if upper <= 0:
        return np.array([1e-12])
    n = max(2, int(params.theta_grid_size))
    lower = max(1e-12, 1e-6 * upper)
    gap = max(1e-12, upper * min(max(float(params.theta_upper_gap_ratio), 1e-12), 0.25))
    max_theta = max(lower, upper - gap)
    if max_theta <= lower:
        return np.array([max_theta])
    spacing = SPACINGS[params.theta_grid_spacing]
    if spacing == "log_upper":
        gaps = np.geomspace(max(upper - lower, 1e-12), max(upper - max_theta, 1e-12), n)
        th = upper - gaps
        th = th[(th > 0) & (th < upper)]
    else:
        th = np.array([lower + i * (max_theta - lower) / (n - 1) for i in range(n)])
    th = np.unique(np.round(th, 15))
    if th.size == 0:
        return np.array([max_theta])
    return th.astype(np.float64)


def reservation_alpha(
    g, alive: np.ndarray, order: np.ndarray, count: int, lat: np.ndarray, h: float, params: DeadlineParams
) -> np.ndarray:
    """Per-node reservation weight ``alpha_v`` of the budget reservation mode."""
    n = alive.shape[0]
    mode = RESERVATION_MODES[str(params.budget_reservation_mode)]
    if mode == "hard":
        return np.zeros(n)
    if mode == "fixed_alpha":
        return np.full(n, min(max(float(params.budget_reservation_alpha), 0.0), 1.0))
    if mode == "continuation":
        return np.ones(n)
    tau = np.maximum(lat, 1e-9)
    down = np.zeros(n)  # longest chain of tau over descendants in R, the node excluded
    for qi in range(count - 1, -1, -1):
        v = int(order[qi])
        best = 0.0
        for e in range(g.child_ptr[v], g.child_ptr[v + 1]):
            c = int(g.child_idx[e])
            if alive[c]:
                best = max(best, tau[c] + down[c])
        down[v] = best
    c = max(float(params.budget_reservation_c), 0.0)
    W = np.maximum(1.0, np.floor(np.maximum(0.0, h - down) / tau))
    return np.clip(1.0 - c / W, 0.0, 1.0)


@dataclass
class DeadlineSolution:
    """Result of one solve over the grid (``index`` -1: no feasible theta)."""

    index: int
    theta: float
    plan: np.ndarray  # continuous counts (n,)
    weights: np.ndarray  # path weights (n,)
    phi: float
    score: float  # J = Phi - theta h
    grid: np.ndarray
    scores: np.ndarray

    @property
    def solved(self) -> bool:
        return self.index >= 0

    @property
    def lower_bound(self) -> float:
        return float(success_lower_bound(self.score)) if self.solved else 0.0


class BracketError(RuntimeError):
    """A node subproblem's bisection could not bracket its root (cannot happen with beta kappa > 0)."""


def dual_inputs(lat: np.ndarray, p: np.ndarray, kappa: np.ndarray, alpha: np.ndarray, budget: float,
                params: DeadlineParams) -> DualInputs:  # fmt: skip
    """The :class:`DualInputs` of latencies ``lat`` and success probabilities ``p`` (floored and clipped here)."""
    tau = np.maximum(lat, 1e-9)
    q = np.clip(1.0 - np.asarray(p, dtype=np.float64), 1e-12, 1.0 - 1e-12)
    return DualInputs(tau, q, kappa, alpha, float(budget), int(params.max_iters), float(params.dual_lr),
                      float(params.tol))  # fmt: skip


def solve_deadline(
    g,
    alive: np.ndarray,
    lat: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget: float,
    h: float,
    params: DeadlineParams = DeadlineParams(),
    use_kappa: bool = False,
) -> DeadlineSolution:
    """Section "over the grid": solve every theta on the alive DAG and keep the smallest score.

    ``g`` is any object with the CSR fields and ``node_ids`` of
    :class:`~simulator.baselines.further.loader.LoaderGraph`.
    """
    lat = np.ascontiguousarray(lat, dtype=np.float64)
    p = np.ascontiguousarray(p, dtype=np.float64)
    kappa = np.ascontiguousarray(kappa, dtype=np.float64)
    rem = remaining((g.parent_ptr, g.parent_idx, g.child_ptr, g.child_idx), alive, g.node_ids)
    alive = rem.alive
    n = alive.shape[0]
    alpha = reservation_alpha(g, alive, rem.order, rem.count, lat, h, params)
    grid = theta_grid(lat, p, kappa, alive, budget, params, use_kappa)
    plan = np.zeros(n)
    w = np.zeros(n)
    scores = np.full(grid.shape[0], np.inf)
    idx, phi, J, failed = solve_grid(rem, dual_inputs(lat, p, kappa, alpha, budget, params), grid, float(h), plan, w,
                                     scores)  # fmt: skip
    if failed:
        raise BracketError("deadline policy: a node subproblem failed to bracket its root")
    theta = float(grid[idx]) if idx >= 0 else math.nan
    return DeadlineSolution(int(idx), theta, plan, w, float(phi), float(J), grid, scores)


def static_counts(sol: DeadlineSolution, n: int) -> np.ndarray:
    """``deadline_static``'s ``r_v = max(1, round(plan_v))`` (round half to even); 1 everywhere with no solution."""
    if not sol.solved:
        return np.ones(n, dtype=np.int64)
    r = np.maximum(1.0, np.rint(sol.plan))
    return np.minimum(r, MAX_TARGET).astype(np.int64)


def receding_targets(
    g,
    alive: np.ndarray,
    ready: np.ndarray,
    lat: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget: float,
    sol: DeadlineSolution,
    kappa_any: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """``deadline_receding``'s targets (n,) for the ready nodes and the rounding mode (0 none, 1 exact, 2 greedy).

    ``kappa_any``: per node, the cheapest expected attempt cost over all its
    models (default: the legacy ``kappa``), for the safety fallback's check.
    """
    n = alive.shape[0]
    targets = np.zeros(n, dtype=np.int64)
    ready = np.ascontiguousarray(ready, dtype=np.int64)
    kappa = np.ascontiguousarray(kappa, dtype=np.float64)
    if not sol.solved:
        no_solution_targets(ready, ready.shape[0], kappa, float(budget), targets)
        return targets, 0
    rem = remaining((g.parent_ptr, g.parent_idx, g.child_ptr, g.child_idx), alive, g.node_ids)
    lat = np.ascontiguousarray(lat, dtype=np.float64)
    tau = np.maximum(lat, 1e-9)
    q = np.clip(1.0 - np.asarray(p, dtype=np.float64), 1e-12, 1.0 - 1e-12)
    k_any = kappa if kappa_any is None else np.ascontiguousarray(kappa_any, dtype=np.float64)
    inp = RoundingInputs(ready, int(ready.shape[0]), sol.plan, sol.weights, float(sol.theta), tau, lat, q, kappa,
                         k_any, float(budget))  # fmt: skip
    mode = round_receding(rem, inp, targets)
    return targets, int(mode)


def trace_theta(
    g,
    alive: np.ndarray,
    lat: np.ndarray,
    p: np.ndarray,
    kappa: np.ndarray,
    budget: float,
    h: float,
    theta: float,
    params: DeadlineParams = DeadlineParams(),
) -> np.ndarray:
    """Per-iteration (C, beta after the update, Phi_new, plan_delta) of the dual loop at one ``theta``."""
    lat = np.ascontiguousarray(lat, dtype=np.float64)
    rem = remaining((g.parent_ptr, g.parent_idx, g.child_ptr, g.child_idx), alive, g.node_ids)
    alpha = reservation_alpha(g, rem.alive, rem.order, rem.count, lat, h, params)
    n = rem.alive.shape[0]
    tr = np.full((int(params.max_iters), 4), np.nan)
    inp = dual_inputs(lat, p, np.ascontiguousarray(kappa, dtype=np.float64), alpha, budget, params)
    _, _, its, _ = solve_theta(rem, inp, float(theta), np.zeros(n), np.zeros(n), tr)
    return tr[:its]

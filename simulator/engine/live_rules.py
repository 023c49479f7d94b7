"""The ``live`` execution rules: what a run can decide with only what a live run knows.

The other modes are clairvoyant in three places: a per-attempt launch is
refused on its *drawn* cost, an atomic launch ends the episode when its
*drawn* latencies or costs do not fit, and the planner sees the *exact*
remaining times of running attempts. A live executor knows none of these.
Under ``live`` rules (``docs/semantics.md``, "Execution-rule modes"):

* **Admission on expected costs.** An atomic launch (MCPP) of counts k_v with
  models j_v costs E = sum k_v kappa(v, j_v) in expectation. If E exceeds the
  budget left it waits when batches are in flight (it is decided again at
  the next batch end: they hold budget that their end may free) and ends
  the episode ``budget_exhausted`` otherwise. A per-attempt launch (the
  baselines) refuses an attempt whose expected cost kappa exceeds the room
  left (budget left, within the node's static cap); the refused attempt's
  number is consumed and the rest of that node's batch skipped.
* **A cap per sample** (its ``max_tokens``): the sample's *reservation* r.
  Atomic: r = min(ceiling(v, j), kappa(v, j) x b / E): the budget left b
  shared in proportion to the samples' expected costs, but never more than
  the largest output the (node, model) was ever seen to draw, so that a
  launch does not hold the whole budget while it runs (it would starve the
  nodes that come after it). Per attempt: r = min(ceiling(v, j), room).
  In a pool whose charges are whole numbers (output tokens) r is rounded
  down to a whole number, as ``max_tokens`` is. The reservations of a
  launch sum to at most the budget left: the budget is hard.
* **Truncation.** A drawn attempt whose charge exceeds its reservation is cut
  there: charged r, and it fails (a cut answer is never accepted).
* **Settlement per batch.** A batch holds its samples' reservations until it
  ends; then each sample is charged its (capped) drawn charge. The budget
  left a decision sees is budget - charged - held.
* **Nothing ends on a drawn latency or cost.** Batches run; at the deadline the
  episode ends ``deadline_exhausted`` and every sample still running is
  charged its whole reservation (a cancelled request may be billed), a
  sample that answered before it its charge.
* **The planner's view of running samples** is the conditional mean residual
  ``E[L - e | L > e]`` of the (node, model)'s latency sample given the
  elapsed time e (:class:`Residuals`), not the drawn remaining time.

This module is the one place of these rules' numbers. Their steps and a
run's rule state (which nodes are ready, the order and admission of a
launch, what a refusal consumes, the batches in flight and their answers,
when a node is stuck) are :class:`simulator.engine.live_core.LiveCore`'s,
which calls these functions for the two live drivers that hold one: the
simulated live episode (:mod:`simulator.engine.live_episode`, reached from
the episode driver :mod:`simulator.engine.episode` under ``live``) and the
live executor (:mod:`executor.live`, with :mod:`executor.launching`). MCPP calls
them directly: its member simulations (:mod:`simulator.mcpp.kernel`,
compiled) and its policy (:mod:`simulator.mcpp.policy`, the ceilings and the
reservation unit). The reference simulator (:mod:`simulator.engine.reference`)
does not model the live rules.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.base.jit import njit
from simulator.base.rng import fold, make_key
from simulator.costs.arrays import DagArrays
from simulator.engine.loop import sample_latency

#: what an atomic launch does (:func:`atomic_admission`)
LAUNCH, WAIT, END = 0, 1, 2
#: parametric latency draws per (node, model) for the residual estimate
PARAMETRIC_SAMPLES = 256
#: the residual of an overdue sample (no draw of the sample is that long): expected any moment
OVERDUE_S = 1e-3
#: keyed stream of the live rules' own draws (parametric latency samples)
STREAM_LIVE = 102
#: rounding down to whole units forgives this much (a count times a price divided by the price is not exact)
ROUND_DOWN_TOL = 1e-9


def charge_ceilings(arr: DagArrays) -> np.ndarray:
    """Per (node, model): the largest charge one attempt can draw (+inf where unbounded or unavailable).

    With rows: the largest row charge. Parametric: the template's charge
    (every parametric draw charges it), or +inf when attempts are charged
    their latency (``lat_mean`` cost mode: no bound).
    """
    n, m = arr.n, arr.m
    out = np.full((n, m), np.inf)
    for v in range(n):
        for j in range(m):
            if not arr.available[v, j]:
                continue
            lo, hi = arr.row_ptr[v * m + j], arr.row_ptr[v * m + j + 1]
            if hi > lo:
                out[v, j] = float(arr.row_charge[lo:hi].max())
            elif not arr.charge_is_latency:
                out[v, j] = float(arr.tmpl_charge[v, j])
    return out


def reservation_unit(arr: DagArrays) -> float:
    """1.0 when every charge an attempt can draw is a whole number (output tokens), else 0.0 (continuous)."""
    if arr.charge_is_latency:
        return 0.0
    charges = [arr.row_charge]
    for v in range(arr.n):
        for j in range(arr.m):
            if arr.available[v, j] and arr.row_ptr[v * arr.m + j + 1] == arr.row_ptr[v * arr.m + j]:
                charges.append(np.asarray([arr.tmpl_charge[v, j]]))
    allc = np.concatenate(charges) if charges else np.zeros(0)
    allc = allc[np.isfinite(allc)]
    return 1.0 if np.all(allc == np.floor(allc)) else 0.0


@njit(cache=True, nogil=True)
def whole(x, unit):
    """``x`` rounded down to a multiple of ``unit`` (``unit`` 0: unchanged)."""
    if unit <= 0.0:
        return x
    return math.floor(x / unit + ROUND_DOWN_TOL) * unit


def tokens_within(amount: float, per_token: float) -> int:
    """The most whole output tokens priced ``per_token`` each that ``amount`` pays for (a sample's ``max_tokens``).

    ``amount // per_token`` is one token short whenever ``amount`` is itself a
    price times a count (``(1234 * 2e-7) // 2e-7 == 1233``): the live run would
    then cut an answer that its simulated twin, capped at the same amount,
    lets through. It rounds down with :func:`whole`'s tolerance, :data:`ROUND_DOWN_TOL`.
    """
    if amount <= 0.0:
        return 0
    return int(math.floor(amount / per_token + ROUND_DOWN_TOL))


@njit(cache=True, nogil=True)
def atomic_admission(expected, budget_left, n_inflight):
    """``LAUNCH`` when the launch's expected cost fits the budget left, else ``WAIT`` (batches in flight) or ``END``."""
    if expected <= budget_left:
        return LAUNCH
    if n_inflight > 0:
        return WAIT
    return END


@njit(cache=True, nogil=True)
def atomic_reservation(kappa, expected, budget_left, ceiling, unit):
    """The reservation of one sample of an admitted atomic launch (expected cost ``expected`` of the whole launch)."""
    share = budget_left if expected <= 0.0 else kappa * budget_left / expected
    return whole(min(ceiling, share), unit)


@njit(cache=True, nogil=True)
def attempt_reservation(kappa, room, ceiling, unit):
    """The reservation of one per-attempt sample that may take ``room``, or -1.0 when it is refused."""
    if kappa > room:
        return -1.0
    r = whole(min(ceiling, room), unit)
    if r <= 0.0 < kappa:
        return -1.0
    return r


@njit(cache=True, nogil=True)
def capped_charge(charge, reservation):
    """(charged cost, truncated) of a drawn attempt under its reservation: cut there and failed when above it."""
    if charge > reservation:
        return reservation, True
    return charge, False


def latency_sample(arr: DagArrays, v: int, j: int) -> np.ndarray:
    """The latency sample of (v, j), sorted: its rows, else keyed parametric draws."""
    lo, hi = arr.row_ptr[v * arr.m + j], arr.row_ptr[v * arr.m + j + 1]
    if hi > lo:
        return np.sort(arr.row_lat[lo:hi])
    key = np.uint64(make_key(0, 0, 0, STREAM_LIVE, v, j, 0))
    draws = [sample_latency(arr.lat_dist, float(arr.lat_mean[v, j]), float(arr.lat_std[v, j]),
                            np.uint64(fold(key, i)), 0) for i in range(PARAMETRIC_SAMPLES)]
    return np.sort(np.asarray(draws))


class Residuals:
    """Conditional mean residual latencies ``E[L - e | L > e]`` per (node, model), from cached samples."""

    def __init__(self, arr: DagArrays) -> None:
        self.arr = arr
        self._cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def remaining(self, v: int, j: int, elapsed: float) -> float:
        """Expected time left of a sample of (v, j) running for ``elapsed`` (``OVERDUE_S`` when overdue)."""
        c = self._cache.get((v, j))
        if c is None:
            s = latency_sample(self.arr, v, j)
            c = self._cache[(v, j)] = (s, np.concatenate([np.cumsum(s[::-1])[::-1], [0.0]]))
        s, tail = c
        i = int(np.searchsorted(s, elapsed, side="right"))
        if i == len(s):
            return OVERDUE_S
        return max(OVERDUE_S, float(tail[i] / (len(s) - i)) - elapsed)

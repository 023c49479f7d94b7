"""MCPP's anytime evaluation: the best action found within a per-decision wall-time limit.

The faithful planner gives every (candidate, member) pair M simulations, so a
decision's cost grows with candidates x members x M x the DAG's size (seconds
on 80-node, 4-model DAGs). Under ``time_limit_ms`` the planner instead spends
its simulations where they decide the choice:

1. **Exact pruning first**: pairs whose failure is certain (the kernel's own
   lower bounds on cost and time, :func:`simulator.mcpp.kernel.surely_failing`) get no simulation.
2. **A cheap ranking** (:func:`pair_scores`): a mean-field estimate of each
   pair's expected cost and finishing time (expected batches until success
   = 1 / (1 - (1 - p)^k), the expected maximum latency of k attempts),
   turned into the smaller of its budget and time slack. Pairs are simulated
   in that order, so when the limit is reached before every pair was tried,
   the untried ones are those that looked worst.
3. **Successive halving with racing**: rounds of ``M/16, M/8, ..., M``
   cumulative simulations per surviving pair (simulation indices continue
   across rounds, so a pair's samples are the ones the full evaluation would
   draw); after each round the pairs whose Hoeffding upper bound is below
   the best lower bound are dropped, and the best ``1/eta`` are kept (with
   every pair tied with the last one kept: a tie is no evidence).
4. **Common random numbers**: the candidate index leaves the simulation key
   (as with ``evaluation=crn``), so candidates are compared on the same luck.

The kernel runs in chunks of pairs sized from the measured simulation rate so
that one chunk lasts a few milliseconds; the limit is checked between chunks,
and a chunk is only started if its predicted time fits. At least one chunk is
always run. The answer is the pair with the highest Wilson 95% lower bound
among the evaluated ones (the survivors' best mean when every round
finished): a pair with 1 win in 1 simulation does not beat one with 50 in 64.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulator.base.scoring import wilson_bounds, wilson_interval
from simulator.costs.arrays import DagArrays
from simulator.mcpp.kernel import DecisionState

#: margin on the predicted time of the last chunks before the limit
SAFETY = 1.5
#: stand-in for "impossible" in the mean-field tables (finite, so that 0 x it stays 0)
_BIG = 1e30


@dataclass
class AnytimeResult:
    """What the anytime evaluation found and what it cost."""

    pair: int  # index into the (candidate, member) pair list; -1 = nothing won
    wins: int
    n: int  # simulations of that pair
    simulations: int  # simulations run in total (all pairs)
    limit_hit: bool  # stopped by the time limit (not by finishing its rounds)
    rounds_done: int  # rounds finished for every surviving pair
    pairs_total: int
    pairs_pruned: int  # settled by exact pruning, never simulated
    pairs_simulated: int  # pairs that got at least one simulation
    interval: tuple[float, float]  # Wilson 95% interval of the chosen pair's success fraction

    def record(self) -> dict:
        return {
            "simulations_run": self.simulations,
            "n_best": self.n,
            "interval": [self.interval[0], self.interval[1]],
            "limit_hit": self.limit_hit,
            "rounds_done": self.rounds_done,
            "pairs_pruned": self.pairs_pruned,
            "pairs_simulated": self.pairs_simulated,
        }


def _expected_max_latencies(arr: DagArrays, v: int, j: int, ks: np.ndarray) -> np.ndarray:
    """E[max of k attempt latencies] of (node v, model j) for each k: exact over rows, else a normal approximation."""
    lo, hi = arr.row_ptr[v * arr.m + j], arr.row_ptr[v * arr.m + j + 1]
    kf = ks.astype(np.float64)
    if hi > lo:
        x = np.sort(arr.row_lat[lo:hi])
        r = len(x)
        i = np.arange(1, r + 1, dtype=np.float64)
        w = (i[None, :] / r) ** kf[:, None] - ((i[None, :] - 1) / r) ** kf[:, None]  # P(max is the i-th smallest)
        return w @ x
    extra = np.sqrt(2.0 * np.log(np.maximum(kf, 1.0)))
    return arr.lat_mean[v, j] + arr.lat_std[v, j] * extra


class MemberTables:
    """Per-(DAG, episode) mean-field tables for the ranking (built once per episode, outside the time limit).

    Levels (model j, count k in ``ks``) of node v: ``q[v, j, i]`` the chance a
    k-batch succeeds, ``emax[v, j, i]`` its expected latency (the largest of
    k draws). Members (model, k): the expected cost and time of running v to
    success with repeated batches (``cost``, ``lat``: one batch / q), and the
    longest expected path strictly below v (``child_tail``); all (n, P).
    """

    def __init__(self, arr: DagArrays, members: list[tuple[int, int]], order: np.ndarray) -> None:
        n, m, P = arr.n, arr.m, len(members)
        self.arr = arr
        self.ks = np.array(sorted({k for _, k in members}), dtype=np.int64)
        K = len(self.ks)
        p = np.clip(np.asarray(arr.p, dtype=np.float64), 0.0, 1.0)
        self.q = 1.0 - (1.0 - p[:, :, None]) ** self.ks[None, None, :].astype(np.float64)  # (n, m, K)
        self.emax = np.full((n, m, K), _BIG)
        for v in range(n):
            for j in range(m):
                if arr.available[v, j]:
                    self.emax[v, j] = _expected_max_latencies(arr, v, j, self.ks)
        self.cost = np.full((n, P), _BIG)
        self.lat = np.full((n, P), _BIG)
        for pi, (j, k) in enumerate(members):
            i = int(np.searchsorted(self.ks, k))
            ok = arr.available[:, j] & (self.q[:, j, i] > 0.0)
            self.cost[ok, pi] = k * arr.kappa[ok, j] / self.q[ok, j, i]
            self.lat[ok, pi] = self.emax[ok, j, i] / self.q[ok, j, i]
        tail = np.zeros((n, P))
        self.child_tail = np.zeros((n, P))
        for v in reversed(order):
            for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
                self.child_tail[v] = np.maximum(self.child_tail[v], tail[arr.child_idx[e]])
            tail[v] = np.minimum(self.lat[v] + self.child_tail[v], _BIG)

    def level_index(self, counts: np.ndarray) -> np.ndarray | None:
        """Index of each count in ``ks`` (None if a count is not a member's k)."""
        i = np.searchsorted(self.ks, counts)
        i = np.minimum(i, len(self.ks) - 1)
        return i if np.array_equal(self.ks[i], counts) else None


def pair_scores(tables: MemberTables, dec: DecisionState) -> np.ndarray:
    """(C, P): the smaller of the pair's mean-field budget slack and time slack (higher = more promising).

    Expected cost = the candidate's batches + their expected member retries
    + the member's expected cost on every node not yet launched; expected
    time = the longest of (candidate batch, retries, expected path below) over
    the ready nodes and of (known end, path below) over the in-flight batches.
    A ranking, not a bound: it only decides which pairs are simulated first.
    """
    arr = tables.arr
    ready = dec.ready
    C, R = dec.cand_model.shape
    busy = np.zeros(arr.n, dtype=bool)
    busy[ready] = True
    busy[dec.inf_node] = True
    rest = ~dec.completed & ~busy
    cost = np.zeros((C, len(dec.mem_model))) + tables.cost[rest].sum(axis=0)[None, :]
    finish = np.zeros_like(cost)
    kidx = tables.level_index(dec.cand_count)
    for r in range(R):
        v = int(ready[r])
        models, counts = dec.cand_model[:, r], dec.cand_count[:, r]
        if kidx is not None:
            q = tables.q[v, models, kidx[:, r]]
            lat = tables.emax[v, models, kidx[:, r]]
        else:  # a count outside the members' ks (not produced by the generators): no latency information
            q = 1.0 - (1.0 - arr.p[v, models]) ** counts
            lat = arr.lat_mean[v, models]
        fail = 1.0 - q
        cost += (counts * arr.kappa[v, models])[:, None] + fail[:, None] * tables.cost[v][None, :]
        t = lat[:, None] + fail[:, None] * tables.lat[v][None, :] + tables.child_tail[v][None, :]
        np.maximum(finish, t, out=finish)
    for q in range(len(dec.inf_node)):
        np.maximum(finish, (dec.inf_end[q] + tables.child_tail[dec.inf_node[q]])[None, :], out=finish)
    b = max(dec.budget, 1e-12)
    h = max(dec.horizon, 1e-12)
    return np.minimum(1.0 - cost / b, 1.0 - finish / h)


def schedule(M: int, eta: int) -> list[int]:
    """Cumulative simulations per surviving pair after each round: M/16 (at least 1), x eta, ..., M."""
    t = max(1, M // 16)
    out = []
    while t < M:
        out.append(t)
        t *= eta
    out.append(M)
    return out


class Rates:
    """Measured seconds per simulation of the serial and the parallel kernel (kept across decisions).

    Why both: a parallel region returns only when every thread has finished
    its share, so when another process holds a core a short region waits for
    a thread the OS has not scheduled yet (measured: 8-20 ms per region on the
    shared 2-core machine, 4 µs when idle). The race runs short chunks, so it
    measures both kernels and uses the faster one, trying the other one now
    and then (every ``explore`` chunks) in case the load changed.
    """

    def __init__(self, threads: int, explore: int = 16) -> None:
        self.threads = threads
        self.explore = explore
        self.serial: float | None = None
        self.parallel: float | None = None
        self.chunks = 0

    def choose(self) -> bool:
        """True = run the next chunk on the parallel kernel."""
        self.chunks += 1
        if self.threads <= 1 or self.serial is None:
            return False
        if self.parallel is None or self.chunks % self.explore == 0:
            return self.parallel is None or self.parallel >= self.serial  # try the one not in use
        return self.parallel < self.serial

    def best(self) -> float | None:
        known = [x for x in (self.serial, self.parallel) if x is not None]
        return min(known) if known else None

    def observe(self, parallel: bool, seconds_per_sim: float) -> None:
        old = self.parallel if parallel else self.serial
        new = seconds_per_sim if old is None else 0.5 * old + 0.5 * seconds_per_sim
        if parallel:
            self.parallel = new
        else:
            self.serial = new


#: a decision whose serial kernel time is predicted below this runs on one thread (see :func:`evaluate_auto`)
PARALLEL_MIN_S = 0.03


def evaluate_auto(
    evaluate: Callable[[np.ndarray, np.ndarray, int, int, bool], np.ndarray],
    pair_c: np.ndarray,
    pair_m: np.ndarray,
    s_lo: int,
    s_hi: int,
    rates: Rates,
    clock: Callable[[], float] = time.perf_counter,
) -> np.ndarray:
    """Wins of simulations s_lo..s_hi-1 of every pair: one thread for short work, all threads for long work.

    The results are those of any other split (each simulation has its own
    key); only the time changes. A parallel region costs a few µs on an idle
    machine but 8-20 ms when another process holds a core (it waits for a
    thread the OS has not scheduled yet), so work predicted (from the
    measured serial rate) to take less than ``PARALLEL_MIN_S`` runs serially;
    longer work runs on all threads in chunks taken by whichever thread is
    free (:func:`simulator.base.threads.run_chunked`), so a thread that started
    late takes fewer chunks instead of holding up the end. Without a measured rate, the
    first 64 pairs run serially to measure it.
    """
    N = len(pair_c)
    per_pair = max(1, s_hi - s_lo)
    out = np.zeros(N, dtype=np.int64)
    i = 0
    if rates.serial is None:
        i = min(N, 64)
        t0 = clock()
        out[:i] = evaluate(pair_c[:i], pair_m[:i], s_lo, s_hi, False)
        rates.observe(False, max(clock() - t0, 1e-7) / (i * per_pair))
    if i == N:
        return out
    rest = N - i
    if rates.threads <= 1 or rates.serial * rest * per_pair < PARALLEL_MIN_S:
        t0 = clock()
        out[i:] = evaluate(pair_c[i:], pair_m[i:], s_lo, s_hi, False)
        rates.observe(False, max(clock() - t0, 1e-7) / (rest * per_pair))
    else:
        out[i:] = evaluate(pair_c[i:], pair_m[i:], s_lo, s_hi, True)
    return out


def race(
    evaluate: Callable[[np.ndarray, np.ndarray, int, int, bool], np.ndarray],
    pair_c: np.ndarray,
    pair_m: np.ndarray,
    order: np.ndarray,
    M: int,
    eta: int,
    delta: float,
    deadline: float,
    rates: Rates,
    clock: Callable[[], float] = time.perf_counter,
    sim_limit: int | None = None,
) -> AnytimeResult:
    """Successive halving with racing over the pairs ``order`` (best-ranked first) until ``deadline``.

    ``sim_limit`` (with ``deadline`` = inf) is the deterministic form of the
    limit: the race stops before a chunk would pass that many simulations in
    all, so which pairs get how many simulations depends on the state alone
    (chunk sizes still follow the measured rates, but a chunk only groups
    simulations that would run anyway: every simulation has its own key).

    ``order`` lists the pair indices to simulate (the others were pruned);
    ``evaluate(pc, pm, s_lo, s_hi, parallel)`` returns the wins of
    simulations s_lo..s_hi-1 of each listed pair; ``deadline`` is a
    ``clock()`` time; ``rates`` the measured kernel speeds (updated here).
    """
    N = len(pair_c)
    n_pruned = N - len(order)
    if len(order) == 0:
        return AnytimeResult(-1, 0, 0, 0, False, 0, N, n_pruned, 0, wilson_interval(0, 0))
    wins = np.zeros(N, dtype=np.int64)
    nsim = np.zeros(N, dtype=np.int64)
    targets = schedule(M, eta)
    log_term = math.log(2.0 * max(1, N) * len(targets) / delta)
    alive = np.asarray(order, dtype=np.int64)
    min_chunk = 8
    total = 0
    limit_hit = False
    rounds_done = 0
    done = 0
    for r, target in enumerate(targets):
        i = 0
        per_pair = target - done
        while i < len(alive):
            left = deadline - clock()
            parallel = rates.choose()
            rate = (rates.parallel if parallel else rates.serial) or rates.best()
            if rate is None:
                size = min_chunk
            else:
                slice_s = min(0.02 if parallel else 0.005, max(0.001, 0.25 * left))
                size = max(min_chunk, int(slice_s / (rate * per_pair)))
                # only what fits before the limit (x SAFETY: later rounds' survivors run longer simulations)
                if total > 0 and SAFETY * rate * per_pair * min(size, len(alive) - i) > left:
                    size = int(left / (SAFETY * rate * per_pair))
                    if size < 1:
                        limit_hit = True
                        break
            if sim_limit is not None:
                size = min(size, (sim_limit - total) // per_pair)
                if size < 1:
                    limit_hit = True
                    break
            idx = alive[i : i + size]
            t0 = clock()
            wins[idx] += evaluate(pair_c[idx], pair_m[idx], done, target, parallel)
            dt = clock() - t0
            nsim[idx] = target
            total += len(idx) * per_pair
            rates.observe(parallel, max(dt, 1e-7) / (len(idx) * per_pair))
            i += len(idx)
            if clock() >= deadline and (i < len(alive) or r < len(targets) - 1):
                limit_hit = True
                break
        if limit_hit:
            break
        done = target
        rounds_done = r + 1
        if r == len(targets) - 1:
            break
        # racing: drop pairs whose upper bound is below the best lower bound; halving: keep 1/eta
        mean = wins[alive] / target
        eps = math.sqrt(log_term / (2.0 * target))
        keep = mean + eps >= mean.max() - eps
        cand = alive[keep]
        by_mean = np.argsort(-wins[cand], kind="stable")  # best first, ties keep the ranking
        cut = max(1, math.ceil(len(alive) / eta))
        if cut < len(cand):
            # a tie with the last kept pair is no evidence against a pair: keep it (when nothing wins yet, e.g.
            # a hard state where most pairs score 0 after a few simulations, halving would drop pairs at random)
            cut = int(np.searchsorted(-wins[cand][by_mean], -wins[cand][by_mean[cut - 1]], side="right"))
        alive = cand[by_mean[:cut]]
    evaluated = np.flatnonzero(nsim > 0)
    if not limit_hit:
        best = int(alive[np.argmax(wins[alive])])  # survivors share n = M: the best mean (ties: ranking)
    else:
        lcb = wilson_bounds(wins[evaluated], nsim[evaluated])[0]
        # highest lower bound; ties to more simulations, then the earlier pair
        pick = np.lexsort((evaluated, -nsim[evaluated], -lcb))[0]
        best = int(evaluated[pick])
    if wins[best] == 0:
        best_n = int(nsim[best])
        return AnytimeResult(-1, 0, best_n, total, limit_hit, rounds_done, N, n_pruned,
                             len(evaluated), wilson_interval(0, best_n))  # fmt: skip
    return AnytimeResult(
        best, int(wins[best]), int(nsim[best]), total, limit_hit, rounds_done, N, n_pruned,
        len(evaluated), wilson_interval(int(wins[best]), int(nsim[best])),
    )  # fmt: skip

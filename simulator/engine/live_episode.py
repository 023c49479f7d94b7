"""One episode of a Python policy under the ``live`` execution rules (:mod:`simulator.engine.live_rules`).

The event loop (batch ends in time order, completion checked before the
deadline) is the compiled one of :mod:`simulator.engine.loop`; what differs
from the other modes is decided by the run's
:class:`~simulator.engine.live_core.LiveCore`, which this driver tells what
happens (launches, answers as their drawn times pass, batch ends, samples
lost at the deadline) and asks what the rules say (ready nodes, the
admission of a launch, the decisions' view, whether a launch still fits):
launches are admitted on expected costs, each sample is capped at its
reservation (cut there and failed when its draw is larger), a batch holds
its reservations until it ends, and the planner sees estimated remaining
times. This driver keeps the clock, the money (the budget left, charges
and holds) and the drawn answers (:class:`Draws`). The live executor
(:mod:`executor.live`) drives its own core the same way, so a live run and
its simulated twin (the same keyed draws) end the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from simulator.base.rng import fold
from simulator.costs.arrays import DagArrays
from simulator.engine.live_core import (
    END,
    RUNNING,
    STALL,
    CoreBatch,
    LiveCore,
    LiveFlight,
    LiveState,
)
from simulator.engine.live_rules import OVERDUE_S, Residuals, capped_charge, charge_ceilings, reservation_unit
from simulator.engine.loop import (
    BUDGET_EXHAUSTED,
    BUDGET_LEFT,
    DEADLINE,
    DEADLINE_EXHAUSTED,
    DECISIONS,
    ENDED,
    EVENT_CAP,
    INFLIGHT,
    N_INFLIGHT,
    NEED_DECISION_IDLE,
    NODE_COST,
    PLANNER_CALLS,
    REASON,
    STALLED,
    T,
    add_batch,
    advance,
    draw_attempt,
    new_state,
    node_model_key,
)
from simulator.engine.types import DecisionView, EpisodeResult, episode_result


@dataclass
class Draws:
    """The drawn side of one in-flight batch (the simulated world's answers): each sample's answer time, whether
    it passes (succeeded and not cut) and its capped charge. Its rule state is the core's (:class:`CoreBatch`)."""

    ends: np.ndarray  # absolute answer times
    passed: np.ndarray  # bool: succeeded and not cut
    charges: np.ndarray  # what each sample is charged when it answers (capped)
    #: the samples in answer order, and how many of them the core was told of (:func:`_answers`)
    order: list[int] = field(init=False)
    told: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        ends = self.ends.tolist()
        self.order = sorted(range(len(ends)), key=ends.__getitem__)


def _extra(b: CoreBatch, d: Draws) -> float:
    """What a batch holds beyond its charges until it ends."""
    return float(np.asarray(b.reservations).sum() - d.charges.sum())


class LiveRulesArrays:
    """The per-DAG tables of the rules (charge ceilings, reservation unit), built once per DAG arrays."""

    def __init__(self, arr: DagArrays) -> None:
        self.ceiling = charge_ceilings(arr)
        self.unit = reservation_unit(arr)


_TABLES: dict[int, tuple[DagArrays, LiveRulesArrays]] = {}


def live_tables(arr: DagArrays) -> LiveRulesArrays:
    """:class:`LiveRulesArrays` of ``arr`` (cached while the arrays live)."""
    hit = _TABLES.get(id(arr))
    if hit is not None and hit[0] is arr:
        return hit[1]
    if len(_TABLES) > 64:
        _TABLES.clear()
    tables = LiveRulesArrays(arr)
    _TABLES[id(arr)] = (arr, tables)
    return tables


def draw_batch(arr: DagArrays, key0, v: int, j: int, a0: int, reservations: np.ndarray):
    """The draws of samples a0.. of (v, j) under their reservations: (latencies, passed, charges)."""
    k = len(reservations)
    lat = np.empty(k)
    passed = np.empty(k, dtype=np.bool_)
    charges = np.empty(k)
    base = node_model_key(key0, v, j)
    for i in range(k):
        lat[i], succ, c = draw_attempt(arr, v, j, np.uint64(fold(base, a0 + i)))
        charges[i], cut = capped_charge(c, float(reservations[i]))
        passed[i] = bool(succ) and not cut
    return lat, passed, charges


def run_live_episode(arr: DagArrays, policy, budget: float, deadline: float, seed: int, dag: int, trial: int, *,
                     max_events: int, per_attempt: bool, start: LiveState | None = None):
    """One episode of ``policy`` under live rules (per-attempt launch for the baselines, atomic otherwise).

    ``start``: a run's state part-way (:class:`LiveState`; times relative to
    it, ``budget`` and ``deadline`` what is left); by default the start.
    The rule state is a :class:`~simulator.engine.live_core.LiveCore`'s; this
    driver keeps the clock and the money (the compiled loop's state) and the
    drawn answers (:class:`Draws`), and tells the core what happens.
    """
    st = new_state(arr.n, arr.m, float(budget), float(deadline), seed, dag, trial)
    st.cnt[EVENT_CAP] = max_events
    policy.reset(arr, seed, dag, trial)
    tables = live_tables(arr)
    resid = Residuals(arr)
    mask = np.zeros(arr.m, dtype=np.bool_)
    mask[policy.model_positions(arr)] = True
    legacy_only = bool(policy.legacy_only)
    core = LiveCore(arr, mask, legacy_only, arr.node_ids, start=start)
    draws: dict[int, Draws] = {}
    if start is not None:
        _enter(arr, st, start, draws)
    cap = np.asarray(policy.budget_caps(arr, float(budget)), dtype=np.float64).copy()
    wall = 0.0
    if core.uncompletable() >= 0:
        st.cnt[REASON] = STALLED
    while True:
        code = advance(arr, st)
        for v in [u for u in draws if st.ni[INFLIGHT, u] == 0]:  # the batch that just ended: settled
            d = draws.pop(v)
            _answers(core, v, d, np.inf)
            st.scal[BUDGET_LEFT] += _extra(core.end_batch(v), d)
        if code == ENDED:
            break
        t = float(st.scal[T])
        for v, d in draws.items():
            _answers(core, v, d, t)
        ready = np.asarray(core.ready(), dtype=np.int64)
        view = DecisionView(arr=arr, t=t, budget_left=float(st.scal[BUDGET_LEFT]), deadline=float(deadline),
                            completed=core.completed.copy(), ready=ready,
                            seed=seed, dag=dag, trial=trial, decision_index=int(st.cnt[DECISIONS]),
                            **inflight_view(core, resid, t))
        t0 = time.perf_counter()
        action = policy.act(view) if len(ready) else None
        wall += time.perf_counter() - t0
        st.cnt[PLANNER_CALLS] += 1 if (len(ready) or per_attempt) else 0
        st.cnt[DECISIONS] += 1
        if action is not None:
            models, counts = (np.asarray(a, dtype=np.int64) for a in action)
            if per_attempt:
                launch_per_attempt_live(arr, st, core, tables, draws, view.ready, models, counts, cap)
            elif launch_atomic_live(arr, st, core, tables, draws, view.ready, models, counts):
                break
        if code == NEED_DECISION_IDLE and st.cnt[N_INFLIGHT] == 0:  # nothing in flight, nothing launched
            fits = core.launch_fits(lambda v, j: float(arr.kappa[v, j]),
                                    lambda v: min(float(st.scal[BUDGET_LEFT]), cap[v] - float(st.nf[NODE_COST, v])))
            st.cnt[REASON] = (DEADLINE_EXHAUSTED if st.scal[T] >= st.scal[DEADLINE] else STALLED if fits
                              else BUDGET_EXHAUSTED)
            break
    t_end = float(st.scal[T])
    for v, d in draws.items():  # the deadline: samples still running are lost, charged their whole reservation
        _answers(core, v, d, t_end)
        b = core.batches[v]
        running = np.array([x == RUNNING for x in b.states], dtype=np.bool_)
        more = float((np.asarray(b.reservations)[running] - d.charges[running]).sum())
        st.scal[BUDGET_LEFT] += _extra(b, d) - more
        st.nf[NODE_COST, v] += more
        for i in np.flatnonzero(running):
            core.lose(v, int(i))
    result: EpisodeResult = episode_result(st, policy, deadline, wall)
    return result


def _answers(core: LiveCore, v: int, d: Draws, t: float) -> None:
    """Tell the core of node ``v``'s samples that answered by time ``t`` (their draws say when and how)."""
    while d.told < len(d.order) and d.ends[d.order[d.told]] <= t:
        i = d.order[d.told]
        d.told += 1
        core.answer(v, i, bool(d.passed[i]))


def _enter(arr: DagArrays, st, start: LiveState, draws: dict[int, Draws]) -> None:
    """Put ``start`` into a fresh state: completed nodes, and each running sample drawn again given its elapsed
    time (a row of its (node, model) longer than that, or a parametric draw kept when longer; its remaining time
    the difference), with the episode's own keys."""
    from simulator.engine.loop import COMPLETED_, N_COMPLETED, PARENTS_DONE

    budget_left = float(st.scal[BUDGET_LEFT])
    for v in np.flatnonzero(start.completed):
        st.ni[COMPLETED_, v] = 1
        st.cnt[N_COMPLETED] += 1
        for e in range(arr.child_ptr[v], arr.child_ptr[v + 1]):
            st.ni[PARENTS_DONE, arr.child_idx[e]] += 1
    for f in start.inflight:
        lat, passed, charges = _residual_draws(arr, st.key[0], f)
        add_batch(arr, st, f.v, f.j, lat, passed | f.passed, charges)
        draws[f.v] = Draws(lat, passed, charges)
    st.scal[BUDGET_LEFT] = budget_left  # what the decision saw: the batches hold their reservations


def _residual_draws(arr: DagArrays, key0, f: LiveFlight):
    """Remaining latencies, successes and charges of a batch's running samples given their elapsed time."""
    from simulator.base.rng import randint

    lo, hi = arr.row_ptr[f.v * arr.m + f.j], arr.row_ptr[f.v * arr.m + f.j + 1]
    base = fold(node_model_key(key0, f.v, f.j), 1 << 40)  # a stream of its own: not an attempt number
    lat, passed, charges = np.empty(f.running), np.empty(f.running, dtype=np.bool_), np.empty(f.running)
    longer = np.flatnonzero(arr.row_lat[lo:hi] > f.elapsed) + lo if hi > lo else np.zeros(0, dtype=np.int64)
    for i in range(f.running):
        key = np.uint64(fold(base, i))
        if hi > lo and len(longer):
            r = int(longer[randint(key, 0, len(longer))])
            lat[i], ok, c = arr.row_lat[r] - f.elapsed, bool(arr.row_succ[r]), float(arr.row_charge[r])
        else:
            x, ok, c = OVERDUE_S, False, 0.0
            for a in range(64):
                d, ok, c = draw_attempt(arr, f.v, f.j, np.uint64(fold(key, a + 1)))
                if d > f.elapsed:
                    x = d - f.elapsed
                    break
            lat[i] = x
        charges[i], cut = capped_charge(c, f.reservation)
        passed[i] = ok and not cut
    return lat, passed, charges


def inflight_view(core: LiveCore, resid: Residuals, t: float) -> dict:
    """The planner's view of in-flight batches at time t (:meth:`LiveCore.inflight`), as the view's arrays."""
    rows = core.inflight(resid.remaining, t)
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    rem: list[float] = []
    for q, (_, _, r, _) in enumerate(rows):
        rem += r
        ptr[q + 1] = len(rem)
    return {"inflight_node": np.array([r[0] for r in rows], dtype=np.int64),
            "inflight_model": np.array([r[1] for r in rows], dtype=np.int64),
            "already_success": np.array([r[3] for r in rows], dtype=np.bool_), "remaining_ptr": ptr,
            "remaining": np.asarray(rem, dtype=np.float64)}


def _start(arr, st, draws: dict[int, Draws], v: int, b: CoreBatch) -> None:
    """Draw and start the batch the core opened on node ``v``; it holds its reservations beyond its charges."""
    lat, passed, charges = draw_batch(arr, st.key[0], v, b.j, b.attempts[0], np.asarray(b.reservations))
    add_batch(arr, st, v, b.j, lat, passed, charges)
    d = Draws(float(st.scal[T]) + lat, passed, charges)
    st.scal[BUDGET_LEFT] -= _extra(b, d)
    draws[v] = d


def launch_atomic_live(arr, st, core: LiveCore, tables: LiveRulesArrays, draws, ready, models, counts) -> bool:
    """The atomic launch under live rules (:meth:`simulator.engine.live_core.LiveCore.launch_atomic`); True when
    the episode ended (``stalled`` or ``budget_exhausted``)."""
    adm, opened = core.launch_atomic(ready, models, counts, float(st.scal[T]),
                                     expected=lambda v, j: float(arr.kappa[v, j]),
                                     ceiling=lambda v, j: float(tables.ceiling[v, j]),
                                     budget_left=float(st.scal[BUDGET_LEFT]), unit=tables.unit,
                                     take=lambda v, j, a, r: r)
    if adm.what in (STALL, END):
        st.cnt[REASON] = STALLED if adm.what == STALL else BUDGET_EXHAUSTED
        return True
    for v, b in opened:
        _start(arr, st, draws, v, b)
    return False


def launch_per_attempt_live(arr, st, core: LiveCore, tables: LiveRulesArrays, draws, ready, models, counts,
                            cap) -> None:
    """The per-attempt launch under live rules (:meth:`simulator.engine.live_core.LiveCore.launch_per_attempt`):
    a node's room is the budget left within its static cap, less what its earlier samples reserved."""
    book: dict[int, list[float]] = {}  # per node: budget left, node's committed cost

    def room(v: int) -> float:
        bk = book.setdefault(v, [float(st.scal[BUDGET_LEFT]), float(st.nf[NODE_COST, v])])
        return min(bk[0], cap[v] - bk[1])

    def take(v: int, j: int, a: int, r: float) -> float:
        book[v][0] -= r
        book[v][1] += r
        return r

    for v, _, b, _ in core.launch_per_attempt(ready, models, counts, float(st.scal[T]),
                                              expected=lambda v, j: float(arr.kappa[v, j]),
                                              ceiling=lambda v, j: float(tables.ceiling[v, j]), room=room,
                                              unit=tables.unit, take=take):
        if b is not None:
            _start(arr, st, draws, v, b)


#: the calibrated estimate's episodes draw with this seed offset: independent of the search and of the run
CALIBRATION_SEED_OFFSET = 1_000_003


def calibrated_estimate(arr: DagArrays, policy, budget_left: float, time_left: float, start: LiveState | None, *,
                        seed: int, dag: int, episodes: int, per_attempt: bool = False) -> float:
    """What the user gets from here: the on-time rate of ``episodes`` whole episodes of the method, as it runs.

    Each episode continues the run from ``start`` under the live rules, the
    method deciding at every batch end as it will, with draws keyed by
    ``seed + CALIBRATION_SEED_OFFSET`` (independent of the planner's
    search and of the run's own luck). ``policy`` is a policy object of
    the method's own (it is reset for every episode).
    """
    from simulator.engine.loop import MAX_EVENTS

    wins = 0
    for s in range(int(episodes)):
        r = run_live_episode(arr, policy, float(budget_left), float(time_left), int(seed) + CALIBRATION_SEED_OFFSET,
                             dag, s, max_events=MAX_EVENTS, per_attempt=per_attempt, start=start)
        wins += int(r.success and r.makespan <= time_left)
    return wins / max(1, int(episodes))

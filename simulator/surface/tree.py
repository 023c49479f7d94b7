"""One MCPP trial for every (budget, deadline) cell at once: a tree of trajectories.

Cells that took the same decisions have met the same draws (execution draws
are keyed by (seed, DAG, trial, node, model, attempt), the planner's by
(seed, DAG, trial, decision, ...)), so they share one engine state; only
their remaining budget and deadline differ. A group of cells runs as one
episode of :func:`simulator.engine.episode.run_policy_episode` (atomic
launch, hard deadline), written for many cells:

* the event loop runs with the group's latest deadline; a batch ending at
  e ends every cell whose deadline is <= e (``deadline_exhausted``, makespan
  = its deadline), as the cell's own loop would;
* a decision is made for all the group's cells by one planner evaluation
  (:func:`simulator.surface.decide.decide_cells`); cells that chose the
  same candidate stay together, the others fork a copy of the state;
* a launch is drawn once; per cell, the drawn latency beyond its time left
  ends it ``deadline_exhausted``, else a cost beyond its budget left
  ``budget_exhausted``, else it is charged attempt by attempt in the
  engine's order (the same floating-point operations as the engine).

The outcome of each cell (reason, makespan, total cost) is bit-identical to
its own episode (``tests/test_surface.py``). The work grows with the number
of branches of the tree, not with the number of cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.base.jit import compiled_only, njit
from simulator.costs.arrays import DagArrays
from simulator.engine.episode import DecisionView, InflightAttempts
from simulator.engine.loop import (
    BUDGET_EXHAUSTED,
    BUDGET_LEFT,
    COMPLETED,
    DEADLINE,
    DEADLINE_EXHAUSTED,
    DECISIONS,
    ENDED,
    EVENT_CAP,
    EVENT_LIMIT,
    MAX_EVENTS,
    N_INFLIGHT,
    NEED_DECISION_IDLE,
    PLANNER_CALLS,
    REASON,
    RUNNING,
    STALLED,
    EpisodeState,
    T,
    advance,
    draw_launch,
    first_uncompletable,
    launch_atomic,
    new_state,
    no_progress_reason,
    ready_nodes,
)
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.surface.decide import decide_cells


@dataclass
class CellOutcomes:
    """Per cell (flattened budget-major: k = budget index x deadlines + deadline index) of one trial."""

    reason: np.ndarray  # int64 codes into engine.REASONS
    makespan: np.ndarray  # float64
    total_cost: np.ndarray  # float64

    @property
    def success(self) -> np.ndarray:
        return self.reason == COMPLETED


def _copy_state(st: EpisodeState) -> EpisodeState:
    return EpisodeState(*(a.copy() for a in st))


def _copy_attempts(att: InflightAttempts) -> InflightAttempts:
    out = InflightAttempts(len(att.ends))
    out.ends = list(att.ends)  # arrays are replaced, never changed in place: a shallow copy is enough
    out.succ = list(att.succ)
    return out


class _Branch:
    """Cells sharing one state: their indices, budgets left and deadlines."""

    __slots__ = ("st", "att", "cells", "b")

    def __init__(self, st, att, cells, b) -> None:
        self.st, self.att, self.cells, self.b = st, att, cells, b


def mcpp_trial_cells(
    arr: DagArrays,
    policy: MCPortfolioPolicy,
    budgets: np.ndarray,
    deadlines: np.ndarray,
    seed: int,
    dag: int,
    trial: int,
    stats: dict | None = None,
) -> CellOutcomes:
    """Every cell's outcome of MCPP trial ``trial`` (cells = budgets x deadlines, budget-major).

    ``policy`` must plan with the atomic rule and the faithful or ``crn``
    evaluation (what :func:`decide_cells` reproduces); ``stats`` (optional)
    counts ``decisions`` (planner evaluations) and ``branches``.
    """
    B = np.repeat(np.asarray(budgets, dtype=np.float64), len(deadlines))
    D = np.tile(np.asarray(deadlines, dtype=np.float64), len(budgets))
    K = len(B)
    reason = np.full(K, RUNNING, dtype=np.int64)
    makespan = np.zeros(K)
    left = B.copy()  # budget left at the end, per cell
    n, m = arr.n, arr.m
    st = new_state(n, m, math.inf, float(D.max()), seed, dag, trial)
    st.cnt[EVENT_CAP] = MAX_EVENTS
    policy.reset(arr, seed, dag, trial)
    mask = np.zeros(m, dtype=np.bool_)
    mask[policy.model_positions(arr)] = True
    if first_uncompletable(arr, mask, False) >= 0:
        reason[:] = STALLED
        return CellOutcomes(reason, makespan, B - left)
    ready_buf = np.empty(n, dtype=np.int64)
    no_cap = np.full(n, np.inf)
    stack = [_Branch(st, InflightAttempts(n), np.arange(K), B.copy())]
    if stats is not None:
        stats.setdefault("decisions", 0)
        stats.setdefault("branches", 0)
        stats["branches"] += 1

    outcome = (reason, makespan, left)

    def end(cells, b, why, t_end):
        _end_cells(outcome, cells, b, why, np.full(cells.shape, t_end) if np.ndim(t_end) == 0 else t_end)

    while stack:
        br = stack.pop()
        st, att, cells, b = br.st, br.att, br.cells, br.b
        while len(cells):
            st.scal[DEADLINE] = D[cells].max()
            code = advance(arr, st)
            t = float(st.scal[T])
            why = int(st.cnt[REASON])
            if code == ENDED:
                if why == COMPLETED or why == EVENT_LIMIT:
                    # completion is checked before the deadline; the event limit only while t < D
                    late = D[cells] < t if why == COMPLETED else D[cells] <= t
                    end(cells[late], b[late], DEADLINE_EXHAUSTED, D[cells[late]])
                    end(cells[~late], b[~late], why, t)
                else:  # deadline_exhausted at the group's latest deadline: every cell at its own
                    end(cells, b, DEADLINE_EXHAUSTED, D[cells])
                break
            late = D[cells] <= t  # the batch ending at t ends these cells' episodes at their deadlines
            if late.any():
                end(cells[late], b[late], DEADLINE_EXHAUSTED, D[cells[late]])
                cells, b = cells[~late], b[~late]
                if not len(cells):
                    break
                st.scal[DEADLINE] = D[cells].max()
            n_ready = ready_nodes(arr, st, ready_buf)
            decision_index = int(st.cnt[DECISIONS])
            st.cnt[PLANNER_CALLS] += 1 if n_ready else 0
            st.cnt[DECISIONS] += 1
            choice = None
            if n_ready:
                nodes, models, already, ptr, remaining = att.view_arrays(st, t)
                view = DecisionView(
                    arr=arr, t=t, budget_left=float(b.max()), deadline=float(st.scal[DEADLINE]),
                    completed=st.completed.copy(), ready=ready_buf[:n_ready].copy(), inflight_node=nodes,
                    inflight_model=models, already_success=already, remaining_ptr=ptr, remaining=remaining,
                    seed=seed, dag=dag, trial=trial, decision_index=decision_index,
                )  # fmt: skip
                if stats is not None:
                    stats["decisions"] += 1
                choice = decide_cells(policy, view, b, D[cells] - t)
            if choice is None:
                if code == NEED_DECISION_IDLE and st.cnt[N_INFLIGHT] == 0:
                    for q, c in enumerate(cells):  # the no-progress reason reads each cell's budget and deadline
                        st.scal[BUDGET_LEFT], st.scal[DEADLINE] = b[q], D[c]
                        end(np.array([c]), b[q : q + 1], no_progress_reason(arr, st, mask, False, no_cap), t)
                    break
                continue
            cand, cand_model, cand_count, ready = choice
            groups = cand if len(cand) == 1 else np.unique(cand)  # one cell: np.unique's answer, without its cost
            for gi, g in enumerate(groups):
                sel = cand == g
                if gi == len(groups) - 1:
                    gst, gatt = st, att
                else:
                    gst, gatt = _copy_state(st), _copy_attempts(att)
                    if stats is not None:
                        stats["branches"] += 1
                gcells, gb = _launch(arr, gst, gatt, ready, cand_model[g], cand_count[g], cells[sel], b[sel], t=t, D=D,
                                     outcome=outcome)
                if gi == len(groups) - 1:
                    cells, b = gcells, gb
                elif len(gcells):
                    stack.append(_Branch(gst, gatt, gcells, gb))
            # the last group goes on in this loop
    return CellOutcomes(reason, makespan, B - left)


@compiled_only
def _end_cell(outcome, c, why, t_end, b_left):
    """Cell c's episode ends: its reason, its makespan and its budget left (``outcome``: the three arrays)."""
    reason, makespan, left = outcome
    reason[c] = why
    makespan[c] = t_end
    left[c] = b_left


@njit(cache=True, nogil=True)
def _end_cells(outcome, cells, b, why, t_end):
    """:func:`_end_cell` for each of ``cells`` (budgets left ``b``, ends ``t_end``): the tree's Python ends cells here."""
    for q in range(cells.shape[0]):
        _end_cell(outcome, cells[q], why, t_end[q], b[q])


@njit(cache=True, nogil=True)
def _launch_cells(arr, st, ready, action, branch, D, t, outcome):
    """Draw one candidate's launch once and end, per cell, what its own limits end (atomic rule).

    A drawn latency beyond a cell's time left ends it ``deadline_exhausted`` (at its deadline), else
    a cost beyond its budget left ``budget_exhausted`` (at t); the other cells are charged attempt by
    attempt in the engine's order (the same roundings) and the state launches without limits.
    ``action`` is the candidate's ``(model, count)`` per ready node, ``branch`` the ``(cells, budgets
    left)`` it launches for, ``outcome`` ``(reason, makespan, left)``, written for the cells that end.
    Returns the cells that go on, their budgets left, and the launch's counts per node, latencies and
    successes.
    """
    row_model, row_count = action
    cells, b = branch
    n = arr.n
    act_model = np.full(n, -1, dtype=np.int64)
    act_count = np.zeros(n, dtype=np.int64)
    total = 0
    for r in range(ready.shape[0]):
        act_model[ready[r]] = row_model[r]
        act_count[ready[r]] = row_count[r]
        total += max(row_count[r], 0)
    lat = np.empty(max(total, 1))
    succ = np.empty(max(total, 1), dtype=np.bool_)
    charge = np.empty(max(total, 1))
    max_lat, cost = draw_launch(arr, st.key[0], st.attempt_no, ready, ready.shape[0], act_model, act_count, lat, succ,
                                charge)  # fmt: skip
    go_cells = np.empty_like(cells)
    go_b = np.empty_like(b)
    go = 0
    for q in range(cells.shape[0]):
        c = cells[q]
        if max_lat > D[c] - t:
            _end_cell(outcome, c, DEADLINE_EXHAUSTED, D[c], b[q])
        elif cost > b[q]:
            _end_cell(outcome, c, BUDGET_EXHAUSTED, t, b[q])
        else:
            x = b[q]
            for a in range(total):
                x -= charge[a]
            go_cells[go], go_b[go] = c, x
            go += 1
    if go:
        st.scal[DEADLINE] = np.inf
        st.scal[BUDGET_LEFT] = np.inf
        if launch_atomic(arr, st, ready, ready.shape[0], act_model, act_count, lat, succ):
            raise RuntimeError("surface: a launch without limits ended the episode")  # cannot happen
    return go_cells[:go], go_b[:go], act_count, lat, succ


def _launch(arr, st, att, ready, row_model, row_count, cells, b, *, t, D, outcome):
    """Launch one candidate for ``cells`` (atomic rule, each cell its own limits); the cells that go on."""
    cells, b, act_count, lat, succ = _launch_cells(arr, st, ready, (row_model, row_count), (cells, b), D, t, outcome)
    if len(cells):
        i = 0
        for v in ready:
            c = int(act_count[v])
            att.ends[v] = t + lat[i : i + c]
            att.succ[v] = succ[i : i + c].copy()
            i += c
    return cells, b

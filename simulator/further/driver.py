"""Episodes of the further policies: Python decisions, the per-attempt launch, the compiled engine.

The event loop, draws and launches are :mod:`simulator.engine`'s; only the
decision calls back into Python. The rules are those of the baselines
(per-attempt launch, served in decreasing count, ties to the higher node id;
every decision counts as a planner call; no progress ends with the legacy
model's affordability check). LOADER methods run with ``D = inf`` and are
scored for every deadline afterwards; the Chernoff methods run with the hard
deadline.

The policies see in-flight attempts with their exact remaining times: the
latencies of a launched batch are re-derived from the same keyed draws the
launch used (attempt ``i`` of node ``v`` with model ``j`` is a pure function
of its key), so nothing is drawn twice differently.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arrays import DagArrays
from ..engine import (
    BATCH_END,
    BUDGET_LEFT,
    DEADLINE,
    DECISIONS,
    ENDED,
    N_INFLIGHT,
    NEED_DECISION_IDLE,
    PLANNER_CALLS,
    REASON,
    REASONS,
    ROLLOUTS,
    T,
    advance,
    draw_attempt,
    launch_per_attempt,
    new_state,
    no_progress_reason,
    node_model_key,
    ready_nodes,
    total_cost,
)
from ..episode import DecisionView, EpisodeResult
from ..rng import fold
from .policies import FurtherPolicy


def run_further_episode(
    arr: DagArrays,
    policy: FurtherPolicy,
    budget: float,
    deadline: float,
    seed: int,
    dag: int,
    trial: int,
) -> EpisodeResult:
    """One episode of ``policy`` with the per-attempt launch (``deadline`` inf for LOADER)."""
    n, m = arr.n, arr.m
    st = new_state(n, m, float(budget), float(deadline), seed, dag, trial)
    policy.reset(arr, seed, dag, trial)
    ends: list[np.ndarray | None] = [None] * n
    succ: list[np.ndarray | None] = [None] * n
    ready_buf = np.empty(n, dtype=np.int64)
    order_buf = np.empty(n, dtype=np.int64)
    cap = np.full(n, np.inf)
    mask = np.zeros(m, dtype=np.bool_)
    empty_i = np.zeros(0, dtype=np.int64)
    wall = 0.0
    while True:
        code = advance(arr, st)
        if code == ENDED:
            break
        n_ready = ready_nodes(arr, st, ready_buf)
        t = float(st.scal[T])
        nodes = np.sort(st.inflight_list[: st.cnt[N_INFLIGHT]]).astype(np.int64)
        ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        rem: list[np.ndarray] = []
        already = np.zeros(len(nodes), dtype=np.bool_)
        for q, v in enumerate(nodes):
            e, s = ends[v], succ[v]
            done = e <= t
            already[q] = bool(np.any(s & done))
            rem.append(e[~done] - t)
            ptr[q + 1] = ptr[q] + int((~done).sum())
        view = DecisionView(
            arr=arr, t=t, budget_left=float(st.scal[BUDGET_LEFT]), deadline=float(st.scal[DEADLINE]),
            completed=st.completed.copy(), ready=ready_buf[:n_ready].copy(), inflight_node=nodes,
            inflight_model=st.batch_model[nodes] if len(nodes) else empty_i, already_success=already,
            remaining_ptr=ptr, remaining=np.concatenate(rem) if rem else np.zeros(0), seed=seed, dag=dag,
            trial=trial, decision_index=int(st.cnt[DECISIONS]),
        )  # fmt: skip
        t0 = time.perf_counter()
        action = policy.act(view)
        wall += time.perf_counter() - t0
        st.cnt[PLANNER_CALLS] += 1
        st.cnt[DECISIONS] += 1
        if action is not None and n_ready:
            req_model = np.ascontiguousarray(action[0], dtype=np.int64).copy()
            req_count = np.ascontiguousarray(action[1], dtype=np.int64).copy()
            before = st.attempt_no.copy()
            launch_per_attempt(arr, st, req_model, req_count, cap, order_buf)
            for v in ready_buf[:n_ready]:
                j = int(req_model[v])
                if j < 0:
                    continue
                a0 = int(before[v * m + j])
                k = int(st.attempt_no[v * m + j]) - a0
                if k <= 0:
                    continue
                base = np.uint64(node_model_key(st.key[0], v, j))
                lat = np.empty(k)
                ok = np.empty(k, dtype=np.bool_)
                for i in range(k):
                    lat[i], ok[i], _ = draw_attempt(arr, v, j, np.uint64(fold(base, a0 + i)))
                ends[v] = t + lat
                succ[v] = ok
                if ends[v].max() != st.nf[BATCH_END, v]:  # the re-derived draws must be the launched ones
                    raise RuntimeError(f"node {int(arr.node_ids[v])}: in-flight view out of step with the engine")
        if code == NEED_DECISION_IDLE and st.cnt[N_INFLIGHT] == 0:
            st.cnt[REASON] = no_progress_reason(arr, st, mask, True, cap)
            break
    reason = int(st.cnt[REASON])
    return EpisodeResult(
        success=reason == 0,
        termination_reason=REASONS[reason],
        makespan=float(st.scal[T]),
        deadline=float(deadline),
        total_cost=float(total_cost(st)),
        planner_calls=int(st.cnt[PLANNER_CALLS]),
        planner_wall_ms=wall * 1000.0,
        total_rollouts=int(st.cnt[ROLLOUTS]),
        completion_fraction=float(st.completed.mean()),
        node_completed=st.completed.copy(),
        node_started=st.num_started.copy(),
        node_finished=st.num_finished.copy(),
        node_success=st.num_success.copy(),
        node_cost=st.node_cost.copy(),
        diagnostics=policy.episode_diagnostics() or {},
    )


@dataclass
class FurtherTrials:
    """Per-trial results of one further method on one DAG and budget (the fields of an episode batch)."""

    method: str
    budget: float
    deadline: float  # simulated: inf for LOADER
    trials: np.ndarray
    reason: np.ndarray  # int codes into engine.REASONS
    makespan: np.ndarray
    total_cost: np.ndarray
    completion_fraction: np.ndarray
    total_rollouts: np.ndarray
    planner_calls: np.ndarray
    planner_wall_ms: np.ndarray
    node_stats: np.ndarray  # int64 (T, n, 4): completed, started, finished, successes
    node_cost: np.ndarray
    diagnostics: list[dict]

    def on_time(self, deadline: float) -> np.ndarray:
        return (self.reason == 0) & (self.makespan <= deadline)


def simulate_further(
    arr: DagArrays,
    method: str,
    budget: float,
    deadline: float,
    trials: Sequence[int],
    seed: int,
    dag: int,
    params: Mapping[str, Any] | None = None,
    planning_arr: DagArrays | None = None,
) -> FurtherTrials:
    """Every trial of ``method`` (LOADER: ``deadline`` is ignored, D = inf)."""
    policy = FurtherPolicy(method, params, planning_arr)
    D = float(deadline) if policy.hard_deadline else math.inf
    res = [run_further_episode(arr, policy, budget, D, seed, dag, int(tr)) for tr in trials]
    T_ = len(res)
    node_i = np.zeros((T_, arr.n, 4), dtype=np.int64)
    node_c = np.zeros((T_, arr.n))
    for q, r in enumerate(res):
        node_i[q, :, 0] = r.node_completed
        node_i[q, :, 1] = r.node_started
        node_i[q, :, 2] = r.node_finished
        node_i[q, :, 3] = r.node_success
        node_c[q] = r.node_cost
    return FurtherTrials(
        method=method, budget=float(budget), deadline=D, trials=np.asarray(trials, dtype=np.int64),
        reason=np.array([REASONS.index(r.termination_reason) for r in res], dtype=np.int64),
        makespan=np.array([r.makespan for r in res]), total_cost=np.array([r.total_cost for r in res]),
        completion_fraction=np.array([r.completion_fraction for r in res]),
        total_rollouts=np.array([r.total_rollouts for r in res], dtype=np.int64),
        planner_calls=np.array([r.planner_calls for r in res], dtype=np.int64),
        planner_wall_ms=np.array([r.planner_wall_ms for r in res]), node_stats=node_i, node_cost=node_c,
        diagnostics=[r.diagnostics for r in res],
    )  # fmt: skip

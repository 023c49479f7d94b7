"""Python policy interface and the episode driver of Python policies, under either launch rule.

The event loop, draws and launches are the compiled functions of
:mod:`simulator.engine.loop`; only the decision itself calls back into Python, so
a planner (which runs its own compiled kernel) sees exactly the simulator's
semantics. A policy implements :class:`Policy`; at each decision it receives a
:class:`DecisionView` and returns per-node (model, count) arrays or ``None``.
The launch rule (``atomic`` as MCPP, ``per_attempt`` as the baselines) and
the deadline (a finite one is hard; ``inf`` to simulate once and score every
deadline afterwards) are arguments, so a policy's registry entry chooses them.
"""

from __future__ import annotations

import time

import numpy as np

from simulator.base import prewarm
from simulator.base.rng import fold
from simulator.costs.arrays import DagArrays
from simulator.engine.live_episode import run_live_episode
from simulator.engine.loop import (
    BATCH_END,
    BUDGET_LEFT,
    DEADLINE,
    DECISIONS,
    ENDED,
    EVENT_CAP,
    MAX_EVENTS,
    N_INFLIGHT,
    NEED_DECISION_IDLE,
    PLANNER_CALLS,
    REASON,
    STALLED,
    EpisodeState,
    T,
    advance,
    draw_attempt,
    first_uncompletable,
    launch_atomic,
    launch_per_attempt,
    new_state,
    no_progress_reason,
    node_model_key,
    ready_nodes,
)
from simulator.engine.registry import ATOMIC, LAUNCH_RULES, LIVE_LAUNCH_RULES, LIVE_PER_ATTEMPT, PER_ATTEMPT
from simulator.engine.types import DecisionView, EpisodeResult, episode_result


class Policy:
    """A decision rule plugged into :func:`run_policy_episode` (and the executor and the surface).

    Every member a caller may use is declared here with its default, so no
    caller probes a policy: subclass it and override what differs. Required:
    ``name``, :meth:`reset`, :meth:`act`. Optional, with defaults:
    :meth:`model_positions` (the models it may launch; all),
    ``legacy_only`` (True: it launches each node's legacy model only, as the
    baselines), :meth:`budget_caps` (per-node caps on cumulative cost under
    the per-attempt launch, as the static baselines' shares; none),
    ``plans`` with :meth:`decide` (a planner returning a decision with an
    estimate, which the executor logs), ``planning_arr`` with
    ``uses_planning_arr`` (statistics the planner plans with, which the
    executor's posterior update replaces) and :meth:`episode_diagnostics`.
    ``simulator.policies.checks.check_policy`` tests a policy against this
    contract.
    """

    name: str = ""
    #: True: it launches each node's legacy model only (the baselines)
    legacy_only: bool = False
    #: True: it has :meth:`decide` (a planner's decision with ``act_model``, ``act_count`` and ``score``)
    plans: bool = False
    #: True: it plans with ``planning_arr`` (None: the episode's arrays), which a caller may replace before reset
    uses_planning_arr: bool = False
    planning_arr: DagArrays | None = None

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        """Called once before an episode (build per-episode tables here)."""

    def act(self, view: DecisionView) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-node (model position, count) arrays of length n; count >= 1 on every ready node."""
        raise NotImplementedError(f"{type(self).__name__}.act")

    def decide(self, view: DecisionView):
        """A planner's decision (``plans`` True only): ``act_model``, ``act_count``, ``score``; None: no action."""
        raise NotImplementedError(f"{type(self).__name__} does not plan (plans is False)")

    def model_positions(self, arr: DagArrays) -> np.ndarray:
        """Positions of the models it may launch (default: every model)."""
        return np.arange(arr.m)

    def budget_caps(self, arr: DagArrays, budget: float) -> np.ndarray:
        """Per-node caps on cumulative cost under the per-attempt launch (default: none, infinite)."""
        return np.full(arr.n, np.inf)

    def episode_diagnostics(self) -> dict:
        """Summary of the episode's decisions, merged into the episode record."""
        return {}


class InflightAttempts:
    """Absolute end times and successes of the attempts of each in-flight batch."""

    def __init__(self, n: int) -> None:
        self.ends: list[np.ndarray | None] = [None] * n
        self.succ: list[np.ndarray | None] = [None] * n

    def view_arrays(self, st: EpisodeState, t: float):
        nodes = np.sort(st.inflight_list[: st.cnt[N_INFLIGHT]])
        models = st.batch_model[nodes]
        already = np.zeros(len(nodes), dtype=np.bool_)
        ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        rem: list[np.ndarray] = []
        for q, v in enumerate(nodes):
            ends, succ = self.ends[v], self.succ[v]
            done = ends <= t
            already[q] = bool(np.any(succ & done))
            r = ends[~done] - t
            rem.append(r)
            ptr[q + 1] = ptr[q] + len(r)
        remaining = np.concatenate(rem) if rem else np.zeros(0)
        return nodes.astype(np.int64), models, already, ptr, remaining

    def launch_per_attempt(self, arr: DagArrays, st: EpisodeState, ready, action, cap, order_buf) -> None:
        """Launch ``action`` with the per-attempt rule and remember the launched attempts' draws.

        The engine does not return the draws of a per-attempt launch; they are
        re-derived from the same keys (attempt ``i`` of node ``v`` with model
        ``j`` is a pure function of its key), so nothing is drawn twice differently.
        """
        m = arr.m
        req_model = np.ascontiguousarray(action[0], dtype=np.int64).copy()
        req_count = np.ascontiguousarray(action[1], dtype=np.int64).copy()
        before = st.attempt_no.copy()
        started = st.num_started.copy()
        launch_per_attempt(arr, st, req_model, req_count, cap, order_buf)
        for v in ready:
            j = int(req_model[v])
            if j < 0:
                continue
            a0 = int(before[v * m + j])
            k = int(st.num_started[v] - started[v])  # launched attempts (a refused draw used a number too)
            if k <= 0:
                continue
            base = np.uint64(node_model_key(st.key[0], v, j))
            lat = np.empty(k)
            ok = np.empty(k, dtype=np.bool_)
            for i in range(k):
                lat[i], ok[i], _ = draw_attempt(arr, v, j, np.uint64(fold(base, a0 + i)))
            self.ends[v] = st.scal[T] + lat
            self.succ[v] = ok
            if self.ends[v].max() != st.nf[BATCH_END, v]:  # the re-derived draws must be the launched ones
                raise RuntimeError(f"node {int(arr.node_ids[v])}: in-flight view out of step with the engine")


def run_policy_episode(
    arr: DagArrays,
    policy: Policy,
    budget: float,
    deadline: float,
    seed: int,
    dag: int,
    trial: int,
    max_events: int = MAX_EVENTS,
    launch: str = ATOMIC,
) -> EpisodeResult:
    """Run one episode of ``policy`` under the ``launch`` rule (a finite ``deadline`` is hard).

    ``atomic`` (MCPP's rule): the policy is asked only when some node is
    ready; a whole batch is drawn at once and any over-budget or over-deadline
    draw ends the episode. ``per_attempt`` (the baselines' rule): every
    decision counts as a planner call, attempts are charged as they start and
    one the budget (or the node's cap) cannot pay is refused.

    Every episode ends: one with a node none of the policy's models can ever
    complete ends ``stalled`` at once, and one reaching ``max_events`` batch
    ends ends ``event_limit`` (each pass of the loop below consumes an event
    or ends the episode, so the loop is bounded too).
    """
    if launch in LIVE_LAUNCH_RULES:
        return run_live_episode(arr, policy, budget, deadline, seed, dag, trial, max_events=max_events,
                                per_attempt=launch == LIVE_PER_ATTEMPT)
    if launch not in LAUNCH_RULES:
        raise ValueError(f"launch rule {launch!r} is not one of {', '.join(LAUNCH_RULES + LIVE_LAUNCH_RULES)}")
    per_attempt = launch == PER_ATTEMPT
    st = new_state(arr.n, arr.m, float(budget), float(deadline), seed, dag, trial)
    st.cnt[EVENT_CAP] = max_events
    policy.reset(arr, seed, dag, trial)
    attempts = InflightAttempts(arr.n)
    ready_buf = np.empty(arr.n, dtype=np.int64)
    order_buf = np.empty(arr.n, dtype=np.int64)
    wall = 0.0
    mask = np.zeros(arr.m, dtype=np.bool_)
    mask[policy.model_positions(arr)] = True
    legacy_only = bool(policy.legacy_only)
    cap = np.asarray(policy.budget_caps(arr, float(budget)), dtype=np.float64).copy()
    if first_uncompletable(arr, mask, legacy_only) >= 0:
        st.cnt[REASON] = STALLED
    if not per_attempt and prewarm.running():  # cold start: compiled while the helper compiles the kernel
        i64 = np.zeros(1, dtype=np.int64)
        prewarm.compile_ahead(launch_atomic, arr, st, i64, 1, i64, i64, np.zeros(1), np.zeros(1, dtype=np.bool_))
    while True:
        code = advance(arr, st)
        if code == ENDED:
            break
        n_ready = ready_nodes(arr, st, ready_buf)
        t = float(st.scal[T])
        nodes, models, already, ptr, remaining = attempts.view_arrays(st, t)
        view = DecisionView(
            arr=arr,
            t=t,
            budget_left=float(st.scal[BUDGET_LEFT]),
            deadline=float(st.scal[DEADLINE]),
            completed=st.completed.copy(),
            ready=ready_buf[:n_ready].copy(),
            inflight_node=nodes,
            inflight_model=models,
            already_success=already,
            remaining_ptr=ptr,
            remaining=remaining,
            seed=seed,
            dag=dag,
            trial=trial,
            decision_index=int(st.cnt[DECISIONS]),
        )
        t0 = time.perf_counter()
        action = policy.act(view) if n_ready else None
        wall += time.perf_counter() - t0
        st.cnt[PLANNER_CALLS] += 1 if (n_ready or per_attempt) else 0
        st.cnt[DECISIONS] += 1
        if action is not None and per_attempt:
            attempts.launch_per_attempt(arr, st, view.ready, action, cap, order_buf)
        elif action is not None:
            act_model, act_count = (np.asarray(a, dtype=np.int64) for a in action)
            total = int(act_count[view.ready].clip(min=0).sum())
            lat_out = np.empty(max(total, 1))
            succ_out = np.empty(max(total, 1), dtype=np.bool_)
            if launch_atomic(arr, st, view.ready, n_ready, act_model, act_count, lat_out, succ_out):
                break
            i = 0
            for v in view.ready:
                c = int(act_count[v])
                attempts.ends[v] = t + lat_out[i : i + c]
                attempts.succ[v] = succ_out[i : i + c].copy()
                i += c
        if code == NEED_DECISION_IDLE and st.cnt[N_INFLIGHT] == 0:
            st.cnt[REASON] = no_progress_reason(arr, st, mask, legacy_only, cap)
            break
    return episode_result(st, policy, deadline, wall)

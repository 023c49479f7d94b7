"""What an episode hands a policy and what it returns: :class:`DecisionView`, :class:`EpisodeResult`.

Shared by the episode drivers (:mod:`simulator.engine.episode` for the
published, atomic and per-attempt rules, :mod:`simulator.engine.live_episode`
for the live rules), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.costs.arrays import DagArrays
from simulator.engine.loop import PLANNER_CALLS, REASON, REASONS, ROLLOUTS, EpisodeState, T, total_cost


@dataclass
class DecisionView:
    """What a planner knows at a decision (``docs/policies.md``, planner state).

    In-flight batches are listed by node; their attempts' exact remaining
    times are ``remaining[ptr[q]:ptr[q+1]]`` (only attempts still running),
    ``already_success[q]`` tells whether an attempt of that batch already
    finished with a success. Their other outcomes are unknown to the planner.
    """

    arr: DagArrays
    t: float
    budget_left: float
    deadline: float
    completed: np.ndarray  # bool (n,)
    ready: np.ndarray  # int64 node positions, pool order
    inflight_node: np.ndarray  # int64 (K,)
    inflight_model: np.ndarray  # int64 (K,)
    already_success: np.ndarray  # bool (K,)
    remaining_ptr: np.ndarray  # int64 (K+1,)
    remaining: np.ndarray  # float64 remaining times of unfinished attempts
    seed: int
    dag: int
    trial: int
    decision_index: int

    @property
    def remaining_time(self) -> float:
        return self.deadline - self.t


@dataclass
class EpisodeResult:
    """Result of one episode (``docs/simulator.md``, "Result of an episode")."""

    success: bool
    termination_reason: str
    makespan: float
    deadline: float
    total_cost: float
    planner_calls: int
    planner_wall_ms: float
    total_rollouts: int
    completion_fraction: float
    node_completed: np.ndarray
    node_started: np.ndarray
    node_finished: np.ndarray
    node_success: np.ndarray
    node_cost: np.ndarray
    diagnostics: dict = field(default_factory=dict)

    @property
    def remaining_deadline(self) -> float:
        return self.deadline - self.makespan


def episode_result(st: EpisodeState, policy: Any, deadline: float, wall: float) -> EpisodeResult:
    """The :class:`EpisodeResult` of an ended episode's state (``wall``: seconds spent in the policy)."""
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

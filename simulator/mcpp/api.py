"""MCPP as a stand-alone planner: "what should I launch now, and how likely am I to finish?"

An executor outside this simulator (a real agent runtime) describes its
current state and gets MCPP's next action back::

    from simulator.mcpp.api import InFlight, plan
    res = plan(dag_line, budget_left=20000, time_left=300,
               completed=[0, 1], inflight=[InFlight(node_id=2, model="30B_ins",
                                                     remaining=[4.2, 9.0])])
    res.action      # {node_id: (model_id, k)} for every ready node
    res.estimate    # estimated probability of completing on time within budget

``dag`` is one pool line (a dict in the format of ``docs/pool_format.md``) or
an already parsed :class:`~simulator.pools.pool.DagStats`. Times are relative to
now; ``remaining`` are the remaining times of the unfinished attempts of each
in-flight batch (their outcomes are unknown; ``already_success`` says whether
a finished attempt of that batch already succeeded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.base.errors import ConfigError
from simulator.costs.arrays import CostSetting, DagArrays, build_arrays
from simulator.engine.episode import DecisionView
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.pools.pool import DagStats, parse_dag


@dataclass(frozen=True)
class InFlight:
    """One in-flight batch: node, model, remaining times of its unfinished attempts."""

    node_id: int
    model: str
    remaining: Sequence[float]
    already_success: bool = False


@dataclass
class PlanResult:
    """MCPP's decision for the given state."""

    action: dict[int, tuple[str, int]]  # node id -> (model id, k); empty if no action
    estimate: float  # best pair's success fraction (completion probability estimate)
    epsilon: float  # Hoeffding half-width over all evaluated pairs (delta of the params)
    member: tuple[str, int] | None  # portfolio member Seq-(m, k) the estimate continues with
    mode: str
    n_candidates: int
    n_simulations: int
    wall_ms: float
    ready: list[int] = field(default_factory=list)
    #: anytime planner only (``time_limit_ms``): Wilson 95% interval of the estimate, and whether the limit stopped it
    interval: tuple[float, float] | None = None
    limit_hit: bool | None = None


def as_dag_stats(dag: Mapping[str, Any] | DagStats) -> DagStats:
    """A pool line dict (validated) or a DagStats, as DagStats."""
    if isinstance(dag, DagStats):
        return dag
    if isinstance(dag, Mapping):
        return parse_dag(dict(dag), index=0, path="<plan>", line=1)
    raise ConfigError(f"dag must be a pool line (dict) or DagStats, got {type(dag).__name__}")


def _inflight_tuple(x: Any) -> InFlight:
    if isinstance(x, InFlight):
        return x
    if isinstance(x, Mapping):
        return InFlight(int(x["node_id"]), str(x["model"]), list(x["remaining"]), bool(x.get("already_success")))
    node_id, model, remaining, *rest = x
    return InFlight(int(node_id), str(model), list(remaining), bool(rest[0]) if rest else False)


def build_view(
    stats: DagStats,
    arr: DagArrays,
    budget_left: float,
    time_left: float,
    completed: Iterable[int] = (),
    inflight: Iterable[Any] = (),
    seed: int = 0,
    decision_index: int = 0,
) -> DecisionView:
    """The :class:`DecisionView` of a described state (node ids and model names as in the pool)."""
    pos = {int(nid): i for i, nid in enumerate(stats.node_ids)}

    def position(nid: Any) -> int:
        if int(nid) not in pos:
            raise ConfigError(f"node {nid!r} is not in the DAG (nodes {sorted(pos)})")
        return pos[int(nid)]

    done = np.zeros(arr.n, dtype=np.bool_)
    for nid in completed:
        done[position(nid)] = True
    flights = sorted((_inflight_tuple(x) for x in inflight), key=lambda f: position(f.node_id))
    busy = np.zeros(arr.n, dtype=np.bool_)
    nodes, models, already, ptr, rem = [], [], [], [0], []
    for f in flights:
        v = position(f.node_id)
        if done[v] or busy[v]:
            raise ConfigError(f"node {f.node_id} is listed twice (completed or already in flight)")
        if f.model not in stats.model_ids or not stats.available[v, stats.model_ids.index(f.model)]:
            raise ConfigError(f"node {f.node_id}: model {f.model!r} is not available on it")
        r = [float(x) for x in f.remaining]
        if any(not (x >= 0) for x in r):
            raise ConfigError(f"node {f.node_id}: remaining times must be non-negative numbers")
        busy[v] = True
        nodes.append(v)
        models.append(stats.model_ids.index(f.model))
        already.append(f.already_success)
        rem.extend(r)
        ptr.append(len(rem))
    for v in range(arr.n):
        if done[v] or busy[v]:
            parents = arr.parent_idx[arr.parent_ptr[v] : arr.parent_ptr[v + 1]]
            if not done[parents].all():
                raise ConfigError(f"node {int(stats.node_ids[v])} is completed or running before its parents completed")
    ready = [
        v for v in range(arr.n)
        if not done[v] and not busy[v] and done[arr.parent_idx[arr.parent_ptr[v] : arr.parent_ptr[v + 1]]].all()
    ]
    if not (time_left > 0) or not (budget_left >= 0):
        raise ConfigError(f"need time_left > 0 and budget_left >= 0, got {time_left}, {budget_left}")
    return DecisionView(
        arr=arr,
        t=0.0,
        budget_left=float(budget_left),
        deadline=float(time_left),
        completed=done,
        ready=np.array(ready, dtype=np.int64),
        inflight_node=np.array(nodes, dtype=np.int64),
        inflight_model=np.array(models, dtype=np.int64),
        already_success=np.array(already, dtype=np.bool_),
        remaining_ptr=np.array(ptr, dtype=np.int64),
        remaining=np.array(rem, dtype=np.float64),
        seed=int(seed),
        dag=0,
        trial=0,
        decision_index=int(decision_index),
    )


def plan(
    dag: Mapping[str, Any] | DagStats,
    budget_left: float,
    time_left: float,
    completed: Iterable[int] = (),
    inflight: Iterable[Any] = (),
    params: Mapping[str, Any] | None = None,
    cost: CostSetting | None = None,
    seed: int = 0,
    decision_index: int = 0,
    planning_arr: DagArrays | None = None,
    time_limit_ms: float | None = None,
) -> PlanResult:
    """MCPP's action for the described state and its completion-probability estimate.

    ``params`` are MCPP parameters (:mod:`simulator.mcpp.params`); ``cost``
    the cost setting (cost mode, prices) that gives ``budget_left`` its unit.
    If nothing is ready (all remaining nodes wait on in-flight batches) the
    action is empty and the estimate is NaN: plan again after the next batch ends.
    ``time_limit_ms`` (same as the parameter of that name) turns on the
    anytime planner: the best action found within that wall time
    (``docs/mcpp.md``, anytime planner), with the estimate's interval.
    """
    stats = as_dag_stats(dag)
    arr = build_arrays(stats, cost or CostSetting())
    view = build_view(stats, arr, budget_left, time_left, completed, inflight, seed, decision_index)
    ready_ids = [int(stats.node_ids[v]) for v in view.ready]
    if stats.n_nodes == int(view.completed.sum()):
        return PlanResult({}, 1.0, 0.0, None, "done", 0, 0, 0.0, ready_ids)
    if len(view.ready) == 0:
        return PlanResult({}, float("nan"), float("nan"), None, "waiting", 0, 0, 0.0, ready_ids)
    raw = {**dict(params or {}), "dag_model_ids": stats.model_ids}
    if time_limit_ms is not None:
        raw["time_limit_ms"] = time_limit_ms
    pol = MCPortfolioPolicy(raw, planning_arr)
    pol.reset(arr, seed, 0, 0)
    d = pol.decide(view)
    if d is None:
        return PlanResult({}, 0.0, float("nan"), None, "no_model", 0, 0, 0.0, ready_ids)
    names = stats.model_ids
    action = {
        int(stats.node_ids[v]): (names[int(d.act_model[v])], int(d.act_count[v])) for v in view.ready
    }
    j, k = d.members[d.member]
    return PlanResult(
        action=action,
        estimate=d.score,
        epsilon=d.epsilon,
        member=(names[j], k),
        mode=d.mode,
        n_candidates=d.n_candidates,
        n_simulations=d.n_simulations,
        wall_ms=d.wall_ms,
        ready=ready_ids,
        interval=tuple(d.anytime["interval"]) if d.anytime else None,
        limit_hit=d.anytime["limit_hit"] if d.anytime else None,
    )

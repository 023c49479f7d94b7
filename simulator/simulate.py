"""Batch simulation API: many trials of one method on one DAG, scored per deadline.

This is the one entry point used by the command line (``python -m simulator
simulate``) and by the experiment harness (``run_shard.py``):

* a method whose registry entry scores deadlines (the baselines) is
  simulated once per budget with D = inf and scored for any number of
  deadlines (:meth:`EpisodeBatch.records`);
* one with the hard deadline (MCPP) runs per (budget, deadline) cell.

Compiled baselines run in the loop of :mod:`simulator.baselines.compiled`, Python
policies through :func:`simulator.engine.episode.run_policy_episode` with their
entry's launch rule (:mod:`simulator.methods`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.base.errors import ConfigError
from simulator.baselines.compiled import (
    AtomicBaseline,
    LiveBaseline,
    run_baseline_trials,
    run_baseline_trials_parallel,
)
from simulator.costs.arrays import CostSetting, DagArrays, dag_arrays
from simulator.engine.episode import run_policy_episode
from simulator.engine.loop import DEADLINE_EXHAUSTED, REASONS
from simulator.engine.registry import HARD, LIVE_PER_ATTEMPT, PUBLISHED, execution_of
from simulator.methods import make_policy, method_spec


@dataclass(frozen=True)
class RunSettings:
    """Every setting that changes results (recorded with the results)."""

    seed: int = 42
    cost: CostSetting = field(default_factory=CostSetting)
    mcpp: Mapping[str, Any] = field(default_factory=dict)
    further: Mapping[str, Any] = field(default_factory=dict)  # resolved parameters of the further baselines
    execution_rules: str = PUBLISHED  # the run's execution-rule mode (registry.EXECUTION_RULES)
    planning: Mapping[str, Any] = field(default_factory=dict)  # see simulator.costs.planning


@dataclass
class EpisodeBatch:
    """Per-trial results of one method on one DAG under one budget (and deadline)."""

    method: str
    dag: int
    budget: float
    deadline: float  # the deadline simulated (inf for baselines)
    trials: np.ndarray
    reason: np.ndarray  # int codes into engine.REASONS
    makespan: np.ndarray
    total_cost: np.ndarray
    completion_fraction: np.ndarray
    total_rollouts: np.ndarray
    planner_calls: np.ndarray
    planner_wall_ms: np.ndarray
    node_stats: np.ndarray  # int64 (T, n, 4): completed, started, finished, successes
    node_cost: np.ndarray  # float64 (T, n)
    diagnostics: list[dict] = field(default_factory=list)

    @property
    def deadline_enforced(self) -> bool:
        return math.isfinite(self.deadline)

    @property
    def completed(self) -> np.ndarray:
        return self.reason == 0

    def on_time(self, deadline: float) -> np.ndarray:
        """On-time success at ``deadline``: completed and makespan <= deadline."""
        return self.completed & (self.makespan <= deadline)

    def scored(self, deadline: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(on-time success, reason code, makespan) per trial at ``deadline``, as :meth:`records` scores them.

        The array form the command line aggregates without building one dict
        per trial: a run still going at the deadline gets
        ``DEADLINE_EXHAUSTED`` and makespan = deadline.
        """
        D = self.deadline if deadline is None else float(deadline)
        late = self.makespan > D
        reason = np.where(late, DEADLINE_EXHAUSTED, self.reason)
        return self.on_time(D), reason, np.where(late, D, self.makespan)

    def records(self, deadline: float | None = None) -> list[dict]:
        """One record per trial, scored at ``deadline`` (default: the simulated one).

        A baseline run with D = inf that is still going at ``deadline`` is
        reported as it would have ended under that deadline: reason
        ``deadline_exhausted`` and makespan = deadline; the uncapped time is
        kept in ``makespan_unconstrained``.
        """
        D = self.deadline if deadline is None else float(deadline)
        on_time = self.on_time(D)
        out = []
        for q in range(len(self.trials)):
            mk = float(self.makespan[q])
            late = mk > D
            rec = {
                "exec_trial": int(self.trials[q]),
                "method": self.method,
                "budget": float(self.budget),
                "deadline": D,
                "deadline_enforced": self.deadline_enforced,
                "success": bool(self.completed[q]),
                "on_time_success": bool(on_time[q]),
                "termination_reason": "deadline_exhausted" if late else REASONS[self.reason[q]],
                "makespan": D if late else mk,
                "makespan_unconstrained": mk,
                "remaining_deadline": max(D - mk, 0.0) if math.isfinite(D) else None,
                "total_cost": float(self.total_cost[q]),
                "total_rollouts": int(self.total_rollouts[q]),
                "completion_fraction": float(self.completion_fraction[q]),
                "planner_calls": int(self.planner_calls[q]),
                "planner_wall_ms": float(self.planner_wall_ms[q]),
            }
            if self.diagnostics:
                rec.update(self.diagnostics[q])
            out.append(rec)
        return out


def simulate_baseline(
    arr: DagArrays,
    method: str,
    budget: float,
    trials: Sequence[int],
    seed: int,
    dag: int,
    parallel: bool = False,
) -> EpisodeBatch:
    """Simulate a compiled baseline with D = inf (score it with :meth:`EpisodeBatch.records`)."""
    spec = method_spec(method)
    if not spec.compiled:
        raise ConfigError(f"method {method!r} is not a compiled baseline")
    rule = spec.rule(arr)
    tr = np.asarray(trials, dtype=np.int64)
    T = len(tr)
    out_f = np.zeros((T, 3))
    out_i = np.zeros((T, 3), dtype=np.int64)
    node_i = np.zeros((T, arr.n, 4), dtype=np.int64)
    node_c = np.zeros((T, arr.n))
    fn = run_baseline_trials_parallel if parallel else run_baseline_trials
    fn(arr, rule, float(budget), int(seed), int(dag), tr, out_f, out_i, node_i, node_c)
    return EpisodeBatch(
        method=method,
        dag=dag,
        budget=float(budget),
        deadline=math.inf,
        trials=tr,
        reason=out_i[:, 0].copy(),
        makespan=out_f[:, 0].copy(),
        total_cost=out_f[:, 1].copy(),
        completion_fraction=out_f[:, 2].copy(),
        total_rollouts=out_i[:, 1].copy(),
        planner_calls=out_i[:, 2].copy(),
        planner_wall_ms=np.zeros(T),
        node_stats=node_i,
        node_cost=node_c,
    )


def policy_for(
    method: str,
    params: Mapping[str, Any] | None = None,
    planning_arr: DagArrays | None = None,
    model_names: Sequence[str] | None = None,
    launch: str | None = None,
):
    """(the policy, its launch rule) that :func:`simulate_policy` runs ``method`` with.

    ``launch`` defaults to the entry's launch rule; ``model_names`` (the DAG's
    model ids) lets a planner resolve models given by name.
    """
    spec = method_spec(method)
    rule = launch or spec.launch
    if model_names is not None:
        params = {**(params or {}), "dag_model_ids": tuple(model_names)}
    if spec.compiled:  # a compiled baseline's decisions under another launch rule (execution-rule modes)
        return (LiveBaseline if rule == LIVE_PER_ATTEMPT else AtomicBaseline)(method, spec.rule), rule
    if spec.launch_param and rule != spec.launch:  # a planner simulates the rule it runs under
        params = {**(params or {}), spec.launch_param: rule}
    return make_policy(method, params, planning_arr), rule


def simulate_policy(
    arr: DagArrays,
    method: str,
    budget: float,
    deadline: float,
    trials: Sequence[int],
    seed: int,
    dag: int,
    params: Mapping[str, Any] | None = None,
    planning_arr: DagArrays | None = None,
    progress=None,
    model_names: Sequence[str] | None = None,
    launch: str | None = None,
) -> EpisodeBatch:
    """Simulate a Python policy, one episode per trial (a finite ``deadline`` is hard).

    ``params`` are the run's parameters for the method (its registry entry's
    fixed ones go on top); ``launch`` defaults to the entry's launch rule.
    ``model_names`` (the DAG's model ids) lets a planner resolve models given by name.
    """
    policy, rule = policy_for(method, params, planning_arr, model_names, launch)
    results = []
    for trial in trials:
        results.append(run_policy_episode(arr, policy, budget, deadline, seed, dag, int(trial), launch=rule))
        if progress is not None:
            progress(1)
    T = len(results)
    node_i = np.zeros((T, arr.n, 4), dtype=np.int64)
    node_c = np.zeros((T, arr.n))
    for q, r in enumerate(results):
        node_i[q, :, 0] = r.node_completed
        node_i[q, :, 1] = r.node_started
        node_i[q, :, 2] = r.node_finished
        node_i[q, :, 3] = r.node_success
        node_c[q] = r.node_cost
    return EpisodeBatch(
        method=method,
        dag=dag,
        budget=float(budget),
        deadline=float(deadline),
        trials=np.asarray(trials, dtype=np.int64),
        reason=np.array([REASONS.index(r.termination_reason) for r in results], dtype=np.int64),
        makespan=np.array([r.makespan for r in results]),
        total_cost=np.array([r.total_cost for r in results]),
        completion_fraction=np.array([r.completion_fraction for r in results]),
        total_rollouts=np.array([r.total_rollouts for r in results], dtype=np.int64),
        planner_calls=np.array([r.planner_calls for r in results], dtype=np.int64),
        planner_wall_ms=np.array([r.planner_wall_ms for r in results]),
        node_stats=node_i,
        node_cost=node_c,
        diagnostics=[r.diagnostics for r in results],
    )


def simulate_method(
    arr: DagArrays,
    method: str,
    budget: float,
    deadline: float,
    trials: Sequence[int],
    seed: int,
    dag: int,
    params: Mapping[str, Any] | None = None,
    planning_arr: DagArrays | None = None,
    model_names: Sequence[str] | None = None,
    parallel: bool = False,
    progress=None,
    execution_rules: str = PUBLISHED,
) -> EpisodeBatch:
    """:func:`simulate_run` with the published code's positional signature (kept for code written against it;
    this project's callers pass a :class:`SimSpec`: ``tests/test_policy_checks.py`` checks)."""
    spec = SimSpec(budget=budget, deadline=deadline, trials=trials, seed=seed, dag=dag, rules=execution_rules)
    return simulate_run(arr, method, spec, params=params, planning_arr=planning_arr, model_names=model_names,
                        parallel=parallel, progress=progress)


@dataclass(frozen=True, kw_only=True)
class SimSpec:
    """What one simulated run is asked: budget, deadline, random key (seed, DAG, trials) and execution rules.

    Keyword-only, so a call site names each number (budget and deadline are
    both floats, seed and DAG both ints: swapped, a positional list runs
    silently wrong). Every caller in this project passes one to
    :func:`simulate_run`.
    """

    budget: float
    deadline: float
    trials: Sequence[int]
    seed: int
    dag: int = 0
    rules: str = PUBLISHED  # execution-rule mode (registry.EXECUTION_RULES)


def simulate_run(arr: DagArrays, method: str, spec: SimSpec, *, params: Mapping[str, Any] | None = None,
                 planning_arr: DagArrays | None = None, model_names: Sequence[str] | None = None,
                 parallel: bool = False, progress=None) -> EpisodeBatch:
    """Any registered method on one DAG and budget, run as its registry entry says under ``spec.rules``.

    A method that scores deadlines is simulated with D = inf (score the batch
    at ``spec.deadline`` with :meth:`EpisodeBatch.scored` or ``records(deadline)``);
    one with the hard deadline runs under ``spec.deadline``.
    """
    ex = execution_of(method_spec(method), spec.rules)
    if ex.compiled:
        return simulate_baseline(arr, method, spec.budget, spec.trials, spec.seed, spec.dag, parallel=parallel)
    D = float(spec.deadline) if ex.deadline == HARD else math.inf
    return simulate_policy(
        arr, method, spec.budget, D, spec.trials, spec.seed, spec.dag, params, planning_arr, progress,
        model_names=model_names, launch=ex.launch,
    )


def planning_arrays(pool, dag_idx: int, settings: RunSettings, planning_pool=None) -> DagArrays | None:
    """The planner's statistics for this DAG (None: same as execution)."""
    if not settings.planning and planning_pool is None:
        return None
    from simulator.costs.planning import make_planning_arrays

    return make_planning_arrays(pool, dag_idx, settings, planning_pool)


def simulate_dag_budget(
    pool,
    dag_idx: int,
    budget: float,
    deadlines: Sequence[float],
    methods: Sequence[str],
    trials: Sequence[int],
    settings: RunSettings,
    planning_pool=None,
    progress=None,
) -> list[dict]:
    """All records of one DAG under one budget: scored methods once, hard-deadline ones per deadline.

    Returns one record per (deadline, method, trial) with the DAG fields
    (``dag_idx``, ``dag_kind``, ``problem_id``, ``n_nodes``) filled in; the
    harness adds the grid-cell fields.
    """
    if not deadlines:
        raise ConfigError("no deadlines given for this budget")
    stats = pool[dag_idx]
    arr = dag_arrays(pool, dag_idx, settings.cost)
    dag_key = int(stats.index)
    base = {
        "dag_idx": dag_key,
        "dag_kind": stats.dag_kind,
        "problem_id": stats.problem_id,
        "n_nodes": stats.n_nodes,
        "budget_cost_mode": arr_mode(settings),
        "execution_rules": settings.execution_rules,
    }
    records: list[dict] = []
    plan = None
    for method in methods:
        spec = method_spec(method)
        ex = execution_of(spec, settings.execution_rules)
        if ex.compiled:
            batch = simulate_baseline(arr, method, budget, trials, settings.seed, dag_key)
            for D in deadlines:
                records.extend({**base, **r} for r in batch.records(D))
            if progress is not None:
                progress(len(trials) * len(deadlines))
            continue
        if plan is None:
            plan = planning_arrays(pool, dag_idx, settings, planning_pool)
        params = getattr(settings, spec.settings_key) if spec.settings_key else {}
        run = (arr, method, budget)
        tail = (trials, settings.seed, dag_key, params, plan)
        if ex.deadline == HARD:
            for D in deadlines:
                batch = simulate_policy(*run, D, *tail, progress, model_names=stats.model_ids, launch=ex.launch)
                records.extend({**base, **r} for r in batch.records())
        else:
            batch = simulate_policy(*run, math.inf, *tail, None, model_names=stats.model_ids, launch=ex.launch)
            for D in deadlines:
                records.extend({**base, **r} for r in batch.records(D))
            if progress is not None:
                progress(len(trials) * len(deadlines))
    return records


def arr_mode(settings: RunSettings) -> str:
    """The run's cost mode: already canonical (parsed once by ``CostSetting``)."""
    return settings.cost.cost_mode

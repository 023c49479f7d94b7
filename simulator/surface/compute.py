"""A DAG's prediction surface for any registered method: on-time successes per (budget, deadline) cell.

Three exact routes, chosen per method from its registry entry and the
execution-rule mode (``docs/surface.md``):

* **tree** — MCPP (and its variants) with the atomic rule and the faithful
  or ``crn`` evaluation: one tree of trajectories per trial decides every
  cell (:mod:`simulator.surface.tree`);
* **per budget** — a method whose decisions never read the deadline (the
  baselines, scored per deadline): one run per (budget, trial) with
  D = inf, scored at every deadline, as the grid does;
* **per cell** — anything else (the halving, ``reuse`` and anytime options,
  MCPP under the per-attempt rule, the Chernoff-deadline policies): one
  episode per (cell, trial), the grid's own code.

Every route gives, cell for cell and trial for trial, the outcome of the
grid's records and of ``python -m simulator predict`` with the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from simulator.costs.arrays import dag_arrays
from simulator.engine.registry import ATOMIC, HARD, execution_of
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.methods import method_spec
from simulator.simulate import RunSettings, SimSpec, planning_arrays, policy_for, simulate_run
from simulator.surface.tree import mcpp_trial_cells

TREE, PER_BUDGET, PER_CELL = "tree", "per_budget", "per_cell"


@dataclass
class MethodSurface:
    """One method on one DAG: per-trial outcomes over the grid (budget index, deadline index)."""

    method: str
    route: str
    success: np.ndarray  # bool (trials, budgets, deadlines): on-time success within budget
    total_cost: np.ndarray  # float64 (trials, budgets, deadlines)
    stats: dict = field(default_factory=dict)

    @property
    def successes(self) -> np.ndarray:
        return self.success.sum(axis=0)

    @property
    def mean_cost(self) -> np.ndarray:
        return self.total_cost.mean(axis=0)


def method_params(method: str, settings: RunSettings) -> dict:
    """The run's parameters of ``method`` (as the grid's shards pass them)."""
    key = method_spec(method).settings_key
    return dict(getattr(settings, key)) if key else {}


def route_of(method: str, settings: RunSettings, policy=None) -> str:
    """Which exact route computes ``method`` under ``settings`` (see the module docstring)."""
    ex = execution_of(method_spec(method), settings.execution_rules)
    if ex.compiled or ex.deadline != HARD:
        return PER_BUDGET
    if isinstance(policy, MCPortfolioPolicy) and ex.launch == ATOMIC and tree_ready(policy):
        return TREE
    return PER_CELL


def tree_ready(policy: MCPortfolioPolicy) -> bool:
    """The options the all-cells decision reproduces exactly (the others are decided cell by cell)."""
    P = policy.params
    return P.evaluation in ("faithful", "crn") and P.reuse == "off" and not P.anytime


def method_surface(
    pool,
    pos: int,
    method: str,
    budgets: Sequence[float],
    deadlines: Sequence[float],
    trials: Sequence[int],
    settings: RunSettings,
    *,
    planning_pool=None,
    progress: Callable[[int], None] | None = None,
    route: str | None = None,
) -> MethodSurface:
    """``method``'s outcomes on DAG ``pool[pos]`` for every (trial, budget, deadline); ``route`` forces one."""
    stats = pool[pos]
    dag = int(stats.index)
    arr = dag_arrays(pool, pos, settings.cost)
    ex = execution_of(method_spec(method), settings.execution_rules)
    params = method_params(method, settings)
    plan = planning_arrays(pool, pos, settings, planning_pool) if not ex.compiled else None
    nb, nd, nt = len(budgets), len(deadlines), len(trials)
    success = np.zeros((nt, nb, nd), dtype=bool)
    cost = np.zeros((nt, nb, nd))
    policy = None
    if not ex.compiled:
        policy, _rule = policy_for(method, params, plan, stats.model_ids, ex.launch)
    route = route or route_of(method, settings, policy)
    info: dict = {"route": route}
    D = np.asarray(deadlines, dtype=np.float64)
    if route == TREE:
        tree_stats: dict = {}
        for q, trial in enumerate(trials):
            out = mcpp_trial_cells(arr, policy, np.asarray(budgets, float), D, settings.seed, dag, int(trial), tree_stats)
            success[q] = out.success.reshape(nb, nd)
            cost[q] = out.total_cost.reshape(nb, nd)
            if progress is not None:
                progress(nb * nd)
        info.update(tree_stats)
    else:
        run = {"params": params, "planning_arr": plan, "model_names": stats.model_ids}

        def spec(B, D) -> SimSpec:
            return SimSpec(budget=B, deadline=D, trials=trials, seed=settings.seed, dag=dag,
                           rules=settings.execution_rules)

        for i, B in enumerate(budgets):
            if route == PER_BUDGET:
                batch = simulate_run(arr, method, spec(B, math.inf), **run)
                for j, Dj in enumerate(D):
                    success[:, i, j] = batch.scored(float(Dj))[0]
                    cost[:, i, j] = batch.total_cost
                if progress is not None:
                    progress(nt * nd)
                continue
            for j, Dj in enumerate(D):
                batch = simulate_run(arr, method, spec(B, float(Dj)), **run)
                success[:, i, j] = batch.on_time(float(Dj))
                cost[:, i, j] = batch.total_cost
                if progress is not None:
                    progress(nt)
    return MethodSurface(method, route, success, cost, info)

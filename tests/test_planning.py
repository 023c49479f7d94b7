"""Planning statistics: noisy copies of the execution arrays, deterministic per seed."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from simulator.costs.arrays import ROW_SUCC, CostSetting, dag_arrays
from simulator.costs.planning import make_planning_arrays, noisy_arrays, validate_planning
from simulator.pools.pool import pool_from_objects
from simulator.simulate import RunSettings
from tests.dags import chain_dag


def _pool():
    rows = [(1.0 + i, i % 3 == 0, 10.0 + i) for i in range(30)]
    return pool_from_objects([chain_dag(4, p=0.4, rows=rows), chain_dag(3, p=0.6)])


def test_noise_changes_statistics_deterministically():
    pool = _pool()
    arr = dag_arrays(pool, 0, CostSetting())
    cfg = {"noise_latency_sigma": 0.5, "noise_cost_sigma": 0.3, "noise_logit_sigma": 1.0, "noise_seed": 3}
    a, b = noisy_arrays(arr, cfg, 0), noisy_arrays(arr, cfg, 0)
    for f in ("row_lat", "row_charge", "p", "kappa", "rows", "tmpl"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert not np.allclose(a.row_lat, arr.row_lat) and not np.allclose(a.row_charge, arr.row_charge)
    # latency of each (node, model) scaled by one factor: row order and correlation kept
    ratio = a.row_lat / arr.row_lat
    for v in range(arr.n):
        sl = slice(arr.row_ptr[v], arr.row_ptr[v + 1])
        assert np.allclose(ratio[sl], ratio[sl][0])
    # success flags follow the noisy probability; p is the rows' mean
    assert np.allclose(a.p[:, 0], [a.rows[ROW_SUCC, arr.row_ptr[v]:arr.row_ptr[v + 1]].mean() for v in range(arr.n)])
    c = noisy_arrays(arr, {**cfg, "noise_seed": 4}, 0)
    assert not np.array_equal(c.row_lat, a.row_lat)
    # parametric DAG: template scaled
    arr1 = dag_arrays(pool, 1, CostSetting())
    n1 = noisy_arrays(arr1, cfg, 1)
    assert not np.allclose(n1.lat_mean, arr1.lat_mean) and not np.allclose(n1.p, arr1.p)


def test_planning_settings_validated_and_used():
    with pytest.raises(ConfigError, match="unknown planning setting"):
        validate_planning({"noise": 1})
    with pytest.raises(ConfigError, match="non-negative"):
        validate_planning({"noise_cost_sigma": -1})
    pool = _pool()
    settings = RunSettings(planning={"noise_latency_sigma": 0.2, "noise_seed": 1})
    plan = make_planning_arrays(pool, 0, settings)
    exec_arr = dag_arrays(pool, 0, settings.cost)
    assert not np.allclose(plan.row_lat, exec_arr.row_lat)
    assert np.array_equal(plan.row_ptr, exec_arr.row_ptr)


def _two_model_dag(bad_rows_succeed: bool) -> dict:
    """One node, two models: ``good`` (cost 10, half its rows succeed) and ``bad`` (cost 5).

    In execution ``bad`` never succeeds; a planning copy where its rows all
    succeed makes it look perfect (and cheaper than ``good``).
    """
    good = [{"latency": 1.0, "success": s, "cost": 10.0, "token_cost": 10.0} for s in (1, 0)]
    bad = [{"latency": 1.0, "success": int(bad_rows_succeed), "cost": 5.0, "token_cost": 5.0}] * 2
    tmpl = {"lat_mean": 1.0, "lat_std": 0.0}
    node = {
        "node_id": 0, "parents": [], "children": [],
        "model_templates": {
            "good": {**tmpl, "success_prob": 0.5, "cost_mean": 10.0, "token_cost_mean": 10.0},
            "bad": {**tmpl, "success_prob": float(bad_rows_succeed), "cost_mean": 5.0, "token_cost_mean": 5.0},
        },
        "empirical_samples_by_model": {"good": good, "bad": bad},
    }
    return {"problem_id": "plan_vs_exec", "model_ids": ["good", "bad"], "nodes": [node]}


def test_mcpp_episode_decides_with_the_planning_statistics():
    """The planner's statistics steer MCPP's choice; the executor still samples the execution pool.

    Budget 10: one attempt of ``good`` or two of ``bad``. Planning with the
    truth, MCPP launches ``good`` once (about half the episodes succeed).
    Planning with statistics where ``bad`` looks perfect, it spends the budget
    on two ``bad`` attempts, which fail as the execution pool says.
    """
    from simulator.methods import MCPP
    from simulator.simulate import simulate_dag_budget

    execution = pool_from_objects([_two_model_dag(False)])
    misleading = pool_from_objects([_two_model_dag(True)])
    settings = RunSettings(seed=5, mcpp={"M": 32})
    methods = ["sequential", MCPP]
    trials = range(40)

    def run(planning_pool):
        recs = simulate_dag_budget(execution, 0, 10.0, [100.0], methods, trials, settings, planning_pool=planning_pool)
        by = {m: [r for r in recs if r["method"] == m] for m in methods}
        assert all(len(v) == len(trials) for v in by.values())
        return by

    exact, aligned_copy, misled = run(None), run(execution), run(misleading)

    # planning with an aligned copy of the truth decides exactly as planning with the truth
    def timeless(recs):  # wall-clock fields are the only ones allowed to differ
        return [{k: v for k, v in r.items() if "wall_ms" not in k} for r in recs]

    for m in methods:
        assert timeless(exact[m]) == timeless(aligned_copy[m])
    # baselines plan nothing: the planning statistics leave their records unchanged
    assert exact["sequential"] == misled["sequential"]

    ex, mi = exact[MCPP], misled[MCPP]
    # truth: one attempt of good (cost 10) per episode, successes where its draw succeeded
    assert all(r["total_rollouts"] == 1 and r["total_cost"] == 10.0 for r in ex)
    n_ok = sum(r["on_time_success"] for r in ex)
    assert 8 <= n_ok <= 32
    # misled: two attempts of bad (cost 5 each), and bad fails in execution: no success at all
    assert all(r["total_rollouts"] == 2 and r["total_cost"] == 10.0 for r in mi)
    assert not any(r["success"] for r in mi)
    assert {r["termination_reason"] for r in mi} == {"budget_exhausted"}
    # the misled planner believed it would finish: its first estimate was certain success
    assert all(r["mc_portfolio_best_score_first"] == 1.0 for r in mi)
    assert all(r["mc_portfolio_best_score_first"] < 1.0 for r in ex)

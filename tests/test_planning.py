"""Planning statistics: noisy copies of the execution arrays, deterministic per seed."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import chain_dag

from simulator.arrays import ROW_SUCC, CostSetting, dag_arrays
from simulator.errors import ConfigError
from simulator.planning import make_planning_arrays, noisy_arrays, validate_planning
from simulator.pool import pool_from_objects
from simulator.simulate import RunSettings


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

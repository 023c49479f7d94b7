"""Planning statistics that differ from execution (``docs/simulator.md``, planning vs execution statistics).

The executor always samples from the execution pool. The planner (MCPP) may
instead see:

* a separate planning pool aligned row by row with the execution pool
  (``planning["pool"]``: same DAG rows, same node order and models), or
* the execution statistics with noise: per (node, model) a multiplicative
  log-normal factor on latency (``noise_latency_sigma``) and on cost
  (``noise_cost_sigma``), and additive logit noise on the success
  probability (``noise_logit_sigma``), drawn from keyed randomness with
  ``noise_seed``. Empirical rows keep their latency/cost correlation (they
  are scaled by the node-model factors); their success flags are flipped,
  deterministically per row, so the rows' success rate follows the noisy
  probability.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from simulator.base.errors import ConfigError
from simulator.base.rng import STREAM_NOISE, make_key, normal, uniform
from simulator.costs.arrays import DagArrays, dag_arrays, replace_tables

PLANNING_KEYS = ("pool", "noise_latency_sigma", "noise_cost_sigma", "noise_logit_sigma", "noise_seed")


def validate_planning(planning: Mapping[str, Any]) -> dict:
    """Check the planning settings and fill defaults (ConfigError on bad values)."""
    unknown = set(planning) - set(PLANNING_KEYS)
    if unknown:
        raise ConfigError(f"unknown planning setting(s) {sorted(unknown)}; known: {list(PLANNING_KEYS)}")
    out = dict(planning)
    for k in ("noise_latency_sigma", "noise_cost_sigma", "noise_logit_sigma"):
        x = float(out.get(k) or 0.0)
        if not math.isfinite(x) or x < 0:
            raise ConfigError(f"planning setting {k} must be a non-negative number, got {out.get(k)!r}")
        out[k] = x
    out["noise_seed"] = int(out.get("noise_seed") or 0)
    return out


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def shift_row_successes(row_succ: np.ndarray, lo: int, hi: int, old: float, new: float, key) -> float:
    """Flip success flags of rows ``lo:hi`` (in place, keyed uniforms 100.. of ``key``) towards rate ``new``.

    A failed row becomes a success with probability (new - old) / (1 - old)
    when the rate rises, a success a failure with probability (old - new) / old
    when it falls, so the rows keep their latency and cost and their expected
    success rate becomes ``new``. Returns the rows' new success rate. Used by
    the planning noise and by the live executor's posterior update.
    """
    for r in range(lo, hi):
        u = uniform(key, 100 + r - lo)
        if new > old and not row_succ[r] and u < (new - old) / (1 - old):
            row_succ[r] = True
        elif new < old and row_succ[r] and u < (old - new) / old:
            row_succ[r] = False
    return float(row_succ[lo:hi].mean())


def noisy_arrays(arr: DagArrays, planning: Mapping[str, Any], dag: int) -> DagArrays:
    """Execution arrays with the noise of ``planning`` applied (keyed by seed, DAG, node, model)."""
    return _noisy(arr, validate_planning(planning), dag)


def _noisy(arr: DagArrays, cfg: Mapping[str, Any], dag: int) -> DagArrays:
    """:func:`noisy_arrays` on settings already checked by :func:`validate_planning` (not parsed again)."""
    sl, sc, sp = cfg["noise_latency_sigma"], cfg["noise_cost_sigma"], cfg["noise_logit_sigma"]
    lat_mean, lat_std = arr.lat_mean.copy(), arr.lat_std.copy()
    tmpl_charge, kappa, p = arr.tmpl_charge.copy(), arr.kappa.copy(), arr.p.copy()
    row_lat, row_charge, row_succ = arr.row_lat.copy(), arr.row_charge.copy(), arr.row_succ.copy()
    for v in range(arr.n):
        for j in range(arr.m):
            if not arr.available[v, j]:
                continue
            key = np.uint64(make_key(cfg["noise_seed"], dag, 0, STREAM_NOISE, v, j, 0))
            f_lat = math.exp(sl * normal(key, 0) - 0.5 * sl * sl)
            f_cost = math.exp(sc * normal(key, 2) - 0.5 * sc * sc)
            new_p = p[v, j]
            if sp > 0 and 0.0 < p[v, j] < 1.0:
                new_p = 1.0 / (1.0 + math.exp(-(_logit(p[v, j]) + sp * normal(key, 4))))
            lat_mean[v, j] *= f_lat
            lat_std[v, j] *= f_lat
            tmpl_charge[v, j] *= f_lat if arr.charge_is_latency else f_cost
            kappa[v, j] *= f_lat if arr.charge_is_latency else f_cost
            lo, hi = arr.row_ptr[v * arr.m + j], arr.row_ptr[v * arr.m + j + 1]
            row_lat[lo:hi] *= f_lat
            row_charge[lo:hi] *= f_cost
            if hi > lo and new_p != p[v, j]:
                new_p = shift_row_successes(row_succ, lo, hi, float(p[v, j]), new_p, key)
            p[v, j] = new_p
    return replace_tables(
        arr,
        lat_mean=lat_mean,
        lat_std=lat_std,
        tmpl_charge=tmpl_charge,
        kappa=kappa,
        p=p,
        row_lat=row_lat,
        row_charge=row_charge,
        row_succ=row_succ,
    )


def make_planning_arrays(pool, dag_idx: int, settings, planning_pool=None) -> DagArrays:
    """The planner's arrays for DAG ``dag_idx`` under ``settings.planning``."""
    cfg = validate_planning(settings.planning or {})
    src_pool = pool
    if planning_pool is None and cfg.get("pool"):
        from simulator.pools.pool import load_pool

        planning_pool = load_pool(cfg["pool"])
    if planning_pool is not None:
        if len(planning_pool) != len(pool) and pool[dag_idx].index >= len(planning_pool):
            raise ConfigError(
                f"planning pool has {len(planning_pool)} DAGs; it must be aligned row by row with the execution pool"
            )
        src_pool = planning_pool
        src_idx = pool[dag_idx].index if len(planning_pool) != len(pool) else dag_idx
        exec_stats, plan_stats = pool[dag_idx], planning_pool[src_idx]
        if not np.array_equal(exec_stats.node_ids, plan_stats.node_ids) or (
            exec_stats.model_ids != plan_stats.model_ids
        ):
            raise ConfigError(
                f"planning pool row {src_idx} (problem {plan_stats.problem_id!r}) is not aligned with the "
                f"execution pool (problem {exec_stats.problem_id!r}): node ids or models differ"
            )
        arr = dag_arrays(src_pool, src_idx, settings.cost)
    else:
        arr = dag_arrays(pool, dag_idx, settings.cost)
    if any(cfg[k] > 0 for k in ("noise_latency_sigma", "noise_cost_sigma", "noise_logit_sigma")):
        arr = _noisy(arr, cfg, int(pool[dag_idx].index))
    return arr

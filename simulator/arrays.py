"""Flat arrays of one DAG for the compiled code, built once per (DAG, cost setting).

:class:`DagArrays` is a NamedTuple of numpy arrays and scalars; numba passes
it to compiled functions as a typed tuple, so the simulator kernel and MCPP's
kernel read the same layout without any Python object in their loops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .costs import (
    COST_MODES,
    expected_attempt_cost,
    normalize_cost_mode,
    price_of,
    row_charges,
    template_charge,
)
from .errors import ConfigError
from .pool import DagStats

LATENCY_DISTS = ("lognormal", "gamma", "gaussian")


class DagArrays(NamedTuple):
    """Compiled-code view of one DAG (n nodes, m models)."""

    n: int
    m: int
    parent_ptr: np.ndarray  # int64 (n+1,)
    parent_idx: np.ndarray  # int64
    child_ptr: np.ndarray  # int64 (n+1,)
    child_idx: np.ndarray  # int64
    node_ids: np.ndarray  # int64 (n,) pool node ids (launch tie-break)
    available: np.ndarray  # bool (n, m)
    p: np.ndarray  # float64 (n, m) success probability (row mean when rows exist)
    lat_mean: np.ndarray  # float64 (n, m) template latency mean (parametric draws)
    lat_std: np.ndarray  # float64 (n, m)
    tmpl_charge: np.ndarray  # float64 (n, m) charge of a parametric attempt
    kappa: np.ndarray  # float64 (n, m) expected attempt cost in the cost mode
    row_ptr: np.ndarray  # int64 (n*m+1,)
    row_lat: np.ndarray  # float64
    row_succ: np.ndarray  # bool
    row_charge: np.ndarray  # float64 charged cost of each row in the cost mode
    legacy: np.ndarray  # int64 (n,) model the baselines use on each node
    charge_is_latency: bool  # lat_mean mode: an attempt is charged its latency
    lat_dist: int  # 0 lognormal, 1 gamma, 2 gaussian


@dataclass(frozen=True)
class CostSetting:
    """Everything that changes how a DAG's statistics become charged costs and draws."""

    cost_mode: str = "token_cost_mean"
    latency_dist: str = "lognormal"
    prices: Mapping[str, float] | None = None
    default_price_model: str | None = None
    legacy_model: str | None = None  # baseline suite: re-target the baselines' model
    extra: tuple = field(default=())

    def key(self) -> tuple:
        prices = tuple(sorted((self.prices or {}).items()))
        return (
            normalize_cost_mode(self.cost_mode),
            self.latency_dist,
            prices,
            self.default_price_model,
            self.legacy_model,
        )


def latency_dist_code(name: str) -> int:
    if name not in LATENCY_DISTS:
        raise ConfigError(f"unknown latency distribution {name!r}; choose one of {', '.join(LATENCY_DISTS)}")
    return LATENCY_DISTS.index(name)


def build_arrays(stats: DagStats, setting: CostSetting) -> DagArrays:
    """Turn :class:`DagStats` into :class:`DagArrays` for one cost setting."""
    from .costs import DEFAULT_PRICES

    mode = normalize_cost_mode(setting.cost_mode)
    money = mode == COST_MODES[1]
    prices = setting.prices if setting.prices is not None else DEFAULT_PRICES
    n, m = stats.n_nodes, stats.n_models
    where = f"DAG {stats.index} (problem {stats.problem_id!r}): "
    tmpl_charge = np.zeros((n, m))
    kappa = np.zeros((n, m))
    p = stats.success_prob.copy()
    row_charge = np.zeros_like(stats.row_latency)
    for v in range(n):
        for j in range(m):
            if not stats.available[v, j]:
                tmpl_charge[v, j] = math.inf
                kappa[v, j] = math.inf
                continue
            price = 0.0
            if money:
                price = price_of(
                    stats.model_ids[j],
                    prices,
                    stats.legacy_model_name[v],
                    setting.default_price_model,
                    where=where,
                )
            sl = stats.rows(v, j)
            row_charge[sl] = row_charges(mode, stats.row_cost[sl], stats.row_token_cost[sl], price)
            tmpl_charge[v, j] = template_charge(
                mode, stats.cost_mean[v, j], stats.token_cost_mean[v, j], stats.lat_mean[v, j], price
            )
            kappa[v, j] = expected_attempt_cost(
                mode,
                stats.token_cost_mean[v, j],
                stats.cost_mean[v, j],
                stats.lat_mean[v, j],
                stats.row_cost[sl],
                stats.row_token_cost[sl],
                stats.row_latency[sl],
                price,
            )
            if sl.stop > sl.start:
                p[v, j] = float(stats.row_success[sl].mean())
    legacy = stats.legacy_model.copy()
    if setting.legacy_model is not None:
        if setting.legacy_model not in stats.model_ids:
            raise ConfigError(f"{where}unknown model {setting.legacy_model!r}; it has {list(stats.model_ids)}")
        legacy[:] = stats.model_ids.index(setting.legacy_model)
    return DagArrays(
        n=n,
        m=m,
        parent_ptr=stats.parent_ptr,
        parent_idx=stats.parent_idx,
        child_ptr=stats.child_ptr,
        child_idx=stats.child_idx,
        node_ids=stats.node_ids,
        available=stats.available,
        p=p,
        lat_mean=stats.lat_mean,
        lat_std=stats.lat_std,
        tmpl_charge=tmpl_charge,
        kappa=kappa,
        row_ptr=stats.row_ptr,
        row_lat=stats.row_latency,
        row_succ=stats.row_success,
        row_charge=row_charge,
        legacy=legacy,
        charge_is_latency=mode == "lat_mean",
        lat_dist=latency_dist_code(setting.latency_dist),
    )


_CACHE_ATTR = "_arrays_cache"


def dag_arrays(pool, i: int, setting: CostSetting) -> DagArrays:
    """Cached :func:`build_arrays` for DAG ``i`` of ``pool`` (built once per setting)."""
    cache = pool.__dict__.setdefault(_CACHE_ATTR, {})
    key = (i, setting.key())
    arr = cache.get(key)
    if arr is None:
        arr = build_arrays(pool[i], setting)
        cache[key] = arr
    return arr

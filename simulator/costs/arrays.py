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

from simulator.base.errors import ConfigError
from simulator.costs.charges import (
    COST_MODES,
    expected_attempt_cost,
    normalize_cost_mode,
    price_of,
    row_charges,
    template_charge,
)
from simulator.costs.modes import LATENCY_DISTS
from simulator.pools.pool import DagStats


class DagArrays(NamedTuple):
    """Compiled-code view of one DAG (n nodes, m models).

    The per-(node, model) tables and the rows are also packed into two arrays
    (``tmpl`` and ``rows``; the named fields are views into them) so that hot
    compiled loops unpack a handful of arrays once instead of touching many
    tuple fields (each field access costs a reference-count update in numba).
    Build it with :func:`make_dag_arrays`.
    """

    n: int
    m: int
    parent_ptr: np.ndarray  # int64 (n+1,)
    parent_idx: np.ndarray  # int64
    child_ptr: np.ndarray  # int64 (n+1,)
    child_idx: np.ndarray  # int64
    node_ids: np.ndarray  # int64 (n,) pool node ids (launch tie-break)
    available: np.ndarray  # bool (n, m)
    tmpl: np.ndarray  # float64 (5, n, m): p, lat_mean, lat_std, tmpl_charge, kappa
    rows: np.ndarray  # float64 (3, R): latency, success (0/1), charge
    p: np.ndarray  # view tmpl[TMPL_P]: success probability (row mean when rows exist)
    lat_mean: np.ndarray  # view tmpl[TMPL_LAT_MEAN]: template latency mean (parametric draws)
    lat_std: np.ndarray  # view tmpl[TMPL_LAT_STD]
    tmpl_charge: np.ndarray  # view tmpl[TMPL_CHARGE]: charge of a parametric attempt
    kappa: np.ndarray  # view tmpl[TMPL_KAPPA]: expected attempt cost in the cost mode
    row_ptr: np.ndarray  # int64 (n*m+1,)
    row_lat: np.ndarray  # view rows[ROW_LAT]
    row_succ: np.ndarray  # bool copy of rows[ROW_SUCC] (for readers; compiled code reads rows)
    row_charge: np.ndarray  # view rows[ROW_CHARGE]: charged cost of each row in the cost mode
    legacy: np.ndarray  # int64 (n,) model the baselines use on each node
    charge_is_latency: bool  # lat_mean mode: an attempt is charged its latency
    lat_dist: int  # 0 lognormal, 1 gamma, 2 gaussian


#: rows of ``DagArrays.tmpl`` (first index; then node, model)
TMPL_P, TMPL_LAT_MEAN, TMPL_LAT_STD, TMPL_CHARGE, TMPL_KAPPA = 0, 1, 2, 3, 4
#: rows of ``DagArrays.rows`` (first index; then the row)
ROW_LAT, ROW_SUCC, ROW_CHARGE = 0, 1, 2


def make_dag_arrays(
    *,
    parent_ptr,
    parent_idx,
    child_ptr,
    child_idx,
    node_ids,
    available,
    p,
    lat_mean,
    lat_std,
    tmpl_charge,
    kappa,
    row_ptr,
    row_lat,
    row_succ,
    row_charge,
    legacy,
    charge_is_latency: bool,
    lat_dist: int,
) -> DagArrays:
    """Pack the tables into :class:`DagArrays` (the one constructor everyone uses)."""
    # stacked in TMPL_* / ROW_* order
    tmpl = np.ascontiguousarray(np.stack([p, lat_mean, lat_std, tmpl_charge, kappa]).astype(np.float64))
    rows = np.ascontiguousarray(
        np.stack([np.asarray(row_lat, float), np.asarray(row_succ, float), np.asarray(row_charge, float)])
    ).reshape(3, -1)
    n, m = available.shape
    return DagArrays(
        n=int(n),
        m=int(m),
        parent_ptr=np.ascontiguousarray(parent_ptr, dtype=np.int64),
        parent_idx=np.ascontiguousarray(parent_idx, dtype=np.int64),
        child_ptr=np.ascontiguousarray(child_ptr, dtype=np.int64),
        child_idx=np.ascontiguousarray(child_idx, dtype=np.int64),
        node_ids=np.ascontiguousarray(node_ids, dtype=np.int64),
        available=np.ascontiguousarray(available, dtype=np.bool_),
        tmpl=tmpl,
        rows=rows,
        p=tmpl[TMPL_P],
        lat_mean=tmpl[TMPL_LAT_MEAN],
        lat_std=tmpl[TMPL_LAT_STD],
        tmpl_charge=tmpl[TMPL_CHARGE],
        kappa=tmpl[TMPL_KAPPA],
        row_ptr=np.ascontiguousarray(row_ptr, dtype=np.int64),
        row_lat=rows[ROW_LAT],
        row_succ=rows[ROW_SUCC] > 0.5,
        row_charge=rows[ROW_CHARGE],
        legacy=np.ascontiguousarray(legacy, dtype=np.int64),
        charge_is_latency=bool(charge_is_latency),
        lat_dist=int(lat_dist),
    )


def replace_tables(arr: DagArrays, **changes) -> DagArrays:
    """A copy of ``arr`` with some tables replaced (keeps the packed arrays consistent)."""
    fields = {
        k: getattr(arr, k)
        for k in (
            "parent_ptr parent_idx child_ptr child_idx node_ids available p lat_mean lat_std "
            "tmpl_charge kappa row_ptr row_lat row_succ row_charge legacy charge_is_latency lat_dist"
        ).split()
    }
    fields.update(changes)
    return make_dag_arrays(**fields)


@dataclass(frozen=True)
class CostSetting:
    """Everything that changes how a DAG's statistics become charged costs and draws.

    The settings are parsed here, once, where they enter (the command line,
    the harness's shard runner, the Python API all build one): ``cost_mode``
    is held in its canonical name (an alias such as ``"token"`` is normalized
    by the constructor) and ``latency_dist`` is checked, so that everything
    downstream (:func:`build_arrays`, the simulator, the planner) reads typed
    values and never parses them again.
    """

    cost_mode: str = "token_cost_mean"
    latency_dist: str = "lognormal"
    prices: Mapping[str, float] | None = None
    default_price_model: str | None = None
    legacy_model: str | None = None  # baseline suite: re-target the baselines' model
    extra: tuple = field(default=())

    def __post_init__(self) -> None:
        # A canonical name (what the harness and every copy made with
        # dataclasses.replace pass) needs no parsing; anything else goes
        # through the one parser, which refuses unknown modes.
        if not (isinstance(self.cost_mode, str) and self.cost_mode in COST_MODES):
            object.__setattr__(self, "cost_mode", normalize_cost_mode(self.cost_mode))
        latency_dist_code(self.latency_dist)

    def key(self) -> tuple:
        prices = tuple(sorted((self.prices or {}).items()))
        return (
            self.cost_mode,
            self.latency_dist,
            prices,
            self.default_price_model,
            self.legacy_model,
        )


def latency_dist_code(name: str) -> int:
    """Compiled-code index of a latency distribution (ConfigError on an unknown name)."""
    if name not in LATENCY_DISTS:
        raise ConfigError(f"unknown latency distribution {name!r}; choose one of {', '.join(LATENCY_DISTS)}")
    return LATENCY_DISTS.index(name)


def build_arrays(stats: DagStats, setting: CostSetting) -> DagArrays:
    """Turn :class:`DagStats` into :class:`DagArrays` for one cost setting."""
    from simulator.costs.charges import DEFAULT_PRICES

    mode = setting.cost_mode  # canonical: parsed by CostSetting
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
    return make_dag_arrays(
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

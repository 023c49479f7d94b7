"""Nominal budget and deadline of a DAG (ratio mode of the grid).

nominal budget = sum_v ceil(ln 0.05 / ln(1 - p_v)) * kappa_v, the attempts
for 95% per-node success times the legacy model's expected attempt cost;
nominal deadline = the longest path where node v weighs lat_mean_v / p_v.
A node with p_v = 0 makes both infinite: that is refused with a message
naming the DAG and the node (the original silently produced ~1e9). So is a
DAG whose scales overflow (p_v so small, or costs/latencies so large, that
the nominal budget or deadline is not a finite float).

:func:`scale_by_ratio` is the one rule of a ratio (a limit given as a
multiple of a nominal scale); every front door reaches it through
:class:`simulator.costs.limits.Limit`.
"""

from __future__ import annotations

import math

from simulator.base.errors import ConfigError
from simulator.costs.arrays import DagArrays
from simulator.pools.graph import topological_order


def _legacy_p(arr: DagArrays, v: int) -> float:
    return float(arr.p[v, arr.legacy[v]])


def _check_p(arr: DagArrays, where: str, node_ids) -> None:
    for v in range(arr.n):
        j = arr.legacy[v]
        if not arr.available[v, j]:
            raise ConfigError(
                f"{where}node {int(node_ids[v])}: its baseline model is unavailable, "
                "so nominal scales (ratio mode) are undefined; use absolute budgets/deadlines"
            )
        if _legacy_p(arr, v) <= 0.0:
            raise ConfigError(
                f"{where}node {int(node_ids[v])} has success probability 0, so the nominal "
                "budget and deadline are infinite; ratio mode (BUDGET_RATIOS / DEADLINE_RATIOS, "
                "--budget-ratio / --deadline-ratio) cannot be used on this DAG: give absolute "
                "values or drop the DAG"
            )


def attempts_for_95(p: float) -> int:
    """Attempts needed for a 95% chance of at least one success (1 when p = 1)."""
    if p >= 1.0:
        return 1
    q = 1.0 - p
    # log(1 - p) is 0 when p < 2**-53 (1 - p rounds to 1): log1p keeps it. Only those p take the
    # log1p path, so every value computed before stays bit-identical.
    log_q = math.log(q) if q < 1.0 else math.log1p(-p)
    return max(1, math.ceil(math.log(0.05) / log_q))


def _finite(value: float, what: str, where: str) -> float:
    if not math.isfinite(value):
        raise ConfigError(
            f"{where}the nominal {what} of this DAG is not a finite number (success probabilities too close "
            "to 0, or costs/latencies too large), so ratio mode (BUDGET_RATIOS / DEADLINE_RATIOS, "
            "--budget-ratio / --deadline-ratio) cannot be used on it: give absolute values or drop the DAG"
        )
    return value


def scale_by_ratio(ratio: float, nominal: float, what: str, name: str, where: str = "") -> float:
    """``ratio`` x the DAG's ``nominal`` budget or deadline (``what``); one clear line when that is no budget.

    A nominal of 0 (every cost, or latency, of the baseline models is 0)
    makes every ratio 0, and a huge ratio overflows to infinity: both are
    refused naming ``name`` (the flag or variable) and why, rather than
    "must be > 0, got 0.0" or "got [inf]".
    """
    if nominal == 0:
        unit = "cost" if what == "budget" else "latency"
        raise ConfigError(
            f"{where}the nominal {what} of this DAG is 0 (every {unit} of its baseline models is 0), so "
            f"{name} {ratio:g} gives a {what} of 0: give an absolute {what} instead"
        )
    value = float(ratio) * float(nominal)
    if not math.isfinite(value):
        raise ConfigError(
            f"{where}{name} {ratio:g} x the nominal {what} {nominal:g} is beyond the float range: "
            "give a smaller ratio"
        )
    return value


def nominal_budget(arr: DagArrays, where: str = "") -> float:
    """Nominal budget of the DAG in the cost mode ``arr`` was built for."""
    _check_p(arr, where, arr.node_ids)
    try:
        total = float(
            sum(attempts_for_95(_legacy_p(arr, v)) * arr.kappa[v, arr.legacy[v]] for v in range(arr.n))
        )
    except OverflowError:  # an attempt count beyond the float range
        total = math.inf
    return _finite(total, "budget", where)


def nominal_deadline(arr: DagArrays, where: str = "") -> float:
    """Longest path with node weights lat_mean / p (legacy model)."""
    _check_p(arr, where, arr.node_ids)
    order = topological_order(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx)
    finish = [0.0] * arr.n
    for v in order:
        start = 0.0
        for e in range(arr.parent_ptr[v], arr.parent_ptr[v + 1]):
            start = max(start, finish[arr.parent_idx[e]])
        j = arr.legacy[v]
        finish[v] = start + float(arr.lat_mean[v, j]) / _legacy_p(arr, v)
    return _finite(max(finish), "deadline", where)

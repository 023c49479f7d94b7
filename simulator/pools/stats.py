"""Per-node statistics shared by every pool builder (one definition of a template).

A template summarises the empirical rows of one (node, model):
``success_prob`` = mean success, ``lat_mean``/``lat_std`` = mean and population
standard deviation (ddof 0) of latency, ``cost_mean``/``token_cost_mean`` = mean
cost and mean output tokens. Keeping this in one place guarantees that the
loader-built pools, the ProofFlow pools and the aligned pools agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

INF = float("inf")


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def _pstd(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / len(xs))


def template_from_rows(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Template of a non-empty list of empirical rows (``latency``, ``success``, ``cost``...)."""
    if not rows:
        raise ValueError("a template needs at least one row")
    return template_from_columns(
        [float(r["latency"]) for r in rows],
        [1.0 if r["success"] else 0.0 for r in rows],
        [float(r.get("cost", r.get("token_cost", r["latency"]))) for r in rows],
        [float(r.get("token_cost", r.get("cost", r["latency"]))) for r in rows],
    )


def template_from_columns(
    latency: Iterable[float], success: Iterable[float], cost: Iterable[float], token_cost: Iterable[float]
) -> dict[str, float]:
    """The same template from rows already parsed into columns (the pool loader's row table).

    Why a second entry point: a pool line with rows but no template gets its
    template when the pool is loaded; computing it here (exact sums) gives
    the numbers a pool builder would have written into the line.
    """
    lat = [float(x) for x in latency]
    if not lat:
        raise ValueError("a template needs at least one row")
    return {
        "success_prob": _mean([float(x) for x in success]),
        "lat_mean": _mean(lat),
        "lat_std": _pstd(lat),
        "cost_mean": _mean([float(x) for x in cost]),
        "token_cost_mean": _mean([float(x) for x in token_cost]),
    }


def unavailable_template() -> dict[str, Any]:
    """Template of a model imputed as unavailable on a node (never chosen by a policy)."""
    return {
        "success_prob": 0.0,
        "lat_mean": INF,
        "lat_std": 0.0,
        "cost_mean": INF,
        "token_cost_mean": INF,
        "imputed": True,
    }

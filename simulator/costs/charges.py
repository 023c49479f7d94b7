"""Cost modes, prices and the one rule for what an attempt is charged.

The charged cost of an attempt depends on the cost mode (``docs/simulator.md``):

==========================  ==========================================
mode                        charged per attempt
==========================  ==========================================
``token_cost_mean``         row ``token_cost`` (output tokens)
``output_money_cost_mean``  row ``token_cost`` x price(m) / 1e6 dollars
``cost_mean``               row ``cost``
``lat_mean``                the drawn latency
==========================  ==========================================

Everything that charges or estimates cost (the compiled simulator, MCPP's
kernel, static baselines, the nominal budget) goes through
:func:`row_charges`, :func:`template_charge` and :func:`expected_attempt_cost`
here, or the compiled :func:`charge_of_draw`.

A cost mode is parsed once, by :func:`normalize_cost_mode`, where it enters
(``simulator.costs.arrays.CostSetting`` calls it); the charging functions take the
canonical name and do not parse it again (they are called per node and model).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np

from simulator.base.errors import ConfigError
from simulator.base.jit import compiled_only
from simulator.base.jsonread import load_json_file
from simulator.costs.modes import COST_MODE_ALIASES, COST_MODES, normalize_cost_mode  # noqa: F401 (their home before modes.py)

#: Dollars per 1M output tokens (the paper's table, ``docs/problem.md``).
DEFAULT_PRICES: dict[str, float] = {
    "30B_ins": 0.8,
    "30B_think": 2.4,
    "4B_ins": 0.42,
    "4B_think": 1.26,
    "goedel32b": 2.8,
    "goedel8b": 0.7,
    "kimina7b": 0.5,
}


def load_price_table(path: str | os.PathLike | None = None) -> dict[str, float]:
    """Default prices overridden by a JSON file ``{model_id: dollars_per_1M_output_tokens}``."""
    prices = dict(DEFAULT_PRICES)
    if path:
        if not os.path.exists(path):
            raise ConfigError(f"{path}: price file not found")
        user = load_json_file(path, what="price file", max_bytes=16 << 20)
        if not isinstance(user, dict):
            raise ConfigError(f"{path}: price file must be an object {{model_id: price}}")
        prices.update(check_price_table(user, str(path)))
    return prices


def check_price_table(user: Mapping | None, where: str) -> dict[str, float] | None:
    """The one rule of a price table (``PRICE_FILE``, ``--price-file``, a shard's ``--prices``): an object of
    non-negative finite numbers; ``None`` passes through."""
    if user is None:
        return None
    if not isinstance(user, Mapping):
        raise ConfigError(f"{where}: prices must be an object {{model_id: price}}")
    out = {}
    for k, v in user.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{where}: price of model {k!r} must be a non-negative number, got {v!r}")
        out[str(k)] = float(v)
    return out


def price_of(
    model: str,
    prices: Mapping[str, float],
    legacy_model_name: str | None = None,
    default_model: str | None = None,
    where: str = "",
) -> float:
    """Dollars per 1M output tokens of ``model``; ``default`` is priced via the legacy model."""
    candidates = [model]
    if model == "default":
        candidates = [c for c in (legacy_model_name, default_model) if c]
    for c in candidates:
        if c in prices:
            return float(prices[c])
    named = model if model != "default" else (legacy_model_name or default_model or "default")
    raise ConfigError(
        f"{where}no price for model {named!r} in money mode (cost mode output_money_cost_mean); "
        "add it to a price file (--price-file, {model_id: dollars_per_1M_output_tokens})"
        + ("" if model != "default" else " or name the legacy model (--default-price-model)")
    )


def _not_canonical(mode: str) -> ValueError:
    """A programming error: a charging function got a mode nobody parsed (see the module docstring)."""
    return ValueError(f"cost mode {mode!r} is not a canonical name; parse it with normalize_cost_mode first")


def row_charges(mode: str, row_cost: np.ndarray, row_token_cost: np.ndarray, price: float) -> np.ndarray:
    """Charged cost of each empirical row (latency mode: filled in at draw time, returns zeros).

    ``mode`` is a canonical name (one of ``COST_MODES``).
    """
    if mode == "token_cost_mean":
        return row_token_cost.astype(np.float64, copy=True)
    if mode == "output_money_cost_mean":
        return row_token_cost * (price / 1e6)
    if mode == "cost_mean":
        return row_cost.astype(np.float64, copy=True)
    if mode == "lat_mean":
        return np.zeros_like(row_cost, dtype=np.float64)
    raise _not_canonical(mode)


def template_charge(mode: str, cost_mean: float, token_cost_mean: float, lat_mean: float, price: float) -> float:
    """Charged cost of a parametric (row-less) attempt: the template's mean in the (canonical) mode."""
    tok = token_cost_mean if not math.isnan(token_cost_mean) else cost_mean
    if mode == "token_cost_mean":
        return tok
    if mode == "output_money_cost_mean":
        return tok * price / 1e6
    if mode == "cost_mean":
        return cost_mean
    if mode == "lat_mean":
        return lat_mean
    raise _not_canonical(mode)


def expected_attempt_cost(
    mode: str,
    token_cost_mean: float,
    cost_mean: float,
    lat_mean: float,
    row_cost: np.ndarray,
    row_token_cost: np.ndarray,
    row_latency: np.ndarray,
    price: float,
) -> float:
    """``kappa(v, m)``: the expected attempt cost of ``docs/simulator.md`` (``mode`` canonical)."""
    if mode not in COST_MODES:
        raise _not_canonical(mode)
    has_rows = len(row_latency) > 0
    if mode in ("token_cost_mean", "output_money_cost_mean"):
        if not math.isnan(token_cost_mean):
            tok = token_cost_mean
        elif has_rows:
            tok = float(row_token_cost.mean())
        else:
            tok = cost_mean
        return tok * (price / 1e6 if mode == "output_money_cost_mean" else 1.0)
    if mode == "cost_mean":
        return float(row_cost.mean()) if has_rows else cost_mean
    return float(row_latency.mean()) if has_rows else lat_mean


@compiled_only
def charge_of_draw(charge_is_latency: bool, charge: float, latency: float) -> float:
    """Compiled: the charged cost of one drawn attempt (latency mode charges the latency)."""
    return latency if charge_is_latency else charge

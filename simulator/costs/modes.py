"""The names of the cost modes and latency distributions (standard library only).

The settings check (``harness/variables.py``) refuses a bad ``BUDGET_COST_MODE``
or ``LATENCY_DIST`` with these, without importing the arrays and charges
modules (numpy, numba); :mod:`simulator.costs.charges` and
:mod:`simulator.costs.arrays` use the same names from here.
"""

from __future__ import annotations

from simulator.base.errors import ConfigError

COST_MODES = ("token_cost_mean", "output_money_cost_mean", "cost_mean", "lat_mean")
COST_MODE_ALIASES = {
    "token": "token_cost_mean",
    "tokens": "token_cost_mean",
    "money": "output_money_cost_mean",
    "cost": "cost_mean",
    "latency": "lat_mean",
}
#: the unit of a budget and a cost in each mode, in printed text (``lat_mean`` charges seconds of model time)
COST_UNITS = {"token_cost_mean": "tokens", "output_money_cost_mean": "dollars", "cost_mean": "cost units",
              "lat_mean": "model seconds"}
#: parametric latency distributions of the rows' (lat_mean, lat_std)
LATENCY_DISTS = ("lognormal", "gamma", "gaussian")


def normalize_cost_mode(mode: str) -> str:
    """Canonical cost mode name; accepts the short aliases."""
    m = str(mode).strip()
    m = COST_MODE_ALIASES.get(m, m)
    if m not in COST_MODES:
        choices = ", ".join(COST_MODES + tuple(COST_MODE_ALIASES))
        raise ConfigError(f"unknown cost mode {mode!r}; choose one of: {choices}")
    return m


def cost_unit(mode: str) -> str:
    """The unit printed after a budget or a cost of cost mode ``mode`` (aliases accepted)."""
    return COST_UNITS[normalize_cost_mode(mode)]

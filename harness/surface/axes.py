"""The surface job's two axes: ``lo:hi:n`` (log-spaced) or an explicit increasing list, checked before work."""

from __future__ import annotations

import math

import numpy as np

from simulator.base.errors import ConfigError

#: the published axes (money mode): 100 budgets from $0.02 to $20 and 100 deadlines from 30 s to 7200 s
MONEY_BUDGETS = "0.02:20:100"
DEADLINES = "30:7200:100"
#: token mode: 100 budgets from 0.2 x the smallest to 5 x the largest nominal budget of the selected DAGs
TOKEN_LOW, TOKEN_HIGH = 0.2, 5.0


def parse_axis(text: str, name: str) -> list[float]:
    """``lo:hi:n`` -> n log-spaced values from lo to hi; else numbers separated by spaces or commas.

    Refused with one line naming the variable: an empty axis, a value that
    is not a finite number > 0, a count below 1, values not strictly increasing.
    """
    where = f"{name} (environment)"
    text = (text or "").strip()
    if not text:
        raise ConfigError(f"{where}: empty axis; give `lo:hi:n` (log-spaced) or increasing numbers")
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise ConfigError(f"{where}: expected `lo:hi:n`, got {text!r}")
        lo, hi = (_positive(p, where) for p in parts[:2])
        try:
            n = int(parts[2])
        except ValueError:
            raise ConfigError(f"{where}: the count n of `lo:hi:n` must be an integer >= 1, got {parts[2]!r}") from None
        if n < 1 or (n > 1 and not hi > lo):
            raise ConfigError(f"{where}: `lo:hi:n` needs n >= 1 and hi > lo, got {text!r}")
        vals = [lo] if n == 1 else [float(x) for x in np.geomspace(lo, hi, n)]
    else:
        vals = [_positive(p, where) for p in text.replace(",", " ").split()]
        if not vals:
            raise ConfigError(f"{where}: empty axis (no number in {text!r})")
    for a, b in zip(vals, vals[1:]):
        if not b > a:
            raise ConfigError(f"{where}: values must be strictly increasing, got {a:g} then {b:g}")
    return vals


def _positive(text: str, where: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise ConfigError(f"{where}: expected a number > 0, got {text!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(f"{where}: expected a finite number > 0, got {text!r}")
    return x

"""The grid's syntax: axis value lists and the budget/deadline map (text -> numbers).

Below :mod:`harness.grid` and :mod:`harness.variables` (the variables table
parses ``BUDGET_RATIOS`` ... with these functions; the grid reads the table).
"""

from __future__ import annotations

import math
import re

from simulator.base.errors import ConfigError
from simulator.base.settings import check_budget, check_deadline
from simulator.base.validation import check_distinct, where


def format_value(x: float) -> str:
    """Short exact text of an axis value (``1000``, ``0.5``, ``inf``); used in cell ids."""
    if math.isinf(x):
        return "inf"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


def _number(text: str, what: str, allow_inf: bool = False, source: str | None = None) -> float:
    """A grid value by the rules every entry point shares (:mod:`simulator.base.settings`).

    Finite and > 0 (a budget, a ratio); with ``allow_inf`` (an absolute
    deadline) ``inf`` is allowed too.
    """
    if allow_inf:
        return check_deadline(text.strip(), what, source)
    return check_budget(text.strip(), what, source)


def parse_value_list(text: str, what: str, allow_inf: bool = False, source: str | None = None) -> list[float]:
    """``"0.3 0.5,1"`` -> [0.3, 0.5, 1.0]; spaces and commas both separate values; no value twice."""
    items = [s for s in re.split(r"[\s,]+", text.strip()) if s]
    if not items:
        raise ConfigError(f"{where(what, source)}: set but empty")
    vals = [_number(s, what, allow_inf, source) for s in items]
    check_distinct([format_value(v) for v in vals], what, source)
    return vals


def parse_map(text: str, source: str | None = None) -> list[tuple[float, list[float]]]:
    """Parse ``B1:D1,D2;B2:D1|D3`` into [(B1, [D1, D2]), (B2, [D1, D3])].

    Budget groups are separated by ``;`` (or newlines); within a group the
    deadlines by ``,`` or ``|``. Deadlines may be ``inf`` (no deadline).
    """
    what = where("BUDGET_DEADLINE_VALUES_MAP", source)
    groups = [g.strip() for g in re.split(r"[;\n]+", text) if g.strip()]
    if not groups:
        raise ConfigError(f"{what} is set but empty")
    out: list[tuple[float, list[float]]] = []
    for g in groups:
        if g.count(":") != 1:
            raise ConfigError(
                f"{what}: malformed group {g!r}: write BUDGET:DEADLINE[,DEADLINE...], groups separated "
                "by ';' (example: '2000:300,600;4000:300|900')"
            )
        b_text, d_text = g.split(":")
        if not b_text.strip():
            raise ConfigError(f"{what}: group {g!r} has no budget before ':'")
        b = _number(b_text, f"{what} budget in {g!r}")
        ds_text = [d for d in re.split(r"[,|\s]+", d_text.strip()) if d]
        if not ds_text:
            raise ConfigError(f"{what}: budget {b_text.strip()} has no deadlines after ':'")
        ds = [_number(d, f"{what} deadline in {g!r}", allow_inf=True) for d in ds_text]
        check_distinct([format_value(d) for d in ds], f"{what} deadlines of group {g!r}")
        if any(b == prev for prev, _ in out):
            raise ConfigError(f"{what}: budget {format_value(b)} appears in two groups; merge them")
        out.append((b, ds))
    return out

"""The (budget, deadline) grid: parsing and expansion, in ONE place.

Everything that needs to know which cells a run has (``gen_jobs.py`` when it
writes the jobs, ``run_shard.py`` when it realises a cell on a DAG, the merge
and the analysis) goes through this module.

A grid is a list of **budget groups**: one budget axis value and the deadline
axis values simulated with it. Grouping by budget is what lets a shard
simulate the baselines once per budget (D = inf) and score them for every
deadline of the group.

Axis values are either ``absolute`` (in the cost mode's unit, seconds for
deadlines) or ``ratio`` (a multiple of the DAG's nominal budget / deadline,
``simulator.nominal``). Sources, by priority (``docs/harness.md``):

1. ``BUDGET_DEADLINE_VALUES_MAP``: ``B1:D1,D2;B2:D1,D3`` (``|`` may separate
   deadlines too), absolute values;
2. otherwise the budget axis is ``BUDGET_VALUES`` (absolute) if set, else
   ``BUDGET_RATIOS``; the deadline axis is ``DEADLINE_VALUES`` if set, else
   ``DEADLINE_RATIOS``; the two axes are crossed (so an absolute budget can
   be mixed with relative deadlines and vice versa).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from simulator.errors import ConfigError
from simulator.settings import check_budget, check_deadline

ABSOLUTE = "absolute"
RATIO = "ratio"
DEFAULT_BUDGET_RATIOS = "0.3 0.5 1.0 2.0 5.0 10.0"
DEFAULT_DEADLINE_RATIOS = "1.0"


def format_value(x: float) -> str:
    """Short exact text of an axis value (``1000``, ``0.5``, ``inf``); used in cell ids."""
    if math.isinf(x):
        return "inf"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


@dataclass(frozen=True)
class AxisValue:
    """One value of the budget or deadline axis."""

    kind: str  # ABSOLUTE or RATIO
    value: float

    def realize(self, nominal: float | None) -> float:
        """The concrete budget/deadline on a DAG with the given nominal scale."""
        if self.kind == ABSOLUTE:
            return float(self.value)
        if nominal is None:
            raise ConfigError("a ratio axis value needs the DAG's nominal scale")
        return float(self.value) * float(nominal)

    def token(self) -> str:
        """``ratio:0.5`` / ``absolute:1000`` (the job-line form)."""
        return f"{self.kind}:{format_value(self.value)}"

    def label(self) -> str:
        """Short form for cell ids and plots: ``r0.5`` / ``1000``."""
        return ("r" if self.kind == RATIO else "") + format_value(self.value)

    def to_json(self) -> dict:
        return {"type": self.kind, "value": self.value}

    @staticmethod
    def parse_token(text: str) -> AxisValue:
        kind, _, val = text.partition(":")
        if kind not in (ABSOLUTE, RATIO) or not val:
            raise ConfigError(f"axis value {text!r} must look like 'ratio:0.5' or 'absolute:1000'")
        return AxisValue(kind, _number(val, "axis value", allow_inf=kind == ABSOLUTE, source="job line"))


@dataclass(frozen=True)
class Cell:
    """One (budget, deadline) cell of the grid."""

    group: str  # budget group key, e.g. "b00"
    budget: AxisValue
    deadline: AxisValue

    @property
    def cell_id(self) -> str:
        return cell_id(self.budget, self.deadline)

    def to_json(self) -> dict:
        return {
            "cell": self.cell_id,
            "budget_group": self.group,
            "budget_input_type": self.budget.kind,
            "budget_axis_value": self.budget.value,
            "deadline_input_type": self.deadline.kind,
            "deadline_axis_value": self.deadline.value,
        }


def cell_id(budget: AxisValue, deadline: AxisValue) -> str:
    """Filesystem-safe id of a cell, e.g. ``B_r0.5__D_r1`` or ``B_2000__D_300``."""
    return f"B_{budget.label()}__D_{deadline.label()}"


@dataclass(frozen=True)
class BudgetGroup:
    """A budget and the deadlines run with it (one shard family)."""

    key: str
    budget: AxisValue
    deadlines: tuple[AxisValue, ...]

    def cells(self) -> list[Cell]:
        return [Cell(self.key, self.budget, d) for d in self.deadlines]

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "budget": self.budget.token(),
            "deadlines": [d.token() for d in self.deadlines],
        }


@dataclass(frozen=True)
class Grid:
    """The expanded grid of a run."""

    groups: tuple[BudgetGroup, ...]
    source: str  # "map" or "axes"

    def cells(self) -> list[Cell]:
        return [c for g in self.groups for c in g.cells()]

    def group(self, key: str) -> BudgetGroup:
        for g in self.groups:
            if g.key == key:
                return g
        raise ConfigError(f"unknown budget group {key!r}")

    @property
    def uses_budget_ratio(self) -> bool:
        return any(g.budget.kind == RATIO for g in self.groups)

    @property
    def uses_deadline_ratio(self) -> bool:
        return any(d.kind == RATIO for g in self.groups for d in g.deadlines)

    def to_json(self) -> dict:
        return {"source": self.source, "groups": [g.to_json() for g in self.groups]}

    @staticmethod
    def from_json(obj: Mapping) -> Grid:
        groups = tuple(
            BudgetGroup(
                g["key"],
                AxisValue.parse_token(g["budget"]),
                tuple(AxisValue.parse_token(d) for d in g["deadlines"]),
            )
            for g in obj["groups"]
        )
        return Grid(groups, obj.get("source", "axes"))

    def describe(self) -> str:
        """Human-readable grid (printed by ``prepare``)."""
        lines = [f"grid ({self.source}): {len(self.groups)} budget(s), {len(self.cells())} cell(s)"]
        for g in self.groups:
            ds = ", ".join(_describe(d, "deadline") for d in g.deadlines)
            lines.append(f"  {g.key}: budget {_describe(g.budget, 'budget')} -> deadlines {ds}")
        return "\n".join(lines)


def _describe(v: AxisValue, what: str) -> str:
    if v.kind == RATIO:
        return f"{format_value(v.value)} x nominal {what}"
    return format_value(v.value) + (" s" if what == "deadline" else "")


# ----------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------


def _number(text: str, what: str, allow_inf: bool = False, source: str | None = "environment") -> float:
    """An axis value by the rules every entry point shares (:mod:`simulator.settings`).

    Finite and > 0 (a budget, a ratio); with ``allow_inf`` (an absolute
    deadline) ``inf`` is allowed too.
    """
    if allow_inf:
        return check_deadline(text.strip(), what, source)
    return check_budget(text.strip(), what, source)


def parse_value_list(text: str, what: str, allow_inf: bool = False) -> list[float]:
    """``"0.3 0.5,1"`` -> [0.3, 0.5, 1.0]; spaces and commas both separate values."""
    items = [s for s in re.split(r"[\s,]+", text.strip()) if s]
    if not items:
        raise ConfigError(f"{what} is set but empty")
    vals = [_number(s, what, allow_inf) for s in items]
    dup = sorted({format_value(v) for v in vals if vals.count(v) > 1})
    if dup:
        raise ConfigError(f"{what}: value(s) {', '.join(dup)} given twice")
    return vals


def parse_map(text: str) -> list[tuple[float, list[float]]]:
    """Parse ``B1:D1,D2;B2:D1|D3`` into [(B1, [D1, D2]), (B2, [D1, D3])].

    Budget groups are separated by ``;`` (or newlines); within a group the
    deadlines by ``,`` or ``|``. Deadlines may be ``inf`` (no deadline).
    """
    what = "BUDGET_DEADLINE_VALUES_MAP"
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
        if len(set(ds)) != len(ds):
            raise ConfigError(f"{what}: group {g!r} lists a deadline twice")
        if any(b == prev for prev, _ in out):
            raise ConfigError(f"{what}: budget {format_value(b)} appears in two groups; merge them")
        out.append((b, ds))
    return out


def _env(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def resolve_grid(env: Mapping[str, str]) -> Grid:
    """Expand the grid from the harness variables (see the module docstring)."""
    text = _env(env, "BUDGET_DEADLINE_VALUES_MAP")
    if text:
        pairs = parse_map(text)
        groups = tuple(
            BudgetGroup(f"b{i:02d}", AxisValue(ABSOLUTE, b), tuple(AxisValue(ABSOLUTE, d) for d in ds))
            for i, (b, ds) in enumerate(pairs)
        )
        return Grid(groups, "map")
    if _env(env, "BUDGET_VALUES"):
        budgets = [AxisValue(ABSOLUTE, v) for v in parse_value_list(_env(env, "BUDGET_VALUES"), "BUDGET_VALUES")]
    else:
        text = _env(env, "BUDGET_RATIOS") or DEFAULT_BUDGET_RATIOS
        budgets = [AxisValue(RATIO, v) for v in parse_value_list(text, "BUDGET_RATIOS")]
    if _env(env, "DEADLINE_VALUES"):
        vals = parse_value_list(_env(env, "DEADLINE_VALUES"), "DEADLINE_VALUES", allow_inf=True)
        deadlines = tuple(AxisValue(ABSOLUTE, v) for v in vals)
    else:
        text = _env(env, "DEADLINE_RATIOS") or DEFAULT_DEADLINE_RATIOS
        deadlines = tuple(AxisValue(RATIO, v) for v in parse_value_list(text, "DEADLINE_RATIOS"))
    groups = tuple(BudgetGroup(f"b{i:02d}", b, deadlines) for i, b in enumerate(budgets))
    return Grid(groups, "axes")

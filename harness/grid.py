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
``simulator.costs.nominal``). Sources, by priority (``docs/harness.md``):

1. ``BUDGET_DEADLINE_VALUES_MAP``: ``B1:D1,D2;B2:D1,D3`` (``|`` may separate
   deadlines too), absolute values;
2. otherwise the budget axis is ``BUDGET_VALUES`` (absolute) if set, else
   ``BUDGET_RATIOS``; the deadline axis is ``DEADLINE_VALUES`` if set, else
   ``DEADLINE_RATIOS``; the two axes are crossed (so an absolute budget can
   be mixed with relative deadlines and vice versa).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simulator.base.errors import ConfigError
from simulator.costs.limits import ABSOLUTE, BUDGET, DEADLINE, MODEL_SECONDS, RATIO, Limit

from . import variables
from .grid_syntax import _number, format_value, parse_map, parse_value_list

# the syntax, and the two ways an axis value is given (simulator.costs.limits), re-exported
__all__ = ["ABSOLUTE", "RATIO", "format_value", "parse_map", "parse_value_list"]


@dataclass(frozen=True)
class AxisValue:
    """One value of the budget or deadline axis."""

    kind: str  # ABSOLUTE or RATIO
    value: float

    def limit(self, what: str) -> Limit:
        """This value as the ``what`` (``budget`` or ``deadline``, model seconds) it gives."""
        return Limit(what, self.value, self.kind, MODEL_SECONDS if what == DEADLINE else None,
                     name=f"the {what} axis value {self.token()}", source=None)

    def realize(self, nominal: float | None, what: str = BUDGET) -> float:
        """The concrete budget/deadline on a DAG with the given nominal scale (the one rule of a ratio:
        :mod:`simulator.costs.limits`)."""
        return self.limit(what).of_nominal(nominal)

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
        return AxisValue(kind, _number(val, "axis value", allow_inf=kind == ABSOLUTE))


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
    source: str  # "map" or "axes" ("none": :data:`NO_GRID`)

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


def resolve_grid(env: Mapping[str, str]) -> Grid:
    """Expand the grid from the harness variables (see the module docstring; defaults from the variables table)."""
    v = {name: variables.read(env, name) for name in GRID_VARIABLES}  # every grid variable is checked
    if v["BUDGET_DEADLINE_VALUES_MAP"]:
        groups = tuple(
            BudgetGroup(f"b{i:02d}", AxisValue(ABSOLUTE, b), tuple(AxisValue(ABSOLUTE, d) for d in ds))
            for i, (b, ds) in enumerate(v["BUDGET_DEADLINE_VALUES_MAP"])
        )
        return Grid(groups, "map")
    if v["BUDGET_VALUES"]:
        budgets = [AxisValue(ABSOLUTE, x) for x in v["BUDGET_VALUES"]]
    else:
        budgets = [AxisValue(RATIO, x) for x in v["BUDGET_RATIOS"]]
    if v["DEADLINE_VALUES"]:
        deadlines = tuple(AxisValue(ABSOLUTE, x) for x in v["DEADLINE_VALUES"])
    else:
        deadlines = tuple(AxisValue(RATIO, x) for x in v["DEADLINE_RATIOS"])
    groups = tuple(BudgetGroup(f"b{i:02d}", b, deadlines) for i, b in enumerate(budgets))
    return Grid(groups, "axes")


#: the grid of a job whose (budget, deadline) axes are its own (a prediction surface): no cell, no nominal scale
NO_GRID = Grid((), "none")

GRID_VARIABLES = ("BUDGET_DEADLINE_VALUES_MAP", "BUDGET_VALUES", "DEADLINE_VALUES", "BUDGET_RATIOS", "DEADLINE_RATIOS")

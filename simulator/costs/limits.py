"""A budget or a deadline as a user gives it, and the one way it becomes a number for a DAG.

Why: every front door (``python -m simulator``, ``python -m executor run / agree / quote / demo``, the
benchmarks, the harness's grid and surface jobs) takes a budget and a deadline, and each used to read,
check and scale them its own way: the same ``--deadline`` meant wall seconds in ``executor run`` and
model seconds in ``agree``, and a ratio was scaled by two different rules. A :class:`Limit` says all
there is to know about one:

* ``kind``: :data:`BUDGET` or :data:`DEADLINE`;
* ``given``: :data:`ABSOLUTE` (in the cost mode's unit for a budget, in seconds for a deadline) or
  :data:`RATIO` (a multiple of the DAG's nominal budget or deadline, :mod:`simulator.costs.nominal`);
* ``unit`` (deadlines): :data:`MODEL_SECONDS` (the clock of the pool's latencies, the simulator's) or
  :data:`WALL_SECONDS` (a live run's clock; model seconds = wall seconds / the time scale). A ratio
  deadline is a multiple of the nominal deadline, which is in model seconds.

The one rule for a ratio (:func:`simulator.costs.nominal.scale_by_ratio`): the concrete value is
``float(ratio) * float(nominal)``, refused in one line naming the flag when the nominal is 0 (the
product would be no limit at all) or the product is beyond the float range.

The checks of a given value are those of :mod:`simulator.base.settings`: a budget and a ratio are
finite numbers > 0; a deadline is a number > 0, and ``inf`` (no deadline) only where the door allows
it (the simulator does; a live run, which must end, does not).

A door adds its flags with :func:`add_limit_arguments` (which says in the help, and in the parsed
arguments, which unit its ``--deadline`` is in), reads them with :func:`limits_from_args` right after
parsing (bad values are refused before the pool is read) and gets the numbers for a DAG with
:meth:`Limits.resolve`; code that has no command line builds a :class:`Limits` directly.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from simulator.base.errors import ConfigError
from simulator.base.settings import check_budget, check_deadline, check_ratio
from simulator.base.validation import check_number

BUDGET, DEADLINE = "budget", "deadline"
ABSOLUTE, RATIO = "absolute", "ratio"
MODEL_SECONDS, WALL_SECONDS = "model seconds", "wall seconds"
#: the attribute of parsed arguments that carries the door's flags (set by :func:`add_limit_arguments`)
FLAGS_DEST = "limit_flags"


@dataclass(frozen=True)
class Limit:
    """One budget or deadline as given (see the module docstring); checked when made."""

    kind: str
    value: float
    given: str = ABSOLUTE
    unit: str | None = None  # deadlines: MODEL_SECONDS or WALL_SECONDS; budgets: None (the cost mode's unit)
    name: str = ""  # the flag or variable it came from (messages); default: --<kind>[-ratio]
    source: str | None = "flag"
    infinite: bool = True  # an absolute deadline of inf (no deadline) is allowed

    def __post_init__(self) -> None:
        if self.kind not in (BUDGET, DEADLINE) or self.given not in (ABSOLUTE, RATIO):
            raise ValueError(f"a limit is a budget or a deadline given absolute or as a ratio, got {self}")
        if (self.kind == DEADLINE) != (self.unit in (MODEL_SECONDS, WALL_SECONDS)):
            raise ValueError(f"a deadline, and only a deadline, has a unit (model or wall seconds), got {self}")
        if self.given == RATIO and self.unit == WALL_SECONDS:
            raise ValueError("a ratio deadline is a multiple of the nominal deadline, in model seconds")
        name = self.name or self.flag
        if self.given == RATIO:
            value = check_ratio(self.value, name, self.source)
        elif self.kind == BUDGET:
            value = check_budget(self.value, name, self.source)
        elif self.infinite:
            value = check_deadline(self.value, name, self.source)
        else:
            value = check_number(self.value, name, self.source, lo=0.0, lo_inclusive=False)
        object.__setattr__(self, "value", float(value))
        object.__setattr__(self, "name", name)

    @property
    def flag(self) -> str:
        """The flag this limit is given by on a command line (``--budget``, ``--deadline-ratio`` ...)."""
        return f"--{self.kind}" + ("-ratio" if self.given == RATIO else "")

    def of_nominal(self, nominal: float | None, where: str = "", time_scale: float = 1.0) -> float:
        """The concrete value given the DAG's nominal scale (None: not computed; an absolute limit needs none),
        a deadline in model seconds (a wall-seconds one divided by ``time_scale``)."""
        if self.given == ABSOLUTE:
            return self.value / time_scale if self.unit == WALL_SECONDS else self.value
        if nominal is None:
            raise ConfigError(f"{where}{self.name} {self.value:g} needs the DAG's nominal {self.kind}")
        from simulator.costs.nominal import scale_by_ratio  # numpy: not before a door's first line is printed

        return scale_by_ratio(self.value, nominal, self.kind, self.name, where)

    def resolve(self, arr, where: str = "", time_scale: float = 1.0) -> float:
        """The concrete value on the DAG of ``arr`` (its nominal scale computed only for a ratio)."""
        if self.given == ABSOLUTE:
            return self.of_nominal(None, where, time_scale)
        from simulator.costs.nominal import nominal_budget, nominal_deadline

        return self.of_nominal((nominal_budget if self.kind == BUDGET else nominal_deadline)(arr, where), where)


@dataclass(frozen=True)
class Limits:
    """A run's budget and deadline as given (either may be None where a door takes only one)."""

    budget: Limit | None
    deadline: Limit | None

    @staticmethod
    def ratios(budget_ratio: float, deadline_ratio: float) -> Limits:
        """Both as multiples of the DAG's nominal scales (benchmarks, demos, tests)."""
        return Limits(Limit(BUDGET, budget_ratio, RATIO), Limit(DEADLINE, deadline_ratio, RATIO, MODEL_SECONDS))

    def resolve(self, arr, where: str = "", time_scale: float = 1.0) -> tuple[float, float]:
        """(budget in the cost unit, deadline in model seconds) on the DAG of ``arr``; both must be given."""
        if self.budget is None or self.deadline is None:
            raise ValueError("resolve needs both a budget and a deadline")
        budget = self.budget.resolve(arr, where, time_scale)
        deadline = self.deadline.resolve(arr, where, time_scale)
        if not (math.isfinite(budget) and budget > 0):  # a ratio of a tiny nominal may underflow to 0
            raise ConfigError(f"{where}the budget must be a finite number > 0, got {budget}")
        if not (deadline > 0) or (math.isinf(deadline) and not self.deadline.infinite):
            raise ConfigError(f"{where}the deadline must be > 0, got {deadline}")
        return float(budget), float(deadline)


@dataclass(frozen=True)
class LimitFlags:
    """Which limit flags a door has: what :func:`limits_from_args` reads back."""

    deadline_unit: str = MODEL_SECONDS
    budget: bool = True
    deadline: bool = True
    infinite_deadline: bool = True


def add_limit_arguments(ap: argparse.ArgumentParser, *, deadline_unit: str = MODEL_SECONDS, budget: bool = True,
                        deadline: bool = True, infinite_deadline: bool = True, required: bool = True,
                        budget_unit: str = "the cost mode's unit: tokens, or dollars in money mode") -> LimitFlags:
    """``--budget`` / ``--budget-ratio`` and ``--deadline`` / ``--deadline-ratio`` (each pair exclusive), the help
    saying the units; the parsed arguments carry the returned :class:`LimitFlags` for :func:`limits_from_args`."""
    flags = LimitFlags(deadline_unit, budget, deadline, infinite_deadline)
    if budget:
        b = ap.add_mutually_exclusive_group(required=required)
        b.add_argument("--budget", help=f"budget in {budget_unit}; a finite number > 0")
        b.add_argument("--budget-ratio", help="budget as a multiple of the DAG's nominal budget (finite, > 0)")
    if deadline:
        d = ap.add_mutually_exclusive_group(required=required)
        d.add_argument("--deadline", help=f"deadline in {deadline_unit}, a number > 0"
                                          + (" ('inf': no deadline)" if infinite_deadline else ""))
        d.add_argument("--deadline-ratio", help="deadline as a multiple of the DAG's nominal deadline "
                                                "(model seconds; finite, > 0)")
    ap.set_defaults(**{FLAGS_DEST: flags})
    return flags


def _limit(args: argparse.Namespace, kind: str, unit: str | None, infinite: bool) -> Limit | None:
    absolute, ratio = getattr(args, kind, None), getattr(args, f"{kind}_ratio", None)
    if absolute is not None:
        return Limit(kind, absolute, ABSOLUTE, unit, infinite=infinite)
    if ratio is not None:
        return Limit(kind, ratio, RATIO, None if unit is None else MODEL_SECONDS)
    return None


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The limits of arguments parsed by a parser given :func:`add_limit_arguments` (one line per bad value)."""
    flags: LimitFlags = getattr(args, FLAGS_DEST)
    return Limits(_limit(args, BUDGET, None, True) if flags.budget else None,
                  _limit(args, DEADLINE, flags.deadline_unit, flags.infinite_deadline) if flags.deadline else None)


def resolve_limits(args: argparse.Namespace, arr, where: str = "", time_scale: float = 1.0) -> tuple[float, float]:
    """(budget, deadline in model seconds) of parsed limit flags on the DAG of ``arr``."""
    return limits_from_args(args).resolve(arr, where, time_scale)


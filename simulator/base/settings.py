"""The rules for the settings every entry point takes, written once.

The ``simulator`` command line (``--budget``, ``--seed`` ...), the experiment
harness (``BUDGET_VALUES``, ``SEED`` ...) and the Python API all call these
functions, so a value means the same thing, and is refused with the same
message, wherever it is given. Each function takes the raw value, the name
the user knows it by and where it came from (``flag``, ``environment``), and
returns the typed value or raises :class:`~simulator.base.errors.ConfigError`
(see :mod:`simulator.base.validation`).

The rules:

* **budget**: a finite number > 0. An infinite budget is refused: baselines
  are simulated without a deadline, so with no budget either nothing would
  bound an episode, and the cost total ``B - b`` would be ``inf - inf``.
* **deadline**: a number > 0; ``inf`` (no deadline) is allowed.
* **ratio** (a multiple of a DAG's nominal budget or deadline): a finite
  number > 0.
* **seed**: an integer in [0, 2**63 - 1] (the compiled code takes a signed
  64-bit integer; negative seeds would silently alias large ones).
* **trials**: an integer in [1, 2**62].
* **MCPP model names**: each name must be a model of the pool; on a DAG that
  lacks some of them the planner uses the others (the records list the models
  actually used), and at least one must be on each DAG.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.validation import check_int, check_number, closest, where

MAX_SEED = 2**63 - 1
MAX_TRIALS = 2**62


def check_budget(value: Any, name: str = "--budget", source: str | None = "flag") -> float:
    """A budget: a finite number > 0 (see the module docstring for why not ``inf``)."""
    return check_number(value, name, source, lo=0.0, lo_inclusive=False)


def check_deadline(value: Any, name: str = "--deadline", source: str | None = "flag") -> float:
    """A deadline in seconds: a number > 0, ``inf`` meaning no deadline."""
    return check_number(value, name, source, lo=0.0, lo_inclusive=False, allow_inf=True)


def check_ratio(value: Any, name: str, source: str | None = "flag") -> float:
    """A multiple of a nominal scale: a finite number > 0."""
    return check_number(value, name, source, lo=0.0, lo_inclusive=False)


def check_seed(value: Any, name: str = "--seed", source: str | None = "flag") -> int:
    """A run seed: an integer in [0, 2**63 - 1]."""
    return check_int(value, name, source, lo=0, hi=MAX_SEED)


def check_trials(value: Any, name: str = "--trials", source: str | None = "flag") -> int:
    """A number of trials: an integer >= 1."""
    return check_int(value, name, source, lo=1, hi=MAX_TRIALS)


def check_mcpp_model_names(
    ids: Iterable[Any] | None, pool_models: Sequence[str], name: str, source: str | None = None
) -> None:
    """Refuse MCPP model names that are no model of the pool (a typo must not be dropped silently).

    Integers and digit strings that are not model names are positions, checked
    per DAG by the planner.
    """
    if not ids:
        return
    known = list(pool_models)
    bad = []
    for x in ids:
        if isinstance(x, int) or (isinstance(x, str) and x.isdigit() and x not in known):
            continue
        if str(x) not in known:
            bad.append(str(x))
    if bad:
        parts = []
        for b in bad:
            hint = closest(b, known)
            parts.append(repr(b) + (f" (did you mean {hint!r}?)" if hint else ""))
        raise ConfigError(
            f"{where(name, source)}: unknown model(s) {', '.join(parts)}; the pool's models are {', '.join(known)}"
        )

"""Method names, method sets and the registry of Python policies (planners).

``METHOD_ORDER`` is the paper's order of the 13 methods. Baselines run in the
compiled loop of :mod:`simulator.baselines`; planners such as MCPP register a
factory here (``register_policy``) and run through
:func:`simulator.episode.run_policy_episode`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .baselines import BASELINE_METHODS, SEQUENTIAL_KS, STATIC_METHODS
from .errors import ConfigError
from .mcpp_params import MCPP

METHOD_ORDER: tuple[str, ...] = BASELINE_METHODS + (MCPP,)
METHOD_SETS: dict[str, tuple[str, ...]] = {
    "all": METHOD_ORDER,
    "seq": tuple(SEQUENTIAL_KS),
    "static": STATIC_METHODS,
    "mcpp": (MCPP,),
    "loader_only": (MCPP,),
    "baselines": BASELINE_METHODS,
    "baseline_only": BASELINE_METHODS,
}

# name -> factory(params: Mapping, planning_arrays | None) -> Policy
_POLICY_FACTORIES: dict[str, Callable[..., Any]] = {}


def register_policy(name: str, factory: Callable[..., Any]) -> None:
    """Make a Python policy available under ``name`` (used by MCPP)."""
    _POLICY_FACTORIES[name] = factory


def _load_builtin_policies() -> None:
    if MCPP not in _POLICY_FACTORIES:
        from .mc_portfolio_policy import make_mcpp_policy  # a broken install fails here, loudly

        register_policy(MCPP, make_mcpp_policy)


def is_baseline(method: str) -> bool:
    return method in BASELINE_METHODS


def make_policy(method: str, params: Mapping[str, Any] | None = None, planning=None):
    """Instantiate the Python policy ``method`` with its parameters."""
    _load_builtin_policies()
    if method not in _POLICY_FACTORIES:
        raise ConfigError(f"method {method!r} is not available as a planner")
    return _POLICY_FACTORIES[method](dict(params or {}), planning)


def resolve_methods(spec: str) -> list[str]:
    """Expand a method set name or a comma list into methods, in ``METHOD_ORDER``."""
    spec = (spec or "all").strip()
    if spec in METHOD_SETS:
        return list(METHOD_SETS[spec])
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise ConfigError("empty method list")
    unknown = [s for s in names if s not in METHOD_ORDER and s not in METHOD_SETS]
    if unknown:
        raise ConfigError(
            f"unknown method(s) {', '.join(map(repr, unknown))}; methods: {', '.join(METHOD_ORDER)}; "
            f"sets: {', '.join(METHOD_SETS)}"
        )
    out: list[str] = []
    for s in names:
        for m in METHOD_SETS.get(s, (s,)):
            if m not in out:
                out.append(m)
    return sorted(out, key=METHOD_ORDER.index)

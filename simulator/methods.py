"""The table of methods: every method the simulator, the command line and the harness can run.

Each module listed in :data:`METHOD_MODULES` holds a tuple ``METHODS`` of
:class:`~simulator.engine.registry.MethodSpec` entries; this module registers them
in that order. Everything else is derived from the entries: ``METHOD_ORDER``
(the paper's 13 methods, the set ``all``), the method sets, ``is_baseline``,
the command line's ``--method`` and the harness's ``METHOD_SET`` checks, how
:func:`simulator.simulate.simulate_dag_budget` runs a method, and which
methods the analysis compares with which. Adding a policy is one new module
with a ``METHODS`` tuple plus its line below (``docs/adding_a_policy.md``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from simulator.base.errors import ConfigError
from simulator.engine.registry import MethodSpec, Registry, split_method_list
from simulator.mcpp.params import MCPP

#: modules whose ``METHODS`` are registered, in this order (the order of tables and plots)
METHOD_MODULES: tuple[str, ...] = (
    "simulator.baselines.compiled",  # the 12 baselines: Sequential-k (Retry) and static dispatch-once
    "simulator.mcpp.policy",  # MCPP
    "simulator.baselines.further.policies",  # LOADER and Chernoff-deadline baselines
    "simulator.policies.cheapest_first",  # the example of docs/adding_a_policy.md
)

REGISTRY = Registry()
for _module in METHOD_MODULES:
    for _spec in importlib.import_module(_module).METHODS:
        REGISTRY.register(_spec)

METHOD_SETS: dict[str, tuple[str, ...]] = REGISTRY.sets()
METHOD_ORDER: tuple[str, ...] = METHOD_SETS["all"]  # the paper's 13 methods
BASELINE_METHODS: tuple[str, ...] = METHOD_SETS["baselines"]


def method_spec(name: str, source: str | None = None) -> MethodSpec:
    """The entry of ``name`` (a registered method, an alias such as ``MCPP``, or a variant ``name[...]``).

    Unknown names are refused; the entry's ``name`` is the registered one, which records keep.
    """
    return REGISTRY.get(name, source)


def canonical_method(name: str) -> str:
    """The registered name of ``name`` (``MCPP``, ``mcpp`` -> ``mc_portfolio_rollout``), variants included."""
    return REGISTRY.canonical(name)


def is_baseline(method: str) -> bool:
    """Whether the analysis compares the other methods with ``method`` (False for unknown names)."""
    try:
        return REGISTRY.get(method).baseline
    except ConfigError:
        return False


def make_policy(method: str, params: Mapping[str, Any] | None = None, planning=None):
    """Instantiate the Python policy ``method`` with its parameters (the entry's fixed ones on top)."""
    spec = method_spec(method)
    if spec.compiled:
        raise ConfigError(f"method {method!r} is a compiled baseline, not a Python policy")
    return spec.factory(spec.run_params(params), planning)


def resolve_methods(spec: str, source: str | None = None) -> list[str]:
    """Expand method set names, methods and variants (comma list) into methods, in registry order.

    Variants follow their base method, in the order given; a name given twice
    counts once.
    """
    names = split_method_list((spec or "all").strip() or "all")
    if not names:
        raise ConfigError((f"{source}: " if source else "") + "empty method list")
    out: list[str] = []
    for s in names:
        for m in METHOD_SETS.get(s, (s,)):
            m = REGISTRY.get(m, source, sets=True).name  # refuses unknown names and bad variants; MCPP -> its name
            if m not in out:
                out.append(m)
    order = {m: i for i, m in enumerate(REGISTRY.names())}
    return sorted(out, key=lambda m: (order[method_spec(m).base_name], out.index(m)))


def uses_settings(methods: list[str], key: str) -> bool:
    """Whether any of ``methods`` reads the run settings ``key`` (``mcpp``, ``further``)."""
    return any(method_spec(m).settings_key == key for m in methods)


def uses_planning(methods: list[str]) -> bool:
    """Whether any of ``methods`` is a Python policy (planners read the planning statistics)."""
    return any(not method_spec(m).compiled for m in methods)


__all__ = [
    "BASELINE_METHODS",
    "MCPP",
    "METHOD_MODULES",
    "METHOD_ORDER",
    "METHOD_SETS",
    "REGISTRY",
    "canonical_method",
    "is_baseline",
    "make_policy",
    "method_spec",
    "resolve_methods",
    "uses_planning",
    "uses_settings",
]

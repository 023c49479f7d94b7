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
import sys
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

#: an entry's functions (loaded with its module when first called, for the modules of the light table)
CALLABLES = ("rule", "factory", "check_params", "check_dag")
#: the light table of the registered methods, generated from their modules (``python -m simulator.methods``)
TABLE_MODULE = "simulator.method_table"


class Deferred:
    """One function of a method's entry, taken from the entry in the method's module when first called.

    The entries of the modules in the light table (:data:`TABLE_MODULE`) are
    built from the table, with these in place of their functions: naming,
    checking and listing methods (the settings check of ``prepare``) then
    imports none of the kernels' modules (nor numba); running one imports
    its module, as before.
    """

    __slots__ = ("module", "name", "attr")

    def __init__(self, module: str, name: str, attr: str) -> None:
        self.module, self.name, self.attr = module, name, attr

    def __call__(self, *args, **kwargs):
        return getattr(module_specs(self.module)[self.name], self.attr)(*args, **kwargs)

    def __reduce__(self):
        return (Deferred, (self.module, self.name, self.attr))

    def __repr__(self) -> str:
        return f"<{self.attr} of {self.name} in {self.module}, loaded when first called>"


_LOADED: dict[str, dict[str, MethodSpec]] = {}


def table_row(spec: MethodSpec) -> dict[str, Any]:
    """What the light table holds of an entry: every field but its functions, and which functions it has."""
    import dataclasses

    row = {}
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name in CALLABLES:
            continue
        if isinstance(value, Mapping):
            value = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING or value != default:
            row[f.name] = value
    row["callables"] = tuple(f for f in CALLABLES if getattr(spec, f) is not None)
    return row


def module_specs(module: str) -> dict[str, MethodSpec]:
    """The entries of ``module`` as the module declares them (imported once), checked against the light table."""
    if module not in _LOADED:
        specs = {s.name: s for s in importlib.import_module(module).METHODS}
        rows = _table().get(module)
        if rows is not None and [table_row(s) for s in specs.values()] != list(rows):
            raise RuntimeError(f"{TABLE_MODULE} is out of date for {module} (its METHODS changed): regenerate it "
                               "with `python -m simulator.methods`")  # fmt: skip
        _LOADED[module] = specs
    return _LOADED[module]


def _table() -> dict[str, tuple]:
    try:
        return importlib.import_module(TABLE_MODULE).TABLE
    except ImportError:  # no table: every module is imported
        return {}


def _light_spec(module: str, row: Mapping[str, Any]) -> MethodSpec:
    fields = {k: v for k, v in row.items() if k != "callables"}
    fns = {f: Deferred(module, row["name"], f) for f in row["callables"]}
    return MethodSpec(**fields, **fns)


def write_table(path: str | None = None) -> str:
    """Regenerate the light table from the modules' ``METHODS`` (every module of :data:`METHOD_MODULES`)."""
    import os

    table = {m: tuple(table_row(s) for s in importlib.import_module(m).METHODS) for m in METHOD_MODULES}
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "method_table.py")
    text = ('"""The light table of the registered methods: every field of each entry but its functions.\n\n'
            "Generated from the ``METHODS`` of the modules of :data:`simulator.methods.METHOD_MODULES` by\n"
            "``python -m simulator.methods``; do not edit. :mod:`simulator.methods` builds the entries of these\n"
            "modules from it without importing them (no kernels, no numba), and checks it against a module's\n"
            'own entries when the module is loaded (tests/test_registry.py checks all of them).\n"""\n\n'
            "TABLE = {\n" + "".join(f"    {m!r}: (\n" + "".join(f"        {r!r},\n" for r in rows) + "    ),\n"
                                     for m, rows in table.items()) + "}\n")  # fmt: skip
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


REGISTRY = Registry()
_TABLE = _table()
for _module in METHOD_MODULES:
    if _module in _TABLE:
        _specs = [_light_spec(_module, row) for row in _TABLE[_module]]
    else:  # a module the table does not know (e.g. a policy just added): its entries as they are
        _specs = list(module_specs(_module).values())
    for _spec in _specs:
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


def method_label(name: str) -> str:
    """The name a person reads (tables, reports, headers, plots): ``MCPP`` for ``mc_portfolio_rollout``.

    A variant keeps its brackets (``MCPP[crn]``); a baseline, its name; an
    unknown name is returned as given. Records and files keep the registered
    name (the published code's), so only what is printed or drawn calls this.
    """
    base, bracket, rest = str(name).partition("[")
    try:
        spec = method_spec(base)
    except ConfigError:
        return str(name)
    return spec.table_label + bracket + rest


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
    "CALLABLES",
    "Deferred",
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
    "write_table",
]


if __name__ == "__main__":  # pragma: no cover
    print(write_table(sys.argv[1] if len(sys.argv) > 1 else None))

"""Import layers: no module imports a higher layer, and no two modules import each other.

Why: a reader (or a new policy) should be able to understand a layer knowing
only the layers below it, and a cycle makes "which module defines this rule"
unanswerable. The layers, from the bottom:

====  ==========  ============================================================
rank  layer       modules
====  ==========  ============================================================
0     base        ``simulator/base/``: errors, validation, file I/O, keyed random
                  streams, intervals, settings
1     format      ``simulator/pools/``: the pool format and the rules every pool
                  builder shares (dependency graphs, templates from rows)
2     costs       ``simulator/costs/``: cost modes, flat arrays, nominal scales,
                  planning statistics
3     engine      ``simulator/engine/`` (the event loop, the Python-policy episode,
                  the registry)
4     baselines   ``simulator/baselines/``: the compiled and further baselines
4     planner     ``simulator/mcpp/`` and ``simulator/policies/`` (beside
                  ``baselines``: MCPP and a user's policy never import a baseline)
5     methods     ``simulator/methods.py``, ``simulate.py``, ``checks.py``, ``method_table.py``,
                  ``simulator/surface/``
2     data        pool builders, synthetic pools, benchmark loaders/rollouts
6     front       command lines: ``simulator/cli/``, the harness
6     executor    ``executor/``: the live executor (beside ``front``; imports ``data`` and the
                  simulator's layers up to ``methods``, not the harness)
7     entry       top-level scripts, ``tests/``, ``benchmarks/``
====  ==========  ============================================================

``data`` sits beside ``costs`` .. ``methods``: it may use the pool format but
not the simulator, and the simulator never reads benchmark files. Within
``entry``, ``benchmarks/`` and ``tests/`` do not import each other. Every
import counts, also one inside a function: a lazy import still couples two
modules (it only hides the coupling until the line runs).
"""

from __future__ import annotations

import ast
import fnmatch
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulator", "harness", "poolbuild", "codeflow", "ProofFlow", "executor", "tests", "benchmarks")
SKIP_DIRS = {"lean_project", "__pycache__", ".venv", "venv", "results", "build"}

#: layer -> the layers it may import (besides itself). Closed under "below" by construction.
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "format": {"base"},
    "costs": {"base", "format"},
    "engine": {"base", "format", "costs"},
    "baselines": {"base", "format", "costs", "engine"},
    "planner": {"base", "format", "costs", "engine"},
    "methods": {"base", "format", "costs", "engine", "baselines", "planner"},
    "data": {"base", "format"},
    "front": {"base", "format", "costs", "engine", "baselines", "planner", "methods", "data"},
    "executor": {"base", "format", "costs", "engine", "baselines", "planner", "methods", "data"},
    "benchmarks": {"base", "format", "costs", "engine", "baselines", "planner", "methods", "data", "front", "executor"},
    "tests": {"base", "format", "costs", "engine", "baselines", "planner", "methods", "data", "front", "scripts", "executor"},
    "scripts": {"base", "format", "costs", "engine", "baselines", "planner", "methods", "data", "front"},
}

#: (module pattern, layer); the first matching pattern decides (fnmatch on the dotted name).
LAYERS: list[tuple[str, str]] = [
    ("simulator", "base"),  # the package __init__ (a docstring)
    ("simulator.base", "base"),
    ("simulator.base.*", "base"),
    ("simulator.pools", "format"),
    ("simulator.pools.*", "format"),
    ("simulator.costs", "costs"),
    ("simulator.costs.*", "costs"),
    ("simulator.engine", "engine"),
    ("simulator.engine.*", "engine"),
    ("simulator.baselines", "baselines"),
    ("simulator.baselines.*", "baselines"),
    ("simulator.mcpp", "planner"),
    ("simulator.mcpp.*", "planner"),
    ("simulator.policies", "planner"),  # Python policies added through the registry (docs/adding_a_policy.md)
    ("simulator.policies.*", "planner"),
    ("simulator.methods", "methods"),
    ("simulator.method_table", "methods"),  # the light table of the registry (generated, data only)
    ("simulator.simulate", "methods"),
    ("simulator.checks", "methods"),  # the conformance battery every registered policy passes
    ("simulator.surface", "methods"),  # prediction surfaces: trees of trajectories over a (budget, deadline) grid
    ("simulator.surface.*", "methods"),
    ("simulator.cli", "front"),
    ("simulator.cli.*", "front"),
    ("simulator.__main__", "front"),
    ("harness", "front"),
    ("harness.*", "front"),
    ("poolbuild", "data"),
    ("poolbuild.*", "data"),
    ("codeflow", "data"),
    ("codeflow.*", "data"),
    ("ProofFlow", "data"),
    ("ProofFlow.*", "data"),
    ("executor", "executor"),  # the live executor (docs/executor.md): beside the command lines, below nothing
    ("executor.*", "executor"),
    ("tests", "tests"),
    ("tests.*", "tests"),
    ("benchmarks", "benchmarks"),
    ("benchmarks.*", "benchmarks"),
]


def module_name(path: Path, root: Path) -> str:
    """Dotted module name of a file under ``root`` (a top-level script keeps its stem)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path) -> dict[str, Path]:
    """Every project module: the packages' files and the top-level scripts."""
    out: dict[str, Path] = {}
    for p in sorted(root.glob("*.py")):
        out[module_name(p, root)] = p
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            if not SKIP_DIRS.intersection(p.relative_to(root).parts):
                out[module_name(p, root)] = p
    return out


def imports_of(name: str, source: str, is_package: bool, known: Iterable[str]) -> list[tuple[str, int]]:
    """Project modules imported anywhere in ``source`` (also inside functions), with line numbers.

    ``from pkg import x`` counts as importing ``pkg.x`` when that is a module,
    else ``pkg`` itself.
    """
    known = set(known)
    package = name if is_package else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []

    def add(target: str, line: int) -> None:
        # the longest known prefix: "simulator.pools.pool.load_pool" -> "simulator.pools.pool"
        parts = target.split(".")
        for k in range(len(parts), 0, -1):
            cand = ".".join(parts[:k])
            if cand in known:
                out.append((cand, line))
                return

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}" if mod else a.name
                add(full if full in known else mod, node.lineno)
    return sorted({(m, line) for m, line in out if m != name}, key=lambda x: (x[1], x[0]))


def layer_of(name: str, layers: list[tuple[str, str]] = LAYERS) -> str | None:
    """The layer of a module; a top-level script (no dot, not a package) is ``scripts``."""
    for pattern, layer in layers:
        if fnmatch.fnmatchcase(name, pattern):
            return layer
    return None


def import_graph(root: Path) -> dict[str, list[tuple[str, int]]]:
    mods = project_modules(root)
    return {
        name: imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", mods)
        for name, path in mods.items()
    }


def layer_violations(
    graph: Mapping[str, list[tuple[str, int]]],
    layers: list[tuple[str, str]] = LAYERS,
    allowed: Mapping[str, set[str]] = ALLOWED,
    scripts: Iterable[str] = (),
) -> list[str]:
    """One readable line per import that goes up (or sideways between layers), or per unassigned module."""
    scripts = set(scripts)
    problems: list[str] = []

    def lay(m: str) -> str | None:
        return "scripts" if m in scripts else layer_of(m, layers)

    for mod in sorted(graph):
        src = lay(mod)
        if src is None:
            problems.append(f"{mod}: no layer; add it to LAYERS in tests/test_layers.py")
            continue
        for target, line in graph[mod]:
            dst = lay(target)
            if dst is None or dst == src or dst in allowed[src]:
                continue
            problems.append(f"{mod}:{line} ({src}) imports {target} ({dst})")
    return problems


def import_cycles(graph: Mapping[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted({t for t, _ in graph.get(start, [])})))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted({t for t, _ in graph.get(w, [])}))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _scripts(root: Path) -> list[str]:
    return [p.stem for p in root.glob("*.py")]


# ----------------------------------------------------------------------------


def test_no_module_imports_a_higher_layer():
    graph = import_graph(ROOT)
    assert "simulator.engine.loop" in graph and "poolbuild.synthetic" in graph  # the walk found the code
    assert layer_violations(graph, scripts=_scripts(ROOT)) == []


def test_no_import_cycles():
    assert import_cycles(import_graph(ROOT)) == []


def test_simulator_top_level_holds_at_most_six_modules():
    """``simulator/``'s layers hold everything but a few entry points (docs/architecture.md): a new top-level module
    belongs in a layer's folder, and each one that stays is placed by a pattern of its own in LAYERS."""
    top = sorted(p.name for p in (ROOT / "simulator").glob("*.py"))
    assert len(top) <= 6, top
    named = {pattern for pattern, _ in LAYERS}
    for name in top:
        module = "simulator" if name == "__init__.py" else "simulator." + name.removesuffix(".py")
        assert module in named, f"simulator/{name} has no entry of its own in LAYERS"


def test_every_allowed_layer_is_below():
    """ALLOWED is a partial order: no layer may (transitively) import itself through another."""
    for layer, below in ALLOWED.items():
        for b in below:
            assert layer not in ALLOWED[b], (layer, b)
            assert ALLOWED[b] <= below, (layer, b)  # transitively closed


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text), encoding="utf-8")


def test_checker_flags_a_synthetic_violation(tmp_path):
    """A tiny fake project: the engine importing the CLI lazily, a loader importing the engine."""
    files = {
        "simulator/__init__.py": "", "simulator/base/__init__.py": "", "simulator/base/errors.py": "",
        "simulator/pools/__init__.py": "", "simulator/pools/pool.py": "from ..base.errors import X\n",
        "simulator/engine/__init__.py": "",
        "simulator/engine/loop.py": "from ..pools import pool\n\ndef f():\n    from ..cli.main import main\n",
        "simulator/cli/__init__.py": "", "simulator/cli/main.py": "from simulator.engine.loop import f\n",
        "codeflow/__init__.py": "", "codeflow/dataset.py": "import simulator.engine.loop\nfrom simulator.pools import pool\n",
        "simulator/mystery.py": "",
    }
    for path, text in files.items():
        _write(tmp_path, path, text)
    graph = import_graph(tmp_path)
    assert graph["simulator.pools.pool"] == [("simulator.base.errors", 1)]
    got = layer_violations(graph)
    assert got == [
        "codeflow.dataset:1 (data) imports simulator.engine.loop (engine)",
        "simulator.engine.loop:4 (engine) imports simulator.cli.main (front)",
        "simulator.mystery: no layer; add it to LAYERS in tests/test_layers.py",
    ]
    assert import_cycles(graph) == [["simulator.cli.main", "simulator.engine.loop"]]


@pytest.mark.parametrize(
    "name, source, is_package, expected",
    [
        ("simulator.cli.main", "from ..pools.pool import load_pool", False, ["simulator.pools.pool"]),
        ("simulator.pools", "from . import pool", True, ["simulator.pools.pool"]),
        ("simulator.baselines.further.x", "from ...pools.pool import P", False, ["simulator.pools.pool"]),
        ("tests.t", "from simulator.base import errors", False, ["simulator.base.errors"]),
        ("tests.t", "import simulator.pools.pool as p", False, ["simulator.pools.pool"]),
        ("tests.t", "from simulator import __doc__", False, ["simulator"]),
        ("tests.t", "import numpy", False, []),
    ],
)
def test_imports_are_resolved_to_modules(name, source, is_package, expected):
    known = ["simulator", "simulator.pools", "simulator.pools.pool", "simulator.base", "simulator.base.errors",
             "simulator.cli", "simulator.cli.main", "simulator.baselines.further", "simulator.baselines.further.x",
             "tests.t"]
    assert [m for m, _ in imports_of(name, source, is_package, known)] == expected


@pytest.mark.parametrize(
    "importer, target",
    [
        ("simulator.mcpp.kernel", "simulator.baselines.compiled"),
        ("simulator.policies.cheapest_first", "simulator.baselines.further.loader"),
        ("simulator.baselines.compiled", "simulator.mcpp.kernel"),
    ],
)
def test_mcpp_and_baselines_are_separate_floors(importer, target):
    """The docstrings of ``simulator/mcpp``, ``simulator/policies`` and ``simulator/baselines``:
    neither side may import the other (both stand on the engine; the method table joins them)."""
    graph = {importer: [(target, 3)], target: [], "simulator.methods": [(importer, 1), (target, 2)]}
    assert layer_violations(graph) == [f"{importer}:3 ({layer_of(importer)}) imports {target} ({layer_of(target)})"]
    assert {layer_of(importer), layer_of(target)} == {"planner", "baselines"}


def test_layer_doc_matches_allowed():
    """Every layer in ALLOWED is named in the module docstring's table (the table is the documentation)."""
    table = __doc__.split("====  ==========")[2]
    named = {line.split()[1] for line in table.splitlines() if line[:1].isdigit()}
    assert set(ALLOWED) - {"tests", "benchmarks", "scripts"} <= named

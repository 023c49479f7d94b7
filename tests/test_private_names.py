"""Private names stay in their package: no module uses a ``_name`` of a module in another folder.

Why: a leading underscore tells a maintainer "only this package relies on
this; change it freely". A private name used from another folder
(``simulator/engine`` vs ``simulator/baselines``, ``harness`` vs
``simulator``) breaks that promise silently: renaming it breaks a package the
reader did not look at. What another package needs gets a public name. Within
one folder private names may be shared (``harness/plots._mpl``); ``tests/``
and ``benchmarks/`` may look inside anything. Counted: ``from m import _x``
and ``m._x`` where ``m`` is a project module, also inside functions, and the
numba cache stems other packages name as strings.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from test_layers import ROOT, project_modules

#: folders (top-level) whose modules may use other packages' private names
INSIDERS = ("tests", "benchmarks")


def _package(name: str, path: Path) -> str:
    """Dotted name of the folder a module lives in ("" for a top-level script)."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"], or None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def private_uses(source: str, here: str, mods: Iterable[str]) -> list[tuple[str, str, int]]:
    """(module, name, line) of every private name of a project module that ``source`` uses.

    ``here``: the dotted folder of ``source`` (relative imports start there).
    """
    mods = set(mods)
    out: list[tuple[str, str, int]] = []
    aliases: dict[str, str] = {}  # local name -> project module it is bound to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: from the folder of ``source``, one up per extra dot
                base = here.split(".") if here else []
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, mod] if mod else base)
            for a in node.names:
                if f"{mod}.{a.name}" in mods:
                    aliases[a.asname or a.name] = f"{mod}.{a.name}"
                elif mod in mods:
                    out.append((mod, a.name, node.lineno))
    for node in ast.walk(tree):
        parts = _dotted(node) if isinstance(node, ast.Attribute) else None
        if parts and parts[0] in aliases:
            chain = ".".join([*aliases[parts[0]].split("."), *parts[1:-1]])
            if chain in mods:
                out.append((chain, parts[-1], node.lineno))
    return [(m, n, line) for m, n, line in out if n.startswith("_") and not n.startswith("__")]


def private_crossings(root: Path) -> list[str]:
    """One line per use of a private name of a project module from another folder."""
    mods = project_modules(root)
    out = set()
    for name, path in mods.items():
        if name.split(".")[0] in INSIDERS:
            continue
        here = _package(name, path)
        for mod, attr, line in private_uses(path.read_text(encoding="utf-8"), here, mods):
            if _package(mod, mods[mod]) != here:
                out.add(f"{path.relative_to(root)}:{line}: {mod}.{attr}")
    return sorted(out)


def test_no_private_name_crosses_a_package():
    bad = private_crossings(ROOT)
    assert not bad, "private names used from another package (give them a public name): " + ", ".join(bad)


def test_cache_stems_name_public_kernels():
    from harness import warmup
    from simulator.cli import prewarm_groups

    stems = [*prewarm_groups.KERNEL_FILES, *(s for g in warmup.GROUP_KERNELS.values() for s in g)]
    assert [s for s in stems if s.rpartition(".")[2].startswith("_")] == []


def test_the_check_finds_a_crossing(tmp_path):
    (tmp_path / "simulator" / "engine").mkdir(parents=True)
    (tmp_path / "simulator" / "other").mkdir()
    for d in ("simulator", "simulator/engine", "simulator/other"):
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "simulator" / "engine" / "loop.py").write_text("def _step():\n    pass\n_K = 1\n")
    (tmp_path / "simulator" / "engine" / "near.py").write_text(
        "from .loop import _step\n"
    )  # same folder: fine
    (tmp_path / "simulator" / "other" / "far.py").write_text(
        "from simulator.engine.loop import _K\n"
        "from simulator.engine import loop\n"
        "import simulator.engine.loop as eng\n"
        "def f():\n    return loop._step, eng._step, loop.__name__\n"
    )
    assert private_crossings(tmp_path) == [
        "simulator/other/far.py:1: simulator.engine.loop._K",
        "simulator/other/far.py:5: simulator.engine.loop._step",
    ]

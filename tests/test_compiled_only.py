"""``compiled_only`` kernels have no interpreter entry point: no Python code may refer to one.

Calling such a function from Python crashes the interpreter (numba builds no
CPython wrapper for it, see simulator/base/jit.py), so this static check stands in
for the error numba cannot raise: every name decorated ``@compiled_only`` in
the repository may appear only inside ``@njit``/``@compiled_only`` bodies and
in import statements. Passing one as a value from Python (a dispatch table, a
``fn = a if c else b``) counts as a reference too, with three exceptions that
handle the dispatcher as an object and never call it (the cold-start helper,
simulator/cli/prewarm_groups.py): the first argument of ``compile_for`` (compiles
it for given argument types) and the body of ``waited_kernels`` (the kernels
whose cache lookup waits for the helper), and ``name.py_func`` (its Python
source, compiled again as an inlined copy: simulator/mcpp/kernel.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".git", "node_modules", "results", "runs"}
#: calls whose first argument is a dispatcher handled as an object (compiled, never called)
COMPILERS = {"compile_for"}
#: functions that only list dispatchers as objects
LISTERS = {"waited_kernels"}


def _sources() -> dict[Path, ast.Module]:
    out = {}
    for p in ROOT.rglob("*.py"):
        if SKIP.isdisjoint(p.relative_to(ROOT).parts):
            out[p] = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    return out


def _decorator_name(d: ast.expr) -> str:
    node = d.func if isinstance(d, ast.Call) else d
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _compiled(fn: ast.FunctionDef) -> bool:
    return any(_decorator_name(d) in {"njit", "jit", "compiled_only"} for d in fn.decorator_list)


def compiled_only_names(trees: dict[Path, ast.Module]) -> set[str]:
    return {
        n.name
        for t in trees.values()
        for n in ast.walk(t)
        if isinstance(n, ast.FunctionDef) and any(_decorator_name(d) == "compiled_only" for d in n.decorator_list)
    }


def python_references(tree: ast.Module, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every use of ``names`` outside compiled bodies and imports."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_compiled: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in LISTERS:
                return
            in_compiled = isinstance(node, ast.FunctionDef) and _compiled(node)
            for d in node.decorator_list:
                visit(d, False)
            for child in node.body:
                visit(child, in_compiled)
            return
        if isinstance(node, ast.Call) and _decorator_name(node) in COMPILERS and node.args:
            for child in [node.func, *node.args[1:], *node.keywords]:
                visit(child, in_compiled)
            return
        if (isinstance(node, ast.Attribute) and node.attr == "py_func" and isinstance(node.value, ast.Name)
                and node.value.id in names):
            return  # its Python source, compiled again (an inlined copy): the dispatcher is never called
        if not in_compiled:
            if isinstance(node, ast.Name) and node.id in names:
                found.append((node.lineno, node.id))
            elif isinstance(node, ast.Attribute) and node.attr in names:
                found.append((node.lineno, node.attr))
        for child in ast.iter_child_nodes(node):
            visit(child, in_compiled)

    visit(tree, False)
    return found


def test_the_kernels_that_matter_are_compiled_only():
    names = compiled_only_names(_sources())
    # the engine's inner loop and MCPP's rollout: the bulk of a cold start's compile
    assert {"launch_per_attempt_arrays", "advance_arrays", "_run_episode", "run_pair", "charge_of_draw"} <= names


def test_no_python_code_refers_to_a_compiled_only_kernel():
    trees = _sources()
    names = compiled_only_names(trees)
    bad = [f"{p.relative_to(ROOT)}:{line}: {name}" for p, t in trees.items() for line, name in python_references(t, names)]
    assert not bad, "compiled_only kernels referred to from Python (would crash): " + ", ".join(bad)


def test_the_check_finds_a_python_call():
    src = (
        "from simulator.base.jit import compiled_only\n"
        "@compiled_only\ndef _inner(x):\n    return x\n"
        "@njit(cache=True)\ndef outer(x):\n    return _inner(x)\n"
        "def python_side(x):\n    return _inner(x)\n"
        "TABLE = {'a': _inner}\n"
    )
    tree = ast.parse(src)
    names = compiled_only_names({Path("x.py"): tree})
    assert names == {"_inner"}
    assert python_references(tree, names) == [(9, "_inner"), (10, "_inner")]

"""Short signatures: no function of the live packages takes more than 8 positional parameters.

Why: a call ``f(a, b, c, d, e, f, g, h, i)`` is read by counting; swapping two
of its arguments of one type is a silent bug. Past eight, the tail is
keyword-only (after a ``*``), so each call names what it passes. Checked:
every ``def`` (methods, nested and compiled functions included) below
``executor/``, ``simulator/surface/``, ``harness/surface/`` and
``codeflow/comp/``.
"""

from __future__ import annotations

import ast

from test_layers import ROOT

PACKAGES = ("executor", "simulator/surface", "harness/surface", "codeflow/comp")
MAX_POSITIONAL = 8


def long_signatures(source: str) -> list[tuple[str, int, int]]:
    """(function, line, positional parameters) of every function in ``source`` with more than MAX_POSITIONAL."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = len(node.args.posonlyargs) + len(node.args.args)
            if n > MAX_POSITIONAL:
                out.append((node.name, node.lineno, n))
    return out


def test_long_signatures_are_found():
    src = "def f(a, b, c, d, e, f, g, h, i): pass\ndef g(a, b, c, d, e, f, g, h, *, i, j): pass\n"
    assert long_signatures(src) == [("f", 1, 9)]


def test_no_function_takes_more_than_8_positional_parameters():
    bad = []
    for pkg in PACKAGES:
        files = sorted((ROOT / pkg).rglob("*.py"))
        assert files, pkg
        for p in files:
            for name, line, n in long_signatures(p.read_text(encoding="utf-8")):
                bad.append(f"{p.relative_to(ROOT)}:{line} {name}: {n} positional parameters")
    assert not bad, "make the tail keyword-only (after a *):\n" + "\n".join(bad)

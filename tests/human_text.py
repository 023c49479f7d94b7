"""What a person reads, checked: MCPP by its name, and a quantity's number followed by its unit.

Used by ``tests/test_human_output.py`` (the one-off commands, the quote, the
executor's summary) and ``tests/test_readme_commands.py`` (README command 1's
table and report). Records, JSON and file names keep ``mc_portfolio_rollout``
(the published code's name): a name in a code span, a link's target or a
JSON line is a file's or a record's, not prose.
"""

from __future__ import annotations

import re

RECORD_NAME = "mc_portfolio_rollout"
#: what may follow a budget, cost, deadline, makespan or planning time's number
UNITS = r"(tokens?|dollars|cost units|budget units|model seconds|model s\b|wall|ms\b|s\b|%|x\b|min\b|h\b)"
QUANTITY = r"\b(budget|deadline|cost|makespan|spent|spend|planning|planner)(?:_s|_ms)?\b"
_NUMBER_AFTER = re.compile(QUANTITY + r"[ \t]*(?:[:=]|of|at)?[ \t]*(-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?)(?![\d.])"
                           r"(?=[ \t]*([^\n]*))", re.I)


def prose(text: str) -> str:
    """``text`` without what names files or records: code spans, link targets, image lines, JSON lines."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(("{", "[")) and s.endswith(("}", "]")) or s.startswith("!["):
            continue
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        out.append(line)
    return "\n".join(out)


def record_names(text: str) -> list[str]:
    """Lines of ``text``'s prose that show the record name instead of ``MCPP``."""
    return [line for line in prose(text).splitlines() if RECORD_NAME in line]


def unitless(text: str) -> list[str]:
    """``quantity number`` pairs of ``text``'s prose whose number has no unit after it."""
    bad = []
    for m in _NUMBER_AFTER.finditer(prose(text)):
        after = m.group(3)
        if not re.match(UNITS, after, re.I):
            bad.append(m.group(0).strip())
    return bad


def check(text: str, what: str) -> None:
    """Assert ``text`` (the output of ``what``) shows MCPP by its name and every quantity with its unit."""
    names = record_names(text)
    assert not names, f"{what}: the record name {RECORD_NAME!r} shown to a person: {names[:3]}"
    bare = unitless(text)
    assert not bare, f"{what}: numbers without their unit: {bare[:5]}"

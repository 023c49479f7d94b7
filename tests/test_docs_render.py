"""The Markdown pages render as written: every code fence opens on a line of its own, and fences pair up.

A fence opened inside a sentence (docs/codeflow.md once had "its code in a ```python block") turns the
rest of the page into code: its headings vanish.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness_util import ROOT

PAGES = sorted(p for p in Path(ROOT).rglob("*.md") if not {".venv", "results", "node_modules"} & set(p.parts))


def fence_problems(text: str) -> list[str]:
    """Fence lines that are prose (a line starting with three backticks followed by words opens a code
    block that swallows what follows: docs/codeflow.md once wrapped "```python block. The last user turn"
    onto a line of its own); and a fence never closed."""
    bad, inside = [], False
    for i, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if not m:
            continue
        info = m.group(2).strip()
        if inside:
            inside = bool(info)  # a bare fence closes the block; one with words is the block's content
            continue
        if not re.fullmatch(r"[\w+.-]*", info):
            bad.append(f"line {i}: a fence followed by prose (a sentence wrapped onto a fence): {line.strip()[:80]}")
        inside = True
    if inside:
        bad.append("a fence is never closed")
    return bad


def test_every_page_opens_its_fences_on_lines_of_their_own():
    assert PAGES
    problems = {str(p.relative_to(ROOT)): fence_problems(p.read_text(encoding="utf-8")) for p in PAGES}
    assert not {k: v for k, v in problems.items() if v}


def test_the_check_finds_a_fence_inside_a_sentence():
    assert fence_problems("assistant = its code in a\n```python block. The last turn\nmore\n```\n")
    assert fence_problems("```bash\nls\n")  # never closed
    assert not fence_problems("```bash\nls\n```\n\nthe last ```` ```lean4 ```` block is checked\n")


def test_the_glossary_is_where_the_pages_point():
    readme = (Path(ROOT) / "docs" / "README.md").read_text(encoding="utf-8")
    assert "## Glossary" in readme and "| node, model |" in readme and "*query*" in readme
    assert "README.md#glossary" in (Path(ROOT) / "docs" / "problem.md").read_text(encoding="utf-8")

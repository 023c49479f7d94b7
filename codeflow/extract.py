"""Pull the code out of a chat answer (fenced blocks, optional reasoning, bare code)."""

from __future__ import annotations

import re

from codeflow.dataset import parse_python

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|$)", re.S)


def python_blocks(text: str) -> list[str]:
    """Bodies of the non-empty Python (or untagged) fenced blocks, ``<think>`` dropped."""
    text = _THINK.sub("", text or "")
    return [body for lang, body in _FENCE.findall(text)
            if lang.lower() in ("", "python", "py", "python3") and body.strip()]


def extract_code(text: str, func_name: str | None = None) -> str | None:
    """The code block that defines ``func_name`` (the last such block), else the last
    Python block, else the whole answer if it parses as Python; None when there is none."""
    if not text:
        return None
    text = _THINK.sub("", text)
    blocks = python_blocks(text)
    if blocks:
        if func_name:
            pat = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(func_name)}\s*\(", re.M)
            defining = [b for b in blocks if pat.search(b)]
            if defining:
                return defining[-1].rstrip() + "\n"
        return blocks[-1].rstrip() + "\n"
    stripped = text.strip()
    if not stripped:
        return None
    if parse_python(stripped) is None:
        return None
    return stripped + "\n"


def extract_all_blocks(text: str) -> str | None:
    """CodeFlow-Comp's rule: every Python fenced block joined, else the whole answer
    (``<think>`` dropped); None when nothing is left."""
    blocks = python_blocks(text)
    if blocks:
        return "\n".join(b.rstrip() for b in blocks) + "\n"
    stripped = _THINK.sub("", text or "").strip()
    return stripped + "\n" if stripped else None

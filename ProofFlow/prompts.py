"""Prompt templates (``ProofFlow/prompts/*.md``) and reading Lean code out of model answers.

Templates use ``{{name}}`` placeholders (Lean code and LaTeX are full of
braces, so ``str.format`` is not an option); rendering fails loudly when a
placeholder is left unfilled.
"""

from __future__ import annotations

import re
from pathlib import Path

from simulator.base.errors import ConfigError

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_CODE_BLOCK = re.compile(r"```(?:lean4|lean)?[ \t]*\n(.*?)```", re.DOTALL)
_DECL = re.compile(r"^(?:theorem|lemma)\s+(\S+)", re.MULTILINE)


def load_template(name: str, prompt_dir: str | Path | None = None) -> str:
    path = Path(prompt_dir or PROMPT_DIR) / f"{name}.md"
    if not path.is_file():
        raise ConfigError(f"prompt template {path} not found")
    return path.read_text(encoding="utf-8")


def render(template: str, **values: str) -> str:
    """Fill ``{{name}}`` placeholders; every placeholder must be given."""
    missing = sorted({m for m in _PLACEHOLDER.findall(template) if m not in values})
    if missing:
        raise ConfigError(f"prompt template needs values for {missing}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def extract_lean_code(answer: str) -> str | None:
    """The last fenced Lean code block of an answer (None when there is none)."""
    blocks = _CODE_BLOCK.findall(answer or "")
    blocks = [b for b in blocks if b.strip()]
    return blocks[-1].strip() + "\n" if blocks else None


def strip_header(code: str) -> str:
    """Code without import lines (the checker adds the standard header)."""
    return "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith("import "))


def _heads(code: str) -> list[str]:
    out = []
    for m in _DECL.finditer(code):
        head = " ".join(code[m.start():].split(":=", 1)[0].split())
        if head.startswith("lemma"):
            head = "theorem" + head[len("lemma"):]
        out.append(head)
    return out


def theorem_head(code: str) -> str | None:
    """Whitespace-normalised text of the last theorem/lemma, from its keyword to ``:=``.

    Used to check that a prover kept the statement it was asked to prove
    (a model may otherwise "prove" an easier statement).
    """
    heads = _heads(code)
    return heads[-1] if heads else None


def heads_in(code: str) -> set[str]:
    """Normalised heads of every theorem/lemma in ``code``."""
    return set(_heads(code))

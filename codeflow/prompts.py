"""Multi-turn CodeFlow prompts: one turn per subproblem, dependencies first.

A subproblem's conversation replays its transitive dependencies as earlier
turns (user: the dependency's statement; assistant: its code, either the
reference solution or the best verified attempt), then asks for the
subproblem itself. The function signature is taken from the reference code
(name, parameters, annotations; never the body) because the tests call the
function positionally and the statements do not always name the parameters.
"""

from __future__ import annotations

import ast

from codeflow.dataset import Problem, Subproblem, parse_python

SYSTEM_PROMPT = (
    "You are an expert Python programmer. We are writing a Python module one function per "
    "turn. Code written in earlier turns is already part of the module and can be called "
    "directly. Answer each turn with the complete implementation of the requested function "
    "(plus any private helpers it needs) in a single ```python code block. Do not repeat "
    "functions from earlier turns and do not add example usage or tests."
)


def signature_of(sub: Subproblem) -> str | None:
    """``def name(params) -> ret:`` of the reference solution, or None if unavailable."""
    tree = parse_python(sub.reference_code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == sub.name:
            prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            ret = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
            return f"{prefix} {node.name}({ast.unparse(node.args)}){ret}:"
    return None


def turn_text(sub: Subproblem, with_signature: bool = True) -> str:
    parts = [f"Implement `{sub.name}`.", "", sub.statement.strip()]
    sig = signature_of(sub) if with_signature else None
    if sig:
        parts += ["", "Signature:", "```python", sig, "```"]
    return "\n".join(parts)


def module_context(problem: Problem) -> str:
    parts = ["The module we are writing serves this purpose:", "",
             problem.description.strip()]
    imports = problem.module_imports()
    if imports:
        parts += ["", "The module starts with these imports (they are available to your code):",
                  "```python", *imports, "```"]
    return "\n".join(parts)


def build_messages(problem: Problem, name: str, dependency_code: dict[str, str],
                   with_signature: bool = True) -> list[dict[str, str]]:
    """Chat messages asking for subproblem ``name`` after its dependencies' turns."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    first = True
    for dep in problem.closure(name):
        text = turn_text(dep, with_signature)
        if first:
            text = module_context(problem) + "\n\n" + text
            first = False
        messages.append({"role": "user", "content": text})
        code = dependency_code.get(dep.name, dep.reference_code).strip()
        messages.append({"role": "assistant", "content": f"```python\n{code}\n```"})
    text = turn_text(problem.by_name[name], with_signature)
    if first:
        text = module_context(problem) + "\n\n" + text
    messages.append({"role": "user", "content": text})
    return messages

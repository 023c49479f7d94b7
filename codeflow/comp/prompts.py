"""Multi-turn prompts of the CodeFlow-Comp split: one function per turn, the last the main program.

Every user turn restates the problem description (the published pipeline
shows it at every turn), names the turn (``Turn k of T``), gives the
subproblem's statement and, unless turned off, the reference signature
(``prompts.signature_of``: name and parameters, never the body). Earlier
turns whose code is in the context module are replayed as user/assistant
pairs, so the model sees exactly the code its answer is judged with. The
last turn says how the main program is judged: it takes no arguments, reads
standard input (whose line breaks arrive as spaces) and prints the answer.
"""

from __future__ import annotations

from codeflow.comp.dataset import CompProblem
from codeflow.dataset import Subproblem
from codeflow.prompts import signature_of

SYSTEM_PROMPT = (
    "You are an expert competitive programmer. We solve a programming problem step by step in "
    "Python, one function per turn. Functions written in earlier turns are already defined and "
    "can be called directly; do not rewrite them. Answer each turn with the complete "
    "implementation of the requested function (plus any helpers and imports it needs) in a "
    "single ```python code block. Do not add example usage or tests."
)

MAIN_NOTE = (
    "This is the main program. `{name}()` takes no arguments: it reads the whole input from "
    "standard input and prints the answer. The judge calls it; do not call it yourself. Line "
    "breaks of the input may arrive as single spaces, so read all of standard input and split "
    "it into tokens."
)


def comp_turn_text(problem: CompProblem, sub: Subproblem, with_signature: bool = True) -> str:
    """The user message of one turn."""
    parts = ["Problem:", "", problem.description.strip(), "",
             f"Turn {sub.index + 1} of {len(problem.subproblems)}: implement `{sub.name}`.", "",
             sub.statement.strip()]
    sig = signature_of(sub) if with_signature else None
    if sig:
        parts += ["", "Signature:", "```python", sig, "```"]
    if problem.is_last_turn(sub.name):
        parts += ["", MAIN_NOTE.format(name=sub.name)]
    return "\n".join(parts)


def comp_messages(problem: CompProblem, name: str, context: list[tuple[str, str]],
                  with_signature: bool = True) -> list[dict[str, str]]:
    """Chat messages for turn ``name`` after the turns in ``context`` ((name, code) pairs)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for dep, code in context:
        messages.append({"role": "user",
                         "content": comp_turn_text(problem, problem.by_name[dep], with_signature)})
        messages.append({"role": "assistant", "content": f"```python\n{code.strip()}\n```"})
    messages.append({"role": "user",
                     "content": comp_turn_text(problem, problem.by_name[name], with_signature)})
    return messages

"""CodeFlowBench-Comp loader: Codeforces problems cut into dependent functions.

The competition split (``codeflowbench_comp_test.json`` in the published
pipeline; not bundled, the user brings it) is a JSON list of problems with
the shape of the Repo split (``codeflow/dataset.py``), except:

- the id is ``problem-id`` (a string such as ``"1498A"``), else ``task_id``;
- ``overall-turns`` is the number of subproblems, in turn order; the last
  turn is the main program, judged as a script on standard input;
- a subproblem's ``depth`` is 0 for the main program and larger for leaves
  (the reverse of the graph depth; only used for a pool node's ``layer``);
- tests are ``{input, output}`` where ``input`` is the text of a Python
  argument tuple (``"(3, [1, 2])"``) for intermediate turns and a bracketed
  stdin text (``"['4\\n1 2 3 4']"``) for the main program; ``output`` is
  compared by its ``str()``;
- the reference code of a subproblem is the first non-empty of
  ``solution``, ``golden_solution``, ``reference_solution``,
  ``canonical_solution``, else the block of ``def NAME(`` up to the next
  top-level ``def``/``class`` in the problem's reference program (the
  ``solutions`` entry of type ``code``, inside a Markdown code fence);
- ``_source_index`` (int) is present once a sampler has selected the problem.

Validation refuses, with one message naming the file, problem and
subproblem: a subproblem without a name, a repeated name, a dependency on an
unknown name or on itself, a cycle, an ``overall-turns`` that disagrees with
the number of subproblems, tests that are not ``{input: str, output}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codeflow.dataset import Problem, Subproblem, TestCase, number_problems, read_json_list
from codeflow.extract import python_blocks
from simulator.base.errors import ConfigError, PoolError
from simulator.base.validation import check_int_field
from simulator.pools.graph import graph_from_named

REFERENCE_KEYS = ("solution", "golden_solution", "reference_solution", "canonical_solution")
_TOP_LEVEL_DEF = re.compile(r"^(?:async\s+def|def|class)\s")


@dataclass
class CompProblem(Problem):
    """A Comp problem: the subproblems are turns, the last one the main program."""

    title: str = ""
    file_source_index: int | None = None  # ``_source_index`` written by a sampler

    @property
    def last_turn(self) -> Subproblem:
        return self.subproblems[-1]

    def is_last_turn(self, name: str) -> bool:
        return self.by_name[name].index == len(self.subproblems) - 1

    def module_imports(self) -> list[str]:
        """None: Comp programs are judged without the Repo split's import prelude."""
        return []

    def module_future_features(self) -> list[str]:
        return []


def comp_problem_id(raw: dict[str, Any]) -> str | None:
    """``problem-id``, else ``task_id`` (as text); None when neither is usable."""
    for key in ("problem-id", "task_id"):
        value = raw.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (str, int)) and str(value).strip():
            return str(value)
    return None


def reference_program(raw: dict[str, Any]) -> str:
    """The full reference program: the first ``solutions`` entry of type ``code``, unfenced."""
    for sol in raw.get("solutions") or []:
        if isinstance(sol, dict) and sol.get("type") == "code" and isinstance(sol.get("content"),
                                                                              str):
            blocks = python_blocks(sol["content"])
            return "\n".join(blocks) if blocks else sol["content"]
    return ""


def function_block(program: str, name: str) -> str:
    """The lines from ``def NAME(`` up to the next top-level ``def``/``class`` ('' if absent)."""
    lines = program.splitlines(keepends=True)
    start = re.compile(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(")
    for i, line in enumerate(lines):
        if start.match(line):
            end = next((j for j in range(i + 1, len(lines)) if _TOP_LEVEL_DEF.match(lines[j])),
                       len(lines))
            return "".join(lines[i:end]).rstrip() + "\n"
    return ""


def reference_code(sub: dict[str, Any], program: str, name: str) -> str:
    for key in REFERENCE_KEYS:
        value = sub.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return function_block(program, name)


def _tests(raw: Any, err) -> list[TestCase]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise err("'test_code' is not a list")
    out = []
    for k, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or "output" not in t:
            raise err(f"test #{k} is not {{input: str, output}}")
        out.append(TestCase(t["input"], str(t["output"])))
    return out


def comp_problem_from_json(raw: Any, path: str, pos: int) -> CompProblem:
    """One validated problem of the Comp format (``pos``: its position in the file)."""
    if not isinstance(raw, dict):
        raise PoolError(f"problem #{pos} is not an object", path=path)
    pid = comp_problem_id(raw)
    if pid is None:
        raise PoolError(f"problem #{pos} has no 'problem-id' (or 'task_id')", path=path)
    subs_raw = raw.get("subproblems")
    if not isinstance(subs_raw, list) or not subs_raw:
        raise PoolError("no 'subproblems' list", path=path, problem_id=pid)
    program = reference_program(raw)
    subs: list[Subproblem] = []
    by_name: dict[str, Subproblem] = {}
    for i, s in enumerate(subs_raw):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not s["name"].strip():
            raise PoolError(f"subproblem #{i} has no 'name'", path=path, problem_id=pid)
        name = s["name"]

        def err(message: str, node: str = name) -> PoolError:
            return PoolError(message, path=path, problem_id=pid, node=node)

        if name in by_name:
            raise err("duplicate subproblem name")
        deps = s.get("dependencies") or []
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise err("'dependencies' is not a list of names")
        depth = s.get("depth")
        sub = Subproblem(
            index=i, name=name, statement=str(s.get("statement") or ""),
            dependencies=list(dict.fromkeys(deps)),
            reference_code=reference_code(s, program, name),
            tests=_tests(s.get("test_code"), err),
            file_depth=depth if isinstance(depth, int) and not isinstance(depth, bool) else None,
        )
        subs.append(sub)
        by_name[name] = sub
    turns = raw.get("overall-turns")
    if turns is not None:
        try:
            turns = check_int_field(turns, "overall-turns", lo=1)
        except ConfigError as exc:
            raise PoolError(str(exc), path=path, problem_id=pid) from None
        if turns != len(subs):
            raise PoolError(f"'overall-turns' is {turns!r} but the problem has {len(subs)} "
                            "subproblems (the last turn must be the main program)",
                            path=path, problem_id=pid)
    # unknown names, self-loops and cycles: a PoolError naming the subproblem
    graph_from_named([(sub.name, sub.dependencies) for sub in subs], path=path, problem_id=pid,
                     drop_self_loops=False)
    src = raw.get("_source_index")
    return CompProblem(
        problem_id=pid, description=str(raw.get("problem-description") or ""), domain="",
        solution=program, overall_turns=len(subs), overall_depth_file=raw.get("overall-depth"),
        subproblems=subs, by_name=by_name, title=str(raw.get("title") or ""),
        file_source_index=src if isinstance(src, int) and not isinstance(src, bool) else None,
    )


def load_comp_problems(path: str | Path) -> list[CompProblem]:
    """Load and validate a Comp file; ``source_index`` is ``_source_index`` when present."""
    raw = read_json_list(path, "Comp dataset file")
    if not raw:
        raise PoolError("the file holds no problem", path=str(path))
    problems = number_problems([comp_problem_from_json(p, str(path), i)
                                for i, p in enumerate(raw)])
    for p in problems:
        if p.file_source_index is not None:
            p.source_index = p.file_source_index
    return problems  # type: ignore[return-value]

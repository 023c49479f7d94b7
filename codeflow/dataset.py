"""CodeFlowBench-Repo loader: problems, subproblem graphs and their tests.

The bundled JSON (``codeflow/data/codeflowbench_repo.json``) is a list of
problems. Each subproblem carries ``name``, ``statement``, ``dependencies``
(names of other subproblems of the same problem), a 0-based ``depth`` that
disagrees with the real graph on 4 nodes, reference code in ``solution`` and
its tests in ``test_code``: a list of ``{"input": "((args...), {kwargs})",
"output": "<repr of the return value>"}`` pairs. This module validates that
structure once, so later stages can rely on it, and computes depth from the
graph rather than trusting the file.
"""

from __future__ import annotations

import ast
import functools
import threading
from dataclasses import dataclass, field
from pathlib import Path

from simulator.base.errors import PoolError, UserError
from simulator.base.jsonread import JsonRefused, loads_strict
from simulator.pools.graph import graph_from_named, node_depths

DEFAULT_DATASET = Path(__file__).resolve().parent / "data" / "codeflowbench_repo.json"



_PARSE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1024)
def _parse_cached(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def parse_python(source: str) -> ast.Module | None:
    """``ast.parse`` of trusted dataset/generated source, None on a syntax error.

    Serialised with a lock: CPython 3.11's parser is not safe when several
    threads parse at once ("AST constructor recursion depth mismatch"), and
    the reference check and the generator verify from worker threads. Cached,
    because a problem's module source is parsed for every subproblem.
    """
    with _PARSE_LOCK:
        return _parse_cached(source)

@dataclass(frozen=True)
class TestCase:
    """One input/output pair: ``input`` evaluates to ``(args, kwargs)``."""

    input: str
    output: str


@dataclass
class Subproblem:
    """One node of a problem's dependency graph (one turn of the dialogue)."""

    index: int
    name: str
    statement: str
    dependencies: list[str]
    reference_code: str
    tests: list[TestCase]
    file_depth: int | None


@dataclass
class Problem:
    """A CodeFlowBench problem: a DAG of subproblems sharing one source module."""

    problem_id: str
    description: str
    domain: str
    solution: str
    overall_turns: int | None
    overall_depth_file: int | None
    subproblems: list[Subproblem]
    by_name: dict[str, Subproblem] = field(default_factory=dict)
    source_index: int = -1  # position in the dataset file
    source_problem_id: str = ""  # id as written in the file (may be shared, see load_problems)

    def parents(self, name: str) -> list[int]:
        """Node ids (indices) of the direct dependencies of ``name``."""
        return [self.by_name[d].index for d in self.by_name[name].dependencies]

    def topological_order(self) -> list[Subproblem]:
        """Subproblems ordered so that dependencies come first (file order breaks ties)."""
        order: list[Subproblem] = []
        seen: set[str] = set()

        def visit(sub: Subproblem) -> None:
            if sub.name in seen:
                return
            seen.add(sub.name)
            for dep in sub.dependencies:
                visit(self.by_name[dep])
            order.append(sub)

        for sub in self.subproblems:
            visit(sub)
        return order

    def closure(self, name: str) -> list[Subproblem]:
        """Transitive dependencies of ``name`` (excluding itself), dependencies first."""
        order: list[Subproblem] = []
        seen: set[str] = {name}

        def visit(n: str) -> None:
            for dep in self.by_name[n].dependencies:
                if dep not in seen:
                    seen.add(dep)
                    visit(dep)
                    order.append(self.by_name[dep])

        visit(name)
        return order

    def depths(self) -> dict[str, int]:
        """1-based graph depth: a root is 1, a node is 1 + the deepest dependency."""
        depth = node_depths({s.name: s.dependencies for s in self.subproblems})
        return {name: d + 1 for name, d in depth.items()}

    def levels(self) -> list[list[Subproblem]]:
        """Subproblems grouped by graph depth (all dependencies in earlier levels)."""
        depth = self.depths()
        out: list[list[Subproblem]] = [[] for _ in range(max(depth.values(), default=0))]
        for sub in self.subproblems:
            out[depth[sub.name] - 1].append(sub)
        return out

    def overall_depth(self) -> int:
        return max(self.depths().values(), default=0)

    def module_imports(self) -> list[str]:
        """Top-level import statements of the problem's source module.

        Several reference subproblem solutions use names (``re``, ``urllib``,
        ``namedtuple``, ``TypeVar``...) imported only at the top of the
        original source file, so the verifier runs every subproblem in a module
        that has those imports (each guarded, since some name libraries that
        are not installed). ``from __future__`` imports are left out: they only
        make sense at the top of a compiled unit.
        """
        tree = parse_python(self.solution)
        if tree is None:
            return []
        lines = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                lines.append(ast.unparse(node))
        return lines


    def module_future_features(self) -> list[str]:
        """``from __future__`` features of the source module (e.g. ``annotations``).

        Subproblem code was cut out of that module, so it is compiled with the
        same features: with ``annotations`` a signature may name a class that
        the snippet never defines.
        """
        tree = parse_python(self.solution)
        if tree is None:
            return []
        return [a.name for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.module == "__future__"
                for a in node.names]


def _problem_from_json(raw: object, path: str, pos: int) -> Problem:
    if not isinstance(raw, dict):
        raise PoolError(f"problem #{pos} is not an object", path=path)
    pid = raw.get("problem-id")
    if not isinstance(pid, str) or not pid:
        raise PoolError(f"problem #{pos} has no 'problem-id'", path=path)
    subs_raw = raw.get("subproblems")
    if not isinstance(subs_raw, list) or not subs_raw:
        raise PoolError("no 'subproblems' list", path=path, problem_id=pid)
    subs: list[Subproblem] = []
    by_name: dict[str, Subproblem] = {}
    for i, s in enumerate(subs_raw):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            raise PoolError(f"subproblem #{i} has no 'name'", path=path, problem_id=pid)
        name = s["name"]
        if name in by_name:
            raise PoolError("duplicate subproblem name", path=path, problem_id=pid, node=name)
        tests_raw = s.get("test_code")
        if not isinstance(tests_raw, list):
            raise PoolError("'test_code' is not a list", path=path, problem_id=pid, node=name)
        tests = []
        for t in tests_raw:
            if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(
                t.get("output"), str
            ):
                raise PoolError(
                    "a test is not {input: str, output: str}", path=path, problem_id=pid, node=name
                )
            tests.append(TestCase(t["input"], t["output"]))
        deps = s.get("dependencies") or []
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise PoolError("'dependencies' is not a list of names", path=path, problem_id=pid,
                            node=name)
        sub = Subproblem(
            index=i,
            name=name,
            statement=str(s.get("statement") or ""),
            dependencies=list(dict.fromkeys(deps)),
            reference_code=str(s.get("solution") or ""),
            tests=tests,
            file_depth=s.get("depth") if isinstance(s.get("depth"), int) else None,
        )
        subs.append(sub)
        by_name[name] = sub
    # unknown names, self-loops and cycles are errors (PoolError naming the subproblem)
    graph_from_named([(sub.name, sub.dependencies) for sub in subs], path=path, problem_id=pid,
                     drop_self_loops=False)
    return Problem(
        problem_id=pid,
        description=str(raw.get("problem-description") or ""),
        domain=str(raw.get("domain") or ""),
        solution=str(raw.get("solution") or ""),
        overall_turns=raw.get("overall-turns"),
        overall_depth_file=raw.get("overall-depth"),
        subproblems=subs,
        by_name=by_name,
    )


def read_json_list(path: str | Path, what: str = "dataset file") -> list:
    """The top-level JSON list of ``path``; one-line errors for a missing, unreadable,
    invalid or non-list file (shared by the Repo and Comp loaders and the Comp tools)."""
    path = Path(path)
    try:
        raw = loads_strict(path.read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: {what} is a directory") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what} ({exc})") from None
    except JsonRefused as exc:
        raise PoolError(exc.msg, path=str(path), line=exc.lineno) from None
    if not isinstance(raw, list):
        kind = {dict: "object", str: "string", bool: "boolean", type(None): "null"}.get(
            type(raw), "number")
        raise PoolError(f"expected a list of problems, got a JSON {kind}", path=str(path))
    return raw


def load_problems(path: str | Path = DEFAULT_DATASET) -> list[Problem]:
    """Load and validate CodeFlowBench-Repo; raises PoolError naming problem and node."""
    raw = read_json_list(path)
    return number_problems([_problem_from_json(p, str(path), i) for i, p in enumerate(raw)])


def number_problems(problems: list[Problem]) -> list[Problem]:
    """Set ``source_index`` (file position) and make repeated ids unique with ``__2``, ``__3``..."""
    seen: dict[str, int] = {}
    for i, p in enumerate(problems):
        p.source_index = i
        p.source_problem_id = p.problem_id
        if p.problem_id in seen:
            # Two pairs of distinct problems share an id in the bundled file
            # (Cryptography__crypto-attacks__attack, System__core__distance): the
            # later occurrence gets a stable suffix so per-problem files never collide.
            seen[p.problem_id] += 1
            p.problem_id = f"{p.problem_id}__{seen[p.source_problem_id]}"
        else:
            seen[p.problem_id] = 1
    return problems


def select_problems(
    problems: list[Problem], ids: list[str] | None = None, limit: int | None = None
) -> list[Problem]:
    """Subset by explicit ids (order kept, unknown ids are an error) and/or a count limit."""
    if ids:
        by_id = {p.problem_id: p for p in problems}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise UserError(f"unknown problem id(s): {', '.join(missing[:5])}")
        problems = [by_id[i] for i in ids]
    if limit is not None:
        problems = problems[: max(0, limit)]
    return problems

"""ProofFlowBench problems as DAGs of proof steps (``ProofFlow/data/benchmark_0409.json``).

A problem has ``origin``, ``id``, ``nl_theorem``, ``nl_proof`` and a
``proof_graph`` of steps ``{id, natural_language, statement, dependencies}``.
Step ids say the kind: ``tc_*`` theorem condition, ``def_*`` definition,
``l*`` lemma, ``ts_*`` theorem statement. A step that lists itself as a
dependency (8 problems do) loses that self-loop, with a warning.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.base.errors import UserError
from simulator.base.jsonread import JsonRefused, loads_strict
from simulator.pools.graph import graph_from_named

log = logging.getLogger("proofflow.benchmark")

DEFAULT_BENCHMARK = Path(__file__).resolve().parent / "data" / "benchmark_0409.json"
PROVER_KINDS = ("lemma", "theorem_statement")


def step_kind(step_id: str) -> str:
    """``condition``, ``definition``, ``lemma`` or ``theorem_statement`` from a step id."""
    if step_id.startswith("tc_"):
        return "condition"
    if step_id.startswith("def_"):
        return "definition"
    if step_id.startswith("ts_"):
        return "theorem_statement"
    if step_id.startswith("l"):
        return "lemma"
    raise UserError(f"unknown proof step kind for id {step_id!r}")


def problem_id(problem: dict[str, Any]) -> str:
    """``naturalproofs_trench.json`` + 219 -> ``naturalproofs_trench_219`` (spaces -> '_')."""
    origin = str(problem.get("origin", "problem"))
    if origin.endswith(".json"):
        origin = origin[: -len(".json")]
    return f"{origin}_{problem.get('id')}".replace(" ", "_")


@dataclass
class Step:
    node_id: int
    name: str
    kind: str
    natural_language: str
    statement: str
    parents: list[int]
    depth: int
    self_loop_dropped: bool = False


@dataclass
class Problem:
    problem_id: str
    nl_theorem: str
    nl_proof: str
    steps: list[Step]

    @property
    def overall_depth(self) -> int:
        return max(s.depth for s in self.steps) + 1


def parse_problem(raw: dict[str, Any]) -> Problem:
    pid = problem_id(raw)
    graph = raw.get("proof_graph")
    if not isinstance(graph, list) or not graph:
        raise UserError(f"problem {pid!r}: empty or missing proof_graph")
    g = graph_from_named([(str(s.get("id")), s.get("dependencies") or []) for s in graph],
                         problem_id=pid, logger=log)
    steps = [
        Step(k, name, step_kind(name), str(s.get("natural_language", "")),
             str(s.get("statement", "")), g.parents[k], g.depth[k], k in g.dropped_self_loops)
        for k, (name, s) in enumerate(zip(g.names, graph))
    ]
    return Problem(pid, str(raw.get("nl_theorem", "")), str(raw.get("nl_proof", "")), steps)


def load_benchmark(path: str | os.PathLike = DEFAULT_BENCHMARK) -> list[Problem]:
    """All problems, in file order (problem ids must be unique)."""
    try:
        raw = loads_strict(Path(path).read_bytes())
    except (OSError, JsonRefused) as exc:
        raise UserError(f"cannot read ProofFlow benchmark {path}: {exc}") from None
    if not isinstance(raw, list):
        raise UserError(f"{path}: expected a list of problems")
    problems = [parse_problem(p) for p in raw]
    ids = [p.problem_id for p in problems]
    if len(set(ids)) != len(ids):
        raise UserError(f"{path}: duplicate problem ids")
    return problems

"""Verify a CodeFlowBench attempt: its code plus its dependencies' code, against its tests.

The program run for subproblem ``s`` is, in order: the guarded top-level
imports of the problem's source module (see ``Problem.module_imports``), the
code of every transitive dependency of ``s`` in dependency order (reference
code or the attempts chosen as context), then the attempt itself. Each test
calls ``s.name(*args, **kwargs)`` and compares the result with the expected
repr (see ``compare.py`` for the exact rule; the comparison runs in this
process, never in the sandbox).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from codeflow.dataset import Problem
from codeflow.sandbox import SandboxLimits, SandboxRun, run_tests

# Statuses a test or a whole program can end with, most informative first.
PROGRAM_REASONS = ("no_code", "syntax_error", "dependency_error", "load_error", "load_timeout",
                   "missing_function", "memory", "blocked", "crashed")


@dataclass
class Verdict:
    """Verification outcome of one attempt (fields copied into the rollout record)."""

    success: bool
    pass_rate: float
    n_tests: int
    n_passed: int
    eval_latency_sec: float
    failure_reason: str | None
    failure_detail: str | None
    test_statuses: list[str]
    isolation: str

    def as_dict(self) -> dict:
        return asdict(self)


def guarded_imports(lines: list[str]) -> str:
    """Each import in its own try block: a missing optional library must not stop the rest."""
    out = []
    for line in lines:
        out.append("try:\n    " + line + "\nexcept Exception:\n    pass\n")
    return "".join(out)


def build_segments(problem: Problem, name: str, code: str,
                   dependency_code: dict[str, str] | None = None) -> list[dict]:
    """Program segments for subproblem ``name`` with attempt ``code``.

    ``dependency_code`` maps a dependency name to the code to use for it;
    dependencies not in the map use the reference solution.
    """
    dependency_code = dependency_code or {}
    segs = []
    imports = problem.module_imports()
    if imports:
        segs.append({"name": "module imports", "kind": "prelude",
                     "code": guarded_imports(imports)})
    for dep in problem.closure(name):
        segs.append({"name": dep.name, "kind": "dependency",
                     "code": dependency_code.get(dep.name, dep.reference_code)})
    segs.append({"name": name, "kind": "solution", "code": code})
    future = problem.module_future_features()
    if future:
        for seg in segs:
            seg["future"] = future
    return segs


def verify_code(problem: Problem, name: str, code: str | None,
                dependency_code: dict[str, str] | None = None,
                limits: SandboxLimits | None = None) -> Verdict:
    """Run ``code`` as the solution of subproblem ``name`` against its tests."""
    sub = problem.by_name[name]
    tests = [{"input": t.input, "output": t.output} for t in sub.tests]
    n = len(tests)
    if code is None or not code.strip():
        return Verdict(False, 0.0, n, 0, 0.0, "no_code", "no code found in the model output",
                       ["no_code"] * n, "none")
    run = run_tests(build_segments(problem, name, code, dependency_code), name, tests, limits)
    return verdict_from_run(run, n)


def verdict_from_run(run: SandboxRun, n: int) -> Verdict:
    """The verdict of a sandbox run over ``n`` tests (reason: load failure, else first failure)."""
    statuses = [o.status for o in run.outcomes]
    n_passed = sum(s == "pass" for s in statuses)
    success = n > 0 and n_passed == n
    reason = detail = None
    if not success:
        if not run.load_ok:
            reason, detail = run.load_reason, run.load_detail
        elif n == 0:
            reason, detail = "no_tests", "the subproblem has no tests"
        else:
            first = next(o for o in run.outcomes if o.status != "pass")
            reason = first.status
            detail = first.detail
            if first.got is not None:
                detail = f"{detail}; got {first.got}"
    return Verdict(
        success=success,
        pass_rate=(n_passed / n) if n else 0.0,
        n_tests=n,
        n_passed=n_passed,
        eval_latency_sec=round(run.wall_sec, 6),
        failure_reason=reason,
        failure_detail=detail,
        test_statuses=statuses,
        isolation=run.isolation,
    )

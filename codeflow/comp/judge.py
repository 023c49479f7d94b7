"""Multi-turn judging of CodeFlow-Comp rollouts, in the project's sandbox.

One rollout of one subproblem (turn) is judged as the published pipeline did:

- the answer's code is every Python fenced block joined, else the whole text
  (``extract.extract_all_blocks``); code that does not parse fails every test,
  a subproblem without tests gets an empty verdict list;
- the code runs on top of a *context module*: the code of earlier turns (see
  :func:`golden_context` and ``rollouts.py`` for the three modes),
  loaded first, in order;
- an intermediate turn: for each test, ``NAME`` is called with the test's
  ``input``, the text of a Python argument tuple (a trailing ``,)`` is read
  as ``)``; a text not in parentheses is read as the argument list itself),
  the result is printed, and the printed text (everything the program wrote
  to standard output while loading and during the call, then ``print(result)``)
  is compared with ``str(output)``, both stripped of surrounding whitespace;
  a pair of matching quotes around either side is ignored;
- the last turn (turn number = ``overall-turns``) runs as a script: only the
  first test is used; its ``input`` with the surrounding ``[``, ``]`` and
  ``'`` removed, ``\\n`` escapes unescaped and whitespace runs collapsed to
  single spaces is fed on standard input (plus a final newline); ``NAME()``
  is called (as ``print(NAME())`` unless the code prints itself); standard
  output, stripped, must equal the expected output, stripped. The verdict
  list still has one entry per test, each the first test's verdict, as the
  published judged files record it;
- 5 s per test (``SandboxLimits.test_timeout_sec``); a timeout, a crash or an
  exception is a 0. ``pass_rate`` = passed / tests; ``success`` when there is
  at least one test and all pass.

The child process only reports what was printed; the comparison happens
here (:func:`judge_printed`, :func:`judge_script`), never in the sandbox.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from codeflow.comp.dataset import CompProblem
from codeflow.dataset import parse_python
from codeflow.sandbox import SandboxLimits, run_tests
from codeflow.verify import Verdict, verdict_from_run

CALL_WRAPPER = "(lambda *a, **k: (a, k))"  # turns call text "(x, y)" into (args, kwargs)
_PRINTS = re.compile(r"\bprint\s*\(|\bstdout\.write\b")


@dataclass
class CompVerdict(Verdict):
    """A :class:`Verdict` plus the published pipeline's 0/1 list (``harness_result``)."""

    harness_result: list[int] = field(default_factory=list)
    judged_tests: int = 0  # tests actually run (1 on the last turn)
    judged_as: str = "call"  # "call" (intermediate turn) or "script" (last turn)
    blocked_by_prereq_failure: bool = False


def call_input(text: str) -> str:
    """An intermediate test's input as an expression giving ``(args, kwargs)``."""
    t = text.strip()
    if t.endswith(",)"):
        t = t[:-2] + ")"
    if not (t.startswith("(") and t.endswith(")")):
        t = f"({t})"
    return CALL_WRAPPER + t


def script_stdin(text: str) -> str:
    """The last turn's standard input from its first test's ``input``."""
    t = text.strip().strip("[]'")
    t = t.replace("\\n", "\n")
    return " ".join(t.split()) + "\n"


def prints_itself(code: str) -> bool:
    """Whether the main program's code prints (then it is called as ``NAME()``)."""
    return bool(_PRINTS.search(code))


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


def printed_matches(printed: str, expected: str) -> bool:
    """The intermediate-turn rule: stripped texts equal, surrounding quotes ignored."""
    a, b = printed.strip(), expected.strip()
    return a == b or _unquote(a) == _unquote(b)


def _printed_text(event: dict) -> tuple[str | None, bool]:
    """(printed text, complete?) from a capture-mode ``returned`` event."""
    value = event.get("value")
    if isinstance(value, list) and len(value) == 2 and value[0] == "str" and isinstance(
            value[1], str):
        return value[1], not event.get("stdout_overflow")
    text = event.get("str")
    return (text if isinstance(text, str) else None), False


def _judge(event: dict, expected: str, match) -> tuple[str, str | None, str | None]:
    text, complete = _printed_text(event)
    if text is not None and complete:
        ok = match(text, expected)
    else:  # longer than what the event carries: compare the digests of the stripped texts
        digest = hashlib.sha256(expected.strip().encode("utf-8", "replace")).hexdigest()
        ok = not event.get("stdout_overflow") and event.get("stripped_sha256") == digest
    if ok:
        return "pass", None, None
    got = repr((text or "")[:600])
    return "wrong_answer", "expected " + repr(expected[:200]), got


def judge_printed(event: dict, expected: str, workdir: str = "", cache: Any = None
                  ) -> tuple[str, str | None, str | None]:
    """Sandbox judge of an intermediate turn (signature of ``sandbox.Judge``)."""
    return _judge(event, expected, printed_matches)


def judge_script(event: dict, expected: str, workdir: str = "", cache: Any = None
                 ) -> tuple[str, str | None, str | None]:
    """Sandbox judge of the last turn: stripped standard output equals the expected output."""
    return _judge(event, expected, lambda a, b: a.strip() == b.strip())


def golden_context(problem: CompProblem, name: str) -> list[tuple[str, str]]:
    """Reference code of the transitive dependencies of ``name``, dependencies first."""
    return [(dep.name, dep.reference_code) for dep in problem.closure(name)]


def _failed(n: int, reason: str, detail: str, last: bool) -> CompVerdict:
    return CompVerdict(False, 0.0, n, 0, 0.0, reason, detail, [reason] * n, "none",
                       harness_result=[0] * n, judged_tests=0,
                       judged_as="script" if last else "call")


def blocked_verdict(problem: CompProblem, name: str, missing: list[str]) -> CompVerdict:
    """A turn not judged because a prerequisite turn did not fully succeed: every test 0."""
    n = len(problem.by_name[name].tests)
    v = _failed(n, "blocked_by_prereq_failure",
                "prerequisite turn(s) without a fully successful rollout: " + ", ".join(missing),
                problem.is_last_turn(name))
    v.blocked_by_prereq_failure = True
    return v


def judge_attempt(problem: CompProblem, name: str, code: str | None,
                  context: list[tuple[str, str]] | None = None,
                  limits: SandboxLimits | None = None) -> CompVerdict:
    """Judge ``code`` as the answer of turn ``name`` on top of ``context`` ((name, code) pairs)."""
    sub = problem.by_name[name]
    n = len(sub.tests)
    last = problem.is_last_turn(name)
    if n == 0:
        return _failed(0, "no_tests", "the subproblem has no tests", last)
    if code is None or not code.strip():
        return _failed(n, "no_code", "no code found in the model output", last)
    if parse_python(code) is None:
        return _failed(n, "syntax_error", "the code does not parse", last)
    segments = [{"name": dep, "kind": "dependency", "code": c} for dep, c in context or []]
    segments.append({"name": name, "kind": "solution", "code": code})
    if not last:
        tests = [{"input": call_input(t.input), "output": t.output} for t in sub.tests]
        run = run_tests(segments, name, tests, limits, judge_fn=judge_printed,
                        job_options={"capture": True, "print_result": True})
        v = verdict_from_run(run, n)
        return CompVerdict(**v.as_dict(), judged_tests=n, judged_as="call",
                           harness_result=[int(s == "pass") for s in v.test_statuses])
    first = sub.tests[0]
    run = run_tests(segments, name, [{"input": "((), {})", "output": first.output}], limits,
                    judge_fn=judge_script,
                    job_options={"capture": True, "print_result": not prints_itself(code),
                                 "stdin": script_stdin(first.input)})
    one = verdict_from_run(run, 1)
    ok = int(one.success)
    return CompVerdict(
        success=bool(ok), pass_rate=float(ok), n_tests=n, n_passed=ok * n,
        eval_latency_sec=one.eval_latency_sec, failure_reason=one.failure_reason,
        failure_detail=one.failure_detail, test_statuses=one.test_statuses * n,
        isolation=one.isolation, harness_result=[ok] * n, judged_tests=1, judged_as="script")


def choose_rollout(candidates: list[dict[str, Any]]) -> int | None:
    """Index of the chosen rollout: highest ``pass_rate``, ties to the lower total latency
    (``total_latency_sec``, else inference + evaluation), then the earlier one."""
    def total(c: dict[str, Any]) -> float:
        t = c.get("total_latency_sec")
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            return float(t)
        parts = [c.get("infer_latency_sec"), c.get("eval_latency_sec")]
        if isinstance(parts[0], (int, float)) and not isinstance(parts[0], bool):
            return float(parts[0]) + float(parts[1] or 0.0)
        return math.inf

    if not candidates:
        return None
    return min(range(len(candidates)),
               key=lambda k: (-float(candidates[k].get("pass_rate") or 0.0),
                              total(candidates[k]), k))

"""Node tasks: what a request for a node sends and how its answer is judged.

A tasks file (JSON) gives each node of the workflow a task, by node id, with
an optional ``default`` for the nodes it does not list::

    {"dataset": "codeflow/data/codeflowbench_repo.json",   # codeflow tasks only (default: the bundled file)
     "default": {"kind": "generic", "prompt": "Solve step {node_id}.", "verify": {"regex": "LOOPBACK-PASS"}},
     "nodes": {"3": {"kind": "codeflow", "problem": "<problem id>", "subproblem": "<function name>"}}}

Kinds:

* ``generic``: ``prompt`` (a template; ``{node_id}``, ``{problem_id}`` and
  ``{parents}``, the accepted answers of the node's parents, are filled in)
  and ``verify``: ``{"regex": R}`` (the answer passes when ``R`` matches it)
  or ``{"command": [argv...], "timeout_s": T}`` (the answer on stdin of the
  command, run in its own process group in a fresh temporary directory with
  an empty environment and limits, :mod:`executor.verifiers`; exit status 0
  passes). ``timeout_s`` (default 10, at most 3600) bounds either verifier;
  the regex is compiled and the command found on PATH at load.
* ``codeflow``: a CodeFlowBench subproblem; messages from
  :func:`codeflow.prompts.build_messages` (the parents' accepted code as
  context), verdict from the sandboxed unit tests of :func:`codeflow.verify.verify_code`.
* ``proofflow``: ``template`` (a prompt of ``ProofFlow/prompts``) and its
  ``values``; the verdict is the Lean check of :class:`ProofFlow.lean_check.LeanChecker`
  (it needs ``lake`` on PATH).

Without a tasks file every node gets :data:`LOOPBACK_TASK`, the generic task
the loopback world answers (``docs/executor.md``).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from simulator.base.errors import ConfigError
from simulator.base.jsonread import load_json_file

KINDS = ("generic", "codeflow", "proofflow")
#: what the loopback world answers for a passing / failing sample of a generic task
PASS_MARKER = "LOOPBACK-PASS"
FAIL_MARKER = "LOOPBACK-FAIL"
LOOPBACK_TASK: dict[str, Any] = {
    "kind": "generic",
    "prompt": "Workflow {problem_id}, subtask {node_id}. Answer with the result.",
    "verify": {"regex": PASS_MARKER},
}
COMMAND_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 3600.0


@dataclass
class Task:
    """One node's task (checked at load; see the module docstring)."""

    node_id: int
    kind: str
    spec: dict[str, Any]
    problem: Any = None  # codeflow: the codeflow.dataset.Problem
    regex: regex.Pattern | None = None
    command: list[str] | None = None
    timeout_s: float = COMMAND_TIMEOUT_S
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def subproblem(self) -> str | None:
        return self.spec.get("subproblem")

    def _upstream_code(self, parent_answers: Mapping[int, str]) -> dict[str, str]:
        """The code of each accepted parent answer, by its function name (CodeFlow's prompt and test context)."""
        from codeflow.extract import extract_code

        deps = {}
        for nid, text in parent_answers.items():
            name = self.payload["names"].get(nid)
            code = extract_code(text, name) if name else None
            if name and code:
                deps[name] = code
        return deps

    def messages(self, problem_id: str, parent_answers: Mapping[int, str]) -> list[dict[str, str]]:
        """The chat messages of a request for this node (``parent_answers``: accepted answers by node id)."""
        if self.kind == "codeflow":
            from codeflow.prompts import build_messages

            return build_messages(self.problem, self.subproblem, self._upstream_code(parent_answers))
        if self.kind == "proofflow":
            from ProofFlow.prompts import load_template, render

            text = render(load_template(self.spec["template"]), **{k: str(v) for k, v in self.spec["values"].items()})
            return [{"role": "user", "content": text}]
        parents = "\n".join(f"[{k}] {_clean(v)}" for k, v in sorted(parent_answers.items()))
        text = self.spec["prompt"].replace("{node_id}", str(self.node_id)).replace("{problem_id}", str(problem_id))
        return [{"role": "user", "content": text.replace("{parents}", parents)}]

    def judge(self, answer: str, parent_answers: Mapping[int, str]) -> tuple[bool, str]:
        """(passed, reason) of a CodeFlow or ProofFlow answer; blocks (sandbox, Lean): the executor calls it on a
        judge thread with a bound (:func:`executor.verifiers.judge`, which also judges the generic kinds)."""
        if self.kind == "codeflow":
            from codeflow.extract import extract_code
            from codeflow.verify import verify_code

            deps = self._upstream_code(parent_answers)
            v = verify_code(self.problem, self.subproblem, extract_code(answer, self.subproblem), deps)
            return bool(v.success), v.failure_reason or "tests passed"
        if self.kind != "proofflow":
            raise ValueError(f"a {self.kind} task is judged by executor.verifiers.judge")
        from ProofFlow.lean_check import LeanChecker
        from ProofFlow.prompts import extract_lean_code

        code = extract_lean_code(answer)
        if code is None:
            return False, "no Lean code block"
        res = LeanChecker().check(code)
        return bool(res.success), res.failure_reason or "Lean check passed"


def _clean(text: str) -> str:
    """Endpoint text made safe for a prompt (lone surrogates replaced)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _timeout(ver: Mapping[str, Any], nid: int, where: str) -> float:
    t = ver.get("timeout_s", COMMAND_TIMEOUT_S)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not 0 < t <= MAX_TIMEOUT_S:
        raise ConfigError(f"{where}: node {nid}: verify timeout_s must be a number of seconds in (0, "
                          f"{MAX_TIMEOUT_S:g}], got {t!r}")
    return float(t)


def _check_task(raw: Any, nid: int, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: node {nid}: a task must be an object with a 'kind'")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{where}: node {nid}: task kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "generic":
        if not isinstance(raw.get("prompt"), str) or not raw["prompt"].strip():
            raise ConfigError(f"{where}: node {nid}: a generic task needs a 'prompt' template")
        ver = raw.get("verify")
        if not isinstance(ver, Mapping) or ("regex" in ver) == ("command" in ver):
            raise ConfigError(f"{where}: node {nid}: a generic task needs 'verify': {{'regex': R}} or {{'command': [...]}}")
        unknown = set(ver) - {"regex", "command", "timeout_s"}
        if unknown:
            raise ConfigError(f"{where}: node {nid}: verify has unknown item(s) {sorted(unknown)}")
        _timeout(ver, nid, where)
        if "regex" in ver:
            if not isinstance(ver["regex"], str):
                raise ConfigError(f"{where}: node {nid}: verify regex must be a string")
            try:
                regex.compile(ver["regex"])
            except regex.error as exc:
                raise ConfigError(f"{where}: node {nid}: verify regex does not compile: {exc}") from None
        elif not (isinstance(ver["command"], list) and ver["command"] and all(isinstance(a, str) for a in ver["command"])):
            raise ConfigError(f"{where}: node {nid}: verify command must be a non-empty list of strings")
        elif shutil.which(ver["command"][0], path="/usr/bin:/bin") is None:
            raise ConfigError(f"{where}: node {nid}: verify command {ver['command'][0]!r} is not found "
                              f"(commands run with PATH=/usr/bin:/bin; give an absolute path)")
    elif kind == "codeflow":
        for key in ("problem", "subproblem"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise ConfigError(f"{where}: node {nid}: a codeflow task needs '{key}'")
    else:
        if not isinstance(raw.get("template"), str) or not isinstance(raw.get("values"), Mapping):
            raise ConfigError(f"{where}: node {nid}: a proofflow task needs 'template' and 'values'")
        from ProofFlow.prompts import load_template, render

        try:  # the template exists and its values fill it: found now, not at the first request
            render(load_template(raw["template"]), **{k: str(v) for k, v in raw["values"].items()})
        except ConfigError as exc:
            raise ConfigError(f"{where}: node {nid}: proofflow template {raw['template']!r}: {exc}") from None
    return dict(raw)


def build_tasks(doc: Mapping[str, Any] | None, node_ids: Sequence[int], parents: Mapping[int, Sequence[int]],
                where: str) -> dict[int, Task]:
    """Tasks for every node id (``doc`` None: the loopback task everywhere); refused with file and node."""
    if doc is None:
        doc = {"default": LOOPBACK_TASK}
    if not isinstance(doc, Mapping) or not (doc.get("nodes") or doc.get("default")):
        raise ConfigError(f"{where}: a tasks file is an object with 'nodes' and/or 'default' (got {type(doc).__name__}"
                          f"{' without either' if isinstance(doc, Mapping) else ''})")
    unknown = set(doc) - {"dataset", "default", "nodes"}
    if unknown:
        raise ConfigError(f"{where}: unknown item(s) {sorted(unknown)}; expected dataset, default, nodes")
    nodes = doc.get("nodes") or {}
    if not isinstance(nodes, Mapping):
        raise ConfigError(f"{where}: 'nodes' must be an object {{node id: task}}")
    known = {int(n) for n in node_ids}
    for key in nodes:
        if not isinstance(key, str) or not key.isdigit() or str(int(key)) != key or int(key) not in known:
            raise ConfigError(f"{where}: nodes: {key!r} is not a node id of the DAG (nodes {sorted(known)}, "
                              f"written as plain integers)")
    tasks: dict[int, Task] = {}
    problems: dict[str, Any] = {}
    for nid in node_ids:
        raw = nodes.get(str(nid), doc.get("default"))
        if raw is None:
            raise ConfigError(f"{where}: node {nid} has no task (and there is no 'default')")
        spec = _check_task(raw, int(nid), where)
        t = Task(int(nid), spec["kind"], spec)
        if t.kind == "generic":
            ver = spec["verify"]
            t.timeout_s = _timeout(ver, int(nid), where)
            if "regex" in ver:
                t.regex = regex.compile(ver["regex"])
            else:
                t.command = list(ver["command"])
        elif t.kind == "codeflow":
            t.problem = _codeflow_problem(doc, spec, problems, where, int(nid))
        tasks[int(nid)] = t
    for t in tasks.values():  # codeflow: parent node id -> its subproblem name (the dependency code's name)
        t.payload["names"] = {p: tasks[p].subproblem for p in parents.get(t.node_id, ()) if tasks[p].kind == "codeflow"}
    return tasks


def _codeflow_problem(doc, spec, cache, where, nid):
    from codeflow.dataset import DEFAULT_DATASET, load_problems

    dataset = doc.get("dataset")
    if dataset is not None and (not isinstance(dataset, str) or not dataset):
        raise ConfigError(f"{where}: 'dataset' must be the path of a CodeFlowBench file (a string), got {dataset!r}")
    path = dataset or str(DEFAULT_DATASET)
    if path not in cache:
        cache[path] = {p.problem_id: p for p in load_problems(path)}
    problem = cache[path].get(spec["problem"])
    if problem is None:
        raise ConfigError(f"{where}: node {nid}: codeflow problem {spec['problem']!r} is not in {path}")
    if spec["subproblem"] not in problem.by_name:
        raise ConfigError(f"{where}: node {nid}: problem {spec['problem']!r} has no subproblem {spec['subproblem']!r}")
    return problem


def load_tasks(path: str | None, node_ids: Sequence[int], parents: Mapping[int, Sequence[int]]) -> dict[int, Task]:
    """Read a tasks file (None: the loopback task for every node)."""
    if path is None:
        return build_tasks(None, node_ids, parents, "<loopback tasks>")
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: tasks file not found")
    doc = load_json_file(p, what="tasks file", max_bytes=256 << 20)
    if doc is None:
        raise ConfigError(f"{path}: a tasks file is an object with 'nodes' and/or 'default' (got null)")
    return build_tasks(doc, node_ids, parents, str(path))


def loopback_answer(task: Task, passed: bool) -> str:
    """What the loopback world answers for a sample of ``task`` that should pass (or fail) its verifier."""
    if task.kind == "codeflow":
        sub = task.problem.by_name[task.subproblem]
        if passed:
            return f"```python\n{sub.reference_code.strip()}\n```"
        return f"```python\ndef {sub.name}(*args, **kwargs):\n    raise NotImplementedError('loopback failure')\n```"
    if task.kind == "generic" and task.regex is not None and task.regex.pattern != PASS_MARKER:
        sample = task.spec.get("loopback_pass") if passed else task.spec.get("loopback_fail")
        if isinstance(sample, str):
            return sample
    return f"answer: {PASS_MARKER if passed else FAIL_MARKER}"

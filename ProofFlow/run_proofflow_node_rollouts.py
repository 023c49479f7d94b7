"""ProofFlow node rollouts: formalize and prove every proof step n times, check with Lean.

For each problem of ProofFlowBench and each proof step (node):

1. the *formalizer* model writes ``n`` Lean 4 statements of the step (proof
   replaced by ``sorry``); each is checked with Lean: success = ``lean_pass``;
2. for lemmas and theorem statements, the first formalization that compiles
   and declares a theorem is given to the *prover* model ``n`` times; each
   proof is checked: success = ``lean_verify`` (compiles, no ``sorry``), and a
   proof that changed the theorem statement counts as a failure
   (``failure_reason: "statement_changed"``).

The node's ``attempts`` are the prover's (lemmas, theorem statements) or the
formalizer's (conditions, definitions), as in the paper's pools; lemma nodes
also keep ``formalizer_attempts``. One request per attempt (``n = 1``), so each
attempt has its own latency and token usage. Steps are formalized without
the context of their dependencies (the paper's ``official_no_context`` mode).

Output: one rollout record per problem, ``<out_dir>/<model>/<problem_id>.json``
(``docs/rollout_format.md``, benchmark ``proofflow``), written atomically once
every request of the problem has finished. Resumable: model answers and Lean
verdicts are journalled under ``<out_dir>/<model>/.journal/``; a rerun skips
finished problems and never repeats a finished request or Lean check.

    python -m ProofFlow.run_proofflow_node_rollouts --out-dir rollouts/proofflow \\
        --model goedel32b --n 8 \\
        --formalizer-base-url http://localhost:8000/v1 \\
        --formalizer-model Goedel-LM/Goedel-Formalizer-V2-32B \\
        --prover-base-url http://localhost:8001/v1 --prover-model Goedel-LM/Goedel-Prover-V2-32B
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeflow.llm_client import ChatRequest, ChatResult, ClientConfig, run_many
from ProofFlow.benchmark import (
    DEFAULT_BENCHMARK,
    PROVER_KINDS,
    Problem,
    Step,
    load_benchmark,
)
from ProofFlow.lean_check import (
    DEFAULT_TIMEOUT_SEC,
    LEAN_HEADER,
    LeanChecker,
    prepare_source,
)
from ProofFlow.prompts import (
    extract_lean_code,
    heads_in,
    load_template,
    render,
    strip_header,
    theorem_head,
)
from simulator.base import cliargs
from simulator.base.errors import UserError, cli_entry
from simulator.base.io_utils import atomic_write_json, dumps_compact, naming

log = logging.getLogger("proofflow.rollouts")

# verdicts that say nothing about the candidate: never journalled, the problem is retried
INFRA_FAILURES = ("lean_process_error", "lean_setup_error")


@dataclass
class RunConfig:
    """Everything a run needs besides the problems."""

    out_dir: Path
    model_id: str
    n: int
    formalizer: ClientConfig
    prover: ClientConfig
    prompt_dir: Path | None = None
    lean_workers: int = 2
    progress: bool = True
    force: bool = False

    @property
    def model_dir(self) -> Path:
        return self.out_dir / self.model_id

    @property
    def journal_dir(self) -> Path:
        return self.model_dir / ".journal"


class LeanJournal:
    """Lean verdicts per attempt (append-only JSONL, fsynced after every line).

    Keyed by the attempt's rollout id and a hash of the checked source: each
    attempt is checked once (its own Lean time is part of its latency), and a
    changed candidate is checked again.
    """

    def __init__(self, path: Path, checker: LeanChecker) -> None:
        self.path = path
        self.checker = checker
        self.done: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    obj = json.loads(line)
                    self.done[obj["key"]] = obj["verdict"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run
        self.calls = 0

    def check(self, rollout_id: str, code: str) -> dict[str, Any]:
        sha = hashlib.sha256(prepare_source(code).encode("utf-8")).hexdigest()[:16]
        key = f"{rollout_id}#{sha}"
        with self._lock:
            if key in self.done:
                return self.done[key]
        res = self.checker.check(code)
        verdict = {
            "lean_pass": res.lean_pass,
            "lean_verify": res.lean_verify,
            "failure_reason": res.failure_reason,
            "latency_sec": res.latency_sec,
            "timed_out": res.timed_out,
            "errors": res.error_summary(),
        }
        if res.failure_reason == "lean_setup_error":
            raise UserError(
                "Lean reports errors in the standard header: the Lake project "
                f"{self.checker.project_dir} is not set up (run `lake exe cache get` there). "
                f"First error: {verdict['errors'][:1]}"
            )
        with self._lock:
            self.calls += 1
            if res.failure_reason not in INFRA_FAILURES:
                self.done[key] = verdict
                with open(self.path, "a", encoding="utf-8") as fh, naming(self.path):  # disk full names it
                    fh.write(dumps_compact({"key": key, "verdict": verdict}) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
        return verdict


@dataclass
class Verdict:
    success: bool
    lean_pass: bool = False
    lean_verify: bool = False
    failure_reason: str | None = None
    eval_latency_sec: float = 0.0
    errors: list[str] = field(default_factory=list)
    code: str | None = None


def _messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


def request_key(pid: str, step: str, stage: str, k: int) -> str:
    return f"{pid}/{step}/{stage}/{k}"


def _transient(res: ChatResult) -> bool:
    """A request that gave up on transient errors (retried by the next run)."""
    return not res.ok and not (res.status_code is not None and 400 <= res.status_code < 500)


def _check_all(jobs: list[tuple[str, str]], lean: LeanJournal, workers: int,
               progress: bool, desc: str) -> dict[str, dict[str, Any]]:
    """Lean verdicts for ``[(key, code)]`` using ``workers`` threads."""
    out: dict[str, dict[str, Any]] = {}
    if not jobs:
        return out
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc=desc, unit="check", disable=None)

    def one(job: tuple[str, str]) -> tuple[str, dict[str, Any]]:
        v = lean.check(job[0], job[1])
        if bar is not None:
            bar.update(1)
        return job[0], v

    try:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
            for key, v in ex.map(one, jobs):
                out[key] = v
    finally:
        if bar is not None:
            bar.close()
    return out


def _attempt(key: str, stage: str, model_id: str, res: ChatResult, v: Verdict) -> dict[str, Any]:
    return {
        "rollout_id": key,
        "model": model_id,
        "stage": stage,
        "prompt_tokens": res.prompt_tokens,
        "output_tokens": res.completion_tokens,
        "total_tokens": res.total_tokens,
        "token_source": res.token_source,
        "infer_latency_sec": res.latency_sec,
        "latency_source": "request",
        "eval_latency_sec": v.eval_latency_sec,
        "success": v.success,
        "pass_rate": 1.0 if v.success else 0.0,
        "failure_reason": v.failure_reason,
        "lean_pass": v.lean_pass,
        "lean_verify": v.lean_verify,
        "lean_errors": v.errors,
        "finish_reason": res.choices[0].finish_reason if res.choices else None,
        "served_model": res.response_model,
        "code": v.code,
    }


def _verdict_from_lean(code: str, lv: dict[str, Any], success_field: str) -> Verdict:
    return Verdict(
        success=bool(lv[success_field]),
        lean_pass=bool(lv["lean_pass"]),
        lean_verify=bool(lv["lean_verify"]),
        failure_reason=lv["failure_reason"],
        eval_latency_sec=float(lv["latency_sec"]),
        errors=list(lv.get("errors") or []),
        code=code,
    )


def run(problems: list[Problem], cfg: RunConfig, checker: LeanChecker) -> dict[str, Any]:
    """Generate, check and write the records of ``problems``; returns a summary."""
    if cfg.n < 1:
        raise UserError("--n must be at least 1")
    cfg.model_dir.mkdir(parents=True, exist_ok=True)
    todo = [p for p in problems
            if cfg.force or not (cfg.model_dir / f"{p.problem_id}.json").exists()]
    skipped = [p.problem_id for p in problems if p not in todo]
    lean = LeanJournal(cfg.journal_dir / "lean.jsonl", checker)
    f_tpl = load_template("formalizer", cfg.prompt_dir)
    p_tpl = load_template("prover", cfg.prompt_dir)

    # ---- phase 1: formalizer
    f_reqs = []
    for p in todo:
        for s in p.steps:
            prompt = render(f_tpl, nl_theorem=p.nl_theorem, step_id=s.name,
                            step_kind=s.kind.replace("_", " "),
                            natural_language=s.natural_language, statement=s.statement)
            for k in range(cfg.n):
                f_reqs.append(ChatRequest(request_key(p.problem_id, s.name, "formalizer", k),
                                          _messages(prompt)))
    f_res = run_many(cfg.formalizer, f_reqs, cfg.journal_dir / "formalizer.jsonl",
                     progress=cfg.progress) if f_reqs else {}
    f_code = {k: extract_lean_code(r.choices[0].text) for k, r in f_res.items()
              if r.ok and r.choices}
    f_lean = _check_all([(k, c) for k, c in f_code.items() if c], lean, cfg.lean_workers,
                        cfg.progress, "lean (formalizer)")

    def f_verdict(key: str) -> Verdict:
        code = f_code.get(key)
        if code is None:
            return Verdict(False, failure_reason="no_code")
        return _verdict_from_lean(code, f_lean[key], "lean_pass")

    # ---- phase 2: prover, on the first compiling formalization that declares a theorem
    selected: dict[tuple[str, str], tuple[int, str]] = {}
    p_reqs = []
    for p in todo:
        for s in p.steps:
            if s.kind not in PROVER_KINDS:
                continue
            for k in range(cfg.n):
                key = request_key(p.problem_id, s.name, "formalizer", k)
                if key in f_code and f_code[key] and f_verdict(key).lean_pass \
                        and theorem_head(f_code[key] or "") is not None:
                    selected[(p.problem_id, s.name)] = (k, strip_header(f_code[key]).strip())
                    break
            if (p.problem_id, s.name) not in selected:
                continue
            stmt = selected[(p.problem_id, s.name)][1]
            prompt = render(p_tpl, formal_statement=LEAN_HEADER + stmt,
                            natural_language=s.natural_language)
            for k in range(cfg.n):
                p_reqs.append(ChatRequest(request_key(p.problem_id, s.name, "prover", k),
                                          _messages(prompt)))
    p_res = run_many(cfg.prover, p_reqs, cfg.journal_dir / "prover.jsonl",
                     progress=cfg.progress) if p_reqs else {}
    p_code: dict[str, str | None] = {}
    p_changed: set[str] = set()
    for key, r in p_res.items():
        if not (r.ok and r.choices):
            continue
        code = extract_lean_code(r.choices[0].text)
        p_code[key] = code
        pid, step = key.split("/")[0], key.split("/")[1]
        want = theorem_head(selected[(pid, step)][1])
        if code is not None and want not in heads_in(code):
            p_changed.add(key)
    p_lean = _check_all([(k, c) for k, c in p_code.items() if c and k not in p_changed], lean,
                        cfg.lean_workers, cfg.progress, "lean (prover)")

    def p_verdict(key: str) -> Verdict:
        code = p_code.get(key)
        if code is None:
            return Verdict(False, failure_reason="no_code")
        if key in p_changed:
            return Verdict(False, failure_reason="statement_changed", code=code)
        return _verdict_from_lean(code, p_lean[key], "lean_verify")

    # ---- records
    written, incomplete = [], []
    for p in todo:
        rec, ok = _record(p, cfg, f_res, p_res, f_verdict, p_verdict, selected)
        if not ok:
            incomplete.append(p.problem_id)
            continue
        atomic_write_json(cfg.model_dir / f"{p.problem_id}.json", rec, indent=None)
        written.append(p.problem_id)
    summary = {
        "model": cfg.model_id,
        "out_dir": str(cfg.model_dir),
        "problems_written": written,
        "problems_skipped_existing": skipped,
        "problems_incomplete": incomplete,
        "formalizer_requests": len(f_reqs),
        "prover_requests": len(p_reqs),
        "lean_checks_run": lean.calls,
    }
    return summary


def _record(p: Problem, cfg: RunConfig, f_res: dict[str, ChatResult],
            p_res: dict[str, ChatResult], f_verdict, p_verdict,
            selected: dict[tuple[str, str], tuple[int, str]]) -> tuple[dict[str, Any], bool]:
    complete = True
    nodes = []
    for s in p.steps:
        f_att, p_att, failures = [], [], []
        for stage, res_map, verdict, out in (("formalizer", f_res, f_verdict, f_att),
                                            ("prover", p_res, p_verdict, p_att)):
            if stage == "prover" and (p.problem_id, s.name) not in selected:
                continue
            if stage == "prover" and s.kind not in PROVER_KINDS:
                continue
            for k in range(cfg.n):
                key = request_key(p.problem_id, s.name, stage, k)
                res = res_map.get(key)
                if res is None or _transient(res):
                    complete = False
                    continue
                if not res.ok:
                    failures.append({"rollout_id": key, "error": res.error,
                                     "status_code": res.status_code})
                    continue
                v = verdict(key)
                if v.failure_reason in INFRA_FAILURES:
                    complete = False
                out.append(_attempt(key, stage, cfg.model_id, res, v))
        node = _node(s, f_att, p_att, failures, selected.get((p.problem_id, s.name)))
        nodes.append(node)
    rec = {
        "benchmark": "proofflow",
        "problem_id": p.problem_id,
        "model": cfg.model_id,
        "generation": {
            "n": cfg.n,
            "context_mode": "no_context",
            "formalizer": cfg.formalizer.public(),
            "prover": cfg.prover.public(),
            "lean_toolchain": "leanprover/lean4:v4.15.0",
        },
        "overall_depth": p.overall_depth,
        "nodes": nodes,
    }
    return rec, complete


def _node(s: Step, f_att: list, p_att: list, failures: list,
          sel: tuple[int, str] | None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "node_id": s.node_id,
        "name": s.name,
        "parents": s.parents,
        "depth": s.depth,
        "step_kind": s.kind,
    }
    if s.kind in PROVER_KINDS:
        node["attempts"] = p_att
        node["formalizer_attempts"] = f_att
        if sel is None:
            node["skipped"] = "no formalization compiled with a theorem declaration"
        else:
            node["selected_formalization"] = sel[0]
            node["formal_statement"] = sel[1]
    else:
        node["attempts"] = f_att
    if failures:
        node["request_failures"] = failures
    if s.self_loop_dropped:
        node["self_loop_dropped"] = True
    return node


def select_problems(problems: list[Problem], ids: list[str] | None, limit: int | None
                    ) -> list[Problem]:
    if ids:
        by_id = {p.problem_id: p for p in problems}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise UserError(f"unknown problem ids {unknown} (ids look like "
                            f"{problems[0].problem_id!r})")
        problems = [by_id[i] for i in ids]
    return problems[:limit] if limit else problems


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = cliargs.ArgumentParser(
        description="Formalizer and prover rollouts per ProofFlow proof step, checked with Lean.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="API keys are read from the environment variables named by --*-api-key-env.",
    )
    ap.add_argument("--benchmark", type=cliargs.input_path(), default=str(DEFAULT_BENCHMARK), help="ProofFlowBench JSON")
    ap.add_argument("--problems", default=None, help="comma-separated problem ids")
    ap.add_argument("--limit", type=int, default=None, help="first N problems only")
    ap.add_argument("--out-dir", type=cliargs.output_path("dir"), required=True, help="rollout directory")
    ap.add_argument("--model", default="goedel32b", help="model id written in the records")
    ap.add_argument("--n", type=int, default=8, help="attempts per node and stage")
    for stage in ("formalizer", "prover"):
        ap.add_argument(f"--{stage}-base-url", required=True, help=f"{stage} endpoint base URL")
        ap.add_argument(f"--{stage}-model", required=True, help=f"{stage} served model name")
        ap.add_argument(f"--{stage}-api-key-env", default="OPENAI_API_KEY",
                        help="environment variable holding the key")
    ap.add_argument("--temperature", type=cliargs.number(0), default=0.6)
    ap.add_argument("--top-p", type=cliargs.number(0, 1), default=0.95)
    ap.add_argument("--top-k", type=int, default=20, help="sent as an extra field; -1 = omit")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=8, help="HTTP requests in flight")
    ap.add_argument("--max-tries", type=int, default=6, help="tries per request")
    ap.add_argument("--request-timeout", type=cliargs.number(0, lo_inclusive=False), default=600.0, help="seconds")
    ap.add_argument("--lean-project", type=cliargs.input_path("dir"), default=None, help="Lake project (default: bundled)")
    ap.add_argument("--lean-timeout", type=cliargs.number(0, lo_inclusive=False), default=DEFAULT_TIMEOUT_SEC, help="seconds")
    ap.add_argument("--lean-workers", type=int, default=2, help="parallel Lean checks")
    ap.add_argument("--lake", default="lake", help="lake executable")
    ap.add_argument("--prompt-dir", type=cliargs.input_path("dir"), default=None, help="directory with formalizer.md, prover.md")
    ap.add_argument("--force", action="store_true", help="redo problems that have a record")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    return ap.parse_args(argv)


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    checker = LeanChecker(args.lean_project, args.lean_timeout, args.lake)  # fail fast
    problems = select_problems(
        load_benchmark(args.benchmark),
        [x.strip() for x in args.problems.split(",")] if args.problems else None,
        args.limit,
    )

    def client(stage: str) -> ClientConfig:
        return ClientConfig(
            base_url=getattr(args, f"{stage}_base_url"),
            model=getattr(args, f"{stage}_model"),
            api_key_env=getattr(args, f"{stage}_api_key_env"),
            temperature=args.temperature, top_p=args.top_p,
            top_k=None if args.top_k < 0 else args.top_k, max_tokens=args.max_tokens,
            concurrency=args.concurrency, max_tries=args.max_tries,
            timeout_sec=args.request_timeout,
        )

    cfg = RunConfig(Path(args.out_dir), args.model, args.n, client("formalizer"),
                    client("prover"), Path(args.prompt_dir) if args.prompt_dir else None,
                    args.lean_workers, not args.no_progress, args.force)
    summary = run(problems, cfg, checker)
    print(json.dumps(summary, indent=2))
    if summary["problems_incomplete"]:
        print(f"{len(summary['problems_incomplete'])} problems incomplete (requests or Lean "
              "checks failed transiently): run the same command again to finish them",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

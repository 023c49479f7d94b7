"""Generate verified CodeFlowBench-Repo rollouts through an OpenAI-compatible endpoint.

For each selected problem, subproblems are processed level by level of the
dependency graph (all dependencies of a node finish before it starts). Each
node gets ``n`` samples from a multi-turn prompt whose earlier turns carry
its dependencies' code (``--context reference``: the reference solutions;
``--context best_verified``: the best verified attempt of this run, falling
back to the reference when no attempt passed). Every sample is verified in the
sandbox against the node's tests. One rollout record per problem is written
atomically to ``<out>/<model>/<problem_id>.json`` (format:
docs/rollout_format.md) once all its nodes are done; the request journal
and run summary go to ``<out>/.runs/`` so that an interrupted run resumes
without repeating a finished request.

``--split comp`` runs the competition split instead (``--dataset FILE``): the
turns of a problem are prompted and judged as ``comp/rollouts.py`` describes
(contexts ``chained``, ``isolated``, ``golden_upstream``), with the same
request keys, journal, resumption and output layout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from codeflow.comp.dataset import CompProblem, load_comp_problems
from codeflow.comp.judge import golden_context
from codeflow.comp.prompts import comp_messages
from codeflow.comp.rollouts import CONTEXT_MODES, comp_nodes
from codeflow.dataset import DEFAULT_DATASET, Problem, Subproblem, load_problems, select_problems
from codeflow.extract import extract_code
from codeflow.llm_client import ChatClient, ClientConfig, EndpointError, RequestJournal
from codeflow.prompts import build_messages
from codeflow.rollout_common import (
    RunContext,
    SkippingRunner,
    attempt_fields,
    collect_samples,
    plan_requests,
    safe_filename,
)
from codeflow.sandbox import SandboxLimits, resolve_isolation
from codeflow.verify import verify_code
from simulator.base import cliargs
from simulator.base.errors import ConfigError, UserError, cli_entry
from simulator.base.io_utils import atomic_write_json
from simulator.base.jsonread import JsonRefused, loads_strict

log = logging.getLogger("codeflow.generate_rollouts")
REPO_CONTEXTS = ("reference", "best_verified")


async def run_node(ctx: RunContext, problem: Problem, sub: Subproblem,
                   chosen: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Generate and verify the samples of one node; returns its rollout node record."""
    args = ctx.args
    dep_code: dict[str, str] = {}
    context_source: dict[str, str] = {}
    for dep in problem.closure(sub.name):
        if args.context == "best_verified" and dep.name in chosen:
            dep_code[dep.name], context_source[dep.name] = chosen[dep.name]
        else:
            context_source[dep.name] = "reference"
    messages = build_messages(problem, sub.name, dep_code, with_signature=not args.no_signature)
    reqs = plan_requests(problem, sub, messages, args)
    results = await asyncio.gather(*(ctx.runner.submit(r) for r in reqs))
    samples, failed_requests, incomplete = collect_samples(reqs, results)

    loop = asyncio.get_running_loop()
    codes = [extract_code(res.choices[k].text, sub.name) for _, res, k in samples]
    verdicts = await asyncio.gather(*(
        loop.run_in_executor(ctx.verify_pool, verify_code, problem, sub.name, code, dep_code,
                             ctx.limits)
        for code in codes))
    attempts = [
        attempt_fields(problem, sub, args.model, idx, res, k, {
            "eval_latency_sec": v.eval_latency_sec, "success": v.success,
            "pass_rate": v.pass_rate, "n_tests": v.n_tests, "n_passed": v.n_passed,
            "test_statuses": v.test_statuses, "failure_reason": v.failure_reason,
            "failure_detail": v.failure_detail}, code)
        for (idx, res, k), code, v in zip(samples, codes, verdicts)]
    verified = [a for a in attempts if a["success"]]
    if verified:
        best = min(verified, key=lambda a: a["sample_index"])
        chosen[sub.name] = (best["code"], best["rollout_id"])
    node = {
        "node_id": sub.index,
        "name": sub.name,
        "parents": problem.parents(sub.name),
        "depth": problem.depths()[sub.name],
        "n_tests": len(sub.tests),
        "context_source": context_source,
        "attempts": attempts,
    }
    if failed_requests:
        node["failed_requests"] = failed_requests
    node["_incomplete"] = incomplete
    return node


async def run_problem(ctx: RunContext, problem: Problem) -> str:
    """Returns ``written``, ``skipped`` or ``incomplete``."""
    args = ctx.args
    path = ctx.model_dir / f"{safe_filename(problem.problem_id)}.json"
    if path.exists() and not args.overwrite:
        ctx.runner.skip(sum(len(plan_requests(problem, s, [], args))
                            for s in problem.subproblems))
        return "skipped"
    nodes: dict[int, dict] = {}
    if isinstance(problem, CompProblem):
        nodes = await comp_nodes(ctx, problem)
    else:
        chosen: dict[str, tuple[str, str]] = {}
        for level in problem.levels():
            # Within a level nodes are independent; they run concurrently.
            done = await asyncio.gather(*(run_node(ctx, problem, s, chosen) for s in level))
            for node in done:
                nodes[node["node_id"]] = node
    incomplete = any(n.pop("_incomplete") for n in nodes.values())
    if incomplete:
        return "incomplete"
    record = {
        "benchmark": "codeflow",
        "problem_id": problem.problem_id,
        "model": args.model,
        "generation": {**ctx.config.public(), "n": args.n,
                       "samples_per_request": args.samples_per_request,
                       "context": args.context, "signature_in_prompt": not args.no_signature},
        "verifier": {"isolation": resolve_isolation(ctx.limits.isolation),
                     "test_timeout_sec": ctx.limits.test_timeout_sec,
                     "memory_mb": ctx.limits.memory_mb},
        "overall_depth": problem.overall_depth(),
        "overall_turns": len(problem.subproblems),
        "source_problem_id": problem.source_problem_id,
        "source_index": problem.source_index,
        "domain": problem.domain,
        "dataset": str(args.dataset),
        "nodes": [nodes[s.index] for s in problem.subproblems],
    }
    if isinstance(problem, CompProblem):
        record["split"] = "comp"
        record["title"] = problem.title
        record["generation"]["require_successful_prereq"] = args.require_successful_prereq
    atomic_write_json(path, record, strict=True)
    return "written"


def load_split(args: argparse.Namespace) -> list[Problem]:
    """The selected problems of ``--split`` (``repo``: bundled default; ``comp``: ``--dataset``)."""
    loaded = load_comp_problems(args.dataset) if args.split == "comp" else load_problems(
        args.dataset)
    return select_problems(loaded, args.problems, args.limit)


async def generate(args: argparse.Namespace) -> dict[str, Any]:
    problems = load_split(args)
    if not problems:
        raise UserError("no problems selected")
    config = ClientConfig(
        base_url=args.base_url, model=args.served_model or args.model,
        api_key_env=args.api_key_env, temperature=args.temperature, top_p=args.top_p,
        top_k=None if args.top_k is not None and args.top_k < 0 else args.top_k,
        max_tokens=args.max_tokens, extra_body=args.extra_body,
        concurrency=args.concurrency, max_tries=args.max_tries,
        timeout_sec=args.request_timeout, backoff_base_sec=args.backoff_base)
    limits = SandboxLimits(test_timeout_sec=args.test_timeout, memory_mb=args.memory_mb,
                           isolation=args.isolation)
    resolve_isolation(limits.isolation)
    model_dir = args.out_dir / safe_filename(args.model)
    model_dir.mkdir(parents=True, exist_ok=True)
    runs_dir = args.out_dir / ".runs"
    journal_path = args.journal or runs_dir / f"{safe_filename(args.model)}.journal.jsonl"
    total = sum(len(plan_requests(p, s, [], args)) for p in problems for s in p.subproblems)
    t0 = time.time()
    outcome: dict[str, list[str]] = {"written": [], "skipped": [], "incomplete": []}
    with RequestJournal(journal_path) as journal, \
            ThreadPoolExecutor(max_workers=max(1, args.verify_workers)) as pool:
        async with ChatClient(config) as client:
            runner = SkippingRunner(client, journal, progress=not args.no_progress, total=total,
                             desc=f"{args.model} requests")
            ctx = RunContext(args, config, limits, model_dir, runner, pool)
            try:
                async with asyncio.TaskGroup() as tg:
                    tasks = {p.problem_id: tg.create_task(run_problem(ctx, p)) for p in problems}
            except* EndpointError as group:
                raise group.exceptions[0] from None
            finally:
                runner.close()
            for pid, task in tasks.items():
                outcome[task.result()].append(pid)
            stats = dict(client.stats)
    summary = {
        "model": args.model, "served_model": config.model, "endpoint": config.base_url,
        "out_dir": str(model_dir), "journal": str(journal_path),
        "problems_selected": len(problems),
        "problems_written": len(outcome["written"]),
        "problems_skipped_existing": len(outcome["skipped"]),
        "problems_incomplete": outcome["incomplete"],
        "request_stats": stats, "wall_sec": round(time.time() - t0, 2),
    }
    atomic_write_json(runs_dir / f"{safe_filename(args.model)}.summary.json", summary, strict=True)
    return summary


def _json_arg(text: str) -> dict:
    try:
        value = loads_strict(text)
    except JsonRefused as exc:
        raise argparse.ArgumentTypeError(exc.msg) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _ids_arg(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def build_parser() -> argparse.ArgumentParser:
    ap = cliargs.ArgumentParser(
        prog="python -m codeflow.generate_rollouts",
        description="Generate and verify CodeFlowBench rollouts (Repo or Comp split) through an "
                    "OpenAI-compatible chat endpoint (vLLM, hosted APIs). Resumable: run the "
                    "same command again after an interruption.")
    g = ap.add_argument_group("endpoint")
    g.add_argument("--base-url", help="e.g. http://localhost:8000/v1 (required unless "
                   "--dry-run)")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (default OPENAI_API_KEY; "
                        "unset variable = no Authorization header)")
    g.add_argument("--model", required=True,
                   help="model id used in rollout files, pools and price tables, e.g. 4B_ins")
    g.add_argument("--served-model", help="model name the server expects (default: --model)")
    g.add_argument("--concurrency", type=cliargs.integer(1), default=8, help="max requests in flight")
    g.add_argument("--max-tries", type=cliargs.integer(1), default=6, help="tries per request (default 6)")
    g.add_argument("--backoff-base", type=cliargs.number(0), default=1.0,
                   help="base of the exponential backoff, s (default 1)")
    g.add_argument("--request-timeout", type=cliargs.number(0, lo_inclusive=False), default=600.0, help="per request, s")
    s = ap.add_argument_group("sampling")
    s.add_argument("--n", type=int, default=8, help="samples per subproblem (paper: 8)")
    s.add_argument("--samples-per-request", type=int, default=1,
                   help="1 (default): one request per sample, exact per-sample tokens and "
                        "latency; K>1: requests with n=K, tokens split by text length "
                        "(flagged estimated) and latency by token share")
    s.add_argument("--temperature", type=cliargs.number(0), default=0.6)
    s.add_argument("--top-p", type=cliargs.number(0, 1), default=0.95)
    s.add_argument("--top-k", type=int, default=20, help="-1 leaves top_k out of the request")
    s.add_argument("--max-tokens", type=int, default=None)
    s.add_argument("--extra-body", type=_json_arg, default={},
                   help='JSON merged into every request body, e.g. \'{"seed": 0}\'')
    d = ap.add_argument_group("data and output")
    d.add_argument("--split", choices=["repo", "comp"], default="repo",
                   help="repo: CodeFlowBench-Repo (bundled); comp: the competition split "
                        "(give its file with --dataset)")
    d.add_argument("--dataset", type=cliargs.input_path(as_path=True), default=None,
                   help="dataset file (default for --split repo: the bundled file)")
    d.add_argument("--problems", type=_ids_arg, action="extend", default=None,
                   help="comma-separated problem ids (repeatable); default: all")
    d.add_argument("--limit", type=int, default=None, help="first N selected problems")
    d.add_argument("--out-dir", type=cliargs.output_path("dir", as_path=True), required=True,
                   help="rollout root; files go to <out-dir>/<model>/<problem_id>.json")
    d.add_argument("--journal", type=cliargs.output_path(as_path=True), default=None,
                   help="request journal (default <out-dir>/.runs/<model>.journal.jsonl)")
    d.add_argument("--context", choices=[*REPO_CONTEXTS, *CONTEXT_MODES], default=None,
                   help="code shown for earlier turns: repo: reference (default) or "
                        "best_verified; comp: chained (default), isolated or golden_upstream")
    d.add_argument("--require-successful-prereq", action="store_true",
                   help="comp, chained: only fully successful turns enter the context; turns "
                        "depending on another turn are blocked until it succeeded")
    d.add_argument("--no-signature", action="store_true",
                   help="do not show the reference function signature in the prompt")
    d.add_argument("--overwrite", action="store_true",
                   help="rebuild existing problem files (journalled requests are reused)")
    v = ap.add_argument_group("verification")
    v.add_argument("--verify-workers", type=cliargs.integer(1), default=2, help="parallel sandboxes")
    v.add_argument("--test-timeout", type=cliargs.number(0, lo_inclusive=False), default=5.0, help="per test, s")
    v.add_argument("--memory-mb", type=cliargs.integer(1), default=2048, help="address-space limit")
    v.add_argument("--isolation", choices=["auto", "namespace", "process"], default="auto")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the prompt of every node of the selected problems and exit")
    ap.add_argument("--no-progress", action="store_true")
    return ap


def _check_args(args: argparse.Namespace) -> None:
    if args.n < 1:
        raise ConfigError("--n must be at least 1")
    if args.samples_per_request < 1:
        raise ConfigError("--samples-per-request must be at least 1")
    if not args.dry_run and not args.base_url:
        raise ConfigError("--base-url is required (or use --dry-run)")
    if args.split == "comp":
        if args.dataset is None:
            raise ConfigError("--split comp needs --dataset FILE (the competition split is not "
                              "bundled)")
        args.context = args.context or "chained"
        if args.context not in CONTEXT_MODES:
            raise ConfigError(f"--context {args.context} is for --split repo; comp takes "
                              + ", ".join(CONTEXT_MODES))
    else:
        args.dataset = args.dataset or DEFAULT_DATASET
        args.context = args.context or "reference"
        if args.context not in REPO_CONTEXTS:
            raise ConfigError(f"--context {args.context} is for --split comp; repo takes "
                              + ", ".join(REPO_CONTEXTS))
    if args.require_successful_prereq and not (args.split == "comp"
                                               and args.context == "chained"):
        raise ConfigError("--require-successful-prereq needs --split comp --context chained")
    # the default dataset is known only now: the one rule over the command's paths, with it
    cliargs.check_doors([("--dataset", cliargs.input_path(), str(args.dataset)),
                         ("--out-dir", cliargs.output_path("dir"), str(args.out_dir)),
                         *([("--journal", cliargs.output_path(), str(args.journal))] if args.journal else [])])


def dry_run(args: argparse.Namespace) -> None:
    """Print the prompts (reference code standing in for earlier turns' answers)."""
    for p in load_split(args):
        for sub in p.topological_order():
            print(f"===== {p.problem_id} / {sub.name}")
            if isinstance(p, CompProblem):
                earlier = p.topological_order()[:p.topological_order().index(sub)]
                context = {"isolated": [], "golden_upstream": golden_context(p, sub.name)}.get(
                    args.context, [(s.name, s.reference_code) for s in earlier])
                messages = comp_messages(p, sub.name, context, not args.no_signature)
            else:
                messages = build_messages(p, sub.name, {}, with_signature=not args.no_signature)
            for m in messages:
                print(f"--- {m['role']}\n{m['content']}")


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is too much
    _check_args(args)
    if args.dry_run:
        dry_run(args)
        return 0
    summary = asyncio.run(generate(args))
    print(f"{summary['problems_written']} problem file(s) written, "
          f"{summary['problems_skipped_existing']} already present, "
          f"{len(summary['problems_incomplete'])} incomplete -> {summary['out_dir']}")
    if summary["problems_incomplete"]:
        print("incomplete (requests failed after retries; run the same command again): "
              + ", ".join(summary["problems_incomplete"][:10]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

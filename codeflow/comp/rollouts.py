"""CodeFlow-Comp rollouts: the nodes of one problem, generated and judged turn by turn.

Context modes (``--context`` of ``generate_rollouts --split comp``):

``chained`` (default)
    Turns run in order; each turn's chosen rollout (highest ``pass_rate``,
    ties to the lower inference + evaluation time, then the lower sample
    index) is appended to the context module, and every later turn is
    prompted with, and judged on top of, the chosen code of all earlier
    turns (code that does not parse is left out). With
    ``--require-successful-prereq`` only fully successful turns enter the
    context, and a turn with a transitive dependency whose chosen rollout is
    not fully successful is *blocked*: its samples are still generated (for
    their tokens and latency) but not judged, every test is 0 and each
    attempt carries ``blocked_by_prereq_failure: true``.
``isolated``
    No context: each turn is prompted and judged alone.
``golden_upstream``
    The context is the reference code of the turn's transitive dependencies
    (dependencies first): node-only success. Turns are independent, so all
    turns of a problem run at once.

Each node of the record carries ``selected_rollout_id`` and
``harness_result`` (the chosen rollout's verdicts) as the published judged
files do; each attempt carries ``harness_result`` (one 0/1 per test),
``judged_tests``, ``judged_as`` (``call`` or ``script``) and
``total_latency_sec`` besides the Repo split's fields.
"""

from __future__ import annotations

import asyncio
from typing import Any

from codeflow.comp.dataset import CompProblem
from codeflow.comp.judge import CompVerdict, blocked_verdict, choose_rollout, golden_context, judge_attempt
from codeflow.comp.prompts import comp_messages
from codeflow.dataset import Subproblem, parse_python
from codeflow.extract import extract_all_blocks
from codeflow.rollout_common import RunContext, attempt_fields, collect_samples, plan_requests

CONTEXT_MODES = ("chained", "isolated", "golden_upstream")


class Chain:
    """What the earlier turns of a chained run left: per turn, the chosen code and verdict."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, str | None, str | None, bool]] = []  # name, code, id, ok
        self.ok: dict[str, bool] = {}

    def add(self, name: str, code: str | None, rollout_id: str | None, success: bool) -> None:
        self.turns.append((name, code, rollout_id, success))
        self.ok[name] = success

    def context(self, successful_only: bool) -> tuple[list[tuple[str, str]], dict[str, str]]:
        ctx, source = [], {}
        for name, code, rid, ok in self.turns:
            if code is None or parse_python(code) is None or (successful_only and not ok):
                continue
            ctx.append((name, code))
            source[name] = rid or ""
        return ctx, source


def _verdict_fields(v: CompVerdict) -> dict[str, Any]:
    out = {"eval_latency_sec": v.eval_latency_sec, "success": v.success,
           "pass_rate": v.pass_rate, "n_tests": v.n_tests, "n_passed": v.n_passed,
           "test_statuses": v.test_statuses, "harness_result": v.harness_result,
           "judged_tests": v.judged_tests, "judged_as": v.judged_as,
           "failure_reason": v.failure_reason, "failure_detail": v.failure_detail}
    if v.blocked_by_prereq_failure:
        out["blocked_by_prereq_failure"] = True
    return out


async def comp_node(ctx: RunContext, problem: CompProblem, sub: Subproblem,
                    chain: Chain | None) -> dict[str, Any]:
    """Generate, judge and choose the samples of one turn; returns its rollout node record."""
    args = ctx.args
    blocked: list[str] = []
    if args.context == "golden_upstream":
        context = golden_context(problem, sub.name)
        source = {name: "reference" for name, _ in context}
    elif args.context == "isolated" or chain is None:
        context, source = [], {}
    else:
        context, source = chain.context(args.require_successful_prereq)
        if args.require_successful_prereq:
            blocked = [d.name for d in problem.closure(sub.name) if not chain.ok.get(d.name)]
    messages = comp_messages(problem, sub.name, context, with_signature=not args.no_signature)
    reqs = plan_requests(problem, sub, messages, args)
    results = await asyncio.gather(*(ctx.runner.submit(r) for r in reqs))
    samples, failed_requests, incomplete = collect_samples(reqs, results)
    codes = [extract_all_blocks(res.choices[k].text) for _, res, k in samples]
    if blocked:
        verdicts = [blocked_verdict(problem, sub.name, blocked) for _ in codes]
    else:
        loop = asyncio.get_running_loop()
        verdicts = await asyncio.gather(*(
            loop.run_in_executor(ctx.verify_pool, judge_attempt, problem, sub.name, code,
                                 context, ctx.limits)
            for code in codes))
    attempts = []
    for (idx, res, k), code, v in zip(samples, codes, verdicts):
        a = attempt_fields(problem, sub, args.model, idx, res, k, _verdict_fields(v), code)
        if a["infer_latency_sec"] is not None:
            a["total_latency_sec"] = round(a["infer_latency_sec"] + a["eval_latency_sec"], 6)
        attempts.append(a)
    pick = choose_rollout(attempts)
    best = attempts[pick] if pick is not None else None
    if chain is not None:
        chain.add(sub.name, best["code"] if best else None, best["rollout_id"] if best else None,
                  bool(best and best["success"]))
    node: dict[str, Any] = {
        "node_id": sub.index,
        "name": sub.name,
        "parents": problem.parents(sub.name),
        "depth": problem.depths()[sub.name],
        "n_tests": len(sub.tests),
        "judged_as": "script" if problem.is_last_turn(sub.name) else "call",
        "context_source": source,
        "selected_rollout_id": best["rollout_id"] if best else None,
        "harness_result": best["harness_result"] if best else [0],
        "attempts": attempts,
    }
    if blocked:
        node["blocked_by_prereq_failure"] = blocked
    if failed_requests:
        node["failed_requests"] = failed_requests
    node["_incomplete"] = incomplete
    return node


async def comp_nodes(ctx: RunContext, problem: CompProblem) -> dict[int, dict[str, Any]]:
    """Every node of one problem: turn by turn when chained, all at once otherwise."""
    if ctx.args.context == "chained":
        chain = Chain()
        nodes = {}
        for sub in problem.topological_order():
            nodes[sub.index] = await comp_node(ctx, problem, sub, chain)
        return nodes
    done = await asyncio.gather(*(comp_node(ctx, problem, s, None) for s in problem.subproblems))
    return {n["node_id"]: n for n in done}

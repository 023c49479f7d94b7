"""Pieces shared by the Repo and Comp rollout generators (``generate_rollouts.py``,
``comp/rollouts.py``): request planning, per-sample token and latency fields,
the run context."""

from __future__ import annotations

import argparse
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from codeflow.dataset import Problem, Subproblem
from codeflow.llm_client import ChatRequest, ChatResult, ClientConfig, JournaledRunner
from codeflow.sandbox import SandboxLimits


def safe_filename(problem_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", problem_id)


@dataclass
class RunContext:
    args: argparse.Namespace
    config: ClientConfig
    limits: SandboxLimits
    model_dir: Any
    runner: JournaledRunner
    verify_pool: ThreadPoolExecutor
    summary: dict[str, Any] = field(default_factory=dict)


class SkippingRunner(JournaledRunner):
    """A journaled runner whose progress bar also counts the requests of skipped problems."""

    def skip(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)


def split_tokens(result: ChatResult, k: int) -> tuple[int | None, str, float]:
    """Output tokens, token source and latency share of choice ``k`` of a result."""
    n = len(result.choices)
    if n == 1:
        return result.completion_tokens, result.token_source, 1.0
    sizes = [len(c.text) + len(c.reasoning or "") for c in result.choices]
    share = sizes[k] / sum(sizes) if sum(sizes) else 1.0 / n
    tokens = None if result.completion_tokens is None else int(round(result.completion_tokens
                                                                     * share))
    # Per-choice counts are not in the standard usage block: the request's total
    # is split by the choices' text length, so the count is flagged as estimated.
    return tokens, "estimated", share


def plan_requests(problem: Problem, sub: Subproblem, messages: list[dict], args
                  ) -> list[ChatRequest]:
    """Stable request keys: ``<problem>/<node>/<model>/<sample>`` (or ``/b<batch>``)."""
    base = f"{problem.problem_id}/{sub.name}/{args.model}"
    per = args.samples_per_request
    if per <= 1:
        return [ChatRequest(f"{base}/{k}", messages, n=1) for k in range(args.n)]
    reqs = []
    for b in range(math.ceil(args.n / per)):
        reqs.append(ChatRequest(f"{base}/b{b}", messages, n=min(per, args.n - b * per)))
    return reqs


def collect_samples(reqs: list[ChatRequest], results: list[ChatResult]
                    ) -> tuple[list[tuple[int, ChatResult, int]], list[dict], bool]:
    """``(sample index, result, choice)`` of every answered sample, the failed requests,
    and whether a failure was transient (the node is incomplete: run again)."""
    samples: list[tuple[int, ChatResult, int]] = []
    failed_requests = []
    incomplete = False
    sample = 0
    for req, res in zip(reqs, results):
        if not res.ok:
            failed_requests.append({"request_key": req.key, "error": res.error,
                                    "status_code": res.status_code})
            transient = res.status_code is None or not 400 <= res.status_code < 500
            incomplete = incomplete or transient
            sample += req.n
            continue
        for k in range(len(res.choices)):
            samples.append((sample + k, res, k))
        sample += req.n
    return samples, failed_requests, incomplete


def attempt_fields(problem: Problem, sub: Subproblem, model: str, idx: int, res: ChatResult,
                   k: int, verdict: dict[str, Any], code: str | None) -> dict[str, Any]:
    """One attempt of the rollout record: ids, tokens, latency, ``verdict``'s fields, code."""
    out_tokens, token_source, share = split_tokens(res, k)
    prompt_tokens = res.prompt_tokens
    latency = None if res.latency_sec is None else res.latency_sec * share
    attempt: dict[str, Any] = {
        "rollout_id": f"{problem.problem_id}/{sub.name}/{model}/{idx}",
        "model": model,
        "sample_index": idx,
        "prompt_tokens": prompt_tokens,
        "output_tokens": out_tokens,
        "total_tokens": None if out_tokens is None or prompt_tokens is None
        else prompt_tokens + out_tokens,
        "token_source": token_source,
        "infer_latency_sec": None if latency is None else round(latency, 6),
        "latency_source": "request" if len(res.choices) == 1 else "batch_token_share",
    }
    attempt.update(verdict)
    attempt.update({
        "finish_reason": res.choices[k].finish_reason,
        "request_key": res.key,
        "request_tries": res.tries,
        "response_model": res.response_model,
        "code": code,
    })
    return attempt

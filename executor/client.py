"""One try of one chat-completions request, classified; backoff; endpoint health.

The retry loop itself lives in :mod:`executor.live`, because whether a retry
may happen depends on the run's deadline and budget. Here a try is sent with
a wall-clock timeout and its outcome classified (``docs/executor.md``,
faults):

=================  ===============================================  =======================
kind               what happened                                    billed?
=================  ===============================================  =======================
``ok``             200, JSON, a choice with content                 yes (usage)
``truncated``      200 but ``finish_reason`` is ``length``          yes (usage); retried
``http_429``       rate limited (``Retry-After`` honoured)          no
``http_5xx``       server error                                     no
``connect``        connection refused or reset                      no
``http_fatal``     401/403/404: wrong key, model or URL             no; the run stops
``http_4xx``       another client error (prompt too long, ...)      no; the sample fails
``timeout``        no answer within the timeout                     unknown (reservation kept)
``invalid_json``   200 with a body that is not JSON                 unknown (reservation kept)
``no_choices``     200 JSON without a choice                        unknown (reservation kept)
=================  ===============================================  =======================
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

from codeflow.llm_client import FATAL_STATUS, _estimate_tokens, _retry_after
from executor.endpoints import Endpoint

RETRYABLE = frozenset({"truncated", "http_429", "http_5xx", "connect", "timeout", "invalid_json", "no_choices"})
#: faults after which nothing is known about what the provider bills: the request's reservation stays held
UNKNOWN_BILLING = frozenset({"timeout", "invalid_json", "no_choices"})
#: faults that count towards an endpoint being down
DOWN_KINDS = frozenset({"connect", "http_5xx", "timeout", "http_fatal"})


@dataclass
class TryResult:
    kind: str
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_source: str = "usage"
    retry_after: float | None = None
    status_code: int | None = None
    detail: str = ""


def prompt_token_bound(messages: list[dict[str, Any]]) -> int:
    """An upper bound on the prompt tokens of ``messages``: UTF-8 bytes plus 16 per message (chat template).

    A byte-level BPE token covers at least one byte, so a prompt cannot have
    more tokens than bytes; the reservation of the hard budget uses this bound.
    """
    return sum(len(str(m.get("content", "")).encode("utf-8")) + 16 for m in messages)


def classify_body(data: Any, messages: list[dict[str, Any]]) -> TryResult:
    """The outcome of a 200 answer's parsed JSON body."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return TryResult("no_choices", detail="the answer has no choices")
    msg = choices[0].get("message") or {}
    text = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(text, str):
        return TryResult("no_choices", detail="the first choice has no message content")
    usage = data.get("usage") or {}
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    source = "usage"
    if not (isinstance(pt, int) and isinstance(ct, int) and pt >= 0 and ct >= 0):
        source = "local"  # no usage reported: count locally (flagged in the trace)
        pt = _estimate_tokens(json.dumps(messages, ensure_ascii=False))
        ct = _estimate_tokens(text)
    kind = "truncated" if choices[0].get("finish_reason") == "length" else "ok"
    return TryResult(kind, text=text, prompt_tokens=pt, completion_tokens=ct, usage_source=source, status_code=200)


async def try_once(http: httpx.AsyncClient, ep: Endpoint, body: dict[str, Any], headers: dict[str, str],
                   timeout_s: float, messages: list[dict[str, Any]]) -> TryResult:
    """Send one try and classify it (never raises for a fault; cancellation propagates)."""
    key = os.environ.get(ep.api_key_env) if ep.api_key_env else None
    hdrs = dict(headers)
    if key:
        hdrs["Authorization"] = f"Bearer {key}"
    try:
        resp = await http.post(ep.url, json=body, headers=hdrs, timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)))
    except httpx.TimeoutException:
        return TryResult("timeout", detail=f"no answer within {timeout_s:.3g} s")
    except (httpx.TransportError, OSError) as exc:
        return TryResult("connect", detail=f"{type(exc).__name__}: {exc}"[:200])
    status = resp.status_code
    if status == 200:
        try:
            data = resp.json()
        except (ValueError, UnicodeDecodeError):
            return TryResult("invalid_json", status_code=200, detail="the answer is not JSON")
        return classify_body(data, messages)
    if status == 429:
        return TryResult("http_429", status_code=status, retry_after=_retry_after(resp.headers))
    if status >= 500:
        return TryResult("http_5xx", status_code=status, retry_after=_retry_after(resp.headers),
                         detail=resp.text[:200])
    if status in FATAL_STATUS:
        return TryResult("http_fatal", status_code=status, detail=resp.text[:200])
    return TryResult("http_4xx", status_code=status, detail=resp.text[:200])


def backoff_s(tries: int, retry_after: float | None, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter; a ``Retry-After`` is a lower bound."""
    wait = rng.uniform(0.0, min(cap, base * (2 ** max(0, tries - 1))))
    if retry_after is not None:
        wait = max(wait, retry_after)
    return wait


class EndpointHealth:
    """Consecutive failed tries per endpoint: one that stays down ends the run ``provider_unavailable``.

    An endpoint is down after ``down_after`` consecutive tries that failed
    with a connection error, a 5xx, a timeout or a 401/403/404 (429 means it
    is up but busy), spanning at least ``down_for_s`` wall seconds; any
    answered try resets its count.
    """

    def __init__(self, down_after: int = 8, down_for_s: float = 0.0) -> None:
        self.down_after = down_after
        self.down_for_s = down_for_s
        self._fails: dict[str, tuple[int, float]] = {}

    def record(self, model_id: str, kind: str) -> bool:
        """Record a try's outcome; True when the endpoint is now considered down."""
        if kind in DOWN_KINDS:
            n, since = self._fails.get(model_id, (0, time.monotonic()))
            self._fails[model_id] = (n + 1, since)
            return kind == "http_fatal" or (n + 1 >= self.down_after and time.monotonic() - since >= self.down_for_s)
        self._fails.pop(model_id, None)
        return False

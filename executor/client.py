"""One try of one chat-completions request, classified; backoff; endpoint gates and health.

The retry loop itself lives in :mod:`executor.live`, because whether a retry
may happen depends on the run's deadline and budget. Here a try is sent,
bounded as a whole (``request_timeout_s`` covers connecting, sending and
reading the whole answer; an answer larger than the endpoint's byte cap is
cut), and its outcome classified (``docs/executor.md``, faults). What a
try's reservation becomes is :func:`executor.ledger.billing_of`'s rule:
settled for a complete answer, released for a complete error answer or a
try that never reached the server, possibly billed otherwise.

=================  ===============================================  ==================  =========================
kind               what happened                                    reservation         then
=================  ===============================================  ==================  =========================
``ok``             200, JSON, a choice with content                 settled (usage)     judged
``truncated``      200 but ``finish_reason`` is ``length``          settled (usage)     judged (never retried)
``http_429``       rate limited (``Retry-After``: the endpoint's    released            retried after the gate
                   gate closes for every sample and run)
``http_5xx``       server error                                     released            retried
``gw_timeout``     408, 499, 504, 524: a timeout or cancellation    possibly billed     retried, fresh reservation
                   reported by something in between
``connect``        connection refused (never reached the server)    released            retried
``reset``          connection closed after the request was sent     possibly billed     retried, fresh reservation
``timeout``        no whole answer within the timeout               possibly billed     retried, fresh reservation
``decode_error``   the body does not decode (false gzip, ...)       possibly billed     retried, fresh reservation
``too_large``      the body passed the endpoint's byte cap          possibly billed     retried, fresh reservation
``invalid_json``   200 with a body that is not JSON                 possibly billed     retried, fresh reservation
``no_choices``     200 JSON without a choice with content           possibly billed     retried, fresh reservation
``http_4xx``       a client error that repeats for this request     released            not re-sent: (node, model)
                   (400, 413, 422, ...)                                                 is refused for the run
``http_fatal``     the endpoint refuses everything: 401, 403, 404,  released            the model is down for the run
                   a 400 that reads as a bad key or an unknown
                   model, a 429 that reads as out of quota/budget
=================  ===============================================  ==================  =========================

A 5xx or 429 from a gateway known to retry (``errors_may_bill``, or an
answer whose retry-count header says it retried) is possibly billed too: the
rule is :func:`executor.gateway.error_billing`, and the retries a gateway
says it made travel in :attr:`TryResult.gateway_retries` to the trace.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from codeflow.llm_client import FATAL_STATUS, estimate_tokens, parse_retry_after
from executor.endpoints import Endpoint
from executor.gateway import TIMEOUT_STATUSES, error_billing, gateway_retries
from executor.ledger import RELEASED, SETTLED, UNBILLED, billing_of

#: faults a sample retries (with a fresh reservation when the last one may have been billed)
RETRYABLE = frozenset({"http_429", "http_5xx", "gw_timeout", "connect", "reset", "timeout", "decode_error", "too_large",
                       "invalid_json", "no_choices"})
#: faults that count towards an endpoint being down (unavailable: it does not answer)
DOWN_KINDS = frozenset({"connect", "reset", "http_5xx", "gw_timeout", "timeout"})
#: a 429 whose body says this, is a refusal (out of quota or budget), not a busy signal
PERMANENT_429 = re.compile(r"insufficient_quota|exceeded your current quota|quota exceeded|out of quota|"
                           r"crossed budget|budget exceeded|exceeded budget|max budget|billing", re.I)
#: a 400 whose body says this, is the endpoint refusing every request (a bad key or an unknown model)
ENDPOINT_400 = re.compile(r"no connected db|api[ _-]?key|authenticat|unauthori[sz]ed|not authori[sz]ed|"
                          r"invalid model name|model_not_found|unknown model|no such model|"
                          r"model .{0,80}(does not exist|not found)", re.I)
#: how much of an error body the trace keeps
DETAIL_CHARS = 200


@dataclass
class TryResult:
    kind: str
    text: str = ""
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    usage_source: str = "usage"
    retry_after: float | None = None
    status_code: int | None = None
    detail: str = ""
    billing: str = RELEASED  # SETTLED, UNBILLED or RELEASED (executor.ledger.billing_of)
    bad_text: bool = False  # the answer held invalid text (lone surrogates, invalid UTF-8), replaced
    #: retries a gateway says it made upstream for this answer (a retry-count header), None when none says
    gateway_retries: int | None = None


def clean_text(s: str) -> tuple[str, bool]:
    """Text from an endpoint made safe to use anywhere (prompts, verifiers, the trace): lone surrogates replaced."""
    try:
        s.encode("utf-8")
        return s, False
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8"), True


def prompt_token_bound(messages: list[dict[str, Any]]) -> int:
    """An upper bound on the prompt tokens of ``messages``: UTF-8 bytes plus 16 per message (chat template).

    A byte-level BPE token covers at least one byte, so a prompt cannot have
    more tokens than bytes; the reservation of the hard budget uses this bound.
    """
    return sum(len(clean_text(str(m.get("content", "")))[0].encode("utf-8")) + 16 for m in messages)


def usage_count(x: Any) -> float | None:
    """A usage field as a token count, or None when it is not one (missing, negative, non-finite, a string, a bool)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        return None
    return float(x)


def classify_body(data: Any, messages: list[dict[str, Any]]) -> TryResult:
    """The outcome of a 200 answer's parsed JSON body."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return TryResult("no_choices", detail="the answer has no choices", billing=UNBILLED, status_code=200)
    msg = choices[0].get("message") or {}
    text = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(text, str):
        return TryResult("no_choices", detail="the first choice has no message content", billing=UNBILLED,
                         status_code=200)
    text, bad = clean_text(text)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    pt, ct = usage_count(usage.get("prompt_tokens")), usage_count(usage.get("completion_tokens"))
    source = "usage"
    if pt is None or ct is None:
        source = "local"  # no usable usage: a local count for the trace; the run charges the reservation
        pt = float(estimate_tokens(json.dumps(messages, ensure_ascii=False)))
        ct = float(estimate_tokens(text))
    kind = "truncated" if choices[0].get("finish_reason") == "length" else "ok"
    return TryResult(kind, text=text, prompt_tokens=pt, completion_tokens=ct, usage_source=source, status_code=200,
                     billing=billing_of(True, True, False), bad_text=bad)


def error_message(raw: bytes) -> str:
    """The server's own words in an error answer (``error.message``, ``error``, ``detail`` or the text), one line."""
    text = raw[:4096].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    msg: Any = None
    if isinstance(data, dict):
        err = data.get("error", data.get("detail"))
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(err, dict) and not msg:
            msg = json.dumps(err)
    out = str(msg) if msg else text
    return " ".join(clean_text(out)[0].split())[:DETAIL_CHARS]


def classify_error(status: int, raw: bytes, headers: Mapping[str, str], retrying_gateway: bool = False) -> TryResult:
    """A complete error answer: what it means for the request, the endpoint, the run and the bill
    (:func:`executor.gateway.error_billing`; ``retrying_gateway``: the endpoint's ``errors_may_bill``)."""
    msg = error_message(raw)
    detail = f"HTTP {status}: {msg}" if msg else f"HTTP {status}"
    retry = parse_retry_after(headers)
    retried = gateway_retries(headers)
    if retried:
        detail = f"{detail} (after {retried} gateway retr{'y' if retried == 1 else 'ies'})"
    if status in TIMEOUT_STATUSES:
        kind = "gw_timeout"
    elif status == 429:
        kind = "http_fatal" if PERMANENT_429.search(msg) else "http_429"
    elif status >= 500:
        kind = "http_5xx"
    elif status in FATAL_STATUS or (status == 400 and ENDPOINT_400.search(msg)):
        kind = "http_fatal"
    else:
        kind = "http_4xx"
    billing = error_billing(status, retrying_gateway=retrying_gateway, retries=retried,
                            permanent=kind == "http_fatal")
    return TryResult(kind, status_code=status, retry_after=retry if kind in ("http_429", "http_5xx", "gw_timeout")
                     else None, detail=detail, billing=billing, gateway_retries=retried)


def response_cap(ep: Endpoint) -> int:
    """The largest answer body accepted from ``ep``: its ``max_response_bytes``, by default 32 bytes per
    token of ``max_tokens`` (4 x max_tokens x 8 bytes) and at least 64 KiB."""
    return ep.max_response_bytes or max(65536, 32 * ep.max_tokens)


def request_body(ep: Endpoint, messages: list[dict[str, Any]], max_tokens: int, keys: Mapping[str, int],
                 temperature: float | None) -> dict[str, Any]:
    """The chat-completions body: the cap under the endpoint's name for it, and the world's keys in ``mcpp``.

    The four keys also travel as ``X-MCPP-*`` headers; in the body they pass
    through gateways that drop unknown headers (a default LiteLLM proxy).
    """
    body: dict[str, Any] = {"model": ep.model, "messages": messages, ep.token_param: int(max_tokens),
                            "mcpp": dict(keys)}
    if temperature is not None:
        body["temperature"] = temperature
    return body


async def try_once(http: httpx.AsyncClient, ep: Endpoint, body: dict[str, Any], headers: dict[str, str],
                   timeout_s: float, messages: list[dict[str, Any]], sent: list[bool] | None = None) -> TryResult:
    """Send one try and classify it (never raises for a fault; cancellation propagates).

    ``sent`` (a one-item list) is set to True once the request's headers
    start to go out: a try cancelled after that may have been billed.
    """
    key = os.environ.get(ep.api_key_env) if ep.api_key_env else None
    hdrs = dict(headers)
    if key:
        hdrs["Authorization"] = f"Bearer {key}"
    reached = sent if sent is not None else [False]

    async def on_event(name: str, info: dict) -> None:
        if ".send_request_headers." in name:
            reached[0] = True

    cap = response_cap(ep)
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream("POST", ep.url, json=body, headers=hdrs, extensions={"trace": on_event},
                                   timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))) as resp:
                chunks, size = [], 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > cap:
                        return TryResult("too_large", status_code=resp.status_code, billing=UNBILLED,
                                         detail=f"the answer passed {cap} bytes")
                    chunks.append(chunk)
                raw = b"".join(chunks)
                status, rheaders = resp.status_code, resp.headers
    except TimeoutError:
        return TryResult("timeout", detail=f"no whole answer within {timeout_s:.3g} s",
                         billing=billing_of(reached[0], False, False))
    except httpx.TimeoutException:
        return TryResult("timeout", detail=f"no answer within {timeout_s:.3g} s",
                         billing=billing_of(reached[0], False, False))
    except httpx.DecodingError as exc:
        return TryResult("decode_error", detail=f"the answer does not decode: {exc}"[:DETAIL_CHARS],
                         billing=UNBILLED)
    except (httpx.TransportError, OSError) as exc:
        kind = "reset" if reached[0] else "connect"
        return TryResult(kind, detail=f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS],
                         billing=billing_of(reached[0], False, False))
    except httpx.HTTPError as exc:  # anything else httpx raises: classified, never a crash
        return TryResult("decode_error", detail=f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS],
                         billing=billing_of(reached[0], False, False))
    if status == 200:
        try:
            text, bad = raw.decode("utf-8"), False
        except UnicodeDecodeError:  # untrusted bytes: invalid UTF-8 replaced, the answer flagged
            text, bad = raw.decode("utf-8", "replace"), True
        try:
            data = json.loads(text)
        except ValueError:
            return TryResult("invalid_json", status_code=200, detail="the answer is not JSON", billing=UNBILLED)
        res = classify_body(data, messages)
        res.bad_text = res.bad_text or bad
        res.gateway_retries = gateway_retries(rheaders)
        return res
    if 200 < status < 300 or 300 <= status < 400:
        return TryResult("invalid_json", status_code=status, detail=f"HTTP {status} is not an answer",
                         billing=UNBILLED)
    return classify_error(status, raw, rheaders, ep.errors_may_bill)


def backoff_s(tries: int, retry_after: float | None, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter; a ``Retry-After`` is a lower bound."""
    wait = rng.uniform(0.0, min(cap, base * (2 ** max(0, tries - 1))))
    if retry_after is not None:
        wait = max(wait, retry_after)
    return wait


class Gate:
    """One endpoint's back-off, shared by every sample and run of the process: no request before it opens.

    A ``Retry-After`` closes the gate until then (wall seconds, monotonic).
    """

    def __init__(self) -> None:
        self.opens_at = 0.0

    def close_for(self, seconds: float) -> None:
        if seconds is not None and math.isfinite(seconds) and seconds > 0:
            self.opens_at = max(self.opens_at, time.monotonic() + seconds)

    def wait_s(self) -> float:
        return max(0.0, self.opens_at - time.monotonic())


_GATES: dict[tuple[str, str], Gate] = {}


def gate_of(ep: Endpoint) -> Gate:
    """The process's gate of ``ep`` (by URL and served model)."""
    return _GATES.setdefault((ep.url, ep.model), Gate())


class EndpointHealth:
    """Consecutive failed tries per endpoint within one run: one that stays down is down for the run.

    An endpoint is down after ``down_after`` consecutive tries that failed
    with a connection error, a reset, a 5xx or a timeout, spanning at least
    ``down_for_s`` wall seconds; any answered try resets its count. A
    ``http_fatal`` answer puts it down at once, and ``refusals_down``
    consecutive request refusals (``http_4xx``, no answer between) too: an
    endpoint that refuses every prompt refuses everything.
    """

    def __init__(self, down_after: int = 8, down_for_s: float = 0.0, refusals_down: int = 3) -> None:
        self.down_after = down_after
        self.down_for_s = down_for_s
        self.refusals_down = refusals_down
        self._fails: dict[str, tuple[int, float]] = {}
        self._refusals: dict[str, int] = {}

    def record(self, model_id: str, kind: str, weight: int = 1) -> bool:
        """Record a try's outcome; True when the endpoint is now considered down. ``weight``: the failed tries
        it stands for (1 + the retries a gateway said it made upstream before answering with this failure)."""
        if kind == "http_fatal":
            return True
        if kind == "http_4xx":
            self._refusals[model_id] = self._refusals.get(model_id, 0) + 1
            return self._refusals[model_id] >= self.refusals_down
        if kind in DOWN_KINDS:
            n, since = self._fails.get(model_id, (0, time.monotonic()))
            n += max(1, int(weight))
            self._fails[model_id] = (n, since)
            return n >= self.down_after and time.monotonic() - since >= self.down_for_s
        if kind == "http_429":
            return False
        self._fails.pop(model_id, None)
        self._refusals.pop(model_id, None)
        return False


__all__ = ["DOWN_KINDS", "RETRYABLE", "SETTLED", "UNBILLED", "RELEASED", "EndpointHealth", "Gate", "TryResult",
           "backoff_s", "classify_body", "classify_error", "clean_text", "gate_of", "prompt_token_bound",
           "request_body", "response_cap", "try_once", "usage_count"]

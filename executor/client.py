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
``decode_error``   the body does not decode (false gzip, a stacked  possibly billed     retried, fresh reservation
                   or unknown Content-Encoding, ...)
``too_large``      the body passed the endpoint's byte cap          possibly billed     retried, fresh reservation
``invalid_json``   200 with a body that is not JSON (or nested too  possibly billed     retried, fresh reservation
                   deep to parse)
``mismatch``       200 JSON that is not a ``chat.completion``       possibly billed     retried, fresh reservation
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
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import h11
import httpx

from codeflow.llm_client import FATAL_STATUS, estimate_tokens, parse_retry_after
from executor.decoding import ACCEPT_ENCODING, BodyDecoder, DecodeFault, TooLarge
from executor.endpoints import Endpoint, request_secrets
from executor.gateway import TIMEOUT_STATUSES, error_billing, gateway_retries
from executor.ledger import RELEASED, SETTLED, UNBILLED, billing_of
from executor.redact import redact
from simulator.base.jsonread import refuse_deep_answer

#: faults a sample retries (with a fresh reservation when the last one may have been billed)
RETRYABLE = frozenset({"http_429", "http_5xx", "gw_timeout", "connect", "reset", "timeout", "decode_error", "too_large",
                       "invalid_json", "no_choices", "mismatch"})
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
    served_model: str | None = None  # the answer's own ``model`` (a gateway may answer with another model)
    #: what the answer did beyond the contract, counted in the request's ``faults``: ``extra_choices`` (more than
    #: the one choice asked), ``duplicate_keys``, ``model_mismatch``, ``stale_bytes`` (its connection was dropped)
    notes: list[str] = field(default_factory=list)
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


#: the largest usage count taken as a count: every integer up to it is exact as a float
MAX_COUNT = 2 ** 53


def usage_count(x: Any) -> float | None:
    """A usage field as a token count, or None when it is not a plain one: a JSON integer in 0..2**53 (not
    missing, negative, a float such as 1e12 or 2.0, a string, a bool, or an integer too large to count exactly)."""
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_COUNT:
        return None
    return float(x)


def same_model(asked: str, answered: Any) -> bool:
    """Does the answer's ``model`` name the model asked? Leniently: a provider prefix (``openai/``) and a dated
    suffix (``gpt-4o`` answered as ``gpt-4o-2024-08-06``) are the same model. Gateways rename models, so a
    mismatch is reported (``model_mismatch``), never refused."""
    if not isinstance(answered, str) or not answered:
        return True
    a, b = asked.lower().rsplit("/", 1)[-1], answered.lower().rsplit("/", 1)[-1]
    return a.startswith(b) or b.startswith(a)


def parse_json(text: str) -> tuple[Any, bool]:
    """(data, duplicate keys seen) of an answer's text; ValueError when it is not JSON or nests deeper than
    :data:`simulator.base.jsonread.MAX_ANSWER_DEPTH` (refused before parsing: Python's parser recurses)."""
    refuse_deep_answer(text)
    dup = [False]

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(items)
        if len(d) != len(items):
            dup[0] = True
        return d

    try:
        return json.loads(text, object_pairs_hook=pairs), dup[0]
    except RecursionError:
        raise ValueError("the answer nests too deep to parse") from None


def classify_body(data: Any, messages: list[dict[str, Any]], duplicate_keys: bool = False,
                  model: str = "") -> TryResult:
    """The outcome of a 200 answer's parsed JSON body.

    The answer is checked against what can be checked: its ``object`` is
    ``chat.completion`` (else ``mismatch``); the first choice is used, and
    choices beyond the one asked (``n = 1``) are noted (``extra_choices``)
    while the usage, which bills them all, is charged as reported; an answer
    with duplicate keys anywhere (``"completion_tokens": 100,
    "completion_tokens": 1``) has no usage to trust: charged the reservation.
    """
    if isinstance(data, dict) and "object" in data and data["object"] != "chat.completion":
        return TryResult("mismatch", detail=redact(f"the answer is a {str(data['object'])[:40]!r}, not a "
                                                   f"chat.completion"), billing=UNBILLED, status_code=200)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return TryResult("no_choices", detail="the answer has no choices", billing=UNBILLED, status_code=200)
    msg = choices[0].get("message") or {}
    text = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(text, str):
        return TryResult("no_choices", detail="the first choice has no message content", billing=UNBILLED,
                         status_code=200)
    text, bad = clean_text(text)
    notes = []
    if len(choices) > 1:
        notes.append("extra_choices")
    if duplicate_keys:
        notes.append("duplicate_keys")
    if model and not same_model(model, data.get("model")):
        notes.append("model_mismatch")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    pt, ct = usage_count(usage.get("prompt_tokens")), usage_count(usage.get("completion_tokens"))
    source = "usage"
    if pt is None or ct is None or duplicate_keys:
        source = "local"  # no usable usage: a local count for the trace; the run charges the reservation
        pt = float(estimate_tokens(json.dumps(messages, ensure_ascii=False)))
        ct = float(estimate_tokens(text))
    kind = "truncated" if choices[0].get("finish_reason") == "length" else "ok"
    served = data.get("model")
    return TryResult(kind, text=text, prompt_tokens=pt, completion_tokens=ct, usage_source=source, status_code=200,
                     billing=billing_of(True, True, False), bad_text=bad, notes=notes,
                     served_model=said(served) if isinstance(served, str) else None)


def error_message(raw: bytes) -> str:
    """The server's own words in an error answer (``error.message``, ``error``, ``detail`` or the text), one line."""
    text = raw[:4096].decode("utf-8", "replace")
    try:
        refuse_deep_answer(text)
        data = json.loads(text)
    except ValueError:  # not JSON, or nested too deep (never parsed): the text itself
        data = None
    msg: Any = None
    if isinstance(data, dict):
        err = data.get("error", data.get("detail"))
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(err, dict) and not msg:
            msg = json.dumps(err)
    out = str(msg) if msg else text
    return said(" ".join(clean_text(out)[0].split()))


def said(text: str) -> str:
    """A server's (or a library's) words as the trace may keep them: redacted (:mod:`executor.redact`), then cut
    to :data:`DETAIL_CHARS` (in this order: no prefix of a secret survives the cut)."""
    return redact(text)[:DETAIL_CHARS]


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
    """The chat-completions body: the cap under the endpoint's name for it, one choice (``n: 1``: a server's
    default may differ), and the world's keys in ``mcpp``.

    The four keys also travel as ``X-MCPP-*`` headers; in the body they pass
    through gateways that drop unknown headers (a default LiteLLM proxy).
    """
    body: dict[str, Any] = {"model": ep.model, "messages": messages, ep.token_param: int(max_tokens), "n": 1,
                            "mcpp": dict(keys)}
    if temperature is not None:
        body["temperature"] = temperature
    return body


async def try_once(http: httpx.AsyncClient, ep: Endpoint, body: dict[str, Any], headers: dict[str, str],
                   timeout_s: float, messages: list[dict[str, Any]], sent: list[bool] | None = None,
                   on_mark: Callable[[str], None] | None = None) -> TryResult:
    """Send one try and classify it (never raises for a fault; cancellation propagates).

    ``sent`` (a one-item list) is set to True once the request's headers
    start to go out: a try cancelled after that may have been billed.
    ``on_mark`` is called with ``"sent"`` then ``"first_byte"`` (the answer's
    headers in): the trace's per-try times. The
    body is read raw and decoded here, within the cap
    (:class:`executor.decoding.BodyDecoder`); a connection that holds bytes
    after the answer is dropped (:func:`drop_if_stale`); every word of the
    server's that the result keeps is redacted (:func:`said`).
    """
    hdrs = {**headers, **request_secrets(ep), "Accept-Encoding": ACCEPT_ENCODING}
    reached = sent if sent is not None else [False]
    notes: list[str] = []
    got: list[httpx.Response] = []

    async def on_event(name: str, info: dict) -> None:
        if ".send_request_headers." in name:
            if not reached[0] and on_mark is not None:
                on_mark("sent")
            reached[0] = True
        elif on_mark is not None and name.endswith(".receive_response_headers.complete"):
            on_mark("first_byte")
        elif name.endswith("response_closed.started") and got and drop_if_stale(got[0]):
            notes.append("stale_bytes")  # before httpcore decides to keep the connection alive

    cap = response_cap(ep)
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream("POST", ep.url, json=body, headers=hdrs, extensions={"trace": on_event},
                                   timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))) as resp:
                got.append(resp)
                status, rheaders = resp.status_code, resp.headers
                dec = BodyDecoder(rheaders.get("content-encoding"), cap)
                async for chunk in resp.aiter_raw():
                    dec.feed(chunk)
                raw = dec.finish()
    except TooLarge as exc:
        return TryResult("too_large", status_code=status, billing=UNBILLED, detail=str(exc))
    except DecodeFault as exc:
        return TryResult("decode_error", status_code=status, detail=said(f"the answer does not decode: {exc}"),
                         billing=UNBILLED)
    except TimeoutError:
        return TryResult("timeout", detail=f"no whole answer within {timeout_s:.3g} s",
                         billing=billing_of(reached[0], False, False))
    except httpx.TimeoutException:
        return TryResult("timeout", detail=f"no answer within {timeout_s:.3g} s",
                         billing=billing_of(reached[0], False, False))
    except httpx.DecodingError as exc:
        return TryResult("decode_error", detail=said(f"the answer does not decode: {exc}"), billing=UNBILLED)
    except (httpx.TransportError, OSError) as exc:
        kind = "reset" if reached[0] else "connect"
        return TryResult(kind, detail=said(f"{type(exc).__name__}: {exc}"),
                         billing=billing_of(reached[0], False, False))
    except httpx.HTTPError as exc:  # anything else httpx raises: classified, never a crash
        return TryResult("decode_error", detail=said(f"{type(exc).__name__}: {exc}"),
                         billing=billing_of(reached[0], False, False))
    res = classify_answer(ep, status, raw, rheaders, messages)
    res.notes[:0] = notes
    return res


def classify_answer(ep: Endpoint, status: int, raw: bytes, headers: Mapping[str, str],
                    messages: list[dict[str, Any]]) -> TryResult:
    """A whole answer (decoded body within the cap), classified."""
    if status == 200:
        try:
            text, bad = raw.decode("utf-8"), False
        except UnicodeDecodeError:  # untrusted bytes: invalid UTF-8 replaced, the answer flagged
            text, bad = raw.decode("utf-8", "replace"), True
        try:
            data, dup = parse_json(text)
        except ValueError as exc:
            why = str(exc) if "deep" in str(exc) else "the answer is not JSON"
            return TryResult("invalid_json", status_code=200, detail=why, billing=UNBILLED)
        res = classify_body(data, messages, dup, ep.model)
        res.bad_text = res.bad_text or bad
        res.gateway_retries = gateway_retries(headers)
        return res
    if 200 < status < 300 or 300 <= status < 400:
        return TryResult("invalid_json", status_code=status, detail=f"HTTP {status} is not an answer",
                         billing=UNBILLED)
    return classify_error(status, raw, headers, ep.errors_may_bill)


def drop_if_stale(resp: httpx.Response) -> bool:
    """Drop the answer's connection when it holds bytes beyond the answer; True when it did.

    A server (or proxy) that writes its answer twice leaves the copy in the
    HTTP/1.1 parser's buffer, where the connection's next request would read
    it as its own answer. Called when httpcore starts closing the response
    (its ``response_closed.started`` trace event, before it decides to keep
    the connection): the parser (h11) says what it holds past the answer
    (``trailing_data``), and marking our side failed makes httpcore close the
    connection instead of returning it to the pool.
    Bytes that arrive later, while the connection is idle, make the socket
    readable, and httpcore drops such a connection before reusing it. Reached
    through httpcore's private attributes (checked by
    ``tests/test_executor_trust.py`` against the pinned versions); when they
    are not there, nothing is dropped.
    """
    layer, conn = getattr(resp, "stream", None), None
    for _ in range(8):  # httpx's bound stream -> its transport's stream -> httpcore's pool stream -> HTTP/1.1 stream
        if layer is None or hasattr(layer, "_connection"):
            conn = getattr(layer, "_connection", None)
            break
        layer = getattr(layer, "_stream", None) or getattr(layer, "_httpcore_stream", None)
    parser = getattr(conn, "_h11_state", None)
    trailing = getattr(parser, "trailing_data", None)
    if not trailing or not trailing[0] or parser.their_state is not h11.DONE:
        return False
    parser.send_failed()
    return True


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
           "backoff_s", "classify_answer", "classify_body", "classify_error", "clean_text", "drop_if_stale", "gate_of",
           "parse_json", "prompt_token_bound", "request_body", "response_cap", "said", "same_model", "try_once",
           "usage_count"]

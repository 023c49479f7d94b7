"""A hostile world of our own: the loopback world serving, per request, a fault class, and keeping its own bill.

Tests of the executor's promises (a hard budget on the provider's own bill,
a hard deadline whatever blocks, no lost trace line) need a server that does
every bad thing a real one may do, on request. :class:`HostileWorld` is the
loopback world (:class:`executor.world.World`: same draws, same HTTP server,
same ``start``/``stop``) whose every chat-completions request is served one
class of :data:`FAULT_CLASSES`, chosen

* by an explicit **schedule**: a list of classes served to requests in order
  of arrival (then the draw below), or a function of the request's keys
  (``(dag, node, trial, attempt, model, try_n) -> class or None``): fixed
  classes for targeted tests;
* else by a **keyed draw** among ``classes`` (a list, or a mapping class ->
  weight), key (seed, DAG, trial, node, model, attempt) and the try's number
  for those keys (stream :data:`STREAM_HOSTILE`): random mixes for property
  tests, reproducible for a seed.

It records every request it saw (:attr:`HostileWorld.seen`: the keys, the
model, the class served, the tokens billed) and keeps its **bill**: a class
marked *billed* below produces the whole answer (the simulator's draw, as the
loopback world) and bills its output tokens when it accepts the request,
whatever then reaches the client, as a hosted API that finishes (and bills)
a request whose client went away. Refusals (4xx, 429, 5xx) bill nothing.

Run it from a shell with ``python -m executor.hostile --pool P --classes
cut_body,ok [--schedule ...] [--port N] [--write-endpoints F] [--record F]``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import h11
import numpy as np
import orjson

from executor.clock import Clock
from executor.world import Call, Reply, World, error_body, error_reply, serve_until_stopped
from simulator.base import cliargs
from simulator.base.errors import ConfigError, cli_entry
from simulator.base.rng import make_key, uniform
from simulator.pools.pool import Pool

#: keyed stream of the hostile world's class draws (beside the world's 101)
STREAM_HOSTILE = 102

#: class -> (billed, what it does)
FAULT_CLASSES: dict[str, tuple[bool, str]] = {
    "ok": (True, "the loopback world's answer"),
    "cut_body": (True, "the whole answer produced and billed; headers (full Content-Length) and half the body "
                       "sent, then the connection closed"),
    "false_gzip": (True, "a 200 with Content-Encoding: gzip and a plain JSON body"),
    "lone_surrogate": (True, "the answer's content starts with a lone surrogate, escaped as valid JSON (\\ud800)"),
    "invalid_utf8": (True, "the answer's body holds bytes that are not UTF-8 inside the content string"),
    "retry_after_huge": (False, "429 with Retry-After: 100000"),
    "bad_request": (False, "a deterministic 400: the prompt is too long for the context"),
    "trickle": (True, "the answer sent one byte every trickle interval (0.2 s): every read is fast, the try long"),
    "oversized": (True, "a 200 whose chunked body never ends as JSON: content streamed in 1 MiB pieces up to "
                        "oversized_bytes (64 MiB), then the connection closed; billed at the request's cap"),
    "lying_usage": (True, "the answer with a lying usage (missing, negative, 1e12, strings or booleans, by a "
                          "keyed draw); billed the tokens it really produced"),
    "catastrophic_regex": (True, "content 'a' x 34 + '!', which makes a backtracking ^(a+)+$ run for hours"),
    "hang": (True, "the answer produced and billed, never sent (the connection held open)"),
    "reset": (True, "the request read, the answer billed, the connection closed without a byte"),
    "quota_429": (False, "429 insufficient_quota (OpenAI's exhausted account), no Retry-After"),
    "litellm_budget_429": (False, "429 'crossed budget' (LiteLLM's per-model spend limit), no Retry-After"),
    "bad_key_400": (False, "400 'No connected db.' (LiteLLM's own answer, as 1.110 words it, to a wrong key "
                           "without a key database)"),
    "unknown_model_400": (False, "400 '/chat/completions: Invalid model name passed in model=...' (LiteLLM's "
                                 "own answer to an unknown model)"),
    "http_500": (False, "500 server error"),
    # -- what a gateway between us and the provider answers (issue 41; :meth:`HostileWorld._gateway`) --
    "gw_timeout_408": (True, "the answer produced and billed upstream; the gateway's request timeout fires: 408 "
                             "(Portkey's request_timeout)"),
    "gw_timeout_504": (True, "the answer produced and billed upstream; the gateway gives up: 504 Gateway Timeout"),
    "cdn_timeout_524": (True, "the answer produced and billed upstream; a CDN's origin timeout: 524"),
    "gw_retry_500": (False, "a gateway retried an upstream 500 twice (its backoff slept), then 500 with "
                            "x-portkey-retry-attempt-count: 2"),
    "gw_retry_429": (False, "a gateway retried an upstream 429 (its backoff slept), then 429 with "
                            "x-litellm-attempted-retries: 2"),
    "gw_retried_ok": (True, "the loopback answer after a gateway's retry of an upstream 500: 200 with "
                            "x-portkey-retry-attempt-count: 1"),
}
#: faults of trust (issue 41): crossed answers, echoed secrets, decoding bombs, answers beyond the contract
TRUST_FAULTS: dict[str, tuple[bool, str]] = {
    "double_answer": (True, "the answer written twice on the kept-alive connection (a buggy proxy): the copy waits "
                            "to be read as the answer of the connection's next request"),
    "key_echo_401": (False, "401 'Incorrect API key provided: <the request's Authorization>', the key echoed in "
                            "the body and in a response header"),
    "key_echo_500": (False, "500 whose body echoes every request header (a debugging proxy), and a response "
                            "header echoing the Authorization"),
    "gzip_bomb": (True, "Content-Encoding: gzip, gzip: the gzip of the gzip of bomb_bytes (1 GiB) zero bytes "
                        "(1,827 bytes on the wire)"),
    "unknown_encoding": (True, "Content-Encoding: compress (never offered) over a plain JSON answer"),
    "many_choices": (True, "extra_choices + 1 choices (5) for n = 1, the usage their sum; billed all of them"),
    "duplicate_usage": (True, "the usage object with completion_tokens twice: the real count, then 1"),
    "deep_json": (True, "a 200 whose body is a JSON array nested deep_json_depth (30,000) deep"),
}
FAULT_CLASSES.update(TRUST_FAULTS)
#: classes a gateway serves (billed ones bill the upstream's whole answer, whatever status reaches the client)
GATEWAY_CLASSES = frozenset({"gw_timeout_408", "gw_timeout_504", "cdn_timeout_524", "gw_retry_500", "gw_retry_429",
                             "gw_retried_ok"})
LIES = ("missing", "negative", "huge", "string", "boolean")
#: a lone surrogate placed in the content: the JSON escape, written into the body as these 6 bytes
SURROGATE = "\\ud800"
_MARK = "@@MCPP-HOSTILE@@"


@dataclass
class Seen:
    """One request the hostile world saw: its keys (None when it had none), model, class served, tokens billed."""

    t: float
    dag: int | None
    node: int | None
    trial: int | None
    attempt: int | None
    model: str | None
    cls: str
    billed_tokens: int
    status: int
    detail: str = ""
    #: of billed_tokens, what the request did not ask for (choices beyond n = 1: many_choices)
    excess_tokens: int = 0


def check_classes(names: Sequence[str], what: str = "--classes") -> list[str]:
    """The class names, each known (else a :class:`ConfigError` naming the bad one and the known ones)."""
    out = []
    for n in names:
        n = n.strip()
        if n not in FAULT_CLASSES:
            raise ConfigError(f"{what}: unknown fault class {n!r}; known: {', '.join(FAULT_CLASSES)}")
        out.append(n)
    return out


Schedule = Sequence[str] | Callable[..., str | None] | None


class HostileWorld(World):
    """The loopback world serving a fault class per request (:data:`FAULT_CLASSES`) and keeping its own bill."""

    def __init__(self, pool: Pool, *, classes: Sequence[str] | Mapping[str, float] = ("ok",),
                 schedule: Schedule = None, trickle_interval_s: float = 0.2, oversized_bytes: int = 64 << 20,
                 retry_after_huge_s: float = 100000.0, catastrophic_len: int = 34, gateway_delay_s: float = 0.05,
                 bomb_bytes: int = 1 << 30, extra_choices: int = 4, deep_json_depth: int = 30000,
                 **world_kwargs: Any) -> None:
        super().__init__(pool, **world_kwargs)
        weights = dict(classes) if isinstance(classes, Mapping) else dict(Counter(classes))
        check_classes(list(weights), "classes")
        if not weights or any(not (w >= 0) for w in weights.values()) or sum(weights.values()) <= 0:
            raise ConfigError(f"classes: weights must be >= 0 with a positive sum, got {weights}")
        total = float(sum(weights.values()))
        self.classes = [(c, w / total) for c, w in weights.items() if w > 0]
        if schedule is not None and not callable(schedule):
            schedule = check_classes(list(schedule), "schedule")
        self.schedule = schedule
        self.trickle_interval_s = float(trickle_interval_s)
        self.oversized_bytes = int(oversized_bytes)
        self.retry_after_huge_s = float(retry_after_huge_s)
        self.catastrophic_len = int(catastrophic_len)
        #: wall seconds a gateway class takes before it answers (its timeout, or its retries' backoff)
        self.gateway_delay_s = float(gateway_delay_s)
        self.bomb_bytes = int(bomb_bytes)
        self.extra_choices = int(extra_choices)
        self.deep_json_depth = int(deep_json_depth)
        listed = [c for c, _ in self.classes] + (list(schedule) if isinstance(schedule, list) else [])
        if "gzip_bomb" in listed:  # built now (seconds for 1 GiB), not on the event loop it shares with its clients
            gzip_bomb(self.bomb_bytes)
        self.seen: list[Seen] = []
        #: output tokens billed per (DAG, trial)
        self.bill: Counter = Counter()
        self.served: Counter = Counter()
        self._hostile_tries: Counter = Counter()
        self._t0 = time.monotonic()

    # -- the bill ----------------------------------------------------------------------------

    def bill_of(self, dag: int, trial: int, prices: Mapping[str, float] | None = None) -> float:
        """What the world billed run (dag, trial): output tokens, or dollars at ``prices`` (per 1M output tokens)."""
        if prices is None:
            return float(self.bill[(dag, trial)])
        return sum(s.billed_tokens * prices.get(s.model or "", 0.0) / 1e6 for s in self.seen
                   if s.dag == dag and s.trial == trial)

    def excess_of(self, dag: int, trial: int, prices: Mapping[str, float] | None = None) -> float:
        """Of :meth:`bill_of`, what run (dag, trial) did not ask for (choices beyond n = 1), tokens or dollars."""
        return sum(s.excess_tokens * (1.0 if prices is None else prices.get(s.model or "", 0.0) / 1e6)
                   for s in self.seen if s.dag == dag and s.trial == trial)

    def record_dict(self) -> dict[str, Any]:
        """The requests seen and the bill, as JSON-ready data (``--record``)."""
        return {"seen": [asdict(s) for s in self.seen],
                "bill": [{"dag": d, "trial": t, "tokens": v} for (d, t), v in sorted(self.bill.items())],
                "served": dict(self.served)}

    # -- the class of a request ---------------------------------------------------------------

    def choose(self, call: Call, n: int) -> str:
        """The class served to try ``n`` (0, 1, ...) of the call's keys: the schedule's, else the keyed draw's."""
        if callable(self.schedule):
            got = self.schedule(call.dag, call.node_id, call.trial, call.attempt, call.model, n)
            if got is not None:
                return check_classes([got], "schedule")[0]
        elif self.schedule is not None:
            i = len(self.seen)
            if i < len(self.schedule):
                return self.schedule[i]
        if len(self.classes) == 1:
            return self.classes[0][0]
        u = self._u(call, n, 0)
        for c, p in self.classes:
            if u < p:
                return c
            u -= p
        return self.classes[-1][0]

    def _u(self, call: Call, n: int, salt: int) -> float:
        key = make_key(self.seed, call.dag, call.trial, STREAM_HOSTILE, call.v, call.j, call.attempt)
        return float(uniform(np.uint64(key), 2 * n + salt))

    # -- one request ----------------------------------------------------------------------------

    def _see(self, call: Call | None, cls: str, billed: int, status: int, detail: str = "") -> None:
        self.served[cls] += 1
        if call is None:
            self.seen.append(Seen(time.monotonic() - self._t0, None, None, None, None, None, cls, 0, status, detail))
            return
        self.seen.append(Seen(time.monotonic() - self._t0, call.dag, call.node_id, call.trial, call.attempt,
                              call.model, cls, billed, status, detail))
        if billed:
            self.bill[(call.dag, call.trial)] += billed

    async def answer(self, headers: Mapping[str, str], body: bytes) -> Reply:
        call = self.parse(headers, body)
        if isinstance(call, Reply):
            self._see(None, "world_refused", 0, call.status, call.body.decode("utf-8", "replace")[:200])
            return call
        ident = (call.dag, call.node_id, call.trial, call.attempt, call.model)
        n = self._hostile_tries[ident]
        self._hostile_tries[ident] = n + 1
        cls = self.choose(call, n)
        if cls in GATEWAY_CLASSES:
            return await self._gateway(cls, call)
        billed, _ = FAULT_CLASSES[cls]
        if cls in TRUST_FAULTS:
            return await self._trust_fault(cls, call, headers)
        if not billed:
            reply = self._refusal(cls, call)
            self._see(call, cls, 0, reply.status)
            return reply
        call.stream = False  # the hostile world answers JSON (its faults are about bodies)
        sleep = cls not in ("reset",)
        got = await self.produce(call, sleep=sleep)
        tokens = got.completion_tokens
        if cls == "oversized" and call.cap is not None:  # billed at the cap
            extra = call.cap * call.n - tokens
            tokens += extra
            self.bills[(call.dag, call.trial, call.model)] += extra
            self.stats.billed_tokens += extra
        detail = ""
        payload = self.completion(call, got)
        if cls == "lying_usage":
            detail = LIES[min(len(LIES) - 1, int(self._u(call, n, 1) * len(LIES)))]
            payload = lie(payload, detail)
        self._see(call, cls, tokens, 200 if cls not in ("hang", "reset") else 0, detail)
        self.stats.answered += 1
        return self._served(cls, call, payload)

    async def _gateway(self, cls: str, call: Call) -> Reply:
        """A gateway's answer: after its delay (a timeout firing, a retry's backoff), an error with the gateway's
        headers; the timeout classes bill the upstream's whole answer first, as a provider whose client (the
        gateway) went away does; a retried error bills nothing (the upstream refused every try)."""
        billed, _ = FAULT_CLASSES[cls]
        call.stream = False
        tokens, payload = 0, None
        if billed:
            got = await self.produce(call, sleep=cls == "gw_retried_ok")
            tokens = got.completion_tokens
            payload = self.completion(call, got)
        if cls != "gw_retried_ok":
            await asyncio.sleep(self.gateway_delay_s)
        if cls == "gw_timeout_408":
            reply = error_reply(408, f"Request exceeded the timeout sent in the request: "
                                     f"{int(self.gateway_delay_s * 1000)}ms", type_="timeout_error", code="408")
        elif cls == "gw_timeout_504":
            reply = error_reply(504, "upstream request timed out (gateway)", code="504")
        elif cls == "cdn_timeout_524":
            reply = Reply(524, {"content-type": "text/html"}, body=b"<html>error code: 524 A timeout occurred</html>")
        elif cls == "gw_retry_500":
            reply = error_reply(500, "upstream: internal server error", headers={"x-portkey-retry-attempt-count": "2"})
        elif cls == "gw_retry_429":
            reply = error_reply(429, "upstream: rate limited", headers={"x-litellm-attempted-retries": "2"})
        else:
            reply = Reply(200, {"x-portkey-retry-attempt-count": "1"}, body=orjson.dumps(payload))
        self._see(call, cls, tokens, reply.status)
        if billed:
            self.stats.answered += 1
        return reply

    def _refusal(self, cls: str, call: Call) -> Reply:
        if cls == "retry_after_huge":
            return error_reply(429, "rate limited: retry after a long while",
                               headers={"retry-after": f"{self.retry_after_huge_s:g}"})
        if cls == "bad_request":
            return error_reply(400, "This model's maximum context length is 4096 tokens; your prompt is too long "
                                    "(prompt too long)", code="context_length_exceeded")
        if cls == "quota_429":
            return Reply(429, {}, body=error_body("insufficient_quota", "insufficient_quota", "insufficient_quota"))
        if cls == "litellm_budget_429":
            return Reply(429, {}, body=error_body(
                f"Deployment over budget: model={call.model} crossed budget. Spend: 1.02, Budget: 1.0",
                "budget_exceeded", "429"))
        if cls == "bad_key_400":
            return Reply(400, {}, body=error_body("No connected db.", "no_db_connection", "400"))
        if cls == "unknown_model_400":
            return Reply(400, {}, body=error_body(
                f"/chat/completions: Invalid model name passed in model={call.model}. Call `/v1/models` "
                f"to view available models for your key.", "invalid_request_error", "400"))
        return error_reply(500, "internal server error (hostile)")

    def _served(self, cls: str, call: Call, payload: dict[str, Any]) -> Reply:
        if cls == "ok" or cls == "lying_usage":
            return Reply(200, {}, body=orjson.dumps(payload))
        if cls == "catastrophic_regex":
            for ch in payload["choices"]:
                ch["message"]["content"] = "a" * self.catastrophic_len + "!"
            return Reply(200, {}, body=orjson.dumps(payload))
        if cls == "false_gzip":
            return Reply(200, {"content-encoding": "gzip"}, body=orjson.dumps(payload))
        if cls == "lone_surrogate":
            for ch in payload["choices"]:
                ch["message"]["content"] = _MARK + ch["message"]["content"]
            return Reply(200, {}, body=orjson.dumps(payload).replace(_MARK.encode(), SURROGATE.encode()))
        if cls == "invalid_utf8":
            for ch in payload["choices"]:
                ch["message"]["content"] = _MARK + ch["message"]["content"]
            return Reply(200, {}, body=orjson.dumps(payload).replace(_MARK.encode(), b"\xff\xfe\xc3("))
        if cls == "reset":
            return Reply(0, {}, body=None)
        if cls == "hang":
            return Reply(send=_hang)
        body = orjson.dumps(payload)
        if cls == "cut_body":
            return Reply(send=_cut(body))
        if cls == "trickle":
            return Reply(send=_trickle(body, self.trickle_interval_s))
        if cls == "oversized":
            return Reply(send=_oversized(call, self.oversized_bytes))
        raise AssertionError(cls)


    # -- the faults of trust (TRUST_FAULTS) ------------------------------------------------------

    async def _trust_fault(self, cls: str, call: Call, headers: Mapping[str, str]) -> Reply:
        """One of :data:`TRUST_FAULTS`: refused (echoing the request's secrets) or produced, billed and mangled."""
        auth = headers.get("authorization", "")
        if cls == "key_echo_401":
            self._see(call, cls, 0, 401)
            return Reply(401, {"x-echo-authorization": auth}, body=error_body(
                f"Incorrect API key provided: {auth}. You can find your API key at your account page.",
                "invalid_request_error", "invalid_api_key"))
        if cls == "key_echo_500":
            self._see(call, cls, 0, 500)
            first = sorted(headers, key=lambda k: (k != "authorization", not k.startswith("x-") or
                                                   k.startswith("x-mcpp-"), k))  # the secrets first
            echo = ", ".join(f"{k}={headers[k]}" for k in first)
            return Reply(500, {"x-echo-authorization": auth}, body=error_body(
                f"upstream failed for the request with headers {echo}", "server_error", "500"))
        call.stream = False
        if cls == "many_choices":
            call.n = 1 + self.extra_choices
        got = await self.produce(call)
        self._see(call, cls, got.completion_tokens, 200)
        self.seen[-1].excess_tokens = int(sum(got.tokens[1:]))
        self.stats.answered += 1
        payload = self.completion(call, got)
        if cls == "double_answer":
            return Reply(send=_twice(orjson.dumps(payload)))
        if cls == "gzip_bomb":
            return Reply(200, {"content-encoding": "gzip, gzip"}, body=gzip_bomb(self.bomb_bytes))
        if cls == "unknown_encoding":
            return Reply(200, {"content-encoding": "compress"}, body=orjson.dumps(payload))
        if cls == "many_choices":
            return Reply(200, {}, body=orjson.dumps(payload))
        if cls == "duplicate_usage":
            u = payload.pop("usage")
            body = orjson.dumps(payload)[:-1] + (
                f',"usage":{{"prompt_tokens":{u["prompt_tokens"]},"completion_tokens":{u["completion_tokens"]},'
                f'"completion_tokens":1,"total_tokens":{u["prompt_tokens"] + 1}}}}}').encode()
            return Reply(200, {}, body=body)
        if cls == "deep_json":
            return Reply(200, {}, body=b"[" * self.deep_json_depth + b"]" * self.deep_json_depth)
        raise AssertionError(cls)


@functools.lru_cache(maxsize=2)
def gzip_bomb(size: int) -> bytes:
    """The gzip of the gzip of ``size`` zero bytes (1 GiB: 1,827 bytes; built once per size, seconds for 1 GiB)."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31, 9, zlib.Z_RLE)
    zeros = bytes(min(size, 1 << 20))
    parts, left = [], size
    while left > 0:
        parts.append(inner.compress(zeros[:left]))
        left -= len(zeros)
    parts.append(inner.flush())
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(b"".join(parts)) + outer.flush()


def _twice(body: bytes):
    """A complete answer, then the same bytes again in the same write: the copy waits on the kept-alive connection."""
    async def send(conn: h11.Connection, writer: asyncio.StreamWriter) -> bool:
        one = (_head(conn, [("content-length", str(len(body)))]) + conn.send(h11.Data(data=body))
               + conn.send(h11.EndOfMessage()))
        writer.write(one + one)
        await writer.drain()
        return conn.our_state is not h11.MUST_CLOSE and conn.their_state is not h11.MUST_CLOSE
    return send


def lie(payload: dict[str, Any], how: str) -> dict[str, Any]:
    """The payload with its usage replaced by a lie: missing, negative, huge (1e12), strings or booleans."""
    u = payload["usage"]
    if how == "missing":
        payload.pop("usage")
    elif how == "negative":
        payload["usage"] = {"prompt_tokens": -1, "completion_tokens": -u["completion_tokens"] - 5,
                            "total_tokens": -6}
    elif how == "huge":
        payload["usage"] = {"prompt_tokens": u["prompt_tokens"], "completion_tokens": 1e12, "total_tokens": 1e12}
    elif how == "string":
        payload["usage"] = {k: str(v) for k, v in u.items()}
    elif how == "boolean":
        payload["usage"] = {"prompt_tokens": True, "completion_tokens": True, "total_tokens": True}
    else:
        raise ValueError(how)
    return payload


def _head(conn: h11.Connection, headers: list[tuple[str, str]]) -> bytes:
    return conn.send(h11.Response(status_code=200, headers=[("content-type", "application/json"), *headers]))


async def _hang(conn: h11.Connection, writer: asyncio.StreamWriter) -> bool:
    await asyncio.sleep(3600.0)  # never answers; the world's stop cancels it
    return False


def _cut(body: bytes):
    async def send(conn: h11.Connection, writer: asyncio.StreamWriter) -> bool:
        writer.write(_head(conn, [("content-length", str(len(body)))]))
        writer.write(conn.send(h11.Data(data=body[: len(body) // 2])))
        await writer.drain()
        writer.transport.abort()
        return False
    return send


def _trickle(body: bytes, interval_s: float):
    async def send(conn: h11.Connection, writer: asyncio.StreamWriter) -> bool:
        writer.write(_head(conn, [("content-length", str(len(body)))]))
        await writer.drain()
        for i in range(len(body)):
            await asyncio.sleep(interval_s)
            writer.write(conn.send(h11.Data(data=body[i:i + 1])))
            await writer.drain()
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        return conn.our_state is not h11.MUST_CLOSE and conn.their_state is not h11.MUST_CLOSE
    return send


def _oversized(call: Call, limit: int):
    async def send(conn: h11.Connection, writer: asyncio.StreamWriter) -> bool:
        writer.write(_head(conn, []))  # no Content-Length: chunked, no end announced
        start = (f'{{"id":"chatcmpl-hostile","object":"chat.completion","created":{int(time.time())},'
                 f'"model":{json.dumps(call.model)},"choices":[{{"index":0,"message":{{"role":"assistant",'
                 f'"content":"').encode()
        writer.write(conn.send(h11.Data(data=start)))
        piece = b"a" * (1 << 20)
        sent = len(start)
        while sent < limit:
            writer.write(conn.send(h11.Data(data=piece)))
            sent += len(piece)
            await writer.drain()
        writer.transport.abort()  # never a valid end
        return False
    return send


# -- the command line ---------------------------------------------------------------------------


def _weights(text: str) -> dict[str, float]:
    """``cut_body,ok`` or ``cut_body:3,ok:1``: class -> weight."""
    out: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, _, w = item.partition(":")
        try:
            weight = float(w) if w else 1.0
        except ValueError:
            raise ConfigError(f"--classes: weight of {name!r} is not a number: {w!r}") from None
        out[check_classes([name])[0]] = out.get(name.strip(), 0.0) + weight
    if not out:
        raise ConfigError("--classes: name at least one fault class")
    return out


@cli_entry
def main(argv: Sequence[str] | None = None) -> int:
    from executor.inputs import load_dag, make_workflow
    from simulator.base.io_utils import atomic_write_text
    from simulator.base.settings import check_seed

    ap = cliargs.ArgumentParser(prog="python -m executor.hostile",
                                 description="Serve a pool as a hostile OpenAI-compatible world (fault classes: "
                                             + ", ".join(FAULT_CLASSES) + ").")
    ap.add_argument("--pool", type=cliargs.input_path(), required=True)
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--classes", default="ok", help="classes drawn per request: a,b or a:3,b:1 (weights)")
    ap.add_argument("--schedule", default=None, help="classes served to the first requests in order: a,b,c")
    ap.add_argument("--time-scale", type=cliargs.number(0, lo_inclusive=False), default=1.0, help="wall seconds slept per model second")
    ap.add_argument("--seed", default="1", help="seed of the keyed draws")
    ap.add_argument("--usage", choices=("sampled", "max"), default="sampled")
    ap.add_argument("--tasks", type=cliargs.input_path(), default=None, help="tasks file of DAG --dag (what the answers must pass)")
    ap.add_argument("--dag", type=int, default=0)
    ap.add_argument("--trickle-interval", type=cliargs.number(0), default=0.2, help="seconds between bytes of a trickle")
    ap.add_argument("--oversized-mb", type=cliargs.number(0, lo_inclusive=False), default=64.0, help="MiB an oversized body streams before closing")
    ap.add_argument("--bomb-mb", type=cliargs.number(0, lo_inclusive=False), default=1024.0,
                    help="MiB of zeros a gzip_bomb decodes to (built once before listening: seconds for 1024)")
    ap.add_argument("--write-endpoints", type=cliargs.output_path(), default=None, help="write an endpoints file pointing at this world")
    ap.add_argument("--record", type=cliargs.output_path(), default=None, help="write the requests seen and the bill (JSON) when stopping")
    ap.add_argument("--max-seconds", type=cliargs.number(0, lo_inclusive=False), default=3600.0, help="stop after this many wall seconds")
    args = ap.parse_args(argv)
    if not (args.time_scale > 0) or not (args.max_seconds > 0) or not (0 <= args.port < 65536):
        raise ConfigError("--time-scale and --max-seconds must be > 0 and --port in 0..65535")
    if not (args.trickle_interval >= 0) or not (args.oversized_mb > 0) or not (args.bomb_mb > 0):
        raise ConfigError("--trickle-interval must be >= 0, --oversized-mb and --bomb-mb > 0")
    seed = check_seed(args.seed, "--seed", "flag")
    classes = _weights(args.classes)
    schedule = check_classes(args.schedule.split(","), "--schedule") if args.schedule else None
    pool, dag = load_dag(args.pool, args.dag)
    tasks = {}
    if args.tasks:
        tasks = {dag: make_workflow(pool, dag, args.pool, None, "", args.tasks, "token_cost_mean").tasks}

    async def serve() -> None:
        world = HostileWorld(pool, classes=classes, schedule=schedule, trickle_interval_s=args.trickle_interval,
                             oversized_bytes=int(args.oversized_mb * (1 << 20)), seed=seed,
                             bomb_bytes=int(args.bomb_mb * (1 << 20)),
                             clock=Clock(args.time_scale), usage=args.usage, tasks=tasks)
        mix = ",".join(f"{c}:{w:g}" for c, w in classes.items())
        await serve_until_stopped(world, args.port, args.write_endpoints, args.max_seconds, lambda port: (
            f"hostile world on http://127.0.0.1:{port}/v1 ({len(pool)} DAGs, classes {mix}, "
            f"time scale {args.time_scale:g})"))
        if args.record:
            atomic_write_text(args.record, json.dumps(world.record_dict()))
        print(f"hostile world stopped: {json.dumps({'served': dict(world.served), 'billed': sum(world.bill.values())})}",
              flush=True)

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())

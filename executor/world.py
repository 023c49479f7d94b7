"""The loopback world: an OpenAI-compatible HTTP server on 127.0.0.1 that answers from a pool's statistics.

Each request names what it is for by four keys (``docs/executor.md``): the
DAG (the pool row), the node id, the live run's trial number and the attempt
index of that (node, model) in the run. They come either as four headers
(``X-MCPP-Dag``, ``X-MCPP-Node``, ``X-MCPP-Trial``, ``X-MCPP-Attempt``) or as
a top-level body object ``"mcpp": {"dag", "node", "trial", "attempt"}``,
which a gateway with default settings (LiteLLM) passes on while it drops
unknown headers; the headers win when both are there. The model is the
body's ``model`` (the world's endpoints file names every model by its pool
id). The world draws the attempt with the simulator's own keyed draw
(:func:`simulator.engine.loop.draw_attempt`, key (seed, DAG, trial, node,
model, attempt), exactly the key of the simulator's attempt), so latency,
output tokens and success come from the same distributions (the same row
of the same (node, model) for the same key), sleeps ``latency x scale``
wall seconds on its clock, reports the drawn output tokens as usage
(``usage="max"``: always the request's cap) and answers with content the
node's verifier accepts or rejects (:func:`executor.tasks.loopback_answer`).

It speaks OpenAI as the official SDK parses it strictly: answers carry
``id``, ``object``, ``created``, ``model``, ``system_fingerprint``;
``stream=True`` is served as server-sent events (``stream_options.include_usage``
adds the final usage chunk); ``n > 1`` is served as n choices, choice i being
attempt ``attempt + i`` (what n requests of a batch would draw); the cap is
``max_tokens`` or ``max_completion_tokens`` (both: the smaller); every error
body is ``{"error": {"message", "type", "param", "code"}}``; ``GET /v1/models``
lists the pool's models.

Faults are drawn per try with keyed uniforms of their own (stream
:data:`STREAM_WORLD`), so a retry of an attempt meets a fresh fault draw but
the same attempt outcome: 429 (with ``Retry-After``), 500, a hang (the
client's timeout fires) and a reset connection. :mod:`executor.hostile`
serves many more, on request.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import h11
import numpy as np
import orjson

from executor.clock import Clock
from executor.endpoints import Endpoint
from executor.tasks import LOOPBACK_TASK, Task, build_tasks, loopback_answer
from simulator.base.errors import ConfigError
from simulator.base.rng import STREAM_ATTEMPT, fold, make_key, uniform
from simulator.costs.arrays import CostSetting, DagArrays, build_arrays
from simulator.costs.charges import DEFAULT_PRICES
from simulator.engine.loop import draw_attempt, node_model_key
from simulator.pools.pool import Pool

#: keyed stream of the world's fault draws (beside the simulator's streams 1..6)
STREAM_WORLD = 101
#: the four keys of a request, in the order of the draw's arguments
KEY_FIELDS = ("dag", "node", "trial", "attempt")
HEADERS = tuple(f"x-mcpp-{k}" for k in KEY_FIELDS)
#: the top-level body object carrying the keys (a default LiteLLM proxy passes it on, and drops the headers)
BODY_KEYS = "mcpp"
HANG_S = 3600.0
#: OpenAI's own limit on ``n``
MAX_N = 128
SYSTEM_FINGERPRINT = "fp_mcpp_loopback"
OWNED_BY = "mcpp-loopback"
#: characters of content per streamed chunk
STREAM_PIECE = 16
#: (type, code) of an error body per status, as OpenAI names them
ERROR_KINDS = {
    400: ("invalid_request_error", "bad_request"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "server_error"),
    504: ("server_error", "timeout"),
}


@dataclass
class Reply:
    """One answer of the world: a body, a stream of body pieces, a custom sender, or nothing (a reset).

    ``send`` (used by :mod:`executor.hostile`) writes the whole response
    itself on the raw connection and returns whether the connection may be
    kept alive.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    stream: AsyncIterator[bytes] | None = None
    send: Callable[[h11.Connection, asyncio.StreamWriter], Awaitable[bool]] | None = None
    content_type: str = "application/json"


@dataclass
class Call:
    """A chat-completions request the world accepted: its keys, the (node, model) position and the options."""

    dag: int
    node_id: int
    trial: int
    attempt: int
    v: int
    j: int
    model: str
    cap: int | None
    n: int
    stream: bool
    include_usage: bool
    prompt_tokens: int
    via: str  # "headers" or "body": where the keys came from


@dataclass
class Produced:
    """The drawn answer of a call: per choice its text, finish reason and output tokens; the latency (the slowest)."""

    texts: list[str]
    finishes: list[str]
    tokens: list[int]
    latency: float

    @property
    def completion_tokens(self) -> int:
        return int(sum(self.tokens))


@dataclass
class Faults:
    """Per-try fault rates of the world (each in [0, 1], summing to at most 1)."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_timeout: float = 0.0
    rate_reset: float = 0.0
    retry_after_s: float = 1.0

    def __post_init__(self) -> None:
        rates = (self.rate_429, self.rate_500, self.rate_timeout, self.rate_reset)
        if any(not (0.0 <= r <= 1.0) for r in rates) or sum(rates) > 1.0:
            raise ValueError(f"fault rates must be in [0, 1] and sum to at most 1, got {rates}")


@dataclass
class WorldStats:
    requests: int = 0
    answered: int = 0
    faults: Counter = field(default_factory=Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    billed_tokens: float = 0.0


class World:
    """The world's state: the pool, the draws, the fault rates and the counters."""

    def __init__(self, pool: Pool, *, seed: int = 0, clock: Clock | None = None, faults: Faults | None = None,
                 usage: str = "sampled", tasks: Mapping[int, Mapping[int, Task]] | None = None) -> None:
        if usage not in ("sampled", "max"):
            raise ValueError(f"usage must be 'sampled' or 'max', got {usage!r}")
        self.pool = pool
        self.seed = int(seed)
        self.clock = clock or Clock()
        self.faults = faults or Faults()
        self.usage = usage
        self.tasks = dict(tasks or {})
        self.stats = WorldStats()
        self._arrays: dict[int, DagArrays] = {}
        self._tries: Counter = Counter()
        #: output tokens billed per (DAG, trial, model): every accepted request, answered or not
        self.bills: Counter = Counter()
        self.server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task] = set()
        self.port: int | None = None
        self._models: list[str] | None = None
        self.warm_s = 0.0  # wall seconds its kernels took to compile or load before it listened

    # -- the draws -------------------------------------------------------------------------

    def arrays(self, dag: int) -> DagArrays:
        """Token-mode arrays of a DAG: a drawn attempt's charge is its output tokens."""
        if dag not in self._arrays:
            self._arrays[dag] = build_arrays(self.pool[dag], CostSetting(cost_mode="token_cost_mean"))
        return self._arrays[dag]

    def draw(self, dag: int, v: int, j: int, trial: int, attempt: int) -> tuple[float, bool, float]:
        """(latency s, success, output tokens) of attempt ``attempt`` of node position v, model j: the simulator's draw."""
        st = self.pool[dag]
        base = make_key(self.seed, int(st.index), trial, STREAM_ATTEMPT, 0, 0, 0)
        key = fold(node_model_key(np.uint64(base), v, j), attempt)
        lat, succ, tokens = draw_attempt(self.arrays(dag), v, j, np.uint64(key))
        return float(lat), bool(succ), float(tokens)

    def fault(self, dag: int, v: int, j: int, trial: int, attempt: int) -> str | None:
        f = self.faults
        if f.rate_429 == f.rate_500 == f.rate_timeout == f.rate_reset == 0.0:
            return None
        ident = (dag, v, j, trial, attempt)
        n = self._tries[ident]
        self._tries[ident] = n + 1
        u = float(uniform(np.uint64(make_key(self.seed, dag, trial, STREAM_WORLD, v, j, attempt)), n))
        for kind, rate in (("429", f.rate_429), ("500", f.rate_500), ("timeout", f.rate_timeout),
                           ("reset", f.rate_reset)):
            if u < rate:
                return kind
            u -= rate
        return None

    def task_of(self, dag: int, node_id: int) -> Task:
        if dag in self.tasks and node_id in self.tasks[dag]:
            return self.tasks[dag][node_id]
        return build_tasks({"default": LOOPBACK_TASK}, [node_id], {}, "<loopback>")[node_id]

    def models(self) -> list[str]:
        """Every model id of the pool, in order of first appearance."""
        if self._models is None:
            seen: dict[str, None] = {}
            for d in range(len(self.pool)):
                for m in self.pool[d].model_ids:
                    seen.setdefault(str(m), None)
            self._models = list(seen)
        return self._models

    # -- one request -----------------------------------------------------------------------

    def parse(self, headers: Mapping[str, str], body: bytes) -> Call | Reply:
        """The accepted call of a chat-completions request, or the 400/404 reply refusing it (in words)."""
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            return error_reply(400, "the request body is not JSON")
        if not isinstance(req, dict):
            return error_reply(400, "the request body is not a JSON object")
        keys = request_keys(headers, req)
        if isinstance(keys, str):
            return error_reply(400, keys)
        (dag, node_id, trial, attempt), via = keys
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return error_reply(400, "'messages' must be a non-empty list of message objects")
        model = req.get("model")
        if not isinstance(model, str):
            return error_reply(400, "'model' must be a string naming a model of the pool")
        cap = output_cap(req)
        if isinstance(cap, str):
            return error_reply(400, cap)
        n = req.get("n", 1)
        n = 1 if n is None else n
        if not isinstance(n, int) or isinstance(n, bool) or not (1 <= n <= MAX_N):
            return error_reply(400, f"'n' must be an integer in 1..{MAX_N}, got {n!r}")
        stream = req.get("stream") or False
        if not isinstance(stream, bool):
            return error_reply(400, f"'stream' must be a boolean, got {stream!r}")
        opts = req.get("stream_options") or {}
        if not isinstance(opts, dict):
            return error_reply(400, "'stream_options' must be an object")
        if not (0 <= dag < len(self.pool)):
            return error_reply(404, f"no DAG {dag} in the world's pool")
        st = self.pool[dag]
        ids = [int(x) for x in st.node_ids]
        if node_id not in ids:
            return error_reply(404, f"DAG {dag} has no node {node_id}")
        if model not in st.model_ids:
            return error_reply(404, f"the world serves no model {model!r} on DAG {dag}", code="model_not_found")
        v, j = ids.index(node_id), st.model_ids.index(model)
        if not st.available[v, j]:
            return error_reply(404, f"model {model!r} is not available on node {node_id}", code="model_not_found")
        prompt_tokens = sum(len(str(m.get("content", ""))) // 4 + 1 for m in messages)
        return Call(dag=dag, node_id=node_id, trial=trial, attempt=attempt, v=v, j=j, model=model, cap=cap, n=n,
                    stream=stream, include_usage=bool(opts.get("include_usage")), prompt_tokens=prompt_tokens,
                    via=via)

    async def produce(self, call: Call, *, sleep: bool = True) -> Produced:
        """Draw the call's choices, bill their output at once, sleep the slowest latency (unless ``sleep`` is False).

        Billed on acceptance, like a hosted API that finishes (and bills) a
        request whose client went away.
        """
        texts, finishes, tokens, latency = [], [], [], 0.0
        for i in range(call.n):
            lat, succ, tok = self.draw(call.dag, call.v, call.j, call.trial, call.attempt + i)
            out, finish = int(round(tok)), "stop"
            if call.cap is not None and out > call.cap:
                out, finish = call.cap, "length"
            if self.usage == "max" and call.cap is not None:
                out = call.cap
            texts.append(loopback_answer(self.task_of(call.dag, call.node_id), succ and finish == "stop"))
            finishes.append(finish)  # a cut answer fails
            tokens.append(out)
            latency = max(latency, lat)
        got = Produced(texts, finishes, tokens, latency)
        self.bills[(call.dag, call.trial, call.model)] += got.completion_tokens
        self.stats.billed_tokens += got.completion_tokens
        if sleep:
            await self.clock.sleep_until(self.clock.now() + latency, serving=True)
        return got

    def completion(self, call: Call, got: Produced) -> dict[str, Any]:
        """The ``chat.completion`` object of a produced answer (what ``ChatCompletion.model_validate`` accepts)."""
        return {
            "id": completion_id(call),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": call.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [{"index": i, "message": {"role": "assistant", "content": t, "refusal": None},
                         "logprobs": None, "finish_reason": f}
                        for i, (t, f) in enumerate(zip(got.texts, got.finishes, strict=True))],
            "usage": usage_of(call, got),
        }

    async def chunks(self, call: Call, got: Produced) -> AsyncIterator[bytes]:
        """The server-sent events of a streamed answer: role, content pieces, finish, (usage), ``[DONE]``."""
        base = {"id": completion_id(call), "object": "chat.completion.chunk", "created": int(time.time()),
                "model": call.model, "system_fingerprint": SYSTEM_FINGERPRINT}

        def event(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
            obj = {**base, "choices": choices}
            if call.include_usage:
                obj["usage"] = usage
            return b"data: " + orjson.dumps(obj) + b"\n\n"

        for i, (text, finish) in enumerate(zip(got.texts, got.finishes, strict=True)):
            yield event([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                          "finish_reason": None}])
            for k in range(0, len(text), STREAM_PIECE):
                yield event([{"index": i, "delta": {"content": text[k:k + STREAM_PIECE]}, "logprobs": None,
                              "finish_reason": None}])
            yield event([{"index": i, "delta": {}, "logprobs": None, "finish_reason": finish}])
        if call.include_usage:
            yield event([], usage_of(call, got))
        yield b"data: [DONE]\n\n"

    def render(self, call: Call, got: Produced) -> Reply:
        """A produced answer as JSON or, for ``stream=True``, as server-sent events."""
        self.stats.answered += 1
        if call.stream:
            return Reply(200, {"cache-control": "no-cache"}, stream=self.chunks(call, got),
                         content_type="text/event-stream")
        return Reply(200, {}, body=orjson.dumps(self.completion(call, got)))

    async def answer(self, headers: Mapping[str, str], body: bytes) -> Reply:
        """The reply to one chat-completions request (a drawn fault, or the drawn answer)."""
        call = self.parse(headers, body)
        if isinstance(call, Reply):
            return call
        kind = self.fault(call.dag, call.v, call.j, call.trial, call.attempt)
        if kind is not None:
            self.stats.faults[kind] += 1
            if kind == "429":
                return error_reply(429, "rate limited (injected)",
                                   headers={"retry-after": f"{self.faults.retry_after_s:g}"})
            if kind == "500":
                return error_reply(500, "injected server error")
            if kind == "reset":
                return Reply(0, {}, body=None)
            await asyncio.sleep(HANG_S)  # the client's timeout ends it
            return error_reply(504, "hung")
        got = await self.produce(call)
        return self.render(call, got)

    def list_models(self) -> Reply:
        """``GET /v1/models``: the pool's models in OpenAI's list format."""
        data = [{"id": m, "object": "model", "created": 0, "owned_by": OWNED_BY} for m in self.models()]
        return Reply(200, {}, body=orjson.dumps({"object": "list", "data": data}))

    async def route(self, method: bytes, target: bytes, headers: Mapping[str, str], body: bytes) -> Reply:
        """Dispatch a request by method and path (any prefix before ``/chat/completions`` or ``/models``)."""
        path = target.split(b"?")[0].rstrip(b"/")
        if path.endswith(b"/chat/completions"):
            if method != b"POST":
                return error_reply(405, "use POST for /chat/completions")
            return await self.answer(headers, body)
        if path.endswith(b"/models") and method == b"GET":
            return self.list_models()
        head, _, name = path.rpartition(b"/")
        if head.endswith(b"/models") and method == b"GET":
            m = name.decode("utf-8", "replace")
            if m in self.models():
                return Reply(200, {}, body=orjson.dumps({"id": m, "object": "model", "created": 0,
                                                         "owned_by": OWNED_BY}))
            return error_reply(404, f"the world serves no model {m!r}", code="model_not_found")
        return error_reply(404, "the loopback world serves POST .../chat/completions and GET .../models")

    # -- the HTTP server -------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:  # the world stops: end the connection quietly (the handler's outermost frame)
            pass
        finally:
            self._handlers.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                req, body = None, bytearray()
                while True:
                    ev = conn.next_event()
                    if ev is h11.NEED_DATA:
                        data = await reader.read(65536)
                        conn.receive_data(data)
                        continue
                    if isinstance(ev, h11.Request):
                        req = ev
                    elif isinstance(ev, h11.Data):
                        body += ev.data
                    elif isinstance(ev, h11.EndOfMessage):
                        break
                    elif isinstance(ev, h11.ConnectionClosed) or ev is h11.PAUSED:
                        return
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in req.headers}
                self.stats.requests += 1
                self.stats.in_flight += 1
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
                try:
                    reply = await self.route(req.method, req.target, headers, bytes(body))
                finally:
                    self.stats.in_flight -= 1
                if reply.send is not None:  # the reply writes itself (hostile faults)
                    if not await reply.send(conn, writer):
                        return
                elif reply.body is None and reply.stream is None:  # a reset: drop the connection
                    writer.transport.abort()
                    return
                else:
                    out = [("content-type", reply.content_type)]
                    if reply.body is not None:
                        out.append(("content-length", str(len(reply.body))))
                    out += list(reply.headers.items())
                    writer.write(conn.send(h11.Response(status_code=reply.status, headers=out)))
                    if reply.body is not None:
                        writer.write(conn.send(h11.Data(data=reply.body)))
                    else:
                        async for piece in reply.stream:
                            writer.write(conn.send(h11.Data(data=piece)))
                            await writer.drain()
                    writer.write(conn.send(h11.EndOfMessage()))
                    await writer.drain()
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError, h11.LocalProtocolError, asyncio.IncompleteReadError):
            return

    def warm(self) -> float:
        """Compile (or load) the draw kernels now, not at the first request: wall seconds it took.

        On an empty numba cache the first draw compiles for seconds; served on
        the event loop a run shares, those seconds would be taken from the
        first run's deadline (the demo missed both deadlines so). One draw per
        DAG the world has tasks for (else its first) builds their arrays too.
        """
        t0 = time.perf_counter()
        dags = list(self.tasks) or ([0] if len(self.pool) else [])
        for dag in dags:
            self.draw(dag, 0, 0, 0, 0)
        return time.perf_counter() - t0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Warm the kernels (:meth:`warm`), then listen on ``host:port`` (0: a free port); a port that cannot be
        bound is a :class:`ConfigError` (one line)."""
        self.warm_s = self.warm()
        try:
            self.server = await asyncio.start_server(self._connection, host, port, backlog=2048)
        except OSError as exc:
            raise ConfigError(bind_error_line(port, exc, host)) from None
        self.port = int(self.server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            handlers = list(self._handlers)
            for t in handlers:
                t.cancel()
            if handlers:
                await asyncio.gather(*handlers, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
            self.server = None

    def endpoints(self, prices: Mapping[str, float] | None = None, concurrency: int = 4096,
                  timeout_scale: float | None = None) -> list[Endpoint]:
        """An endpoint per model of the pool pointing at this world (prices: the pool's table; input free).

        ``max_tokens`` is the largest output of the model's rows and templates
        in the pool (so no drawn answer is cut), the timeout twice the model's
        largest latency (times the scale) plus a second.
        """
        prices = dict(DEFAULT_PRICES if prices is None else prices)
        scale = self.clock.scale if timeout_scale is None else timeout_scale
        most_tokens: dict[str, float] = {}
        longest: dict[str, float] = {}
        for d in range(len(self.pool)):
            arr = self.arrays(d)
            st = self.pool[d]
            for j, m in enumerate(st.model_ids):
                for v in range(arr.n):
                    if not arr.available[v, j]:
                        continue
                    lo, hi = arr.row_ptr[v * arr.m + j], arr.row_ptr[v * arr.m + j + 1]
                    tok = float(arr.row_charge[lo:hi].max()) if hi > lo else float(arr.tmpl_charge[v, j])
                    lat = float(arr.row_lat[lo:hi].max()) if hi > lo else float(arr.lat_mean[v, j] + 6 * arr.lat_std[v, j])
                    most_tokens[m] = max(most_tokens.get(m, 0.0), tok)
                    longest[m] = max(longest.get(m, 0.0), lat)
        out = []
        for m in most_tokens:
            price = prices.get(m, 0.0)
            if m == "default":  # priced as the nodes' legacy model (docs/simulator.md)
                names = [n for d in range(len(self.pool)) for n in self.pool[d].legacy_model_name if n]
                price = prices.get(names[0], 0.0) if names else 0.0
            out.append(Endpoint(
                model_id=m, base_url=f"http://127.0.0.1:{self.port}/v1", model=m, api_key_env="",
                input_price_per_1m=0.0, output_price_per_1m=float(price), concurrency=int(concurrency),
                max_tokens=max(1, int(math.ceil(most_tokens[m]))),
                request_timeout_s=round(2.0 * longest[m] * scale + 1.0, 3),
            ))
        return out




def request_keys(headers: Mapping[str, str], req: Mapping[str, Any]) -> tuple[tuple[int, int, int, int], str] | str:
    """((dag, node, trial, attempt), where from) of a request, or why it has none (one line naming both ways).

    All four ``X-MCPP-*`` headers win; else the body's ``"mcpp"`` object
    (every key an integer >= 0); else the request is refused.
    """
    both = ("the loopback world needs the request's keys, either as the headers X-MCPP-Dag, X-MCPP-Node, "
            "X-MCPP-Trial, X-MCPP-Attempt or as a top-level body object "
            "\"mcpp\": {\"dag\": int, \"node\": int, \"trial\": int, \"attempt\": int} (docs/executor.md)")
    present = [h for h in HEADERS if h in headers]
    if len(present) == len(HEADERS):
        try:
            vals = tuple(int(headers[h].strip()) for h in HEADERS)
        except ValueError:
            return f"the X-MCPP-* headers must be integers, got {[headers[h] for h in HEADERS]}; {both}"
        if min(vals) < 0:
            return f"the X-MCPP-* headers must be >= 0, got {list(vals)}; {both}"
        return vals, "headers"  # type: ignore[return-value]
    obj = req.get(BODY_KEYS)
    if obj is None:
        if present:
            missing = [h for h in HEADERS if h not in headers]
            return f"the headers {', '.join(missing)} are missing and the body has no \"mcpp\" object; {both}"
        return f"the request carries no keys; {both}"
    if not isinstance(obj, dict):
        return f"the body's \"mcpp\" must be an object, got {type(obj).__name__}; {both}"
    bad = [k for k in KEY_FIELDS if not (isinstance(obj.get(k), int) and not isinstance(obj.get(k), bool)
                                         and obj[k] >= 0)]
    if bad:
        return f"the body's \"mcpp\" object needs {', '.join(bad)} as integers >= 0, got {obj!r}; {both}"
    return tuple(int(obj[k]) for k in KEY_FIELDS), "body"  # type: ignore[return-value]


def output_cap(req: Mapping[str, Any]) -> int | None | str:
    """The request's cap on output tokens: ``max_tokens`` or ``max_completion_tokens`` (both: the smaller); or why not."""
    caps = []
    for name in ("max_tokens", "max_completion_tokens"):
        x = req.get(name)
        if x is None:
            continue
        if not isinstance(x, int) or isinstance(x, bool) or x < 1:
            return f"'{name}' must be an integer >= 1, got {x!r}"
        caps.append(x)
    return min(caps) if caps else None


def completion_id(call: Call) -> str:
    return f"chatcmpl-loopback-{call.dag}-{call.trial}-{call.node_id}-{call.j}-{call.attempt}"


def usage_of(call: Call, got: Produced) -> dict[str, int]:
    pt = call.prompt_tokens
    return {"prompt_tokens": pt, "completion_tokens": got.completion_tokens, "total_tokens": pt + got.completion_tokens}


def error_body(message: str, type_: str, code: str | None) -> bytes:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


def error_reply(status: int, message: str, *, type_: str | None = None, code: str | None = None,
                headers: Mapping[str, str] | None = None) -> Reply:
    t, c = ERROR_KINDS.get(status, ("invalid_request_error" if status < 500 else "server_error", str(status)))
    return Reply(status, dict(headers or {}), body=error_body(message, type_ or t, code or c))


def bind_error_line(port: int, exc: OSError, host: str = "127.0.0.1") -> str:
    """One line for a port the world cannot listen on (a busy port: pick another, or 0 for a free one)."""
    why = exc.strerror or str(exc)
    return f"--port {port}: cannot listen on {host}:{port} ({why}); is another server there? pick another port, or 0 for a free one"


def stats_dict(world: World) -> dict[str, Any]:
    s = world.stats
    return {"requests": s.requests, "answered": s.answered, "faults": dict(s.faults),
            "peak_in_flight": s.peak_in_flight, "billed_tokens": s.billed_tokens}


async def serve_until_stopped(world: World, port: int, write_endpoints: str | None, max_seconds: float,
                              banner: Callable[[int], str]) -> None:
    """Serve ``world`` from a shell: listen, write its endpoints file, print ``banner(port)``, stop on SIGINT,
    SIGTERM or after ``max_seconds`` (the ``world`` command and ``python -m executor.hostile``)."""
    import signal

    from executor.endpoints import endpoints_toml
    from simulator.base.io_utils import atomic_write_text

    port = await world.start(port=port)  # a busy port: one line (ConfigError)
    if write_endpoints:
        atomic_write_text(write_endpoints, endpoints_toml(world.endpoints()))
    print(banner(port), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), max_seconds)
    except TimeoutError:
        pass
    await world.stop()

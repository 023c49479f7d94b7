"""The loopback world: an OpenAI-compatible HTTP server on 127.0.0.1 that answers from a pool's statistics.

Each request names what it is for in four headers (``docs/executor.md``):
``X-MCPP-Dag`` (the pool row), ``X-MCPP-Node`` (the node id), ``X-MCPP-Trial``
(the live run's trial number) and ``X-MCPP-Attempt`` (the attempt index of
that (node, model) in the run); the model is the body's ``model`` (the
world's endpoints file names every model by its pool id). The world draws
the attempt with the simulator's own keyed draw
(:func:`simulator.engine.loop.draw_attempt`, key (seed, DAG, trial, node,
model, attempt), exactly the key of the simulator's attempt), so latency,
output tokens and success come from the same distributions (the same row
of the same (node, model) for the same key), sleeps ``latency x scale``
wall seconds on its clock, reports the drawn output tokens as usage
(``usage="max"``: always the request's ``max_tokens``) and answers with
content the node's verifier accepts or rejects (:func:`executor.tasks.loopback_answer`).

Faults are drawn per try with keyed uniforms of their own (stream
:data:`STREAM_WORLD`), so a retry of an attempt meets a fresh fault draw but
the same attempt outcome: 429 (with ``Retry-After``), 500, a hang (the
client's timeout fires) and a reset connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import h11
import numpy as np
import orjson

from executor.clock import Clock
from executor.endpoints import Endpoint
from executor.tasks import LOOPBACK_TASK, Task, build_tasks, loopback_answer
from simulator.base.rng import STREAM_ATTEMPT, fold, make_key, uniform
from simulator.costs.arrays import CostSetting, DagArrays, build_arrays
from simulator.costs.charges import DEFAULT_PRICES
from simulator.engine.loop import draw_attempt, node_model_key
from simulator.pools.pool import Pool

#: keyed stream of the world's fault draws (beside the simulator's streams 1..6)
STREAM_WORLD = 101
HEADERS = ("x-mcpp-dag", "x-mcpp-node", "x-mcpp-trial", "x-mcpp-attempt")
HANG_S = 3600.0


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

    # -- one request -----------------------------------------------------------------------

    async def answer(self, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, str], bytes | None]:
        """(status, headers, body) of one request; body None: drop the connection (a reset)."""
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _error(400, "the request body is not JSON")
        if not isinstance(req, dict):
            return _error(400, "the request body is not a JSON object")
        missing = [h for h in HEADERS if h not in headers]
        if missing:
            return _error(400, f"the loopback world needs the headers {', '.join(missing)} (docs/executor.md)")
        try:
            dag, node_id, trial, attempt = (int(headers[h]) for h in HEADERS)
        except ValueError:
            return _error(400, "X-MCPP-* headers must be integers")
        if not (0 <= dag < len(self.pool)):
            return _error(404, f"no DAG {dag} in the world's pool")
        st = self.pool[dag]
        ids = [int(x) for x in st.node_ids]
        model = str(req.get("model"))
        if node_id not in ids:
            return _error(404, f"DAG {dag} has no node {node_id}")
        if model not in st.model_ids:
            return _error(404, f"the world serves no model {model!r} on DAG {dag}")
        v, j = ids.index(node_id), st.model_ids.index(model)
        if not st.available[v, j]:
            return _error(404, f"model {model!r} is not available on node {node_id}")
        kind = self.fault(dag, v, j, trial, attempt)
        if kind is not None:
            self.stats.faults[kind] += 1
            if kind == "429":
                return 429, {"retry-after": f"{self.faults.retry_after_s:g}"}, orjson.dumps({"error": "rate limited"})
            if kind == "500":
                return _error(500, "injected server error")
            if kind == "reset":
                return 0, {}, None
            await asyncio.sleep(HANG_S)  # the client's timeout ends it
            return _error(504, "hung")
        lat, succ, tokens = self.draw(dag, v, j, trial, attempt)
        max_tokens = req.get("max_tokens")
        cap = int(max_tokens) if isinstance(max_tokens, int) and max_tokens > 0 else None
        out_tokens = int(round(tokens))
        finish = "stop"
        if cap is not None and out_tokens > cap:
            out_tokens, finish = cap, "length"
        if self.usage == "max" and cap is not None:
            out_tokens = cap
        # billed on acceptance, like a hosted API that finishes (and bills) a request whose client went away
        self.bills[(dag, trial, model)] += out_tokens
        await self.clock.sleep_until(self.clock.now() + lat)
        text = loopback_answer(self.task_of(dag, node_id), succ and finish == "stop")  # a cut answer fails
        prompt_tokens = sum(len(str(m.get("content", ""))) // 4 + 1 for m in req.get("messages") or [])
        self.stats.answered += 1
        self.stats.billed_tokens += out_tokens
        payload = {
            "id": f"loopback-{dag}-{trial}-{node_id}-{j}-{attempt}",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": out_tokens,
                      "total_tokens": prompt_tokens + out_tokens},
        }
        return 200, {}, orjson.dumps(payload)

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
                headers = {k.decode().lower(): v.decode() for k, v in req.headers}
                self.stats.requests += 1
                self.stats.in_flight += 1
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
                try:
                    if req.method != b"POST" or not req.target.split(b"?")[0].endswith(b"/chat/completions"):
                        status, hdrs, payload = _error(404, "only POST .../chat/completions is served")
                    else:
                        status, hdrs, payload = await self.answer(headers, bytes(body))
                finally:
                    self.stats.in_flight -= 1
                if payload is None:  # an injected reset: drop the connection
                    writer.transport.abort()
                    return
                out = [("content-type", "application/json"), ("content-length", str(len(payload)))]
                out += list(hdrs.items())
                writer.write(conn.send(h11.Response(status_code=status, headers=out)))
                writer.write(conn.send(h11.Data(data=payload)))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError, h11.LocalProtocolError, asyncio.IncompleteReadError):
            return

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.server = await asyncio.start_server(self._connection, host, port, backlog=2048)
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


def _error(status: int, message: str) -> tuple[int, dict[str, str], bytes]:
    return status, {}, orjson.dumps({"error": {"message": message}})


def stats_dict(world: World) -> dict[str, Any]:
    s = world.stats
    return {"requests": s.requests, "answered": s.answered, "faults": dict(s.faults),
            "peak_in_flight": s.peak_in_flight, "billed_tokens": s.billed_tokens}

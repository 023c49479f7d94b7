"""One run's HTTP side: a sample's requests with braked retries, its verdict, and what the tries say of the models.

:class:`SampleRequests` sends a launched sample's request through its
endpoint (a concurrency slot, the endpoint's Retry-After gate, a per-try
timeout within the time left), settles, marks or releases its reservation in
the run's ledger after every try (:func:`executor.ledger.billing_of`), follows
the retry decision (:func:`executor.retry.next_step`), judges the answer
(:mod:`executor.verifiers`) and reports the sample to its batch. It owns
what is per run and per endpoint on the wire (health, concurrency limits,
failing tries behind a gateway, requests per (node, model), the back-off's
random stream); the rules, the ledger, the clock and the trace belong to
its :class:`executor.live.LiveRun`, which it reaches as ``self.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from executor import verifiers
from executor.client import (
    DOWN_KINDS,
    EndpointHealth,
    TryResult,
    backoff_s,
    gate_of,
    request_body,
    try_once,
)
from executor.endpoints import Endpoint
from executor.ledger import HELD, SETTLED, UNBILLED, Hold, Reservation, billing_of
from executor.retry import ANSWER, DOWN, DOWN_BY_RETRY_AFTER, REFUSE_PAIR, RETRY, Step, next_step
from executor.tasks import Task
from simulator.engine.live_core import Answered, CoreBatch

#: :meth:`SampleRequests._may_send`: the sample waited at its endpoint's gate; decide again
_AGAIN = -1.0


class Ended(Exception):
    """The run ends now, for ``reason`` (a termination), with the words of ``message``."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.message = message


@dataclass
class Sample:
    """One sample of a batch: its attempt number, its reservation, its request task and verdict."""

    index: int  # attempt number of (node, model) in the run (the world's draw key)
    reservation: float  # the amount of its first reservation (a retry reserves at most this)
    max_tokens: int
    res: Reservation | None = None
    task: asyncio.Task | None = None
    #: its place in its batch: sample ``slot`` of the core's batch (:class:`simulator.engine.live_core.CoreBatch`)
    slot: int = -1
    #: why it was cancelled: "deadline", "sibling" (a sibling passed) or "run_end" (the run ended otherwise)
    cancel_reason: str | None = None
    #: a pausable clock's hold from the launch until the request is on the wire (LiveRun._hold)
    hold: Any = None
    #: its place in the ledger's batch hold (a retry's fresh reservation joins it)
    place: Hold | None = None

    def __post_init__(self) -> None:
        if self.res is not None:
            self.place = self.res.hold


@dataclass
class Batch:
    """The requests of one (node, model) batch in flight; its rule state (launch time, answers, losses, whether
    one passed) is ``core``, the run's :class:`~simulator.engine.live_core.LiveCore` batch."""

    v: int
    j: int
    core: CoreBatch
    samples: list[Sample]
    answers: dict[int, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What one sample's requests came to (one ``request`` line)."""

    status: str = "failed"
    text: str = ""
    pt: float | None = 0
    ct: float | None = 0
    source: str = "none"
    charge: float = 0.0
    tries: int = 0
    http_status: int | None = None
    error: str = ""
    faults: Counter = field(default_factory=Counter)
    #: per try: sent_at, first_byte_at, answered_at (run model seconds), kind, http_status, billing
    try_log: list[dict[str, Any]] = field(default_factory=list)
    queued_s: float = 0.0  # model seconds waiting for the endpoint's concurrency slot
    backoff_s: float = 0.0  # model seconds in retry back-off and at Retry-After gates
    served_model: str | None = None
    gateway_retries: int = 0  # retries gateways said they made upstream for this sample's tries


class SampleRequests:
    """The HTTP side of one :class:`~executor.live.LiveRun` (see the module docstring; ``run`` is typed ``Any``:
    :mod:`executor.live` imports this module, and the layers test refuses an import cycle)."""

    def __init__(self, run: Any, http: httpx.AsyncClient, health: EndpointHealth,
                 limits: Mapping[str, asyncio.Semaphore], seed: int, trial: int) -> None:
        self.run, self.http, self.health, self.limits = run, http, health, limits
        self.pair_requests: Counter = Counter()
        #: per model: (failed tries since its last answer, the last upstream error a gateway reported retrying)
        self.failing: dict[str, tuple[int, str]] = {}
        self.rng = random.Random(seed * 1_000_003 + trial)
        self.requests = self.retries = 0

    async def sample(self, b: Batch, s: Sample) -> None:
        """One sample: its request (with retries), its verdict, its report to the batch; never dies silently."""
        v, model_id = b.v, self.run.wf.stats.model_ids[b.j]
        node_id = self.run.node_ids[v]
        judge_wall: float | None = None
        try:
            out = await self.request(b, s)
            passed, why = False, out.status
            if out.status in ("ok", "truncated"):
                task: Task = self.run.wf.tasks[node_id]
                parents = {self.run.node_ids[p]: self.run.accepted.get(p, "") for p in self.run.parents[v]}
                judge0 = time.perf_counter()
                with self.run.clock.paused():  # a verdict costs no model time where the clock can stop (agree)
                    passed, why = await verifiers.judge(task, out.text, parents,
                                                        self.run.clock.to_wall(max(self.run.time_left(), 0.0)))
                judge_wall = time.perf_counter() - judge0
                self.run.obs.add(v, b.j, passed, self.run.elapsed() - b.core.t_launch, out.charge)
        except asyncio.CancelledError:
            if self.run.core.batches.get(v) is b.core:
                self.run.core.lose(v, s.slot)
            raise
        except Exception as exc:  # noqa: BLE001 (a bug in one sample is that sample's failure, in the trace)
            passed, why = False, f"executor_error: {type(exc).__name__}: {exc}"[:200]
            judge_wall = None
        core = self.run.core
        ans = core.answer(v, s.slot, passed) if core.batches.get(v) is b.core else Answered(False, False)
        if ans.first:
            b.answers[s.index] = out.text
        self.run.trace.write("verdict", t=round(self.run.elapsed(), 6), node=node_id, model=model_id, attempt=s.index,
                         passed=passed, reason=why, judge_wall_s=None if judge_wall is None else round(judge_wall, 6),
                         node_completed=b.core.completes(core.early_end))
        if ans.over:
            for i in core.running(v):  # a pass that ends the batch early: its siblings are cancelled
                o = b.samples[i]
                if o.task is not None:
                    o.cancel_reason = o.cancel_reason or "sibling"
                    o.task.cancel()
            self.run._finish(v)

    async def request(self, b: Batch, s: Sample) -> Outcome:
        """Send one sample's request with braked retries (:func:`executor.retry.next_step`); every path settles,
        marks or releases its reservation (:func:`executor.ledger.billing_of`) and writes one ``request`` line."""
        model_id = self.run.wf.stats.model_ids[b.j]
        ep = self.run.endpoints[model_id]
        out, start, sent, in_try = Outcome(), self.run.elapsed(), [False], [False]
        try:
            while True:
                timeout = await self._may_send(b, s, ep, out)
                if timeout is None:
                    break
                if timeout == _AGAIN:
                    continue
                r = await self._send(b, s, ep, out, timeout, sent, in_try)
                if r is None:
                    continue
                self._took(b, s, ep, r, out)
                step = self._next_step(model_id, r, out)
                if not await self._follow(b, s, ep, r, step, out):
                    break
        except asyncio.CancelledError:
            out.status = "cancelled"
            raise
        except Exception as exc:
            out.status, out.error = "executor_error", f"{type(exc).__name__}: {exc}"[:200]
            raise
        finally:
            self._close_request(b, s, ep, out, start, in_try[0] and sent[0])
        return out

    def _next_step(self, model_id: str, r: TryResult, out: Outcome) -> Step:
        """The retry decision (:func:`executor.retry.next_step`) with this run's health, clock and random stream."""
        return next_step(r.kind, retry_after=r.retry_after, wall_left=lambda: self.run.clock.to_wall(self.run.time_left()),
                         tries=out.tries, max_tries=self.run.opt.max_tries,
                         health=lambda: self.health.record(model_id, r.kind, weight=1 + (r.gateway_retries or 0)),
                         backoff=lambda: backoff_s(out.tries, r.retry_after, self.run.opt.backoff_base_s,
                                                   self.run.opt.backoff_cap_s, self.rng))

    async def _may_send(self, b: Batch, s: Sample, ep: Endpoint, out: Outcome) -> float | None:
        """Before a try: None to stop (``out.status`` says why), ``_AGAIN`` after waiting at the endpoint's gate
        (a Retry-After), else the try's timeout."""
        model_id = self.run.wf.stats.model_ids[b.j]
        if model_id in self.run.down:
            out.status = "model_down"
            return None
        wait = gate_of(ep).wait_s()
        if wait > 0:  # the endpoint asked every client to wait (Retry-After)
            if wait >= self.run.clock.to_wall(self.run.time_left()):
                self.run.model_down(model_id, TryResult(
                    "http_429", status_code=429,
                    detail=f"asks to wait {wait:.3g} s (Retry-After), more than the time left"))
                out.status = "model_down"
                return None
            w0 = self.run.elapsed()
            self.run._release(s)
            await self.run.clock.sleep_wall(wait)
            out.backoff_s += self.run.elapsed() - w0
            return _AGAIN
        if self.pair_requests[(b.v, b.j)] >= self.run.opt.max_requests_per_pair:
            out.status = "request_ceiling"
            out.error = f"{self.run.opt.max_requests_per_pair} requests for this (node, model) in this run"
            self.run.refuse_pair(b.v, b.j, f"reached the ceiling of {out.error}")
            return None
        timeout = self.run.clock.timeout_for(self.run.time_left(), ep.request_timeout_s)
        if timeout <= 0:
            out.status = "deadline"
            return None
        return timeout

    async def _send(self, b: Batch, s: Sample, ep: Endpoint, out: Outcome, timeout: float, sent: list[bool],
                    in_try: list[bool]) -> TryResult | None:
        """One try in the endpoint's concurrency slot (None: its model went down or its gate closed meanwhile)."""
        model_id, node_id = self.run.wf.stats.model_ids[b.j], self.run.node_ids[b.v]
        q0 = self.run.elapsed()
        if self.limits[model_id].locked():  # queued for a slot: model time may pass meanwhile
            self.run._release(s)
        async with self.limits[model_id]:
            out.queued_s += self.run.elapsed() - q0
            if model_id in self.run.down or gate_of(ep).wait_s() > 0:
                return None
            keys = {"dag": self.run.wf.dag_row, "node": node_id, "trial": self.run.trial, "attempt": s.index}
            headers = {"X-MCPP-Dag": str(self.run.wf.dag_row), "X-MCPP-Node": str(node_id),
                       "X-MCPP-Trial": str(self.run.trial), "X-MCPP-Attempt": str(s.index)}
            msgs = self.run.messages(b.v)
            body = request_body(ep, msgs, s.max_tokens, keys, self.run.opt.temperature)
            self.requests += 1
            self.pair_requests[(b.v, b.j)] += 1
            out.tries += 1
            sent[0], in_try[0] = False, True
            marks = {"started": self.run.elapsed()}
            out.try_log.append(marks)
            self.run._release(s)  # no suspension before the try is on the wire (VirtualClock.transit)
            r = await self._try(ep, body, headers, timeout, msgs, sent, marks=marks, key=(node_id, s.index))
            in_try[0] = False
            self._close_try(marks, r)
        return r

    def _took(self, b: Batch, s: Sample, ep: Endpoint, r: TryResult, out: Outcome) -> None:
        """What a returned try leaves: its reservation settled (on a trusted usage report, else at its amount) or
        kept as possibly billed, and what the ``request`` line reports of it."""
        if r.served_model is not None:
            out.served_model = r.served_model
        out.http_status = r.status_code
        if r.kind != "ok":
            out.error = r.detail
        self.note_try(self.run.wf.stats.model_ids[b.j], r, out)
        if r.billing == SETTLED:  # no usable usage: charged the most it can cost, its reservation
            trusted = r.usage_source == "usage"
            full = self.run.launcher.cost(ep, r.prompt_tokens or 0, r.completion_tokens or 0) if trusted else s.res.amount
            # a trusted report above the reservation is spent as reported (the server billed it)
            out.charge += self.run.ledger.settle(s.res, full, beyond=trusted)
            if full > s.res.amount:
                out.faults["over_reservation"] += 1
            s.res = None
            if self.run.ledger.exhausted():
                self.run.halt(Ended("budget_exhausted", f"a server billed {self.run.ledger.over:.6g} beyond its "
                                                     f"requests' reservations, which left no budget"))
        elif r.billing == UNBILLED:
            self.run.ledger.mark_possibly_billed(s.res)
            s.res = None
        for note in r.notes:
            out.faults[note] += 1
        if r.bad_text:
            out.faults["bad_text"] += 1
        if r.kind not in ("ok", "truncated"):
            out.faults[r.kind] += 1

    async def _follow(self, b: Batch, s: Sample, ep: Endpoint, r: TryResult, step: Step, out: Outcome) -> bool:
        """Do what the retry decision says; True to send again (after its back-off, on a fresh reservation when
        the last try may have been billed)."""
        model_id = self.run.wf.stats.model_ids[b.j]
        if step.gate_s is not None:
            gate_of(ep).close_for(step.gate_s)  # every sample and run of the process waits for it
        if step.action == ANSWER:
            out.status, out.text = r.kind, r.text
            out.pt, out.ct, out.source = r.prompt_tokens, r.completion_tokens, r.usage_source
            if r.kind == "truncated":
                out.faults["truncated"] += 1
            return False
        if step.action == DOWN_BY_RETRY_AFTER:
            self.run.model_down(model_id, replace(r, detail=f"{r.detail} (asks to wait {r.retry_after:.3g} s by "
                                                        f"Retry-After, more than the time left)"))
        elif step.action == DOWN:
            self.run.model_down(model_id, r)
        elif step.action == REFUSE_PAIR:
            self.run.refuse_pair(b.v, b.j, r.detail)
        if step.action != RETRY:
            out.status = step.status
            return False
        if s.res is None and not self._reserve_again(b, s):  # the last try may have been billed
            out.status = "budget"
            return False
        self.retries += 1
        w0 = self.run.elapsed()
        self.run._release(s)
        await self.run.clock.sleep_wall(step.wait)
        out.backoff_s += self.run.elapsed() - w0
        return True

    def _reserve_again(self, b: Batch, s: Sample) -> bool:
        """A retry's fresh reservation, at most the sample's first (False: its expected cost no longer fits)."""
        room = min(self.run.node_room(b.v), s.reservation)
        tokens, amount = self.run.launcher.capped(b.v, b.j, room)
        if self.run.launcher.expected_cost(b.v, b.j) > room or tokens < 1:
            return False
        s.res = self.run.ledger.reserve(amount, b.v, hold=s.place)
        s.max_tokens = tokens
        return True

    def _close_request(self, b: Batch, s: Sample, ep: Endpoint, out: Outcome, start: float,
                       cut_off: bool) -> None:
        """Every path's end: a reservation still held is possibly billed when cut off mid-request, else released;
        the ``request`` line and the ledger line."""
        self.run._release(s)
        if s.res is not None and s.res.state == HELD:
            if cut_off:  # cut off mid-request: the provider may bill it
                self.run.ledger.mark_possibly_billed(s.res)
            else:  # never reached the server (backoff, queue, connecting): nothing can be billed
                self.run.ledger.release(s.res)
            s.res = None
        end = self.run.elapsed()
        self.run.trace.write("request", t=round(end, 6), node=self.run.node_ids[b.v], model=self.run.wf.stats.model_ids[b.j],
                         attempt=s.index, start=round(start, 6), end=round(end, 6), status=out.status,
                         input_tokens=out.pt, output_tokens=out.ct, usage=out.source, cost=out.charge,
                         max_tokens=int(s.max_tokens), max_tokens_capped=bool(s.max_tokens < ep.max_tokens),
                         retries=max(out.tries - 1, 0), tries=out.tries, http_status=out.http_status,
                         error=out.error or None, faults=dict(out.faults), **self._timing_fields(out, s, end, ep),
                         **({"gateway_retries": out.gateway_retries} if out.gateway_retries else {}))
        self.run.write_ledger()

    def _close_try(self, marks: dict[str, Any], r: TryResult) -> None:
        """A try's record once it returned: answered_at, its kind, status and what its reservation became."""
        marks["answered_at" if r.kind in ("ok", "truncated") else "ended_at"] = self.run.elapsed()
        marks.setdefault("sent_at", None)
        marks.setdefault("first_byte_at", None)
        marks.update(kind=r.kind, http_status=r.status_code, billing=r.billing)

    def _timing_fields(self, out: Outcome, s: Sample, end: float, ep: Endpoint) -> dict[str, Any]:
        """The ``request`` line's learning fields (``docs/executor.md``, trace): per-try times, the settled try's
        latency, queue and back-off time, the cancel reason and what is censored (a cancelled request's latency,
        a cut answer's tokens), the model that answered, temperature."""
        def r6(x):
            return None if x is None else round(float(x), 6)

        for m in out.try_log:
            m.pop("started", None)
            for k in ("sent_at", "first_byte_at", "answered_at", "ended_at"):
                if k in m:
                    m[k] = r6(m[k])
        last = out.try_log[-1] if out.try_log else {}
        latency = None
        if out.status in ("ok", "truncated") and last.get("sent_at") is not None and last.get("answered_at") is not None:
            latency = last["answered_at"] - last["sent_at"]
        censored, censored_at, cancel_reason = None, None, None
        if out.status == "cancelled":
            cancel_reason = s.cancel_reason or "run_end"
            if last and last.get("sent_at") is not None and "answered_at" not in last and "ended_at" not in last:
                censored, censored_at = "latency", end - last["sent_at"]  # on the wire when cancelled: L > this
        elif out.status == "truncated":
            censored, censored_at = "tokens", float(s.max_tokens)  # cut at max_tokens: the answer is longer
        return {"try_log": out.try_log, "sent_at": last.get("sent_at"), "first_byte_at": last.get("first_byte_at"),
                "answered_at": last.get("answered_at"), "latency": r6(latency), "queued_s": r6(out.queued_s),
                "backoff_s": r6(out.backoff_s), "cancel_reason": cancel_reason, "censored": censored,
                "censored_at": r6(censored_at), "served_model": out.served_model,
                "temperature": self.run.opt.temperature}

    async def _try(self, ep: Endpoint, body, headers, timeout: float, msgs, sent: list[bool], *,
                   marks: dict[str, Any] | None = None, key: tuple | None = None) -> TryResult:
        """One try. On a pausable clock (``agree``) its timeout runs on that clock, as the world's answers do: a
        planner pause stops both, so a fault-free world never times out because other runs were planning.
        ``marks`` gets the try's ``sent_at`` and ``first_byte_at`` (run model seconds); ``key`` (node id,
        attempt) names the request to a virtual clock, which matches it to the world's sleep for it."""
        marks = {} if marks is None else marks

        def on_mark(name: str) -> None:
            marks[f"{name}_at"] = self.run.elapsed()

        if not self.run.clock.pausable:
            return await try_once(self.http, ep, body, headers, timeout, msgs, sent, on_mark)
        wire = None if key is None else (self.run.wf.dag_row, self.run.trial, key[0], ep.model, key[1])
        with self.run.clock.transit(wire):  # on a virtual clock, model time waits for the request to reach the world
            attempt = asyncio.ensure_future(try_once(self.http, ep, body, headers, 3600.0, msgs, sent, on_mark))
            timer = asyncio.ensure_future(self.run.clock.sleep_until(self.run.clock.now() + timeout / self.run.clock.scale))
            try:
                await asyncio.wait({attempt, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
                if not attempt.done():
                    attempt.cancel()
            if not attempt.cancelled() and attempt.done():
                return attempt.result()
            with contextlib.suppress(asyncio.CancelledError):
                await attempt
        return TryResult("timeout", detail=f"no whole answer within {timeout:.3g} s of model time x scale",
                         billing=billing_of(sent[0], False, False))

    def note_try(self, model_id: str, r: TryResult, out: Outcome) -> None:
        """Keep what a try says of its model's health: a gateway's retries (the trace shows them) and the
        failed tries since the model last answered, with the last upstream error a gateway retried."""
        if r.gateway_retries:
            out.gateway_retries += r.gateway_retries
            out.faults["gateway_retried"] += 1
        n, words = self.failing.get(model_id, (0, ""))
        if r.kind not in DOWN_KINDS and r.kind != "http_429":  # it answered (or refused): not an outage
            self.failing.pop(model_id, None)
            return
        if r.gateway_retries and r.status_code is not None:  # a gateway says it retried an upstream error
            words = r.detail
        self.failing[model_id] = (n + 1 + (r.gateway_retries or 0), words)

    def outage(self) -> tuple[bool, str]:
        """(every model the unfinished nodes may use is down or failing behind a retrying gateway, what was seen).

        A try that timed out says nothing by itself; a model counts as failing when every try since its last
        answer failed and one of them was an error answer a gateway said it retried upstream (a retry-count
        header): the tries that time out meanwhile are the gateway retrying the same upstream error (its
        backoff outlasts our timeout), and the run is ``provider_unavailable``, not a missed deadline."""
        said, hints, all_out, any_model = [], [], True, False
        for v in range(self.run.n):
            if self.run.completed[v]:
                continue
            for j, m in enumerate(self.run.wf.stats.model_ids):
                if not self.run.core.method_uses(v, j):
                    continue
                any_model = True
                if m in self.run.down:
                    if self.run.down[m][0] != "provider_unavailable":
                        all_out = False
                    continue
                n, words = self.failing.get(m, (0, ""))
                if n == 0 or not words:
                    all_out = False
                    if n and self.run.endpoints[m].errors_may_bill:  # timeouts alone, behind a gateway that retries
                        line = (f"model {m!r} ({self.run.endpoints[m].url}): {n} tries failed since its last answer and "
                                f"none said why (behind a gateway that retries, an upstream outage looks like this: "
                                f"its log says)")
                        if line not in hints:
                            hints.append(line)
                    continue
                line = f"model {m!r} ({self.run.endpoints[m].url}): {n} failed tries (gateway retries included) since " \
                       f"its last answer, last upstream error: {words}"
                if line not in said:
                    said.append(line)
        return any_model and all_out and bool(said), "; ".join(said + hints)

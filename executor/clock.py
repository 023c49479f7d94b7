"""Clocks of a live run: model seconds from the wall clock, optionally time-scaled and pausable.

The pool's latencies and deadlines are seconds of *model time*. A live run
against real endpoints uses :class:`Clock` with ``scale = 1``: model time is
wall time. The loopback world sleeps ``latency x scale`` wall seconds, so a
run against it at ``--time-scale S`` converts with the same ``S``.

``pausable`` clocks serve ``agree``: the executor and the loopback world run
in one process and share one clock, which stops while any planner call is
running (:meth:`Clock.paused`). Planner time then costs no model time, as in
the simulator, whatever the machine's load; the world's sleeping requests
and every deadline wait out the pauses (:meth:`Clock.sleep_until`).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import Counter
from collections.abc import Hashable, Iterator


class Clock:
    """Model seconds since creation: ``(wall - paused) / scale``."""

    def __init__(self, scale: float = 1.0, pausable: bool = False) -> None:
        if not (scale > 0):
            raise ValueError(f"time scale must be > 0, got {scale}")
        self.scale = float(scale)
        self.pausable = bool(pausable)
        #: a planner call holds the whole machine (the event loop waits for it): only where that costs no model time
        self.plans_inline = False
        self._t0 = time.perf_counter()
        self._paused_total = 0.0
        self._pause_depth = 0
        self._pause_start = 0.0
        self._resumed: asyncio.Event | None = None

    def wall(self) -> float:
        """Wall seconds since the clock started."""
        return time.perf_counter() - self._t0

    def now(self) -> float:
        """Model seconds since the clock started (frozen while paused)."""
        w = time.perf_counter() if self._pause_depth == 0 else self._pause_start
        return (w - self._t0 - self._paused_total) / self.scale

    def to_wall(self, model_seconds: float) -> float:
        return model_seconds * self.scale

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop model time while the block runs (a no-op on a clock that is not pausable)."""
        if not self.pausable:
            yield
            return
        if self._pause_depth == 0:
            self._pause_start = time.perf_counter()
        self._pause_depth += 1
        try:
            yield
        finally:
            self._pause_depth -= 1
            if self._pause_depth == 0:
                self._paused_total += time.perf_counter() - self._pause_start
                if self._resumed is not None:
                    self._resumed.set()
                    self._resumed = None

    async def _wait_resumed(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.Event()
        await self._resumed.wait()

    async def sleep_until(self, t_model: float, priority: int = 0, serving: Hashable = False) -> None:
        """Sleep until model time ``t_model`` (waits out pauses on a pausable clock).

        ``priority`` (ties at one instant: lower first) and ``serving`` (the
        world's sleep for a request on the wire: True, or the request's key)
        matter to a :class:`VirtualClock` only.
        """
        while True:
            if self._pause_depth > 0:
                await self._wait_resumed()
                continue
            left = t_model - self.now()
            if left <= 0:
                return
            await asyncio.sleep(left * self.scale)
            if not self.pausable:
                if self.now() >= t_model:
                    return

    def timeout_for(self, time_left_model: float, endpoint_timeout_wall: float) -> float:
        """Wall-seconds timeout of one try: the endpoint's, never more than the time left.

        On a pausable clock the time left in wall seconds is only a lower bound
        (pauses may come), so the endpoint's timeout is kept and the run's
        deadline watcher cancels the request at the model deadline instead.
        """
        if self.pausable:
            return endpoint_timeout_wall
        return max(0.0, min(endpoint_timeout_wall, time_left_model * self.scale))

    async def sleep_wall(self, seconds: float) -> None:
        """Wait ``seconds`` wall seconds (``seconds / scale`` model seconds on a virtual clock)."""
        await asyncio.sleep(seconds)

    @contextlib.contextmanager
    def transit(self, key: Hashable = None) -> Iterator[None]:
        """A request on the wire (a no-op here; a :class:`VirtualClock` does not move meanwhile)."""
        yield


class VirtualClock(Clock):
    """Model time that only model time moves: ``agree``'s one clock for the world and the executor.

    ``now()`` is a number this clock advances itself, to the earliest
    pending :meth:`sleep_until`, and only when nothing else can happen
    first: no planner call or verdict is running (:meth:`paused`), every
    request on the wire (:meth:`transit`) is one the world is serving (its
    model-time sleep, ``serving=True``), and the event loop has run what was
    ready. Planning, HTTP round trips and a loaded CPU then cost no model
    time at all, so a live episode meets its draws at the very model times
    its simulated twin does, whatever the machine's load; and the run takes
    the wall time of its work, not of its latencies. Ties fire in the order
    (time, priority, registration): the deadline watcher (priority 1) after
    the answers due at the same instant, so finishing exactly at D counts.

    Requests on the wire are matched to the world's sleeps **by key** (the
    request's (DAG, trial, node, model, attempt)): a request counts as served
    only while the world sleeps for *that* request. Counting them alone was
    wrong once a run had been cancelled: the world keeps sleeping for a request
    whose client went away (a deadline, a sibling's pass, a run's end), and
    that orphan sleep let model time move while another run's fresh request
    was still on its way to the world, which then met its draw late (measured:
    200 ``sequential`` runs at concurrency 50, the span equal to the draw for
    100% of the first wave's requests but 65% of the later ones, excess up to
    2.5 model s; with keys, 100% of both).
    """

    #: event-loop passes with nothing left to do before time may move
    SETTLE_PASSES = 4

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__(scale, pausable=True)
        # the loop waits for each planner call, so an anytime planner's wall-time limit (``time_limit_ms``) buys
        # what it buys the simulator, which plans one decision at a time with the machine to itself
        self.plans_inline = True
        self._now = 0.0
        self._heap: list[tuple[float, int, int, asyncio.Future]] = []
        self._seq = 0
        self._on_wire = 0
        self._serving = 0
        self._wire_keys: Counter = Counter()
        self._serving_keys: Counter = Counter()
        #: requests on the wire that the world is not serving: sum over keys of max(0, wire - serving)
        self._unmatched = 0
        self._advancer: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None

    def now(self) -> float:
        return self._now

    @contextlib.contextmanager
    def _holding(self, counter: str) -> Iterator[None]:
        """Count one holder of ``counter`` (time cannot move while it is held) for the block."""
        setattr(self, counter, getattr(self, counter) + 1)
        try:
            yield
        finally:
            setattr(self, counter, getattr(self, counter) - 1)
            self._poke()

    def paused(self) -> contextlib.AbstractContextManager[None]:
        return self._holding("_pause_depth")

    @contextlib.contextmanager
    def transit(self, key: Hashable = None) -> Iterator[None]:
        self._on_wire += 1
        self._count(self._wire_keys, key, 1)
        try:
            yield
        finally:
            self._on_wire -= 1
            self._count(self._wire_keys, key, -1)
            self._poke()

    def _count(self, table: Counter, key: Hashable, delta: int) -> None:
        """Change one key's count of wire or serving and keep :attr:`_unmatched` exact."""
        before = max(0, self._wire_keys[key] - self._serving_keys[key])
        table[key] += delta
        if table[key] == 0:
            del table[key]
        self._unmatched += max(0, self._wire_keys[key] - self._serving_keys[key]) - before

    def timeout_for(self, time_left_model: float, endpoint_timeout_wall: float) -> float:
        return endpoint_timeout_wall

    async def sleep_wall(self, seconds: float) -> None:
        await self.sleep_until(self._now + seconds / self.scale)

    async def sleep_until(self, t_model: float, priority: int = 0, serving: Hashable = False) -> None:
        """Wait until model time ``t_model``; ``serving``: the world's sleep for a request on the wire (True, or
        the request's key, matched to the key of its :meth:`transit`)."""
        if t_model <= self._now:
            await asyncio.sleep(0)
            return
        fut = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._heap, (float(t_model), int(priority), self._seq, fut))
        skey = None if serving is True else serving
        if serving is not False:
            self._serving += 1
            self._count(self._serving_keys, skey, 1)
        self._ensure_advancer()
        self._poke()
        try:
            await fut
        finally:
            if serving is not False:
                self._serving -= 1
                self._count(self._serving_keys, skey, -1)
            if not fut.done():
                fut.cancel()
            self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _ensure_advancer(self) -> None:
        if self._advancer is None or self._advancer.done():
            self._wake = asyncio.Event()
            self._advancer = asyncio.ensure_future(self._advance())

    def _settled(self) -> bool:
        return self._pause_depth == 0 and self._unmatched == 0

    async def _advance(self) -> None:
        while True:
            while self._heap and self._heap[0][3].done():  # cancelled sleepers
                heapq.heappop(self._heap)
            if not self._heap:
                return
            quiet = 0
            while quiet < self.SETTLE_PASSES:
                await asyncio.sleep(0)
                if self._settled():
                    quiet += 1
                    continue
                quiet = 0
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 0.05)
            while self._heap and self._heap[0][3].done():
                heapq.heappop(self._heap)
            if not self._heap:
                continue
            t, _, _, fut = heapq.heappop(self._heap)
            self._now = max(self._now, t)
            fut.set_result(None)

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
import time
from collections.abc import Iterator


class Clock:
    """Model seconds since creation: ``(wall - paused) / scale``."""

    def __init__(self, scale: float = 1.0, pausable: bool = False) -> None:
        if not (scale > 0):
            raise ValueError(f"time scale must be > 0, got {scale}")
        self.scale = float(scale)
        self.pausable = bool(pausable)
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

    async def sleep_until(self, t_model: float) -> None:
        """Sleep until model time ``t_model`` (waits out pauses on a pausable clock)."""
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

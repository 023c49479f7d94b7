"""Work that must not run on the event loop, on daemon threads the process never waits for at exit.

The planner's kernels and blocking verdicts (the CodeFlow sandbox, Lean)
run here. Python's own thread pools are joined at interpreter exit (and
``asyncio.run`` joins its default executor), so one hung call would keep a
finished run's process alive past its deadline; these threads are daemons
and a call that outlives the run is simply abandoned.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class DaemonPool:
    """``workers`` daemon threads fed by one queue; :meth:`run` awaits a call's result on the caller's loop."""

    def __init__(self, workers: int, name: str) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        self._started = False
        self._lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                for t in self._threads:
                    t.start()
                self._started = True

    def _work(self) -> None:
        while True:
            fn, args, fut, loop = self._q.get()
            if fut.cancelled():
                continue
            try:
                res, exc = fn(*args), None
            except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine)
                res, exc = None, e
            try:
                loop.call_soon_threadsafe(_set, fut, res, exc)
            except RuntimeError:  # the loop has closed: the run that asked is over
                pass

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on a worker; cancelling the await abandons the call (its result is dropped)."""
        self._start()
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._q.put((fn, args, fut, loop))
        return await fut


def _set(fut: asyncio.Future, res: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(res)


#: one planner thread for the whole process: planner calls never run on the event loop, and the kernels'
#: own threads (simulator/base/threads.py) are shared, not multiplied by concurrent runs
PLANNER = DaemonPool(1, "planner")
#: blocking verdicts (CodeFlow's sandbox, Lean, bounded regexes)
JUDGES = DaemonPool(4, "judge")

"""Why a deadline slipped: the event loop's lag and the CPU wait of its thread during a run.

No code keeps a wall-clock promise while the machine does not run it. So
each run measures, from its start to its end, the two things that say
whether it was starved: the **largest lag** of its event loop (how late a
short sleep woke up: anything that held the loop, starvation or work on the
loop) and the **CPU wait** of the loop's thread (the time it was ready to run
and waiting for a CPU: ``/proc/thread-self/schedstat``, second field), and
of the whole process. When the run's wall time passed the deadline by more
than the slack (0.5 s), :func:`explain_slip` says whether starvation explains
it: the loop's thread waited for a CPU at least as long as the slip beyond
the slack. Otherwise something on the loop held it (a compilation, a
blocking call, a garbage collection's full pass: :mod:`executor.gcpause`
keeps the heap out of those): a bug to report, not the machine's load.

Collections are not timed here: a :data:`gc.callbacks` entry is called
wherever a collection starts, also at the interpreter's recursion limit,
where calling it raises ``RecursionError`` as an unraisable exception (a
first version timed them so, and CI failed two tests on such an exception).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from dataclasses import dataclass

#: how far past the deadline (wall seconds) a run may end without an explanation
SLIP_SLACK_S = 0.5
#: the lag monitor's sleep between checks (seconds)
LAG_INTERVAL_S = 0.02


def schedstat(path: str = "/proc/thread-self/schedstat") -> tuple[float, float] | None:
    """(seconds on a CPU, seconds waiting for one) of a thread (or None where the kernel does not say)."""
    try:
        with open(path) as f:
            fields = f.read().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def process_cpu_wait() -> float | None:
    """Seconds the process's live threads have waited for a CPU (the sum of their schedstat wait)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, seen = 0.0, False
    for t in tasks:
        got = schedstat(f"/proc/self/task/{t}/schedstat")
        if got is not None:
            total += got[1]
            seen = True
    return total if seen else None


class _LagMonitor:
    """One per event loop: a task that sleeps :data:`LAG_INTERVAL_S` and records how late it woke, for every
    open :class:`Watch`; it stops when no watch is open."""

    def __init__(self) -> None:  # no reference to its loop: the loop's entry in _MONITORS goes with the loop
        self.watches: weakref.WeakSet[Watch] = weakref.WeakSet()
        self.task: asyncio.Task | None = None

    def add(self, w: Watch, loop: asyncio.AbstractEventLoop) -> None:
        self.watches.add(w)  # weakly: a run's watch leaves with it, and stops counting once closed
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while any(not w.closed for w in list(self.watches)):
                t = loop.time()
                await asyncio.sleep(LAG_INTERVAL_S)
                lag = max(0.0, loop.time() - t - LAG_INTERVAL_S)
                for w in list(self.watches):
                    if not w.closed and lag > w.max_lag_s:
                        w.max_lag_s = lag
        finally:
            self.task = None  # a finished task holds its loop: let the loop (and its entry) go


def _r6(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


_MONITORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LagMonitor] = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class Watch:
    """A run's starvation measures from :func:`watch` to :meth:`close` (call both on the loop's thread)."""

    max_lag_s: float = 0.0
    thread0: tuple[float, float] | None = None
    process0: float | None = None
    cpu_wait_s: float | None = None
    process_cpu_wait_s: float | None = None
    closed: bool = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        now = schedstat()
        if now is not None and self.thread0 is not None:
            self.cpu_wait_s = max(0.0, now[1] - self.thread0[1])
        p = process_cpu_wait()
        if p is not None and self.process0 is not None:
            self.process_cpu_wait_s = max(0.0, p - self.process0)

    def fields(self) -> dict:
        """The ``end`` event's fields: the loop's largest lag and the CPU waits (None where unknown)."""
        return {"loop_lag_max_s": _r6(self.max_lag_s), "cpu_wait_s": _r6(self.cpu_wait_s),
                "process_cpu_wait_s": _r6(self.process_cpu_wait_s)}


def watch() -> Watch:
    """Start measuring on the running loop (its thread's CPU wait, the process's, the loop's lag)."""
    w = Watch(thread0=schedstat(), process0=process_cpu_wait())
    loop = asyncio.get_running_loop()
    mon = _MONITORS.get(loop)
    if mon is None:
        mon = _MONITORS[loop] = _LagMonitor()
    with contextlib.suppress(RuntimeError):
        mon.add(w, loop)
    return w


def explain_slip(wall_s: float, deadline_wall_s: float, max_lag_s: float, cpu_wait_s: float | None,
                 slack_s: float = SLIP_SLACK_S) -> dict | None:
    """None when the run ended within ``slack_s`` of its deadline (wall seconds); else what explains the slip.

    Starvation explains it when the loop's thread waited for a CPU at least
    as long as the slip beyond the slack (``cpu_wait_s``; unknown: not
    explained). A pure function, so its rule is tested without a loaded machine.
    """
    slip = wall_s - deadline_wall_s
    if not (slip > slack_s):
        return None
    beyond = slip - slack_s
    starved = cpu_wait_s is not None and cpu_wait_s >= beyond
    if starved:
        why = (f"starvation: the event loop's thread waited {cpu_wait_s:.3g} s for a CPU during the run, more than "
               f"the {beyond:.3g} s past the deadline's slack (largest loop lag {max_lag_s:.3g} s)")
    elif cpu_wait_s is None:
        why = f"unknown: no CPU wait where the kernel does not report it (largest loop lag {max_lag_s:.3g} s)"
    else:
        why = (f"not starvation: the event loop's thread waited only {cpu_wait_s:.3g} s for a CPU, and its largest "
               f"lag was {max_lag_s:.3g} s: work on the loop held it")
    return {"slip_s": round(slip, 6), "starvation_explains": starved, "why": why}


__all__ = ["LAG_INTERVAL_S", "SLIP_SLACK_S", "Watch", "explain_slip", "process_cpu_wait", "schedstat", "watch"]

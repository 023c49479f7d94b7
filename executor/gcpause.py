"""The process's heap kept out of the garbage collector's full passes while live runs are on the clock.

A full (generation 2) collection traverses every container object the
process holds, in one synchronous pass, in whichever thread triggered it,
holding the interpreter lock: the event loop stops for the whole pass. In a
process that holds much (a test session after 1,500 tests, a notebook with
numba's compiled kernels and pandas frames loaded, a service) a pass takes
0.3-0.6 s on this project's 2-core machine, and one such pass during a run
held its loop 0.61 s and let it end 0.64 s past its deadline (measured: the
suite's own hostile-mix test, CI, with 0.002 s of CPU wait; ``gc.callbacks``
then logged passes of 280-450 ms during the executor's tests).

So while any run is on the clock, the objects that existed before the
first such run are frozen (:func:`gc.freeze`: moved to the permanent
generation, which collections skip; a constant-time list splice). The
collector still runs, on what the runs themselves create, so a run's own
garbage cycles are collected as before. When the last run on the clock
ends, the heap is unfrozen (:func:`gc.unfreeze`), and garbage cycles left
from before the runs are collected by the next full pass, outside any run.

If the process had frozen objects of its own before the first run (a server
that freezes before forking), they stay frozen: the executor then leaves the
permanent generation as it is at the end, rather than unfreeze what it did
not freeze.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_on_the_clock = 0  # runs inside heap_frozen(), over every thread and loop of the process
_unfreeze_at_end = False


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """The heap that existed before the first open run out of every collection until the last one ends."""
    global _on_the_clock, _unfreeze_at_end
    with _lock:
        if _on_the_clock == 0:
            _unfreeze_at_end = gc.get_freeze_count() == 0
            gc.freeze()
        _on_the_clock += 1
    try:
        yield
    finally:
        with _lock:
            _on_the_clock -= 1
            if _on_the_clock == 0 and _unfreeze_at_end:
                gc.unfreeze()


def runs_on_the_clock() -> int:
    """How many runs are inside :func:`heap_frozen` now (0: the heap is as the process left it)."""
    return _on_the_clock


__all__ = ["heap_frozen", "runs_on_the_clock"]

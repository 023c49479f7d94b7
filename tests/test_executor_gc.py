"""A full garbage-collection pass at the worst moment does not hold a run past its deadline (executor.gcpause).

Found by CI: after 1,500 tests the process held about a million container
objects, one full collection pass during a hostile-mix run held its event
loop 0.61 s with 0.002 s of CPU wait, and the run ended 0.64 s past its
deadline. The adversary here does on purpose what the collector did by
chance: it gives the process a heap of millions of container objects (what a
long session or a notebook holds), then forces a full pass on the run's own
loop 30 ms before the run's deadline and once mid-run. With the heap frozen
while the run is on the clock the passes are short and the run ends on
time; without it (the guard replaced by a no-op) the same passes hold the
run's loop (its ``end`` event's largest lag) and, where the machine makes a
pass longer than the slack, the run slips and the event says the loop was
held, not starved.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time

import pytest

from executor import gcpause, live
from executor.live import Options
from tests.executor_helpers import SLACK_S, kept_deadline, nominal, one_run, workflow


class _Slot:
    __slots__ = ()  # the smallest object the collector tracks: most objects per byte of heap


def _heap_whose_pass_takes(seconds: float, cap: int = 12_000_000) -> tuple[list, float]:
    """Container objects added 2 million at a time until one full pass takes ``seconds`` (or ``cap`` objects)."""
    heap: list = []
    took = 0.0
    while len(heap) < cap:
        heap.extend(_Slot() for _ in range(2_000_000))
        t = time.perf_counter()
        gc.collect()
        took = time.perf_counter() - t
        if took >= seconds:
            break
    return heap, took


async def _run_under_passes(wf, pool, B, D, scale, starts, passes):
    """One run, and beside it on the same loop: a full pass mid-run and one 30 ms before the deadline is due."""
    deadline_wall = 0.3 * D * scale
    starts.clear()

    async def adversary():
        while not starts:
            await asyncio.sleep(0.002)
        t0 = starts[-1]
        for at in (0.5 * deadline_wall, deadline_wall - 0.03):
            await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
            t = time.perf_counter()
            gc.collect()
            passes.append(time.perf_counter() - t)

    adv = asyncio.ensure_future(adversary())
    try:
        res, _, tr = await one_run(wf, pool, "sequential", 2 * B, 0.3 * D, scale=scale,
                                   options=Options(warm_up=True, backoff_base_s=0.01))
    finally:
        await adv
    return res, tr.events[-1], deadline_wall


@pytest.mark.slow
def test_a_full_pass_at_the_worst_moment_does_not_hold_the_run_past_its_deadline(monkeypatch):
    pool, wf = workflow()
    B, D = nominal(wf)
    scale = 0.02
    real = gcpause.heap_frozen
    starts: list[float] = []

    def marked(freeze: bool):
        @contextlib.contextmanager
        def guard():
            with real() if freeze else contextlib.nullcontext():
                starts.append(time.perf_counter())  # the run is on the clock from here
                yield
        return guard

    heap, full_pass = _heap_whose_pass_takes(SLACK_S + 0.2)
    try:
        # the guard as built: the passes skip the heap, the run keeps its deadline
        monkeypatch.setattr(live, "heap_frozen", marked(True))
        passes: list[float] = []
        res, end, deadline_wall = asyncio.run(_run_under_passes(wf, pool, B, D, scale, starts, passes))
        assert res.termination == "deadline_exhausted" and len(passes) == 2
        assert gc.get_freeze_count() == 0 and gcpause.runs_on_the_clock() == 0  # unfrozen once the run ended
        assert max(passes) * 20 < full_pass, (passes, full_pass)  # the heap was out of the passes
        assert kept_deadline(res.wall_s, end, deadline_wall), (res.wall_s, deadline_wall, end)

        # the adversary has teeth: without the guard the same passes traverse the heap, inside the run
        monkeypatch.setattr(live, "heap_frozen", marked(False))
        passes = []
        res, end, deadline_wall = asyncio.run(_run_under_passes(wf, pool, B, D, scale, starts, passes))
        assert min(passes) >= 0.5 * full_pass, (passes, full_pass)  # they traversed the heap, during the run
        assert end["loop_lag_max_s"] >= 0.5 * full_pass, (end, full_pass)  # and held its loop
        if min(passes) > SLACK_S + 0.1:  # a pass longer than the slack, started 30 ms before the deadline
            assert res.wall_s > deadline_wall + SLACK_S, (res.wall_s, deadline_wall, passes)
            assert end["slip"]["starvation_explains"] is False, end
    finally:
        del heap
        gc.collect()

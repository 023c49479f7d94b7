"""The live executor's shell stays small (an AST check, beside the signature test), and its one way in.

``LiveRun`` is the shell of a live run (the run loop, the clock, the trace;
its HTTP side, decisions and launches in executor/sampling.py, deciding.py and launching.py) over the rules of
:mod:`simulator.engine.live_core`; the ``request`` of its HTTP side (:class:`executor.sampling.SampleRequests`, one sample's tries) reads
as a loop of named steps, the retry decision being
:func:`executor.retry.next_step`. :func:`executor.live.open_run` is an async
context manager: leaving its block by any path cancels what the run still
has in flight, and the ledger holds nothing after it.
"""

from __future__ import annotations

import ast
import asyncio

import numpy as np
from executor_helpers import nominal, workflow
from test_layers import ROOT

MAX_LIVERUN_LINES = 350
MAX_REQUEST_LINES = 60


def _sizes(module: str, name: str) -> tuple[int, dict[str, int]]:
    tree = ast.parse((ROOT / "executor" / module).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return cls.end_lineno - cls.lineno + 1, {f.name: f.end_lineno - f.lineno + 1 for f in cls.body
                                             if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_request_is_a_short_loop_of_named_steps():
    _, methods = _sizes("sampling.py", "SampleRequests")
    assert methods["request"] < MAX_REQUEST_LINES, methods["request"]


def test_liverun_is_a_small_shell():
    lines, _ = _sizes("live.py", "LiveRun")
    assert lines < MAX_LIVERUN_LINES, lines


def test_leaving_open_run_early_cancels_what_is_in_flight():
    """A caller that gives up mid-run (here: leaves the block while samples are on the wire) leaves nothing
    running and nothing reserved: the old ``open_run`` returned a bare run, and its samples ran on."""
    from executor.agree import http_client
    from executor.clock import Clock
    from executor.live import RunSpec, open_run
    from executor.trace import Trace
    from executor.world import World

    pool, wf = workflow()
    B, D = nominal(wf)

    async def go():
        world = World(pool, seed=1, clock=Clock(0.05), tasks={wf.dag_row: wf.tasks})
        await world.start()
        tr = Trace(None)
        spec = RunSpec(budget=2 * B, deadline=50 * D)
        try:
            async with http_client() as http, open_run(wf, {e.model_id: e for e in world.endpoints()}, "sequential",
                                                       spec, http=http, clock=world.clock, trace=tr) as run:
                task = asyncio.ensure_future(run.run())
                while world.stats.in_flight == 0:
                    await asyncio.sleep(0.005)
            samples = [s for b in run.batches.values() for s in b.samples]  # the block was left mid-run
            assert samples and all(s.task.done() for s in samples)
            assert run.ledger.reserved == 0.0
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return tr.events
        finally:
            await world.stop()

    events = asyncio.run(go())
    assert any(e["event"] == "request" and e["status"] == "cancelled" for e in events), [(e["event"], e.get("status")) for e in events]


def test_a_runs_result_carries_its_report(tmp_path):
    """One result shape: the report ``executor run`` prints is the run's own result, equal to the trace's."""
    from executor_helpers import run_one

    from executor.trace import read_trace, summarize

    pool, wf = workflow()
    B, D = nominal(wf)
    path = tmp_path / "t.jsonl"
    res, _, tr = run_one(wf, pool, "sequential", 2 * B, 2 * D, scale=0.02, trace=str(path))
    events, torn = read_trace(path)
    assert res.summary == summarize(events, torn)
    assert res.summary["termination"] == res.termination


def test_the_drivers_hold_a_live_core_and_state_no_rule():
    """Both live drivers take the rules' state and steps from their ``LiveCore``: neither imports a step of
    :mod:`simulator.engine.live_core` or a rule of :mod:`simulator.engine.live_rules` about admission, nor keeps
    attempt numbers or batch verdicts of its own (before the core, the executor's launches called the step
    functions with its own attempt counter, and its batches counted their judged samples)."""
    from executor.live import LiveRun
    from executor.sampling import Batch, Sample

    steps = {"admit_attempts", "admit_atomic", "atomic_shares", "launch_order", "ready_nodes", "stuck_node",
             "some_launch_fits", "method_uses", "attempt_reservation", "atomic_admission", "atomic_reservation"}
    for path in ("executor/live.py", "executor/launching.py", "executor/deciding.py", "executor/sampling.py",
                 "simulator/engine/live_episode.py"):
        tree = ast.parse((ROOT / path).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("simulator.engine.live_") for a in n.names}
        called = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                  and isinstance(n.value, ast.Name) and n.value.id == "core"}
        assert not (imported | called) & steps, (path, (imported | called) & steps)
    assert not {"attempt_no", "judged", "passed", "done", "t_launch"} & (
        set(Batch.__dataclass_fields__) | set(Sample.__dataclass_fields__))
    src = ast.unparse(next(n for n in ast.parse((ROOT / "executor" / "live.py").read_text()).body
                           if isinstance(n, ast.ClassDef) and n.name == LiveRun.__name__))
    assert "attempt_no" not in src and "self.core = LiveCore(" in src


def test_the_explorer_is_every_model_to_the_runs_core():
    """``explore`` turns a ``sequential`` run (the legacy model only) into one that may use every model: its core,
    which answers the stuck and no-progress tests, must say so too (the rules read the core's mask and legacy
    flag, not copies on the run)."""
    from executor.clock import Clock
    from executor.explore import ExplorePolicy, _as_explorer
    from executor.live import LiveRun
    from executor.trace import Trace

    _, wf = workflow()
    B, D = nominal(wf)
    run = LiveRun(wf, {}, "sequential", B, D, http=None, clock=Clock(1.0), trace=Trace(None))
    pairs = [(v, j) for v in range(wf.arr.n) for j in range(wf.arr.m) if wf.arr.available[v, j]]
    assert not all(run.core.allowed(v, j) for v, j in pairs)  # sequential: the legacy model only
    _as_explorer(run, ExplorePolicy(np.zeros((wf.arr.n, wf.arr.m), dtype=np.int64), seed=0))
    assert all(run.core.allowed(v, j) for v, j in pairs)

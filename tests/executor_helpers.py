"""Shared pieces of the executor tests: the example pool's workflows, a world subprocess, in-process runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from executor.agree import http_client
from executor.clock import Clock
from executor.endpoints import Endpoint
from executor.inputs import load_dag, make_workflow
from executor.live import Options, RunSpec, open_run
from executor.trace import Trace
from executor.world import Faults, World
from simulator.costs.nominal import nominal_budget, nominal_deadline

ROOT = Path(__file__).resolve().parents[1]
POOL = str(ROOT / "examples" / "example_pool.jsonl")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def workflow(dag: int = 0, tasks: str | None = None, cost_mode: str = "token_cost_mean"):
    pool, d = load_dag(POOL, dag)
    return pool, make_workflow(pool, d, POOL, None, "", tasks, cost_mode)


#: how far past its deadline (wall seconds) a run may end
SLACK_S = 0.5


def kept_deadline(wall_s: float, end: dict, deadline_wall_s: float) -> bool:
    """The wall-clock promise: the run ended within :data:`SLACK_S` of its deadline, or its ``end`` event shows
    that starvation (the loop's thread waiting for a CPU) explains the slip (``executor.starvation``)."""
    slip = end.get("slip")
    return wall_s <= deadline_wall_s + SLACK_S or bool(slip and slip["starvation_explains"])


def nominal(wf) -> tuple[float, float]:
    return nominal_budget(wf.arr), nominal_deadline(wf.arr)


async def one_run(wf, pool, method: str, budget: float, deadline: float, *, scale: float = 0.05,
                  trace: str | None = None, faults: Faults | None = None, usage: str = "sampled",
                  options: Options | None = None, endpoints_edit=None, params=None, trial: int = 0,
                  world_seed: int = 1):
    """One live run against an in-process world on a real (non-pausable) clock: (result, world, trace)."""
    clock = Clock(scale)
    world = World(pool, seed=world_seed, clock=clock, faults=faults, usage=usage, tasks={wf.dag_row: wf.tasks})
    await world.start()
    eps: dict[str, Endpoint] = {e.model_id: e for e in world.endpoints()}
    if endpoints_edit is not None:
        eps = endpoints_edit(eps)
    tr = Trace(trace)
    try:
        async with http_client() as http:
            async with open_run(wf, eps, method, RunSpec(budget=budget, deadline=deadline, trial=trial), http=http,
                                clock=clock, trace=tr, params=params, options=options) as run:
                res = await run.run()
    finally:
        tr.close()
        await world.stop()
    return res, world, tr


def run_one(*args, **kwargs):
    return asyncio.run(one_run(*args, **kwargs))


class WorldProcess:
    """``python -m executor world`` in a subprocess, with the endpoints file it writes."""

    def __init__(self, tmp: Path, *extra: str, time_scale: float = 0.05) -> None:
        self.endpoints = tmp / "endpoints.toml"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "executor", "world", "--pool", POOL, "--time-scale", str(time_scale),
             "--write-endpoints", str(self.endpoints), "--max-seconds", "120", *extra],
            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "loopback world on" not in line:
            self.stop()
            raise RuntimeError(f"world did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line.split()[3]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> WorldProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "executor", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def events(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def wait_for_lines(path: Path, n: int, limit_s: float = 30.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.02)
    raise TimeoutError(f"{path} has fewer than {n} lines after {limit_s} s")

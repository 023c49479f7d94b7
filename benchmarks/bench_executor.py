"""The live executor's own cost: overhead per event, per request, and 200 concurrent workflows without stalls.

Run by hand (never in the test suite; about a minute on 2 cores)::

    python -m benchmarks.bench_executor --write-readme     # -> benchmarks/results_executor.json

For each method (``sequential``, MCPP with M = 8), ``--workflows`` (200) live
runs of the example pool's DAG 0 run at once in one process and one asyncio
loop, against an in-process loopback world on 127.0.0.1 (time scale 0.05,
so a run lasts about 3 wall seconds), each writing its own fsynced trace.
Measured:

* **event overhead**: per batch end, the wall time the executor spends on
  it (the batch's end, the state for the planner, the launches, the trace
  and ledger events), without the planner call (which runs on the planner
  thread while the loop serves the other runs);
* **request overhead**: per answered request, its wall time minus the
  world's sleep for the drawn latency: the HTTP round trip through both
  ends, the reservation, the reconciliation and the verdict;
* **loop lag**: a coroutine asks to wake every 10 ms; how late it wakes is
  how long the loop was busy (a stall delays every run's timers).

Requests and lags of the first second (when all runs set up and send their
first requests at once) are reported apart, as the start burst.

Targets (docs/executor.md): event overhead <= 2 ms median; no stall (loop
lag p99 well under the 50 ms = 1 model second of this time scale).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, write_readme_section
from executor.agree import live_episodes
from executor.inputs import load_dag, make_workflow
from executor.trace import read_trace
from simulator.base import cliargs
from simulator.base.io_utils import atomic_write_json
from simulator.costs.nominal import nominal_budget, nominal_deadline

POOL = str(ROOT / "examples" / "example_pool.jsonl")
#: the first wall seconds: 200 runs set up and send their first requests at once (reported apart)
START_S = 1.0
RESULTS = ROOT / "benchmarks" / "results_executor.json"
START, END = "<!-- bench_executor:start -->", "<!-- bench_executor:end -->"


def pct(xs, q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if len(xs) else float("nan")


async def measured(coro, tick_s: float = 0.01):
    """Run ``coro`` while a ticker records how late the loop wakes it (ms)."""
    lags: list[tuple[float, float]] = []  # (wall s since start, lag ms)
    done = False
    t0 = time.perf_counter()

    async def ticker():
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(tick_s)
            lags.append((t - t0, (time.perf_counter() - t - tick_s) * 1e3))

    tk = asyncio.ensure_future(ticker())
    try:
        out = await coro
    finally:
        done = True
        await tk
    return out, lags


def bench_method(method: str, workflows: int, scale: float, params: dict) -> dict:
    pool, dag = load_dag(POOL, 0)
    wf = make_workflow(pool, dag, POOL, None, "", None, "token_cost_mean")
    budget, deadline = 2 * nominal_budget(wf.arr), 1.5 * nominal_deadline(wf.arr)
    with tempfile.TemporaryDirectory(prefix="bench_executor_") as tmp:
        t0 = time.perf_counter()
        (results, world), lags = asyncio.run(measured(live_episodes(
            wf, pool, method, budget, deadline, workflows, scale=scale, seed=0, world_seed=1, params=params,
            concurrency=workflows, trace_dir=tmp, pausable=False)))
        wall = time.perf_counter() - t0
        req_over, req_first = [], []
        for t in range(workflows):
            ev, _ = read_trace(Path(tmp) / f"trial_{t:05d}.jsonl")
            for e in ev:
                if e["event"] == "request" and e["status"] == "ok" and not e.get("faults"):
                    j = wf.stats.model_ids.index(e["model"])
                    v = [int(x) for x in wf.stats.node_ids].index(e["node"])
                    lat = world.draw(0, v, j, t, e["attempt"])[0]
                    ms = (e["end"] - e["start"] - lat) * scale * 1e3
                    (req_first if e["start"] < START_S / scale else req_over).append(ms)
    events = [x for r in results for x in r.overhead_ms]
    steady = [lag for t, lag in lags if t >= START_S]
    burst = [lag for t, lag in lags if t < START_S]
    terms: dict[str, int] = {}
    for r in results:
        terms[r.termination] = terms.get(r.termination, 0) + 1
    return {
        "method": method, "workflows": workflows, "time_scale": scale, "params": params,
        "wall_s": round(wall, 3), "terminations": terms,
        "events": len(events), "event_overhead_ms": {"median": pct(events, 50), "p90": pct(events, 90),
                                                     "p99": pct(events, 99), "max": max(events)},
        "requests": len(req_over), "request_overhead_ms": {"median": pct(req_over, 50), "p90": pct(req_over, 90),
                                                           "p99": pct(req_over, 99)},
        "start_requests": len(req_first), "start_request_overhead_ms": {"median": pct(req_first, 50),
                                                                        "max": max(req_first, default=0.0)},
        "loop_lag_ms": {"median": pct(steady, 50), "p99": pct(steady, 99), "max": max(steady), "ticks": len(steady)},
        "start_burst_lag_ms_max": max(burst, default=0.0),
        "planner_ms_mean_per_run": statistics.fmean(r.planner_ms for r in results),
    }


def readme_section(res: dict) -> str:
    rows = []
    for r in res["methods"]:
        e, q, lag = r["event_overhead_ms"], r["request_overhead_ms"], r["loop_lag_ms"]
        rows.append(f"| `{r['method']}` | {r['workflows']} | {r['events']} | {e['median']:.2f} / {e['p99']:.2f} | "
                    f"{q['median']:.2f} / {q['p99']:.2f} | {lag['median']:.2f} / {lag['p99']:.2f} / {lag['max']:.1f} | "
                    f"{r['start_burst_lag_ms_max']:.0f} | {r['wall_s']:.1f} |")
    return "\n".join([
        START,
        "## Live executor (`bench_executor.py`)",
        "",
        "`python -m benchmarks.bench_executor --write-readme` (results in `results_executor.json`): "
        "200 live runs of the example pool's DAG 0 at once in one asyncio loop against an in-process "
        "loopback world (time scale 0.05, budget 2 x, deadline 1.5 x nominal), each with its own fsynced trace, "
        f"on {res['machine']}. Event overhead: the executor's own wall time per batch end (planner call "
        "excluded); request overhead: a request's wall time minus the world's sleep for its drawn latency "
        "(HTTP both ways, reservation, reconciliation, verdict); loop lag: how late a 10 ms timer fires. "
        f"Both after the first {START_S:g} s, when the 200 runs set up and send their first requests at once "
        "(the start burst, last column: `agree` keeps it out of model time with its start barrier). "
        "Target: event overhead <= 2 ms median.",
        "",
        "| method | workflows | events | event overhead ms (median / p99) | request overhead ms (median / p99) "
        "| loop lag ms (median / p99 / max) | start burst lag ms (max) | wall s |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        END,
    ])


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workflows", type=int, default=200)
    ap.add_argument("--time-scale", type=cliargs.number(0, lo_inclusive=False), default=0.05)
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)
    out = {"machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start", "methods": []}
    for method, params in (("sequential", {}), ("mc_portfolio_rollout", {"M": 8})):
        r = bench_method(method, args.workflows, args.time_scale, params)
        print(json.dumps(r))
        out["methods"].append(r)
    atomic_write_json(str(RESULTS), out)
    if args.write_readme:
        write_readme_section(START, END, readme_section(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

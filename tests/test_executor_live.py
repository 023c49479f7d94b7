"""The executor live: a real HTTP server on 127.0.0.1, real asyncio, real (time-scaled) clocks, injected faults."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace

import pytest

from executor.agree import live_episodes
from executor.client import RETRYABLE
from executor.live import Options
from executor.trace import read_trace
from executor.world import Faults
from tests.executor_helpers import (
    ENV,
    POOL,
    ROOT,
    WorldProcess,
    cli,
    events,
    nominal,
    run_one,
    wait_for_lines,
    workflow,
)


def test_run_succeeds_through_the_command_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    with WorldProcess(tmp_path, time_scale=0.05) as world:
        r = cli("run", "--pool", POOL, "--dag", "0", "--endpoints", str(world.endpoints), "--budget-ratio", "2",
                "--deadline-ratio", "3", "--time-scale", "0.05", "--method", "sequential", "--trace", str(trace),
                "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["termination"] == "completed" and s["success"] and s["on_time"] and s["trace_complete"]
    assert s["nodes_completed"] == [0, 1, 2, 3, 4] and 0 < s["spent"] <= s["budget"]
    ev = events(trace)
    kinds = Counter(e["event"] for e in ev)
    assert ev[0]["event"] == "run" and ev[-1]["event"] == "end" and kinds["plan"] >= 3
    reqs = [e for e in ev if e["event"] == "request"]
    assert all(e["status"] == "ok" and e["usage"] == "usage" for e in reqs)
    assert sum(e["cost"] for e in reqs) == pytest.approx(ev[-1]["spent"])  # token mode: the reported tokens


def test_budget_runs_out_and_spent_stays_within(tmp_path):
    pool, wf = workflow()
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 0.3 * B, 3 * D)
    assert res.termination == "budget_exhausted" and not res.success
    assert 0 < res.spent <= 0.3 * B and res.spent + res.unbilled <= 0.3 * B
    refused = [e for e in tr.events if e["event"] == "request" and e["status"] == "refused"]
    assert refused and refused[-1]["expected_cost"] > refused[-1]["budget_left"]


def test_deadline_cancels_everything_in_time():
    pool, wf = workflow()
    B, D = nominal(wf)
    scale = 0.05
    res, world, tr = run_one(wf, pool, "mc_portfolio_rollout", 3 * B, 0.25 * D, scale=scale, params={"M": 8},
                             options=Options(warm_up=True))  # kernels compiled (or loaded) before the clock starts
    assert res.termination == "deadline_exhausted" and not res.on_time
    assert res.wall_s <= 0.25 * D * scale + 0.5
    end = tr.events[-1]
    assert end["event"] == "end" and end["makespan_s"] == pytest.approx(0.25 * D)
    cancelled = [e for e in tr.events if e["event"] == "request" and e["status"] == "cancelled"]
    assert cancelled and world.stats.in_flight == 0


def test_usage_max_tight_budget_never_overspends():
    pool, wf = workflow()
    B, D = nominal(wf)
    budget = 0.4 * B
    results, world = asyncio.run(live_episodes(wf, pool, "sequential", budget, 3 * D, 200, scale=0.02, seed=0,
                                               world_seed=3, usage="max"))  # the virtual clock: load-proof
    assert len(results) == 200
    assert all(r.spent <= budget and r.spent + r.unbilled <= budget + 1e-9 for r in results)
    assert all(sum(v for (d, t, m), v in world.bills.items() if t == trial) <= budget for trial in range(200))
    assert Counter(r.termination for r in results)["budget_exhausted"] > 150


def test_faults_are_retried_and_counted(tmp_path):
    pool, wf = workflow()
    B, D = nominal(wf)
    faults = Faults(rate_429=0.3, rate_500=0.1, retry_after_s=0.02)
    scale = 0.02
    results, world = asyncio.run(live_episodes(
        wf, pool, "sequential", 2 * B, 3 * D, 40, scale=scale, seed=0, world_seed=5, faults=faults,
        trace_dir=str(tmp_path), pausable=False, options=Options(backoff_base_s=0.01)))
    counted: Counter = Counter()
    excused = 0
    for trial in range(40):
        ev, torn = read_trace(tmp_path / f"trial_{trial:05d}.jsonl")
        end = ev[-1]
        assert not torn and end["event"] == "end", end
        # a Retry-After longer than the time left ends a node's last model: provider_unavailable, which a run
        # slowed near its deadline meets (the message says so); nothing else but these four
        assert end["termination"] in ("completed", "budget_exhausted", "deadline_exhausted") or (
            end["termination"] == "provider_unavailable" and "more than the time left" in end["message"]), end
        # a run that did not complete is excused when its loop's thread waited for a CPU for at least a tenth of
        # the run's wall deadline (a loaded machine: the faults' retries then run out of time, not of logic)
        if end["termination"] != "completed" and (end.get("cpu_wait_s") or 0.0) >= 0.1 * 3 * D * scale:
            excused += 1
        for e in ev:
            if e["event"] != "request":
                continue
            counted.update(e.get("faults") or {})
            faulted = sum(n for kind, n in (e.get("faults") or {}).items() if kind in RETRYABLE)
            # a retryable fault is followed by a try unless the request stopped after it (out of tries, time or
            # money; cancelled in its backoff): retries = tries - 1 = faults, or faults - 1 when the last try faulted
            last_try_faulted = 0 < e["tries"] == faulted and e["status"] not in ("ok", "truncated")
            assert e["retries"] == faulted - last_try_faulted, e
    # a try cancelled at a run's end may have met its fault unseen: the trace counts at most what the world served
    assert 0 < counted["http_429"] <= world.stats.faults["429"]
    assert 0 < counted["http_5xx"] <= world.stats.faults["500"]
    assert Counter(r.termination for r in results)["completed"] + excused >= 30


def test_retry_after_is_honoured():
    pool, wf = workflow()
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 2 * B, 20 * D, scale=0.01,
                             faults=Faults(rate_429=0.5, retry_after_s=0.25), options=Options(backoff_base_s=0.001))
    reqs = [e for e in tr.events if e["event"] == "request" and e["faults"].get("http_429")]
    assert reqs and res.success
    for e in reqs:  # each retry after a 429 waited at least its Retry-After (0.25 wall s = 25 model s at scale 0.01)
        retried_429 = e["faults"]["http_429"] - (e["status"] != "ok")
        assert e["end"] - e["start"] >= 25.0 * retried_429


def test_endpoint_that_stays_down_ends_the_run(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    pool, wf = workflow()
    B, D = nominal(wf)

    def down(eps):
        eps["30B_ins"] = replace(eps["30B_ins"], base_url=f"http://127.0.0.1:{port}/v1")
        return eps

    res, world, tr = run_one(wf, pool, "sequential", 2 * B, 50 * D, endpoints_edit=down,
                             options=Options(backoff_base_s=0.01))
    assert res.termination == "provider_unavailable" and "'30B_ins'" in res.message and str(port) in res.message
    assert "\n" not in res.message and tr.events[-1]["termination"] == "provider_unavailable"


def test_cancel_siblings_and_posterior_update():
    pool, wf = workflow()
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential_4", 4 * B, 4 * D, options=Options(cancel_siblings=True))
    assert res.success
    assert any(e["event"] == "request" and e["status"] == "cancelled" for e in tr.events)
    res, world, tr = run_one(wf, pool, "mc_portfolio_rollout", 2 * B, 2 * D, params={"M": 8},
                             options=Options(update="posterior"))
    assert res.termination in ("completed", "budget_exhausted", "deadline_exhausted")
    assert sum(e["event"] == "plan" for e in tr.events) >= 2


def test_sigkill_leaves_a_readable_trace(tmp_path):
    trace = tmp_path / "t.jsonl"
    with WorldProcess(tmp_path, time_scale=0.2) as world:
        proc = subprocess.Popen(
            [sys.executable, "-m", "executor", "run", "--pool", POOL, "--dag", "0", "--endpoints",
             str(world.endpoints), "--budget-ratio", "2", "--deadline-ratio", "3", "--time-scale", "0.2",
             "--method", "sequential", "--trace", str(trace)], cwd=ROOT, env=ENV,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_lines(trace, 6)
            time.sleep(0.3)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    r = cli("summary", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert not s["trace_complete"] and s["termination"].startswith("cut_off") and s["plans"] >= 1 and s["events"] >= 6


def test_codeflow_tasks_judged_by_the_unit_tests(tmp_path):
    """DAG 7 is a CodeFlowBench topology: the world answers the reference code or a broken one, the sandbox judges."""
    line = json.loads((ROOT / "examples" / "example_pool.jsonl").read_text().splitlines()[7])
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps({"nodes": {str(n["node_id"]): {
        "kind": "codeflow", "problem": line["synthetic_info"]["source_problem_id"], "subproblem": n["name"]}
        for n in line["nodes"]}}))
    pool, wf = workflow(7, str(tasks))
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 4 * B, 20 * D, scale=0.02)
    verdicts = [e for e in tr.events if e["event"] == "verdict"]
    assert res.success and verdicts
    assert all(e["reason"] == "tests passed" for e in verdicts if e["passed"])
    assert all(e["reason"] != "tests passed" for e in verdicts if not e["passed"])


@pytest.mark.skipif(shutil.which("lake") is None, reason="no Lean toolchain: `lake` is not on PATH")
def test_proofflow_task_live(tmp_path):
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps({"default": {"kind": "proofflow", "template": "prove", "values": {}}}))
    pool, wf = workflow(0, str(tasks))
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", B, D, scale=0.02)
    assert tr.events[-1]["event"] == "end"  # the loopback world cannot prove: every sample is judged by Lean


def test_demo_runs():
    r = cli("demo", "--time-scale", "0.02", timeout=180)
    assert r.returncode == 0, r.stderr
    assert "MCPP" in r.stdout and "sequential" in r.stdout and "termination" in r.stdout


def test_timeouts_and_resets_are_retried_and_timeouts_stay_unbilled():
    pool, wf = workflow()
    B, D = nominal(wf)

    # the world's endpoints time out at twice the longest latency (x scale) + 1 s: only injected hangs time out
    res, world, tr = run_one(wf, pool, "sequential", 3 * B, 20 * D, scale=0.01,
                             faults=Faults(rate_timeout=0.15, rate_reset=0.15), options=Options(backoff_base_s=0.01))
    counted: Counter = Counter()
    for e in tr.events:
        if e["event"] == "request":
            counted.update(e.get("faults") or {})
    assert counted["timeout"] == world.stats.faults["timeout"] > 0
    # the world resets after reading the request: it reached the server, so it may be billed (never re-sent on it)
    assert counted["reset"] == world.stats.faults["reset"] > 0 and counted["connect"] == 0
    assert tr.events[-1]["event"] == "end" and res.unbilled > 0  # a timed-out request may still be billed
    assert res.spent + res.unbilled <= 3 * B


def test_uniform_and_anytime_mcpp_live():
    pool, wf = workflow()
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "uniform", 2 * B, 3 * D)
    plans = [e for e in tr.events if e["event"] == "plan"]
    assert res.termination in ("completed", "budget_exhausted", "stalled") and plans
    assert all(k >= 1 for p in plans for _, k in p["action"].values())
    res, world, tr = run_one(wf, pool, "mc_portfolio_rollout", 2 * B, 2 * D, params={"time_limit_ms": 30, "M": 8})
    plans = [e for e in tr.events if e["event"] == "plan"]
    assert res.termination in ("completed", "deadline_exhausted", "budget_exhausted")
    assert plans and all(p["estimate"] is not None for p in plans)


def test_money_mode_charges_the_simulators_dollars():
    pool, wf = workflow(0, cost_mode="output_money_cost_mean")
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 2 * B, 3 * D)
    from simulator.costs.charges import DEFAULT_PRICES

    reqs = [e for e in tr.events if e["event"] == "request" and e["status"] == "ok"]
    assert reqs and res.spent <= 2 * B
    for e in reqs:  # the world's endpoints: free input, the pool's output price (the simulator's money charge)
        assert e["cost"] == pytest.approx(e["output_tokens"] * DEFAULT_PRICES[e["model"]] / 1e6)
    assert res.spent == pytest.approx(sum(e["cost"] for e in reqs))

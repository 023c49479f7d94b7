"""The hard deadline against what can block (regexes, verifier commands, the planner), signals, inputs.

Each test is a failure seen against the executor before its deadline was
made hard: a backtracking regex on the event loop, a hanging verifier that
kept the process alive, a slow planner call that was awaited past the
deadline, background children of a verifier left running, SIGTERM with no
``end`` event, bad ``timeout_s`` values that crashed the load.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from executor.live import Options
from executor.tasks import build_tasks
from simulator.base.errors import ConfigError
from tests.executor_helpers import (
    ENV,
    POOL,
    ROOT,
    SLACK_S,
    WorldProcess,
    cli,
    events,
    kept_deadline,
    nominal,
    run_one,
    wait_for_lines,
    workflow,
)


def _tasks(tmp_path, verify: dict, loopback_pass: str = "LOOPBACK-PASS", loopback_fail: str = "x") -> str:
    p = tmp_path / "tasks.json"
    p.write_text(json.dumps({"default": {"kind": "generic", "prompt": "step {node_id}", "verify": verify,
                                         "loopback_pass": loopback_pass, "loopback_fail": loopback_fail}}))
    return str(p)


def _left(marker: str) -> list[str]:
    """Processes still running whose command line holds ``marker``."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in out if marker in line and "ps -eo" not in line]


def _gone(marker: str, limit_s: float = 5.0) -> bool:
    """No process holds ``marker`` any more (its reaper ends it at once; a loaded machine may take a moment)."""
    t0 = time.monotonic()
    while _left(marker) and time.monotonic() - t0 < limit_s:
        time.sleep(0.05)
    return _left(marker) == []


def test_a_backtracking_regex_cannot_hold_the_deadline(tmp_path):
    # ``^(a|a)*$`` against 40 a's and a '!' backtracks for hours; every answer of the world is that text
    tasks = _tasks(tmp_path, {"regex": "^(a|a)*$", "timeout_s": 30}, loopback_pass="a" * 40 + "!",
                   loopback_fail="a" * 40 + "!")
    pool, wf = workflow(0, tasks)
    B, D = nominal(wf)
    scale = 0.05
    deadline_wall = 0.5 * D * scale
    t0 = time.perf_counter()
    res, world, tr = run_one(wf, pool, "sequential", 3 * B, 0.5 * D, scale=scale)
    assert time.perf_counter() - t0 <= deadline_wall + SLACK_S + 0.5  # the world's start and stop included
    assert res.wall_s <= deadline_wall + SLACK_S and res.termination == "deadline_exhausted"
    assert tr.events[-1]["event"] == "end"


def test_a_regex_verdict_that_times_out_is_a_failed_verdict(tmp_path):
    tasks = _tasks(tmp_path, {"regex": "^(a|a)*$", "timeout_s": 0.2}, loopback_pass="a" * 40 + "!",
                   loopback_fail="a" * 40 + "!")
    pool, wf = workflow(0, tasks)
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 3 * B, 20 * D, scale=0.01)
    verdicts = [e for e in tr.events if e["event"] == "verdict"]
    assert verdicts and all(not e["passed"] and e["reason"].startswith("verifier_error: regex timed out")
                            for e in verdicts)


def test_a_hanging_verifier_is_killed_at_the_deadline_with_its_children(tmp_path):
    marker = "97.123"
    tasks = _tasks(tmp_path, {"command": ["/bin/sh", "-c", f"(sleep {marker} &); sleep {marker}"], "timeout_s": 60})
    pool, wf = workflow(0, tasks)
    B, D = nominal(wf)
    scale = 0.05
    res, world, tr = run_one(wf, pool, "sequential", 3 * B, 0.6 * D, scale=scale)
    assert res.termination == "deadline_exhausted" and kept_deadline(res.wall_s, tr.events[-1], 0.6 * D * scale)
    assert _gone(f"sleep {marker}")


def test_background_children_of_a_verifier_do_not_survive_it(tmp_path):
    marker = "96.321"
    tasks = _tasks(tmp_path, {"command": ["/bin/sh", "-c", f"(sleep {marker} &); exit 0"], "timeout_s": 5})
    pool, wf = workflow(0, tasks)
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 3 * B, 20 * D, scale=0.01)
    assert res.success  # the command exits 0: every verdict passes
    assert _gone(f"sleep {marker}")


def test_a_verifier_runs_under_a_process_limit(tmp_path):
    # passes only when the command sees a process limit of at most 64 (RLIMIT_NPROC; as root it runs as nobody)
    tasks = _tasks(tmp_path, {"command": ["/bin/sh", "-c", "awk '/Max processes/ {exit !($3 <= 64)}' /proc/self/limits"],
                                  "timeout_s": 5})
    pool, wf = workflow(0, tasks)
    B, D = nominal(wf)
    res, world, tr = run_one(wf, pool, "sequential", 3 * B, 20 * D, scale=0.01)
    assert res.success, [e for e in tr.events if e["event"] == "verdict"][:2]


def test_a_slow_planner_call_is_dropped_at_the_deadline():
    pool, wf = workflow()
    B, D = nominal(wf)
    scale = 0.05
    deadline = 20.0  # model seconds: 1 wall second
    from executor import live

    original = live.LiveRun.decide

    async def slow_decide(self):  # a 3 s decision on the planner thread
        fn = self.policy.decide

        def slow(view):
            time.sleep(3.0)
            return fn(view)

        self.policy.decide = slow
        return await original(self)

    live.LiveRun.decide = slow_decide
    try:
        res, world, tr = run_one(wf, pool, "mc_portfolio_rollout", 3 * B, deadline, scale=scale, params={"M": 8})
    finally:
        live.LiveRun.decide = original
    assert res.termination == "deadline_exhausted" and res.wall_s <= deadline * scale + SLACK_S
    assert tr.events[-1]["event"] == "end" and tr.events[-1]["message"]


@pytest.mark.parametrize("value", ["abc", None, float("inf"), -1, 0, True, 1e9])
def test_bad_verifier_timeouts_are_refused_at_load(value):
    with pytest.raises(ConfigError, match="timeout_s") as exc:
        build_tasks({"default": {"kind": "generic", "prompt": "p", "verify": {"command": ["/bin/true"],
                                                                             "timeout_s": value}}}, [0], {}, "t.json")
    assert "\n" not in str(exc.value) and "t.json: node 0" in str(exc.value)


@pytest.mark.parametrize("doc, words", [
    ({"default": {"kind": "generic", "prompt": "p", "verify": {"command": ["no-such-command-xyz"]}}}, "not found"),
    ({"default": {"kind": "generic", "prompt": "p", "verify": {"regex": "("}}}, "does not compile"),
    ({"nodes": {"01": {"kind": "generic", "prompt": "p", "verify": {"regex": "x"}}},
      "default": {"kind": "generic", "prompt": "p", "verify": {"regex": "x"}}}, "'01' is not a node id"),
    ({}, "'nodes' and/or 'default'"),
    ([], "'nodes' and/or 'default'"),
])
def test_bad_tasks_are_refused_at_load(doc, words):
    with pytest.raises(ConfigError) as exc:
        build_tasks(doc, [0, 1], {}, "t.json")
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_tasks_file_null_and_not_utf8_are_one_line(tmp_path):
    for name, raw in (("null.json", b"null"), ("latin.json", b'{"default": "\xe9"}')):
        p = tmp_path / name
        p.write_bytes(raw)
        r = cli("run", "--pool", POOL, "--endpoints", str(tmp_path / "none.toml"), "--tasks", str(p), "--budget", "1",
                "--deadline", "1", "--trace", str(tmp_path / f"{name}.jsonl"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error:"), r.stderr


def test_unset_api_key_env_and_trace_paths_are_refused_before_any_request(tmp_path):
    with WorldProcess(tmp_path) as world:
        text = world.endpoints.read_text().replace('api_key_env = ""', 'api_key_env = "MCPP_TEST_NO_SUCH_KEY"')
        eps = tmp_path / "keyed.toml"
        eps.write_text(text)
        base = ["run", "--pool", POOL, "--budget-ratio", "1", "--deadline-ratio", "1"]
        r = cli(*base, "--endpoints", str(eps), "--trace", str(tmp_path / "a.jsonl"))
        assert r.returncode == 2 and "MCPP_TEST_NO_SUCH_KEY" in r.stderr and r.stderr.count("\n") == 1
        pool_copy = tmp_path / "pool.jsonl"
        pool_copy.write_bytes(open(POOL, "rb").read())
        before = pool_copy.read_bytes()
        r = cli("run", "--pool", str(pool_copy), "--budget-ratio", "1", "--deadline-ratio", "1", "--endpoints",
                str(world.endpoints), "--trace", str(pool_copy))
        assert r.returncode == 2 and "input" in r.stderr and pool_copy.read_bytes() == before
        existing = tmp_path / "old.jsonl"
        existing.write_text("keep me\n")
        r = cli(*base, "--endpoints", str(world.endpoints), "--trace", str(existing))
        assert r.returncode == 2 and "exists" in r.stderr and existing.read_text() == "keep me\n"
        r = cli(*base, "--endpoints", str(world.endpoints), "--trace", str(tmp_path))
        assert r.returncode == 2 and "directory" in r.stderr
        assert world.proc.poll() is None
    assert "world stopped" not in r.stdout


def test_world_on_a_busy_port_is_one_line(tmp_path):
    with WorldProcess(tmp_path) as world:
        port = world.url.rsplit(":", 1)[1].split("/")[0]
        r = cli("world", "--pool", POOL, "--port", port, "--max-seconds", "5")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"--port {port}" in r.stderr, r.stderr


def test_sigterm_writes_the_end_event_and_summary_prints_what_may_be_billed(tmp_path):
    trace = tmp_path / "t.jsonl"
    with WorldProcess(tmp_path, time_scale=0.5) as world:
        proc = subprocess.Popen(
            [sys.executable, "-m", "executor", "run", "--pool", POOL, "--dag", "0", "--endpoints",
             str(world.endpoints), "--budget-ratio", "2", "--deadline-ratio", "3", "--time-scale", "0.5",
             "--method", "sequential", "--trace", str(trace)], cwd=ROOT, env=ENV,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_lines(trace, 4)
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 143, err
    ev = events(trace)
    end = ev[-1]
    assert end["event"] == "end" and end["termination"] == "interrupted" and "SIGTERM" in end["message"]
    assert end["reserved"] == 0.0 and end["spent"] + end["unbilled"] <= end["budget"]
    assert "interrupted" in err
    # a trace cut before its end: the text summary names what may have been billed (spent + unbilled + reserved)
    cut = tmp_path / "cut.jsonl"
    ledgers = [i for i, e in enumerate(ev) if e["event"] == "ledger" and e["reserved"] > 0]
    cut.write_text("".join(json.dumps(e) + "\n" for e in ev[:ledgers[0] + 1]))
    r = cli("summary", str(cut))
    assert r.returncode == 0 and "may_have_been_billed" in r.stdout and "reserved_at_cut" in r.stdout
    last = ev[ledgers[0]]
    line = next(x for x in r.stdout.splitlines() if x.startswith("may_have_been_billed"))
    assert float(line.split()[1]) == pytest.approx(last["spent"] + last["unbilled"] + last["reserved"])


def test_demo_states_one_episode_per_method_and_units(tmp_path):
    r = cli("demo", "--time-scale", "0.02", "--trace-dir", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    assert "one live episode per method" in r.stdout and "spent (tokens)" in r.stdout
    assert "makespan (model s)" in r.stdout


def test_options_default_ceiling_is_stated():
    assert Options().max_requests_per_pair == 64


def test_the_process_is_gone_within_the_slack_while_a_verifier_hangs(tmp_path):
    """``executor run`` with a verifier that sleeps: from the run's start to the process's exit <= deadline + 0.5 s."""
    marker = "95.456"
    tasks = _tasks(tmp_path, {"command": ["/bin/sh", "-c", f"sleep {marker}"], "timeout_s": 60})
    trace = tmp_path / "t.jsonl"
    deadline_s = 1.0
    with WorldProcess(tmp_path, time_scale=0.05) as world:
        proc = subprocess.Popen(
            [sys.executable, "-m", "executor", "run", "--pool", POOL, "--endpoints", str(world.endpoints),
             "--tasks", tasks, "--budget-ratio", "2", "--deadline", str(deadline_s), "--time-scale", "0.05",
             "--method", "sequential", "--trace", str(trace)], cwd=ROOT, env=ENV,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        while not (trace.exists() and trace.stat().st_size) and time.monotonic() - t0 < 60:
            time.sleep(0.002)  # the run event: the deadline's clock has started
        t_run = time.perf_counter()
        out, err = proc.communicate(timeout=60)
        took = time.perf_counter() - t_run
    assert proc.returncode == 0 and "deadline_exhausted" in err, err
    assert took <= deadline_s + SLACK_S, took
    assert _left(f"sleep {marker}") == []


@pytest.mark.slow
def test_200_runs_sharing_the_planner_thread_keep_their_deadline_under_cpu_load():
    import asyncio

    from executor.agree import http_client
    from executor.clock import Clock
    from executor.live import RunSpec, open_run
    from executor.trace import Trace
    from executor.world import World

    pool, wf = workflow()
    B, D = nominal(wf)
    scale, deadline = 0.05, 0.6 * D  # about 1.5 wall s: most runs end at the deadline, many with plans pending
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]

    async def go():
        clock = Clock(scale)
        world = World(pool, seed=3, clock=clock, tasks={0: wf.tasks})
        await world.start()
        eps = {e.model_id: e for e in world.endpoints()}

        async def one(trial):
            tr = Trace(None)
            async with http_client() as http:
                async with open_run(wf, eps, "mc_portfolio_rollout", RunSpec(budget=2 * B, deadline=deadline,
                                                                             trial=trial),
                                    http=http, clock=clock, trace=tr, params={"M": 8},
                                    options=Options(warm_up=trial == 0)) as run:
                    res = await run.run()
            return res, tr.events[-1]

        first = await one(0)  # compiles (or loads) the kernels before the crowd starts
        try:
            return [first, *await asyncio.gather(*(one(t) for t in range(1, 200)))]
        finally:
            await world.stop()

    try:
        results = asyncio.run(go())
    finally:
        for b in burners:
            b.kill()
            b.wait()
    # late only where the run's own measures show it was starved of CPU for longer than its slip (a machine
    # loaded beyond these two burners: executor.starvation)
    late = [(r.wall_s - deadline * scale, end.get("slip")) for r, end in results
            if not kept_deadline(r.wall_s, end, deadline * scale)]
    assert not late, (len(late), late[:3])
    assert sum(r.termination == "deadline_exhausted" for r, _ in results) > 0


@pytest.mark.slow
def test_the_deadlines_clock_starts_after_every_kernel_is_compiled(tmp_path):
    """A cold numba cache (a fresh clone): compiling is done before the run event, not charged to the run."""
    trace = tmp_path / "t.jsonl"
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / "numba_cache")}
    with WorldProcess(tmp_path, time_scale=1.0) as world:
        r = subprocess.run(
            [sys.executable, "-m", "executor", "run", "--pool", POOL, "--endpoints", str(world.endpoints),
             "--budget-ratio", "2", "--deadline-ratio", "3", "--method", "sequential", "--trace", str(trace)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    ev = events(trace)
    first_plan = next(e for e in ev if e["event"] == "plan")
    assert first_plan["t"] < 0.15, first_plan  # no compilation between the run's start and its first decision
    assert first_plan["planner_ms"] < 150, first_plan


@pytest.mark.parametrize("doc, words", [
    ({"dataset": 5, "default": {"kind": "codeflow", "problem": "p", "subproblem": "s"}}, "'dataset' must be the path"),
    ({"default": {"kind": "proofflow", "template": "no_such_template", "values": {}}},
     "node 0: proofflow template 'no_such_template'"),
])
def test_task_payloads_are_checked_at_load(doc, words):
    with pytest.raises(ConfigError) as exc:
        build_tasks(doc, [0, 1], {}, "t.json")
    assert words in str(exc.value) and "t.json" in str(exc.value) and "\n" not in str(exc.value)


def test_an_endpoint_for_a_model_the_pool_lacks_and_an_output_naming_an_input_are_refused(tmp_path):
    with WorldProcess(tmp_path) as world:
        text = world.endpoints.read_text() + world.endpoints.read_text().split("\n\n")[0].replace(
            '[models."4B_ins"]', '[models."4B_insx"]') + "\n"
        eps = tmp_path / "typo.toml"
        eps.write_text(text)
        r = cli("run", "--pool", POOL, "--budget-ratio", "1", "--deadline-ratio", "1", "--endpoints", str(eps),
                "--trace", str(tmp_path / "t.jsonl"))
        assert r.returncode == 2 and "'4B_insx'" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = cli("world", "--pool", POOL, "--write-endpoints", POOL, "--max-seconds", "1")
    assert r.returncode == 2 and "input" in r.stderr and r.stderr.count("\n") == 1

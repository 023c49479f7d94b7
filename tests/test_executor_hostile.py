"""The executor's promises against a hostile server of our own (executor.hostile), class by class and at random.

Promises, checked after every run: the server's own bill for what it was
asked (choices beyond ``n = 1`` are the server's doing, charged as reported
when their answer is read: ``over_reservation``) <= budget, and <= spent +
unbilled (the ledger never understates what may have been billed); spent +
unbilled - over_reservation <= budget;
the run's wall time <= deadline + 0.5 s (or, on a machine too loaded to run
it, the run's end event shows starvation explains the slip); every request the server saw has a
``request`` line; every run has an ``end`` event with a message unless it
completed. Each targeted test is a failure seen against the executor before
(a cut body re-sent 8 times and billed 4x the budget, a false gzip that hung
a batch, a lone surrogate that crashed the run, a huge Retry-After or a
deterministic 400 that drew a thousand requests, ...).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace

import pytest

from executor.agree import http_client
from executor.clock import Clock
from executor.hostile import TRUST_FAULTS, HostileWorld
from executor.live import Options, RunSpec, open_run
from executor.trace import Trace
from tests.executor_helpers import ENV, POOL, ROOT, cli, kept_deadline, nominal, workflow


async def _runs(wf, pool, method, budget, deadline, trials, *, scale=0.01, classes=("ok",), schedule=None,
                params=None, options=None, seed=7, endpoints_edit=None, concurrency=25, **hostile):
    """``trials`` live runs against one hostile world: [(result, trace events, wall s)], the world. Runs warm up
    by default (every kernel compiled before the deadline's clock starts, as ``executor run`` does): on a cold
    numba cache the first planner call compiled on the clock and the run ended before its first request."""
    clock = Clock(scale)
    world = HostileWorld(pool, seed=seed, clock=clock, classes=classes, schedule=schedule,
                         tasks={wf.dag_row: wf.tasks}, **hostile)
    await world.start()
    eps = {e.model_id: e for e in world.endpoints()}
    if endpoints_edit is not None:
        eps = endpoints_edit(eps)
    gate = asyncio.Semaphore(concurrency)

    async def one(trial):
        async with gate:
            tr = Trace(None)
            t0 = time.perf_counter()
            async with http_client() as http:
                async with open_run(wf, eps, method, RunSpec(budget=budget, deadline=deadline, trial=trial),
                                    http=http, clock=clock, trace=tr, params=params,
                                    options=options or Options(warm_up=True, backoff_base_s=0.01)) as run:
                    res = await run.run()
            return res, tr.events, time.perf_counter() - t0

    try:
        out = await asyncio.gather(*(one(t) for t in trials))
    finally:
        await world.stop()
    return out, world


def hostile_runs(*args, **kwargs):
    return asyncio.run(_runs(*args, **kwargs))


def check_promises(out, world, wf, budget, deadline, scale, prices=None):
    """The promises, run by run (see the module docstring)."""
    for res, ev, _wall in out:
        trial = ev[0]["trial"]
        # what the server billed for what it was asked: choices beyond n = 1 are its own doing, charged as reported
        # when their answer is read (over_reservation), unknowable when it never arrives (a timeout)
        bill = world.bill_of(wf.dag_row, trial, prices) - world.excess_of(wf.dag_row, trial, prices)
        over = res.over_reservation
        assert bill <= budget * (1 + 1e-9), (trial, bill, budget)
        assert bill <= res.spent + res.unbilled + 1e-6 * max(1.0, budget), (trial, bill, res.spent, res.unbilled)
        assert res.spent + res.unbilled - over <= budget * (1 + 1e-9)
        # the wall-clock promise: a slip past the slack is allowed only when the run's own measures say the
        # process was starved of CPU for at least that long (executor.starvation; tests/test_deadline_slip.py)
        assert kept_deadline(res.wall_s, ev[-1], deadline * scale), (
            trial, res.wall_s, deadline * scale, res.termination, ev[-1].get("slip"), ev[-1].get("loop_lag_max_s"))
        assert ev[-1]["event"] == "end" and (res.termination == "completed" or ev[-1]["message"])
        lines = {(e["node"], e["model"], e["attempt"]) for e in ev if e["event"] == "request" and
                 e["status"] != "refused"}
        for s in world.seen:
            if s.dag == wf.dag_row and s.trial == trial:
                assert (s.node, s.model, s.attempt) in lines, (trial, s)


def statuses(ev) -> Counter:
    return Counter(e["status"] for e in ev if e["event"] == "request")


def faults(ev) -> Counter:
    c: Counter = Counter()
    for e in ev:
        if e["event"] == "request":
            c.update(e.get("faults") or {})
    return c


def test_cut_bodies_are_possibly_billed_and_never_resent_beyond_the_budget():
    pool, wf = workflow()
    B, D = nominal(wf)
    budget = 0.3 * B
    out, world = hostile_runs(wf, pool, "sequential", budget, 5 * D, range(4), classes=("cut_body",))
    check_promises(out, world, wf, budget, 5 * D, 0.01)
    for res, ev, _ in out:
        assert faults(ev)["reset"] > 0 and res.unbilled > 0 and res.spent == 0.0


def test_false_gzip_is_a_fault_line_and_the_batch_goes_on():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 3 * D, range(2), classes={"false_gzip": 1, "ok": 1})
    check_promises(out, world, wf, 2 * B, 3 * D, 0.01)
    assert sum(faults(ev)["decode_error"] for _, ev, _ in out) > 0


def test_lone_surrogates_and_invalid_utf8_feed_children_safely(tmp_path):
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps({"default": {"kind": "generic", "prompt": "step {node_id} after {parents}",
                                             "verify": {"regex": "LOOPBACK-PASS"}}}))
    pool, wf = workflow(0, str(tasks))
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 4 * B, 10 * D, range(3),
                              classes={"lone_surrogate": 1, "invalid_utf8": 1})
    check_promises(out, world, wf, 4 * B, 10 * D, 0.01)
    assert all(res.success for res, _, _ in out)
    assert all(faults(ev)["bad_text"] > 0 for _, ev, _ in out)
    json.dumps([ev for _, ev, _ in out], ensure_ascii=False).encode("utf-8")  # the trace is valid UTF-8


def test_a_huge_retry_after_takes_the_model_out_instead_of_looping():
    pool, wf = workflow()
    B, D = nominal(wf)
    t0 = time.perf_counter()
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 50 * D, [0], classes=("retry_after_huge",))
    assert time.perf_counter() - t0 < 5.0
    res, ev, _ = out[0]
    assert len(world.seen) <= 16 and res.termination == "provider_unavailable"
    assert "Retry-After" in res.message and "30B_ins" in res.message


def test_a_deterministic_400_is_not_resent_and_ends_the_run_from_the_command_line(tmp_path):
    eps = tmp_path / "eps.toml"
    record = tmp_path / "record.json"
    trace = tmp_path / "t.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "executor.hostile", "--pool", POOL, "--classes", "bad_request",
                               "--write-endpoints", str(eps), "--record", str(record), "--max-seconds", "60"],
                              cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "on http://127.0.0.1" in server.stdout.readline()
        t0 = time.perf_counter()
        r = cli("run", "--pool", POOL, "--endpoints", str(eps), "--budget-ratio", "1", "--deadline-ratio", "1",
                "--trace", str(trace))
        took = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(10)
    ev = [json.loads(x) for x in trace.read_text().splitlines()]
    run_s = ev[-1]["wall_s"]
    assert r.returncode == 4 and run_s < 2.0, (r.returncode, run_s, took, r.stderr)
    assert "prompt too long" in r.stderr and "refused" in r.stderr
    seen = json.loads(record.read_text())["seen"]
    sent = [(x["node"], x["model"], x["attempt"]) for x in seen]
    assert len(sent) == len(set(sent)), "a request refused with a 400 was sent again"
    by_pair: dict = {}
    for node, model, attempt in sent:
        by_pair.setdefault((node, model), []).append(attempt)
    # one launch per (node, model), whatever the timing: its samples 0..k-1 went out together, none after the 400
    assert all(sorted(a) == list(range(len(a))) for a in by_pair.values()), by_pair
    assert len(by_pair) <= 2 * 4  # DAG 0 has two roots and the pool four models: every pair refused at most once
    reqs = [e for e in ev if e["event"] == "request" and e["status"] != "refused"]
    assert reqs and all(e["http_status"] == 400 and "prompt too long" in e["error"] for e in reqs)
    assert ev[-1]["termination"] == "refused" and "prompt too long" in ev[-1]["message"]


@pytest.mark.parametrize("cls, words", [("quota_429", "insufficient_quota"), ("litellm_budget_429", "crossed budget"),
                                        ("bad_key_400", "No connected db"), ("unknown_model_400", "Invalid model name")])
def test_permanent_refusals_take_the_model_down_and_mcpp_plans_on_with_the_others(cls, words):
    pool, wf = workflow()
    B, D = nominal(wf)

    def schedule(dag, node, trial, attempt, model, n):  # one model refuses everything, the others answer
        return cls if model == "30B_ins" else "ok"

    out, world = hostile_runs(wf, pool, "mc_portfolio_rollout", 3 * B, 3 * D, range(3), schedule=schedule,
                              params={"M": 8}, options=Options(warm_up=True, backoff_base_s=0.01))
    check_promises(out, world, wf, 3 * B, 3 * D, 0.01)
    refused = [s for s in world.seen if s.cls == cls]
    per_run = Counter(s.trial for s in refused)
    assert all(n <= 8 for n in per_run.values())  # one launch's samples at most, then the model is out
    for _res, ev, _ in out:
        downs = [e for e in ev if e["event"] == "endpoint"]
        if per_run[ev[0]["trial"]]:
            assert downs and downs[0]["model"] == "30B_ins" and words in downs[0]["message"]
        later = [e for e in ev if e["event"] == "plan" and downs and e["t"] >= downs[0]["t"]]
        assert all(m != "30B_ins" for p in later for m, _ in p["action"].values())
    assert sum(res.termination in ("completed", "budget_exhausted", "deadline_exhausted") for res, _, _ in out) == 3


def test_a_refusal_with_no_model_left_ends_at_once_in_the_servers_words():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 50 * D, [0], classes=("quota_429",))
    res, ev, _ = out[0]
    assert res.termination == "refused" and "insufficient_quota" in res.message and "30B_ins" in res.message
    assert len(world.seen) <= 4 and res.wall_s < 1.0  # the first launch's requests, then the end


def test_trickle_and_hang_are_bounded_by_the_whole_try_timeout():
    pool, wf = workflow()
    B, D = nominal(wf)

    def short(eps):
        return {m: replace(e, request_timeout_s=0.3) for m, e in eps.items()}

    out, world = hostile_runs(wf, pool, "sequential", 3 * B, 60 * D, range(2), classes={"trickle": 1, "hang": 1},
                              endpoints_edit=short, trickle_interval_s=0.05)
    check_promises(out, world, wf, 3 * B, 60 * D, 0.01)
    for res, ev, _ in out:
        assert faults(ev)["timeout"] > 0 and res.unbilled > 0
        assert all(e["end"] - e["start"] <= (0.3 * 6 + 2.5) / 0.01 for e in ev
                   if e["event"] == "request" and "end" in e)


def test_an_oversized_answer_is_cut_at_the_cap():
    pool, wf = workflow()
    B, D = nominal(wf)

    def capped(eps):
        return {m: replace(e, max_response_bytes=200_000) for m, e in eps.items()}

    out, world = hostile_runs(wf, pool, "sequential", 3 * B, 20 * D, [0], classes={"oversized": 1, "ok": 2},
                              endpoints_edit=capped, oversized_bytes=8 << 20)
    check_promises(out, world, wf, 3 * B, 20 * D, 0.01)
    assert faults(out[0][1])["too_large"] > 0


def test_lying_usage_never_charges_past_the_reservation():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 1.5 * B, 5 * D, range(6), classes=("lying_usage",))
    check_promises(out, world, wf, 1.5 * B, 5 * D, 0.01)
    for _res, ev, _ in out:
        for e in ev:
            if e["event"] == "request" and e["status"] == "ok":
                assert e["cost"] <= e["max_tokens"] + 1e-9  # token mode: a charge is at most the reservation
                if e.get("usage") == "local":  # a lie: charged the reservation, the most it can have cost
                    assert e["cost"] == e["max_tokens"]
    assert sum(1 for _, ev, _ in out for e in ev if e["event"] == "request" and e.get("usage") == "local") > 0


@pytest.mark.slow
@pytest.mark.parametrize("method, cost_mode", [("sequential", "token_cost_mean"), ("mc_portfolio_rollout",
                                                                                   "token_cost_mean"),
                                               ("sequential", "output_money_cost_mean"),
                                               ("mc_portfolio_rollout", "output_money_cost_mean")])
def test_random_fault_mixes_keep_every_promise(method, cost_mode, monkeypatch):
    """80 runs per (method, cost mode), 320 in all, each a random mix of the fault classes (keyed draws); every
    request carries a key, which the key-echoing classes send back, and which no event may hold."""
    from simulator.costs.charges import DEFAULT_PRICES

    key = "sk-mix-" + "Q3xv" * 8
    monkeypatch.setenv("MCPP_MIX_KEY", key)

    mix = {"ok": 6, "cut_body": 1, "false_gzip": 1, "lone_surrogate": 1, "invalid_utf8": 1, "retry_after_huge": 0.2,
           "bad_request": 0.3, "trickle": 0.5, "oversized": 0.5, "lying_usage": 1, "hang": 0.5, "reset": 1,
           "quota_429": 0.2, "http_500": 1, "unknown_model_400": 0.1,
           # what a server may do to trust (executor.hostile.TRUST_FAULTS)
           "double_answer": 1, "key_echo_401": 0.1, "key_echo_500": 0.5, "gzip_bomb": 0.5, "unknown_encoding": 0.5,
           "many_choices": 0.3, "duplicate_usage": 0.5, "deep_json": 0.5}
    # what gateways answer (issue 41): timeouts after the upstream billed, retried errors, a retried answer
    mix.update({"gw_timeout_408": 0.5, "gw_timeout_504": 0.3, "cdn_timeout_524": 0.2, "gw_retry_500": 0.5,
                "gw_retry_429": 0.3, "gw_retried_ok": 0.5})
    n = 80
    served: set = set()
    starved = []
    for dag in (0, 3):
        pool, wf = workflow(dag, cost_mode=cost_mode)
        B, D = nominal(wf)

        def short(eps):
            return {m: replace(e, request_timeout_s=0.4, max_response_bytes=300_000, api_key_env="MCPP_MIX_KEY")
                    for m, e in eps.items()}

        budget, deadline = 1.2 * B, 2.0 * D
        out, world = hostile_runs(wf, pool, method, budget, deadline, range(n // 2), classes=mix,
                                  params={"M": 8} if method != "sequential" else None, seed=11 + dag,
                                  endpoints_edit=short, trickle_interval_s=0.05, oversized_bytes=2 << 20,
                                  bomb_bytes=64 << 20,
                                  options=Options(warm_up=True, backoff_base_s=0.01), concurrency=20)
        prices = None if cost_mode == "token_cost_mean" else DEFAULT_PRICES
        check_promises(out, world, wf, budget, deadline, 0.01, prices)
        served |= {s.cls for s in world.seen}
        starved += [ev[-1].get("cpu_wait_s") or 0.0 for _, ev, _ in out]
        assert key not in json.dumps([ev for _, ev, _ in out]) and key[:16] not in json.dumps([r.message for r, _, _ in out])
    # the mix is exercised: with the machine to itself every run sends requests and >= 8 classes are served, 5 of
    # them faults of trust; starved of CPU (a loaded machine) the runs' 1 s deadlines pass with few requests sent,
    # which their end events must then show (the loop's thread waited for a CPU half a second or more in a run)
    assert (len(served) >= 8 and len(served & set(TRUST_FAULTS)) >= 5) or max(starved) >= 0.5, (served, max(starved))


def test_a_sample_cancelled_in_its_backoff_releases_its_reservation(monkeypatch):
    from executor import sampling

    monkeypatch.setattr(sampling, "backoff_s", lambda *a: 5.0)  # after its 500 the sample sleeps 5 s (no jitter)
    pool, wf = workflow()
    B, D = nominal(wf)

    async def go():
        clock = Clock(0.01)
        world = HostileWorld(pool, seed=7, clock=clock, classes=("http_500",), tasks={0: wf.tasks})
        await world.start()
        eps = {e.model_id: e for e in world.endpoints()}
        tr = Trace(None)
        try:
            async with http_client() as http:
                async with open_run(wf, eps, "sequential", RunSpec(budget=2 * B, deadline=50 * D), http=http,
                                    clock=clock, trace=tr, options=Options(down_after=100)) as run:
                    task = asyncio.ensure_future(run.run())
                    while not world.seen:
                        await asyncio.sleep(0.01)
                    await asyncio.sleep(0.3)  # the 500 is answered: the sample sleeps in its backoff
                    run.interrupt("SIGTERM")
                    return await task, tr.events, world
        finally:
            await world.stop()

    res, ev, world = asyncio.run(go())
    cancelled = [e for e in ev if e["event"] == "request" and e["status"] == "cancelled"]
    assert res.termination == "interrupted" and len(world.seen) == len(cancelled) >= 1  # one try per ready node
    assert all(e["faults"] == {"http_5xx": 1} and e["tries"] == 1 for e in cancelled)
    assert res.unbilled == 0.0 and res.spent == 0.0 and ev[-1]["reserved"] == 0.0  # nothing could be billed


def test_samples_queued_for_a_concurrency_slot_release_their_reservations():
    pool, wf = workflow()
    B, D = nominal(wf)

    def one_slot(eps):
        return {m: replace(e, concurrency=1) for m, e in eps.items()}

    # every answer hangs: one request per model is in flight at the deadline, the others wait for the slot
    out, world = hostile_runs(wf, pool, "sequential_4", 4 * B, 30.0, [0], classes=("hang",), endpoints_edit=one_slot)
    res, ev, _ = out[0]
    in_flight = [e for e in ev if e["event"] == "request" and e["status"] == "cancelled" and e["tries"] == 1]
    queued = [e for e in ev if e["event"] == "request" and e["status"] == "cancelled" and e["tries"] == 0]
    # a request on the wire at the deadline may not have been read by the world yet (a loaded machine): it is
    # counted in flight (possibly billed) either way
    assert len(in_flight) >= max(1, len(world.seen)) and queued
    assert res.unbilled == pytest.approx(sum(e["max_tokens"] for e in in_flight))  # token mode: reservation = cap
    check_promises(out, world, wf, 4 * B, 30.0, 0.01)


def test_an_answer_cut_at_the_endpoints_own_cap_is_judged_never_retried():
    pool, wf = workflow()
    B, D = nominal(wf)

    def small_cap(eps):  # the world cuts every answer at 20 tokens (finish_reason: length)
        return {m: replace(e, max_tokens=20, token_param="max_completion_tokens") for m, e in eps.items()}

    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 3 * D, [0, 1], classes=("ok",),
                              endpoints_edit=small_cap)
    for _res, ev, _ in out:
        cut = [e for e in ev if e["event"] == "request" and e["status"] == "truncated"]
        assert cut and all(e["tries"] == 1 and e["output_tokens"] == 20 for e in cut)
        judged = {(e["node"], e["attempt"]) for e in ev if e["event"] == "verdict"}
        assert {(e["node"], e["attempt"]) for e in cut} <= judged
    assert len(world.seen) <= sum(e.get("tries") or 0 for _, ev, _ in out for e in ev if e["event"] == "request")


def test_the_request_ceiling_takes_the_pair_out_with_its_reason():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 50 * D, [0], classes=("http_500",),
                              options=Options(backoff_base_s=0.001, max_requests_per_pair=3, down_after=100))
    res, ev, _ = out[0]
    assert len(world.seen) <= 3 * 2  # two ready nodes at most, three requests each
    assert res.termination == "refused" and "ceiling" in res.message
    assert any(e["event"] == "request" and e["status"] == "request_ceiling" for e in ev)


def test_an_exception_inside_a_verdict_is_a_verdict_line_and_the_batch_goes_on(monkeypatch):
    from executor import verifiers

    async def broken(*args, **kwargs):
        raise RuntimeError("verifier bug")

    monkeypatch.setattr(verifiers, "judge", broken)
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 1.0 * B, 5 * D, [0], classes=("ok",))
    res, ev, _ = out[0]
    verdicts = [e for e in ev if e["event"] == "verdict"]
    assert verdicts and all(e["reason"].startswith("executor_error: RuntimeError") for e in verdicts)
    assert ev[-1]["event"] == "end" and res.termination in ("budget_exhausted", "deadline_exhausted")


def test_a_401_names_the_key_variable(tmp_path):
    from tests.fake_openai_server import FakeServer, Reply

    with FakeServer(lambda body, n: Reply(status=401, text='{"error": {"message": "Incorrect API key"}}')) as srv:
        pool, wf = workflow()
        B, D = nominal(wf)
        base = srv.base_url

        def at_fake(eps):
            return {m: replace(e, base_url=base, api_key_env="MCPP_TEST_KEY_401") for m, e in eps.items()}

        import os

        os.environ["MCPP_TEST_KEY_401"] = "wrong"
        try:
            out, world = hostile_runs(wf, pool, "sequential", B, 5 * D, [0], endpoints_edit=at_fake)
        finally:
            del os.environ["MCPP_TEST_KEY_401"]
    res = out[0][0]
    assert res.termination == "refused" and "$MCPP_TEST_KEY_401" in res.message and "Incorrect API key" in res.message


def test_behind_a_gateway_a_5xx_may_hide_billed_tries():
    pool, wf = workflow()
    B, D = nominal(wf)

    def gateway(eps):
        return {m: replace(e, errors_may_bill=True) for m, e in eps.items()}

    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 50 * D, [0], classes=("http_500",),
                              endpoints_edit=gateway, options=Options(backoff_base_s=0.001, down_after=100))
    res, ev, _ = out[0]
    assert res.unbilled > 0 and res.spent + res.unbilled <= 2 * B
    assert len(world.seen) * max(e.get("max_tokens", 0) for e in ev if e["event"] == "request") >= res.unbilled > 0


def test_errors_may_bill_must_be_a_boolean():
    from executor.endpoints import parse_endpoints
    from simulator.base.errors import ConfigError

    row = {"base_url": "http://x/v1", "model": "m", "api_key_env": "", "input_price_per_1m": 0,
           "output_price_per_1m": 1, "concurrency": 1, "max_tokens": 10, "request_timeout_s": 1,
           "errors_may_bill": "yes"}
    with pytest.raises(ConfigError, match="errors_may_bill must be true or false"):
        parse_endpoints({"models": {"m": row}}, "e.toml")

"""The executor's inputs and pieces without a server: validation, costs, draws, estimates, trace, statistics."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from executor.agree import Side, compare, simulated_side
from executor.clock import Clock
from executor.endpoints import endpoints_toml, load_endpoints, parse_endpoints
from executor.estimates import Observations, Residuals, posterior_arrays
from executor.inputs import check_method, live_cost_mode, make_workflow
from executor.tasks import build_tasks
from executor.trace import Trace, read_trace, summarize
from executor.world import World
from simulator.base.errors import ConfigError
from simulator.base.rng import fold
from simulator.costs.limits import BUDGET, DEADLINE, WALL_SECONDS, Limit, Limits
from simulator.engine.loop import draw_attempt, new_state, node_model_key
from simulator.pools.pool import load_pool
from simulator.simulate import SimSpec, simulate_run
from tests.executor_helpers import POOL, ROOT, cli, nominal, workflow

GOOD = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "", "input_price_per_1m": 0.0,
        "output_price_per_1m": 0.8, "concurrency": 4, "max_tokens": 100, "request_timeout_s": 5.0}


def test_endpoints_refused_with_file_and_item(tmp_path):
    for change, words in (({"max_tokens": None}, "missing field(s) max_tokens"),
                          ({"output_price_per_1m": -1.0}, "output_price_per_1m must be a finite number >= 0"),
                          ({"concurrency": 0}, "concurrency must be an integer > 0"),
                          ({"base_url": "ftp://x"}, "base_url must start with")):
        row = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
        with pytest.raises(ConfigError) as e:
            parse_endpoints({"models": {"30B_ins": row}}, "eps.toml")
        assert str(e.value).startswith("eps.toml: [models.30B_ins]") and words in str(e.value)
    p = tmp_path / "bad.toml"
    p.write_text("[models.x\n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_endpoints(p)


def test_endpoints_round_trip(tmp_path):
    eps = parse_endpoints({"models": {"30B_ins": GOOD, "4B ins": GOOD}}, "x")
    p = tmp_path / "e.toml"
    p.write_text(endpoints_toml(eps.values()))
    assert load_endpoints(p) == eps


def test_pool_model_without_endpoint_refused():
    pool = load_pool(POOL)
    eps = parse_endpoints({"models": {"30B_ins": GOOD}}, "eps.toml")
    with pytest.raises(ConfigError) as e:
        make_workflow(pool, 0, POOL, eps, "eps.toml", None, "token_cost_mean")
    assert "eps.toml: DAG 0" in str(e.value) and "model '4B_ins' has no endpoint" in str(e.value)


def test_task_kind_without_payload_refused():
    for task, words in (({"kind": "codeflow", "problem": "p"}, "node 3: a codeflow task needs 'subproblem'"),
                        ({"kind": "generic", "prompt": "x"}, "node 3: a generic task needs 'verify'"),
                        ({"kind": "proofflow"}, "node 3: a proofflow task needs 'template' and 'values'"),
                        ({"kind": "shell"}, "node 3: task kind 'shell' is not one of")):
        with pytest.raises(ConfigError) as e:
            build_tasks({"nodes": {"3": task}, "default": {"kind": "generic", "prompt": "x",
                                                            "verify": {"regex": "a"}}}, [3], {}, "t.json")
        assert str(e.value).startswith("t.json: ") and words in str(e.value)
    with pytest.raises(ConfigError, match="node 4 has no task"):
        build_tasks({"nodes": {"3": {"kind": "generic", "prompt": "x", "verify": {"regex": "a"}}}}, [3, 4], {}, "t")


def test_budget_deadline_method_cost_mode_refused():
    _, wf = workflow()
    for b, d, words in (("inf", "10", "--budget"), ("-1", "10", "--budget"), ("nan", "10", "--budget"),
                        ("100", "0", "--deadline"), ("100", "inf", "--deadline")):
        with pytest.raises(ConfigError, match=words):  # the executor's doors: a live run's deadline is finite
            Limits(Limit(BUDGET, b), Limit(DEADLINE, d, unit=WALL_SECONDS, infinite=False)).resolve(wf.arr)
    with pytest.raises(ConfigError, match="unknown method.*'sequentail'.*did you mean 'sequential'"):
        check_method("sequentail")
    with pytest.raises(ConfigError, match="no live meaning"):
        live_cost_mode("latency")


def test_cli_refuses_bad_input_in_one_line_before_any_request(tmp_path):
    eps = tmp_path / "e.toml"  # every model points at a closed port: a request would fail, not the check
    eps.write_text(endpoints_toml(parse_endpoints({"models": {m: GOOD for m in
                                                              ("4B_ins", "4B_think", "30B_ins", "30B_think")}},
                                                  "x").values()))
    base = ["run", "--pool", POOL, "--dag", "0", "--endpoints", str(eps), "--trace", str(tmp_path / "t.jsonl")]
    for extra, words in ((["--budget", "-5", "--deadline", "10"], "--budget"),
                         (["--budget", "100", "--deadline", "10", "--method", "nope"], "unknown method"),
                         (["--budget", "100", "--deadline", "10", "--cost-mode", "cost"], "no live meaning")):
        r = cli(*base, *extra)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and words in r.stderr
        assert not (tmp_path / "t.jsonl").exists()  # refused before the run started


def test_world_draw_is_the_simulators_draw():
    pool = load_pool(POOL)
    world = World(pool, seed=7)
    arr = world.arrays(3)
    st = new_state(arr.n, arr.m, 1.0, 1.0, 7, int(pool[3].index), 5)
    for v in range(arr.n):
        for j in range(arr.m):
            if arr.available[v, j]:
                key = np.uint64(fold(node_model_key(st.key[0], v, j), 2))
                assert world.draw(3, v, j, 5, 2) == tuple(float(x) for x in draw_attempt(arr, v, j, key))


def test_residual_and_posterior_by_hand():
    _, wf = workflow()
    arr = wf.arr
    res = Residuals(arr)
    j = wf.stats.model_ids.index("30B_ins")
    lo, hi = arr.row_ptr[j], arr.row_ptr[j + 1]
    lat = np.sort(arr.row_lat[lo:hi])
    e = float(lat[len(lat) // 2])
    assert res.remaining(0, j, e) == pytest.approx(lat[lat > e].mean() - e)
    assert res.remaining(0, j, 1e9) == 1e-3  # overdue
    pool = load_pool(str(ROOT / "examples" / "example_single_model.jsonl"))  # parametric templates
    wf1 = make_workflow(pool, 0, "x", None, "", None, "token_cost_mean")
    obs = Observations()
    for passed, latency, charge in ((False, 2.0, 100.0), (False, 4.0, 300.0)):
        obs.add(0, 0, passed, latency, charge)
    post = posterior_arrays(wf1.arr, obs, 8.0)
    p0, mu0, k0 = float(wf1.arr.p[0, 0]), float(wf1.arr.lat_mean[0, 0]), float(wf1.arr.kappa[0, 0])
    assert post.p[0, 0] == pytest.approx(8 * p0 / 10)
    assert post.lat_mean[0, 0] == pytest.approx((8 * mu0 + 6.0) / 10)
    assert post.kappa[0, 0] == pytest.approx((8 * k0 + 400.0) / 10)
    assert np.array_equal(post.p[1:], wf1.arr.p[1:])  # unobserved nodes keep the pool's statistics


def test_compare_by_hand():
    live = Side(np.array([1, 1, 0, 0], bool), np.array([1.0, 2.0, 3.0, 4.0]))
    sim = Side(np.array([1, 1, 1, 0], bool), np.array([1.0, 2.0, 3.0, 4.0]))
    r = compare(live, sim, z=3.0)
    se = math.sqrt(0.25 / 4 + 0.1875 / 4)
    assert r["on_time"]["diff"] == -0.25 and r["on_time"]["se"] == pytest.approx(se)
    assert r["spend"]["diff"] == 0.0 and r["pass"]
    r = compare(Side(np.ones(50, bool), np.ones(50)), Side(np.zeros(50, bool), np.ones(50)))
    assert not r["on_time"]["pass"]  # both rates at the edges: the pooled SE, not zero


def test_simulated_side_is_the_live_rules_simulation():
    """agree's simulated side runs each method under the live rules (the rules the executor follows): the same
    episodes as ``simulate_run(..., SimSpec(..., rules="live"))``, none passing D or the budget."""
    _, wf = workflow()
    B, D = nominal(wf)
    for method in ("sequential", "uniform", "sequential_4"):
        side = simulated_side(wf, method, B, 0.8 * D, 200, 3, None)
        batch = simulate_run(wf.arr, method,
                             SimSpec(budget=B, deadline=0.8 * D, trials=list(range(200)), seed=3, dag=0,
                                     rules="live"))
        assert np.array_equal(side.on_time, batch.on_time(0.8 * D))
        assert np.array_equal(side.spend, batch.total_cost) and np.all(side.spend <= B + 1e-9)
        assert np.all(batch.makespan <= 0.8 * D)


def test_pausable_clock_excludes_pauses():
    async def go():
        c = Clock(0.01, pausable=True)
        t0 = c.now()
        sleeper = asyncio.ensure_future(c.sleep_until(t0 + 5.0))  # 50 ms of wall time, unpaused
        await asyncio.sleep(0.01)
        with c.paused():
            frozen = c.now()
            await asyncio.sleep(0.1)
            assert c.now() == frozen
        await sleeper
        return c.now() - t0, c.wall()

    model, wall = asyncio.run(go())
    assert 5.0 <= model < 6.0 and wall >= 0.15  # the 100 ms pause cost no model time


def test_trace_cut_mid_line_is_summarized(tmp_path):
    p = tmp_path / "t.jsonl"
    tr = Trace(p)
    tr.write("run", method="sequential", n_nodes=2, budget=10.0, deadline_s=5.0)
    tr.write("request", t=1.0, node=0, status="ok", retries=2, faults={"http_429": 2}, cost=3.0)
    tr.write("ledger", t=1.0, spent=3.0, reserved=4.0)
    tr.close()
    with open(p, "a") as fh:
        fh.write('{"event": "verdict", "t": 1.1, "no')  # killed mid-write
    ev, torn = read_trace(p)
    s = summarize(ev, torn)
    assert torn and not s["trace_complete"] and s["termination"].startswith("cut_off")
    assert s["retries"] == 2 and s["faults"] == {"http_429": 2} and s["spent"] == 3.0
    r = cli("summary", str(p))
    assert r.returncode == 0 and "cut_off" in r.stdout

"""The ``live`` execution rules (simulator.engine.live_rules): by hand, as invariants, and against the executor.

* the rule functions on numbers computed by hand;
* a one-node case where the simulator's clairvoyant rules and the live ones
  part (a drawn cost above the budget left is refused before launch under
  ``per_attempt``; under ``live`` it is launched on its expected cost, cut
  at its cap, charged the cap and fails);
* invariants on random DAGs: the budget is hard, a run never passes D,
  spend is what the rules charge;
* live equals simulated trial for trial (``executor agree`` with the world
  drawing from the simulated trial's key).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.engine import live_rules as lr
from simulator.engine.registry import HARD, LIVE_ATOMIC, LIVE_PER_ATTEMPT, execution_of
from simulator.methods import method_spec
from simulator.pools.pool import pool_from_objects
from simulator.simulate import simulate_method
from tests.dags import chain_dag, make_node
from tests.harness_util import ROOT

TRIALS = 2000


def test_rule_functions_by_hand():
    assert lr.atomic_admission(100.0, 100.0, 0) == lr.LAUNCH
    assert lr.atomic_admission(100.5, 100.0, 2) == lr.WAIT  # batches in flight hold budget: wait for one to end
    assert lr.atomic_admission(100.5, 100.0, 0) == lr.END
    # three samples of kappa 20 and one of 40 (E = 100) sharing b = 150: 30 and 60, unless the ceiling is lower
    assert lr.atomic_reservation(20.0, 100.0, 150.0, 1e9, 0.0) == 30.0
    assert lr.atomic_reservation(40.0, 100.0, 150.0, 1e9, 0.0) == 60.0
    assert lr.atomic_reservation(40.0, 100.0, 150.0, 45.0, 0.0) == 45.0  # never more than the largest draw
    assert lr.atomic_reservation(20.0, 100.0, 151.0, 1e9, 1.0) == 30.0  # 30.2 rounded down to whole tokens
    assert lr.whole(29.999999999999996, 1.0) == 30.0 and lr.whole(7.5, 0.0) == 7.5
    assert lr.attempt_reservation(20.0, 19.0, 100.0, 1.0) == -1.0  # expected cost above the room: refused
    assert lr.attempt_reservation(20.0, 70.5, 100.0, 1.0) == 70.0
    assert lr.attempt_reservation(20.0, 700.0, 100.0, 1.0) == 100.0
    assert lr.capped_charge(12.0, 30.0) == (12.0, False)
    assert lr.capped_charge(31.0, 30.0) == (30.0, True)  # cut at its cap, charged the cap


def test_ceilings_unit_and_residuals_by_hand():
    rows = [(1.0, 1, 100.0), (3.0, 1, 10.0), (5.0, 0, 40.0)]
    arr = dag_arrays(pool_from_objects([chain_dag(1, rows=rows)]), 0, CostSetting(cost_mode="token_cost_mean"))
    assert lr.charge_ceilings(arr)[0, 0] == 100.0
    assert lr.reservation_unit(arr) == 1.0
    res = lr.Residuals(arr)
    assert res.remaining(0, 0, 0.0) == pytest.approx((1 + 3 + 5) / 3)
    assert res.remaining(0, 0, 2.0) == pytest.approx((3 + 5) / 2 - 2.0)  # E[L - 2 | L > 2]
    assert res.remaining(0, 0, 5.0) == lr.OVERDUE_S  # overdue: any moment now
    frac = dag_arrays(pool_from_objects([chain_dag(1, rows=[(1.0, 1, 2.5)])]), 0, CostSetting())
    assert lr.reservation_unit(frac) == 0.0


def test_every_method_runs_live_with_the_hard_deadline():
    assert execution_of(method_spec("sequential"), "live") == (LIVE_PER_ATTEMPT, HARD, False)
    assert execution_of(method_spec("uniform"), "live") == (LIVE_PER_ATTEMPT, HARD, False)
    assert execution_of(method_spec("mc_portfolio_rollout"), "live") == (LIVE_ATOMIC, HARD, False)


def test_one_node_where_clairvoyant_and_live_rules_part():
    """One node, two equally likely rows: (1 s, pass, 100 tokens) and (1 s, pass, 10 tokens); kappa 55, B = 80.

    ``live``: the attempt fits its expected cost (55 <= 80) and reserves min(100, 80) = 80; the 100-token draw is
    cut at 80, charged 80 and fails, and nothing more fits (the room is 0): ``budget_exhausted``, cost 80. The
    10-token draw completes, cost 10. So P(on time) = 1/2 and every episode is one of the two.
    ``per_attempt`` (clairvoyant): the 100-token draw is refused before it starts (nothing charged).
    """
    rows = [(1.0, 1, 100.0), (1.0, 1, 10.0)]
    arr = dag_arrays(pool_from_objects([chain_dag(1, rows=rows, cost=55.0)]), 0,
                     CostSetting(cost_mode="token_cost_mean"))
    assert arr.kappa[0, 0] == 55.0
    live = simulate_method(arr, "sequential", 80.0, 10.0, range(TRIALS), 5, 0, execution_rules="live")
    ends = set(zip(live.reason.tolist(), live.total_cost.tolist(), strict=True))
    assert ends == {(0, 10.0), (1, 80.0)}  # completed at 10, or budget_exhausted at 80
    rate = live.on_time(10.0).mean()
    assert abs(rate - 0.5) < 4 * math.sqrt(0.25 / TRIALS)
    clair = simulate_method(arr, "sequential", 80.0, 10.0, range(TRIALS), 5, 0, execution_rules="per_attempt")
    assert set(clair.total_cost[clair.reason != 0].tolist()) <= {0.0}  # refused on the draw: nothing spent


def _random_dag(draw_rows: list, p: float, n: int) -> dict:
    nodes = []
    for i in range(n):
        parents = [i - 1] if i else []
        children = [i + 1] if i < n - 1 else []
        nodes.append(make_node(i, parents, children, p=p, rows=draw_rows))
    return {"problem_id": "rand", "dag_kind": "chain", "nodes": nodes}


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), p=st.floats(0.2, 1.0), budget=st.floats(10.0, 2000.0), deadline=st.floats(1.0, 40.0),
       rows=st.lists(st.tuples(st.floats(0.1, 9.0), st.integers(0, 1), st.integers(1, 300)), min_size=1, max_size=5),
       method=st.sampled_from(["sequential", "uniform", "sequential_4", "mc_portfolio_rollout[M=4]"]))
def test_live_invariants_on_random_dags(n, p, budget, deadline, rows, method):
    """The budget is hard (spend <= B, with cancelled samples charged their lr.whole reservation), no run passes D,
    and the reasons are the simulator's."""
    if not any(s for _, s, _ in rows):
        rows = rows + [(1.0, 1, 5)]
    arr = dag_arrays(pool_from_objects([_random_dag([(a, s, float(c)) for a, s, c in rows], p, n)]), 0,
                     CostSetting(cost_mode="token_cost_mean"))
    b = simulate_method(arr, method, budget, deadline, range(12), 1, 0, model_names=["default"],
                        execution_rules="live")
    assert (b.total_cost <= budget + 1e-9).all()
    assert (b.makespan <= deadline + 1e-12).all()
    assert (b.total_cost >= 0).all()
    assert set(b.reason.tolist()) <= {0, 1, 2, 3}


def _agree(method: str, budget_ratio: str, deadline_ratio: str, runs: int, burners: int = 0) -> dict:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    try:
        out = subprocess.run(
            [sys.executable, "-m", "executor", "agree", "--pool", str(Path(ROOT) / "examples" / "example_pool.jsonl"),
             "--dag", "0", "--method", method, "--runs", str(runs), "--seed", "11", "--world-seed", "11",
             "--budget-ratio", budget_ratio, "--deadline-ratio", deadline_ratio, "--json"],
            capture_output=True, text=True, cwd=ROOT, timeout=900)
    finally:
        for p in procs:
            p.kill()
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("method", ["sequential", "mc_portfolio_rollout[M=16]"])
def test_live_equals_simulated_trial_for_trial(method):
    r = _agree(method, "0.5", "1.5", 40)
    assert r["paired"]["identical"] == r["paired"]["n"] == 40, r["paired"]["first_differing"]
    assert r["spend"]["diff"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["mc_portfolio_rollout", "mc_portfolio_rollout[sim_limit=2000]", "sequential"])
def test_paired_under_cpu_load(method):
    """200 paired trials with two CPU-burning processes beside them: at least 99% identical (the virtual clock
    makes planning and load cost no model time)."""
    r = _agree(method, "1", "1", 200, burners=2)
    assert r["paired"]["identical"] >= 198, r["paired"]["first_differing"]
    assert r["pass"]


def test_agree_names_where_differing_twins_part():
    """A departure from the rules (``--cancel-siblings`` ends a batch at its first pass) makes twins differ;
    ``agree`` lists each differing trial with the first decision where the two runs part."""
    out = subprocess.run(
        [sys.executable, "-m", "executor", "agree", "--pool", str(Path(ROOT) / "examples" / "example_pool.jsonl"),
         "--dag", "0", "--method", "sequential_4", "--runs", "10", "--seed", "0", "--world-seed", "0",
         "--budget-ratio", "1", "--deadline-ratio", "1", "--cancel-siblings"],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    lines = [x for x in out.stdout.splitlines() if x.startswith("  trial ")]
    assert lines and all("parts at decision" in x for x in lines), out.stdout


def test_plan_and_predict_take_the_live_rules(tmp_path):
    pool = str(Path(ROOT) / "examples" / "example_pool.jsonl")
    out = subprocess.run([sys.executable, "-m", "simulator", "plan", "--pool", pool, "--dag", "0", "--budget-ratio",
                          "0.5", "--deadline-ratio", "1", "--execution-rules", "live", "--mc-portfolio-m", "8",
                          "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["execution_rules"] == "live" and 0.0 <= r["estimate"] <= 1.0 and r["action"]
    out = subprocess.run([sys.executable, "-m", "simulator", "predict", "--pool", pool, "--dag", "0",
                          "--budget-ratios", "0.5", "1", "--deadline-ratios", "1", "--trials", "6",
                          "--execution-rules", "live", "--mc-portfolio-m", "8", "--no-progress", "--out",
                          str(tmp_path / "p")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    cells = json.loads((tmp_path / "p" / "predict.json").read_text())["cells"]
    assert len(cells) == 2 and all(0.0 <= c["completion_probability"] <= 1.0 for c in cells)


def test_calibrated_estimate_from_the_start_is_the_realized_rate():
    """From the start state the calibrated estimate (whole live-rule episodes, draws independent of the run) is the
    method's on-time rate: against 1,000 realized episodes within 4 standard errors of the two means."""
    from simulator.engine.live_core import LiveFlight, LiveState
    from simulator.engine.live_episode import calibrated_estimate
    from simulator.engine.registry import LIVE_PER_ATTEMPT
    from simulator.simulate import policy_for

    pool = pool_from_objects([diamond_dag()])
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = 700.0, 20.0
    realized = simulate_method(arr, "sequential", B, D, range(1000), 3, 0, execution_rules="live").on_time(D).mean()
    policy, rule = policy_for("sequential", None, None, ["default"], LIVE_PER_ATTEMPT)
    start = LiveState(np.zeros(arr.n, dtype=bool), np.zeros(arr.n * arr.m, dtype=np.int64), [])
    est = calibrated_estimate(arr, policy, B, D, start, seed=3, dag=0, episodes=1000, per_attempt=True)
    se = math.sqrt(max(realized * (1 - realized), 0.01) * 2 / 1000)
    assert 0.1 < realized < 0.9 and abs(est - realized) < 4 * se, (est, realized)
    # part-way: the root done, its two children in flight for 1 s with a sample each: a valid probability, and
    # higher than from the start (less is left to do)
    done = np.zeros(arr.n, dtype=bool)
    done[0] = True
    mid = LiveState(done, np.array([1, 1, 1, 0], dtype=np.int64),
                    [LiveFlight(1, 0, 1.0, 1, 200.0), LiveFlight(2, 0, 1.0, 1, 200.0)])
    part = calibrated_estimate(arr, policy, B - 500.0, D - 3.0, mid, seed=3, dag=0, episodes=400, per_attempt=True)
    assert 0.0 <= part <= 1.0 and part > est - 0.05


def diamond_dag() -> dict:
    nodes = [make_node(0, [], [1, 2], p=0.7, lat=2.0, cost=100.0), make_node(1, [0], [3], p=0.6, lat=3.0, cost=100.0),
             make_node(2, [0], [3], p=0.6, lat=4.0, cost=100.0), make_node(3, [1, 2], [], p=0.7, lat=2.0, cost=100.0)]
    return {"problem_id": "diamond", "dag_kind": "test", "nodes": nodes}


def test_plan_events_carry_the_calibrated_estimate_on_request():
    from executor.live import Options
    from tests.executor_helpers import nominal, run_one, workflow

    pool, wf = workflow()
    B, D = nominal(wf)
    _, _, tr = run_one(wf, pool, "mc_portfolio_rollout", 2 * B, 4 * D, params={"M": 8},
                       options=Options(warm_up=True, calibrated_episodes=5))
    plans = [e for e in tr.events if e["event"] == "plan" and e["action"]]
    assert plans and all(0.0 <= e["calibrated_estimate"] <= 1.0 for e in plans)
    _, _, tr = run_one(wf, pool, "mc_portfolio_rollout", 2 * B, 4 * D, params={"M": 8}, options=Options(warm_up=True))
    assert all("calibrated_estimate" not in e for e in tr.events if e["event"] == "plan")  # off by default


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200_000), st.sampled_from([0.2, 0.6, 1.2, 2.4, 0.35, 15.0, 0.07]))
def test_tokens_within_a_priced_amount(tokens, price_per_1m):
    """A reservation that is a price times a count buys exactly that count (``//`` would give one fewer)."""
    from simulator.engine.live_rules import tokens_within

    per_token = price_per_1m / 1e6
    assert tokens_within(tokens * per_token, per_token) == tokens
    assert tokens_within(tokens * per_token - per_token / 2, per_token) == max(tokens - 1, 0)

"""``executor quote``: the cheapest budget reaching a target on-time probability, checked against fresh episodes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from executor.quote import AXIS_HI, AXIS_LO, AXIS_N, BISECTIONS, quote
from executor.quote_search import BudgetSearch, needed_successes
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.registry import LIVE
from simulator.pools.pool import load_pool
from simulator.simulate import RunSettings, SimSpec, simulate_run
from simulator.surface.compute import method_surface
from tests.executor_helpers import POOL, cli


def test_the_quoted_budget_reaches_the_target_on_fresh_episodes_and_less_does_not():
    r = cli("quote", "--pool", POOL, "--dag", "0", "--deadline-ratio", "2", "--target", "0.8", "--method",
            "sequential", "--trials", "200", "--json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)
    assert q["budget"] is not None and q["rate"] >= 0.8
    pool = load_pool(POOL)
    arr = dag_arrays(pool, 0, CostSetting())
    D = 2 * nominal_deadline(arr)
    n = 1000
    trials = list(range(10_000, 10_000 + n))  # episodes the quote never saw
    assert q["rules"] == "live"  # the executor's rules by default
    fresh = simulate_run(arr, "sequential",
                         SimSpec(budget=q["budget"], deadline=D, trials=trials, seed=0, dag=0,
                                 rules="live")).on_time(D).mean()
    se = math.sqrt(0.8 * 0.2 / n)
    assert fresh >= 0.8 - 2 * se, fresh
    less = simulate_run(arr, "sequential",
                        SimSpec(budget=0.8 * q["budget"], deadline=D, trials=trials, seed=0, dag=0,
                                rules="live")).on_time(D).mean()
    assert less < fresh


def test_an_unreachable_target_is_one_line_and_a_named_budget_gets_its_rate():
    r = cli("quote", "--pool", POOL, "--dag", "0", "--deadline-ratio", "1", "--target", "0.99", "--method",
            "sequential", "--trials", "50", "--budget", "9000")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not reachable" in r.stderr
    assert "at your budget 9000 tokens: on time" in r.stdout
    assert "reach" not in r.stdout  # reported once: the error line alone
    assert r.stdout.startswith("quote: sequential on DAG 0")  # the header first


def test_bad_quote_inputs_are_refused_in_one_line():
    for flags in (["--target", "1.5"], ["--target", "0.9", "--method", "nope"], ["--target", "0.9", "--trials", "0"]):
        r = cli("quote", "--pool", POOL, "--deadline-ratio", "1", *flags)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (flags, r.stderr)


def full_scan_quote(pool, pos, method, deadline, target, trials, rules=LIVE):
    """The quote as it was computed before the search (the reference): every axis budget in full, then
    6 bisection steps, each budget's rate over all the trials."""
    settings = RunSettings(seed=0, cost=CostSetting(), execution_rules=rules)
    arr = dag_arrays(pool, pos, CostSetting())
    axis = nominal_budget(arr) * np.geomspace(AXIS_LO, AXIS_HI, AXIS_N)
    tr = list(range(trials))

    def rates(budgets):
        return method_surface(pool, pos, method, list(budgets), [deadline], tr, settings).successes[:, 0] / trials

    r = rates(axis)
    reach = np.flatnonzero(r >= target)
    if not len(reach):
        return None, None
    i = int(reach[0])
    hi, hi_rate = axis[i], r[i]
    if i > 0:
        lo = axis[i - 1]
        for _ in range(BISECTIONS):
            mid = float(np.sqrt(lo * hi))
            m = float(rates([mid])[0])
            if m >= target:
                hi, hi_rate = mid, m
            else:
                lo = mid
    return float(hi), float(hi_rate)


def test_needed_successes_is_the_least_count_reaching_the_target():
    for n in (1, 7, 20, 200, 1000):
        for target in (0.001, 0.1, 0.5, 0.7, 0.9, 0.95, 0.999):
            k = needed_successes(target, n)
            assert k / n >= target and (k == 0 or (k - 1) / n < target), (n, target, k)


def test_a_budget_settled_early_is_settled_as_its_full_rate_says():
    """Early stopping is exact: "reaches" agrees with the rate over all the trials, at budgets on both sides."""
    pool = load_pool(POOL)
    arr = dag_arrays(pool, 0, CostSetting())
    D = 2 * nominal_deadline(arr)
    settings = RunSettings(seed=0, cost=CostSetting(), execution_rules=LIVE)
    for b in nominal_budget(arr) * np.array([0.3, 0.6, 0.8, 1.0, 1.5]):
        early = BudgetSearch(pool, 0, "sequential", D, 200, settings)
        full = BudgetSearch(pool, 0, "sequential", D, 200, settings)
        for target in (0.5, 0.8, 0.9):
            assert early.reaches(b, target) == (full.rate(b) >= target), (b, target)
        assert early.rate(b) == full.rate(b)  # the same episodes, however many ran first


def test_the_quote_is_the_full_scans_answer_for_a_baseline():
    pool = load_pool(POOL)
    arr = dag_arrays(pool, 0, CostSetting())
    D = 2 * nominal_deadline(arr)
    for target in (0.5, 0.8):
        q = quote(pool, 0, "sequential", D, target, 200)
        ref, ref_rate = full_scan_quote(pool, 0, "sequential", D, target, 200)
        assert q.budget == pytest.approx(ref) and q.rate == ref_rate
        assert q.episodes < 0.6 * (AXIS_N + BISECTIONS) * 200  # far fewer episodes than the scan's


@pytest.mark.slow
def test_the_mcpp_quote_is_the_full_scans_answer_within_its_interval():
    """MCPP under the live rules, the README's DAG and deadline (20 trials: the scan takes minutes)."""
    pool = load_pool(POOL)
    q = quote(pool, 0, "MCPP", 60.0, 0.9, 20)
    ref, ref_rate = full_scan_quote(pool, 0, "mc_portfolio_rollout", 60.0, 0.9, 20)
    assert ref is not None and q.budget is not None
    lo, hi = q.interval
    assert lo <= ref_rate <= hi and q.rate >= 0.9
    assert q.budget == pytest.approx(ref, rel=0.25)  # within one step of the axis (1.25 x)
    assert q.episodes < (AXIS_N + BISECTIONS + 1) * 20


def test_the_header_comes_before_numpy_and_the_live_executor_load():
    """`python -m executor quote` prints its first line from the flags alone: what runs before it imports
    neither numpy nor the live executor (seconds on a loaded machine), so the user sees the quote start at once."""
    import subprocess
    import sys

    from tests.executor_helpers import ENV, ROOT

    probe = ("import sys; sys.argv = ['x', 'quote']; import executor.quote; "
             "print(sorted(m for m in ('numpy', 'numba', 'executor.live', 'executor.cli') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
    main = (ROOT / "executor" / "__main__.py").read_text(encoding="utf-8")
    assert main.index('["quote"]') < main.index("from executor.cli import main")

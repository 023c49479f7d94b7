"""``executor quote``: the cheapest budget reaching a target on-time probability, checked against fresh episodes."""

from __future__ import annotations

import json
import math

from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_deadline
from simulator.pools.pool import load_pool
from simulator.simulate import simulate_method
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
    fresh = simulate_method(arr, "sequential", q["budget"], D, trials, 0, 0, execution_rules="live").on_time(D).mean()
    se = math.sqrt(0.8 * 0.2 / n)
    assert fresh >= 0.8 - 2 * se, fresh
    less = simulate_method(arr, "sequential", 0.8 * q["budget"], D, trials, 0, 0,
                           execution_rules="live").on_time(D).mean()
    assert less < fresh


def test_an_unreachable_target_is_one_line_and_a_named_budget_gets_its_rate():
    r = cli("quote", "--pool", POOL, "--dag", "0", "--deadline-ratio", "1", "--target", "0.99", "--method",
            "sequential", "--trials", "50", "--budget", "9000")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not reachable" in r.stderr
    assert "at your budget 9000 tokens: on time" in r.stdout


def test_bad_quote_inputs_are_refused_in_one_line():
    for flags in (["--target", "1.5"], ["--target", "0.9", "--method", "nope"], ["--target", "0.9", "--trials", "0"]):
        r = cli("quote", "--pool", POOL, "--deadline-ratio", "1", *flags)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (flags, r.stderr)

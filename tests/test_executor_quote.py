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


class FullRates:
    """The search as it was before the reordering and the threads: every probed budget's rate over all the
    trials from ``method_surface`` (no early stopping), its "reaches" that rate's comparison."""

    def __init__(self, pool, pos, method, deadline, trials):
        self.args = (pool, pos, method)
        self.deadline, self.trials = deadline, trials
        self.settings = RunSettings(seed=0, cost=CostSetting(), execution_rules=LIVE)
        self.rates: dict[float, float] = {}

    def rate(self, b: float) -> float:
        if b not in self.rates:
            s = method_surface(*self.args, [b], [self.deadline], list(range(self.trials)), self.settings)
            self.rates[b] = s.successes[0, 0] / self.trials
        return self.rates[b]

    def reaches(self, b: float, target: float) -> bool:
        return self.rate(b) >= target


def test_the_fast_mcpp_quote_is_the_plain_searchs_answer():
    """MCPP under the live rules (the README's DAG and deadline, 10 trials): the reordered, two-thread, early
    stopping search gives the budget, rate and 0.8 x rate of the plain search over full rates, exactly, and one
    thread the same answer after the same number of episodes."""
    from executor.quote_search import cheapest

    pool = load_pool(POOL)
    arr = dag_arrays(pool, 0, CostSetting())
    axis = nominal_budget(arr) * np.geomspace(AXIS_LO, AXIS_HI, AXIS_N)
    ref = FullRates(pool, 0, "mc_portfolio_rollout", 60.0, 10)
    b = cheapest(ref, axis, 0.8, BISECTIONS)
    q = quote(pool, 0, "MCPP", 60.0, 0.8, 10, threads=2)
    assert b is not None and q.budget == b
    assert q.rate == ref.rate(b) and q.rate_at_80pct == ref.rate(0.8 * b)
    assert q.episodes < len(ref.rates) * 10, (q.episodes, len(ref.rates))  # early stopping: fewer episodes
    one = quote(pool, 0, "MCPP", 60.0, 0.8, 10, threads=1)  # the threads run no episode the search does not use
    assert (one.budget, one.rate, one.rate_at_80pct, one.episodes) == (q.budget, q.rate, q.rate_at_80pct, q.episodes)


def test_the_quotes_episodes_are_the_grids_trial_for_trial():
    """The episode runner (per trial, any order, worker threads, one policy per thread) gives each trial the
    outcome ``method_surface`` gives it, for MCPP under the live rules."""
    from executor.quote_episodes import EpisodeRunner

    pool = load_pool(POOL)
    settings = RunSettings(seed=0, cost=CostSetting(), execution_rules=LIVE)
    trials = [5, 0, 3, 1, 4, 2, 7, 6]
    for b in (3000.0, 4500.0):
        runner = EpisodeRunner(pool, 0, "mc_portfolio_rollout", 60.0, settings, threads=2)
        try:
            got = dict(runner.run(b, trials, lambda: False))
        finally:
            runner.close()
        assert runner.per_cell and sorted(got) == sorted(trials)
        want = method_surface(pool, 0, "mc_portfolio_rollout", [b], [60.0], trials, settings).success[:, 0, 0]
        assert [got[t] for t in trials] == [bool(x) for x in want], b


def test_the_header_and_the_progress_show_before_the_work_ends():
    """On a terminal, `python -m executor quote` (the README's MCPP quote) prints its header, then a progress
    line that moves, while the episodes are still running (it is stopped once the progress is seen)."""
    import fcntl
    import os
    import pty
    import re
    import select
    import struct
    import subprocess
    import sys
    import termios
    import time

    from tests.executor_helpers import ENV, ROOT

    moving = re.compile(rb"budget [0-9.]+ tokens: [1-9][0-9]* episodes simulated")  # the bar counting episodes
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal of 24 x 120 (a pty
    # has 0 x 0 until told: tqdm then draws nothing)
    proc = subprocess.Popen([sys.executable, "-m", "executor", "quote", "--pool", POOL, "--dag", "0", "--deadline",
                             "60", "--target", "0.9"], cwd=ROOT, env=ENV, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        end = time.monotonic() + 600
        while not moving.search(seen) and time.monotonic() < end:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        still_running = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    text = seen.decode(errors="replace")
    assert text.lstrip().startswith("quote: MCPP on DAG 0"), text
    assert moving.search(seen) and still_running, text
    assert text.index("quote: MCPP") < text.index("loading the simulator: 0 episodes simulated") < text.index("DAG 0 is")


def test_the_planners_shortcuts_leave_the_quote_unchanged():
    """The planner's exact shortcuts under the live rules (the argmax's early stop, candidates refused at their
    launch not simulated, ``docs/mcpp.md``) against the planner without them (``prune`` off): every episode the
    same trial for trial at budgets on both sides of the answer, and the same quote (budget, rate, 0.8 x rate)."""
    from executor.quote_episodes import EpisodeRunner
    from executor.quote_search import cheapest

    pool = load_pool(POOL)
    arr = dag_arrays(pool, 0, CostSetting())
    axis = nominal_budget(arr) * np.geomspace(AXIS_LO, AXIS_HI, AXIS_N)
    fast = RunSettings(seed=0, cost=CostSetting(), execution_rules=LIVE)
    plain = RunSettings(seed=0, cost=CostSetting(), execution_rules=LIVE, mcpp={"prune": False})
    trials = list(range(8))
    for b in (2500.0, 4500.0, 6000.0):
        got = []
        for settings in (fast, plain):
            runner = EpisodeRunner(pool, 0, "mc_portfolio_rollout", 60.0, settings, threads=1)
            got.append([runner.episode(b, t) for t in trials])
        assert got[0] == got[1], b
    search = BudgetSearch(pool, 0, "mc_portfolio_rollout", 60.0, 10, plain, threads=1)
    try:
        b = cheapest(search, axis, 0.8, BISECTIONS)
        ref = (b, search.rate(b), search.rate(0.8 * b))
    finally:
        search.close()
    q = quote(pool, 0, "MCPP", 60.0, 0.8, 10)
    assert b is not None and (q.budget, q.rate, q.rate_at_80pct) == ref


@pytest.mark.slow
def test_the_readme_quote_is_the_answer_it_gave_before_the_faster_planner():
    """The README's quote (MCPP, live rules, 200 trials): the answer main gave before the planner's shortcuts
    under the live rules (0e35dee, 49 CPU-s): 4,493.97 tokens, 90.0% on time, 67.5% at 0.8 x it."""
    q = quote(load_pool(POOL), 0, "MCPP", 60.0, 0.9, 200)
    assert q.budget == pytest.approx(4493.972687006625, rel=1e-9)
    assert (q.rate, q.rate_at_80pct) == (0.9, 0.675)

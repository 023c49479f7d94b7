"""Episode semantics: exact small cases, statistical agreement, invariants on random DAGs."""

from __future__ import annotations

import math
import multiprocessing as mp

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from simulator.baselines.compiled import BASELINE_METHODS, STATIC_METHODS, static_rule
from simulator.baselines.compiled import static_plan as baseline_static_plan
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.engine.episode import Policy, run_policy_episode
from simulator.engine.loop import first_uncompletable
from simulator.pools.pool import pool_from_objects
from simulator.simulate import simulate_baseline
from tests.dags import chain_dag, make_node

SEED = 1234


def arrays_of(dag, **kw):
    pool = pool_from_objects([dag])
    return dag_arrays(pool, 0, CostSetting(**kw))


class FixedPolicy(Policy):
    """Every ready node gets (legacy model, k); optionally only at the first decision."""

    name = "fixed"

    def __init__(self, k, once=False):
        self.k, self.once, self.calls = k, once, 0

    def reset(self, arr, seed, dag, trial):
        self.arr, self.calls = arr, 0

    def act(self, view):
        self.calls += 1
        if self.once and self.calls > 1:
            return None
        models = self.arr.legacy.copy()
        counts = np.zeros(self.arr.n, dtype=np.int64)
        counts[view.ready] = self.k
        return models, counts

    def episode_diagnostics(self):
        return {}


def within_3se(estimate, p, n):
    se = math.sqrt(max(p * (1 - p), 1e-12) / n)
    return abs(estimate - p) <= 3 * se


@pytest.mark.parametrize("p,k", [(0.3, 1), (0.3, 4), (0.1, 8)])
def test_single_node_k_parallel_static(p, k):
    # uniform static baseline with budget k x unit cost: one batch of k attempts, never retried
    arr = arrays_of(chain_dag(1, p=p, cost=1.0, lat_std=0.5))
    T = 4000
    batch = simulate_baseline(arr, "uniform", float(k), range(T), SEED, 0)
    assert (batch.total_rollouts == k).all()
    assert within_3se(batch.completed.mean(), 1 - (1 - p) ** k, T)


@pytest.mark.parametrize("p,k", [(0.3, 4), (0.6, 2)])
def test_single_node_k_parallel_atomic(p, k):
    arr = arrays_of(chain_dag(1, p=p, cost=1.0))
    T = 3000
    wins = [run_policy_episode(arr, FixedPolicy(k, once=True), 1e9, 1e9, SEED, 0, t).success for t in range(T)]
    assert within_3se(np.mean(wins), 1 - (1 - p) ** k, T)


@pytest.mark.parametrize("n,p,B", [(3, 0.5, 6), (4, 0.3, 12), (2, 0.8, 2)])
def test_chain_sequential_negative_binomial(n, p, B):
    # unit costs: the chain completes iff n successes need at most B attempts
    arr = arrays_of(chain_dag(n, p=p, cost=1.0))
    T = 4000
    batch = simulate_baseline(arr, "sequential", float(B), range(T), SEED, 0)
    expected = sps.nbinom.cdf(B - n, n, p)
    assert within_3se(batch.completed.mean(), expected, T)
    # failures end budget_exhausted (no attempt fits), never stalled
    assert set(batch.reason[~batch.completed].tolist()) <= {1}


def test_static_caps_refuse_what_they_must():
    # node costs from rows 3, 5; uniform share B/2 = 8 per node, kappa = 4 -> r_v = 2; the one success
    # row costs 100, more than any cap, so a node never completes though p > 0 (a node with p = 0 would
    # end the episode at once, before any launch: docs/semantics.md)
    rows = [(1.0, 0, 3.0), (1.0, 0, 5.0), (1.0, 1, 100.0)]
    dag = chain_dag(2, rows=rows, cost=4.0)
    dag["nodes"][1]["parents"] = []
    dag["nodes"][0]["children"] = []
    arr = arrays_of(dag)
    batch = simulate_baseline(arr, "uniform", 16.0, range(500), SEED, 0)
    started = batch.node_stats[:, :, 1]
    assert (started <= 2).all() and (batch.node_cost <= 8.0 + 1e-12).all()
    # two attempts of cost 5 would exceed the cap of 8: exactly one is launched then
    two_fives = batch.node_cost == 5.0
    assert (started[two_fives] == 1).all()
    both = started == 2
    assert (batch.node_cost[both] <= 8.0).all() and both.any() and two_fives.any()
    # never succeeds and is dispatched once: stalled if a mean-cost attempt (4) still fits a cap,
    # else budget_exhausted (docs/simulator.md, no-progress rule)
    room = (8.0 - batch.node_cost).max(axis=1)
    assert (batch.reason == np.where(room >= 4.0, 3, 1)).all()


def test_deadline_between_two_batch_ends_scores_exactly():
    dag = chain_dag(2, p=1.0, lat=2.0, lat_std=0.0, cost=1.0)
    dag["nodes"][1]["template"]["lat_mean"] = 3.0
    arr = arrays_of(dag)
    batch = simulate_baseline(arr, "sequential", 10.0, range(3), SEED, 0)
    assert np.allclose(batch.makespan, 5.0)
    for D, ok in ((4.999, False), (5.0, True), (2.5, False)):
        recs = batch.records(D)
        assert all(r["on_time_success"] is ok for r in recs)
        if not ok:
            assert all(r["termination_reason"] == "deadline_exhausted" and r["makespan"] == D for r in recs)
    # hard deadline with atomic launches: D between the two batch ends
    r = run_policy_episode(arr, FixedPolicy(1), 10.0, 4.0, SEED, 0, 0)
    assert not r.success and r.termination_reason == "deadline_exhausted" and r.makespan == 4.0
    r = run_policy_episode(arr, FixedPolicy(1), 10.0, 5.0, SEED, 0, 0)
    assert r.success and r.makespan == 5.0


def test_atomic_launch_over_budget_ends_episode():
    arr = arrays_of(chain_dag(2, p=1.0, cost=10.0, lat_std=0.0))
    r = run_policy_episode(arr, FixedPolicy(3), 25.0, 100.0, SEED, 0, 0)
    assert r.termination_reason == "budget_exhausted" and r.total_cost == 0.0 and r.total_rollouts == 0
    r = run_policy_episode(arr, FixedPolicy(2), 25.0, 100.0, SEED, 0, 0)
    # first batch (20) fits, the second (20 > 5 left) does not
    assert r.termination_reason == "budget_exhausted" and r.total_cost == 20.0


# --- invariants on random DAGs ----------------------------------------------------------


@st.composite
def random_dags(draw):
    n = draw(st.integers(1, 9))
    parents = [sorted(draw(st.sets(st.integers(0, v - 1), max_size=3))) if v else [] for v in range(n)]
    children = [[c for c in range(n) if v in parents[c]] for v in range(n)]
    nodes = []
    for v in range(n):
        p = draw(st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0]))
        use_rows = draw(st.booleans())
        rows = None
        if use_rows:
            k = draw(st.integers(1, 5))
            rows = [(draw(st.floats(0.1, 5.0)), int(draw(st.booleans())), draw(st.floats(1.0, 50.0)))
                    for _ in range(k)]
        nodes.append(make_node(v * 3 + 1, [u * 3 + 1 for u in parents[v]], [c * 3 + 1 for c in children[v]],
                               p=p, lat=draw(st.floats(0.5, 4.0)), lat_std=draw(st.floats(0.0, 2.0)),
                               cost=draw(st.floats(1.0, 40.0)), rows=rows))
    return {"problem_id": "h", "nodes": nodes}


def check_counts(batch, arr):
    ns = batch.node_stats
    assert (batch.total_cost <= batch.budget).all()
    assert (batch.total_rollouts == ns[:, :, 1].sum(axis=1)).all()
    assert (ns[:, :, 2] <= ns[:, :, 1]).all() and (ns[:, :, 3] <= ns[:, :, 2]).all()
    assert np.allclose(batch.node_cost.sum(axis=1), batch.total_cost)
    comp = ns[:, :, 0] > 0
    assert (ns[:, :, 3][comp] >= 1).all()
    succ = batch.completed
    assert comp[succ].all()
    assert np.allclose(batch.completion_fraction, comp.mean(axis=1))


def ready_at_end(arr, completed):
    """Ready nodes when an episode is over (nothing is in flight then): parents done, node not."""
    return [
        v
        for v in range(arr.n)
        if not completed[v] and all(completed[u] for u in arr.parent_idx[arr.parent_ptr[v] : arr.parent_ptr[v + 1]])
    ]


def static_plan(arr, method, budget, trial, dag):
    """Caps B_v and counts r_v of a static baseline in one trial (the compiled planner)."""
    return baseline_static_plan(arr, static_rule(method, arr), budget, SEED, dag, trial)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=random_dags(), budget=st.floats(1.0, 400.0), method=st.sampled_from(BASELINE_METHODS))
def test_baseline_invariants(dag, budget, method):
    arr = arrays_of(dag)
    batch = simulate_baseline(arr, method, budget, range(20), SEED, 3)
    check_counts(batch, arr)
    assert not (batch.reason == 2).any()  # D = inf: a baseline never ends on the deadline
    static = method in STATIC_METHODS
    kappa = arr.kappa[np.arange(arr.n), arr.legacy]
    if first_uncompletable(arr, np.zeros(arr.m, dtype=np.bool_), True) >= 0:
        # a node the legacy model can never complete: every episode ends stalled at once, nothing spent
        assert (batch.reason == 3).all() and (batch.total_cost == 0).all() and (batch.makespan == 0).all()
        assert (batch.node_stats[:, :, 1] == 0).all()
        return
    for q, trial in enumerate(batch.trials):
        completed = batch.node_stats[q, :, 0] > 0
        started, node_cost = batch.node_stats[q, :, 1], batch.node_cost[q]
        left = batch.budget - batch.total_cost[q]
        if static:  # one batch per node at most: never more than r_v attempts, never above B_v
            cap, count = static_plan(arr, method, budget, int(trial), 3)
            assert (started <= count).all()
            assert (node_cost <= cap * (1 + 1e-12) + 1e-12).all()
        else:
            cap = np.full(arr.n, np.inf)
        if batch.reason[q] not in (1, 3):
            continue
        # no-progress reason: stalled iff a ready node's mean attempt cost fits its room
        rooms = {v: min(left, cap[v] - node_cost[v]) for v in ready_at_end(arr, completed)}
        assert rooms  # an idle unfinished episode has a ready node
        if any(close(kappa[v], r) for v, r in rooms.items()):
            continue  # too close to call in floating point
        fits = [v for v, r in rooms.items() if kappa[v] <= r]
        assert (batch.reason[q] == 3) == bool(fits)
        if batch.reason[q] == 3 and not static:
            # sequential stalls only when a drawn row was refused although the mean attempt
            # cost fits: some fitting ready node has a row dearer than the budget left
            dear = [v for v in fits if (arr.row_charge[arr.row_ptr[v * arr.m + arr.legacy[v]] :
                                                       arr.row_ptr[v * arr.m + arr.legacy[v] + 1]] > left).any()]
            assert dear


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=random_dags(), budget=st.floats(1.0, 400.0), deadline=st.floats(0.5, 30.0),
       k=st.sampled_from([1, 2, 4]))
def test_atomic_invariants(dag, budget, deadline, k):
    arr = arrays_of(dag)
    for trial in range(5):
        r = run_policy_episode(arr, FixedPolicy(k), budget, deadline, SEED, 1, trial)
        assert r.makespan <= deadline
        assert r.total_cost <= budget
        assert r.success == bool(r.node_completed.all())
        assert r.total_rollouts == r.node_started.sum()
        assert (r.node_finished <= r.node_started).all()
        assert math.isclose(r.node_cost.sum(), r.total_cost, rel_tol=1e-9, abs_tol=1e-9)


def test_same_results_serial_parallel_and_split():
    dag = chain_dag(5, p=0.4, rows=[(1.0, 1, 3.0), (2.0, 0, 6.0), (0.5, 0, 1.0)])
    arr = arrays_of(dag)
    whole = simulate_baseline(arr, "sequential_2", 60.0, range(200), SEED, 7)
    par = simulate_baseline(arr, "sequential_2", 60.0, range(200), SEED, 7, parallel=True)
    a = simulate_baseline(arr, "sequential_2", 60.0, range(0, 77), SEED, 7)
    b = simulate_baseline(arr, "sequential_2", 60.0, range(77, 200), SEED, 7)
    for f in ("reason", "makespan", "total_cost", "total_rollouts", "node_stats", "node_cost"):
        w = getattr(whole, f)
        assert np.array_equal(w, getattr(par, f))
        assert np.array_equal(w, np.concatenate([getattr(a, f), getattr(b, f)]))


def _run_half(args):
    lo, hi = args
    dag = chain_dag(4, p=0.5, rows=[(1.0, 1, 3.0), (2.0, 0, 6.0)])
    arr = arrays_of(dag)
    recs = simulate_baseline(arr, "random", 30.0, range(lo, hi), SEED, 2).records(5.0)
    atomic = [run_policy_episode(arr, FixedPolicy(2), 30.0, 5.0, SEED, 2, t).makespan for t in range(lo, hi)]
    return recs, atomic


def test_identical_records_in_one_or_two_processes():
    one = _run_half((0, 60))
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        parts = pool.map(_run_half, [(0, 25), (25, 60)])
    assert parts[0][0] + parts[1][0] == one[0]
    assert parts[0][1] + parts[1][1] == one[1]


def test_common_random_numbers_across_methods():
    # the i-th attempt of a node draws the same row whatever the method
    dag = chain_dag(1, p=0.5, rows=[(float(i + 1), i % 2, 1.0) for i in range(16)])
    arr = arrays_of(dag)
    s1 = simulate_baseline(arr, "sequential", 1.0, range(50), SEED, 0)  # exactly one attempt
    s4 = simulate_baseline(arr, "sequential_4", 1.0, range(50), SEED, 0)  # first attempt only fits
    assert np.array_equal(s1.makespan, s4.makespan) and np.array_equal(s1.reason, s4.reason)

"""Static dispatch-once baselines: shares B_v and counts r_v against numbers computed by hand.

The rules (docs/policies.md, "Static dispatch-once baselines"): B_v = B w_v /
sum w, r_v = max(1, floor(B_v / kappa_v)), B_v a hard cap on the node's
cumulative cost. The DAG below is small enough to compute every weight on
paper; its nodes are listed out of topological order and with ids that are
not positions, so a share computed in the wrong order or by id shows up.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from simulator.baselines.compiled import STATIC_METHODS, static_plan, static_rule, static_weights
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.pools.pool import pool_from_objects
from simulator.simulate import simulate_baseline
from tests.dags import make_node

SEED = 99
B = 100.0

# a -> b, a -> c, b -> d (ids 10, 20, 30, 40), listed in the order c, a, d, b.
# name: (id, parents, children, lat_mean, success_prob, kappa = token_cost_mean)
NODES = {
    "c": (30, [10], [], 5.0, 0.2, 3.0),
    "a": (10, [], [20, 30], 10.0, 0.5, 10.0),
    "d": (40, [20], [], 1.0, 1.0, 50.0),
    "b": (20, [10], [40], 20.0, 0.8, 7.0),
}
ORDER = list(NODES)  # position order of the pool line

# Weights by hand.
HAND_WEIGHTS = {
    "uniform": {"a": 1, "b": 1, "c": 1, "d": 1},
    "latency_weighted": {"a": 10, "b": 20, "c": 5, "d": 1},
    "success_rate_weighted": {"a": 0.5, "b": 0.2, "c": 0.8, "d": 0.0},
    # longest lat_mean path from v to a sink, v included:
    # d = 1, c = 5, b = 20 + d = 21, a = 10 + max(b, c) = 31
    "critical_path_static": {"a": 31, "b": 21, "c": 5, "d": 1},
}
# B_v = 100 w_v / sum(w) and r_v = max(1, floor(B_v / kappa_v)), by hand:
HAND_PLAN = {
    "uniform": {  # 25 each
        "a": (25.0, 2), "b": (25.0, 3), "c": (25.0, 8), "d": (25.0, 1),
    },
    "latency_weighted": {  # sum 36
        "a": (1000 / 36, 2), "b": (2000 / 36, 7), "c": (500 / 36, 4), "d": (100 / 36, 1),
    },
    "success_rate_weighted": {  # sum 1.5; d never fails, share 0, yet one attempt
        "a": (50 / 1.5, 3), "b": (20 / 1.5, 1), "c": (80 / 1.5, 17), "d": (0.0, 1),
    },
    "critical_path_static": {  # sum 58
        "a": (3100 / 58, 5), "b": (2100 / 58, 5), "c": (500 / 58, 2), "d": (100 / 58, 1),
    },
}


def _dag(nodes=NODES, rows=None):
    out = []
    for name, (nid, parents, children, lat, p, kappa) in nodes.items():
        nd = make_node(nid, parents, children, p=p, lat=lat, lat_std=0.0, cost=kappa,
                       rows=(rows or {}).get(name))
        out.append(nd)
    return {"problem_id": "static_hand", "nodes": out}


def _arr(dag=None):
    return dag_arrays(pool_from_objects([dag or _dag()]), 0, CostSetting())


def _plan(arr, method, budget, trial=0, seed=SEED, dag=0):
    """(B_v, r_v) per node position, through the compiled planner the episodes use."""
    return static_plan(arr, static_rule(method, arr), budget, seed, dag, trial)


@pytest.mark.parametrize("method", sorted(HAND_WEIGHTS))
def test_weights_by_hand(method):
    arr = _arr()
    w = static_weights(arr, method)
    hand = HAND_WEIGHTS[method]
    # weights are defined up to a factor: compare normalised
    expected = np.array([hand[v] for v in ORDER], dtype=float)
    assert np.allclose(w / w.sum(), expected / expected.sum(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("method", sorted(HAND_PLAN))
def test_shares_and_counts_by_hand(method):
    arr = _arr()
    cap, count = _plan(arr, method, B)
    hand = HAND_PLAN[method]
    assert np.allclose(cap, [hand[v][0] for v in ORDER], rtol=1e-12, atol=1e-12)
    assert count.tolist() == [hand[v][1] for v in ORDER]
    assert math.isclose(cap.sum(), B, rel_tol=1e-12)


def test_all_zero_weights_fall_back_to_uniform():
    # every p = 1: success_rate_weighted has no weight anywhere -> B / n each (docs/semantics.md)
    nodes = {k: v[:4] + (1.0,) + v[5:] for k, v in NODES.items()}
    arr = _arr(_dag(nodes))
    cap, count = _plan(arr, "success_rate_weighted", B)
    assert np.allclose(cap, 25.0) and count.tolist() == [8, 2, 1, 3]  # c, a, d, b


def test_random_shares_are_dirichlet_and_keyed():
    arr = _arr()
    n, T = arr.n, 3000
    caps = np.array([_plan(arr, "random", B, trial=t)[0] for t in range(T)])
    assert np.allclose(caps.sum(axis=1), B, rtol=1e-12)
    assert (caps > 0).all()
    # same (seed, DAG, trial) -> same shares; another trial, DAG or seed -> others
    assert np.array_equal(caps[5], _plan(arr, "random", B, trial=5)[0])
    assert not np.allclose(caps[5], caps[6])
    assert not np.allclose(caps[5], _plan(arr, "random", B, trial=5, dag=1)[0])
    assert not np.allclose(caps[5], _plan(arr, "random", B, trial=5, seed=SEED + 1)[0])
    # Dirichlet(1, ..., 1): each share / B is Beta(1, n - 1)
    for v in range(n):
        assert sps.kstest(caps[:, v] / B, sps.beta(1, n - 1).cdf).pvalue > 1e-3
    # counts follow the trial's own shares
    kappa = arr.kappa[np.arange(n), arr.legacy]
    for t in (0, 1, 2):
        cap, count = _plan(arr, "random", B, trial=t)
        assert count.tolist() == [max(1, math.floor(c / k)) for c, k in zip(cap, kappa)]


def test_every_static_method_is_covered():
    assert set(HAND_PLAN) | {"random"} == set(STATIC_METHODS)


def test_cap_is_enforced_in_an_episode():
    # chain a -> b; critical-path weights a = 3 + 1 = 4, b = 1: B_a = 80, B_b = 20.
    # a: kappa 10 -> r_a = 8, but its rows cost 5 (success) or 15 (failure): 8 attempts
    # may cost up to 120, so the cap of 80 must cut some batches short.
    # b: kappa 10 -> r_b = 2, every row costs 22 > B_b = 20: the cap refuses it even
    # when the remaining budget (100 - cost of a) could pay for it.
    nodes = {
        "a": (1, [], [2], 3.0, 0.5, 10.0),
        "b": (2, [1], [], 1.0, 1.0, 10.0),
    }
    rows = {"a": [(1.0, 1, 5.0), (1.0, 0, 15.0), (1.0, 0, 15.0), (1.0, 0, 15.0)], "b": [(1.0, 1, 22.0)]}
    arr = _arr(_dag(nodes, rows))
    cap, count = _plan(arr, "critical_path_static", B)
    assert np.allclose(cap, [80.0, 20.0]) and count.tolist() == [8, 2]

    T = 400
    batch = simulate_baseline(arr, "critical_path_static", B, range(T), SEED, 0)
    started, cost = batch.node_stats[:, :, 1], batch.node_cost
    assert (cost[:, 0] <= 80.0).all() and (started[:, 0] <= 8).all()
    cut = started[:, 0] < 8
    assert cut.any()  # some batch of a was cut by its cap ...
    assert (cost[cut, 0] + 15.0 > 80.0).all()  # ... only when the next expensive row did not fit
    # b is never launched although the budget left would pay for it
    a_done = batch.node_stats[:, 0, 0] > 0
    room = B - cost[:, 0] >= 22.0
    assert (a_done & room).any()
    assert (started[:, 1] == 0).all() and (cost[:, 1] == 0).all()
    # its mean attempt cost (10) still fits the cap: the episode is stalled, not out of budget
    assert (batch.reason[a_done] == 3).all()
    # without a cap (sequential) the same budget does launch b in those trials
    seq = simulate_baseline(arr, "sequential", B, range(T), SEED, 0)
    seq_a_done = seq.node_stats[:, 0, 0] > 0
    seq_room = B - seq.node_cost[:, 0] >= 22.0
    assert (seq.node_stats[seq_a_done & seq_room, 1, 1] >= 1).all() and (seq_a_done & seq_room).any()

"""A refused draw is consumed (issue: faithfulness fix): a hand-computed completion probability.

Two independent nodes under ``sequential`` (Retry), budget 60, token costs:

* A: template p = 1/2, latency exactly 10, cost 1: retried until it succeeds,
  so its batches end at t = 10, 20, ... G * 10 with G ~ Geometric(1/2) (G >= 1);
* B: two empirical rows drawn with equal odds, both successes of latency 1: a
  cheap one (cost 1) and one that costs 100, more than the budget can ever pay.

B is drawn at t = 0 and at every end of an A batch until it launches (each
end is a decision while B is ready). After A completes nothing is in flight:
the loop asks the policy once more ("nothing in flight: ask the policy,
launch"), and only if that launch is refused too does the episode end. So B
meets 1 + G + 1 decisions; with the refused draw consumed each meets a fresh
row: P(B never cheap) = E[(1/2)^(2+G)] = 1/4 * E[(1/2)^G] = 1/4 * (1/4) /
(1 - 1/4) = 1/12, so P(complete) = 11/12. If the refused draw were met again
(the old rule), B's first row would decide everything: P = 1/2.
"""

from __future__ import annotations

import math

import numpy as np

import simulator.engine.reference as ref
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.pools.pool import pool_from_objects
from simulator.simulate import simulate_baseline

TRIALS = 4000
LINE = {
    "problem_id": "refused",
    "dag_kind": "test",
    "nodes": [
        {"node_id": 0, "parents": [], "children": [],
         "template": {"success_prob": 0.5, "lat_mean": 10.0, "lat_std": 0.0, "cost_mean": 1.0,
                      "token_cost_mean": 1.0}},
        {"node_id": 1, "parents": [], "children": [],
         "template": {"success_prob": 1.0, "lat_mean": 1.0, "lat_std": 0.0, "cost_mean": 50.5,
                      "token_cost_mean": 50.5},
         "empirical_samples": [
             {"latency": 1.0, "success": 1, "cost": 1.0, "token_cost": 1.0},
             {"latency": 1.0, "success": 1, "cost": 100.0, "token_cost": 100.0},
         ]},
    ],
}  # fmt: skip


def _tolerance(p: float) -> float:
    return 4 * math.sqrt(p * (1 - p) / TRIALS)  # 4 standard errors: a false alarm about once in 15,000 runs


def test_engine_gives_the_hand_computed_probability():
    arr = dag_arrays(pool_from_objects([LINE]), 0, CostSetting())
    batch = simulate_baseline(arr, "sequential", 60.0, range(TRIALS), 11, 0)
    assert abs(batch.completed.mean() - 11 / 12) < _tolerance(11 / 12)
    # B is launched at most once (it always succeeds) and never charged 100
    assert batch.node_stats[:, 1, 1].max() == 1
    assert set(np.unique(batch.node_cost[:, 1])) <= {0.0, 1.0}


def test_reference_under_both_rules():
    arr = dag_arrays(pool_from_objects([LINE]), 0, CostSetting())
    policy = ref.sequential_policy(1, [0, 0])
    for consumed, expected in ((True, 11 / 12), (False, 1 / 2)):
        wins = sum(
            ref.run_episode(arr, policy, 60.0, seed=11, dag_key=0, trial=q, launch=ref.PER_ATTEMPT,
                            refused_draw_consumed=consumed).success
            for q in range(TRIALS)
        )  # fmt: skip
        assert abs(wins / TRIALS - expected) < _tolerance(expected), consumed


def test_engine_matches_reference_trial_by_trial():
    arr = dag_arrays(pool_from_objects([LINE]), 0, CostSetting())
    batch = simulate_baseline(arr, "sequential", 60.0, range(300), 5, 0)
    policy = ref.sequential_policy(1, [0, 0])
    for q in range(300):
        r = ref.run_episode(arr, policy, 60.0, seed=5, dag_key=0, trial=q, launch=ref.PER_ATTEMPT)
        assert (r.success, r.makespan, r.total_cost) == (bool(batch.completed[q]), batch.makespan[q],
                                                         batch.total_cost[q])  # fmt: skip

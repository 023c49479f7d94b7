"""The path-enumeration limits of the further baselines on DAGs beyond them: the fallback, never an unbounded run.

docs/further_baselines.md (sections 2 and 6): above ``max_paths`` (5000)
root-to-sink paths ``loader_dual_all_paths`` gives every ready node one
attempt until the completed set changes, column generation's pricing search
stops at 5000 paths, and ``deadline_receding`` rounds greedily above 4096
combinations. The graph routines and the rounding are pinned on their own in
test_further_graph_params.py / test_further_chernoff.py; here whole policies
and episodes run with the default parameters on complete layered DAGs of
9^4 = 6561 and 9^6 = 531441 paths.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

from simulator.baselines.further.graph import all_paths
from simulator.baselines.further.loader import LoaderParams
from simulator.baselines.further.variants import FURTHER_METHODS, FurtherParams
from simulator.costs.arrays import CostSetting, build_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.pools.pool import pool_from_objects
from simulator.simulate import SimSpec, simulate_run
from tests.further_dags import pool_line
from tests.test_further_policies import act

WIDTH = 9


def complete_layers(layers: int):
    """``layers`` layers of WIDTH nodes, every node a child of the whole previous layer (WIDTH^layers paths)."""
    spec = []
    for layer in range(layers):
        for j in range(WIDTH):
            parents = [] if layer == 0 else list(range((layer - 1) * WIDTH, layer * WIDTH))
            spec.append((layer * WIDTH + j, parents, 0.6 + 0.03 * (j % 4), 10.0 + j, 500.0 + 50 * j))
    return spec


def wide_arrays(layers: int, mode: str = "token"):
    return build_arrays(pool_from_objects([pool_line(complete_layers(layers), "wide")])[0],
                        CostSetting(cost_mode=mode))  # fmt: skip


def test_all_paths_policy_falls_back_to_one_attempt_beyond_5000_paths():
    arr = wide_arrays(4)  # 6561 paths
    assert all_paths(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx, np.ones(arr.n, bool), 5000)[2]
    B = nominal_budget(arr)
    (_, count), pol = act("loader_dual_all_paths", arr, B)
    roots = np.arange(WIDTH)
    assert (count[roots] == 1).all() and pol.episode_diagnostics()["loader_fallbacks"] == 1
    # the same decision with the limit raised above the path count plans (token mode: more than one attempt)
    raised = FurtherParams(loader=replace(LoaderParams(), max_paths=WIDTH**4))
    (_, planned), pol = act("loader_dual_all_paths", arr, B, params=raised)
    assert pol.episode_diagnostics()["loader_fallbacks"] == 0 and planned[roots].max() > 1


@pytest.mark.parametrize("mode", ["token", "money"])
def test_episodes_on_a_dag_far_beyond_the_limits_stay_bounded(mode):
    arr = wide_arrays(6)  # 531441 paths, 9 ready roots (3^9 rounding combinations > 4096)
    B, D = nominal_budget(arr), nominal_deadline(arr)
    for m in FURTHER_METHODS:
        t0 = time.perf_counter()
        batch = simulate_run(arr, m, SimSpec(budget=B, deadline=D, trials=range(2), seed=42, dag=0))
        elapsed = time.perf_counter() - t0
        assert elapsed < 60, f"{m}: {elapsed:.1f} s for two episodes"
        for rec in batch.records(D):
            assert rec["further_decisions"] >= 1 and rec["total_cost"] <= B + 1e-9
            assert rec["termination_reason"] in ("completed", "budget_exhausted", "deadline_exhausted")
            if m == "loader_dual_all_paths":  # every decision with all 54 nodes left falls back
                assert rec["loader_fallbacks"] >= 1
        if m.startswith("deadline"):
            assert batch.deadline == D
        else:
            assert batch.deadline == math.inf

"""The prediction surface equals independent per-cell evaluation, trial for trial (docs/surface.md).

Every route of :mod:`simulator.surface.compute` (the MCPP tree, per budget,
per cell) is compared on a sample of cells with episodes run one cell at a
time by the simulator's own entry points (``simulate_policy``, which is what
``python -m simulator predict`` runs, and ``simulate_method``, what the
grid's shards run): identical on-time successes and total costs per trial.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from simulator.costs.arrays import dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.engine.loop import REASONS
from simulator.pools.pool import load_pool
from simulator.simulate import RunSettings, SimSpec, policy_for, simulate_run
from simulator.surface.compute import PER_BUDGET, PER_CELL, TREE, method_surface
from simulator.surface.tree import mcpp_trial_cells

POOL = "examples/example_pool.jsonl"
MCPP_SMALL = {"M": 8, "max_candidate_actions": 2048}


@pytest.fixture(scope="module")
def pool():
    return load_pool(POOL)


def _axes(arr, n=6):
    nb, nd = nominal_budget(arr, ""), nominal_deadline(arr, "")
    return np.geomspace(0.15 * nb, 3 * nb, n), np.geomspace(0.15 * nd, 3 * nd, n)


@pytest.mark.parametrize("dag", [0, 11])
def test_tree_equals_each_cell_episode(pool, dag):
    """Reason, makespan and total cost of every cell, bit for bit, against its own episode."""
    arr = dag_arrays(pool, dag, RunSettings().cost)
    budgets, deadlines = _axes(arr)
    tree_pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, pool[dag].model_ids)
    cell_pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, pool[dag].model_ids)
    stats: dict = {}
    reasons = set()
    for trial in range(3):
        out = mcpp_trial_cells(arr, tree_pol, budgets, deadlines, 42, dag, trial, stats)
        k = 0
        for B in budgets:
            for D in deadlines:
                r = run_policy_episode(arr, cell_pol, B, D, 42, dag, trial)
                assert (REASONS[out.reason[k]], out.makespan[k], out.total_cost[k]) == (
                    r.termination_reason, r.makespan, r.total_cost), (trial, B, D)
                reasons.add(r.termination_reason)
                k += 1
    # the sample exercises every way an MCPP episode ends, and the tree really shares work
    assert {"completed", "budget_exhausted", "deadline_exhausted"} <= reasons
    assert stats["branches"] < 3 * len(budgets) * len(deadlines)


@pytest.mark.parametrize(
    "method,route",
    [
        ("mc_portfolio_rollout", TREE),
        ("mc_portfolio_rollout[crn]", TREE),
        ("mc_portfolio_rollout[halving]", PER_CELL),
        ("sequential_4", PER_BUDGET),
        ("uniform", PER_BUDGET),
    ],
)
def test_every_route_equals_independent_cells(pool, method, route):
    dag = 2
    settings = RunSettings(mcpp=MCPP_SMALL)
    arr = dag_arrays(pool, dag, settings.cost)
    budgets, deadlines = _axes(arr, 4)
    trials = list(range(4))
    surf = method_surface(pool, dag, method, budgets, deadlines, trials, settings)
    assert surf.route == route
    rng = np.random.default_rng(7)
    for i, j in rng.integers(0, 4, size=(5, 2)):
        B, D = float(budgets[i]), float(deadlines[j])
        batch = simulate_run(arr, method, SimSpec(budget=B, deadline=D, trials=trials, seed=42, dag=dag),
                             params=MCPP_SMALL, model_names=pool[dag].model_ids)
        np.testing.assert_array_equal(surf.success[:, i, j], batch.on_time(D))
        np.testing.assert_array_equal(surf.total_cost[:, i, j], batch.total_cost)


def test_surface_equals_predict_command(pool, tmp_path):
    """``python -m simulator predict`` on two cells: the same successes and mean costs as the surface."""
    dag = 3
    settings = RunSettings(mcpp=MCPP_SMALL)
    arr = dag_arrays(pool, dag, settings.cost)
    budgets, deadlines = _axes(arr, 2)
    surf = method_surface(pool, dag, "mc_portfolio_rollout", budgets, deadlines, list(range(5)), settings)
    cmd = [sys.executable, "-m", "simulator", "predict", "--pool", POOL, "--dag", str(dag), "--trials", "5",
           "--budgets", *map(repr, map(float, budgets)), "--deadlines", *map(repr, map(float, deadlines)),
           "--mc-portfolio-m", "8", "--mc-portfolio-max-candidate-actions", "2048", "--out", str(tmp_path),
           "--no-progress"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, env={"SIMULATOR_PREWARM": "0", **_env()})
    cells = json.loads((tmp_path / "predict.json").read_text())["cells"]
    for c in cells:
        i, j = list(budgets).index(c["budget"]), list(deadlines).index(c["deadline"])
        assert c["successes"] == int(surf.successes[i, j])
        assert c["mean_cost"] == pytest.approx(float(surf.mean_cost[i, j]), rel=1e-12)


def _env():
    import os

    return dict(os.environ)


@pytest.mark.parametrize("track_cells", [0, 1024])
def test_tree_cells_on_their_own_costs_and_finishing_times(pool, monkeypatch, track_cells):
    """Cells whose budget is exactly an episode's total cost (or one ulp off) and whose deadline is exactly a makespan.

    These sit on the edge of every early stop of the all-cells decision (the
    staircase of the cells a pair can still change, the per-cell counts that
    stop a pair, the rounding band re-simulated): each must still equal its
    own episode, with the per-cell counts on (cells <= TRACK_CELLS) and off.
    """
    import simulator.surface.decide as decide

    monkeypatch.setattr(decide, "TRACK_CELLS", track_cells)
    dag = 11
    arr = dag_arrays(pool, dag, RunSettings().cost)
    budgets, deadlines = _axes(arr, 5)
    pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, pool[dag].model_ids)
    first = mcpp_trial_cells(arr, pol, budgets, deadlines, 42, dag, 0)
    done = first.success
    costs = np.unique(first.total_cost[done])[-2:]
    spans = np.unique(first.makespan[done])[-2:]
    assert len(costs) and len(spans)
    edge_b = np.unique(np.concatenate([costs, np.nextafter(costs, 0), np.nextafter(costs, np.inf)]))
    edge_d = np.unique(np.concatenate([spans, np.nextafter(spans, 0)]))
    cell_pol, _ = policy_for("mc_portfolio_rollout", MCPP_SMALL, None, pool[dag].model_ids)
    out = mcpp_trial_cells(arr, pol, edge_b, edge_d, 42, dag, 0)
    outcomes = set()
    for i, B in enumerate(edge_b):
        for j, D in enumerate(edge_d):
            k = i * len(edge_d) + j
            r = run_policy_episode(arr, cell_pol, float(B), float(D), 42, dag, 0)
            assert (REASONS[out.reason[k]], out.makespan[k], out.total_cost[k]) == (
                r.termination_reason, r.makespan, r.total_cost), (B, D)
            outcomes.add(r.termination_reason)
    assert "completed" in outcomes and len(outcomes) > 1  # the edge really splits the cells

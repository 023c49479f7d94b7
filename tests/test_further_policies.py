"""The further baselines as policies: whole episodes, the first actions of the hand-worked examples, invariants.

The behaviour pinned here is described in docs/further_baselines.md; the DAGs are those of tests/further_dags.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from simulator.baselines.further.policies import FurtherPolicy, snapshot_of, static_seed
from simulator.baselines.further.variants import FURTHER_METHODS, FurtherParams
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import DecisionView
from simulator.pools.pool import load_pool
from simulator.simulate import SimSpec, simulate_baseline, simulate_run
from tests.further_dags import CHAIN, DIAMOND, arrays

E_I = np.zeros(0, dtype=np.int64)
FIELDS = ("reason", "makespan", "total_cost", "total_rollouts", "planner_calls", "node_stats", "node_cost")


@pytest.fixture(scope="module")
def pool(example_pool_path):
    return load_pool(example_pool_path)


def first_view(arr, budget, deadline=math.inf):
    ready = np.array([v for v in range(arr.n) if arr.parent_ptr[v + 1] == arr.parent_ptr[v]], dtype=np.int64)
    return DecisionView(
        arr, 0.0, float(budget), float(deadline), np.zeros(arr.n, dtype=bool), ready, E_I, E_I,
        np.zeros(0, dtype=bool), np.zeros(1, dtype=np.int64), np.zeros(0), 42, 0, 0, 0,
    )  # fmt: skip


def act(method, arr, budget, deadline=math.inf, params=None):
    pol = FurtherPolicy(method, params)
    pol.reset(arr, 42, 0, 0)
    return pol.act(first_view(arr, budget, deadline)), pol


@pytest.mark.parametrize(
    "spec,B,D,want",
    [(CHAIN, 0.05, 120, 10), (CHAIN, 0.01, 120, 5), (DIAMOND, 0.05, 600, 5), (CHAIN, 0.003, 60, 1)],
)
def test_deadline_receding_first_action(spec, B, D, want):
    (model, count), pol = act("deadline_receding", arrays(spec), B, D)
    assert int(count[0]) == want and count[1:].sum() == 0
    assert (model == arrays(spec).legacy).all()
    d = pol.episode_diagnostics()
    assert d["deadline_solves"] == 1 and d["deadline_theta_evaluations"] == 10


def test_deadline_static_first_action_and_later_decisions():
    arr = arrays(DIAMOND)
    (model, count), pol = act("deadline_static", arr, 0.05, 120)
    assert int(count[0]) == 5  # r = (5, 8, 2, 4)
    view = DecisionView(arr, 30.0, 0.01, 120.0, np.array([True, False, False, False]), np.array([1, 2]), E_I, E_I,
                        np.zeros(0, dtype=bool), np.zeros(1, dtype=np.int64), np.zeros(0), 42, 0, 0, 1)  # fmt: skip
    _, count = pol.act(view)
    assert tuple(count) == (0, 8, 2, 0)  # the plan fixed at t = 0, whatever b and t are now
    assert pol.episode_diagnostics()["deadline_solves"] == 1
    assert pol.episode_diagnostics()["deadline_lb"] == 0.0


def test_loader_static_first_action_is_the_seeded_plan():
    arr = arrays(CHAIN)
    (_, count), pol = act("loader_static_bf", arr, 60.0)
    from simulator.baselines.further.loader import loader_static_plan

    li = pol._inputs
    want = loader_static_plan(li.graph, li.t, li.p, li.kappa, 60.0, static_seed(42, 0, 0), bf=True)
    assert int(count[0]) == int(want[0])
    assert static_seed(42, 0, 0) != static_seed(42, 0, 1)


def test_receding_h_zero_returns_nothing():
    arr = arrays(CHAIN)
    pol = FurtherPolicy("deadline_receding")
    pol.reset(arr, 42, 0, 0)
    view = first_view(arr, 0.05, 120.0)
    view.t = 120.0
    assert pol.act(view) is None


def test_money_mode_loader_is_sequential_decision_for_decision(pool):
    """Money mode (faithful, see `_units`): with budgets of a few cents every LOADER policy plays Retry-1, so records equal sequential's."""
    cs = CostSetting(cost_mode="money")
    for i in (0, 5, 11):
        arr = dag_arrays(pool, i, cs)
        B = nominal_budget(arr)
        base = simulate_baseline(arr, "sequential", B, range(6), 42, i)
        for m in FURTHER_METHODS[:6]:
            f = simulate_run(arr, m, SimSpec(budget=B, deadline=math.inf, trials=range(6), seed=42, dag=i))
            for a in FIELDS:
                np.testing.assert_array_equal(getattr(base, a), getattr(f, a), err_msg=f"{m} {a} DAG {i}")


@pytest.mark.parametrize("mode", ["token", "money"])
def test_episode_invariants_and_determinism(pool, mode):
    cs = CostSetting(cost_mode=mode)
    methods = FURTHER_METHODS + ("loader_dual_units", "loader_static_fixed", "deadline_receding_kappa")
    for i in (1, 11):
        arr = dag_arrays(pool, i, cs)
        B, D = nominal_budget(arr), nominal_deadline(arr)
        for m in methods:
            a = simulate_run(arr, m, SimSpec(budget=B, deadline=D, trials=range(4), seed=42, dag=i))
            b = simulate_run(arr, m, SimSpec(budget=B, deadline=D, trials=range(4), seed=42, dag=i))
            for f in FIELDS:
                np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
            assert (a.total_cost <= B + 1e-12).all()
            ok = a.reason == 0
            assert (a.node_stats[ok, :, 0] == 1).all()
            assert (a.node_stats[:, :, 1] >= a.node_stats[:, :, 2]).all()
            assert (a.planner_calls >= 1).all()
            if m.startswith("deadline"):
                assert a.deadline == D and (a.makespan <= D).all()
            else:
                assert a.deadline == math.inf


def test_token_mode_loader_uses_more_than_one_attempt(pool):
    """Token mode: every plan is feasible, counts grow until the launch rule refuses (see `_units`)."""
    arr = dag_arrays(pool, 0, CostSetting())
    f = simulate_run(arr, "loader_dual",
                     SimSpec(budget=nominal_budget(arr), deadline=math.inf, trials=range(3), seed=42, dag=0))
    assert f.total_rollouts.max() > arr.n


def test_snapshot_of_in_flight_attempts():
    arr = arrays(DIAMOND)
    view = DecisionView(arr, 5.0, 1.0, math.inf, np.array([True, False, False, False]), np.array([2]),
                        np.array([1]), np.array([0]), np.array([False]), np.array([0, 2]), np.array([3.0, 7.5]),
                        42, 0, 0, 2)  # fmt: skip
    snap = snapshot_of(view)
    assert tuple(snap.alive) == (False, True, True, True)
    assert tuple(snap.delta) == (0.0, 7.5, 0.0, 0.0) and tuple(snap.rho) == (0.0, 2.0, 0.0, 0.0)


def test_trace_levels_and_bad_parameters():
    arr = arrays(CHAIN)
    for level, keys in (("summary", {"deadline_theta"}), ("theta", {"thetas", "scores"}),
                        ("theta_full", {"plan", "weights"}), ("iter", {"iterations"})):  # fmt: skip
        _, pol = act("deadline_receding", arr, 0.05, 120.0, FurtherParams(trace=level))
        entry = pol.episode_diagnostics()["deadline_trace"][0]
        assert keys <= set(entry)
    _, pol = act("deadline_receding", arr, 0.05, 120.0, FurtherParams(trace="iter"))
    assert len(pol.episode_diagnostics()["deadline_trace"][0]["iterations"]) == 25
    with pytest.raises(ConfigError, match="unknown value 'loader_duel'"):
        FurtherPolicy("loader_duel")
    with pytest.raises(ConfigError, match="max_dual_iters.*got 0"):
        FurtherPolicy("loader_dual", {"loader": {"max_dual_iters": 0}})


def test_harness_defaults_of_the_deadline_policies_are_the_policy_defaults():
    """harness/variables.py writes the Chernoff defaults (it must not import numba): they must agree."""
    from dataclasses import asdict

    from harness.variables import FURTHER_DEFAULTS
    from simulator.baselines.further.chernoff import DeadlineParams

    d = asdict(DeadlineParams())
    assert {k: d[k] for k in FURTHER_DEFAULTS} == FURTHER_DEFAULTS

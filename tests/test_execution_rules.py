"""Execution-rule modes (EXECUTION_RULES / --execution-rules): every method under the same rules.

* ``published``: each method its own launch rule (baselines per attempt, MCPP atomic);
* ``atomic``: every method atomic with the hard deadline (Seq-(m, k) = MCPP's member);
* ``per_attempt``: every method per attempt; MCPP's planner simulates that rule too.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import simulator.engine.reference as ref
from simulator.base.errors import ConfigError
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import Policy, run_policy_episode
from simulator.engine.registry import ATOMIC, EXECUTION_RULES, HARD, PER_ATTEMPT, SCORED, execution_of
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.methods import method_spec
from simulator.pools.pool import load_pool, pool_from_objects
from simulator.simulate import RunSettings, SimSpec, simulate_dag_budget, simulate_run
from tests.harness_util import ROOT, diamond
from tests.test_reference_simulator import CaptureFirstView

TRIALS = 4000


def _chain(p0: float, p1: float) -> dict:
    def node(i, parents, children, p):
        return {"node_id": i, "parents": parents, "children": children,
                "template": {"success_prob": p, "lat_mean": 1.0, "lat_std": 0.0, "cost_mean": 10.0,
                             "token_cost_mean": 10.0}}  # fmt: skip

    return {"problem_id": "chain", "dag_kind": "test", "nodes": [node(0, [], [1], p0), node(1, [0], [], p1)]}


def test_every_method_has_rules_under_every_mode():
    for name in ("sequential", "uniform", "mc_portfolio_rollout", "loader_dual", "deadline_static"):
        spec = method_spec(name)
        assert execution_of(spec, "published") == (spec.launch, spec.deadline, spec.compiled)
        assert execution_of(spec, "atomic") == (ATOMIC, HARD, False)
        assert execution_of(spec, "per_attempt").launch == PER_ATTEMPT
    assert execution_of(method_spec("mc_portfolio_rollout"), "per_attempt").deadline == HARD
    assert execution_of(method_spec("sequential"), "per_attempt") == (PER_ATTEMPT, SCORED, True)
    with pytest.raises(ConfigError, match="choose one of published, atomic, per_attempt"):
        execution_of(method_spec("sequential"), "sometimes")


@pytest.mark.parametrize("mode", EXECUTION_RULES)
def test_closed_form_two_node_chain_for_sequential(mode):
    """Chain 0 -> 1, p = 0.5 then 0.6, latency 1 s, cost 10 each; B = 35 (3 attempts), D = 4.5 (4 attempts).

    Retry completes on time iff N0 + N1 <= 3 (N geometric): P = sum_{a=1}^{2} p0 q0^(a-1) (1 - q1^(3-a))
    = 0.5 * 0.84 + 0.25 * 0.6 = 0.57, in every mode (with one attempt per decision an over-budget or
    over-deadline draw fails the episode whether it is refused or ends it). Tolerance: 4 standard errors.
    """
    arr = dag_arrays(pool_from_objects([_chain(0.5, 0.6)]), 0, CostSetting())
    batch = simulate_run(arr, "sequential",
                         SimSpec(budget=35.0, deadline=4.5, trials=range(TRIALS), seed=3, dag=0, rules=mode))
    p = 0.5 * (1 - 0.4**2) + 0.5 * 0.5 * (1 - 0.4)
    assert abs(batch.on_time(4.5).mean() - p) < 4 * math.sqrt(p * (1 - p) / TRIALS)
    if mode == "atomic":
        assert math.isfinite(batch.deadline) and (batch.makespan <= 4.5).all()  # the hard deadline


@pytest.fixture(scope="module")
def example():
    return load_pool(os.path.join(ROOT, "examples", "example_pool.jsonl"))


@pytest.mark.parametrize("k", [1, 2, 4])
def test_atomic_sequential_k_is_the_reference_atomic_episode(example, k):
    """Under ``atomic`` a Sequential-k episode is the reference simulator's atomic episode, bit for bit."""
    for i in (0, 4, 9):
        arr = dag_arrays(example, i, CostSetting())
        B, D = nominal_budget(arr), nominal_deadline(arr)
        name = "sequential" if k == 1 else f"sequential_{k}"
        batch = simulate_run(arr, name,
                             SimSpec(budget=B, deadline=D, trials=range(8), seed=42, dag=i, rules="atomic"))
        policy = ref.sequential_policy(k, list(arr.legacy))
        for q in range(8):
            r = ref.run_episode(arr, policy, B, seed=42, dag_key=i, trial=q, launch=ref.ATOMIC, deadline=D)
            assert r.makespan == batch.makespan[q] and r.total_cost == batch.total_cost[q], (i, q)
            assert r.success == bool(batch.completed[q])
            assert list(r.node_started) == list(batch.node_stats[q, :, 1])


def test_atomic_static_dispatches_once_then_stalls_on_a_failed_batch():
    """Static under ``atomic``: r_v attempts at first readiness; a failed batch ends the episode stalled."""
    line = _chain(0.3, 0.9)
    arr = dag_arrays(pool_from_objects([line]), 0, CostSetting())
    batch = simulate_run(arr, "uniform",
                         SimSpec(budget=40.0, deadline=math.inf, trials=range(400), seed=1, dag=0,
                                 rules="atomic"))
    # B = 40, equal shares 20: r_v = floor(20 / 10) = 2 attempts per node, once
    assert set(np.unique(batch.node_stats[:, 0, 1])) == {2}
    failed_first = batch.node_stats[:, 0, 0] == 0
    assert (batch.reason[failed_first] == 3).all()  # stalled
    p = (1 - 0.7**2) * (1 - 0.1**2)
    assert abs(batch.completed.mean() - p) < 4 * math.sqrt(p * (1 - p) / 400)


def test_atomic_seq_member_equals_mcpp_estimate_of_it():
    """Under ``atomic`` the baseline Seq-(m, k) computes what MCPP estimates for its member (sampling error).

    A one-member portfolio {Seq-(default, 2)}: MCPP's only candidate is the member's own first action, so
    its score at the first decision is its estimate of P(Seq-(default, 2) completes on time). The baseline
    sequential_2 run under the atomic rule estimates the same probability from independent draws.
    """
    pool = pool_from_objects([diamond(1, p=0.55)])
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = 1.0 * nominal_budget(arr), 1.2 * nominal_deadline(arr)
    n = 3000
    batch = simulate_run(arr, "sequential_2",
                         SimSpec(budget=B, deadline=D, trials=range(n), seed=42, dag=0, rules="atomic"))
    p_base = float(batch.on_time(D).mean())
    cap = CaptureFirstView()
    run_policy_episode(arr, cap, B, D, 42, 0, 0)
    pol = MCPortfolioPolicy({"base_ks": [2], "M": n, "max_rollout_steps": 10**9})
    pol.reset(arr, 42, 0, 0)
    d = pol.decide(cap.view)
    assert d.n_candidates == 1 and d.n_pairs == 1
    p_mcpp = d.score
    tol = 4 * math.sqrt(max(p_base * (1 - p_base), 0.01) * 2 / n)
    assert 0.05 < p_base < 0.95 and abs(p_base - p_mcpp) < tol, (p_base, p_mcpp, tol)


def test_modes_are_recorded_and_per_attempt_mcpp_plans_per_attempt(example):
    settings = RunSettings(mcpp={"M": 8, "max_candidate_actions": 64}, execution_rules="per_attempt")
    arr = dag_arrays(example, 2, CostSetting())
    recs = simulate_dag_budget(example, 2, nominal_budget(arr), [nominal_deadline(arr)],
                               ["sequential", "mc_portfolio_rollout"], range(3), settings)  # fmt: skip
    assert {r["execution_rules"] for r in recs} == {"per_attempt"}
    pol = MCPortfolioPolicy({"launch_rule": "per_attempt"})
    assert pol.per_attempt and not pol.prune  # the pruning bounds assume atomic costs


class _Recording(Policy):
    """Wrap a policy and keep every action it returns (to replay it in the reference simulator)."""

    def __init__(self, inner):
        self.inner, self.name, self.actions = inner, inner.name, []

    def model_positions(self, arr):
        return self.inner.model_positions(arr)

    def reset(self, arr, seed, dag, trial):
        self.inner.reset(arr, seed, dag, trial)

    def act(self, view):
        a = self.inner.act(view)
        self.actions.append(None if a is None else (np.array(a[0]), np.array(a[1])))
        return a

    def episode_diagnostics(self):
        return self.inner.episode_diagnostics()


@pytest.mark.parametrize("launch", [PER_ATTEMPT, ATOMIC])
def test_mcpp_episodes_under_both_launch_rules_are_the_reference_episodes(example, launch):
    """MCPP's decisions replayed in the reference simulator give the same episode under either launch rule."""
    for i in (2, 6):
        arr = dag_arrays(example, i, CostSetting())
        B, D = nominal_budget(arr), nominal_deadline(arr)
        for trial in range(3):
            rec = _Recording(MCPortfolioPolicy({"M": 8, "max_candidate_actions": 64, "launch_rule": launch,
                                                "dag_model_ids": example[i].model_ids}))  # fmt: skip
            got = run_policy_episode(arr, rec, B, D, 42, i, trial, launch=launch)
            replay = iter(rec.actions)

            def act(view, replay=replay):
                a = next(replay)
                return None if a is None else {v: (int(a[0][v]), int(a[1][v])) for v in view.ready}

            r = ref.run_episode(arr, act, B, seed=42, dag_key=i, trial=trial, launch=launch, deadline=D,
                                no_progress_models=[list(rec.model_positions(arr))] * arr.n)  # fmt: skip
            assert (r.success, r.makespan, r.total_cost) == (got.success, got.makespan, got.total_cost)
            assert list(r.node_started) == list(got.node_started)


@pytest.mark.parametrize("budget_ratio", [0.6, 1.0])
def test_live_seq_member_equals_mcpp_estimate_of_it(budget_ratio):
    """Under ``live`` MCPP's member simulations are the live rules: its estimate of Seq-(default, 2) is the
    on-time rate of that member run atomically under the live rules (capped samples, waits, batch settlement),
    within sampling error (as the atomic test above)."""
    from simulator.baselines.compiled import AtomicBaseline
    from simulator.engine.registry import LIVE_ATOMIC

    pool = pool_from_objects([diamond(1, p=0.55)])
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = budget_ratio * nominal_budget(arr), 1.2 * nominal_deadline(arr)
    n = 2000
    member = AtomicBaseline("sequential_2", method_spec("sequential_2").rule)
    wins = [run_policy_episode(arr, member, B, D, 42, 0, t, launch=LIVE_ATOMIC) for t in range(n)]
    p_base = float(np.mean([r.success and r.makespan <= D for r in wins]))
    cap = CaptureFirstView()
    run_policy_episode(arr, cap, B, D, 42, 0, 0)
    pol = MCPortfolioPolicy({"base_ks": [2], "M": n, "max_rollout_steps": 10**9, "launch_rule": LIVE_ATOMIC})
    pol.reset(arr, 42, 0, 0)
    d = pol.decide(cap.view)
    assert d.n_candidates == 1 and d.n_pairs == 1 and pol.live and not pol.prune
    tol = 4 * math.sqrt(max(p_base * (1 - p_base), 0.01) * 2 / n)
    assert abs(p_base - d.score) < tol, (p_base, d.score, tol)


def test_live_mode_is_recorded_and_runs_every_method_on_the_hard_deadline(example):
    settings = RunSettings(mcpp={"M": 8, "max_candidate_actions": 64}, execution_rules="live")
    arr = dag_arrays(example, 2, CostSetting())
    B, D = nominal_budget(arr), nominal_deadline(arr)
    recs = simulate_dag_budget(example, 2, B, [D], ["sequential", "uniform", "mc_portfolio_rollout"], range(4),
                               settings)  # fmt: skip
    assert {r["execution_rules"] for r in recs} == {"live"}
    assert all(r["makespan"] <= D + 1e-9 and r["total_cost"] <= B + 1e-9 for r in recs)

"""MCPP planner: kernel semantics, hand-computed choices, safe improvement, estimates, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from simulator.base.errors import ConfigError
from simulator.costs.arrays import CostSetting, build_arrays, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import DecisionView, run_policy_episode
from simulator.engine.loop import CV_MAX, CV_MIN, draw_attempt, sample_latency
from simulator.engine.testing import first_view, layered_dag, node, tpl
from simulator.mcpp.kernel import _latency, draw_flat, latency_params
from simulator.mcpp.params import mcpp_params_from_env, resolve_params
from simulator.mcpp.policy import (
    FirstActionThenMember,
    MCPortfolioPolicy,
    SeqMemberPolicy,
    hoeffding_epsilon,
)
from simulator.methods import make_policy
from simulator.pools.pool import pool_from_objects

ROOT = Path(__file__).resolve().parents[1]
E_I = np.zeros(0, dtype=np.int64)


def single_node_pool():
    # A: p 0.5, cost 10; B: p 0.8, cost 30; deterministic latency 1 -> one round before D = 1.5
    t = {"A": tpl(0.5, lat=1.0, cost=10.0), "B": tpl(0.8, lat=1.0, cost=30.0)}
    return pool_from_objects([{"problem_id": "one", "nodes": [node(0, [], [], t)]}])


@njit
def _draws(arr, v, j, keys):
    out = np.empty((keys.shape[0], 3))
    for i in range(keys.shape[0]):
        a = draw_attempt(arr, v, j, keys[i])
        b = draw_flat(
            arr.row_ptr, arr.row_lat, arr.row_succ, arr.row_charge, arr.p, arr.lat_mean, arr.lat_std,
            arr.tmpl_charge, arr.m, arr.lat_dist, arr.charge_is_latency, v, j, keys[i],
        )
        if a[0] != b[0] or a[1] != b[1] or a[2] != b[2]:
            return out, False
        out[i, 0] = a[0]
        out[i, 1] = a[1]
        out[i, 2] = a[2]
    return out, True


@pytest.mark.parametrize("dist", ["lognormal", "gamma", "gaussian"])
@pytest.mark.parametrize("mode", ["token", "latency"])
def test_kernel_draw_is_the_simulators_draw(dist, mode):
    keys = np.arange(1, 2001, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for rows in (True, False):
        pool = pool_from_objects([layered_dag(3, n_nodes=3, with_rows=rows)])
        arr = build_arrays(pool[0], CostSetting(cost_mode=mode, latency_dist=dist))
        _, same = _draws(arr, 1, 2, keys)
        assert same


@pytest.mark.parametrize("dist", [0, 1, 2])
def test_kernel_parametric_latency_is_sample_latency(dist):
    """The kernel's precomputed laws give every latency bit for bit (fixed, clamped and ordinary cases)."""
    means = np.array([[10.0, 3.0, 0.0, 5.0, 1e-4, 7.0, 2.0]])
    stds = np.array([[4.0, 6.0, 1.0, 0.0, 1e-5, 7.0 * CV_MIN * 0.5, 2.0 * CV_MAX * 4.0]])
    kind, c0, c1 = latency_params(dist, means, stds)
    keys = np.arange(1, 301, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for j in range(means.shape[1]):
        got = [_latency(kind[0, j], c0[0, j], c1[0, j], k) for k in keys]
        want = [sample_latency(dist, means[0, j], stds[0, j], k, 1) for k in keys]
        assert np.array_equal(np.array(got), np.array(want)), (dist, j)


def test_single_node_hand_computed_best():
    pool = single_node_pool()
    arr = dag_arrays(pool, 0, CostSetting())
    pol = MCPortfolioPolicy({"M": 3000, "base_ks": "1,2,4"}, dag_model_ids=("A", "B"))
    pol.reset(arr, 42, 0, 0)
    d = pol.decide(first_view(arr, 40.0, 1.5))
    # feasible: A1 .5, A2 .75 (20), A4 .9375 (40), B1 .8 (30); B2, B4 over budget
    assert (int(d.act_model[0]), int(d.act_count[0])) == (0, 4)
    assert abs(d.score - 0.9375) < 4 * np.sqrt(0.9375 * 0.0625 / 3000)
    # with a budget of 30 the best is B1 (0.8) over A2 (0.75)
    d = pol.decide(first_view(arr, 30.0, 1.5))
    assert (int(d.act_model[0]), int(d.act_count[0])) == (1, 1)


def test_atomic_deadline_with_correlated_rows():
    # rows: (lat 1, success) and (lat 3, failure): with D = 2 any slow draw breaks the whole launch,
    # so k attempts succeed with probability 0.5**k and MCPP must pick k = 1
    rows = {"A": [{"latency": 1.0, "success": 1, "token_cost": 5}, {"latency": 3.0, "success": 0, "token_cost": 5}]}
    pool = pool_from_objects([{"nodes": [node(0, [], [], {"A": tpl(0.5, 2.0, 1.0, 5.0)}, rows)]}])
    arr = dag_arrays(pool, 0, CostSetting())
    pol = MCPortfolioPolicy(M=2000, base_ks=(1, 2, 4))
    pol.reset(arr, 42, 0, 0)
    d = pol.decide(first_view(arr, 100.0, 2.0))
    assert int(d.act_count[0]) == 1
    assert abs(d.score - 0.5) < 4 * np.sqrt(0.25 / 2000)


@pytest.mark.parametrize("rule", ["atomic", "live_atomic"])
def test_pruning_is_exact(rule):
    """The same choice and score with the planner's shortcuts on and off (under the live rules: the early stop)."""
    pool = pool_from_objects([layered_dag(s, n_nodes=9) for s in range(2)])
    for i in range(2):
        arr = dag_arrays(pool, i, CostSetting())
        B, D = nominal_budget(arr), nominal_deadline(arr)
        for b, dl in ((B, D), (0.4 * B, 0.6 * D)):
            res = []
            for prune in (True, False):
                pol = MCPortfolioPolicy({"M": 8, "max_candidate_actions": 40}, prune=prune, launch_rule=rule)
                pol.reset(arr, 7, i, 0)
                d = pol.decide(first_view(arr, b, dl, seed=7, dag=i))
                res.append((d.candidate, d.member, d.score))
            assert res[0] == res[1]


@pytest.mark.parametrize("rule", ["atomic", "live_atomic"])
def test_beat_best_stops_only_pairs_that_cannot_win(rule):
    """``run_pairs_serial(beat_best=True)``: the same first strict maximum and count as every pair run in full.

    Every pair it stops (-1) has, run in full, at most the best count of the
    pairs before it, at loose and tight limits (where most pairs tie at 0);
    under the live rules too (it counts wins only; the quote's planner uses it there).
    """
    from simulator.mcpp.kernel import run_pairs_serial

    pool = pool_from_objects([layered_dag(s, n_nodes=9) for s in range(3)])
    stopped = refused = 0
    for i in range(3):
        arr = dag_arrays(pool, i, CostSetting())
        B, D = nominal_budget(arr), nominal_deadline(arr)
        for b, dl in ((2 * B, 2 * D), (B, D), (0.4 * B, 0.6 * D)):
            pol = MCPortfolioPolicy({"M": 16, "max_candidate_actions": 60}, launch_rule=rule)
            assert pol.beat_best and pol.prune == (rule == "atomic")
            pol.reset(arr, 7, i, 0)
            _mode, _nb, cand_model, _cc, members, dec = pol.prepare(first_view(arr, b, dl, seed=7, dag=i))
            pc, pm = pol.episode_tables.pair_indices(cand_model.shape[0], len(members))
            full = np.zeros(len(pc), dtype=np.int64)
            fast = np.zeros(len(pc), dtype=np.int64)
            run_pairs_serial(pol.episode_tables.arr, pol.episode_tables.bounds, dec, pc, pm, 0, 16, full, False)
            run_pairs_serial(pol.episode_tables.arr, pol.episode_tables.bounds, dec, pc, pm, 0, 16, fast, True)
            assert np.argmax(fast) == np.argmax(full) and fast.max() == full.max()
            before = np.maximum.accumulate(np.concatenate([[-1], full[:-1]]))
            cut = fast < 0
            assert (full[cut] <= before[cut]).all() and (fast[~cut] == full[~cut]).all()
            stopped += int(cut.sum())
            if rule == "live_atomic":  # a candidate not admitted at once (nothing in flight): 0 wins, not run
                kappa = pol.episode_tables.arr.kappa
                expected = (dec.cand_count * kappa[dec.ready[None, :], dec.cand_model]).sum(axis=1)[pc]
                never = expected > dec.budget
                never[0] = False  # the first pair is always run
                assert (full[never] == 0).all() and (fast[never] == -1).all()
                refused += int(never.sum())
    assert stopped > 0  # the stop really happens
    assert refused > 0 or rule == "atomic"


def test_inflight_attempts_known_times_redrawn_success():
    # node 0 in flight (2 attempts left, 1.0 s), node 1 its child, node 2 independent and ready
    t1 = {"A": tpl(1.0, lat=1.0, cost=1.0)}
    t0 = {"A": tpl(0.5, lat=1.0, cost=1.0)}
    pool = pool_from_objects([{"nodes": [node(0, [], [1], t0), node(1, [0], [], t1), node(2, [], [], t1)]}])
    arr = dag_arrays(pool, 0, CostSetting())
    pol = MCPortfolioPolicy(M=4000, base_ks=(1,))
    pol.reset(arr, 1, 0, 0)

    def view(already, remaining, deadline):
        return DecisionView(
            arr, 0.0, 100.0, deadline, np.zeros(3, dtype=bool), np.array([2]), np.array([0]), np.array([0]),
            np.array([already]), np.array([0, len(remaining)]), np.array(remaining), 1, 0, 0, 0,
        )

    assert pol.decide(view(True, [1.0, 0.5], 2.5)).score == 1.0
    # success redrawn for the 2 unfinished attempts: 1 - 0.5**2; no time for a retry before D = 2.5
    d = pol.decide(view(False, [1.0, 0.5], 2.5))
    assert abs(d.score - 0.75) < 4 * np.sqrt(0.75 * 0.25 / 4000)
    assert pol.decide(view(True, [1.0, 9.5], 10.0)).score == 0.0  # child cannot finish by D


def _small_pool():
    return pool_from_objects([layered_dag(s, n_nodes=5, width=3, models=("a", "b")) for s in (11, 12)])


def test_safe_improvement_over_portfolio_members():
    pool = _small_pool()
    params = {"M": 24, "base_ks": "1,4", "max_candidate_actions": 40}
    trials = range(40)
    for i in range(len(pool)):
        arr = dag_arrays(pool, i, CostSetting())
        B, D = 0.6 * nominal_budget(arr), 0.8 * nominal_deadline(arr)
        mcpp = make_policy("mc_portfolio_rollout", params)
        ok = np.array([run_policy_episode(arr, mcpp, B, D, 5, i, t).success for t in trials], dtype=float)
        best = 0.0
        for j in range(arr.m):
            for k in (1, 4):
                pol = SeqMemberPolicy(j, k)
                s = np.mean([run_policy_episode(arr, pol, B, D, 5, i, t).success for t in trials])
                best = max(best, s)
        se = np.sqrt(max(best * (1 - best), 0.05) / len(trials))
        assert ok.mean() >= best - 3 * se, (i, ok.mean(), best)


def test_first_estimate_matches_simulated_action_then_member():
    pool = _small_pool()
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = 0.8 * nominal_budget(arr), nominal_deadline(arr)
    M = 1500
    pol = MCPortfolioPolicy(M=M, base_ks=(1, 4), max_candidate_actions=4)
    pol.reset(arr, 9, 0, 0)
    d = pol.decide(first_view(arr, B, D, seed=9))
    j, k = d.members[d.member]
    follow = FirstActionThenMember(d.act_model, d.act_count, j, k)
    N = 1500
    sim = np.mean([run_policy_episode(arr, follow, B, D, 123, 0, t).success for t in range(N)])
    se = np.sqrt(d.score * (1 - d.score) / M + sim * (1 - sim) / N)
    assert abs(d.score - sim) <= 4 * max(se, 1e-3), (d.score, sim)


def test_infeasible_action_ends_episode_as_spec():
    pool = single_node_pool()
    arr = dag_arrays(pool, 0, CostSetting())
    pol = MCPortfolioPolicy(M=16)
    # every action is over budget: all scores 0 -> first base action (A, 1) -> budget_exhausted
    r = run_policy_episode(arr, pol, 5.0, 10.0, 1, 0, 0)
    assert r.termination_reason == "budget_exhausted" and r.total_cost == 0.0 and not r.success
    assert r.diagnostics["mc_portfolio_best_score_first"] == 0.0
    # deadline shorter than any latency: deadline_exhausted with t = D, nothing charged
    r = run_policy_episode(arr, pol, 100.0, 0.5, 1, 0, 0)
    assert r.termination_reason == "deadline_exhausted" and r.makespan == 0.5 and r.total_cost == 0.0


def test_episode_diagnostics_and_invariants():
    pool = pool_from_objects([layered_dag(4, n_nodes=7)])
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = nominal_budget(arr), nominal_deadline(arr)
    pol = make_policy("mc_portfolio_rollout", {"M": 8, "max_candidate_actions": 30, "dag_model_ids": pool[0].model_ids})
    for t in range(3):
        r = run_policy_episode(arr, pol, B, D, 3, 0, t)
        assert r.total_cost <= B and r.makespan <= D
        g = r.diagnostics
        assert g["mc_portfolio_decisions"] == r.planner_calls
        assert g["mc_portfolio_pairs_total"] * 8 == g["mc_portfolio_simulations_total"]
        assert sum(g["mc_portfolio_candidate_modes"].values()) == g["mc_portfolio_decisions"]
        assert g["mc_portfolio_params"]["max_exact_actions"] == 64
        assert g["mc_portfolio_epsilon_max"] >= hoeffding_epsilon(16, 8, 0.05)
        json.dumps(g)


def test_params_env_names_and_errors():
    env = {"MC_PORTFOLIO_M": "32", "MC_PORTFOLIO_BASE_KS": "1, 2 8", "MC_PORTFOLIO_MODEL_IDS": "m1,m3", "X": "1"}
    got = mcpp_params_from_env(env)
    assert got == {"M": "32", "base_ks": "1, 2 8", "model_ids": "m1,m3"}
    p = resolve_params(got)
    assert p.M == 32 and p.base_ks == (1, 2, 8) and p.model_ids == ("m1", "m3") and p.exact_cap == 27
    pool = pool_from_objects([layered_dag(1, n_nodes=3)])
    pol = MCPortfolioPolicy(got, dag_model_ids=pool[0].model_ids)
    assert list(pol.model_positions(dag_arrays(pool, 0, CostSetting()))) == [1, 3]
    for bad in ({"M": 0}, {"base_ks": "1,x"}, {"evaluation": "magic"}, {"Mm": 3}, {"delta": 2}):
        with pytest.raises(ConfigError):
            resolve_params(bad)
    with pytest.raises(ConfigError):
        MCPortfolioPolicy(model_ids="zz", dag_model_ids=("m0",)).model_positions(
            dag_arrays(pool, 0, CostSetting())
        )


@pytest.mark.parametrize("evaluation", ["crn", "halving"])
def test_options_run_and_stay_deterministic(evaluation):
    pool = pool_from_objects([layered_dag(5, n_nodes=8)])
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = nominal_budget(arr), nominal_deadline(arr)
    out = []
    for _ in range(2):
        pol = MCPortfolioPolicy(M=16, evaluation=evaluation, candidate_generator="corrected")
        pol.reset(arr, 1, 0, 0)
        d = pol.decide(first_view(arr, B, D, seed=1))
        out.append((d.candidate, d.member, d.score, d.n_simulations))
    assert out[0] == out[1]
    if evaluation == "halving":
        assert out[0][3] < d.n_pairs * 16


THREAD_SCRIPT = r"""
import json, sys
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.pools.pool import pool_from_objects
from simulator.engine.testing import first_view, layered_dag
import numba
pool = pool_from_objects([layered_dag(21, n_nodes=10)])
arr = dag_arrays(pool, 0, CostSetting())
B, D = nominal_budget(arr), nominal_deadline(arr)
res = [numba.get_num_threads()]
for ev in ("faithful", "crn"):
    pol = MCPortfolioPolicy(M=16, max_candidate_actions=60, evaluation=ev)
    pol.reset(arr, 3, 0, 0)
    d = pol.decide(first_view(arr, B, D, seed=3))
    res.append([d.act_model.tolist(), d.act_count.tolist(), repr(d.score), d.candidate, d.member])
print(json.dumps(res))
"""


def test_same_action_and_score_for_one_and_two_threads():
    outs = []
    for n in ("1", "2"):
        env = {**os.environ, "NUMBA_NUM_THREADS": n}
        # ``-c`` puts the working directory (the repository root) first on sys.path
        p = subprocess.run([sys.executable, "-c", THREAD_SCRIPT], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        outs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert outs[0][0] == 1 and outs[1][0] == 2
    assert outs[0][1:] == outs[1][1:]

"""MCPP's ``reuse="state"``: decisions keyed by the planner state, reused when the state repeats.

Why these: reuse is only sound if it is exact, i.e. a reused decision is the
one a recomputation would make, so results must not depend on which trials
share a process (a shard); it must actually save the work (the first
decision of every trial after the first, every decision of a DAG whose
outcomes are certain); and the default must stay the paper's planner, its
records byte for byte.
"""

from __future__ import annotations

import argparse

import pytest

from simulator.base.errors import ConfigError
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.engine.testing import first_view, layered_dag, node, tpl
from simulator.mcpp.params import (
    add_mcpp_arguments,
    mcpp_params_from_args,
    mcpp_params_from_env,
    resolve_params,
)
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.mcpp.reuse import DecisionMemo, state_digest
from simulator.pools.pool import pool_from_objects

PARAMS = {"M": 8, "max_candidate_actions": 60}


def _arr(dag: dict):
    return dag_arrays(pool_from_objects([dag]), 0, CostSetting())


def _outcome(res) -> tuple:
    return (
        res.termination_reason,
        res.makespan,
        res.total_cost,
        res.total_rollouts,
        res.node_cost.tobytes(),
        res.node_success.tobytes(),
    )


def _episodes(arr, pol_for_trial, trials):
    b, d = nominal_budget(arr), nominal_deadline(arr)
    return [run_policy_episode(arr, pol_for_trial(t), b, d, 42, 0, t) for t in trials]


def test_results_do_not_depend_on_which_trials_share_a_policy():
    """One policy for trials 0-5 (reusing) = a fresh policy per trial (as one trial per shard would): same episodes."""
    arr = _arr(layered_dag(5, n_nodes=8))
    shared = MCPortfolioPolicy(PARAMS, reuse="state")
    together = _episodes(arr, lambda t: shared, range(6))
    apart = _episodes(arr, lambda t: MCPortfolioPolicy(PARAMS, reuse="state"), range(6))
    assert [_outcome(r) for r in together] == [_outcome(r) for r in apart]
    reused = [r.diagnostics["mc_portfolio_decisions_reused"] for r in together]
    assert reused[0] == 0 and all(n >= 1 for n in reused[1:])  # every later trial reuses at least its first decision
    assert all(r.diagnostics["mc_portfolio_decisions_reused"] == 0 for r in apart)
    # a reused decision ran no simulation: the totals count only the simulations run
    for a, b in zip(together[1:], apart[1:]):
        assert a.diagnostics["mc_portfolio_simulations_total"] < b.diagnostics["mc_portfolio_simulations_total"]


def test_a_certain_dag_reuses_every_decision_after_the_first_trial():
    """Deterministic latencies and sure successes: every trial meets the same states, so trials 1.. simulate nothing."""
    t = {"a": tpl(1.0, lat=10.0, std=0.0, cost=100.0), "b": tpl(1.0, lat=4.0, std=0.0, cost=300.0)}
    dag = {
        "problem_id": "certain",
        "model_ids": ["a", "b"],
        "nodes": [
            node(0, [], [2], t), node(1, [], [2], t), node(2, [0, 1], [3], t), node(3, [2], [], t),
        ],
    }  # fmt: skip
    arr = _arr(dag)
    pol = MCPortfolioPolicy(PARAMS, reuse="state")
    res = _episodes(arr, lambda _: pol, range(4))
    first = res[0].diagnostics
    assert first["mc_portfolio_decisions"] >= 2 and first["mc_portfolio_decisions_reused"] == 0
    for r in res[1:]:
        d = r.diagnostics
        assert d["mc_portfolio_decisions_reused"] == d["mc_portfolio_decisions"] == first["mc_portfolio_decisions"]
        assert d["mc_portfolio_simulations_total"] == 0
        assert _outcome(r) == _outcome(res[0])


def test_the_digest_sees_every_part_of_the_state():
    arr = _arr(layered_dag(5, n_nodes=8))
    base = first_view(arr, 5000.0, 200.0)
    d0 = state_digest(base)
    assert d0 == state_digest(first_view(arr, 5000.0, 200.0, trial=7))  # not the trial
    assert 0 <= d0 < 2**63
    changed = [
        first_view(arr, 5000.5, 200.0),
        first_view(arr, 5000.0, 199.0),
        first_view(arr, 5000.0, 200.0, seed=43),
        first_view(arr, 5000.0, 200.0, dag=1),
    ]
    v = first_view(arr, 5000.0, 200.0)
    v.completed = v.completed.copy()
    v.completed[-1] = True
    changed.append(v)
    shifted = first_view(arr, 5000.0, 210.0)
    shifted.t = 10.0  # same horizon (deadline - t): the planner plans alike
    assert state_digest(shifted) == d0
    assert len({state_digest(x) for x in changed} | {d0}) == len(changed) + 1


def test_memo_is_bounded_and_per_arrays():
    m = DecisionMemo(size=3)
    a, b = object(), object()
    m.for_arrays(a)
    for i in range(5):
        m.put(i, i)
    assert len(m) == 3 and m.get(0) is None and m.get(4) == 4
    assert m.for_arrays(a).get(4) == 4
    assert m.for_arrays(b).get(4) is None and len(m) == 0


def test_off_by_default_and_records_unchanged():
    assert resolve_params({}).reuse == "off"
    assert "reuse" not in resolve_params({}).record()
    assert resolve_params({"reuse": "off"}) == resolve_params({})
    assert resolve_params({"reuse": "state"}).record()["reuse"] == "state"
    arr = _arr(layered_dag(5, n_nodes=6))
    a = _episodes(arr, lambda t: MCPortfolioPolicy(PARAMS), [0, 1])
    b = _episodes(arr, lambda t: MCPortfolioPolicy(PARAMS, reuse="off"), [0, 1])
    assert [_outcome(r) for r in a] == [_outcome(r) for r in b]
    assert all("mc_portfolio_decisions_reused" not in r.diagnostics for r in a + b)


@pytest.mark.parametrize("bad", ["yes", "trial", 1, "STATE!"])
def test_setting_is_validated(bad):
    with pytest.raises(ConfigError) as e:
        resolve_params({"reuse": bad})
    assert "reuse" in str(e.value) and "\n" not in str(e.value)


def test_flag_and_environment():
    ap = argparse.ArgumentParser()
    add_mcpp_arguments(ap)
    assert mcpp_params_from_args(ap.parse_args(["--mc-portfolio-reuse", "state"])) == {"reuse": "state"}
    assert resolve_params(mcpp_params_from_env({"MC_PORTFOLIO_REUSE": "state"})).reuse == "state"
    assert resolve_params({"reuse": "State"}).reuse == "state"


def test_variant_word_runs_it_through_the_registry():
    """``mc_portfolio_rollout[reuse]`` is MCPP with reuse=state, as a method of its own in a grid."""
    from simulator.simulate import simulate_policy

    arr = _arr(layered_dag(5, n_nodes=6))
    b, d = nominal_budget(arr), nominal_deadline(arr)
    a = simulate_policy(arr, "mc_portfolio_rollout[reuse]", b, d, range(3), 42, 0, PARAMS)
    c = simulate_policy(arr, "mc_portfolio_rollout", b, d, range(3), 42, 0, {**PARAMS, "reuse": "state"})
    assert a.method == "mc_portfolio_rollout[reuse]"
    assert a.makespan.tobytes() == c.makespan.tobytes() and a.total_cost.tobytes() == c.total_cost.tobytes()

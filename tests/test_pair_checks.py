"""The pair check in one place: the anytime planner's pruning is the kernel's own, and ends only failures.

A pair (candidate, member) fails surely when a lower bound of its cost or
of its finishing time passes the decision's budget or horizon
(``simulator.mcpp.kernel._pair_fails_surely``, what ``run_pair`` checks
first). The surface's decide loop and the anytime planner check every pair
of a decision at once from per-member and per-candidate tables
(``pair_check_tables``, recombined by ``pair_fails``); the anytime planner
used to keep a vectorised copy of the rule of its own. Checked here on
decisions captured from MCPP episodes, each also at tighter budgets and
horizons so that both sides of every bound are met:

* ``surely_failing`` equals the rule written out from its definition, pair
  by pair;
* a pair it ends succeeds in none of its simulations (``run_pair`` without
  the check's help, every simulation run to its end).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from simulator.costs.arrays import dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.mcpp.kernel import (
    START_UNKNOWN,
    candidate_charge,
    inside_stair,
    pair_check_tables,
    pair_fails,
    pair_scratch,
    plan_bounds,
    run_pair,
    surely_failing,
)
from simulator.pools.pool import load_pool
from simulator.simulate import RunSettings, policy_for
from simulator.surface.decide import _candidate_fits_no_cell, _member_floors, _staircase

SIMS = 16


@njit(cache=False)
def _wins(arr, bounds, dec, c, pm, sims):
    """Successes of the pair's first ``sims`` simulations, the planner's way (no screen, no early stop)."""
    none = np.empty(0)
    no_stair = np.empty((0, 0))
    no_cells = np.empty(0, dtype=np.int64)
    work_i, work_f, work_b = pair_scratch(dec.completed.shape[0])
    return run_pair(arr, bounds, dec, c, pm, 0, sims, none, none, 0, dec.budget, dec.horizon, none, no_stair, none,
                    none, no_cells, work_i, work_f, work_b, START_UNKNOWN)  # fmt: skip


def _reference(arr, bounds, dec) -> np.ndarray:
    """The rule from its definition, in the kernel's summation order (plain Python, one pair at a time)."""
    n = len(dec.completed)
    busy = np.zeros(n, dtype=bool)
    busy[dec.ready] = True
    busy[dec.inf_node] = True
    C, P = dec.cand_model.shape[0], len(dec.mem_model)
    fails = np.zeros((C, P), dtype=bool)
    for c in range(C):
        first = 0.0
        for r, v in enumerate(dec.ready):
            first += dec.cand_count[c, r] * bounds.min_charge[v, dec.cand_model[c, r]]
        for pm in range(P):
            j, k = int(dec.mem_model[pm]), int(dec.mem_k[pm])
            need0, lacks = 0.0, False
            for v in range(n):
                if not dec.completed[v] and not busy[v]:
                    if not arr.available[v, j]:
                        lacks = True
                        break
                    need0 += k * bounds.min_charge[v, j]
            ends = [bounds.min_lat[v, dec.cand_model[c, r]] + bounds.child_tail[v, j] for r, v in enumerate(dec.ready)]
            inflight = [dec.inf_end[q] + bounds.child_tail[v, j] for q, v in enumerate(dec.inf_node)]
            fails[c, pm] = (lacks or max(ends, default=-np.inf) > dec.horizon or first + need0 > dec.budget
                            or max(inflight, default=-np.inf) > dec.horizon)  # fmt: skip
    return fails


def _decisions(pool, dag, budget_ratio, deadline_ratio, trial):
    """The planner's DecisionState at each decision of one MCPP episode, and the DAG's arrays."""
    arr = dag_arrays(pool, dag, RunSettings().cost)
    pol, _ = policy_for("mc_portfolio_rollout", {"M": 8, "max_candidate_actions": 64}, None, pool[dag].model_ids)
    seen = []
    original = pol.prepare

    def capture(view, *args, **kwargs):
        prep = original(view, *args, **kwargs)
        if prep is not None:
            seen.append(prep[-1])
        return prep

    pol.prepare = capture
    run_policy_episode(arr, pol, budget_ratio * nominal_budget(arr, ""), deadline_ratio * nominal_deadline(arr, ""),
                       seed=5, dag=dag, trial=trial)  # fmt: skip
    return arr, seen


@pytest.mark.parametrize("dag", [0, 3])
def test_the_anytime_pruning_is_the_kernels_rule_and_ends_only_failures(example_pool_path, dag):
    pool = load_pool(example_pool_path)
    arr, decisions = _decisions(pool, dag, 1.5, 1.5, trial=2)
    assert decisions
    bounds = plan_bounds(arr)
    rng = np.random.default_rng(dag)
    n_fail = n_open = 0
    for dec in decisions[:6]:
        for scale in (1.0, 0.5, 0.2):  # the episode's own limits, then tighter ones: both sides of each bound
            d = dec._replace(budget=dec.budget * scale, horizon=dec.horizon * scale)
            got = surely_failing(arr, bounds, d)
            np.testing.assert_array_equal(got, _reference(arr, bounds, d))
            n_fail += int(got.sum())
            n_open += int((~got).sum())
            ended = np.argwhere(got)
            for c, pm in ended[rng.choice(len(ended), size=min(4, len(ended)), replace=False)] if len(ended) else []:
                assert _wins(arr, bounds, d, int(c), int(pm), SIMS) == 0, (c, pm, scale)
    assert n_fail > 0 and n_open > 0  # both answers were met


@njit(cache=False)
def _floor_against_pairs(arr, bounds, dec, stair, M, top):
    """The surface's candidate floor against its own per-pair checks: (candidates it skips, pairs of those
    candidates that the per-pair checks would have let run: must be 0)."""
    stair_b, stair_h = stair
    top_b, top_h = top
    tables = pair_check_tables(arr, bounds, dec)
    floors = _member_floors(tables, dec.mem_model, arr.m, dec.prune)
    n_inf = dec.inf_node.shape[0]
    skipped = 0
    wrong = 0
    for c in range(dec.cand_model.shape[0]):
        if not _candidate_fits_no_cell(tables, floors, bounds, dec, stair, M, c):
            continue
        skipped += 1
        for pm in range(dec.mem_model.shape[0]):
            j = dec.mem_model[pm]
            if dec.prune and pair_fails(tables, c, pm, j, n_inf, top_b, top_h):
                continue
            need0 = tables.need0[pm] if dec.prune else 0.0
            cost = candidate_charge(bounds.min_charge, dec.ready, dec.cand_model, dec.cand_count, c, need0)
            if inside_stair(stair_b, stair_h, M, cost, max(tables.inf_tail[j], tables.lat_end[c, j])):
                wrong += 1
    return skipped, wrong


@pytest.mark.parametrize("dag", [0, 3])
def test_a_candidate_the_surface_skips_whole_has_no_pair_its_checks_let_run(example_pool_path, dag):
    """``decide_cells_kernel`` skips a candidate's pairs at once when their least cost and earliest end (over
    the members) fit no open cell; every one of them must fail the per-pair checks it replaces (pair check,
    then staircase), on captured decisions under staircases of random open cells from generous to tight."""
    pool = load_pool(example_pool_path)
    arr, decisions = _decisions(pool, dag, 1.5, 1.5, trial=2)
    bounds = plan_bounds(arr)
    rng = np.random.default_rng(10 + dag)
    M = 8
    skipped = kept = 0
    for dec in decisions[:6]:
        for scale in (2.0, 1.0, 0.5, 0.25):
            nb, nh = 6, 5
            bvals = np.sort(rng.uniform(0.2, 1.0, nb)) * dec.budget * scale
            hvals = np.sort(rng.uniform(0.2, 1.0, nh)) * dec.horizon * scale
            cell_i, cell_j = np.divmod(np.arange(nb * nh), nh)
            bar = rng.integers(0, M + 1, nb * nh)  # some cells closed (M), the others open at random bests
            stair_b, stair_h = np.empty(nb), np.empty((nb, M + 1))
            _lowest, top_b, top_h = _staircase(bvals, hvals, cell_i, cell_j, bar, M, stair_b, stair_h)
            n_skip, wrong = _floor_against_pairs(arr, bounds, dec, (stair_b, stair_h), M, (top_b, top_h))
            assert wrong == 0, (scale, wrong)
            skipped += n_skip
            kept += dec.cand_model.shape[0] - n_skip
    assert skipped > 0 and kept > 0  # both answers were met

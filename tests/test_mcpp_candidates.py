"""MCPP candidate generator: the published list, in order (docs/policies.md), and the corrected option."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simulator.mcpp.candidates import (
    CORRECTED_FULL,
    CORRECTED_SAMPLED,
    FULL,
    RANDOM,
    candidates_key,
    choose_free_nodes,
    faithful_draw,
    generate_candidates,
)

KS = (1, 4, 16, 64)


def spec_reference(available, ready, models, ks, free_n, max_exact, max_cand, key):
    """A literal transcription of docs/policies.md ("Candidate actions, in this order")."""
    out: list = []

    def add(a):
        if a not in out:
            out.append(a)

    levels = [[(j, k) for j in models if available[v, j] for k in ks] for v in ready]
    first = [[j for j in models if available[v, j]][0] for v in ready]
    for k in ks:
        add(tuple((f, k) for f in first))
        for j in models:
            if all(available[v, j] for v in ready):
                add(tuple((j, k) for _ in ready))
    n_base = len(out)
    cap = max(max_cand, n_base)
    prod = int(np.prod([len(lv) for lv in levels]))
    if len(ready) <= free_n and prod <= max_exact:
        for combo in itertools.product(*levels):
            if len(out) >= cap:
                break
            add(combo)
        return out, FULL
    free = choose_free_nodes(key, len(ready), min(len(ready), free_n))
    fixed = [r for r in range(len(ready)) if r not in free]
    for sk in ks if fixed else ks[:1]:
        for combo in itertools.product(*(levels[r] for r in free)):
            if len(out) >= cap:
                return out, RANDOM
            a = [None] * len(ready)
            for r in fixed:
                a[r] = (first[r], sk)
            for r, lv in zip(free, combo):
                a[r] = lv
            add(tuple(a))
    return out, RANDOM


def run(n_models, n_ready, max_cand=260, avail=None, generator="faithful", decision=0):
    available = np.ones((max(n_ready, 1), n_models), dtype=bool) if avail is None else avail
    ready = list(range(available.shape[0]))[:n_ready]
    key = candidates_key(42, 3, 1, decision)
    models = list(range(n_models))
    got = generate_candidates(available, ready, models, KS, 3, len(KS) ** 3, max_cand, key, generator)
    return got, (available, ready, models, key)


@pytest.mark.parametrize("n_models", [1, 4])
@pytest.mark.parametrize("n_ready", [1, 2, 3, 5])
def test_faithful_list_equals_spec(n_models, n_ready):
    (actions, mode, n_base), (available, ready, models, key) = run(n_models, n_ready)
    ref, ref_mode = spec_reference(available, ready, models, KS, 3, 64, 260, key)
    assert mode == ref_mode
    assert actions == ref
    assert n_base == 4 * n_models
    assert len(set(actions)) == len(actions)


def test_hand_cases():
    # one model, one node: the four counts, in base_ks order
    (actions, mode, n_base), _ = run(1, 1)
    assert actions == [((0, 1),), ((0, 4),), ((0, 16),), ((0, 64),)] and mode == FULL
    # four models, one node: k-major then model order (first model = model 0: its duplicate dropped)
    (actions, mode, n_base), _ = run(4, 1)
    assert actions[:5] == [((0, 1),), ((1, 1),), ((2, 1),), ((3, 1),), ((0, 4),)]
    assert len(actions) == 16 and mode == FULL
    # one model, three nodes: 4**3 = 64 <= max_exact -> full product after the 4 base actions
    (actions, mode, _), _ = run(1, 3)
    assert mode == FULL and len(actions) == 64
    assert actions[4] == ((0, 1), (0, 1), (0, 4))  # first product entry that is not a base action
    # four models, two nodes: 256 > 64 -> random branch even with 2 ready nodes (published bias)
    (actions, mode, _), _ = run(4, 2)
    assert mode == RANDOM and len(actions) == 256


def test_truncation_keeps_base_and_prefix_bias():
    (actions, mode, n_base), (_, _, _, key) = run(4, 3)
    assert mode == RANDOM and len(actions) == 260 and n_base == 16
    free = choose_free_nodes(key, 3, 3)
    # published bias: after the base actions the first free node never leaves (first model, k=1)
    assert all(a[free[0]] == (0, 1) for a in actions[n_base:])
    # five ready nodes: fixed nodes share (first model, k) and never use another model
    (actions, mode, n_base), (_, _, _, key) = run(4, 5)
    free = choose_free_nodes(key, 5, 3)
    fixed = [r for r in range(5) if r not in free]
    assert mode == RANDOM and len(actions) == 260
    assert all(a[r][0] == 0 for a in actions[n_base:] for r in fixed)
    # a cap below the number of base actions never cuts them
    (actions, _, n_base), _ = run(4, 5, max_cand=3)
    assert len(actions) == n_base == 16


def test_first_model_and_common_models():
    avail = np.array([[True, True, False], [False, True, True]])
    (actions, mode, n_base), _ = run(3, 2, avail=avail)
    # node 0's first model is 0, node 1's is 1; model 1 is the only one common to both
    assert actions[0] == ((0, 1), (1, 1))
    assert actions[1] == ((1, 1), (1, 1))
    assert actions[2] == ((0, 4), (1, 4))
    assert n_base == 8


def test_node_without_model_gives_no_action():
    avail = np.array([[True, False], [False, False]])
    got, _ = run(2, 2, avail=avail)
    assert got is None


def test_free_nodes_keyed_and_without_replacement():
    key = candidates_key(1, 2, 3, 4)
    a = choose_free_nodes(key, 7, 3)
    assert a == choose_free_nodes(key, 7, 3)
    assert len(set(a)) == 3 and all(0 <= x < 7 for x in a)
    draws = {tuple(choose_free_nodes(candidates_key(1, 2, 3, d), 7, 3)) for d in range(50)}
    assert len(draws) > 10


def test_corrected_generator():
    # two ready nodes, four models: the full product (256) fits in 260 -> exact
    (actions, mode, n_base), _ = run(4, 2, generator="corrected")
    assert mode == CORRECTED_FULL and len(actions) == 256
    # three ready nodes: sampled; the first free node is no longer stuck, fixed nodes may switch model
    (actions, mode, n_base), (_, _, _, key) = run(4, 3, generator="corrected")
    free = choose_free_nodes(key, 3, 3)
    assert mode == CORRECTED_SAMPLED and len(actions) == 260 and len(set(actions)) == 260
    assert len({a[free[0]] for a in actions[n_base:]}) > 4
    (actions, mode, n_base), (_, _, _, key) = run(4, 5, generator="corrected", max_cand=2048)
    fixed = [r for r in range(5) if r not in choose_free_nodes(key, 5, 3)]
    assert len(actions) == 2048
    assert len({a[fixed[0]][0] for a in actions[n_base:]}) == 4
    # deterministic for the same key
    assert run(4, 5, generator="corrected")[0] == run(4, 5, generator="corrected")[0]


@pytest.mark.parametrize("n_ready", [2, 3, 5])
def test_faithful_list_reads_its_key_only_through_the_draw(n_ready):
    """Keys with the same ``faithful_draw`` give the same list (what the planner's per-episode list cache rests on),
    with some nodes lacking a model, and different draws give different lists here."""
    rng = np.random.default_rng(5)
    available = rng.random((n_ready, 4)) < 0.7
    available[:, 1] = True
    ready, models = list(range(n_ready)), [0, 1, 2, 3]
    by_draw: dict = {}
    for decision in range(60):
        key = candidates_key(42, 3, 1, decision)
        got = generate_candidates(available, ready, models, KS, 3, len(KS) ** 3, 260, key)
        seen = by_draw.setdefault(faithful_draw(key, n_ready, 3), got)
        assert got == seen
    assert len(by_draw) > 1


def test_the_planners_list_cache_gives_the_fresh_lists():
    """A planner that decides many states (lists from its cache once seen) decides as planners that start fresh."""
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget, nominal_deadline
    from simulator.engine.episode import run_policy_episode
    from simulator.mcpp.policy import MCPortfolioPolicy
    from simulator.pools.pool import load_pool

    pool = load_pool("examples/example_pool.jsonl")
    arr = dag_arrays(pool, 0, CostSetting())
    B, D = nominal_budget(arr), nominal_deadline(arr)
    params = {"M": 8}
    kept = MCPortfolioPolicy(params)
    for trial in range(6):
        a = run_policy_episode(arr, kept, 0.5 * B, 1.5 * D, 0, 0, trial)
        b = run_policy_episode(arr, MCPortfolioPolicy(params), 0.5 * B, 1.5 * D, 0, 0, trial)
        assert (a.success, a.makespan, a.total_cost) == (b.success, b.makespan, b.total_cost)
    assert kept.episode_tables.keyed  # the cache was used

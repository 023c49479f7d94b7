"""One definition per rule: the modules that apply a rule use the same function, not a copy of it."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.pools import graph, stats
from simulator.pools.pool import pool_from_objects
from tests.dags import chain_dag, make_node


def test_pool_loader_template_from_rows_is_the_builders_template():
    """A line with rows but no template gets exactly the template a pool builder writes."""
    rows = [(1.0, 1, 10.0), (2.5, 0, 12.0), (0.7, 1, 9.0), (3.3, 1, 30.0), (1.1, 0, 11.0)]
    nd = make_node(0, [], [], rows=rows)
    del nd["template"]
    dag = pool_from_objects([{"problem_id": "rows_only", "nodes": [nd]}])[0]
    want = stats.template_from_rows(nd["empirical_samples"])
    assert dag.success_prob[0, 0] == want["success_prob"] == 0.6
    assert dag.lat_mean[0, 0] == want["lat_mean"]
    assert dag.lat_std[0, 0] == want["lat_std"]  # population std (ddof 0), exact sums
    assert dag.cost_mean[0, 0] == want["cost_mean"]


def _random_parents(rng: np.random.Generator, n: int) -> list[list[int]]:
    """A random DAG on 0..n-1 with edges from lower to higher ids, then relabelled at random."""
    perm = rng.permutation(n)
    parents: list[list[int]] = [[] for _ in range(n)]
    for v in range(1, n):
        for u in range(v):
            if rng.random() < 0.3:
                parents[int(perm[v])].append(int(perm[u]))
    return parents


@pytest.mark.parametrize("seed", range(5))
def test_one_topological_order_and_depth(seed):
    rng = np.random.default_rng(seed)
    n = 12
    parents = _random_parents(rng, n)
    children = list(graph.children_of(dict(enumerate(parents))).values())
    pptr, pidx = graph.csr(parents)
    cptr, cidx = graph.csr(children)
    order = graph.topological_order(pptr, pidx, cptr, cidx)
    assert sorted(order) == list(range(n))
    where = {v: k for k, v in enumerate(order)}
    assert all(where[p] < where[v] for v in range(n) for p in parents[v])
    # depth by brute force: longest path from a root
    def longest(v: int) -> int:
        return max((longest(p) + 1 for p in parents[v]), default=0)

    want = [longest(v) for v in range(n)]
    assert graph.longest_path_depths(order, pptr, pidx) == want
    assert list(graph.node_depths(dict(enumerate(parents))).values()) == want
    nodes = [make_node(v, parents[v], children[v]) for v in range(n)]
    dag = pool_from_objects([{"problem_id": "r", "nodes": nodes}])[0]
    assert dag.depth() == max(want) + 1


def test_topological_order_is_short_on_a_cycle_and_node_depths_names_it():
    parents = [[2], [0], [1], []]  # 0 <- 2 <- 1 <- 0, and a lone root 3
    children = list(graph.children_of(dict(enumerate(parents))).values())
    order = graph.topological_order(*graph.csr(parents), *graph.csr(children))
    assert order == [3]
    with pytest.raises(graph.CycleError) as exc:
        graph.node_depths(dict(enumerate(parents)))
    assert sorted(exc.value.cycle) == [0, 1, 2]


def test_pool_depth_of_a_chain():
    assert pool_from_objects([chain_dag(4)])[0].depth() == 4


def test_reports_share_the_engine_reasons_and_the_scoring_intervals():
    from harness import analyze
    from simulator.base import scoring
    from simulator.engine import loop as engine

    assert analyze.REASONS is engine.REASONS
    assert analyze.wilson_interval is scoring.wilson_interval
    assert analyze.paired_difference is scoring.paired_difference

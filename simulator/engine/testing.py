"""Small DAG pool lines and the first decision view, for the MCPP tests and benchmarks.

Why in the package: the tests and ``benchmarks/`` both build these DAGs, and
``benchmarks/`` must not import from ``tests/``. The pool lines are written by
hand (not by :mod:`poolbuild.synthetic`) so that the MCPP tests depend only on
the pool format (``docs/pool_format.md``), not on a generator whose defaults may change.
"""

from __future__ import annotations

import numpy as np

from simulator.costs.arrays import DagArrays
from simulator.engine.episode import DecisionView

MODELS4 = ("m0", "m1", "m2", "m3")


def node(node_id, parents, children, templates=None, rows=None, template=None):
    nd = {"node_id": node_id, "parents": list(parents), "children": list(children)}
    if templates is not None:
        nd["model_templates"] = templates
    if rows is not None:
        nd["empirical_samples_by_model"] = rows
    if template is not None:
        nd["template"] = template
    return nd


def tpl(p, lat=10.0, std=0.0, cost=100.0):
    return {"success_prob": p, "lat_mean": lat, "lat_std": std, "cost_mean": cost, "token_cost_mean": cost}


def layered_dag(
    seed: int,
    n_nodes: int = 20,
    width: int = 4,
    models=MODELS4,
    n_rows: int = 12,
    with_rows: bool = True,
    p_range=(0.3, 0.95),
) -> dict:
    """A layered DAG (layers of <= ``width`` nodes, each node 1-2 parents in the previous layer).

    Models differ in success, latency and cost (stronger = slower and dearer);
    with ``with_rows`` every (node, model) gets empirical rows where long
    generations fail more often.
    """
    rng = np.random.default_rng(seed)
    layers: list[list[int]] = []
    v = 0
    while v < n_nodes:
        w = int(min(rng.integers(1, width + 1), n_nodes - v))
        layers.append(list(range(v, v + w)))
        v += w
    parents: dict[int, list[int]] = {u: [] for u in range(n_nodes)}
    for li in range(1, len(layers)):
        prev = layers[li - 1]
        for u in layers[li]:
            k = int(min(len(prev), rng.integers(1, 3)))
            parents[u] = sorted(int(x) for x in rng.choice(prev, size=k, replace=False))
    children: dict[int, list[int]] = {u: [] for u in range(n_nodes)}
    for u, ps in parents.items():
        for p in ps:
            children[p].append(u)
    nodes = []
    for u in range(n_nodes):
        tpls, rows = {}, {}
        hard = rng.uniform(0, 1)
        for mi, m in enumerate(models):
            strength = (mi + 1) / len(models)
            p = float(np.clip(p_range[0] + (p_range[1] - p_range[0]) * (0.5 * strength + 0.5 * (1 - hard)), 0, 1))
            lat = float(5.0 + 20.0 * strength * rng.uniform(0.5, 1.5))
            cost = float(200.0 + 800.0 * strength * rng.uniform(0.5, 1.5))
            if with_rows:
                r = []
                for _ in range(n_rows):
                    lt = float(lat * rng.lognormal(0.0, 0.4))
                    s = bool(rng.uniform() < p * (1.2 if lt < lat else 0.8))
                    r.append({"latency": lt, "success": int(s), "cost": cost, "token_cost": float(cost * lt / lat)})
                rows[m] = r
                ps = float(np.mean([x["success"] for x in r]))
                tpls[m] = tpl(ps, lat, lat * 0.4, cost)
            else:
                tpls[m] = tpl(p, lat, lat * 0.4, cost)
        nodes.append(node(u, parents[u], children[u], tpls, rows if with_rows else None))
    return {"problem_id": f"layered_{seed}", "dag_kind": "layered", "model_ids": list(models), "nodes": nodes}


_NO_INTS = np.zeros(0, dtype=np.int64)


def first_view(
    arr: DagArrays, budget: float, deadline: float, seed: int = 42, dag: int = 0, trial: int = 0
) -> DecisionView:
    """The planner's view at the start of an episode: t = 0, nothing done, the roots ready."""
    ready = np.array([v for v in range(arr.n) if arr.parent_ptr[v + 1] == arr.parent_ptr[v]], dtype=np.int64)
    return DecisionView(
        arr, 0.0, float(budget), float(deadline), np.zeros(arr.n, dtype=bool), ready, _NO_INTS, _NO_INTS,
        np.zeros(0, dtype=bool), np.zeros(1, dtype=np.int64), np.zeros(0), seed, dag, trial, 0,
    )

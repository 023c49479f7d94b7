"""The two DAGs of the further baselines' worked examples, as pool lines and per-node inputs.

Nodes are (id, parents, p, lat_mean s, token_cost_mean) with lat_std =
0.3 lat_mean, no empirical rows, legacy model ``default`` priced as
``30B_ins`` ($0.8 per 1M output tokens) in money mode.
"""

from __future__ import annotations

import numpy as np

from simulator.baselines.further.inputs import legacy_inputs
from simulator.baselines.further.loader import LoaderGraph
from simulator.costs.arrays import CostSetting, build_arrays
from simulator.pools.pool import pool_from_objects

CHAIN = [(0, [], 0.5, 20.0, 1000.0), (1, [0], 0.8, 10.0, 500.0), (2, [1], 0.95, 30.0, 2000.0)]
DIAMOND = [
    (0, [], 0.6, 10.0, 800.0),
    (1, [0], 0.3, 40.0, 3000.0),
    (2, [0], 0.9, 15.0, 600.0),
    (3, [1, 2], 0.7, 20.0, 1200.0),
]
MONEY = CostSetting(cost_mode="money")


def pool_line(spec, name="dag"):
    children = {nid: [] for nid, *_ in spec}
    for nid, parents, *_ in spec:
        for u in parents:
            children[u].append(nid)
    nodes = []
    for nid, parents, p, lat, tok in spec:
        nodes.append({
            "node_id": nid, "parents": parents, "children": children[nid],
            "template": {"success_prob": p, "lat_mean": lat, "lat_std": 0.3 * lat, "cost_mean": tok,
                         "token_cost_mean": tok},
            "legacy_template_model": "30B_ins",
        })  # fmt: skip
    return {"problem_id": name, "dag_kind": "test", "nodes": nodes}


def arrays(spec, setting: CostSetting = MONEY, name="dag"):
    pool = pool_from_objects([pool_line(spec, name)])
    return build_arrays(pool[0], setting)


def inputs(spec, setting: CostSetting = MONEY):
    """(graph, t, p, kappa) through the same path the policies use."""
    li = legacy_inputs(arrays(spec, setting), "test", 0)
    return li.graph, li.t, li.p, li.kappa


def graph(parents: list[list[int]], node_ids=None) -> LoaderGraph:
    """A LoaderGraph from parent lists (children in increasing order)."""
    n = len(parents)
    ch = [[] for _ in range(n)]
    for v, ps in enumerate(parents):
        for u in ps:
            ch[u].append(v)

    def csr(lists):
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(x) for x in lists])
        return ptr, np.array([i for x in lists for i in x], dtype=np.int64)

    pp, pi = csr(parents)
    cp, ci = csr(ch)
    ids = np.arange(n, dtype=np.int64) if node_ids is None else np.asarray(node_ids, dtype=np.int64)
    return LoaderGraph(pp, pi, cp, ci, ids)

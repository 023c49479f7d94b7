"""Tiny pools built in memory: the DAG builders many tests share.

Plain functions in a module of their own (not in ``conftest.py``): a test
imports them as ``from tests.dags import chain_dag``, and ``conftest.py``
holds only fixtures, which pytest hands to a test by name.
"""

from __future__ import annotations

import json


def make_node(nid, parents, children, p=0.5, lat=2.0, lat_std=1.0, cost=100.0, rows=None, **extra):
    """One single-model node; ``rows`` = list of (latency, success, cost)."""
    node = {
        "node_id": nid,
        "parents": list(parents),
        "children": list(children),
        "template": {"success_prob": p, "lat_mean": lat, "lat_std": lat_std, "cost_mean": cost,
                     "token_cost_mean": cost},
    }
    if rows is not None:
        node["empirical_samples"] = [
            {"latency": a, "success": s, "cost": c, "token_cost": c} for a, s, c in rows
        ]
    node.update(extra)
    return node


def chain_dag(n, **kw):
    """A chain 0 -> 1 -> ... -> n-1 of :func:`make_node` nodes (``kw`` goes to every node)."""
    return {"problem_id": f"chain{n}", "dag_kind": "chain",
            "nodes": [make_node(i, [i - 1] if i else [], [i + 1] if i < n - 1 else [], **kw) for i in range(n)]}


def write_lines(path, lines):
    """Write DAG objects (or raw strings, written as they are) one per line; returns the path as a string."""
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line if isinstance(line, str) else json.dumps(line))
            fh.write("\n")
    return str(path)

"""Shared fixtures: tiny pools built in memory, a tmp pool writer."""

from __future__ import annotations

import json
import os

import pytest

#: the repository root (tests start subprocesses there)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    return {"problem_id": f"chain{n}", "dag_kind": "chain",
            "nodes": [make_node(i, [i - 1] if i else [], [i + 1] if i < n - 1 else [], **kw) for i in range(n)]}


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line if isinstance(line, str) else json.dumps(line))
            fh.write("\n")
    return str(path)


@pytest.fixture
def pool_file(tmp_path):
    """Write a list of DAG objects (or raw strings) as a pool file; returns its path."""

    def _make(lines, name="pool.jsonl"):
        return write_lines(tmp_path / name, lines)

    return _make

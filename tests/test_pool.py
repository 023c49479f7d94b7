"""Pool loading: every rejection of docs/pool_format.md names file, line, problem and node."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from simulator.base.errors import PoolError
from simulator.pools.pool import load_index_file, load_pool, pool_from_objects, write_index_file, write_pool
from tests.dags import chain_dag, make_node


def _expect(pool_file, obj, *fragments, line=2):
    """Pool = a good DAG on line 1, the bad one on ``line``; check the message."""
    lines = [chain_dag(2)] + [obj]
    path = pool_file(lines)
    with pytest.raises(PoolError) as exc:
        load_pool(path)
    msg = str(exc.value)
    assert path in msg and f"line {line}" in msg, msg
    for f in fragments:
        assert f in msg, msg
    return exc.value


def test_good_pool_loads_and_keeps_order(pool_file):
    path = pool_file([chain_dag(3), "", chain_dag(2)])  # blank line skipped
    pool = load_pool(path)
    assert len(pool) == 2 and pool[0].n_nodes == 3 and pool[1].line == 3
    assert pool.model_ids == ("default",)
    assert pool.raw(1)["problem_id"] == "chain2"
    assert pool[0].depth() == 3


def test_invalid_json_shows_preview(pool_file):
    path = pool_file([chain_dag(2), '{"nodes": [1, 2,'])
    with pytest.raises(PoolError) as exc:
        load_pool(path)
    assert "line 2" in str(exc.value) and "not valid JSON" in str(exc.value)
    assert '{"nodes": [1, 2,' in str(exc.value)


def test_missing_nodes(pool_file):
    _expect(pool_file, {"problem_id": "p9"}, "problem 'p9'", "missing 'nodes'")


@pytest.mark.parametrize("key", ["node_id", "parents", "children"])
def test_node_missing_field(pool_file, key):
    d = chain_dag(2)
    d["problem_id"] = "pk"
    del d["nodes"][1][key]
    _expect(pool_file, d, "problem 'pk'", f"has no '{key}'")


def test_duplicate_node_id(pool_file):
    d = chain_dag(3)
    d["nodes"][2]["node_id"] = 1
    _expect(pool_file, d, "duplicate node id", "node 1")


def test_unknown_parent(pool_file):
    d = chain_dag(2)
    d["nodes"][1]["parents"] = [7]
    _expect(pool_file, d, "parent 7 is not a node", "node 1")


def test_unknown_child(pool_file):
    d = chain_dag(2)
    d["nodes"][1]["children"] = [9]
    _expect(pool_file, d, "child 9 is not a node", "node 1")


def test_children_inconsistent(pool_file):
    d = chain_dag(3)
    d["nodes"][0]["children"] = [1, 2]
    _expect(pool_file, d, "children inconsistent with parents", "node 0")


def test_self_loop(pool_file):
    d = chain_dag(2)
    d["nodes"][1]["parents"].append(1)
    d["nodes"][1]["children"].append(1)
    _expect(pool_file, d, "self-loop", "node 1")


def test_cycle(pool_file):
    d = chain_dag(3)
    d["nodes"][0]["parents"] = [2]
    d["nodes"][2]["children"] = [0]
    _expect(pool_file, d, "cycle")


def test_no_usable_statistics(pool_file):
    d = chain_dag(2)
    del d["nodes"][1]["template"]
    _expect(pool_file, d, "no usable statistics", "node 1")


def test_unavailable_everywhere_is_no_statistics(pool_file):
    d = chain_dag(2)
    d["nodes"][1]["template"]["lat_mean"] = math.inf
    _expect(pool_file, d, "no usable statistics", "node 1")


@pytest.mark.parametrize("p", [1.5, -0.1, float("nan")])
def test_success_prob_out_of_range(pool_file, p):
    d = chain_dag(2)
    d["nodes"][0]["template"]["success_prob"] = p
    _expect(pool_file, d, "success_prob", "[0, 1]", "node 0")


@pytest.mark.parametrize("field,value,words", [
    ("lat_mean", -1.0, "negative"), ("cost_mean", float("nan"), "NaN"), ("lat_std", -2, "negative")])
def test_bad_template_numbers(pool_file, field, value, words):
    d = chain_dag(2)
    d["nodes"][1]["template"][field] = value
    _expect(pool_file, d, field, words, "node 1")


def test_bad_row(pool_file):
    d = chain_dag(2, rows=[(1.0, 1, 5.0)])
    d["nodes"][0]["empirical_samples"][0]["latency"] = -3
    _expect(pool_file, d, "latency of empirical row 0", "negative", "node 0")
    d = chain_dag(2, rows=[(1.0, 1, 5.0)])
    del d["nodes"][1]["empirical_samples"][0]["success"]
    _expect(pool_file, d, "has no 'success'", "node 1")


def test_n_nodes_mismatch(pool_file):
    d = chain_dag(2)
    d["n_nodes"] = 5
    _expect(pool_file, d, "n_nodes=5")


def test_index_files(tmp_path, pool_file):
    path = pool_file([chain_dag(2), chain_dag(3), chain_dag(4)])
    for content in ([2, 0], {"dag_indices": [2, 0]}, {"selected_dag_indices": [2, 0]},
                    {"selected_indices": [2, 0]}, {"indices": [2, 0]}):
        (tmp_path / "idx.json").write_text(json.dumps(content))
        idx = load_index_file(tmp_path / "idx.json", pool_size=3)
        sub = load_pool(path, indices=idx)
        assert [d.n_nodes for d in sub] == [4, 2] and sub[0].index == 2
    (tmp_path / "bad.json").write_text(json.dumps({"dag_indices": [0, 3]}))
    with pytest.raises(PoolError) as exc:
        load_index_file(tmp_path / "bad.json", pool_size=3)
    assert "bad.json" in str(exc.value) and "index 3" in str(exc.value)
    write_index_file(tmp_path / "w.json", [1])
    assert json.loads((tmp_path / "w.json").read_text()) == {"dag_indices": [1]}


def test_row_fallbacks_and_floors():
    d = chain_dag(1)
    d["nodes"][0]["empirical_samples"] = [
        {"latency": 0.0, "success": True},  # cost <- latency, token_cost <- latency, floors
        {"latency": 2.0, "success": 0, "total_tokens": 40},  # token_cost <- total_tokens
        {"latency": 3.0, "success": 1, "token_cost": 7},  # cost <- token_cost
    ]
    s = pool_from_objects([d])[0]
    assert np.allclose(s.row_latency, [1e-3, 2.0, 3.0])
    assert np.allclose(s.row_cost, [1e-3, 2.0, 7.0])
    assert np.allclose(s.row_token_cost, [1e-3, 40.0, 7.0])
    assert s.row_success.tolist() == [True, False, True]


def test_multi_model_with_imputed_model():
    nodes = []
    for i in range(2):
        n = make_node(i, [0] if i else [], [1] if not i else [])
        del n["template"]
        n["model_templates"] = {
            "a": {"success_prob": 0.5, "lat_mean": 1.0, "lat_std": 0.0, "cost_mean": 10.0},
            "b": {"success_prob": 0.0, "lat_mean": math.inf, "lat_std": math.inf, "cost_mean": math.inf},
        }
        n["empirical_samples_by_model"] = {"a": [{"latency": 1.0, "success": 1, "cost": 3}]}
        n["legacy_template_model"] = "a"
        nodes.append(n)
    s = pool_from_objects([{"nodes": nodes, "model_ids": ["a", "b"]}])[0]
    assert s.model_ids == ("a", "b")
    assert s.available.tolist() == [[True, False], [True, False]]
    assert s.legacy_model.tolist() == [0, 0]
    assert s.rows(1, 0) == slice(1, 2) and s.rows(1, 1) == slice(2, 2)


def test_write_pool_atomic_and_validated(tmp_path):
    good = [chain_dag(2)]
    write_pool(tmp_path / "p.jsonl", good)
    assert load_pool(tmp_path / "p.jsonl")[0].n_nodes == 2
    bad = copy.deepcopy(good)
    bad[0]["nodes"][0]["children"] = []
    with pytest.raises(PoolError):
        write_pool(tmp_path / "q.jsonl", bad)
    assert not (tmp_path / "q.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

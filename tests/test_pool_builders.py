"""Pool builders: rollout records -> pool (filters, rows, outputs) and multi-model alignment."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest

from poolbuild import build_aligned as aligner
from poolbuild import build_loader as loader
from poolbuild.dag_builder import BuildOptions
from simulator.base.errors import UserError
from simulator.pools.pool import load_index_file, load_pool

REPO = Path(__file__).resolve().parents[1]

# (node_id, parents, successes); attempt k: infer 1+k s, eval 0.5 s, output 100*(k+1) tokens
CHAIN = [(0, [], [1, 0, 1]), (1, [0], [0, 1, 1]), (2, [0, 1], [1, 1, 0])]


def attempt(pid, model, nid, k, ok, **over):
    a = {
        "rollout_id": f"{pid}/{nid}/{model}/{k}", "model": model,
        "prompt_tokens": 50, "output_tokens": 100 * (k + 1), "total_tokens": 50 + 100 * (k + 1),
        "token_source": "usage", "infer_latency_sec": 1.0 + k, "latency_source": "request",
        "eval_latency_sec": 0.5, "success": bool(ok), "pass_rate": 1.0 if ok else 0.5,
        "failure_reason": None if ok else "wrong_answer",
    }
    a.update(over)
    return {k2: v for k2, v in a.items() if v is not ...}


def record(pid, model, spec=CHAIN, names=True, node_over=None):
    node_over = node_over or {}
    nodes = []
    for nid, parents, succ in spec:
        nd = {"node_id": nid, "parents": list(parents), "depth": 0,
              "attempts": [attempt(pid, model, nid, k, ok) for k, ok in enumerate(succ)]}
        if names:
            nd["name"] = f"f{nid}"
        nd.update(node_over.get(nid, {}))
        nodes.append(nd)
    return {"benchmark": "codeflow", "problem_id": pid, "model": model,
            "generation": {"temperature": 0.6, "n": len(spec[0][2])},
            "overall_depth": 3, "overall_turns": 3, "nodes": nodes}


def write_records(root: Path, recs: list[dict]) -> Path:
    for r in recs:
        p = root / r["model"] / f"{r['problem_id']}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(r))
    return root


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


# ============================================================================ single-model builder


def test_build_pool_templates_rows_and_outputs(tmp_path):
    root = write_records(tmp_path / "r", [record("p1", "m"), record("p2", "m")])
    (root / "m" / ".p3.json.tmp").write_text("{truncated")  # interrupted generator: skipped
    out = tmp_path / "out" / "pool.jsonl"
    s = loader.build_pool([root], out, BuildOptions())
    assert s["files_scanned"] == 2 and s["dags_written"] == 2 and s["dags_excluded"] == 0
    pool = load_pool(out)
    assert len(pool) == 2
    assert load_index_file(out.parent / "selected_dag_indices.json", len(pool)) == [0, 1]
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["problem_ids"] == ["p1", "p2"] and summary["latency"] == "infer"
    dag = lines(out)[0]
    assert dag["problem_id"] == "p1" and dag["dag_kind"] == "codeflow_rollout"
    assert dag["overall_turns"] == 3 and dag["baseline_model"] == "m"
    n2 = dag["nodes"][2]
    assert n2["parents"] == [0, 1] and n2["layer"] == 2 and dag["nodes"][0]["children"] == [1, 2]
    t = n2["template"]
    assert t["success_prob"] == pytest.approx(2 / 3)
    assert t["lat_mean"] == pytest.approx(2.0)
    assert t["lat_std"] == pytest.approx(math.sqrt(2 / 3))
    assert t["cost_mean"] == t["token_cost_mean"] == pytest.approx(200.0)
    row = n2["empirical_samples"][2]
    assert row == {"latency": 3.0, "success": 0, "cost": 300.0, "token_cost": 300.0,
                   "rollout_id": "p1/2/m/2", "infer_latency_sec": 3.0, "eval_latency_sec": 0.5,
                   "pass_rate": 0.5, "latency_source": "request",
                   "failure_reason": "wrong_answer"}
    assert n2["legacy_template_model"] == "m" and n2["name"] == "f2"
    assert not list(out.parent.glob("*.tmp"))


def test_include_eval_latency(tmp_path):
    root = write_records(tmp_path / "r", [record("p1", "m")])
    out = tmp_path / "pool.jsonl"
    loader.build_pool([root], out, BuildOptions(include_eval_latency=True))
    assert lines(out)[0]["nodes"][0]["empirical_samples"][0]["latency"] == 1.5


def test_no_attempts_error_or_filter(tmp_path):
    bad = record("p2", "m", node_over={1: {"attempts": []}})
    root = write_records(tmp_path / "r", [record("p1", "m"), bad])
    out = tmp_path / "pool.jsonl"
    with pytest.raises(UserError, match="problem 'p2' node 1 has no attempts.*--drop-no-attempts"):
        loader.build_pool([root], out, BuildOptions())
    s = loader.build_pool([root], out, BuildOptions(drop_no_attempts=True))
    assert s["dags_written"] == 1
    assert s["excluded"][0]["problem_id"] == "p2" and s["excluded"][0]["filter"] == "no_attempts"
    assert "node 1 (f1) has no attempts" in s["excluded"][0]["reason"]


def test_never_succeeded_kept_or_filtered(tmp_path):
    dead = record("p2", "m", spec=[(0, [], [1, 1]), (1, [0], [0, 0])])
    root = write_records(tmp_path / "r", [record("p1", "m"), dead])
    out = tmp_path / "pool.jsonl"
    assert loader.build_pool([root], out, BuildOptions())["dags_written"] == 2
    assert lines(out)[1]["nodes"][1]["template"]["success_prob"] == 0.0
    s = loader.build_pool([root], out, BuildOptions(drop_never_succeeded=True))
    assert s["dags_written"] == 1 and s["excluded"][0]["filter"] == "never_succeeded"
    assert [d["problem_id"] for d in lines(out)] == ["p1"]


def test_no_latency_error_or_filter(tmp_path):
    rec = record("p2", "m")
    del rec["nodes"][0]["attempts"][1]["infer_latency_sec"]
    root = write_records(tmp_path / "r", [record("p1", "m"), rec])
    out = tmp_path / "pool.jsonl"
    with pytest.raises(UserError, match="attempt 1 has no latency"):
        loader.build_pool([root], out, BuildOptions())
    s = loader.build_pool([root], out, BuildOptions(drop_no_latency=True))
    assert s["excluded"][0]["filter"] == "no_latency" and s["dags_written"] == 1


def test_batch_latency_scaled_by_token_share(tmp_path):
    rec = record("p1", "m", spec=[(0, [], [1, 0, 1])])
    for a in rec["nodes"][0]["attempts"]:
        del a["infer_latency_sec"]
        a["batch_latency_sec"] = 12.0
        a["batch_id"] = "b0"
    root = write_records(tmp_path / "r", [rec])
    out = tmp_path / "pool.jsonl"
    loader.build_pool([root], out, BuildOptions())
    rows = lines(out)[0]["nodes"][0]["empirical_samples"]
    assert [r["latency"] for r in rows] == pytest.approx([2.0, 4.0, 6.0])  # 100:200:300 tokens
    assert {r["latency_source"] for r in rows} == {"batch_token_share"}


def test_missing_tokens_node_mean_flagged(tmp_path):
    rec = record("p1", "m", spec=[(0, [], [1, 0, 1])])
    del rec["nodes"][0]["attempts"][0]["output_tokens"]
    rec["nodes"][0]["attempts"][2]["token_source"] = "estimated"
    root = write_records(tmp_path / "r", [rec])
    out = tmp_path / "pool.jsonl"
    loader.build_pool([root], out, BuildOptions())
    rows = lines(out)[0]["nodes"][0]["empirical_samples"]
    assert rows[0]["token_cost"] == 250.0 and rows[0]["token_cost_source"] == "node_mean"
    assert "token_cost_source" not in rows[1]
    assert rows[2]["token_source"] == "estimated"


def test_input_forms_and_model_choice(tmp_path):
    a, b = record("p1", "m1"), record("p1", "m2")
    jl = tmp_path / "all.jsonl"
    jl.write_text(json.dumps(a) + "\n\n" + json.dumps(b) + "\n")
    lst = tmp_path / "list.json"
    lst.write_text(json.dumps([a]))
    out = tmp_path / "pool.jsonl"
    with pytest.raises(UserError, match="several models.*--model"):
        loader.build_pool([jl], out, BuildOptions())
    assert loader.build_pool([jl], out, BuildOptions(), model="m2")["dags_written"] == 1
    assert lines(out)[0]["baseline_model"] == "m2"
    assert loader.build_pool([lst], out, BuildOptions())["dags_written"] == 1
    with pytest.raises(UserError, match="appears twice"):
        loader.build_pool([lst, jl], out, BuildOptions(), model="m1")
    with pytest.raises(UserError, match="no records of model 'zz'"):
        loader.build_pool([jl], out, BuildOptions(), model="zz")


def test_bad_records_are_clear_errors(tmp_path):
    f = tmp_path / "r.json"
    f.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        loader.build_pool([f], tmp_path / "p.jsonl", BuildOptions())
    rec = record("p1", "m")
    rec["nodes"][1]["parents"] = [7]
    f.write_text(json.dumps(rec))
    with pytest.raises(UserError, match="problem 'p1' node 1: parent 7 is not a node"):
        loader.build_pool([f], tmp_path / "p.jsonl", BuildOptions())
    rec = record("p1", "m")
    rec["nodes"][0]["parents"] = [2]
    f.write_text(json.dumps(rec))
    with pytest.raises(UserError, match="cycle"):
        loader.build_pool([f], tmp_path / "p.jsonl", BuildOptions())
    rec = record("p1", "m")
    del rec["nodes"][0]["attempts"][0]["success"]
    f.write_text(json.dumps(rec))
    with pytest.raises(UserError, match="no verifier verdict"):
        loader.build_pool([f], tmp_path / "p.jsonl", BuildOptions())
    with pytest.raises(UserError, match="does not exist"):
        loader.build_pool([tmp_path / "nope"], tmp_path / "p.jsonl", BuildOptions())


def test_self_loop_dropped_with_warning(tmp_path, caplog):
    rec = record("p1", "m")
    rec["nodes"][1]["parents"] = [0, 1]
    root = write_records(tmp_path / "r", [rec])
    out = tmp_path / "pool.jsonl"
    with caplog.at_level(logging.WARNING, logger="poolbuild"):
        loader.build_pool([root], out, BuildOptions())
    assert "self-loop dropped" in caplog.text
    assert lines(out)[0]["nodes"][1]["parents"] == [0]


def test_loader_cli(tmp_path):
    root = write_records(tmp_path / "r", [record("p1", "m")])
    out = tmp_path / "pool.jsonl"
    assert loader.main([str(root), "--out", str(out), "--summary-out",
                        str(tmp_path / "s.json"), "--index-out", str(tmp_path / "i.json")]) == 0
    assert json.loads((tmp_path / "i.json").read_text()) == {"dag_indices": [0]}
    assert json.loads((tmp_path / "s.json").read_text())["dags_written"] == 1
    assert loader.main([str(tmp_path / "missing"), "--out", str(out)]) == 2
    r = subprocess.run([sys.executable, str(REPO / "build_loader_dag_pool_from_rollouts.py"),
                        "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "--drop-never-succeeded" in r.stdout


# ============================================================================ aligner


def _two_models(tmp_path, b_records):
    recs = [record(p, "A") for p in ("p0", "p1", "p2")] + b_records
    return write_records(tmp_path / "r", recs)


def _sources(root):
    return aligner.collect_sources([], [], str(root))


def test_align_complete(tmp_path):
    root = _two_models(tmp_path, [record(p, "B", spec=[(n, ps, s[::-1]) for n, ps, s in CHAIN])
                                  for p in ("p0", "p1", "p2")])
    out = tmp_path / "al"
    s = aligner.build_aligned(_sources(root), out, "error", baseline_model="B")
    assert s["complete_problems"] == ["p0", "p1", "p2"] and s["dags_written"]["multi_model"] == 3
    pa, pb, multi = lines(out / "A.jsonl"), lines(out / "B.jsonl"), lines(out / "multi_model.jsonl")
    for x, y in zip(pa, pb, strict=True):
        assert x["problem_id"] == y["problem_id"]
        assert [(n["node_id"], n["parents"], n["children"]) for n in x["nodes"]] == \
               [(n["node_id"], n["parents"], n["children"]) for n in y["nodes"]]
    m0 = multi[0]
    assert m0["model_ids"] == ["A", "B"] and m0["baseline_model"] == "B"
    n1 = m0["nodes"][1]
    assert set(n1["model_templates"]) == {"A", "B"} == set(n1["empirical_samples_by_model"])
    assert n1["model_templates"]["A"] == pa[0]["nodes"][1]["template"]
    assert n1["empirical_samples_by_model"]["B"] == pb[0]["nodes"][1]["empirical_samples"]
    assert n1["template"] == n1["model_templates"]["B"] and n1["legacy_template_model"] == "B"
    pool = load_pool(out / "multi_model.jsonl")
    assert pool[0].model_ids == ("A", "B") and pool[0].available.all()
    for name in ("A.jsonl", "B.jsonl"):
        assert len(load_pool(out / name)) == 3
    assert load_index_file(out / "selected_dag_indices.json", 3) == [0, 1, 2]


def _partial_b():
    """B: p0 complete, p1 without attempts on node 1, p2 absent."""
    return [record("p0", "B"), record("p1", "B", node_over={1: {"attempts": []}})]


def test_align_impute(tmp_path):
    root = _two_models(tmp_path, _partial_b())
    out = tmp_path / "al"
    s = aligner.build_aligned(_sources(root), out, "impute")
    assert s["complete_problems"] == ["p0"]
    assert [d["problem_id"] for d in s["imputed_problems"]] == ["p1", "p2"]
    assert [d["problem_id"] for d in lines(out / "A.jsonl")] == ["p0"]
    assert [d["problem_id"] for d in lines(out / "B.jsonl")] == ["p0"]
    multi = lines(out / "multi_model.jsonl")
    assert [d["problem_id"] for d in multi] == ["p0", "p1", "p2"]
    assert multi[1]["imputed_models"] == {"B": [1]}
    assert multi[2]["imputed_models"] == {"B": "all nodes"}
    imp = multi[1]["nodes"][1]["model_templates"]["B"]
    assert imp["success_prob"] == 0 and math.isinf(imp["lat_mean"]) and math.isinf(imp["cost_mean"])
    assert "B" not in multi[1]["nodes"][1]["empirical_samples_by_model"]
    assert multi[1]["nodes"][1]["available_model_ids"] == ["A"]
    assert multi[1]["nodes"][0]["available_model_ids"] == ["A", "B"]
    assert "Infinity" in (out / "multi_model.jsonl").read_text()
    pool = load_pool(out / "multi_model.jsonl")
    assert pool[1].available.tolist() == [[True, True], [True, False], [True, True]]
    assert not pool[2].available[:, 1].any() and pool[2].available[:, 0].all()
    assert load_index_file(out / "selected_dag_indices.json", len(pool)) == [0]


def test_align_impute_baseline_unavailable_falls_back(tmp_path):
    root = _two_models(tmp_path, _partial_b())
    out = tmp_path / "al"
    aligner.build_aligned(_sources(root), out, "impute", baseline_model="B")
    node = lines(out / "multi_model.jsonl")[1]["nodes"][1]
    assert node["legacy_template_model"] == "A" and node["template"]["success_prob"] > 0


def test_align_drop(tmp_path):
    root = _two_models(tmp_path, _partial_b())
    out = tmp_path / "al"
    s = aligner.build_aligned(_sources(root), out, "drop")
    assert [d["problem_id"] for d in lines(out / "multi_model.jsonl")] == ["p0"]
    reasons = {d["problem_id"]: d["reason"] for d in s["dropped_problems"]}
    assert reasons == {"p1": "missing models: B (nodes [1])", "p2": "missing models: B (all nodes)"}


def test_align_error(tmp_path):
    root = _two_models(tmp_path, _partial_b())
    with pytest.raises(UserError, match=r"problem 'p1' model 'B': no attempts on nodes \[1\]"):
        aligner.build_aligned(_sources(root), tmp_path / "al", "error")
    root2 = _two_models(tmp_path / "x", [record("p0", "B"), record("p1", "B")])
    with pytest.raises(UserError, match="problem 'p2' model 'B': no rollouts"):
        aligner.build_aligned(_sources(root2), tmp_path / "al2", "error")
    assert not (tmp_path / "al" / "multi_model.jsonl").exists()


@pytest.mark.parametrize(
    "b_spec, match",
    [
        (
            [(0, [], [1]), (1, [], [1]), (2, [0, 1], [1])],
            r"node 1 has parents \[0\] in 'A' but \[\]",
        ),
        ([(0, [], [1]), (1, [0], [1])], r"nodes only in 'A': \[2\], only in 'B': \[\]"),
    ],
)
def test_align_topology_mismatch(tmp_path, b_spec, match):
    root = _two_models(tmp_path, [record("p0", "B"), record("p1", "B", spec=b_spec),
                                  record("p2", "B")])
    for policy in ("impute", "drop", "error"):
        with pytest.raises(UserError, match="problem 'p1': topology differs") as ei:
            aligner.build_aligned(_sources(root), tmp_path / "al", policy)
        assert ei.match(match)


def test_align_name_mismatch(tmp_path):
    b = record("p0", "B", node_over={2: {"name": "other"}})
    root = write_records(tmp_path / "r", [record("p0", "A"), b])
    with pytest.raises(UserError, match="node 2 is named 'f2' in 'A' but 'other' in 'B'"):
        aligner.build_aligned(_sources(root), tmp_path / "al", "error")


def test_align_from_pools_matches_rollouts(tmp_path):
    root = _two_models(tmp_path, _partial_b())
    for m in ("A", "B"):
        loader.build_pool([root / m], tmp_path / f"{m}.jsonl", BuildOptions(drop_no_attempts=True))
    srcs = aligner.collect_sources([], [f"A={tmp_path / 'A.jsonl'}", f"B={tmp_path / 'B.jsonl'}"],
                                   None)
    s = aligner.build_aligned(srcs, tmp_path / "fromp", "impute")
    # p1 was excluded from B's pool (node without attempts): imputed on all nodes instead
    assert s["complete_problems"] == ["p0"]
    assert {d["problem_id"]: d["imputed_models"] for d in s["imputed_problems"]} == {
        "p1": {"B": "all nodes"}, "p2": {"B": "all nodes"}}
    via_rollouts = tmp_path / "fromr"
    aligner.build_aligned(_sources(root), via_rollouts, "impute")
    assert lines(tmp_path / "fromp" / "A.jsonl")[0]["nodes"] == lines(via_rollouts / "A.jsonl")[0][
        "nodes"]
    with pytest.raises(UserError, match="multi-model DAG"):
        aligner.build_aligned(
            aligner.collect_sources([], [f"A={tmp_path / 'fromp' / 'multi_model.jsonl'}"], None),
            tmp_path / "bad", "error")


def test_align_drop_never_succeeded_and_dead_nodes(tmp_path):
    dead_a = record("p0", "A", spec=[(0, [], [1]), (1, [0], [0])])
    dead_b = record("p0", "B", spec=[(0, [], [1]), (1, [0], [0])])
    ok_a, ok_b = record("p1", "A"), record("p1", "B")
    root = write_records(tmp_path / "r", [dead_a, dead_b, ok_a, ok_b])
    s = aligner.build_aligned(_sources(root), tmp_path / "al", "error",
                              opts=BuildOptions(drop_never_succeeded=True))
    assert s["complete_problems"] == ["p1"]
    assert "never succeeded under any model" in s["dropped_problems"][0]["reason"]
    # a node no model attempted cannot be simulated: dropped even under impute
    a = record("p2", "A", node_over={1: {"attempts": []}})
    b = record("p2", "B", node_over={1: {"attempts": []}})
    root2 = write_records(tmp_path / "r2", [a, b, ok_a, ok_b])
    s2 = aligner.build_aligned(_sources(root2), tmp_path / "al2", "impute")
    assert s2["dropped_problems"] == [
        {"problem_id": "p2", "reason": "nodes [1] have no attempts under any model"}]


def test_aligner_cli(tmp_path):
    root = _two_models(tmp_path, _partial_b())
    out = tmp_path / "al"
    rc = aligner.main(["--rollouts", f"A={root / 'A'}", "--rollouts", f"B={root / 'B'}",
                       "--out-dir", str(out), "--missing-policy", "drop"])
    assert rc == 0 and json.loads((out / "summary.json").read_text())["missing_policy"] == "drop"
    assert aligner.main(["--rollouts", f"A={root / 'A'}", "--rollouts", f"A={root / 'B'}",
                         "--out-dir", str(out)]) == 2
    assert aligner.main(["--pool", "bad/name=x", "--out-dir", str(out)]) == 2
    r = subprocess.run([sys.executable, str(REPO / "build_aligned_union_dag_pools.py"), "--help"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "--missing-policy" in r.stdout

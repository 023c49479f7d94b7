"""ProofFlow: restricted unpickling, pickle -> pool conversion, node rollouts."""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import types
from pathlib import Path

import pytest

from ProofFlow import convert_proofflow_pickle_to_dag_pool as conv
from ProofFlow.safe_pickle import UnsafePickleError, load_proofflow_pickle
from simulator.errors import UserError
from simulator.pool import load_pool

REPO = Path(__file__).resolve().parents[1]
PICKLES = sorted((REPO / "ProofFlow" / "source_pickles").glob("*.pickle"))
COMMITTED_POOL = REPO / "ProofFlow" / "pools" / "proofflow_real_2dag.jsonl"


# ---------------------------------------------------------------- restricted unpickler


class _Evil:
    def __init__(self, func, arg):
        self.func, self.arg = func, arg

    def __reduce__(self):
        return (self.func, (self.arg,))


@pytest.mark.parametrize(
    "payload",
    [
        lambda mark: _Evil(os.system, f"touch {mark}"),
        lambda mark: _Evil(eval, f"open({str(mark)!r}, 'w')"),
        lambda mark: {"proof_items": [_Evil(exec, f"open({str(mark)!r}, 'w')")]},
        lambda mark: os.system,
    ],
    ids=["os.system", "builtins.eval", "nested exec", "bare global"],
)
def test_malicious_pickle_is_refused(tmp_path, payload):
    mark = tmp_path / "pwned"
    f = tmp_path / "evil.pickle"
    f.write_bytes(pickle.dumps(payload(mark)))
    with pytest.raises(UnsafePickleError, match="refusing global"):
        load_proofflow_pickle(f)
    assert not mark.exists()


def _fake_proofflow_module(monkeypatch, extra: str | None = None):
    """A throwaway ``proofflow.proof_graph`` module to craft pickles with real class names."""
    pkg = types.ModuleType("proofflow")
    mod = types.ModuleType("proofflow.proof_graph")
    names = ["TheoremCondition", "Definition", "Lemma", "TheoremStatement"]
    names += [extra] if extra else []
    for name in names:
        cls = type(name, (), {"__module__": "proofflow.proof_graph"})
        setattr(mod, name, cls)
    pkg.proof_graph = mod
    monkeypatch.setitem(sys.modules, "proofflow", pkg)
    monkeypatch.setitem(sys.modules, "proofflow.proof_graph", mod)
    return mod


def _item(mod, cls_name: str, fields: dict):
    obj = getattr(mod, cls_name)()
    obj.__dict__.update({"__dict__": fields, "__pydantic_extra__": None,
                         "__pydantic_fields_set__": set(fields), "__pydantic_private__": None})
    return obj


def test_unknown_proof_graph_class_is_refused(tmp_path, monkeypatch):
    mod = _fake_proofflow_module(monkeypatch, extra="Sneaky")
    f = tmp_path / "x.pickle"
    f.write_bytes(pickle.dumps({"proof_items": [mod.Sneaky()]}))
    with pytest.raises(UnsafePickleError, match="proofflow.proof_graph.Sneaky"):
        load_proofflow_pickle(f)


def test_bundled_pickles_need_only_the_four_classes():
    import pickletools

    for p in PICKLES:
        for op, arg, _ in pickletools.genops(p.read_bytes()):
            if op.name in ("GLOBAL", "INST", "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"):
                pytest.fail(f"unexpected {op.name} {arg}")
        d = load_proofflow_pickle(p)
        assert {type(i).__name__ for i in d["proof_items"]} <= {
            "TheoremCondition", "Definition", "Lemma", "TheoremStatement"}
        assert set(d) == {"proof_items", "nl_proof", "llm_call_logs", "run_metadata"}


def test_corrupt_pickle_is_a_user_error(tmp_path):
    f = tmp_path / "bad.pickle"
    f.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(UserError, match="not a readable ProofFlow pickle"):
        load_proofflow_pickle(f)


# ---------------------------------------------------------------- conversion of the real pickles


@pytest.fixture(scope="module")
def real_pool(tmp_path_factory):
    out = tmp_path_factory.mktemp("pf") / "pool.jsonl"
    conv.convert_many(PICKLES, out)
    return out


def _by_problem(path):
    return {d["problem_id"]: d for d in map(json.loads, Path(path).read_text().splitlines())}


def test_real_pool_success_counts(real_pool):
    dags = _by_problem(real_pool)
    counts = {pid: {n["name"]: (sum(r["success"] for r in n["empirical_samples"]),
                                len(n["empirical_samples"])) for n in d["nodes"]}
              for pid, d in dags.items()}
    assert counts["AI4MathInequality_18b"] == {
        "tc_1": (60, 64), "l1": (63, 64), "l2": (64, 64), "l3": (47, 64), "ts_1": (53, 64)}
    trench = counts["naturalproofs_trench_219"]
    zero_statements = [k for k, v in trench.items() if k.startswith("ts_") and v == (0, 64)]
    assert zero_statements == ["ts_1", "ts_3"]
    tc1 = dags["AI4MathInequality_18b"]["nodes"][0]
    assert tc1["template"]["success_prob"] == 60 / 64
    assert tc1["meta"]["stage"] == "formalizer" and tc1["meta"]["lean_unavailable_failures"] == 1


def test_real_pool_matches_pickle_records(real_pool):
    """Per node: the right stage, success field, latency = total, token_cost = output tokens."""
    dags = _by_problem(real_pool)
    for p in PICKLES:
        d = dags[conv.problem_id_from_path(p)]
        for item, node in zip(load_proofflow_pickle(p)["proof_items"], d["nodes"], strict=True):
            prover = item.kind in ("lemma", "theorem_statement")
            stage = item["solved_lemma"] if prover else item["formalization"]
            recs = stage["rollout_records"]
            field = "lean_verify" if prover else "lean_pass"
            rows = node["empirical_samples"]
            assert node["meta"]["stage"] == ("prover" if prover else "formalizer")
            assert [r["success"] for r in rows] == [int(bool(r[field])) for r in recs]
            assert [r["latency"] for r in rows] == [r["total_latency_sec"] for r in recs]
            for row, rec in zip(rows, recs, strict=True):
                assert row["latency"] == pytest.approx(
                    rec["infer_latency_sec"] + rec["verify_latency_sec"])
                assert row["token_cost"] == row["cost"] == rec["output_tokens"]
                assert row["token_cost_source"] == "attempt"
            assert node["legacy_template_model"] == "goedel32b"
            deps = [d["nodes"][q]["name"] for q in node["parents"]]
            assert deps == list(item["dependencies"])


def test_real_pool_loads_and_committed_copy_is_current(real_pool):
    pool = load_pool(real_pool)
    assert len(pool) == 2
    assert _by_problem(COMMITTED_POOL) == _by_problem(real_pool)
    assert len(load_pool(COMMITTED_POOL)) == 2


def test_semantic_gate(tmp_path):
    ai4 = next(p for p in PICKLES if p.name.startswith("AI4"))
    d = conv.convert_pickle(ai4, semantic_gate=0.6)
    tc1 = d["nodes"][0]
    assert tc1["meta"]["semantic_score"] == 0.0 and tc1["meta"]["semantic_gate"]["gated"]
    assert tc1["template"]["success_prob"] == 0.0
    assert all(r["semantic_gated"] for r in tc1["empirical_samples"])
    assert d["nodes"][1]["template"]["success_prob"] == 63 / 64  # score 1.0: untouched


# ---------------------------------------------------------------- crafted pickles


def _record(k, ok, out_tokens=True, prover=False):
    r = {"rollout_id": k, "infer_latency_sec": 2.0 + k, "verify_latency_sec": 1.0,
         "total_latency_sec": 3.0 + k, "lean_pass": ok,
         "latency_observation": "openai_compatible_request", "error_msg": [] if ok else
         ['{"severity":"error","pos":{"line":9,"column":0},"data":"unsolved goals"}']}
    if prover:
        r["lean_verify"] = ok
    if out_tokens:
        r["output_tokens"] = 100 * (k + 1)
    return r


def _write_crafted(tmp_path, monkeypatch, l1_deps=("tc_1",), missing_tokens=False):
    mod = _fake_proofflow_module(monkeypatch)
    tc = _item(mod, "TheoremCondition", {
        "id": "tc_1", "dependencies": [], "score": {"semantic_score": 1.0},
        "formalization": {"rollout_records": [_record(0, True), _record(1, False)]},
        "solved_lemma": {}})
    recs = [_record(0, True, not missing_tokens, True), _record(1, True, True, True)]
    lemma = _item(mod, "Lemma", {
        "id": "l1", "dependencies": list(l1_deps), "score": {},
        "formalization": {"rollout_records": [_record(0, True)]},
        "solved_lemma": {"rollout_records": recs}})
    f = tmp_path / "crafted_1.json.pickle"
    f.write_bytes(pickle.dumps({"proof_items": [tc, lemma], "nl_proof": "",
                                "llm_call_logs": [], "run_metadata": {}}))
    return f


def test_self_loop_dropped_with_warning(tmp_path, monkeypatch, caplog):
    f = _write_crafted(tmp_path, monkeypatch, l1_deps=("tc_1", "l1"))
    with caplog.at_level(logging.WARNING, logger="proofflow.convert"):
        d = conv.convert_pickle(f)
    assert "self-loop dropped" in caplog.text
    assert d["problem_id"] == "crafted_1"
    assert d["nodes"][1]["parents"] == [0] and d["nodes"][1]["meta"]["dropped_self_loop"]
    assert d["nodes"][0]["children"] == [1]


def test_missing_tokens_use_node_mean_and_are_flagged(tmp_path, monkeypatch):
    f = _write_crafted(tmp_path, monkeypatch, missing_tokens=True)
    d = conv.convert_pickle(f)
    rows = d["nodes"][1]["empirical_samples"]
    assert rows[0]["token_cost"] == 200.0 and rows[0]["token_cost_source"] == "node_mean"
    assert rows[1]["token_cost_source"] == "attempt"
    assert d["nodes"][1]["meta"]["token_cost_imputed"] == 1
    f0 = d["nodes"][0]["empirical_samples"][1]
    assert f0["failure_reason"] == "lean_error" and f0["success"] == 0


def test_unknown_dependency_is_an_error(tmp_path, monkeypatch):
    f = _write_crafted(tmp_path, monkeypatch, l1_deps=("tc_9",))
    with pytest.raises(UserError, match="unknown 'tc_9'"):
        conv.convert_pickle(f)


def test_cli_writes_pool(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    assert conv.main([str(PICKLES[0]), "--out", str(out)]) == 0
    assert "wrote 1 DAGs" in capsys.readouterr().out
    assert len(load_pool(out)) == 1
    assert conv.main([str(tmp_path / "missing.pickle"), "--out", str(out)]) == 2

"""ProofFlow: restricted unpickling, pickle -> pool conversion, node rollouts."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import sys
import threading
import types
from collections import Counter
from pathlib import Path

import pytest

from codeflow.llm_client import ClientConfig
from ProofFlow import convert_proofflow_pickle_to_dag_pool as conv
from ProofFlow import run_proofflow_node_rollouts as rr
from ProofFlow.benchmark import load_benchmark
from ProofFlow.lean_check import LEAN_TOOLCHAIN, LeanChecker
from ProofFlow.safe_pickle import UnsafePickleError, load_proofflow_pickle
from simulator.base.errors import UserError
from simulator.pools.pool import load_pool
from tests import fake_lake
from tests.fake_openai_server import FakeServer, text_replies

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


def _write_items(tmp_path, monkeypatch, tc_fields=None, l1_fields=None):
    """A two-step pickle (tc_1 <- l1) whose step fields can be overridden."""
    mod = _fake_proofflow_module(monkeypatch)
    tc = {"id": "tc_1", "dependencies": [], "score": {"semantic_score": 1.0},
          "formalization": {"rollout_records": [_record(0, True), _record(1, False)]}, "solved_lemma": {}}
    l1 = {"id": "l1", "dependencies": ["tc_1"], "score": {},
          "formalization": {"rollout_records": [_record(0, True)]},
          "solved_lemma": {"rollout_records": [_record(0, True, True, True), _record(1, True, True, True)]}}
    tc.update(tc_fields or {})
    l1.update(l1_fields or {})
    tc = {k: v for k, v in tc.items() if v is not None}
    items = [_item(mod, "TheoremCondition", tc), _item(mod, "Lemma", l1)]
    f = tmp_path / "crafted_2.pickle"
    f.write_bytes(pickle.dumps({"proof_items": items, "nl_proof": "", "llm_call_logs": [], "run_metadata": {}}))
    return f


@pytest.mark.parametrize("bad_id", [None, "", 3.5, ["tc_1"]])
def test_step_without_a_usable_id_is_named_itself(tmp_path, monkeypatch, bad_id):
    """A missing id is reported on the step that lacks it, not as another step's unknown dependency."""
    f = _write_items(tmp_path, monkeypatch, tc_fields={"id": bad_id})
    with pytest.raises(UserError) as exc:
        conv.convert_pickle(f)
    msg = str(exc.value)
    assert str(f) in msg and "proof item #0 (TheoremCondition)" in msg and "id" in msg, msg
    assert "depends on unknown" not in msg and "l1" not in msg, msg


def test_duplicate_step_id_names_the_pickle_and_step(tmp_path, monkeypatch):
    f = _write_items(tmp_path, monkeypatch, l1_fields={"id": "tc_1", "dependencies": []})
    with pytest.raises(UserError) as exc:
        conv.convert_pickle(f)
    assert str(f) in str(exc.value) and "duplicate step id" in str(exc.value) and "'tc_1'" in str(exc.value)


@pytest.mark.parametrize("latency", [-5.0, float("nan"), 1e200])
def test_bad_attempt_names_the_pickle_and_the_step_id(tmp_path, monkeypatch, capsys, latency):
    """Errors found when validating the converted DAG name the pickle and the step id (not the
    output file, which is never written, nor a node position)."""
    rec = _record(1, True, True, True)
    for key in ("total_latency_sec", "infer_latency_sec"):
        rec[key] = latency
    f = _write_items(tmp_path, monkeypatch, l1_fields={
        "solved_lemma": {"rollout_records": [_record(0, True, True, True), rec]}})
    out = tmp_path / "out.jsonl"
    with pytest.raises(UserError) as exc:
        conv.convert_many([f], out)
    msg = str(exc.value)
    assert str(f) in msg and "node 'l1'" in msg and "attempt 1" in msg, msg
    assert "out.jsonl" not in msg and "line 1" not in msg and "node 1" not in msg, msg
    assert conv.main([str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "node 'l1'" in err and "out.jsonl" not in err and not out.exists()


def test_out_directory_is_refused_before_work(tmp_path, capsys):
    assert conv.main([str(PICKLES[0]), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("gate", ["5", "nan", "-1", "inf", "abc"])
def test_semantic_gate_outside_unit_interval_is_refused(tmp_path, capsys, gate):
    out = tmp_path / "p.jsonl"
    assert conv.main([str(PICKLES[0]), "--out", str(out), "--semantic-gate", gate]) == 2
    err = capsys.readouterr().err
    assert "--semantic-gate (flag)" in err and ">= 0 and <= 1" in err, err
    assert not out.exists()
    if gate not in ("abc",):
        with pytest.raises(UserError):
            conv.convert_pickle(PICKLES[0], semantic_gate=float(gate))


@pytest.mark.parametrize("gate", ["0", "1", "0.6"])
def test_semantic_gate_in_unit_interval_is_accepted(tmp_path, gate):
    """The pool written carries the gate on every node, and a node is gated exactly when its score is below it."""
    out = tmp_path / "p.jsonl"
    assert conv.main([str(PICKLES[0]), "--out", str(out), "--semantic-gate", gate]) == 0
    (dag,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(load_pool(out)) == 1
    for node in dag["nodes"]:
        meta, score = node["meta"], node["meta"]["semantic_score"]
        gated = score is not None and score < float(gate)
        assert meta["semantic_gate"] == {"threshold": float(gate), "gated": gated}
        rows = node["empirical_samples"]
        assert all(r.get("semantic_gated", False) == gated for r in rows)
        if gated:
            assert node["template"]["success_prob"] == 0.0 and not any(r["success"] for r in rows)


def test_cli_writes_pool(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    assert conv.main([str(PICKLES[0]), "--out", str(out)]) == 0
    assert "wrote 1 DAGs" in capsys.readouterr().out
    assert len(load_pool(out)) == 1
    assert conv.main([str(tmp_path / "missing.pickle"), "--out", str(out)]) == 2


# ------------------------------------------------ node rollouts (fake endpoint, fake lake)

PID = "AI4MathInequality_18b"


def _lean(code):
    return f"Here you go.\n```lean4\n{code}\n```\n"


class ProofScript:
    """Deterministic answers per (stage, step, arrival count) for AI4MathInequality_18b."""

    def __init__(self, fail_step=None):
        self.seen = Counter()
        self.lock = threading.Lock()
        self.fail_step = fail_step  # answer 503 for this step's formalizer

    def __call__(self, body):
        text = body["messages"][0]["content"]
        m = re.search(r"The step to formalize is `([^`]+)`", text)
        stage, step = ("formalizer", m.group(1)) if m else (
            "prover", re.search(r"^theorem (\S+)", text, re.M).group(1))
        with self.lock:
            c = self.seen[(stage, step)]
            self.seen[(stage, step)] += 1
        stmt = f"theorem {step} (a b c : ℝ) : a + b = b + a"
        if stage == "formalizer":
            if step == self.fail_step:
                return (503, "overloaded")
            if step == "tc_1":
                return _lean("variable (a b c : ℝ)")
            if step == "l2":
                return "I cannot formalize this."
            return _lean(f"-- FAKE_ERROR\n{stmt} := by sorry") if c == 0 else \
                _lean(f"import Mathlib\n{stmt} := by sorry")
        if step == "l1":
            return _lean(f"import Mathlib\n{stmt} := by\n  ring")
        if step == "l3":
            return [_lean(f"{stmt} := by sorry"), _lean("theorem l3 : True := trivial"),
                    _lean(f"-- FAKE_ERROR\n{stmt} := by\n  simp")][c % 3]
        return "no code here" if c == 0 else _lean(f"{stmt} := by\n  ring")


def _cfg(tmp_path, server, max_tries=3):
    def cc():
        return ClientConfig(base_url=server.base_url, model="fake-goedel", api_key_env="",
                            concurrency=4, max_tries=max_tries, backoff_base_sec=0.01)

    return rr.RunConfig(tmp_path / "rollouts", "goedel32b", 3, cc(), cc(), progress=False,
                        lean_workers=2)


def _lean_env(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "lean-toolchain").write_text(LEAN_TOOLCHAIN + "\n")
    log = tmp_path / "lake.log"
    fake_lake.install(tmp_path / "bin", monkeypatch, log)
    return LeanChecker(proj, timeout_sec=30), log


@pytest.fixture
def lean_env(tmp_path, monkeypatch):
    return _lean_env(tmp_path, monkeypatch)


def _problem():
    return rr.select_problems(load_benchmark(), [PID], None)


@pytest.fixture(scope="module")
def rollout_run(tmp_path_factory):
    """One run on AI4MathInequality_18b (shared: every Lean check spawns the fake lake)."""
    tmp_path = tmp_path_factory.mktemp("rollouts")
    with pytest.MonkeyPatch.context() as mp, FakeServer(text_replies(ProofScript())) as server:
        checker, lake_log = _lean_env(tmp_path, mp)
        cfg = _cfg(tmp_path, server)
        summary = rr.run(_problem(), cfg, checker)
        yield {"cfg": cfg, "summary": summary, "server": server, "checker": checker,
               "lake_log": lake_log, "n_calls": len(server.bodies)}


def test_node_rollouts_record(rollout_run):
    s, cfg, server = rollout_run["summary"], rollout_run["cfg"], rollout_run["server"]
    # 8 steps: tc_1 tc_2 l1 l2 l3 ts_1 l4 ts_2; l2 gets no formalization, so no prover
    assert s["problems_written"] == [PID] and s["formalizer_requests"] == 24
    assert s["prover_requests"] == 15
    rec = json.loads((cfg.model_dir / f"{PID}.json").read_text())
    assert server.bodies[0]["temperature"] == 0.6 and server.bodies[0]["top_k"] == 20
    assert rec["benchmark"] == "proofflow" and rec["model"] == "goedel32b"
    nodes = {n["name"]: n for n in rec["nodes"]}
    assert [n["parents"] for n in rec["nodes"]] == [
        [], [0], [0, 1], [0], [0], [2, 3, 4], [0], [2, 3, 6]]

    def rate(name):
        return [a["success"] for a in nodes[name]["attempts"]].count(True)

    assert (rate("tc_1"), len(nodes["tc_1"]["attempts"])) == (3, 3)
    assert nodes["tc_1"]["attempts"][0]["stage"] == "formalizer"
    assert rate("l1") == 3 and nodes["l1"]["attempts"][0]["stage"] == "prover"
    assert nodes["l1"]["formal_statement"].startswith("theorem l1 (a b c : ℝ)")
    assert sorted(a["success"] for a in nodes["l1"]["formalizer_attempts"]) == [0, 1, 1]
    assert nodes["l2"]["attempts"] == [] and "skipped" in nodes["l2"]
    assert {a["failure_reason"] for a in nodes["l2"]["formalizer_attempts"]} == {"no_code"}
    assert rate("l3") == 0
    assert sorted(a["failure_reason"] for a in nodes["l3"]["attempts"]) == [
        "lean_error", "sorry", "statement_changed"]
    assert rate("ts_1") == rate("l4") == rate("ts_2") == 2
    assert (rate("tc_2"), nodes["tc_2"]["attempts"][0]["stage"]) == (2, "formalizer")
    a = nodes["ts_1"]["attempts"][1]
    assert a["token_source"] == "usage" and a["output_tokens"] > 0 and a["prompt_tokens"] == 10
    assert a["infer_latency_sec"] > 0 and a["latency_source"] == "request"
    assert a["rollout_id"].startswith(f"{PID}/ts_1/prover/")


def test_node_rollouts_resume_from_journals(rollout_run):
    """A rerun skips finished problems; without the record, the journals rebuild it
    without a single HTTP request or Lean check."""
    cfg, server, checker = rollout_run["cfg"], rollout_run["server"], rollout_run["checker"]
    lake_log = rollout_run["lake_log"]
    rec_path = cfg.model_dir / f"{PID}.json"
    rec = json.loads(rec_path.read_text())
    lake_calls = len(lake_log.read_text().splitlines())
    assert rr.run(_problem(), cfg, checker)["problems_skipped_existing"] == [PID]
    rec_path.unlink()
    s2 = rr.run(_problem(), cfg, checker)
    assert s2["problems_written"] == [PID] and s2["lean_checks_run"] == 0
    assert len(server.bodies) == rollout_run["n_calls"]
    assert len(lake_log.read_text().splitlines()) == lake_calls
    assert json.loads(rec_path.read_text()) == rec


def test_node_rollouts_transient_failure_then_resume(tmp_path, lean_env):
    checker, _ = lean_env
    script = ProofScript(fail_step="l1")
    with FakeServer(text_replies(script)) as server:
        cfg = _cfg(tmp_path, server, max_tries=1)
        s = rr.run(_problem(), cfg, checker)
        assert s["problems_incomplete"] == [PID] and not (cfg.model_dir / f"{PID}.json").exists()
        before = len(server.bodies)
        script.fail_step = None
        s = rr.run(_problem(), cfg, checker)
        assert s["problems_written"] == [PID]
        # only the 3 failed formalizer requests and the 3 new l1 prover requests were sent
        assert len(server.bodies) - before == 6


def test_node_rollouts_pool_from_records(rollout_run, tmp_path):
    """The records feed the pool builder: l2 has no attempts, so the filter drops the DAG."""
    from poolbuild import build_loader as loader
    from poolbuild.dag_builder import BuildOptions

    out = rollout_run["cfg"].out_dir
    with pytest.raises(UserError, match="has no attempts"):
        loader.build_pool([out], tmp_path / "p.jsonl", BuildOptions())
    with pytest.raises(UserError, match="every DAG was excluded"):
        loader.build_pool([out], tmp_path / "p.jsonl", BuildOptions(drop_no_attempts=True))


def test_runner_cli_without_lean(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    rc = rr.main(["--out-dir", str(tmp_path / "o"), "--formalizer-base-url", "http://127.0.0.1:9",
                  "--formalizer-model", "f", "--prover-base-url", "http://127.0.0.1:9",
                  "--prover-model", "p", "--problems", PID])
    assert rc == 2 and "Lean is not installed" in capsys.readouterr().err

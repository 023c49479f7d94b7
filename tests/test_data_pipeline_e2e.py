"""End to end, as documented in docs/data_pipeline.md, against local stand-ins only.

benchmark tasks -> rollouts from a local chat-completions endpoint (CodeFlow
generator with its sandboxed verifier; ProofFlow runner with a fake ``lake``)
-> verified rollout records -> per-model pools -> aligned multi-model pool ->
``python -m simulator validate`` and ``python -m simulator simulate``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from codeflow import generate_rollouts
from codeflow.dataset import load_problems
from poolbuild import build_aligned as aligner
from poolbuild import build_loader as loader
from ProofFlow import run_proofflow_node_rollouts as pf_runner
from ProofFlow.lean_check import LEAN_TOOLCHAIN
from simulator.pools.pool import load_index_file, load_pool
from tests import fake_lake
from tests.fake_openai_server import FakeServer, text_replies

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CF_PROBLEMS = ["Basic__Python__abs_min", "Basic__python-holidays___get_nth_weekday_of_month"]
PF_PROBLEM = "AI4MathInequality_18b"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=600)


def _simulate(pool: Path, dag: int = 0, limits: tuple[str, ...] = (
        "--budget-ratio", "2", "--deadline-ratio", "2")) -> dict:
    r = _cli("-m", "simulator", "simulate", "--pool", str(pool), "--dag", str(dag), *limits,
             "--method", "uniform", "--trials", "20", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert 0.0 <= out["on_time_completion_probability"] <= 1.0
    return out


class CodeFlowScript:
    """Served model 'srv-good' always answers the reference; 'srv-weak' only on sample 0."""

    def __init__(self) -> None:
        probs = {p.problem_id: p for p in load_problems()}
        self.refs = {s.name: s.reference_code for pid in CF_PROBLEMS
                     for s in probs[pid].subproblems}
        self.seen: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        name = re.search(r"Implement `([^`]+)`", last).group(1)
        with self.lock:
            c = self.seen[(body["model"], name)]
            self.seen[(body["model"], name)] += 1
        if body["model"] == "srv-good" or c == 0:
            return f"```python\n{self.refs[name]}\n```"
        return f"```python\ndef {name}(*args, **kwargs):\n    return None\n```"


def test_codeflow_rollouts_to_simulation(tmp_path):
    roll = tmp_path / "rollouts"
    with FakeServer(text_replies(CodeFlowScript())) as server:
        common = ["--base-url", server.base_url, "--n", "2", "--concurrency", "2",
                  "--out-dir", str(roll), "--no-progress", "--test-timeout", "5"]
        assert generate_rollouts.main([*common, "--model", "good", "--served-model", "srv-good",
                                       "--problems", ",".join(CF_PROBLEMS)]) == 0
        # the weak model only ran the first problem: a missing (problem, model) pair
        assert generate_rollouts.main([*common, "--model", "weak", "--served-model", "srv-weak",
                                       "--problems", CF_PROBLEMS[0]]) == 0

    # per-model pool from verified records
    pool_good = tmp_path / "pools" / "good.jsonl"
    r = _cli("build_loader_dag_pool_from_rollouts.py", str(roll / "good"), "--out",
             str(pool_good), "--drop-no-attempts")
    assert r.returncode == 0, r.stderr
    pool = load_pool(pool_good)
    assert len(pool) == 2 and all(d.success_prob.min() == 1.0 for d in pool)
    summary = json.loads(pool_good.with_suffix(".summary.json").read_text())
    assert summary["files_scanned"] == 2 and summary["dags_written"] == 2

    # aligned pools: imputation keeps the second problem with 'weak' unavailable
    al = tmp_path / "aligned"
    r = _cli("build_aligned_union_dag_pools.py", "--rollout-root", str(roll),
             "--missing-policy", "impute", "--baseline-model", "good", "--out-dir", str(al))
    assert r.returncode == 0, r.stderr
    multi = load_pool(al / "multi_model.jsonl")
    assert len(multi) == 2 and multi[0].model_ids == ("good", "weak")
    assert multi[0].available.all() and not multi[1].available[:, 1].any()
    assert len(load_pool(al / "good.jsonl")) == len(load_pool(al / "weak.jsonl")) == 1
    assert load_index_file(al / "selected_dag_indices.json", len(multi)) == [0]
    weak = json.loads((al / "weak.jsonl").read_text().splitlines()[0])
    assert any(n["template"]["success_prob"] < 1 for n in weak["nodes"])

    # the simulator reads both
    r = _cli("-m", "simulator", "validate", "--pool", str(al / "multi_model.jsonl"))
    assert r.returncode == 0, r.stderr + r.stdout
    _simulate(al / "multi_model.jsonl", 0)
    _simulate(al / "multi_model.jsonl", 1)


class ProofScript:
    """Every step formalizes and proves (first attempt of each stage fails)."""

    def __init__(self) -> None:
        self.seen: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        text = body["messages"][0]["content"]
        m = re.search(r"The step to formalize is `([^`]+)`", text)
        stage, step = ("f", m.group(1)) if m else ("p", re.search(r"^theorem (\S+)", text,
                                                                   re.M).group(1))
        with self.lock:
            c = self.seen[(stage, step)]
            self.seen[(stage, step)] += 1
        stmt = f"theorem {step} (a b : ℝ) : a + b = b + a"
        bad = "-- FAKE_ERROR\n" if c == 0 else ""
        body_ = ":= by sorry" if stage == "f" else ":= by\n  ring"
        return f"```lean4\n{bad}{stmt} {body_}\n```"


def test_proofflow_rollouts_to_simulation(tmp_path, monkeypatch):
    proj = tmp_path / "lean_project"
    proj.mkdir()
    (proj / "lean-toolchain").write_text(LEAN_TOOLCHAIN + "\n")
    fake_lake.install(tmp_path / "bin", monkeypatch)
    roll = tmp_path / "rollouts"
    with FakeServer(text_replies(ProofScript())) as server:
        rc = pf_runner.main([
            "--out-dir", str(roll), "--model", "goedel32b", "--n", "3",
            "--problems", PF_PROBLEM, "--lean-project", str(proj), "--no-progress",
            "--formalizer-base-url", server.base_url, "--formalizer-model", "formalizer",
            "--prover-base-url", server.base_url, "--prover-model", "prover",
        ])
    assert rc == 0
    pool_path = tmp_path / "pf.jsonl"
    assert loader.main([str(roll), "--out", str(pool_path), "--include-eval-latency"]) == 0
    dag = json.loads(pool_path.read_text())
    assert dag["dag_kind"] == "proofflow_rollout" and dag["n_nodes"] == 8
    assert {n["template"]["success_prob"] for n in dag["nodes"]} == {2 / 3}
    row = dag["nodes"][2]["empirical_samples"][0]
    assert row["latency"] == pytest.approx(row["infer_latency_sec"] + row["eval_latency_sec"])
    r = _cli("-m", "simulator", "validate", "--pool", str(pool_path))
    assert r.returncode == 0, r.stderr + r.stdout
    _simulate(pool_path)

    # the per-model pool also aligns with itself under a second model id (pool inputs)
    al = tmp_path / "aligned"
    assert aligner.main(["--pool", f"goedel32b={pool_path}", "--pool", f"copy={pool_path}",
                         "--out-dir", str(al)]) == 0
    assert load_pool(al / "multi_model.jsonl")[0].model_ids == ("goedel32b", "copy")


def test_bundled_proofflow_pool_simulates():
    pool = REPO / "ProofFlow" / "pools" / "proofflow_real_2dag.jsonl"
    r = _cli("-m", "simulator", "validate", "--pool", str(pool))
    assert r.returncode == 0 and "DAGs: 2" in r.stdout
    # two statements verified 0/64 times: never completes (ratio mode refuses this DAG)
    out = _simulate(pool, 1, ("--budget", "1e6", "--deadline", "1e4"))
    assert out["on_time_completion_probability"] == 0.0

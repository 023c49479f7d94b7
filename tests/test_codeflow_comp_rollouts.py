"""CodeFlow-Comp rollouts end to end against a scripted local endpoint (tests/fake_openai_server.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from codeflow.comp.dataset import load_comp_problems
from codeflow.generate_rollouts import main
from poolbuild.build_aligned import main as aligned_main
from poolbuild.build_loader import main as loader_main
from tests.fake_openai_server import FakeServer, Reply

FIX = Path(__file__).resolve().parent / "fixtures" / "codeflow_comp"
INPUT = FIX / "codeflow_comp_fixture.json"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def problems():
    return load_comp_problems(INPUT)


def _stub(name):
    return f"```python\ndef {name}(*a):\n    return None\n```"


class Script:
    """Sample 0 of every turn (the first request with its prompt) answers with the reference,
    later ones with a stub; ``wrong`` names turns that always get the stub. With ``block_at``,
    the first later-sample request after that many requests hangs (the test kills the client)."""

    def __init__(self, problems, wrong=(), block_at=None):
        self.refs = {(p.description.strip(), s.name): s.reference_code
                     for p in problems for s in p.subproblems}
        self.wrong = set(wrong)
        self.block_at = block_at
        self.blocked = threading.Event()
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, body, seen):
        last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        name = re.search(r"implement `([^`]+)`", last).group(1)
        desc = last.split("Problem:\n\n", 1)[1].split("\n\nTurn ", 1)[0].strip()
        with self.lock:
            self.count += 1
            block = (self.block_at is not None and seen == 1 and self.count > self.block_at
                     and not self.blocked.is_set())
            if block:
                self.blocked.set()
        k = min(seen, 1)  # a request re-sent after an interruption answers as before
        usage = {"prompt_tokens": 100 + k, "completion_tokens": 40 + k, "total_tokens": 140 + 2 * k}
        if block:
            return Reply(contents=[_stub(name)], usage=usage, delay=20)
        if seen == 0 and name not in self.wrong:
            text = f"Here:\n```python\n{self.refs[(desc, name)]}\n```"
        else:
            text = _stub(name)
        return Reply(contents=[text], usage=usage)


def _args(server, out, *extra, model="toy"):
    return ["--split", "comp", "--dataset", str(INPUT), "--base-url", server.base_url,
            "--model", model, "--n", "2", "--concurrency", "1", "--out-dir", str(out),
            "--no-progress", "--backoff-base", "0.001", *extra]


def _records(out, model="toy"):
    return {f.stem: json.loads(f.read_text()) for f in sorted((out / model).glob("*.json"))}


def test_chained_rollouts_are_valid_records(tmp_path, problems):
    out = tmp_path / "r"
    with FakeServer(Script(problems)) as server:
        assert main(_args(server, out)) == 0
    recs = _records(out)
    assert list(recs) == ["SYN1A", "SYN2B", "SYN3C"]
    rec = recs["SYN2B"]
    assert rec["benchmark"] == "codeflow" and rec["split"] == "comp"
    assert rec["generation"]["context"] == "chained" and rec["overall_turns"] == 3
    counts, pairs, main_node = rec["nodes"]
    assert [n["parents"] for n in rec["nodes"]] == [[], [0], [1]]
    assert [n["depth"] for n in rec["nodes"]] == [1, 2, 3]
    assert [n["judged_as"] for n in rec["nodes"]] == ["call", "call", "script"]
    for node in rec["nodes"]:
        good, bad = node["attempts"]
        assert good["success"] and good["harness_result"] == [1, 1] and good["pass_rate"] == 1.0
        assert not bad["success"] and bad["harness_result"] == [0, 0]
        assert node["selected_rollout_id"] == good["rollout_id"] == f"SYN2B/{node['name']}/toy/0"
        assert node["harness_result"] == [1, 1]
        for a in node["attempts"]:
            assert a["output_tokens"] in (40, 41) and a["token_source"] == "usage"
            assert a["total_latency_sec"] == pytest.approx(a["infer_latency_sec"]
                                                           + a["eval_latency_sec"], abs=2e-6)
    assert main_node["attempts"][0]["judged_tests"] == 1
    # chained: every earlier turn's chosen rollout is the context
    assert main_node["context_source"] == {"counts": "SYN2B/counts/toy/0",
                                           "zero_pairs": "SYN2B/zero_pairs/toy/0"}
    assert counts["context_source"] == {}
    # the records build a pool unchanged
    pool = tmp_path / "pool.jsonl"
    assert loader_main([str(out / "toy"), "--out", str(pool)]) == 0
    dags = [json.loads(line) for line in pool.read_text().splitlines()]
    assert [len(d["nodes"]) for d in dags] == [2, 3, 3]
    # and, with a second model, the aligned-union builder
    with FakeServer(Script(problems, wrong={"main"})) as server:
        assert main(_args(server, out, model="toy2")) == 0
    assert aligned_main(["--rollout-root", str(out), "--out-dir", str(tmp_path / "al")]) == 0
    multi = [json.loads(line) for line in (tmp_path / "al" / "multi_model.jsonl").read_text()
             .splitlines()]
    assert [d["model_ids"] for d in multi] == [["toy", "toy2"]] * 3
    assert multi[1]["nodes"][2]["model_templates"]["toy2"]["success_prob"] == 0.0
    assert multi[1]["nodes"][2]["model_templates"]["toy"]["success_prob"] == 0.5


def test_context_modes(tmp_path, problems):
    for mode, extra in (("isolated", []), ("golden_upstream", []),
                        ("chained", ["--require-successful-prereq"])):
        out = tmp_path / mode
        with FakeServer(Script(problems, wrong={"counts"})) as server:
            assert main(_args(server, out, "--context", mode, *extra,
                              "--problems", "SYN2B")) == 0, mode
        counts, pairs, main_node = _records(out)["SYN2B"]["nodes"]
        good = [a["success"] for a in pairs["attempts"]]
        if mode == "isolated":
            # judged alone: zero_pairs cannot call counts, main cannot call zero_pairs
            assert good == [False, False] and pairs["context_source"] == {}
            assert pairs["attempts"][0]["failure_reason"] == "runtime_error"
            assert not any(a["success"] for a in main_node["attempts"])
        elif mode == "golden_upstream":
            # the reference of counts is the context, whatever the model wrote for it
            assert good == [True, False] and pairs["context_source"] == {"counts": "reference"}
            assert main_node["context_source"] == {"counts": "reference", "zero_pairs": "reference"}
            assert main_node["attempts"][0]["success"]
        else:
            # counts never succeeded: both later turns are blocked (generated, not judged)
            assert pairs["blocked_by_prereq_failure"] == ["counts"]
            assert main_node["blocked_by_prereq_failure"] == ["counts", "zero_pairs"]
            assert pairs["context_source"] == {}  # only successful turns enter the context
            for node in (pairs, main_node):
                for a in node["attempts"]:
                    assert a["blocked_by_prereq_failure"] and a["harness_result"] == [0, 0]
                    assert a["failure_reason"] == "blocked_by_prereq_failure"
                    assert a["output_tokens"] is not None


def test_comp_cli_errors(tmp_path, capsys):
    base = ["--split", "comp", "--model", "m", "--out-dir", str(tmp_path / "out"), "--dry-run"]
    assert main(base) == 2
    assert "--split comp needs --dataset FILE" in capsys.readouterr().err
    assert main([*base, "--dataset", str(INPUT), "--context", "best_verified"]) == 2
    assert "comp takes chained, isolated, golden_upstream" in capsys.readouterr().err
    assert main(["--model", "m", "--out-dir", str(tmp_path / "out"), "--dry-run",
                 "--require-successful-prereq"]) == 2
    assert "needs --split comp --context chained" in capsys.readouterr().err
    bad = json.loads(INPUT.read_text())
    bad[1]["subproblems"][2]["dependencies"] = ["nope"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main([*base, "--dataset", str(path)]) == 2
    err = capsys.readouterr().err
    assert "problem 'SYN2B', node 'main': depends on unknown 'nope'" in err
    assert err.count("\n") == 1
    assert main([*base, "--dataset", str(INPUT), "--problems", "SYN1A"]) == 0
    out = capsys.readouterr().out
    assert "Turn 2 of 2: implement `main`" in out and "takes no arguments" in out


def _normalised(rec):
    """A record without what differs between two runs (timings, tries, the server's port)."""
    rec = json.loads(json.dumps(rec))
    rec["generation"].pop("endpoint", None)
    for node in rec["nodes"]:
        for a in node["attempts"]:
            for key in ("infer_latency_sec", "eval_latency_sec", "total_latency_sec",
                        "request_tries"):
                a.pop(key)
    return rec


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_records_of_an_uninterrupted_run(tmp_path, problems):
    whole = tmp_path / "whole"
    with FakeServer(Script(problems)) as server:
        assert main(_args(server, whole)) == 0
    expected = {pid: _normalised(r) for pid, r in _records(whole).items()}

    out = tmp_path / "resumed"
    script = Script(problems, block_at=7)
    with FakeServer(script) as server:
        cmd = [sys.executable, "-m", "codeflow.generate_rollouts", *_args(server, out)]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            assert script.blocked.wait(60), "the run never reached the blocking request"
        finally:
            proc.kill()
            proc.wait()
        journal = out / ".runs" / "toy.journal.jsonl"
        journaled = len(journal.read_text().splitlines())
        assert 7 <= journaled < 16  # interrupted midway, with finished requests journaled
        assert len(_records(out)) < 3
        sent_before = server.total
        assert main(_args(server, out)) == 0
        # nothing journaled was sent again: only the 16 - journaled missing requests were
        assert server.total - sent_before == 16 - journaled
    got = {pid: _normalised(r) for pid, r in _records(out).items()}
    assert got == expected

"""End to end: a scripted local endpoint -> verified CodeFlow rollout files."""

from __future__ import annotations

import json
import re

import pytest

from codeflow.dataset import load_problems
from codeflow.extract import extract_code
from codeflow.generate_rollouts import main
from codeflow.prompts import build_messages
from tests.fake_openai_server import FakeServer, Reply

PROBLEMS = ["Basic__Python__abs_min", "Basic__python-holidays___get_nth_weekday_of_month"]


@pytest.fixture(scope="module")
def dataset():
    return {p.problem_id: p for p in load_problems()}


def _script(dataset):
    refs = {s.name: s.reference_code for pid in PROBLEMS for s in dataset[pid].subproblems}

    def script(body, seen):
        last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        name = re.search(r"Implement `([^`]+)`", last).group(1)
        # sample 0 of every node (first request with this prompt) answers with the
        # reference, later ones with a wrong implementation; 429 once in a while
        if seen == 1:
            return Reply(status=429, headers={"Retry-After": "0"})
        if seen == 0:
            text = f"Here it is:\n```python\n{refs[name]}\n```"
        else:
            text = f"```python\ndef {name}(*args, **kwargs):\n    return None\n```"
        return Reply(contents=[text], usage={"prompt_tokens": 100 + seen,
                                             "completion_tokens": 40 + seen,
                                             "total_tokens": 140 + 2 * seen})
    return script


def _args(server, out, *extra):
    return ["--base-url", server.base_url, "--model", "toy_model", "--served-model", "toy/served",
            "--n", "2", "--concurrency", "1", "--out-dir", str(out), "--no-progress",
            "--backoff-base", "0.001", "--test-timeout", "5",
            "--problems", ",".join(PROBLEMS), *extra]


def test_generation_writes_valid_rollouts_and_resumes(tmp_path, dataset):
    out = tmp_path / "rollouts"
    with FakeServer(_script(dataset)) as server:
        assert main(_args(server, out)) == 0
        files = sorted((out / "toy_model").glob("*.json"))
        assert [f.stem for f in files] == sorted(PROBLEMS)
        for f in files:
            rec = json.loads(f.read_text())
            problem = dataset[rec["problem_id"]]
            assert rec["benchmark"] == "codeflow" and rec["model"] == "toy_model"
            gen = rec["generation"]
            assert (gen["temperature"], gen["top_p"], gen["top_k"], gen["n"]) == (0.6, 0.95, 20, 2)
            assert gen["served_model"] == "toy/served" and gen["endpoint"] == server.base_url
            depths = problem.depths()
            assert rec["overall_depth"] == max(depths.values())
            assert len(rec["nodes"]) == len(problem.subproblems)
            for node in rec["nodes"]:
                sub = problem.subproblems[node["node_id"]]
                assert node["name"] == sub.name
                assert node["parents"] == [problem.by_name[d].index for d in sub.dependencies]
                assert node["depth"] == depths[sub.name]
                assert len(node["attempts"]) == 2
                ids = [a["rollout_id"] for a in node["attempts"]]
                assert ids == [f"{rec['problem_id']}/{sub.name}/toy_model/{k}" for k in (0, 1)]
                for a in node["attempts"]:
                    assert a["token_source"] == "usage" and a["latency_source"] == "request"
                    assert a["output_tokens"] in (40, 42) and a["prompt_tokens"] in (100, 102)
                    assert a["total_tokens"] == a["prompt_tokens"] + a["output_tokens"]
                    assert a["infer_latency_sec"] > 0 and a["eval_latency_sec"] > 0
                    assert 0.0 <= a["pass_rate"] <= 1.0
                    assert a["code"].lstrip().startswith(("def", "from", "import"))
                good, bad = node["attempts"]
                assert good["success"] and good["pass_rate"] == 1.0
                assert good["failure_reason"] is None
                assert not bad["success"] and bad["failure_reason"] == "wrong_answer"
        # both samples of a node share a prompt; the scripted 429 was retried, so
        # each prompt got exactly n=2 successful replies
        assert set(server.succeeded.values()) == {2}
        total = server.total

        # run again: all files exist, nothing is sent
        assert main(_args(server, out)) == 0
        assert server.total == total
        # a lost output file is rebuilt from the journal without new requests
        lost = out / "toy_model" / f"{PROBLEMS[0]}.json"
        before = json.loads(lost.read_text())
        lost.unlink()
        assert main(_args(server, out)) == 0
        assert server.total == total
        after = json.loads(lost.read_text())
        assert [a["code"] for n in after["nodes"] for a in n["attempts"]] == \
            [a["code"] for n in before["nodes"] for a in n["attempts"]]
    summary = json.loads((out / ".runs" / "toy_model.summary.json").read_text())
    assert summary["problems_skipped_existing"] == 1 and summary["problems_written"] == 1


def test_best_verified_context_uses_the_verified_attempt(tmp_path, dataset):
    out = tmp_path / "rollouts"
    with FakeServer(_script(dataset)) as server:
        assert main(_args(server, out, "--context", "best_verified")) == 0
    rec = json.loads((out / "toy_model" / f"{PROBLEMS[1]}.json").read_text())
    by_name = {n["name"]: n for n in rec["nodes"]}
    src = by_name["_get_nth_weekday_of_month"]["context_source"]
    assert src == {"_timedelta": f"{PROBLEMS[1]}/_timedelta/toy_model/0",
                   "_get_nth_weekday_from": f"{PROBLEMS[1]}/_get_nth_weekday_from/toy_model/0"}
    assert by_name["_timedelta"]["context_source"] == {}


def test_batched_samples_split_tokens_and_latency(tmp_path, dataset):
    out = tmp_path / "rollouts"

    def script(body, seen):
        return Reply(contents=["```python\nx = 1\n```", "```python\nx = 22222\n```"],
                     usage={"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80})

    with FakeServer(script) as server:
        assert main(_args(server, out, "--samples-per-request", "2", "--problems",
                          "Basic__faker__luhn_checksum")) == 0
        assert all(b["n"] == 2 for b in server.bodies)
    rec = json.loads((out / "toy_model" / "Basic__faker__luhn_checksum.json").read_text())
    attempts = rec["nodes"][0]["attempts"]
    assert sum(a["output_tokens"] for a in attempts) == 30
    assert all(a["token_source"] == "estimated" and a["latency_source"] == "batch_token_share"
               for a in attempts)
    assert all(a["failure_reason"] == "missing_function" for a in attempts)


def test_prompt_carries_dependency_code_and_signature(dataset):
    p = dataset[PROBLEMS[1]]
    msgs = build_messages(p, "_get_nth_weekday_of_month", {"_timedelta": "def _timedelta(): 0"})
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "def _timedelta(): 0" in msgs[2]["content"]
    assert p.by_name["_get_nth_weekday_from"].reference_code.strip() in msgs[4]["content"]
    assert "def _get_nth_weekday_of_month(n: int, weekday: int, month: int, year: int)" \
        in msgs[5]["content"]


def test_extract_code_variants():
    assert extract_code("<think>```python\ndef f(): 0\n```</think>```python\ndef f(): 1\n```",
                        "f") == "def f(): 1\n"
    assert extract_code("```python\ndef g(): 0\n```\n```python\ndef f(): 2\n```\n"
                        "```python\nprint(f())\n```", "f") == "def f(): 2\n"
    assert extract_code("def f():\n    return 3\n", "f") == "def f():\n    return 3\n"
    assert extract_code("I cannot do that.", "f") is None
    assert extract_code("```python\ndef f(): 4", "f") == "def f(): 4\n"  # truncated answer


def test_cli_help_and_errors(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "--context" in capsys.readouterr().out
    assert main(["--model", "m", "--out-dir", str(tmp_path)]) == 2
    assert "--base-url is required" in capsys.readouterr().err
    assert main(["--model", "m", "--out-dir", str(tmp_path), "--base-url", "http://127.0.0.1:9",
                 "--problems", "no_such_problem"]) == 2
    assert "unknown problem id" in capsys.readouterr().err

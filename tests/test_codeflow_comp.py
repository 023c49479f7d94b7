"""CodeFlow-Comp on the synthetic fixture: loader errors, judging rules, conversion to pools."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codeflow.comp.dataset import load_comp_problems
from codeflow.comp.judge import (
    call_input,
    choose_rollout,
    golden_context,
    judge_attempt,
    printed_matches,
    script_stdin,
)
from codeflow.comp.to_pool import convert
from codeflow.comp.to_pool import main as comp_to_pool_main
from codeflow.extract import extract_all_blocks
from poolbuild.build_aligned import main as aligned_main
from simulator.base.errors import PoolError

FIX = Path(__file__).resolve().parent / "fixtures" / "codeflow_comp"
INPUT = FIX / "codeflow_comp_fixture.json"
HARNESS = {m: FIX / f"codeflow_comp_harness_model_{m}.json" for m in ("small", "large")}


@pytest.fixture(scope="module")
def problems():
    return {p.problem_id: p for p in load_comp_problems(INPUT)}


def _raw():
    return json.loads(INPUT.read_text())


def _write(tmp_path, obj, name="in.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


# ---------------------------------------------------------------------------- loader


def test_loader_reads_the_fixture(problems):
    assert list(problems) == ["SYN1A", "SYN2B", "SYN3C"]
    p = problems["SYN3C"]
    assert [s.name for s in p.subproblems] == ["longer", "common", "main"]
    assert p.last_turn.name == "main" and p.is_last_turn("main") and not p.is_last_turn("longer")
    assert p.parents("main") == [0, 1]
    assert p.by_name["main"].file_depth == 0 and p.overall_turns == 3
    assert p.by_name["longer"].tests[0].input == "(2, 5)"


def test_reference_falls_back_to_the_block_of_the_reference_program(tmp_path):
    raw = _raw()
    for s in raw[1]["subproblems"]:
        del s["solution"]
    p = load_comp_problems(_write(tmp_path, raw))[1]
    assert p.by_name["counts"].reference_code.startswith("def counts(a):\n    return Counter(a)")
    assert "def main" not in p.by_name["zero_pairs"].reference_code
    assert p.by_name["main"].reference_code.startswith("def main():")


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r[0]["subproblems"][0].pop("name"), "problem 'SYN1A': subproblem #0 has no 'name'"),
    (lambda r: r[1]["subproblems"][2]["dependencies"].append("nope"),
     "problem 'SYN2B', node 'main': depends on unknown 'nope'"),
    (lambda r: r[1]["subproblems"][0]["dependencies"].append("main"),
     "problem 'SYN2B': the dependency graph has a cycle"),
    (lambda r: r[2].update({"overall-turns": 4}),
     "problem 'SYN3C': 'overall-turns' is 4 but the problem has 3 subproblems"),
    (lambda r: r[0]["subproblems"][1]["test_code"].append({"input": "['2']"}),
     "problem 'SYN1A', node 'main': test #2 is not {input: str, output}"),
    (lambda r: r[0]["subproblems"][0].update({"test_code": [["(1,)", "1"]]}),
     "node 'square': test #0 is not {input: str, output}"),
    (lambda r: r[0].pop("problem-id"), "problem #0 has no 'problem-id'"),
])
def test_loader_refuses_bad_input_in_one_message(tmp_path, mutate, message):
    raw = _raw()
    mutate(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(PoolError) as exc:
        load_comp_problems(path)
    assert message in str(exc.value) and str(path) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_loader_refuses_a_file_that_is_not_a_list(tmp_path):
    with pytest.raises(PoolError, match="expected a list of problems, got a JSON object"):
        load_comp_problems(_write(tmp_path, {"problem-id": "x"}))


# ---------------------------------------------------------------------------- judging rules


def test_input_transforms():
    assert call_input("(3,)") == "(lambda *a, **k: (a, k))(3)"
    assert call_input("([1, 2],)") == "(lambda *a, **k: (a, k))([1, 2])"
    assert call_input("(2, 5)") == "(lambda *a, **k: (a, k))(2, 5)"
    assert call_input("7") == "(lambda *a, **k: (a, k))(7)"
    assert script_stdin("['4\\n1 -1  2 -2']") == "4 1 -1 2 -2\n"
    assert script_stdin("['3']") == "3\n"
    assert printed_matches("'abc'\n", "abc") and printed_matches(" 5 ", '"5"')
    assert not printed_matches("5", "6")


def _parallel(fn, items):
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(fn, items))


def test_every_reference_passes_its_own_tests_with_golden_upstream(problems):
    jobs = [(p, s.name) for p in problems.values() for s in p.subproblems]
    verdicts = _parallel(lambda j: judge_attempt(j[0], j[1], j[0].by_name[j[1]].reference_code,
                                                 golden_context(j[0], j[1])), jobs)
    for (p, name), v in zip(jobs, verdicts):
        assert v.success and v.harness_result == [1] * len(p.by_name[name].tests), (name, v)
        assert v.judged_as == ("script" if p.is_last_turn(name) else "call")
        assert v.judged_tests == (1 if p.is_last_turn(name) else len(p.by_name[name].tests))


@pytest.mark.parametrize("model", ["small", "large"])
def test_rejudging_the_fixture_rollouts_reproduces_their_verdicts(problems, model):
    harness = json.loads(HARNESS[model].read_text())
    jobs = []
    for hp in harness:
        p = problems[hp["problem-id"]]
        for hs in hp["subproblems"]:
            recs = {r["rollout_id"]: r for r in hs["rollout_records"]}
            for c in hs["rollout_candidates"]:
                jobs.append((p, hs["name"], c, recs[c["rollout_id"]]))
            # the recorded choice follows the rule: best pass rate, then lower total latency
            k = choose_rollout(hs["rollout_records"])
            assert hs["rollout_records"][k]["rollout_id"] == hs["selected_rollout_id"]
            assert hs["harness_result"] == hs["rollout_records"][k]["harness_result"]

    def rejudge(job):
        p, name, cand, _ = job
        # the judged code is ``generated``; the answer text holds it in a fence
        assert cand["generated"].strip() in extract_all_blocks(cand["original_output"])
        return judge_attempt(p, name, cand["generated"], golden_context(p, name))

    for (_, name, cand, rec), v in zip(jobs, _parallel(rejudge, jobs)):
        assert v.harness_result == rec["harness_result"], (name, cand["rollout_id"])
        assert v.pass_rate == rec["pass_rate"] and int(v.success) == rec["success"]


def test_judging_edge_cases(problems):
    p = problems["SYN2B"]
    ctx = golden_context(p, "main")
    exits = ("import sys\ndef main():\n    d = sys.stdin.read().split()\n"
             "    print(zero_pairs(list(map(int, d[1:]))))\n    sys.exit(0)\n")
    returns = "def main():\n    d = open(0).read().split()\n    return zero_pairs(list(map(int, d[1:])))\n"
    cases = [(exits, [1, 1], None), (returns, [1, 1], None),
             ("def main():\n    print(1)\n", [0, 0], "wrong_answer"),
             ("def main(:\n", [0, 0], "syntax_error"), ("", [0, 0], "no_code")]
    for (code, hr, reason), v in zip(cases, _parallel(lambda c: judge_attempt(p, "main", c[0], ctx),
                                                      cases)):
        assert (v.harness_result, v.failure_reason) == (hr, reason), code
    # an intermediate turn's own printing is part of the printed text
    v = judge_attempt(p, "zero_pairs", "def zero_pairs(a):\n    print('x')\n    return 3\n",
                      golden_context(p, "zero_pairs"))
    assert v.harness_result == [0, 0]
    # without the dependency in the context (isolated), the call fails
    v = judge_attempt(p, "zero_pairs", p.by_name["zero_pairs"].reference_code, [])
    assert v.harness_result == [0, 0] and v.failure_reason == "runtime_error"


# ---------------------------------------------------------------------------- conversion


def _pstd(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    out = tmp_path_factory.mktemp("comp_pools")
    paths = {}
    for m, h in HARNESS.items():
        paths[m] = out / m / "pool.jsonl"
        assert comp_to_pool_main([str(h), "--out", str(paths[m]), "--model", m]) == 0
    return paths


def _lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_conversion_gives_the_spec_statistics(pools):
    for m in HARNESS:
        dags = _lines(pools[m])
        assert [d["n_nodes"] for d in dags] == [2, 3, 3]
        assert [d["problem_id"] for d in dags] == ["SYN1A", "SYN2B", "SYN3C"]
        assert all(d["dag_kind"] == "codeflow_comp" for d in dags)
        assert [d["codeflow_source_index"] for d in dags] == [0, 1, 2]
        index = json.loads((pools[m].parent / "selected_dag_indices.json").read_text())
        assert index["dag_indices"] == [0, 1, 2]
    small = _lines(pools["small"])
    # SYN1A: square (depth 1) <- main (depth 0); layer = max depth - depth
    sq, main = small[0]["nodes"]
    assert (sq["parents"], sq["children"], sq["layer"]) == ([], [1], 0)
    assert (main["parents"], main["children"], main["layer"]) == ([0], [], 1)
    # latency = the batch latency; cost = token cost = output tokens (hand-copied from the file)
    lat, tok = [2.044, 3.007, 1.797], [223, 328, 196]
    t = sq["template"]
    assert t["success_prob"] == 1.0
    assert t["lat_mean"] == pytest.approx(6.848 / 3)
    assert t["lat_std"] == pytest.approx(_pstd(lat))
    assert t["cost_mean"] == t["token_cost_mean"] == pytest.approx(747 / 3)
    assert t["cost_source"] == "output_tokens"
    assert [r["latency"] for r in sq["empirical_samples"]] == lat
    assert [r["token_cost"] for r in sq["empirical_samples"]] == tok
    t = main["template"]  # verdicts 0, 1, 1
    assert t["success_prob"] == pytest.approx(2 / 3)
    assert t["lat_mean"] == pytest.approx((5.555 + 3.658 + 5.61) / 3)
    assert t["cost_mean"] == pytest.approx((606 + 399 + 612) / 3)
    assert main["meta"] == {"name": "main", "status": "success", "harness_result": [1, 1],
                            "n_rollouts": 3, "num_tests": 2}
    # SYN3C: main depends on both leaves
    assert small[2]["nodes"][2]["parents"] == [0, 1]
    assert small[2]["nodes"][0]["children"] == [2]
    large = _lines(pools["large"])
    assert large[0]["nodes"][0]["template"]["lat_mean"] == pytest.approx(
        (69.52 + 47.19 + 17.666) / 3)


def _one_problem(subs):
    return [{"problem-id": "X1", "overall-turns": len(subs), "overall-depth": 1,
             "subproblems": subs}]


def _sub(name, deps=(), **extra):
    return {"name": name, "dependencies": list(deps), "depth": 0,
            "test_code": [{"input": "(1,)", "output": "1"}, {"input": "(2,)", "output": "2"}],
            **extra}


def _convert(tmp_path, subs):
    path = _write(tmp_path, _one_problem(subs), "h.json")
    convert([path], tmp_path / "p.jsonl")
    return _lines(tmp_path / "p.jsonl")[0]["nodes"]


def test_conversion_fallbacks_and_floors(tmp_path):
    rec = {"rollout_id": 0, "success": 1, "pass_rate": 1.0}
    subs = [
        # identical latencies: lat_std floored at 1e-3; tokens only on the candidate
        _sub("a", rollout_records=[{**rec, "infer_batch_latency_sec": 2.0},
                                   {**rec, "rollout_id": 1, "infer_batch_latency_sec": 2.0}],
             rollout_candidates=[{"rollout_id": 0, "output_tokens": 10},
                                 {"rollout_id": 1, "output_tokens": 30}]),
        # no batch latency: inference latency; zero latency floored at 1e-9; explicit cost
        _sub("b", rollout_records=[{**rec, "infer_latency_sec": 0.0, "cost": 5.0},
                                   {**rec, "rollout_id": 1, "success": 0,
                                    "total_latency_sec": 4.0, "cost": 0.0}]),
        # no tokens, no cost: total_tokens, then the total latency; no latency at all: 0
        _sub("c", rollout_records=[{**rec, "total_latency_sec": 3.0, "total_tokens": 50},
                                   {**rec, "rollout_id": 1, "total_latency_sec": 6.0},
                                   {**rec, "rollout_id": 2}]),
        # judged only: verdicts 1, 0, 1 over two tests
        _sub("d", harness_result=[1, 0, 1]),
        # no candidates (the harness gives [0]); and nothing at all, no tests
        _sub("e", harness_result=[0], rollout_candidates=[], rollout_records=[],
             selected_rollout_id=-1),
        {**_sub("f"), "test_code": []},
        # records, none usable
        _sub("g", rollout_records=[{"rollout_id": 0}]),
    ]
    a, b, c, d, e, f, g = _convert(tmp_path, subs)
    assert a["template"]["lat_mean"] == 2.0 and a["template"]["lat_std"] == 1e-3
    assert a["template"]["token_cost_mean"] == 20.0 and a["template"]["cost_source"] == "output_tokens"
    assert [r["latency"] for r in b["empirical_samples"]] == [1e-9, 4.0]
    assert [r["cost"] for r in b["empirical_samples"]] == [5.0, 1e-9]
    assert b["template"]["token_cost_mean"] is None and b["template"]["cost_source"] == "explicit_cost"
    assert b["template"]["success_prob"] == 0.5 and b["meta"]["status"] == "success"
    assert [r["cost"] for r in c["empirical_samples"]] == [50.0, 6.0, 1e-9]
    assert [r["latency"] for r in c["empirical_samples"]] == [3.0, 6.0, 0.0]
    assert c["template"]["cost_source"] == "latency_fallback"
    td = d["template"]
    assert td["success_prob"] == pytest.approx(2 / 3) and td["lat_mean"] == td["cost_mean"] == 3.0
    assert td["lat_std"] == pytest.approx(0.6)
    assert [r["success"] for r in d["empirical_samples"]] == [1, 0, 1]
    assert d["meta"]["status"] == "failed" and d["meta"]["n_rollouts"] == 0
    te = e["template"]
    assert (te["success_prob"], te["lat_mean"], te["cost_mean"]) == (0.0, 2.0, 2.0)
    assert [r["success"] for r in e["empirical_samples"]] == [0] and e["meta"]["status"] == "failed"
    tf = f["template"]
    assert (tf["success_prob"], tf["lat_mean"], tf["lat_std"]) == (0.5, 1.0, pytest.approx(0.2))
    assert [r["success"] for r in f["empirical_samples"]] == [1] and f["meta"]["status"] == "unknown"
    assert g["empirical_samples"][0] | {"note": None} == {
        "latency": 1.0, "success": 0, "token_cost": None, "cost": 1.0,
        "cost_source": "latency_fallback", "note": None}
    assert g["meta"]["status"] == "failed"


@pytest.mark.parametrize("harness, message", [
    ({"problem-id": "x"}, "expected a list of problems, got a JSON object"),
    ([], "the harness file holds no problem"),
    ([{"subproblems": [_sub("a")]}], "problem #0 has no 'problem-id'"),
    (_one_problem([_sub("a", ["b"]), _sub("b", ["a"])]),
     "problem 'X1': the dependency graph has a cycle ("),
    (_one_problem([_sub("a"), {"dependencies": []}]), "problem 'X1': subproblem #1 has no 'name'"),
    (_one_problem([]), "problem 'X1': no 'subproblems' list"),
])
def test_conversion_refuses_bad_harness_files(tmp_path, capsys, harness, message):
    path = _write(tmp_path, harness, "h.json")
    assert comp_to_pool_main([str(path), "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and err.count("\n") == 1
    assert not (tmp_path / "p.jsonl").exists()


def test_unknown_dependencies_are_ignored_and_duplicates_refused(tmp_path, capsys):
    nodes = _convert(tmp_path, [_sub("a", ["ghost"]), _sub("b", ["a", "a"])])
    assert [n["parents"] for n in nodes] == [[], [0]]
    h = _write(tmp_path, _one_problem([_sub("a")]), "h.json")
    assert comp_to_pool_main([str(h), str(h), "--out", str(tmp_path / "p2.jsonl")]) == 2
    assert "problem 'X1' appears twice" in capsys.readouterr().err


def test_aligned_union_validates_and_simulates(pools, tmp_path):
    out = tmp_path / "aligned"
    assert aligned_main(["--pool", f"small={pools['small']}", "--pool", f"large={pools['large']}",
                         "--out-dir", str(out)]) == 0
    multi = out / "multi_model.jsonl"
    dags = _lines(multi)
    assert [d["n_nodes"] for d in dags] == [2, 3, 3]
    node = dags[0]["nodes"][0]
    assert set(node["model_templates"]) == {"small", "large"}
    assert node["model_templates"]["large"]["lat_mean"] == pytest.approx((69.52 + 47.19 + 17.666) / 3)
    cp = subprocess.run([sys.executable, "-m", "simulator", "validate", "--pool", str(multi)],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert "models: small, large" in cp.stdout
    for method, extra in (("sequential", ["--trials", "200"]),
                          ("mc_portfolio_rollout", ["--trials", "4", "--mc-portfolio-m", "8"])):
        cp = subprocess.run([sys.executable, "-m", "simulator", "simulate", "--pool", str(multi),
                             "--dag", "1", "--budget-ratio", "1", "--deadline-ratio", "1",
                             "--method", method, "--json", *extra],
                            capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
        res = json.loads(cp.stdout)
        assert res["problem_id"] == "SYN2B" and 0.0 <= res["on_time_completion_probability"] <= 1.0



def test_graph_follows_the_published_rule_through_the_shared_builder(tmp_path, caplog):
    """Parents: the known dependency names' positions, sorted, once each, a self-loop dropped with a
    warning; children: the inverse; overall depth from the graph when the file gives none. The oracle
    below is the published rule written out; the converter takes the graph from simulator.pools.graph."""
    deps = {"e": ["d", "a", 3, None, "ghost", "c", "a"], "d": ["b", "d"], "c": ["a"], "b": [], "a": []}
    subs = [_sub(name, ds) for name, ds in deps.items()]
    problem = _one_problem(subs)
    del problem[0]["overall-depth"]
    path = _write(tmp_path, problem, "h.json")
    with caplog.at_level("WARNING", logger="codeflow.comp.to_pool"):
        convert([path], tmp_path / "p.jsonl")
    dag = _lines(tmp_path / "p.jsonl")[0]
    pos = {name: k for k, name in enumerate(deps)}
    want_parents = [sorted({pos[d] for d in ds if isinstance(d, str) and d in pos} - {pos[name]})
                    for name, ds in deps.items()]
    assert [n["parents"] for n in dag["nodes"]] == want_parents == [[1, 2, 4], [3], [4], [], []]
    assert [n["children"] for n in dag["nodes"]] == [
        [k for k, ps in enumerate(want_parents) if v in ps] for v in range(len(deps))]
    assert dag["overall_depth"] == 3  # a, b roots; c (on a) and d (on b) at 1; e (on d, c, a) at 2
    assert ["depends on itself" in r.getMessage() and "'d'" in r.getMessage() for r in caplog.records] == [True]

"""CodeFlow-Comp dataset tools: the seeded sampler and the streaming splitter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codeflow.comp.dataset import load_comp_problems
from codeflow.comp.sample import main as sample_main
from codeflow.comp.split import iter_json_array, split
from codeflow.comp.split import main as split_main

FIX = Path(__file__).resolve().parent / "fixtures" / "codeflow_comp"
INPUT = FIX / "codeflow_comp_fixture.json"
ROOT = Path(__file__).resolve().parents[1]


def _big(tmp_path, n=25):
    """n problems: the fixture's, repeated with new ids."""
    base = json.loads(INPUT.read_text())
    items = [{**base[i % 3], "problem-id": f"P{i}"} for i in range(n)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(items, indent=1))
    return path, items


def test_sampler_draws_with_a_seed_and_restores_the_subset(tmp_path):
    path, items = _big(tmp_path)
    out = tmp_path / "sub.json"
    assert sample_main([str(path), "--n", "7", "--seed", "3", "--out", str(out)]) == 0
    sub = json.loads(out.read_text())
    idx = json.loads((tmp_path / "sub.indices.json").read_text())
    assert idx["n"] == 7 and idx["seed"] == 3 and len(set(idx["indices"])) == 7
    assert idx["indices"] == sorted(idx["indices"])
    assert [p["_source_index"] for p in sub] == idx["indices"]
    assert [p["problem-id"] for p in sub] == [f"P{i}" for i in idx["indices"]]
    # the same seed draws the same subset; another seed another one
    again = tmp_path / "again.json"
    assert sample_main([str(path), "--n", "7", "--seed", "3", "--out", str(again)]) == 0
    assert json.loads(again.read_text()) == sub
    other = tmp_path / "other.json"
    assert sample_main([str(path), "--n", "7", "--seed", "4", "--out", str(other)]) == 0
    assert json.loads(other.read_text()) != sub
    # restored from the indices file
    restored = tmp_path / "restored.json"
    assert sample_main([str(path), "--indices", str(tmp_path / "sub.indices.json"),
                        "--out", str(restored)]) == 0
    assert json.loads(restored.read_text()) == sub
    # the loader takes _source_index as the source index
    assert [p.source_index for p in load_comp_problems(out)] == idx["indices"]


@pytest.mark.parametrize("content, extra, message", [
    ([], ["--n", "1"], "the file holds no problem"),
    ({"a": 1}, ["--n", "1"], "expected a list of problems, got a JSON object"),
    (None, ["--n", "30"], "--n must be between 1 and the number of problems (25)"),
    (None, ["--indices", "IDX:[3, 25]"], "index 25 is out of range (the input has 25 problems)"),
    (None, ["--indices", "IDX:[]"], "the indices file selects no problem"),
    (None, ["--indices", "IDX:[1, 1]"], "an index is listed twice"),
    (None, ["--indices", 'IDX:{"other": [1]}'], "needs a list or one of the keys"),
])
def test_sampler_refuses_bad_input(tmp_path, capsys, content, extra, message):
    if content is None:
        path, _ = _big(tmp_path)
    else:
        path = tmp_path / "in.json"
        path.write_text(json.dumps(content))
    args = []
    for a in extra:
        if a.startswith("IDX:"):
            (tmp_path / "idx.json").write_text(a[4:])
            a = str(tmp_path / "idx.json")
        args.append(a)
    assert sample_main([str(path), *args, "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o.json").exists()


def test_stream_reader_matches_json_load_with_tiny_reads(tmp_path):
    path, items = _big(tmp_path, 9)
    # 7-character reads: every element and many strings and numbers span reads
    assert [x for _, x in iter_json_array(path, chunk=7)] == items
    odd = tmp_path / "odd.json"
    odd.write_text(' [ 1 , 23456 , "a,]b" , {"k": [1, 2]} , -1.5e3 ] \n')
    assert [x for _, x in iter_json_array(odd, chunk=3)] == [1, 23456, "a,]b", {"k": [1, 2]},
                                                             -1500.0]
    empty = tmp_path / "empty.json"
    empty.write_text("[ ]")
    assert list(iter_json_array(empty)) == []


def test_splitter_writes_shards_of_a_range(tmp_path, capsys):
    path, items = _big(tmp_path)
    out = tmp_path / "shards"
    assert split_main([str(path), "--out-dir", str(out), "--items-per-shard", "4",
                       "--start", "3", "--end", "14", "--tag-source-index",
                       "--progress-every", "5"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["items"] for s in manifest["shards"]] == [4, 4, 3]
    assert [(s["first_index"], s["last_index"]) for s in manifest["shards"]] == [(3, 6), (7, 10),
                                                                                  (11, 13)]
    got = [p for s in manifest["shards"] for p in json.loads((out / s["file"]).read_text())]
    assert [p["_source_index"] for p in got] == list(range(3, 14))
    assert [{k: v for k, v in p.items() if k != "_source_index"} for p in got] == items[3:14]
    err = capsys.readouterr().err
    assert "read 5 elements" in err and "read 10 elements" in err
    # a shard is a valid Comp file
    assert [p.source_index for p in load_comp_problems(out / "shard_00000.json")] == [3, 4, 5, 6]


@pytest.mark.parametrize("text, args, message", [
    ('{"a": 1}', [], "not a JSON array (expected '[') at character 0"),
    ("[1, 2,, 3]", [], "invalid JSON in element 2"),
    ("[1, 2] x", [], "data after the end of the array"),
    ("[1 2]", [], "expected ',' or ']' after element 0"),
    ("[1, 2]", ["--tag-source-index"], "element 0 is not an object"),
    ("[1, 2]", ["--start", "5"], "no element with an index in [5, None)"),
    ("[1, 2]", ["--items-per-shard", "0"], "--items-per-shard must be at least 1"),
])
def test_splitter_refuses_bad_input(tmp_path, capsys, text, args, message):
    path = tmp_path / "in.json"
    path.write_text(text)
    full = [str(path), "--out-dir", str(tmp_path / "s"), "--items-per-shard", "1", *args]
    assert split_main(full) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_tools_run_as_documented_commands(tmp_path):
    path, _ = _big(tmp_path, 5)
    for cmd in (["codeflow.comp.sample", str(path), "--n", "2", "--out", str(tmp_path / "s.json")],
                ["codeflow.comp.split", str(path), "--out-dir", str(tmp_path / "sh"),
                 "--items-per-shard", "2"]):
        cp = subprocess.run([sys.executable, "-m", *cmd], cwd=ROOT, capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
    assert len(split(path, tmp_path / "sh2", 2)["shards"]) == 3

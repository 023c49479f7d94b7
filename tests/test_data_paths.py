"""Data paths keep their promise (issue 28): each bad input refused in one line (exit 2) with nothing
written or changed, no output overwrites an input or lands outside its folder.

Table-driven, one table per entry point: (arguments, expected exit code,
words expected in the one ``error:`` line). Every entry point is called in
process (its ``main``), which is what the command line runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from simulator.base.errors import ConfigError
from simulator.base.outputs import check_output_name, check_output_path, write_output_text

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "codeflow_comp"
COMP = FIX / "codeflow_comp_fixture.json"
HARNESS_SMALL = FIX / "codeflow_comp_harness_model_small.json"
POOL = ROOT / "examples" / "example_pool.jsonl"


def snapshot(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under ``root`` (what "nothing written or changed" compares)."""
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = Path(dp, f)
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def refused(main, argv, capsys, words, root: Path, code=2) -> str:
    """Run ``main(argv)``: exit ``code``, one ``error:`` line holding every word, nothing under ``root`` changed."""
    before = snapshot(root)
    rc = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert snapshot(root) == before, "a refused command wrote or changed a file"
    return lines[0]


# ----------------------------------------------------------------------------- the helper itself


def test_check_output_path_refuses_inputs_and_escapes(tmp_path):
    src = tmp_path / "data.json"
    src.write_text("[]")
    (tmp_path / "out").mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(src)
    hard = tmp_path / "hard.json"
    os.link(src, hard)
    for p in (src, link, hard, tmp_path / "out" / ".." / "data.json"):
        with pytest.raises(ConfigError, match="is the input"):
            check_output_path(p, inputs=[str(src)])
    with pytest.raises(ConfigError, match="outside the output folder"):
        check_output_path(tmp_path / "out" / ".." / "x.json", inside=tmp_path / "out")
    with pytest.raises(ConfigError, match="is a directory"):
        check_output_path(tmp_path / "out", flag="--trace")
    with pytest.raises(ConfigError, match="already exists"):
        check_output_path(src, overwrite=False)
    with pytest.raises(ConfigError, match="not a directory"):
        check_output_path(src / "x.json")
    assert check_output_path(tmp_path / "out" / "new" / "x.json", inputs=[src, None], inside=tmp_path / "out") == (
        tmp_path / "out" / "new" / "x.json").resolve()
    for bad in ("", ".", "..", "../x", "a/b"):
        with pytest.raises(ConfigError, match="plain name"):
            check_output_name(bad, flag="--prefix")
    write_output_text(tmp_path / "out" / "y.txt", "hi", inputs=[src], inside=tmp_path / "out")
    assert (tmp_path / "out" / "y.txt").read_text() == "hi"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["y.txt"]  # no temporary file left


# ----------------------------------------------------------------------------- comp_sample


def _comp_copy(tmp_path) -> Path:
    p = tmp_path / "comp.json"
    p.write_bytes(COMP.read_bytes())
    return p


SAMPLE_CASES = [
    (["--n", "1", "--out", "{src}"], ["--out", "is the input"]),
    (["--n", "1", "--out", "{tmp}/o.json", "--indices-out", "{src}"], ["--indices-out", "is the input"]),
    (["--n", "1", "--out", "{tmp}/o.json", "--indices-out", "{tmp}/o.json"], ["--indices-out", "is the input"]),
    (["--indices", "{tmp}/idx.json", "--out", "{tmp}/idx.json"], ["--out", "is the input"]),
    (["--n", "1", "--seed", "-5", "--out", "{tmp}/o.json"], ["--seed", ">= 0", "-5"]),
    (["--n", "1", "--out", "{tmp}"], ["--out", "is a directory"]),
]


@pytest.mark.parametrize("args,words", SAMPLE_CASES)
def test_comp_sample_table(tmp_path, capsys, args, words):
    from codeflow.comp_sample import main

    src = _comp_copy(tmp_path)
    (tmp_path / "idx.json").write_text("[0]")
    argv = [str(src)] + [a.format(src=src, tmp=tmp_path) for a in args]
    refused(main, argv, capsys, words, tmp_path)


# ----------------------------------------------------------------------------- comp_to_pool


def _harness_copy(tmp_path) -> Path:
    p = tmp_path / "judged.json"
    p.write_bytes(HARNESS_SMALL.read_bytes())
    return p


def _edited_harness(tmp_path, edit) -> Path:
    data = json.loads(HARNESS_SMALL.read_text())
    edit(data)
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(data))
    return p


def _sub(data, k=0):
    return data[0]["subproblems"][k]


TO_POOL_CASES = [
    ("judged", ["--out", "{src}"], ["--out", "is the input"]),
    ("judged", ["--out", "{tmp}/p.jsonl", "--index-out", "{src}"], ["--index-out", "is the input"]),
    ("judged", ["--out", "{tmp}/p.jsonl", "--index-out", "{tmp}/p.jsonl"], ["--index-out", "is the input"]),
    (lambda d: _sub(d).update(name=""), ["--out", "{tmp}/p.jsonl"], ["subproblem #0", "empty 'name'"]),
    (lambda d: _sub(d).update(rollout_records="abc"), ["--out", "{tmp}/p.jsonl"],
     ["rollout_records", "a list"]),
    (lambda d: _sub(d).update(harness_result="PASS"), ["--out", "{tmp}/p.jsonl"], ["harness_result", "list"]),
    (lambda d: _sub(d).update(harness_result=[1, 7]), ["--out", "{tmp}/p.jsonl"], ["harness_result", "0 or 1"]),
    (lambda d: d[0].update({"overall-turns": "2"}), ["--out", "{tmp}/p.jsonl"],
     ["overall-turns", "must be an integer", "str"]),
]


@pytest.mark.parametrize("which,args,words", TO_POOL_CASES)
def test_comp_to_pool_table(tmp_path, capsys, which, args, words):
    from codeflow.comp_to_pool import main

    src = _harness_copy(tmp_path) if which == "judged" else _edited_harness(tmp_path, which)
    argv = [str(src)] + [a.format(src=src, tmp=tmp_path) for a in args]
    refused(main, argv, capsys, words, tmp_path)


def test_comp_to_pool_refuses_a_bare_nan(tmp_path, capsys):
    from codeflow.comp_to_pool import main

    text = HARNESS_SMALL.read_text()
    data = json.loads(text)
    recs = _sub(data).get("rollout_records")
    assert isinstance(recs, list) and recs, "the fixture has rollout records"
    recs[0]["output_tokens"] = float("nan")
    src = tmp_path / "nan.json"
    src.write_text(json.dumps(data))  # Python writes a bare NaN: not JSON
    refused(main, [str(src), "--out", str(tmp_path / "p.jsonl")], capsys, ["NaN", "not JSON"], tmp_path)


# ----------------------------------------------------------------------------- comp_split

SPLIT_CASES = [
    (["--prefix", "../x"], ["--prefix", "plain name"]),
    (["--prefix", ""], ["--prefix", "plain name"]),
    (["--progress-every", "-1"], ["--progress-every", ">= 0"]),
    (["--out-dir", "{tmp}/comp.json"], ["--out-dir", "is a file"]),
]


@pytest.mark.parametrize("args,words", SPLIT_CASES)
def test_comp_split_table(tmp_path, capsys, args, words):
    from codeflow.comp_split import main

    src = _comp_copy(tmp_path)
    argv = [str(src), "--out-dir", str(tmp_path / "out"), "--items-per-shard", "1"]
    argv += [a.format(tmp=tmp_path) for a in args]
    refused(main, argv, capsys, words, tmp_path)
    assert not (tmp_path / "out").exists()


def test_comp_split_truncated_input_leaves_nothing(tmp_path, capsys):
    from codeflow.comp_split import main

    items = json.loads(COMP.read_text()) * 5
    text = json.dumps(items)
    src = tmp_path / "cut.json"
    src.write_text(text[: int(len(text) * 0.9)])
    refused(main, [str(src), "--out-dir", str(tmp_path / "out"), "--items-per-shard", "1"], capsys,
            ["invalid JSON"], tmp_path)  # fmt: skip
    assert not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    refused(main, [str(src), "--out-dir", str(tmp_path / "out"), "--items-per-shard", "1"], capsys,
            ["invalid JSON"], tmp_path)  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["notes.txt"]


def test_comp_split_into_a_folder_with_shards_is_refused(tmp_path, capsys):
    from codeflow.comp_split import main

    src = _comp_copy(tmp_path)
    out = tmp_path / "out"
    assert main([str(src), "--out-dir", str(out), "--items-per-shard", "1"]) == 0
    capsys.readouterr()
    refused(main, [str(src), "--out-dir", str(out), "--items-per-shard", "2"], capsys,
            ["--out-dir", "already holds", "empty folder"], tmp_path)  # fmt: skip


# ----------------------------------------------------------------------------- run_shard.py

SHARD_BASE = {"--pool": str(POOL), "--budget-group": "b00", "--budget": "ratio:1", "--deadlines": "ratio:1",
              "--dags": "0", "--trials": "1", "--seed": "0", "--cost-mode": "token_cost_mean",
              "--latency-dist": "lognormal", "--methods": "sequential"}  # fmt: skip

SHARD_CASES = [
    ({"--dags": "5-2"}, ["--dags", "descending"]),
    ({"--dags": ""}, ["--dags", "no DAG"]),
    ({"--dags": "0,0"}, ["--dags", "DAG 0 is listed twice"]),
    ({"--dags": "-1"}, ["--dags"]),
    ({"--dags": "x"}, ["--dags", "not a row"]),
    ({"--trials": "0"}, ["--trials", ">= 1"]),
    ({"--trials": "-2"}, ["--trials", ">= 1"]),
    ({"--seed": "-1"}, ["--seed", ">= 0"]),
    ({"--methods": ""}, ["--methods", "no method"]),
    ({"--methods": "nosuch"}, ["--methods", "nosuch"]),
    ({"--budget": "ratio:-1"}, ["--budget", "ratio:-1"]),
    ({"--budget": "abc"}, ["--budget", "abc"]),
    ({"--deadlines": ""}, ["--deadlines", "no deadline"]),
    ({"--deadlines": "ratio:0"}, ["--deadlines", "ratio:0"]),
    ({"--budget-group": "../../x"}, ["--budget-group", "plain name"]),
    ({"--budget-group": ".."}, ["--budget-group", "plain name"]),
    ({"--latency-dist": "foo"}, ["--latency-dist", "lognormal"]),
    ({"--cost-mode": "foo"}, ["--cost-mode", "foo"]),
    ({"--dags": "5-2", "--latency-dist": "foo"}, ["--"]),
]


def _shard_argv(tmp_path, over):
    args = {**SHARD_BASE, "--out-dir": str(tmp_path / "out"), **over}
    return [x for k, v in args.items() for x in (k, v)]


@pytest.mark.parametrize("over,words", SHARD_CASES)
def test_run_shard_table(tmp_path, capsys, over, words):
    import run_shard

    refused(run_shard.main, _shard_argv(tmp_path, over), capsys, words, tmp_path)
    assert not (tmp_path / "out").exists()


def test_run_shard_valid_flags_write_a_verified_part(tmp_path, capsys):
    import run_shard
    from harness.shards import part_records

    assert run_shard.main(_shard_argv(tmp_path, {"--dags": "0-1", "--trials": "2"})) == 0
    assert "4 records" in capsys.readouterr().out
    recs = part_records(str(tmp_path / "out" / "b00" / "dag_000001.jsonl"))
    assert len(recs) == 2 and {r["dag_idx"] for r in recs} == {1}

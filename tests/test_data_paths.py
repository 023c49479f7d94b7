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


# ----------------------------------------------------------------------------- comp/sample


def _comp_copy(tmp_path) -> Path:
    p = tmp_path / "comp.json"
    p.write_bytes(COMP.read_bytes())
    return p


SAMPLE_CASES = [
    (["--n", "1", "--out", "{src}"], ["--out", "is the input"]),
    (["--n", "1", "--out", "{tmp}/o.json", "--indices-out", "{src}"], ["--indices-out", "is the input"]),
    (["--n", "1", "--out", "{tmp}/o.json", "--indices-out", "{tmp}/o.json"], ["--indices-out", "is also --out"]),
    (["--indices", "{tmp}/idx.json", "--out", "{tmp}/idx.json"], ["--out", "is the input"]),
    (["--n", "1", "--seed", "-5", "--out", "{tmp}/o.json"], ["--seed", ">= 0", "-5"]),
    (["--n", "1", "--out", "{tmp}"], ["--out", "is a directory"]),
]


@pytest.mark.parametrize("args,words", SAMPLE_CASES)
def test_comp_sample_table(tmp_path, capsys, args, words):
    from codeflow.comp.sample import main

    src = _comp_copy(tmp_path)
    (tmp_path / "idx.json").write_text("[0]")
    argv = [str(src)] + [a.format(src=src, tmp=tmp_path) for a in args]
    refused(main, argv, capsys, words, tmp_path)


# ----------------------------------------------------------------------------- comp/to_pool


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
    ("judged", ["--out", "{tmp}/p.jsonl", "--index-out", "{tmp}/p.jsonl"], ["--index-out", "is also --out"]),
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
    from codeflow.comp.to_pool import main

    src = _harness_copy(tmp_path) if which == "judged" else _edited_harness(tmp_path, which)
    argv = [str(src)] + [a.format(src=src, tmp=tmp_path) for a in args]
    refused(main, argv, capsys, words, tmp_path)


def test_comp_to_pool_refuses_a_bare_nan(tmp_path, capsys):
    from codeflow.comp.to_pool import main

    text = HARNESS_SMALL.read_text()
    data = json.loads(text)
    recs = _sub(data).get("rollout_records")
    assert isinstance(recs, list) and recs, "the fixture has rollout records"
    recs[0]["output_tokens"] = float("nan")
    src = tmp_path / "nan.json"
    src.write_text(json.dumps(data))  # Python writes a bare NaN: not JSON
    refused(main, [str(src), "--out", str(tmp_path / "p.jsonl")], capsys, ["NaN", "not a JSON number"], tmp_path)


# ----------------------------------------------------------------------------- comp/split

SPLIT_CASES = [
    (["--prefix", "../x"], ["--prefix", "plain name"]),
    (["--prefix", ""], ["--prefix", "plain name"]),
    (["--progress-every", "-1"], ["--progress-every", ">= 0"]),
    (["--out-dir", "{tmp}/comp.json"], ["--out-dir", "is the input"]),
    (["--out-dir", "{tmp}/other.txt"], ["--out-dir", "is a file"]),
]


@pytest.mark.parametrize("args,words", SPLIT_CASES)
def test_comp_split_table(tmp_path, capsys, args, words):
    from codeflow.comp.split import main

    src = _comp_copy(tmp_path)
    (tmp_path / "other.txt").write_text("x")
    argv = [str(src), "--out-dir", str(tmp_path / "out"), "--items-per-shard", "1"]
    argv += [a.format(tmp=tmp_path) for a in args]
    refused(main, argv, capsys, words, tmp_path)
    assert not (tmp_path / "out").exists()


def test_comp_split_truncated_input_leaves_nothing(tmp_path, capsys):
    from codeflow.comp.split import main

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
    from codeflow.comp.split import main

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
    # issue 44: decided from the options, before any episode
    ({"--mcpp-params": "[1,2]"}, ["--mcpp-params", "expected a JSON object"]),
    ({"--mcpp-params": '{"a": 1, "a": 2}'}, ["--mcpp-params", "given twice"]),
    ({"--prices": '{"m": NaN}'}, ["--prices", "NaN"]),
    ({"--prices": '{"m": -1}'}, ["--prices", "non-negative"]),
    ({"--deadlines": "ratio:1,ratio:1"}, ["--deadlines", "repeated", "ratio:1"]),
    ({"--progress-file": "{pool}"}, ["--progress-file", "is the input --pool"]),
]


def _shard_argv(tmp_path, over):
    pool = tmp_path / "pool.jsonl"  # a copy: a refusal that failed would overwrite it, never the example
    if not pool.exists():
        pool.write_bytes(POOL.read_bytes())
    args = {**SHARD_BASE, "--pool": str(pool), "--out-dir": str(tmp_path / "out"),
            **{k: v.replace("{pool}", str(pool)) for k, v in over.items()}}
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


# ----------------------------------------------------------------------------- python -m simulator


def _pool_line(**over) -> str:
    line = {"problem_id": "z", "nodes": [{"node_id": 0, "parents": [], "children": [],
            "template": {"success_prob": 0.5, "lat_mean": 1, "lat_std": 1, "cost_mean": 5, "token_cost_mean": 5}}]}
    line.update(over)
    return json.dumps(line) + "\n"


def _zero_cost_line() -> str:
    line = json.loads(_pool_line())
    line["nodes"][0]["template"].update(cost_mean=0, token_cost_mean=0)
    return json.dumps(line) + "\n"


def _huge_id_line() -> str:
    line = json.loads(_pool_line())
    line["nodes"][0]["node_id"] = 2**70
    return json.dumps(line) + "\n"


SIM_CASES = [
    ("validate", _pool_line(n_nodes="5"), [], ["n_nodes", "must be an integer", "a string '5'"]),
    ("validate", _pool_line(n_nodes=True), [], ["n_nodes", "must be an integer", "a boolean"]),
    ("validate", _huge_id_line(), [], ["node_id", "64 bits"]),
    ("simulate", _zero_cost_line(), ["--dag", "0", "--budget-ratio", "1", "--deadline-ratio", "1", "--method",
                                     "sequential", "--trials", "3"], ["nominal budget of this DAG is 0",
                                                                      "every cost", "--budget-ratio"]),
    ("predict", _pool_line(), ["--dag", "0", "--budget-ratios", "1e308", "--deadlines", "30", "--trials", "2",
                               "--out", "{tmp}/pred"], ["--budget-ratios", "beyond the float range"]),
    ("predict", _zero_cost_line(), ["--dag", "0", "--budget-ratios", "1", "--deadlines", "30", "--trials", "2",
                                    "--out", "{tmp}/pred"], ["--budget-ratios", "nominal budget of this DAG is 0"]),
]


@pytest.mark.parametrize("cmd,line,args,words", SIM_CASES)
def test_simulator_table(tmp_path, capsys, cmd, line, args, words):
    from simulator.cli.main import main

    pool = tmp_path / "pool.jsonl"
    pool.write_text(line)
    refused(main, [cmd, "--pool", str(pool), *[a.format(tmp=tmp_path) for a in args]], capsys, words, tmp_path)


def test_gen_jobs_refuses_a_huge_node_id_in_one_line(tmp_path):
    import subprocess
    import sys

    from harness_util import clean_env, config_env

    pool = tmp_path / "pool.jsonl"
    pool.write_text(_huge_id_line())
    env = clean_env(**config_env(tmp_path, str(pool)))
    r = subprocess.run([sys.executable, str(ROOT / "gen_jobs.py"), "--quiet"], env=env, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "64 bits" in r.stderr


# ----------------------------------------------------------------------------- the Comp loader


def test_comp_loader_names_the_type_of_overall_turns(tmp_path):
    from codeflow.comp.dataset import load_comp_problems
    from simulator.base.errors import PoolError

    data = json.loads(COMP.read_text())
    data[0]["overall-turns"] = str(len(data[0]["subproblems"]))
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    with pytest.raises(PoolError, match="'overall-turns' must be an integer >= 1, got a string"):
        load_comp_problems(p)


# ----------------------------------------------------------------------------- harness


def test_access_errors_are_one_line(capsys):
    """A read-only results root or run folder: one line naming the file, exit 2 (root can write anywhere,
    so the error is raised here as the file system would)."""
    import errno

    from simulator.base.errors import cli_entry

    def write_into_read_only():
        raise PermissionError(errno.EACCES, "Permission denied", "/results/run/run.json")

    def read_only_fs():
        raise OSError(errno.EROFS, "Read-only file system", "/results/run/state/s00000.claim")

    for fn, words in ((write_into_read_only, "Permission denied"), (read_only_fs, "Read-only file system")):
        assert cli_entry(fn)() == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and "/results/run/" in err[0]


def test_merge_shards_on_a_surface_job_is_one_line(tmp_path, capsys):
    import merge_shards

    job = tmp_path / "run" / "surface_job"
    job.mkdir(parents=True)
    (job / "run.json").write_text(json.dumps({"kind": "surface", "shards": []}))
    line = refused(merge_shards.main, ["--run-dir", str(job)], capsys, ["surface job", "surface --merge"], tmp_path)
    assert str(tmp_path / "run") in line
    (job / "run.json").write_text(json.dumps({"shards": []}))
    refused(merge_shards.main, ["--run-dir", str(job)], capsys, ["not the run.json of a prepared grid run"],
            tmp_path)  # fmt: skip


HARNESS_CASES = [
    ("surface", {"SURFACE_BUDGETS": ""}, ["SURFACE_BUDGETS", "empty axis"]),
    ("surface", {"SURFACE_DEADLINES": "  "}, ["SURFACE_DEADLINES", "empty axis"]),
    ("prepare", {"BUDGET_RATIOS": "1e308"}, ["BUDGET_RATIOS", "beyond the float range"]),
    ("prepare", {"RUN_NAME": "r" * 300}, ["RUN_NAME", "255 bytes", "300 characters"]),
    ("local", {"RUN_NAME": "r" * 300}, ["RUN_NAME", "255 bytes"]),
    ("prepare", {"RESULTS_ROOT": "{tmp}/file.txt"}, ["RESULTS_ROOT/RUN_NAME", "is not a directory"]),
    ("prepare", {"RESULTS_ROOT": "{tmp}", "RUN_NAME": "in"}, ["RESULTS_ROOT/RUN_NAME", "folder of the input",
                                                             "DAG_POOL_PATH"]),
]


@pytest.mark.parametrize("action,extra,words", HARNESS_CASES)
def test_harness_table(tmp_path, action, extra, words):
    from harness_util import config_env, harness, small_pool

    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "in").mkdir()
    pool = small_pool(tmp_path, n=2)
    if extra.get("RUN_NAME") == "in":  # the pool inside the run folder
        pool = str(Path(pool).rename(tmp_path / "in" / "pool.jsonl"))
    env = config_env(tmp_path, pool, **{k: v.format(tmp=tmp_path) for k, v in extra.items()})
    before = snapshot(tmp_path)
    r = harness(action, env, check=False)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert snapshot(tmp_path) == before


def test_ratio_budget_with_every_cost_zero_is_refused_at_prepare(tmp_path):
    from harness_util import config_env, harness

    pool = tmp_path / "pool.jsonl"
    pool.write_text(_zero_cost_line())
    r = harness("prepare", config_env(tmp_path, str(pool)), check=False)
    assert r.returncode == 2 and "nominal budget of this DAG is 0" in r.stderr and "BUDGET_RATIOS" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_local_no_prepare_after_the_pool_changed_is_one_line(tmp_path):
    from harness_util import config_env, harness, small_pool

    pool = small_pool(tmp_path, n=2)
    env = config_env(tmp_path, pool, N_EXEC_TRIALS=2)
    harness("prepare", env)
    with open(pool, "a", encoding="utf-8") as fh:
        fh.write(open(pool, encoding="utf-8").readline())
    for action in (("local", "--no-prepare", "--no-progress"), ("auto",), ("shard", "0")):
        r = harness(action[0], env, *action[1:], check=False)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "the pool changed" in lines[0], (action, r.stderr)
    assert not os.path.exists(os.path.join(tmp_path, "runs", "t", "state", "s00000.failures"))


# ----------------------------------------------------------------------------- every door (issue 44)
# Each row: (module, main, arguments, words of the one error line). {tmp} holds pool.jsonl (the example pool),
# data.json, lib.csv, file.txt and in/ (a folder of inputs holding r.json); nothing under it may change.

DOOR_CASES = [
    # outputs that destroyed an input or each other
    ("poolbuild.build_loader", "main", ["{tmp}/in", "--out", "{tmp}/p.jsonl", "--index-out", "{tmp}/p.jsonl"],
     ["--index-out", "is also --out"]),
    ("poolbuild.build_loader", "main", ["{tmp}/in", "--out", "{tmp}/p.jsonl", "--summary-out", "{tmp}/p.jsonl"],
     ["--summary-out", "is also --out"]),
    ("poolbuild.build_loader", "main", ["{tmp}/in", "--out", "{tmp}/in/r.json"], ["--out", "inside the input folder"]),
    ("poolbuild.build_loader", "main", ["{tmp}/in", "--out", "{tmp}/in/pool.jsonl"],
     ["--out", "inside the input folder"]),
    ("poolbuild.build_aligned", "main", ["--pool", "m={tmp}/in/r.json", "--out-dir", "{tmp}/in"],
     ["--out-dir", "folder of the input --pool"]),
    ("poolbuild.build_aligned", "main", ["--rollout-root", "{tmp}/in", "--out-dir", "{tmp}/in"],
     ["--out-dir", "is the input --rollout-root"]),
    ("poolbuild.synthetic", "main", ["--topology", "chain", "--template-csv", "{tmp}/lib.csv", "--out",
                                     "{tmp}/lib.csv"], ["--out", "is the input --template-csv"]),
    ("ProofFlow.convert_proofflow_pickle_to_dag_pool", "main", ["{tmp}/data.json", "--out", "{tmp}/data.json"],
     ["--out", "is the input"]),
    ("ProofFlow.convert_proofflow_pickle_to_dag_pool", "main", ["{tmp}/in", "--out", "{tmp}/in/p.jsonl"],
     ["--out", "inside the input folder"]),
    ("executor.hostile", "main", ["--pool", "{tmp}/pool.jsonl", "--record", "{tmp}/pool.jsonl"],
     ["--record", "is the input --pool"]),
    ("executor.hostile", "main", ["--pool", "{tmp}/pool.jsonl", "--write-endpoints", "{tmp}/pool.jsonl"],
     ["--write-endpoints", "is the input --pool"]),
    ("executor.hostile", "main", ["--pool", "{tmp}/pool.jsonl", "--write-endpoints", "{tmp}/e.toml", "--record",
                                  "{tmp}/e.toml"], ["--record", "is also --write-endpoints"]),
    ("simulator.cli.main", "main", ["calibrate", "--pool", "{tmp}/pool.jsonl", "--budget-ratios", "1",
                                    "--deadline-ratios", "1", "--plot", "{tmp}/pool.jsonl"],
     ["--plot", "is the input --pool"]),
    ("run_shard", "main", ["--pool", "{tmp}/pool.jsonl", "--out-dir", "{tmp}/out", "--progress-file",
                           "{tmp}/pool.jsonl", "--budget-group", "b00", "--budget", "ratio:1", "--deadlines",
                           "ratio:1", "--dags", "0", "--trials", "1", "--seed", "0", "--cost-mode", "token_cost_mean",
                           "--latency-dist", "lognormal", "--methods", "sequential"],
     ["--progress-file", "is the input --pool"]),
    ("run_shard", "main", ["--pool", "{tmp}/in/r.json", "--out-dir", "{tmp}/in", "--budget-group", "b00",
                           "--budget", "ratio:1", "--deadlines", "ratio:1", "--dags", "0", "--trials", "1", "--seed",
                           "0", "--cost-mode", "token_cost_mean", "--latency-dist", "lognormal", "--methods",
                           "sequential"], ["--out-dir", "folder of the input --pool"]),
    ("codeflow.generate_rollouts", "main", ["--model", "m", "--dry-run", "--split", "comp", "--dataset",
                                            "{tmp}/data.json", "--out-dir", "{tmp}/o", "--journal",
                                            "{tmp}/data.json"], ["--journal", "is the input --dataset"]),
    ("codeflow.generate_rollouts", "main", ["--model", "m", "--dry-run", "--out-dir", "{tmp}/o", "--journal",
                                            "{repo_dataset}"], ["--journal", "is the input --dataset"]),
    ("codeflow.generate_rollouts", "main", ["--model", "m", "--dry-run", "--out-dir", "{tmp}/file.txt"],
     ["--out-dir", "is a file"]),
    ("executor.cli", "main", ["demo", "--trace-dir", "{tmp}/file.txt"], ["--trace-dir", "is a file"]),
    ("simulator.cli.main", "main", ["predict", "--pool", "{tmp}/in/r.json", "--out", "{tmp}/in", "--budgets", "1",
                                    "--deadlines", "1"], ["--out", "folder of the input --pool"]),
    # numbers at the door
    ("codeflow.generate_rollouts", "main", ["--model", "m", "--dry-run", "--out-dir", "{tmp}/o", "--test-timeout",
                                            "nan"], ["--test-timeout", "finite number > 0", "nan"]),
    ("codeflow.generate_rollouts", "main", ["--model", "m", "--dry-run", "--out-dir", "{tmp}/o", "--memory-mb",
                                            "-5"], ["--memory-mb", ">= 1", "-5"]),
    ("executor.cli", "main", ["run", "--pool", "{tmp}/pool.jsonl", "--endpoints", "{tmp}/e.toml", "--budget", "9",
                              "--deadline", "9", "--trace", "{tmp}/t.jsonl", "--time-scale", "inf"],
     ["--time-scale", "finite number > 0", "inf"]),
    ("executor.cli", "main", ["demo", "--time-scale", "0"], ["--time-scale", "> 0"]),
    ("executor.cli", "main", ["agree", "--pool", "{tmp}/pool.jsonl", "--budget", "9", "--deadline", "9", "--z",
                              "nan"], ["--z", "finite number > 0"]),
    ("executor.cli", "main", ["agree", "--pool", "{tmp}/pool.jsonl", "--budget", "9", "--deadline", "9", "--z",
                              "-1"], ["--z", "> 0", "-1"]),
    ("executor.hostile", "main", ["--pool", "{tmp}/pool.jsonl", "--oversized-mb", "inf"],
     ["--oversized-mb", "finite number > 0"]),
    ("poolbuild.synthetic", "main", ["--topology", "chain", "--seed", "-1", "--out", "{tmp}/s.jsonl"],
     ["--seed", ">= 0", "-1"]),
]


def _door_tree(tmp_path: Path) -> None:
    (tmp_path / "pool.jsonl").write_bytes(POOL.read_bytes())
    (tmp_path / "data.json").write_text("[]")
    (tmp_path / "lib.csv").write_text("a,b\n")
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "r.json").write_text("{}")


@pytest.mark.parametrize("module,fn,args,words", DOOR_CASES, ids=[f"{m}-{i}" for i, (m, *_) in enumerate(DOOR_CASES)])
def test_every_door_table(tmp_path, capsys, module, fn, args, words):
    import importlib

    from codeflow.dataset import DEFAULT_DATASET

    _door_tree(tmp_path)
    main = getattr(importlib.import_module(module), fn)
    argv = [a.format(tmp=tmp_path, repo_dataset=DEFAULT_DATASET) for a in args]
    refused(main, argv, capsys, words, tmp_path)


def test_n_workers_is_capped_at_the_shards_and_a_multiple_of_the_cores(monkeypatch):
    from harness import variables

    monkeypatch.setattr(variables, "_cores", lambda: 2)
    assert variables.capped_workers(None, 8) == (2, None)
    assert variables.capped_workers(3, 8) == (3, None)
    n, line = variables.capped_workers(100000, 2)
    assert n == 2 and "N_WORKERS=100000 capped at 2" in line and "shards (2)" in line
    n, line = variables.capped_workers(100000, 500)
    assert n == 4 * 2 and f"{variables.MAX_WORKERS_PER_CORE} per core" in line
    assert variables.capped_workers(100000) == (8, line)


def test_local_with_a_huge_n_workers_says_so_and_finishes(tmp_path):
    from harness_util import config_env, harness, small_pool

    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_WORKERS=100000, N_EXEC_TRIALS=2,
                     BUDGET_RATIOS="1", DEADLINE_RATIOS="1", DAGS_PER_SHARD=1)  # fmt: skip
    r = harness("local", env, "--no-progress", timeout=300)
    assert "N_WORKERS=100000 capped at 2: the number of shards (2)" in r.stderr, r.stderr


# ----------------------------------------------------------------------------- runs that cannot be crossed


def _hold_lock_in_another_process(run_dir: str):
    import subprocess
    import sys

    code = ("import sys, time\nfrom harness import runlock\nrunlock.hold(sys.argv[1])\nprint('held', flush=True)\n"
            "time.sleep(120)\n")  # fmt: skip
    p = subprocess.Popen([sys.executable, "-c", code, run_dir], cwd=str(ROOT), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_prepare_force_refuses_while_another_process_computes_the_run(tmp_path):
    from harness_util import config_env, harness, small_pool

    env = config_env(tmp_path, small_pool(tmp_path, n=2))
    harness("prepare", env)
    run_dir = str(tmp_path / "runs" / "t")
    holder = _hold_lock_in_another_process(run_dir)
    try:
        before = snapshot(Path(run_dir))
        r = harness("prepare", {**env, "N_EXEC_TRIALS": "3"}, "--force", check=False)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert f"process {holder.pid} is computing this run" in lines[0] and "prepare --force" in lines[0]
        assert snapshot(Path(run_dir)) == before  # nothing archived, nothing rewritten
    finally:
        holder.kill()
        holder.wait()
    r = harness("prepare", {**env, "N_EXEC_TRIALS": "3"}, "--force")  # the holder is gone: the lock went with it
    assert "moved to" in r.stdout


def test_local_holds_the_run_lock_for_its_whole_life(tmp_path):
    import subprocess
    import time

    from harness_util import HARNESS, clean_env, config_env, small_pool

    from harness import runlock

    env = clean_env(**config_env(tmp_path, small_pool(tmp_path, n=3), N_EXEC_TRIALS=40, METHOD_SET="mcpp",
                                 N_WORKERS=1))  # fmt: skip
    p = subprocess.Popen(["bash", HARNESS, "local", "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)  # fmt: skip
    run_dir = str(tmp_path / "runs" / "t")
    try:
        seen = None
        t_end = time.time() + 120
        while time.time() < t_end and p.poll() is None and seen is None:
            seen = runlock.holder_pid(run_dir) if os.path.exists(runlock.lock_path(run_dir)) else None
            time.sleep(0.05)
        assert seen == p.pid or p.poll() == 0, "local did not hold the run's lock"
    finally:
        p.kill()
        p.wait()
    assert runlock.holder_pid(run_dir) is None  # a killed holder leaves no lock behind


def test_merge_removes_cells_that_no_longer_belong_to_the_run(tmp_path):
    from harness_util import config_env, harness, small_pool

    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_EXEC_TRIALS=2, BUDGET_RATIOS="1", DEADLINE_RATIOS="1")
    harness("local", env, "--no-progress")
    cells = tmp_path / "runs" / "t" / "merged" / "cells"
    current = sorted(p.name for p in cells.iterdir())
    stale = cells / "b_old_d_old"
    stale.mkdir()
    (stale / "records.jsonl").write_text('{"method": "old"}\n')
    harness("merge", env)
    assert sorted(p.name for p in cells.iterdir()) == current


@pytest.mark.parametrize("rc,line", [
    (2, "error: --pool: the pool changed since the run was prepared"),
    (3, "error: /results/runs/t/outputs/b00/dag_000000.jsonl: No space left on device"),
])
def test_a_shard_failing_with_exit_2_or_3_is_not_retried_and_its_cause_is_the_last_line(tmp_path, rc, line):
    """Bad input, a changed pool, a full disk: every retry would fail alike. ``local`` stops at the first
    such shard, says its cause as its last line and ends with its code; the attempt is recorded once."""
    from harness_util import config_env, harness, small_pool

    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_EXEC_TRIALS=2, N_WORKERS=1, DAGS_PER_SHARD=1)
    harness("prepare", env)
    jobs = tmp_path / "runs" / "t" / "jobs_list.txt"
    lines = jobs.read_text().splitlines()
    lines[0] = f"echo {line!r} >&2; exit {rc}"
    jobs.write_text("\n".join(lines) + "\n")
    r = harness("local", env, "--no-prepare", "--no-progress", check=False)
    assert r.returncode == rc, r.stderr
    assert r.stderr.strip().splitlines()[-1] == line, r.stderr
    failures = (tmp_path / "runs" / "t" / "state" / "s00000.failures").read_text().splitlines()
    assert len(failures) == 1 and line in failures[0]
    assert not (tmp_path / "runs" / "t" / "state" / "s00000.failed").exists()  # a rerun tries it again

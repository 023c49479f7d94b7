"""Fuzz the data paths of issue 28 (hypothesis): the CodeFlow-Comp tools, ``run_shard.py``, and the parts of a
finished grid and surface.

Each entry point gets random mutations of a valid input (a Comp record, a judged harness record, a
part file) and random flag values. The property is the promise of ``docs/guarantees.md``: **exit 0
with a valid output, or exit 2 with one line and nothing written or changed**; for parts: whatever
is done to a part, the merge never publishes it unverified, and running the shard again gives
byte-identical outputs.

Bounded for CI (derandomized, a few dozen examples each, every test well under 20 s); the knobs of
``tests/test_fuzz_inputs.py`` apply (``FUZZ_EXAMPLES``, ``FUZZ_SEED``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import strategies as st
from test_fuzz_inputs import (
    BAD_VALUES,
    assert_refusal,
    call_main,
    corrupt_dag,
    finite_numbers,
    fuzz,
    strict_json,
)

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "codeflow_comp"
COMP_ITEMS = json.loads((FIX / "codeflow_comp_fixture.json").read_text())
JUDGED_ITEMS = json.loads((FIX / "codeflow_comp_harness_model_small.json").read_text())
POOL = ROOT / "examples" / "example_pool.jsonl"


def snapshot(root: str) -> dict[str, str]:
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def promise(main, argv, tmp: str, context: str) -> tuple[int, str]:
    """Run ``main(argv)``: exit 0, or exit 2 with one line and no file under ``tmp`` written or changed."""
    before = snapshot(tmp)
    rc, out, err = call_main(main, argv, context)
    # progress asked for with --progress-every goes to stderr before the refusal: not part of the refusal
    err = "".join(line for line in err.splitlines(keepends=True) if not re.match(r"read \d+ elements, ", line))
    if rc != 0:
        assert rc == 2, f"{context}: exit {rc}\n{err}"
        assert_refusal(rc, err, context)
        assert snapshot(tmp) == before, f"{context}: refused but wrote or changed files\n{err}"
    else:
        assert "Traceback" not in err, f"{context}\n{err}"
    return rc, out


def mutate_items(data, items: list) -> list:
    """A copy of a list of JSON records with one of them corrupted (or none, a fifth of the time)."""
    items = copy.deepcopy(items)
    k = data.draw(st.integers(-1, len(items) - 1), label="record")
    if k >= 0:
        items[k] = corrupt_dag(data, items[k]) if isinstance(items[k], dict) else items[k]
        if data.draw(st.integers(0, 4), label="retype") == 0:
            items[k] = data.draw(st.sampled_from(BAD_VALUES), label="record_value")
    return items


def write_text(data, path: str, items: list) -> None:
    text = json.dumps(items, allow_nan=True)
    if data.draw(st.integers(0, 5), label="truncate") == 0:
        text = text[: data.draw(st.integers(0, max(0, len(text) - 1)), label="cut")]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def out_choice(data, tmp: str, inputs: list[str], label: str) -> str:
    """Mostly a new file in ``tmp``; sometimes an input, the folder itself, or a path outside through '..'."""
    return data.draw(st.sampled_from([os.path.join(tmp, f"{label}.json")] * 4 + inputs + [
        tmp, os.path.join(tmp, "sub", "..", f"{label}2.json"), os.path.join(tmp, "missing_dir", f"{label}.json")]),
        label=label)


# ----------------------------------------------------------------------------- comp_sample


@fuzz(ci_examples=40)
def test_fuzz_comp_sample(data):
    from codeflow.comp.sample import main

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "comp.json")
        write_text(data, src, mutate_items(data, COMP_ITEMS))
        idx = os.path.join(tmp, "idx.json")
        with open(idx, "w") as fh:
            fh.write(data.draw(st.sampled_from(["[0, 2]", "[1]", "[]", "[5]", "[0, 0]", '{"indices": [2]}', "x"])))
        argv = [src]
        if data.draw(st.booleans(), label="by_n"):
            argv += ["--n", str(data.draw(st.integers(-2, 5), label="n"))]
        else:
            argv += ["--indices", idx]
        argv += ["--seed", str(data.draw(st.integers(-3, 2**40), label="seed"))]
        out = out_choice(data, tmp, [src, idx], "out")
        argv += ["--out", out]
        if data.draw(st.booleans(), label="indices_out"):
            argv += ["--indices-out", out_choice(data, tmp, [src, idx, out], "iout")]
        rc, _ = promise(main, argv, tmp, f"comp_sample {argv}")
        if rc == 0:
            subset = strict_json(Path(out).read_text())
            assert isinstance(subset, list) and subset and all("_source_index" in p for p in subset)


# ----------------------------------------------------------------------------- comp_split


@fuzz(ci_examples=40)
def test_fuzz_comp_split(data):
    from codeflow.comp.split import main

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "comp.json")
        write_text(data, src, mutate_items(data, COMP_ITEMS * 2))
        out_dir = os.path.join(tmp, data.draw(st.sampled_from(["out", "out", "comp.json", "."]), label="out_dir"))
        if data.draw(st.integers(0, 4), label="stale") == 0:
            os.makedirs(os.path.join(tmp, "out"), exist_ok=True)
            Path(tmp, "out", data.draw(st.sampled_from(["shard_00003.json", "manifest.json", "notes.txt"]))).write_text("x")
        argv = [src, "--out-dir", out_dir, "--items-per-shard", str(data.draw(st.integers(-1, 4), label="per"))]
        for flag, values in (("--start", st.integers(-2, 7)), ("--end", st.integers(-1, 8)),
                             ("--progress-every", st.integers(-2, 3)),
                             ("--prefix", st.sampled_from(["shard", "p", "", "..", "../x", "a/b", "."]))):
            if data.draw(st.booleans(), label=f"has{flag}"):
                argv += [flag, str(data.draw(values, label=flag))]
        if data.draw(st.booleans(), label="tag"):
            argv.append("--tag-source-index")
        rc, _ = promise(main, argv, tmp, f"comp_split {argv}")
        if rc == 0:
            manifest = strict_json(Path(out_dir, "manifest.json").read_text())
            for s in manifest["shards"]:
                assert len(strict_json(Path(out_dir, s["file"]).read_text())) == s["items"]
            assert not [p for p in os.listdir(out_dir) if p.startswith(".split-")]


# ----------------------------------------------------------------------------- comp_to_pool


@fuzz(ci_examples=40)
def test_fuzz_comp_to_pool(data):
    from codeflow.comp.to_pool import main
    from simulator.pools.pool import load_pool

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "judged.json")
        items = mutate_items(data, JUDGED_ITEMS)
        if items and isinstance(items[0], dict) and isinstance(items[0].get("subproblems"), list):
            subs = items[0]["subproblems"]
            if subs and isinstance(subs[0], dict) and data.draw(st.booleans(), label="sub_corrupt"):
                subs[0] = corrupt_dag(data, subs[0])
        write_text(data, src, items)
        out = out_choice(data, tmp, [src], "pool")
        argv = [src, "--out", out]
        if data.draw(st.booleans(), label="index_out"):
            argv += ["--index-out", out_choice(data, tmp, [src, out], "index")]
        rc, _ = promise(main, argv, tmp, f"comp_to_pool {argv}")
        if rc == 0:
            for line in Path(out).read_text().splitlines():
                assert finite_numbers(strict_json(line)) == [], line[:300]
            assert len(load_pool(out)) >= 1


# ----------------------------------------------------------------------------- run_shard.py


@fuzz(ci_examples=40)
def test_fuzz_run_shard_flags(data):
    import run_shard
    from harness.shards import part_records

    def pick(label, good, bad):
        return data.draw(st.sampled_from(good + bad) if data.draw(st.integers(0, 3), label=f"{label}?") == 0
                         else st.sampled_from(good), label=label)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        flags = {
            "--pool": pick("pool", [str(POOL)], [tmp, os.path.join(tmp, "none.jsonl")]),
            "--out-dir": pick("out_dir", [out], [str(POOL)]),
            "--budget-group": pick("group", ["b00", "b01"], ["", "..", "../x", "a/b", "."]),
            "--budget": pick("budget", ["ratio:1", "absolute:5000", "ratio:0.5"],
                             ["ratio:-1", "ratio:0", "absolute:inf", "abc", "ratio:", "ratio:1e400", "ratio:nan"]),
            "--deadlines": pick("deadlines", ["ratio:1", "ratio:1,absolute:inf", "absolute:60"],
                                ["", ",", "ratio:0", "ratio:-1", "x:1", "ratio:1,ratio:1"]),
            "--dags": pick("dags", ["0", "0-1", "1,3"], ["", "5-2", "0,0", "-1", "x", "0-", "99999", "1-1000000000"]),
            "--trials": pick("trials", ["1", "2"], ["0", "-2", "x", "1.5"]),
            "--seed": pick("seed", ["0", "7"], ["-1", "x"]),
            "--cost-mode": pick("cost", ["token_cost_mean", "tokens", "cost_mean"], ["", "x"]),
            "--latency-dist": pick("lat", ["lognormal", "gamma"], ["", "x"]),
            "--methods": pick("methods", ["sequential", "sequential,uniform"], ["", ",", "nosuch", "sequential,,"]),
        }
        argv = [x for k, v in flags.items() for x in (k, v)]
        rc, stdout = promise(run_shard.main, argv, tmp, f"run_shard {argv}")
        if rc == 0:
            files = sorted(Path(out).rglob("dag_*.jsonl"))
            assert files and all(part_records(str(f)) for f in files)
            m = re.search(r", (\d+) records", stdout)
            assert m and int(m.group(1)) > 0, stdout


# ----------------------------------------------------------------------------- grid parts


@pytest.fixture(scope="module")
def finished_grid(tmp_path_factory):
    from harness_util import config_env, small_pool

    from harness.merge import merge
    from harness.prepare import prepare
    from harness.shard_runner import run_shard

    tmp = tmp_path_factory.mktemp("grid")
    env = config_env(tmp, small_pool(tmp, n=2), DAGS_PER_SHARD=1, N_EXEC_TRIALS=2, BUDGET_RATIOS="1",
                     DEADLINE_RATIOS="1 3")  # fmt: skip
    rd = prepare(env, quiet=True)
    for spec in rd.shards:
        run_shard(spec, log=lambda s: None)
    merge(rd, out=lambda s: None)
    shutil.copytree(rd.outputs, rd.outputs + ".orig")
    return Finished(rd, _merged(rd), snapshot(rd.outputs))


def restore(src: str, dst: str) -> None:
    """Each example starts from the finished outputs (a failed example must not leave its damage behind)."""
    shutil.rmtree(dst)
    shutil.copytree(src, dst)


class Finished(tuple):
    """A finished run and what it published (a short repr: hypothesis prints its arguments)."""

    def __new__(cls, *items):
        return super().__new__(cls, items)

    def __repr__(self) -> str:
        return f"<finished run {self[0]}>"


def _merged(rd) -> dict[str, bytes]:
    cells = Path(rd.merged, "cells")
    return {c.name: (c / "records.jsonl").read_bytes() for c in sorted(cells.iterdir())}


def mutate_file(data, path: str) -> None:
    """Damage a part file: truncate, delete, flip a byte, append, corrupt its JSON, or swap in another file."""
    raw = Path(path).read_bytes()
    op = data.draw(st.sampled_from(["truncate", "delete", "byte", "append", "json", "empty", "keep"]), label="op")
    if op == "truncate":
        Path(path).write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1), label="cut")])
    elif op == "delete":
        os.unlink(path)
    elif op == "byte":
        pos = data.draw(st.integers(0, len(raw) - 1), label="pos")
        Path(path).write_bytes(raw[:pos] + data.draw(st.sampled_from([b"0", b"9", b"x", b"{", b"\n", b" "])) + raw[pos + 1:])
    elif op == "append":
        Path(path).write_bytes(raw + raw.splitlines(keepends=True)[-1])
    elif op == "json":
        lines = raw.decode().splitlines(keepends=True)
        k = data.draw(st.integers(0, len(lines) - 1), label="line")
        obj = json.loads(lines[k])
        lines[k] = json.dumps(corrupt_dag(data, obj), allow_nan=True, separators=(",", ":")) + "\n"
        Path(path).write_text("".join(lines))
    elif op == "empty":
        Path(path).write_bytes(b"")


@fuzz(ci_examples=25)
def test_fuzz_grid_part_then_rerun_is_byte_identical(finished_grid, data):
    from harness.merge import IncompleteRun, merge
    from harness.shard_runner import run_shard

    rd, merged, outputs = finished_grid
    restore(rd.outputs + ".orig", rd.outputs)
    parts = sorted(Path(rd.outputs).rglob("dag_*.jsonl"))
    victim = data.draw(st.sampled_from(parts), label="part")
    if data.draw(st.integers(0, 4), label="swap") == 0:
        other = data.draw(st.sampled_from([p for p in parts if p != victim]), label="other")
        a, b = victim.read_bytes(), other.read_bytes()
        victim.write_bytes(b)
        other.write_bytes(a)
    else:
        mutate_file(data, str(victim))
    try:
        merge(rd, out=lambda s: None)  # complete only when every part verifies: then it is the same
        assert _merged(rd) == merged
    except IncompleteRun:
        pass
    for spec in rd.shards:
        run_shard(spec, log=lambda s: None)
    merge(rd, out=lambda s: None)
    assert _merged(rd) == merged and snapshot(rd.outputs) == outputs


# ----------------------------------------------------------------------------- surface parts


@pytest.fixture(scope="module")
def finished_surface(tmp_path_factory):
    from harness_util import config_env, run_surface_shards

    from harness.surface.files import merge_surface
    from harness.surface.job import prepare_surface, resolve_surface

    tmp = tmp_path_factory.mktemp("surface")
    env = config_env(tmp, str(POOL), N_DAGS=2, N_EXEC_TRIALS=2, SURFACE_BUDGETS="800:12000:3",
                     SURFACE_DEADLINES="30:300:2", SURFACE_METHODS="sequential,uniform")  # fmt: skip
    for k in ("BUDGET_RATIOS", "DEADLINE_RATIOS", "METHOD_SET"):
        env.pop(k)
    cfg, run_cfg = resolve_surface(env)
    run = str(tmp / "run")
    job = prepare_surface(run, cfg, run_cfg, dags_per_shard=1)
    run_surface_shards(job)
    merge_surface(run, write_page=False, log=lambda m: None)
    shutil.copytree(os.path.join(job, "outputs"), os.path.join(job, "outputs.orig"))
    shutil.copytree(os.path.join(run, "surface"), os.path.join(run, "surface.orig"))
    return Finished(run, job, _surface(run))


def _surface(run: str) -> dict[str, bytes]:
    out = {}
    for p in sorted(Path(run, "surface").rglob("*.json")):
        if p.name != "manifest.json":
            out[str(p.relative_to(run))] = p.read_bytes()
    return out


@fuzz(ci_examples=25)
def test_fuzz_surface_part_then_rerun_is_byte_identical(finished_surface, data):
    from harness_util import run_surface_shards

    from harness.surface.files import DamagedParts, merge_surface

    run, job, published = finished_surface
    restore(os.path.join(job, "outputs.orig"), os.path.join(job, "outputs"))
    restore(os.path.join(run, "surface.orig"), os.path.join(run, "surface"))
    parts = sorted(Path(job, "outputs").glob("dag_*.json"))
    victim = data.draw(st.sampled_from(parts), label="part")
    if data.draw(st.integers(0, 4), label="swap") == 0:
        a, b = parts[0].read_bytes(), parts[1].read_bytes()
        parts[0].write_bytes(b)
        parts[1].write_bytes(a)
    else:
        mutate_file(data, str(victim))
    try:
        merge_surface(run, write_page=False, log=lambda m: None)  # whatever the part holds: strict JSON, counts
    except DamagedParts:
        assert _surface(run) == published  # nothing written
    for p in Path(run, "surface", "matrices").glob("*.json"):
        doc = strict_json(p.read_text())
        assert doc["problem_id"]
        for m in doc["methods"].values():
            assert all(v is None or 0 <= v <= 100 for row in m["success_pct"] for v in row)
            assert all(v is None or 0 <= v <= 2 for row in m["successes"] for v in row)
    run_surface_shards(job)
    merge_surface(run, write_page=False, log=lambda m: None)
    assert _surface(run) == published

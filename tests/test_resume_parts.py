"""Resumable parts (issue 28): every part of a grid or a surface carries its run's fingerprint and counts,
is checked on resume, by ``status`` and by the merge, and a bad part is recomputed with a warning naming it.

The property: corrupting, deleting or swapping any part file of a finished
grid or surface, then running the same command again, reproduces
byte-identical outputs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from harness_util import config_env, harness, merged_bytes, small_pool

ROOT = Path(__file__).resolve().parents[1]


def _truncate(path, keep=0.5):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: int(len(data) * keep) + 7])


def _swap(a, b):
    tmp = f"{a}.swap"
    os.replace(a, tmp)
    os.replace(b, a)
    os.replace(tmp, b)


def _refingerprint_grid_part(path):
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    head = json.loads(lines[0])
    head["fingerprint"] = "0" * 16  # another run's part: same DAG, group and records
    open(path, "w", encoding="utf-8").write(json.dumps(head, separators=(",", ":")) + "\n" + "".join(lines[1:]))


# ----------------------------------------------------------------------------- the grid


@pytest.fixture
def finished_grid(tmp_path):
    env = config_env(tmp_path, small_pool(tmp_path, n=4), DAGS_PER_SHARD=2, N_EXEC_TRIALS=3)
    harness("local", env, "--no-progress")
    rd = os.path.join(tmp_path, "runs", "t")
    return env, rd, merged_bytes(rd)


def test_grid_part_carries_fingerprint_and_counts(finished_grid):
    from harness.rundir import RunDir
    from harness.shards import part_records

    env, rd, _ = finished_grid
    spec = RunDir(rd).shards[0]
    path = spec.dag_output(spec.dags[0])
    head = json.loads(open(path, encoding="utf-8").readline())
    assert head["fingerprint"] == spec.part_fingerprint() and head["dag_idx"] == spec.dags[0]
    assert head["n_records"] == len(part_records(path)) == spec.units_per_dag()
    assert os.path.getsize(path) == len(open(path, "rb").readline()) + head["records_bytes"]


@pytest.mark.slow
def test_grid_parts_damaged_then_rerun_are_byte_identical(finished_grid):
    env, rd, before = finished_grid
    out = os.path.join(rd, "outputs")
    _truncate(os.path.join(out, "b00", "dag_000001.jsonl"))
    os.unlink(os.path.join(out, "b01", "dag_000000.jsonl"))
    _swap(os.path.join(out, "b00", "dag_000002.jsonl"), os.path.join(out, "b00", "dag_000003.jsonl"))
    shutil.copy(os.path.join(out, "b00", "dag_000000.jsonl"), os.path.join(out, "b01", "dag_000003.jsonl"))
    _refingerprint_grid_part(os.path.join(out, "b01", "dag_000001.jsonl"))
    # status counts only verified parts: nothing damaged is shown done
    st = harness("status", env)
    assert "all shards done" not in st.stdout and "part(s) bad" in st.stdout, st.stdout
    assert "(100.0%)" not in st.stdout.splitlines()[-2]
    # the merge refuses to publish them
    m = harness("merge", env, check=False)
    assert m.returncode == 1 and "fingerprint differs" in m.stderr, m.stderr
    harness("local", env, "--no-prepare", "--no-progress")
    assert merged_bytes(rd) == before
    st = harness("status", env)
    assert "all shards done" in st.stdout


def test_grid_done_shard_with_a_bad_part_is_recomputed_with_a_warning(finished_grid):
    env, rd, before = finished_grid
    victim = os.path.join(rd, "outputs", "b01", "dag_000002.jsonl")
    _refingerprint_grid_part(victim)
    r = harness("local", env, "--no-prepare", "--no-progress")
    assert victim in r.stderr and "recomputing" in r.stderr, r.stderr
    assert merged_bytes(rd) == before


def test_grid_record_edited_to_the_same_size_is_recomputed_by_one_rerun(finished_grid):
    env, rd, before = finished_grid
    victim = os.path.join(rd, "outputs", "b00", "dag_000003.jsonl")
    text = open(victim, encoding="utf-8").read()
    i = text.index('"total_cost":') + len('"total_cost":')
    digit = text[i]
    open(victim, "w", encoding="utf-8").write(text[:i] + ("7" if digit != "7" else "8") + text[i + 1:])
    assert os.path.getsize(victim) == len(text.encode())
    r = harness("local", env, "--no-prepare", "--no-progress")
    assert victim in r.stderr and "edited" in r.stderr, r.stderr
    assert merged_bytes(rd) == before


# ----------------------------------------------------------------------------- the surface

SMALL = {"N_DAGS": "3", "N_EXEC_TRIALS": "3", "SURFACE_BUDGETS": "800:12000:3", "SURFACE_DEADLINES": "30:300:2",
         "SURFACE_METHODS": "sequential,uniform"}


def _surface_env(tmp: Path, **extra) -> dict:
    env = config_env(tmp, str(ROOT / "examples" / "example_pool.jsonl"), **SMALL)
    for k in ("BUDGET_RATIOS", "DEADLINE_RATIOS", "METHOD_SET"):
        env.pop(k)
    env.update(extra)
    return env


def _surface_bytes(run: str) -> dict[str, bytes]:
    out = {}
    for p in sorted(Path(run, "surface").rglob("*.json")):
        data = p.read_bytes()
        if p.name == "manifest.json":
            doc = json.loads(data)
            doc.pop("generated_at")
            data = json.dumps(doc).encode()
        out[str(p.relative_to(run))] = data
    return out


@pytest.fixture
def finished_surface(tmp_path):
    env = _surface_env(tmp_path)
    harness("surface", env, "--no-progress")
    run = os.path.join(tmp_path, "runs", "t")
    return env, run, _surface_bytes(run)


def _edit_part(path, fn):
    doc = json.load(open(path, encoding="utf-8"))
    fn(doc)
    open(path, "w", encoding="utf-8").write(json.dumps(doc))


@pytest.mark.slow
def test_surface_parts_damaged_then_rerun_are_byte_identical(finished_surface):
    env, run, before = finished_surface
    out = os.path.join(run, "surface_job", "outputs")
    parts = sorted(os.listdir(out))
    assert len(parts) == 3
    _truncate(os.path.join(out, parts[0]))
    _swap(os.path.join(out, parts[1]), os.path.join(out, parts[2]))
    job_env = {**env, "RUN_DIR": os.path.join(run, "surface_job")}
    st = harness("status", job_env)
    assert "all shards done" not in st.stdout and "part(s) bad" in st.stdout, st.stdout
    r = harness("surface", env, "--no-progress")
    assert "recomputing" in r.stderr and parts[0] in r.stderr, r.stderr
    assert _surface_bytes(run) == before
    os.unlink(os.path.join(out, parts[1]))
    _edit_part(os.path.join(out, parts[2]), lambda d: d.update(fingerprint="0" * 16))
    harness("surface", env, "--no-progress")
    assert _surface_bytes(run) == before


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda d: d["methods"]["sequential"]["successes"][0].__setitem__(0, 99), "99"),
        (lambda d: d["methods"]["uniform"]["successes"][0].__setitem__(0, -1), "-1"),
        (lambda d: d["methods"]["uniform"]["mean_cost"][0].__setitem__(0, float("nan")), "not JSON"),
        (lambda d: d["methods"]["uniform"].__setitem__("successes", [[1]]), "cells"),
        (lambda d: d.update(n_trials=99), "n_trials"),
        (lambda d: d["methods"].pop("uniform"), "methods"),
    ],
)
def test_surface_merge_checks_counts(finished_surface, edit, needle):
    """A hand-edited part (99 successes of 3 trials, a NaN) is never published: the merge names it."""
    env, run, before = finished_surface
    part = os.path.join(run, "surface_job", "outputs", "dag_000000.json")
    _edit_part(part, edit)
    r = harness("surface", env, "--merge", "--no-progress", check=False)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert part in lines[0] and needle in lines[0] and "nothing written" in lines[0], lines[0]
    assert _surface_bytes(run) == before  # the good surface was not overwritten
    st = harness("status", {**env, "RUN_DIR": os.path.join(run, "surface_job")})
    assert "all shards done" not in st.stdout
    harness("surface", env, "--no-progress")  # the shard was made pending: recomputed
    assert _surface_bytes(run) == before


def test_surface_merge_of_a_partial_job_names_problems_not_empty_ids(finished_surface):
    """A part not computed yet (SLURM still running) gives null cells, with the pool's problem id."""
    env, run, before = finished_surface
    os.unlink(os.path.join(run, "surface_job", "outputs", "dag_000001.json"))
    os.unlink(os.path.join(run, "surface_job", "state", "s00001.done"))
    r = harness("surface", env, "--merge", "--no-progress")
    assert "missing cells" in r.stdout
    q1 = json.loads(Path(run, "surface", "matrices", "query_001.json").read_text())
    assert q1["problem_id"] and q1["success_pct"][0][0] is None
    queries = json.loads(Path(run, "surface", "queries.json").read_text())
    assert queries[1]["problem_id"] == q1["problem_id"] and queries[1]["n_nodes"] >= 1


def test_surface_merge_after_the_pool_changed_is_refused(tmp_path):
    pool = tmp_path / "pool.jsonl"
    shutil.copy(ROOT / "examples" / "example_pool.jsonl", pool)
    env = {**_surface_env(tmp_path), "DAG_POOL_PATH": str(pool)}
    harness("surface", env, "--no-progress")
    before = _surface_bytes(os.path.join(tmp_path, "runs", "t"))
    with open(pool, "a", encoding="utf-8") as fh:
        fh.write(open(ROOT / "examples" / "example_pool.jsonl", encoding="utf-8").readline())
    r = harness("surface", env, "--merge", check=False)
    assert r.returncode == 2 and "the pool changed" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert _surface_bytes(os.path.join(tmp_path, "runs", "t")) == before


def test_surface_merge_without_a_job_is_one_line(tmp_path):
    env = _surface_env(tmp_path)
    r = harness("surface", env, "--merge", check=False)
    assert r.returncode == 2 and "no surface job" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["surface_job", ""])
def test_corrupt_run_json_is_one_line_naming_it(tmp_path, where):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_EXEC_TRIALS=2)
    harness("prepare", env)
    rd = os.path.join(tmp_path, "runs", "t")
    if where:
        os.makedirs(os.path.join(rd, where))
        path = os.path.join(rd, where, "run.json")
        action = ("surface", "--merge")
    else:
        path = os.path.join(rd, "run.json")
        action = ("status",)
    open(path, "w").write('{"kind": "surf')
    r = harness(action[0], env, *action[1:], check=False)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "not valid JSON" in lines[0]


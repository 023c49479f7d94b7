"""The run's pool index: a shard reads (and validates) only its own DAG rows, each checked against its digest."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess

import numpy as np
import pytest
from harness_util import ROOT, config_env, diamond, harness, merged_records_no_timing, write_pool

from harness.pool_index import POOL_INDEX, read_pool_index
from harness.prepare import prepare
from simulator.base.errors import PoolError
from simulator.pools.pool import index_pool_lines, load_pool, load_pool_rows


def _same_stats(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert x == y, f.name


def _pool_with_blank_lines(tmp_path) -> str:
    """Rows on lines 1, 3, 4, 7 (blank lines between): row numbers differ from line numbers."""
    path = tmp_path / "pool.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(diamond(0)) + "\n\n")
        fh.write(json.dumps(diamond(1)) + "\n" + json.dumps(diamond(2)) + "\n   \n\n")
        fh.write(json.dumps(diamond(3)))  # no final newline
    return str(path)


def test_indexed_rows_are_the_rows_load_pool_gives(tmp_path):
    path = _pool_with_blank_lines(tmp_path)
    sha, entries = index_pool_lines(path)
    assert sha == load_pool(path).checksum()
    assert [e.line for e in entries] == [1, 3, 4, 7]
    for dags in ([0, 1, 2, 3], [3, 1], [2]):
        want = load_pool(path, indices=dags)
        got = load_pool_rows(path, [entries[d] for d in dags])
        assert len(got) == len(want) and got.model_ids == want.model_ids
        for a, b in zip(got, want):
            _same_stats(a, b)
        assert [got.raw(i) for i in range(len(got))] == [want.raw(i) for i in range(len(want))]


def test_a_changed_row_is_refused_naming_file_and_line(tmp_path):
    path = _pool_with_blank_lines(tmp_path)
    _, entries = index_pool_lines(path)
    text = open(path, encoding="utf-8").read().replace('"diamond2"', '"diamondX"')
    open(path, "w", encoding="utf-8").write(text)
    load_pool_rows(path, [entries[0], entries[1]])  # rows before the edit are unchanged
    with pytest.raises(PoolError, match=r"pool\.jsonl, line 4: DAG 2 is not the row indexed"):
        load_pool_rows(path, [entries[2]])


def _env(tmp_path, pool, **kw):
    return config_env(tmp_path, pool, **{"N_EXEC_TRIALS": "3", "DAGS_PER_SHARD": "2", **kw})


def test_prepare_writes_the_index_and_the_job_lines_name_it(tmp_path):
    pool = write_pool(tmp_path / "pool.jsonl", [diamond(i) for i in range(6)])
    rd = prepare(_env(tmp_path, pool, N_DAGS="5"), quiet=True)
    index = read_pool_index(rd.p(POOL_INDEX))
    sha, entries = index_pool_lines(pool)
    assert index["pool"]["sha256"] == sha == rd.run["pool"]["sha256"]
    assert index["pool"]["rows"] == {str(d): entries[d].to_json() for d in range(5)}  # the run's DAGs only
    assert all(line.split().count("--pool-index") == 1 and f"--pool-index {POOL_INDEX}" in line
               for line in rd.job_lines())  # fmt: skip
    # the index is not a setting: shards' parts keep the fingerprint they had without it
    s = rd.shards[0]
    assert s.part_fingerprint() == dataclasses.replace(s, pool_index=None).part_fingerprint()


def test_a_shard_reads_only_its_rows(tmp_path):
    """A row outside the shard made invalid after prepare does not stop it; its own row changed does (one line)."""
    pool = write_pool(tmp_path / "pool.jsonl", [diamond(i) for i in range(4)])
    env = _env(tmp_path, pool)
    rd = prepare(env, quiet=True)
    lines = open(pool, encoding="utf-8").read().splitlines()
    broken = lines[:3] + ['{"nodes": "not a list", "problem_id": "' + "x" * (len(lines[3]) - 40) + '"}']
    open(pool, "w", encoding="utf-8").write("\n".join(broken) + "\n")
    job = rd.job_lines()[0]  # DAGs 0-1 of the first budget group
    assert "--dags 0-1" in job
    r = subprocess.run(job, shell=True, cwd=rd.path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert os.path.exists(os.path.join(rd.outputs, "b00", "dag_000001.jsonl"))
    job1 = next(j for j in rd.job_lines() if "--dags 2-3" in j)
    r = subprocess.run(job1, shell=True, cwd=rd.path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "line 4: DAG 3 is not the row indexed" in r.stderr and "Traceback" not in r.stderr


def test_records_are_the_same_with_and_without_the_index(tmp_path):
    """The whole run through the index equals the job lines without it (rows read whole-file, as before)."""
    pool = write_pool(tmp_path / "pool.jsonl", [diamond(i, models={"a": (0.7, 2.0, 90.0), "b": (0.5, 1.0, 40.0)})
                                                for i in range(3)])  # fmt: skip
    env = _env(tmp_path, pool, METHOD_SET="sequential,mcpp", MC_PORTFOLIO_M="4", N_EXEC_TRIALS="2")
    harness("local", {**env, "RUN_NAME": "with"}, "--no-progress")
    rd = prepare({**env, "RUN_NAME": "without"}, quiet=True)
    for line in rd.job_lines():
        line = line.replace(f" --pool-index {POOL_INDEX}", "")
        subprocess.run(line, shell=True, cwd=rd.path, check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    harness("merge", {**env, "RUN_NAME": "without"})
    assert merged_records_no_timing(rd.path) == merged_records_no_timing(os.path.join(tmp_path, "runs", "with"))

"""What a pool may hold, and that everything it may hold simulates to finite numbers.

Failures 1, 3, 5 and 16 of the reliability issue: an infinite or huge
``lat_std`` (or any huge value) accepted then breaking the simulation; a
directory passed as the pool; an empty or repeating index file; a template
that states no cost.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from harness_util import clean_env

from simulator.base.errors import PoolError, UserError
from simulator.pools.pool import MAX_POOL_VALUE, load_index_file, load_pool, pool_from_objects
from tests.dags import chain_dag, make_node
from tests.harness_util import ROOT


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "simulator", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _refused(pool_file, obj, *fragments):
    path = pool_file([chain_dag(2), obj])
    with pytest.raises(PoolError) as exc:
        load_pool(path)
    msg = str(exc.value)
    assert path in msg and "line 2" in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


# ---------------------------------------------------------------------------
# 1. infinite / huge values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [math.inf, 1e200, 2 * MAX_POOL_VALUE])
def test_lat_std_infinite_or_huge_is_refused(pool_file, value):
    d = chain_dag(3)
    d["nodes"][1]["template"]["lat_std"] = value
    _refused(pool_file, d, "node 1", "lat_std of model 'default'")


@pytest.mark.parametrize("field", ["lat_mean", "cost_mean", "token_cost_mean"])
def test_huge_finite_template_values_are_refused(pool_file, field):
    d = chain_dag(3)
    d["nodes"][2]["template"][field] = 1e200
    _refused(pool_file, d, "node 2", field, "largest value")


@pytest.mark.parametrize("field", ["latency", "cost", "token_cost", "total_tokens"])
def test_huge_row_values_are_refused(pool_file, field):
    d = chain_dag(2, rows=[(1.0, 1, 5.0), (2.0, 0, 6.0)])
    row = d["nodes"][1]["empirical_samples"][1]
    if field == "total_tokens":
        del row["token_cost"]
    row[field] = 1e200
    _refused(pool_file, d, "node 1", "empirical row 1", "largest value")


def test_infinite_lat_std_of_an_unavailable_model_is_still_accepted():
    """Imputed models (Infinity everywhere, written by the aligner) stay valid."""
    n = make_node(0, [], [])
    del n["template"]
    n["model_templates"] = {
        "a": {"success_prob": 0.5, "lat_mean": 1.0, "lat_std": 0.5, "cost_mean": 10.0},
        "b": {"success_prob": 0.0, "lat_mean": math.inf, "lat_std": math.inf, "cost_mean": math.inf},
    }
    s = pool_from_objects([{"nodes": [n]}])[0]
    assert s.available.tolist() == [[True, False]]


def test_largest_allowed_values_load():
    d = chain_dag(2, lat=MAX_POOL_VALUE, lat_std=MAX_POOL_VALUE, cost=MAX_POOL_VALUE)
    assert pool_from_objects([d])[0].lat_std.max() == MAX_POOL_VALUE


_SAMPLER_GRID = r"""
import itertools, json, math, sys
import numpy as np
from simulator.engine.loop import sample_latency
from simulator.pools.pool import MAX_POOL_VALUE
values = [5e-324, 1e-300, 1e-160, 1e-9, 1e-3, 0.5, 1.0, 3.0, 1e6, 1e154, MAX_POOL_VALUE]
values = [v for v in values if v <= MAX_POOL_VALUE]
bad = []
for dist, mean, std in itertools.product((0, 1, 2), values, values):
    for k in range(40):
        x = sample_latency(dist, mean, std, np.uint64(1000003 * k + 17), 1)
        if not (math.isfinite(x) and x >= 1e-3):
            bad.append((dist, mean, std, x))
            break
print(json.dumps([list(map(repr, b)) for b in bad]))
"""


def test_sampler_gives_finite_draws_for_every_value_a_pool_may_hold():
    """Every (mean, std) pair a pool may hold, every distribution: finite draws >= 1e-3, no hang.

    Run in a child with a time limit: before the fix, gamma with a tiny
    std/mean looped forever (shape overflowing to infinity) and a huge
    std/mean divided by zero.
    """
    r = subprocess.run(
        [sys.executable, "-c", _SAMPLER_GRID], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == []


def test_sampler_unchanged_for_ordinary_values():
    """The robust path only engages past the documented limits: ordinary draws keep their bits."""
    from simulator.base.rng import gamma, normal
    from simulator.engine.loop import sample_latency

    key = np.uint64(123456789)
    mean, std = 7.5, 3.25
    s2 = np.log(1.0 + (std / mean) ** 2)
    expected = (
        max(np.exp(np.log(mean) - 0.5 * s2 + np.sqrt(s2) * normal(key, 1)), 1e-3),
        max(gamma(key, 1, (mean / std) ** 2) * (std * std / mean), 1e-3),
        max(mean + std * normal(key, 1), 1e-3),
    )
    assert tuple(sample_latency(d, mean, std, key, 1) for d in (0, 1, 2)) == expected


@pytest.mark.parametrize("value", ["Infinity", "1e200"])
def test_cli_refuses_infinite_or_huge_lat_std(tmp_path, value):
    d = chain_dag(3)
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(d).replace('"lat_std": 1.0', f'"lat_std": {value}', 1) + "\n")
    for cmd in (("validate", "--pool", str(path)),
                ("simulate", "--pool", str(path), "--budget", "1000", "--deadline", "inf",
                 "--latency-dist", "gamma", "--trials", "5")):
        r = run_cli(*cmd)
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "line 1" in r.stderr and "node 0" in r.stderr and "lat_std" in r.stderr


@pytest.mark.parametrize("dist", ["lognormal", "gamma", "gaussian"])
def test_extreme_allowed_values_simulate_to_finite_numbers(tmp_path, dist):
    """Means and spreads at the edges of what a pool may hold: finite cost and makespan, no hang."""
    nodes = [
        make_node(0, [], [1], p=0.9, lat=1e-300, lat_std=MAX_POOL_VALUE, cost=1.0),
        make_node(1, [0], [2], p=0.9, lat=MAX_POOL_VALUE, lat_std=1e-300, cost=1.0),
        make_node(2, [1], [], p=0.9, lat=MAX_POOL_VALUE, lat_std=MAX_POOL_VALUE, cost=1.0),
    ]
    path = tmp_path / "edge.jsonl"
    path.write_text(json.dumps({"problem_id": "edge", "nodes": nodes}) + "\n")
    r = run_cli("simulate", "--pool", str(path), "--budget", "50", "--deadline", "inf", "--latency-dist", dist,
                "--cost-mode", "latency", "--trials", "20", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert math.isfinite(out["mean_cost"]) and math.isfinite(out["mean_makespan"]), out


# ---------------------------------------------------------------------------
# 3. a directory as the pool
# ---------------------------------------------------------------------------


def test_directory_as_pool_is_one_line(tmp_path):
    with pytest.raises(UserError) as exc:
        load_pool(tmp_path)
    assert "is a directory" in str(exc.value) and str(tmp_path) in str(exc.value)
    for cmd in (("validate", "--pool", str(tmp_path)),
                ("simulate", "--pool", str(tmp_path), "--budget", "10", "--deadline", "10")):
        r = run_cli(*cmd)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "is a directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_directory_as_pool_in_prepare(tmp_path):
    env = clean_env(DAG_POOL_PATH=str(tmp_path), RESULTS_ROOT=str(tmp_path / "runs"), RUN_NAME="d")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "gen_jobs.py")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert "is a directory" in r.stderr


def test_directory_as_index_file(tmp_path):
    with pytest.raises(UserError) as exc:
        load_index_file(tmp_path, pool_size=3)
    assert "is a directory" in str(exc.value)


# ---------------------------------------------------------------------------
# 5. index files: one rule for validate and prepare
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("content,words", [
    ([], "selects no DAG"),
    ({"dag_indices": []}, "selects no DAG"),
    ([0, 2, 0], "lists DAG 0 twice"),
])
def test_index_file_empty_or_repeating_is_refused(tmp_path, pool_file, content, words):
    pool = pool_file([chain_dag(2), chain_dag(3), chain_dag(4)])
    idx = tmp_path / "idx.json"
    idx.write_text(json.dumps(content))
    with pytest.raises(PoolError) as exc:
        load_index_file(idx, pool_size=3)
    assert str(idx) in str(exc.value) and words in str(exc.value)
    r = run_cli("validate", "--pool", pool, "--index-file", str(idx))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "OK" not in r.stdout, (r.stdout, r.stderr)
    assert words in r.stderr
    env = clean_env(DAG_POOL_PATH=pool, USE_DAG_INDICES_FILE=str(idx), RESULTS_ROOT=str(tmp_path / "runs"),
                    RUN_NAME="i")
    r2 = subprocess.run([sys.executable, os.path.join(ROOT, "gen_jobs.py")], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=120)
    assert r2.returncode == 2 and "Traceback" not in r2.stderr, (r2.stdout, r2.stderr)
    assert r2.stderr.strip().splitlines()[-1] == r.stderr.strip(), "validate and prepare disagree"


# ---------------------------------------------------------------------------
# 16. a template must state its cost
# ---------------------------------------------------------------------------


def test_template_without_any_cost_is_refused(pool_file):
    d = chain_dag(3)
    for key in ("cost_mean", "token_cost_mean"):
        del d["nodes"][1]["template"][key]
    _refused(pool_file, d, "node 1", "model 'default'", "neither cost_mean nor token_cost_mean")


def test_template_without_cost_in_model_templates_is_refused(pool_file):
    n0 = make_node(0, [], [])
    del n0["template"]
    n0["model_templates"] = {"a": {"success_prob": 0.5, "lat_mean": 1.0, "lat_std": 0.5}}
    _refused(pool_file, {"problem_id": "m", "nodes": [n0]}, "node 0", "model 'a'", "neither cost_mean")


@pytest.mark.parametrize("keep", ["cost_mean", "token_cost_mean"])
def test_one_cost_field_is_enough(keep):
    d = chain_dag(2)
    for key in ("cost_mean", "token_cost_mean"):
        if key != keep:
            del d["nodes"][1]["template"][key]
    s = pool_from_objects([d])[0]
    assert s.cost_mean[1, 0] == 100.0

"""poolbuild.from_traces: a pool learned from traces (censoring, prior, identity, bad input) and the drift test."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from executor.agree import live_episodes
from executor.learn import drift_lines
from executor.trace import read_trace
from poolbuild.censored import km_jumps, km_mean, km_survival
from poolbuild.drift import drift
from poolbuild.from_traces import Graph, Obs, build_line, learn_into, live_rows
from simulator.base.errors import ConfigError
from simulator.costs.limits import Limits
from simulator.pools.pool import load_pool
from tests.executor_helpers import ENV, POOL, ROOT, cli, workflow


def from_traces(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "poolbuild.from_traces", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """20 ``sequential`` runs against the loopback world (virtual clock) and the workflow file they ran."""
    d = tmp_path_factory.mktemp("traces")
    pool, wf = workflow()
    b, dl = Limits.ratios(1.0, 1.0).resolve(wf.arr)
    asyncio.run(live_episodes(wf, pool, "sequential", b, dl, 20, scale=0.1, seed=0, world_seed=1,
                              trace_dir=str(d / "runs")))
    w = d / "workflow.json"
    assert cli("workflow", "--from-pool", POOL, "--dag", "0", "--out", str(w)).returncode == 0
    return d


# -- the estimator ---------------------------------------------------------------------------


def test_kaplan_meier_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    seen = np.array([True, False, True, True, False])
    ts, s = km_survival(x, seen)
    assert ts.tolist() == [1.0, 3.0, 4.0]
    assert s == pytest.approx([0.8, 0.8 * 2 / 3, 0.8 * 2 / 3 * 1 / 2])
    assert km_jumps(x, seen) == pytest.approx([0.2, 0.0, 0.8 / 3, 0.8 / 3, 0.0])
    assert km_mean(x, seen) == pytest.approx((0.2 * 1 + 0.8 / 3 * 3 + 0.8 / 3 * 4) / (0.2 + 1.6 / 3))


def test_censoring_aware_rows_recover_the_mean_that_dropping_censored_ones_misses():
    rng = np.random.default_rng(3)
    n = 1500
    lat = rng.exponential(10.0, n)
    cut = rng.exponential(12.0, n)  # independent censoring (a deadline set by other draws)
    obs = [Obs(0, "m", float(min(a, c)), bool(a <= c), 100.0 if a <= c else None, bool(a <= c),
               1 if a <= c else None, f"k{i}") for i, (a, c) in enumerate(zip(lat, cut, strict=True))]
    rows, imputed, dropped = live_rows(obs, seed=0)
    naive = np.mean([o.lat for o in obs if o.lat_observed])
    learned = np.mean([r["latency"] for r in rows])
    se = 10.0 / np.sqrt(n)
    assert imputed > 500 and dropped < 10 and len(rows) == n - dropped
    assert abs(naive - 10.0) > 8 * se  # dropping the censored ones: far too short
    assert abs(learned - 10.0) < 3 * se  # the Kaplan-Meier rows: the truth


# -- the command -----------------------------------------------------------------------------


def test_build_counts_and_leaves_unobserved_pairs_out_in_a_line_each(traces, tmp_path):
    out = tmp_path / "L.jsonl"
    r = from_traces(str(traces / "runs"), "--workflow", str(traces / "workflow.json"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    left = [x for x in r.stderr.splitlines() if "left out" in x]
    assert len(left) == 15 and all("not unavailable" in x for x in left)  # 5 nodes x 3 models sequential never uses
    pool = load_pool(out)
    line = pool.raw(0)
    assert line["model_ids"] == ["30B_ins"] and np.isfinite(pool[0].lat_mean).all()  # nothing marked unavailable
    meta = {n["node_id"]: n["model_node_metadata"]["30B_ins"] for n in line["nodes"]}
    events = [read_trace(p)[0] for p in sorted((traces / "runs").glob("*.jsonl"))]
    answered = sum(1 for ev in events for e in ev if e["event"] == "request" and e["status"] == "ok")
    assert sum(m["live_rows"] - m["censored"] for m in meta.values()) == answered
    assert all(m["prior_rows"] == 0 and m["source"] == "live" for m in meta.values())
    assert len(line["learned"]["traces"]) == 20


def test_prior_merge_keeps_unobserved_pairs_and_counts_the_prior(traces, tmp_path):
    out = tmp_path / "L.jsonl"
    r = from_traces(str(traces / "runs"), "--workflow", str(traces / "workflow.json"), "--prior", POOL,
                    "--prior-strength", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    line = load_pool(out).raw(0)
    prior = load_pool(POOL).raw(0)
    for n, p in zip(line["nodes"], prior["nodes"], strict=True):
        assert set(n["model_templates"]) == set(p["model_templates"])
        assert n["model_node_metadata"]["30B_ins"]["prior_rows"] == 4
        assert n["model_node_metadata"]["30B_ins"]["source"] == "live+prior"
        assert n["model_node_metadata"]["4B_ins"]["source"] == "prior"
        assert n["model_templates"]["4B_ins"] == p["model_templates"]["4B_ins"]  # unobserved: the prior as it was


def test_duplicate_and_torn_traces_are_one_line_each(traces, tmp_path):
    runs = sorted((traces / "runs").glob("*.jsonl"))
    torn_dir = tmp_path / "torn"
    torn_dir.mkdir()
    text = runs[0].read_text()
    (torn_dir / "cut.jsonl").write_text(text[: len(text) - 15])  # the end event cut mid-write
    out = tmp_path / "L.jsonl"
    r = from_traces(str(torn_dir), str(runs[1]), str(runs[1]), "--workflow", str(traces / "workflow.json"),
                    "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert sum("torn last line" in x for x in r.stderr.splitlines()) == 1
    assert sum("counted once" in x for x in r.stderr.splitlines()) == 1
    assert len(load_pool(out).raw(0)["learned"]["traces"]) == 2


def test_bad_input_is_refused_before_anything_is_written(traces, tmp_path):
    runs = sorted((traces / "runs").glob("*.jsonl"))
    other = tmp_path / "other.jsonl"
    ev = [json.loads(x) for x in runs[0].read_text().splitlines()]
    ev[0]["workflow_hash"] = "sha256:" + "0" * 64
    other.write_text("\n".join(json.dumps(e) for e in ev) + "\n")
    out = tmp_path / "L.jsonl"
    w = str(traces / "workflow.json")
    cases = [
        ([str(runs[0]), str(other), "--workflow", w, "--out", str(out)], "another workflow"),
        ([str(runs[0]), "--workflow", w, "--out", str(runs[1])], "already exists"),
        ([str(runs[0]), "--workflow", w, "--out", str(runs[0]), "--overwrite"], "input"),
        ([str(runs[0]), "--workflow", w, "--out", w, "--overwrite"], "input"),
        ([str(tmp_path / "nope"), "--workflow", w, "--out", str(out)], "no such trace"),
        ([str(runs[0]), "--workflow", w, "--prior", str(ROOT / "examples" / "example_pool.jsonl"), "--prior-dag", "3",
          "--out", str(out)], "parents"),
        ([str(runs[0]), "--workflow", w, "--prior-strength", "-1", "--out", str(out)], "--prior-strength"),
    ]
    for args, says in cases:
        r = from_traces(*args)
        assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, (args, r.stderr)
        assert not out.exists()
    assert json.loads(runs[1].read_text().splitlines()[0])["event"] == "run"  # the input untouched


def test_a_node_with_no_observation_and_no_prior_is_refused():
    g = Graph("x", "sha256:x", [0, 1], {0: "a", 1: "b"}, {0: [], 1: [0]})
    obs = [Obs(0, "m", 1.0, True, 10.0, True, 1, "t:0:m:0")]
    with pytest.raises(ConfigError, match="node 1 .* no observation"):
        build_line(g, obs, prior_line=None, prior_meta=None, strength=8, seed=0, faults={}, other_model={},
                   traces=[], say=lambda _m: None)


def test_learn_into_adds_a_trace_once(traces, tmp_path):
    runs = sorted((traces / "runs").glob("*.jsonl"))
    out = tmp_path / "L.jsonl"
    assert from_traces(*map(str, runs[:5]), "--workflow", str(traces / "workflow.json"), "--out",
                       str(out)).returncode == 0
    notes: list[str] = []
    line = learn_into(out, [runs[5]], notes.append)
    assert len(line["learned"]["traces"]) == 6 and not notes
    again = learn_into(out, [runs[5], runs[0]], notes.append)
    assert len(again["learned"]["traces"]) == 6 and sum("counted once" in n for n in notes) == 2
    assert again["nodes"] == line["nodes"]


def test_drift_is_reported_for_a_departing_pair_only(traces):
    pool = load_pool(POOL).raw(0)
    events = read_trace(sorted((traces / "runs").glob("*.jsonl"))[0])[0]
    assert drift_lines(events, POOL, 0) == []  # the world serves this very pool
    rows = pool["nodes"][4]["empirical_samples_by_model"]["30B_ins"]
    lat = float(np.mean([r["latency"] for r in rows]))
    slow = [(4, "30B_ins", 1.6 * lat, 1)] * 12 + [(0, "30B_ins", 10.0, 1)] * 3
    lines = drift(pool, slow)
    assert len(lines) == 2 and all("node 4 model 30B_ins" in x for x in lines)  # success 12/12 and latency x1.6


def test_a_gateway_fallback_model_is_not_mixed_in(traces, tmp_path):
    runs = sorted((traces / "runs").glob("*.jsonl"))
    ev = [json.loads(x) for x in runs[0].read_text().splitlines()]
    n_ok = 0
    for e in ev:
        if e["event"] == "request" and e["status"] == "ok":
            e["served_model"] = "some-other-model"
            n_ok += 1
    d = tmp_path / "fb"
    d.mkdir()
    (d / "t.jsonl").write_text("\n".join(json.dumps(e) for e in ev) + "\n")
    shutil.copy(runs[1], d / "u.jsonl")
    out = tmp_path / "L.jsonl"
    assert from_traces(str(d), "--workflow", str(traces / "workflow.json"), "--out", str(out)).returncode == 0
    meta = [n["model_node_metadata"]["30B_ins"] for n in load_pool(out).raw(0)["nodes"]]
    assert sum(m["other_model"] for m in meta) == n_ok


def test_the_drift_tests_match_scipys():
    from scipy import stats

    from poolbuild.drift import binomial_p, mann_whitney_p

    for k, n, p in [(3, 10, 0.5), (12, 12, 0.8), (0, 20, 0.3), (7, 15, 0.31)]:
        assert binomial_p(k, n, p) == pytest.approx(stats.binomtest(k, n, p).pvalue, rel=1e-9)
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 12), rng.normal(0, 1, 16)
    for x, y in ((a, b), (np.round(a), np.round(b))):
        want = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
        assert mann_whitney_p(x, y) == pytest.approx(want, rel=1e-9)

"""The statistical gate of learning pools from traces, small enough for CI (slow; the full one: benchmarks/README.md).

The loopback world serving the example pool is the truth. Exploring it and
rebuilding the pool from the traces must recover its rows' means within
sampling error (z-scores about standard normal), a perturbed world (one pair's
success -0.1, latency x 1.3) must be told apart, and on runs whose siblings
are cancelled the naive estimate (censored requests dropped) must fail where
the Kaplan-Meier one passes. This runs ``python -m benchmarks.learn_gate`` (the
same command as the full gate) at a smaller size: 3 seeds at 20 observations
per pair, 2 perturbed replications, 120 runs for the censoring comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.executor_helpers import ENV, ROOT

pytestmark = pytest.mark.slow


def test_the_gate_at_ci_size(tmp_path):
    out = tmp_path / "gate.json"
    r = subprocess.run([sys.executable, "-m", "benchmarks.learn_gate", "--seeds", "3", "--per-pair", "20",
                        "--perturbed-seeds", "2", "--censoring-runs", "120", "--out", str(out)],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    agg = res["null"]
    # 168 z-scores: the gate's bands, widened for the smaller sample (the mean's SE is 1/sqrt(168) = 0.08)
    assert agg["count"] >= 150 and abs(agg["mean"]) <= 0.3 and 0.75 <= agg["sd"] <= 1.3 and agg["beyond_2"] <= 0.12
    assert res["false_rejections"] == 0
    assert res["power"]["rejected"] == res["power"]["replications"] == 2
    pairs = res["censoring"]["pairs"]
    naive = np.array([p["z"] for p in pairs if p["estimate"] == "naive"])
    km = np.array([p["z"] for p in pairs if p["estimate"] == "kaplan_meier"])
    assert len(naive) >= 3 and len(km) == len(naive)
    assert (np.abs(naive) > 3).sum() >= 3  # dropping cancelled requests: latencies far too short
    assert (np.abs(km) < 3).all(), pairs


def test_replications_summary_counts_by_hand(tmp_path):
    """``--replications``: each seed's z-scores and the pass counts of the end-to-end and quote checks."""
    (tmp_path / "results_learn_gate_e2e.json").write_text(json.dumps({"cells": [{"z": -1.0}, {"z": 2.5}]}))
    (tmp_path / "results_learn_gate_e2e_seed10.json").write_text(json.dumps({"cells": [{"z": 0.5}, {"z": -2.0}]}))
    (tmp_path / "results_learn_gate_quote_seed2.json").write_text(json.dumps({"z": 1.5}))
    r = subprocess.run([sys.executable, "-m", "benchmarks.learn_gate", "--replications", "--out",
                        str(tmp_path / "gate.json")], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["e2e seed 0: z -1.00, +2.50", "e2e seed 10: z +0.50, -2.00",
                                     "e2e: 3 of 4 within 2 SE over 2 explorations", "quote seed 2: z +1.50",
                                     "quote: 1 of 1 within 2 SE over 1 explorations"]  # fmt: skip

"""The statistical gate of learning pools from traces, small enough for CI (slow; the full one: benchmarks/README.md).

The loopback world serving the example pool is the truth. Exploring it and
rebuilding the pool from the traces must recover its rows' means within
sampling error (z-scores about standard normal), a perturbed world (one pair's
success -0.1, latency x 1.3) must be told apart, and on runs whose siblings
are cancelled the naive estimate (censored requests dropped) must fail where
the Kaplan-Meier one passes. This runs ``python -m benchmarks.learn_gate`` (the
same command as the full gate) at a smaller size: 3 seeds at 20 observations
per pair, 2 perturbed replications, 120 runs for the censoring comparison.

The censoring comparison is reproducible: its runs, their keyed trace ids and
so the donors drawn for their censored requests are the same on every rerun
(Kaplan-Meier z from -1.84 to +1.82 on its own standard error; naive -5.33 to
-3.50). Before, random trace ids drew other donors each time and the z was
taken on the complete observations' error alone, which leaves out the donors'
noise (a tenth to a sixth of the variance here): one CI run met +3.24.
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


def test_the_censoring_comparison_alone_is_one_command(tmp_path):
    """``--censoring-only METHOD`` runs the naive vs Kaplan-Meier comparison alone (the README's limit case is
    ``sequential_4``) and writes it beside ``--out``: each pair scored twice, each estimate on its own SE."""
    r = subprocess.run([sys.executable, "-m", "benchmarks.learn_gate", "--censoring-only", "sequential_2",
                        "--censoring-runs", "30", "--out", str(tmp_path / "gate.json")],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "results_learn_gate_censoring_sequential_2.json").read_text())
    assert res["method"] == "sequential_2" and res["runs"] == 30 and res["pairs"]
    assert {p["estimate"] for p in res["pairs"]} == {"naive", "kaplan_meier"}
    assert all(p["se"] > 0 for p in res["pairs"]) and len(r.stdout.splitlines()) == len(res["pairs"])
    assert not (tmp_path / "gate.json").exists()


def test_replications_summary_counts_by_hand(tmp_path):
    """``--replications``: each seed's z-scores and the pass counts of the end-to-end and quote checks."""
    (tmp_path / "results_learn_gate_e2e.json").write_text(json.dumps({"cells": [{"z": -1.0}, {"z": 2.5}]}))
    (tmp_path / "results_learn_gate_e2e_seed10.json").write_text(json.dumps({"cells": [{"z": 0.5}, {"z": -2.0}]}))
    (tmp_path / "results_learn_gate_quote_seed2.json").write_text(json.dumps({"z": 1.5}))
    r = subprocess.run([sys.executable, "-m", "benchmarks.learn_gate", "--replications", "--out",
                        str(tmp_path / "gate.json")], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["e2e seed 0: z -1.00, +2.50", "e2e seed 10: z +0.50, -2.00",
                                     "e2e: 3 of 4 within 2 SE over 2 explorations",
                                     "e2e: z mean +0.00, sd 1.96, above 0 in 2 of 4", "quote seed 2: z +1.50",
                                     "quote: 1 of 1 within 2 SE over 1 explorations"]  # fmt: skip


def test_quote_z_by_hand():
    """The quote check's z on the logit scale: the bootstrap's logit variance plus both binomial ones."""
    from poolbuild.bootstrap import logit, logit_var, quote_z

    assert logit(0.5, 400) == 0.0 and logit(1.0, 400) == pytest.approx(np.log(400.5 / 0.5))  # finite at 1
    assert logit_var(0.8, 400) == pytest.approx(1 / 320.5 + 1 / 80.5)
    # bootstrap rates whose logits are -0.5, 0 and +0.5 (variance 0.25 with ddof 1)
    rates = [float(1 / (1 + np.exp(0.5))), 0.5, float(1 / (1 + np.exp(-0.5)))]
    rates = [(401 * r - 0.5) / 400 for r in rates]  # undo the half-count correction: logits exactly -0.5, 0, 0.5
    got = quote_z(0.8, 400, 0.7, 400, rates, 400)
    assert got["sd_bootstrap_logit"] == pytest.approx(0.5)
    se = np.sqrt(0.25 + logit_var(0.7, 400) + logit_var(0.8, 400))
    assert got["se_logit"] == pytest.approx(se)
    assert got["z"] == pytest.approx((logit(0.7, 400) - logit(0.8, 400)) / se)
    assert quote_z(0.8, 400, 0.8, 400, rates, 400)["z"] == 0.0


def test_bootstrap_over_runs_keeps_a_run_together_and_has_the_binomial_spread():
    """``resample_runs`` draws whole runs: on 50 runs of one observation each with 20 successes, the resampled success
    rate has the known bootstrap sd sqrt(p (1 - p) / n) = 0.0693 (2,000 resamples: the estimate's own relative
    error is about 1.6%, so the 10% band fails by chance far less than once in 1,000); a run of several
    observations stays whole, its copies renamed apart."""
    from poolbuild.bootstrap import resample_runs
    from poolbuild.from_traces import Obs

    obs = [Obs(0, "m", 1.0, True, 10.0, True, int(i < 20), f"t{i}:0") for i in range(50)]
    boots = resample_runs(obs, 2000, seed=3)
    rates = np.array([np.mean([o.success for o in b]) for b in boots])
    assert all(len(b) == 50 for b in boots)
    assert abs(rates.mean() - 0.4) < 0.01
    assert abs(rates.std(ddof=1) - np.sqrt(0.4 * 0.6 / 50)) < 0.1 * np.sqrt(0.4 * 0.6 / 50)
    runs = [Obs(v, "m", 1.0, True, 10.0, True, 1, f"run{r}:{v}") for r in range(3) for v in range(4)]
    for b in resample_runs(runs, 20, seed=1):
        by_run: dict[str, list[int]] = {}
        for o in b:
            by_run.setdefault(o.key.split("#", 1)[1], []).append(o.node)
        assert all(sorted(v) == [0, 1, 2, 3] for v in by_run.values()) and len(by_run) == 3
        assert len({o.key for o in b}) == len(b)


def test_bootstrap_draws_do_not_depend_on_the_random_trace_ids():
    """A trace id is random (a new one per run), so the resamples must follow the runs' order, not their ids:
    the same runs under other ids give the same draws (sorted ids gave every rerun other resamples)."""
    from poolbuild.bootstrap import resample_runs
    from poolbuild.from_traces import Obs

    def runs(ids: list[str]) -> list[Obs]:
        return [Obs(r, "m", float(r), True, 10.0, True, 1, f"{tid}:{r}") for r, tid in enumerate(ids)]

    a = resample_runs(runs([f"id{r:02d}" for r in range(12)]), 5, seed=4)
    b = resample_runs(runs([f"id{11 - r:02d}" for r in range(12)]), 5, seed=4)  # the ids' sort order reversed
    assert [[o.node for o in x] for x in a] == [[o.node for o in x] for x in b]

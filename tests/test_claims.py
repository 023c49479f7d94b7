"""The claims report (harness.claims): verdicts on synthetic merged runs with known answers, clustering,
refusal of runs that cannot be paired, atomic outputs, LaTeX and vector figures of analyze and claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness import claims as C
from harness.claims_report import claims_from_dirs
from harness.latex import booktabs, escape
from simulator.base.errors import UserError
from simulator.base.scoring import clustered_difference
from simulator.methods import MCPP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = [
    {"cell": "B_r1__D_r1", "budget_group": "b00", "budget_input_type": "ratio", "budget_axis_value": 1.0,
     "deadline_input_type": "ratio", "deadline_axis_value": 1.0},
    {"cell": "B_r2__D_r1", "budget_group": "b01", "budget_input_type": "ratio", "budget_axis_value": 2.0,
     "deadline_input_type": "ratio", "deadline_axis_value": 1.0},
]  # fmt: skip
SETTINGS = {"pool_sha256": "abc", "dags": list(range(10)), "n_exec_trials": 20, "grid": {"g": 1}, "cost_mode": "t",
            "latency_dist": "lognormal", "prices": None, "default_price_model": None, "seed": 42,
            "mcpp": {"M": 64}, "planning": {}}  # fmt: skip


def make_run(root, name, rates, settings=None, mcpp_rate=None, n_dags=10, n_trials=20, seed=0, dag_effect=0.0,
             mcpp_models=("A",), base_ks=(1, 4), eps=0.1, mode=None, record_mode=None):  # fmt: skip
    """A merged run whose methods succeed with the given rates (per method label), DAGs 0..n_dags-1.

    Success of method m on (DAG g, trial t): u[g, t] < rate_m + dag_effect * z[g], one uniform u per
    (DAG, trial) shared by all methods (common random numbers, as in the harness), so a better rate
    means success on a superset of the pairs.
    """
    rng = np.random.default_rng(seed)
    u = rng.random((n_dags, n_trials))
    z = rng.standard_normal(n_dags)
    rates = dict(rates)
    if mcpp_rate is not None:
        rates[MCPP] = mcpp_rate
    path = os.path.join(root, name)
    os.makedirs(os.path.join(path, "merged", "cells"), exist_ok=True)
    s = {**SETTINGS, **(settings or {})}
    if mode:
        s["execution_rules"] = mode
    with open(os.path.join(path, "run.json"), "w") as fh:
        json.dump({"run_name": name, "settings": s}, fh)
    labels = list(rates)
    with open(os.path.join(path, "merged", "merge_report.json"), "w") as fh:
        json.dump({"complete": True, "method_labels": labels, "cells": CELLS}, fh)
    for c in CELLS:
        d = os.path.join(path, "merged", "cells", c["cell"])
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "records.jsonl"), "w") as fh:
            for m, rate in rates.items():
                for g in range(n_dags):
                    for t in range(n_trials):
                        ok = bool(u[g, t] < rate + dag_effect * z[g])
                        r = {"dag_idx": g, "exec_trial": t, "method": m, "on_time_success": ok}
                        if record_mode or mode:
                            r["execution_rules"] = record_mode or mode
                        if m == MCPP:
                            r.update(mc_portfolio_epsilon_max=eps, mc_portfolio_best_score_first=rate,
                                     mc_portfolio_params={"model_ids": list(mcpp_models), "base_ks": list(base_ks)})
                        fh.write(json.dumps(r) + "\n")
    return path


def rows(res, claim, comparison):
    c = res.cells
    return c[(c["claim"] == claim) & (c["comparison"] == comparison)]


def test_verdicts_better_equal_worse(tmp_path):
    for mcpp, want in ((0.9, "holds"), (0.5, "inconclusive"), (0.1, "fails")):
        p = make_run(tmp_path, f"r{mcpp}", {"sequential": 0.5, "uniform": 0.5}, mcpp_rate=mcpp)
        res = C.evaluate([C.load_run(p)])
        got = rows(res, 1, "MCPP - uniform")
        assert list(got["verdict"]) == [want, want], (mcpp, got)
        if want == "holds":
            assert (got["ci_low"] > 0).all() and np.allclose(got["diff"], 0.4, atol=0.1)


def test_best_baseline_is_the_best_and_interval_is_simultaneous(tmp_path):
    p = make_run(tmp_path, "r", {"sequential": 0.3, "uniform": 0.6, "random": 0.1}, mcpp_rate=0.65, dag_effect=0.1)
    res = C.evaluate([C.load_run(p)])
    best = rows(res, 1, "MCPP - best baseline").iloc[0]
    single = rows(res, 1, "MCPP - uniform").iloc[0]
    assert best["against"] == "uniform" and best["family"] == 3
    assert best["diff"] == pytest.approx(single["diff"])
    assert best["ci_low"] < single["ci_low"]  # Bonferroni: wider than the single comparison


def test_identical_baselines_count_once_in_the_family(tmp_path):
    p = make_run(tmp_path, "r", {"sequential": 0.3, "sequential@A": 0.3, "uniform": 0.6}, mcpp_rate=0.7)
    res = C.evaluate([C.load_run(p)])
    assert rows(res, 1, "MCPP - best baseline").iloc[0]["family"] == 2


def test_clustered_interval_reflects_the_dag_count():
    """All trials of a DAG identical: the interval depends on the number of DAGs, not of trials."""
    dag_values = np.array([1, 0, 1, 1, 0, 1, 1, 1], dtype=float)
    out = []
    for trials in (5, 500):
        d = np.repeat(dag_values, trials)
        groups = np.repeat(np.arange(len(dag_values)), trials)
        out.append(clustered_difference(d, groups))
    assert out[0]["n_dags"] == out[1]["n_dags"] == 8
    assert out[0]["ci_low"] == pytest.approx(out[1]["ci_low"]) and out[0]["ci_high"] == pytest.approx(out[1]["ci_high"])
    from scipy.stats import t

    half = t.ppf(0.975, 7) * dag_values.std(ddof=1) / np.sqrt(8)
    assert out[0]["ci_high"] - out[0]["diff"] == pytest.approx(min(half, 1 - out[0]["diff"]))
    assert clustered_difference([1.0, 0.0], [0, 0])["ci_low"] == -1.0  # one DAG: nothing known


def test_claim2_noisy_runs_pair_with_exact(tmp_path):
    base = {"sequential": 0.4, "uniform": 0.4}
    exact = make_run(tmp_path, "exact", base, mcpp_rate=0.8)
    same = make_run(tmp_path, "n1", {}, mcpp_rate=0.8, settings={"planning": {"noise_logit_sigma": 0.5,
                                                                              "noise_seed": 0}})  # fmt: skip
    worse = make_run(tmp_path, "n2", {}, mcpp_rate=0.3, settings={"planning": {"noise_logit_sigma": 1.0,
                                                                               "noise_seed": 0}})  # fmt: skip
    res = C.evaluate([C.load_run(p) for p in (exact, same, worse)])
    r = rows(res, 2, "noisy MCPP - exact MCPP")
    v = dict(zip(r["noise"], r["verdict"]))
    assert v["logit 0.5 (seed 0)"] == "holds" and v["logit 1 (seed 0)"] == "fails"
    nb = rows(res, 2, "noisy MCPP - uniform")  # baselines of the mode come from the exact run
    assert set(nb[nb["noise"] == "logit 0.5 (seed 0)"]["verdict"]) == {"holds"}


def test_claim3_members_from_model_ids_and_base_ks(tmp_path):
    p = make_run(tmp_path, "r", {"sequential": 0.2, "sequential_4": 0.3, "sequential@A": 0.5, "sequential_4@A": 0.7,
                                 "sequential@B": 0.99}, mcpp_rate=0.72, eps=0.05)  # fmt: skip
    res = C.evaluate([C.load_run(p)])
    r = rows(res, 3, "MCPP - best portfolio member").iloc[0]
    assert r["against"] == "sequential_4@A" and r["members_present"] == 2  # B is not in the portfolio
    assert r["margin"] == pytest.approx(0.05) and r["verdict"] == "holds"
    assert C.member_label("A", 1) == "sequential@A" and C.member_label(None, 16) == "sequential_16"


def test_refuses_runs_of_different_grids_and_duplicate_modes(tmp_path, capsys):
    a = make_run(tmp_path, "a", {"uniform": 0.5}, mcpp_rate=0.6)
    b = make_run(tmp_path, "b", {"uniform": 0.5}, mcpp_rate=0.6, settings={"grid": {"g": 2}})
    with pytest.raises(UserError, match="differ in grid"):
        C.evaluate([C.load_run(a), C.load_run(b)])
    c = make_run(tmp_path, "c", {"uniform": 0.5}, mcpp_rate=0.6)
    with pytest.raises(UserError, match="one run per"):
        C.evaluate([C.load_run(a), C.load_run(c)])
    d = make_run(tmp_path, "d", {"uniform": 0.5}, mcpp_rate=0.6, mode="atomic")
    res = C.evaluate([C.load_run(a), C.load_run(d)])
    assert set(res.cells["mode"]) == {"published", "atomic"}
    e = make_run(tmp_path, "e", {"uniform": 0.5}, mcpp_rate=0.6, mode="per_attempt", record_mode="atomic")
    with pytest.raises(UserError, match="execution_rules 'atomic'"):
        C.load_run(e)
    f = make_run(tmp_path, "f", {"uniform": 0.5}, mcpp_rate=0.6, record_mode="per_attempt")  # run.json without it
    assert C.load_run(f).mode == "per_attempt"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "claims", a, b], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT)  # fmt: skip
    assert proc.returncode != 0 and "differ in grid" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_outputs_written_and_atomic(tmp_path, monkeypatch):
    p = make_run(tmp_path, "r", {"sequential": 0.4, "uniform": 0.5}, mcpp_rate=0.8)
    out = str(tmp_path / "out")
    res, md = claims_from_dirs([p], out, formats=("png", "pdf", "svg"))
    text = open(md, encoding="utf-8").read()
    assert "**Claim 1**" in text and "holds" in text
    for f in ("claims_cells.csv", "claims_summary.csv", "claims_table.tex", "claims_cells.tex"):
        assert os.path.getsize(os.path.join(out, f)) > 0
    for ext in ("png", "pdf", "svg"):
        assert os.path.exists(os.path.join(out, "plots", f"regime_map.{ext}"))
    with open(os.path.join(out, "plots", "regime_map.pdf"), "rb") as fh:
        assert fh.read(5) == b"%PDF-"
    assert open(os.path.join(out, "plots", "regime_map.svg")).read().lstrip().startswith("<?xml")
    for f in ("claims_table.tex", "claims_cells.tex"):
        tex = open(os.path.join(out, f)).read()
        assert tex.startswith("\\begin{tabular}") and tex.rstrip().endswith("\\end{tabular}")
        assert tex.index("\\toprule") < tex.index("\\midrule") < tex.index("\\bottomrule")
    assert not [f for f in os.listdir(out) if "tmp" in f]
    # a failure on the way leaves the previous report as it was
    from harness import claims_report

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(claims_report, "cells_tex", boom)
    with pytest.raises(RuntimeError):
        claims_from_dirs([p], out, formats=("png", "pdf", "svg"))
    assert open(md, encoding="utf-8").read() == text


def test_latex_booktabs_escapes():
    tex = booktabs(["method", "50%"], [["seq_k", 1.25]])
    assert tex.startswith("\\begin{tabular}{lr}") and "seq\\_k & 1.2" in tex and "50\\%" in tex
    assert escape("a&b_c") == "a\\&b\\_c"


def test_end_to_end_analyze_and_claims_outputs(tmp_path):
    """A tiny real run: analyze writes main_table.tex and (PLOT_FORMATS) PDF/SVG beside every PNG; `claims` reads its records."""
    from tests.harness_util import config_env, harness, small_pool

    pool = small_pool(tmp_path, n=3, models={"A": (0.7, 2.0, 100.0), "B": (0.9, 3.0, 200.0)})
    env = config_env(tmp_path, pool, METHOD_SET="sequential,sequential_4,uniform,mcpp", BASELINE_SUITE="all",
                     MC_PORTFOLIO_M="8", MC_PORTFOLIO_BASE_KS="1,4", N_EXEC_TRIALS="3", BUDGET_RATIOS="2", DEADLINE_RATIOS="2", N_WORKERS="1",
                     PLOT_FORMATS="png,pdf,svg")
    harness("local", env, "--no-progress")
    run = tmp_path / "runs" / "t"
    an = run / "analysis"
    tex = (an / "main_table.tex").read_text()
    assert tex.startswith("\\begin{tabular}") and "\\toprule" in tex and "\\bottomrule" in tex
    assert "MCPP" in tex and "mc\\_portfolio\\_rollout" not in tex  # the name a reader knows
    pngs = [os.path.join(d, f) for d, _, fs in os.walk(an / "plots") for f in fs if f.endswith(".png")]
    assert pngs
    for png in pngs:
        stem = png[:-4]
        with open(stem + ".pdf", "rb") as fh:
            assert fh.read(5) == b"%PDF-"
        assert "<svg" in open(stem + ".svg").read(2000)
    proc = harness("claims", {"RESULTS_ROOT": str(tmp_path / "runs")}, "t")
    assert "**Claim 1**" in proc.stdout and "**Claim 3**" in proc.stdout
    cells = (an / "claims_cells.csv").read_text()
    assert "sequential_4@A" in cells or "sequential@A" in cells or "sequential@B" in cells


def test_paper_plan_sets_rules_and_noise(tmp_path):
    from harness.paper import plan_runs

    cfg = tmp_path / "g.env"
    cfg.write_text("BUDGET_RATIOS=0.5 1\nPAPER_MODES=published atomic\nPAPER_NOISE_LEVELS=0 0.5\n")
    runs, _ = plan_runs({"PAPER_CONFIG": str(cfg), "N_DAGS": "2"})
    names = [n for n, _ in runs]
    assert names == ["paper_published_exact", "paper_published_noise0.5", "paper_atomic_exact",
                     "paper_atomic_noise0.5"]  # fmt: skip
    e = dict(runs[3][1])
    assert e["EXECUTION_RULES"] == "atomic" and e["PLANNING_NOISE_LOGIT_SIGMA"] == "0.5"
    assert e["METHOD_SET"] == "mcpp" and e["N_DAGS"] == "2" and e["BUDGET_RATIOS"] == "0.5 1"
    assert all(e["PLOT_FORMATS"] == "png,pdf,svg" for _, e in runs)  # paper-ready figures unless told otherwise
    runs, _ = plan_runs({"PAPER_CONFIG": str(cfg), "PLOT_FORMATS": "png"})
    assert all(e["PLOT_FORMATS"] == "png" for _, e in runs)
    cfg.write_text("BUDGET_RATIO=1\n")
    from simulator.base.errors import ConfigError

    with pytest.raises(ConfigError, match="did you mean BUDGET_RATIOS"):
        plan_runs({"PAPER_CONFIG": str(cfg)})

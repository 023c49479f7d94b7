"""The further baselines through the harness and the CLI: a whole run, and bad settings refused before work.

docs/further_baselines.md ("Running them"): ``METHOD_SET=...,further`` puts
the eight methods in the grid as baselines; their LOADER_* / DEADLINE_*
variables are checked once, where a run starts (``prepare``, or ``python -m
simulator simulate``), with one readable line and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness_util import ROOT, clean_env, config_env, harness, merged_records_no_timing

from simulator.baselines.further.variants import FURTHER_METHODS

EXAMPLE_POOL = os.path.join(ROOT, "examples", "example_pool.jsonl")
MCPP = "mc_portfolio_rollout[M=8]"
METHODS = ["sequential", MCPP, *FURTHER_METHODS]


@pytest.mark.slow
def test_local_run_with_every_further_method_tables_plots_and_workers(tmp_path):
    import pandas as pd

    base = dict(N_DAGS=2, N_EXEC_TRIALS=3, METHOD_SET=f"sequential,{MCPP},further", BUDGET_RATIOS="1",
                DEADLINE_RATIOS="1", DAGS_PER_SHARD=1)  # fmt: skip
    runs = {}
    for workers in (1, 2):
        env = config_env(tmp_path, EXAMPLE_POOL, RUN_NAME=f"w{workers}", N_WORKERS=workers, **base)
        proc = harness("local", env, "--no-progress")
        runs[workers] = rd = os.path.join(tmp_path, "runs", f"w{workers}")
        assert all(m in proc.stdout for m in FURTHER_METHODS), proc.stdout[-2000:]
    rd = runs[1]
    run = json.load(open(os.path.join(rd, "merged", "run.json")))
    assert set(run["settings"]["further"]) >= {"loader", "colgen", "deadline"}
    report = json.load(open(os.path.join(rd, "merged", "merge_report.json")))
    assert report["complete"] and report["method_labels"] == METHODS
    assert report["n_records"] == 2 * len(METHODS) * 3
    an = os.path.join(rd, "analysis")
    main = pd.read_csv(os.path.join(an, "main_table.csv"))
    assert list(main["method"]) == METHODS and main.drop(columns="method").notna().all().all()
    summary = pd.read_csv(os.path.join(an, "summary.csv"))
    assert set(summary["method"]) == set(METHODS) and (summary["n"] == 6).all()
    for m in METHODS:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in m)
        assert os.path.getsize(os.path.join(an, "plots", "heatmaps", f"{safe}.png")) > 0, m
    assert os.path.exists(os.path.join(an, "plots", "success_vs_budget.png"))
    # the further methods are baselines: only MCPP is compared with the best baseline
    compared = [f for f in os.listdir(os.path.join(an, "plots")) if f.endswith("_minus_best_baseline.png")]
    assert compared == ["mc_portfolio_rollout_M_8__minus_best_baseline.png"]
    paired = pd.read_csv(os.path.join(an, "paired.csv"))
    assert set(paired["baseline"]) == {"sequential", *FURTHER_METHODS}
    # the records do not depend on the number of workers
    assert merged_records_no_timing(runs[1]) == merged_records_no_timing(runs[2])


BAD = [
    ({"LOADER_COLGEN_PARAMS_PATH": "{eta_beta_file}"}, "loader_dual_colgen",
     "eta_beta (LOADER_COLGEN_PARAMS_PATH '{eta_beta_file}'): expected a finite number > 0, got -1"),
    ({"LOADER_COLGEN_PARAMS_PATH": "{iters_file}"}, "loader_dual_colgen",
     "max_dual_iters (LOADER_COLGEN_PARAMS_PATH '{iters_file}'): expected an integer >= 1, got 0"),
    ({"METHOD_SET": "loader_duall"}, "loader_duall", "unknown method(s) 'loader_duall' (did you mean 'loader_dual'?)"),
    ({"DEADLINE_BUDGET_RESERVATION_C": "-1"}, "deadline_static",
     "DEADLINE_BUDGET_RESERVATION_C (environment): expected a finite number >= 0, got '-1'"),
    ({"DEADLINE_THETA_GRID_SPACING": "nope"}, "deadline_receding",
     "DEADLINE_THETA_GRID_SPACING (environment): unknown value 'nope'"),
]  # fmt: skip


@pytest.fixture
def bad_files(tmp_path):
    files = {"eta_beta_file": tmp_path / "eta.json", "iters_file": tmp_path / "iters.json"}
    files["eta_beta_file"].write_text(json.dumps({"eta_beta": -1, "inner_dual_iters": 4}))
    files["iters_file"].write_text(json.dumps({"max_dual_iters": 0}))
    return {k: str(v) for k, v in files.items()}


@pytest.mark.parametrize("variables,method,message", BAD, ids=["eta_beta", "zero_iters", "variant", "reservation_c", "spacing"])
def test_bad_settings_refused_by_prepare_and_the_cli(tmp_path, bad_files, variables, method, message):
    variables = {k: v.format(**bad_files) for k, v in variables.items()}
    message = message.format(**bad_files)
    # harness: prepare stops before writing anything
    env = config_env(tmp_path, EXAMPLE_POOL, N_DAGS=2, METHOD_SET="sequential,further")
    env.update(variables)
    proc = harness("prepare", env, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert not os.path.exists(os.path.join(tmp_path, "runs")), os.listdir(tmp_path / "runs")
    # CLI: the same variables from the environment, the same line, nothing printed on stdout
    cli_env = clean_env(**{k: v for k, v in variables.items() if k != "METHOD_SET"})
    work = tmp_path / "cwd"
    work.mkdir()
    p = subprocess.run([sys.executable, "-m", "simulator", "simulate", "--pool", EXAMPLE_POOL, "--budget-ratio", "1",
                        "--deadline-ratio", "1", "--method", method, "--trials", "2"],
                       cwd=work, env=cli_env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode != 0 and "Traceback" not in p.stderr and p.stdout == ""
    cli_lines = p.stderr.strip().splitlines()
    assert len(cli_lines) == 1 and cli_lines[0].startswith("error: ") and message in cli_lines[0], p.stderr
    assert os.listdir(work) == []

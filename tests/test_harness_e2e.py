"""End-to-end harness tests (slow): real shard processes, kills, concurrent workers, failures.

Each test drives ``bash run_experiment.sh`` from ``/`` (the harness must not
depend on the current directory) on small pools in a temporary directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from harness_util import HARNESS, ROOT, clean_env, config_env, harness, merged_bytes, small_pool

pytestmark = pytest.mark.slow

EXAMPLE_POOL = os.path.join(ROOT, "examples", "example_pool.jsonl")


def _run_dir(tmp_path, name="t"):
    return os.path.join(tmp_path, "runs", name)


def test_local_end_to_end_all_methods_suite_and_report(tmp_path):
    env = config_env(
        tmp_path, EXAMPLE_POOL, N_DAGS=2, N_EXEC_TRIALS=3, METHOD_SET="all", BASELINE_SUITE="4B_ins",
        BUDGET_RATIOS="1", DEADLINE_RATIOS="1 2", MC_PORTFOLIO_M=4, MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=8,
        MC_PORTFOLIO_BASE_KS="1,4",
    )  # fmt: skip
    proc = harness("local", env, "--no-progress")
    rd = _run_dir(tmp_path)
    # the resolved settings, the grid and the final main table are printed
    assert "Resolved settings:" in proc.stdout and "grid (axes): 1 budget(s), 2 cell(s)" in proc.stdout
    assert "On-time success (%)" in proc.stdout and "\nMCPP " in proc.stdout and "mc_portfolio_rollout" not in proc.stdout
    report = json.load(open(os.path.join(rd, "merged", "merge_report.json")))
    assert report["complete"] and report["n_records"] == 2 * 2 * (13 + 12) * 3
    rec = json.loads(open(os.path.join(rd, "merged", "cells", "B_r1__D_r2", "records.jsonl")).readline())
    for key in ("dag_idx", "dag_kind", "problem_id", "n_nodes", "exec_trial", "budget_input_type",
                "budget_axis_value", "budget_nominal", "budget", "budget_cost_mode", "deadline_input_type",
                "deadline_axis_value", "deadline_nominal", "deadline", "deadline_enforced", "method", "success",
                "on_time_success", "termination_reason", "makespan", "total_cost", "total_rollouts",
                "completion_fraction", "planner_calls", "planner_wall_ms", "baseline_model"):  # fmt: skip
        assert key in rec, key
    assert rec["budget"] == pytest.approx(rec["budget_nominal"]) and rec["deadline"] == pytest.approx(
        2 * rec["deadline_nominal"]
    )
    lines = [json.loads(x) for x in open(os.path.join(rd, "merged", "cells", "B_r1__D_r1", "records.jsonl"))]
    suite = [r for r in lines if r["method"] == "sequential@4B_ins"]
    assert suite and all(r["baseline_model"] == "4B_ins" and r["base_method"] == "sequential" for r in suite)
    mcpp = [r for r in lines if r["method"] == "mc_portfolio_rollout"]
    assert mcpp and all("mc_portfolio_pairs_total" in r and r["deadline_enforced"] for r in mcpp)
    params = json.load(open(os.path.join(rd, "merged", "cells", "B_r1__D_r1", "params.json")))
    assert params["settings"]["mcpp"]["M"] == 4 and params["cell"]["budget_axis_value"] == 1.0
    an = os.path.join(rd, "analysis")
    for f in ("summary.csv", "summary.parquet", "paired.csv", "paired.parquet", "best_baseline.csv",
              "best_baseline.parquet", "report.md", "plots/success_vs_budget.png",
              "plots/heatmaps/mc_portfolio_rollout.png", "plots/mc_portfolio_rollout_minus_best_baseline.png"):  # fmt: skip
        assert os.path.exists(os.path.join(an, f)), f
    import pandas as pd

    paired = pd.read_parquet(os.path.join(an, "paired.parquet"))
    assert set(paired["baseline"]) >= {"sequential", "sequential@4B_ins"} and (paired["n_pairs"] == 6).all()
    # the analysis is reproducible from merged/ alone (a copy elsewhere, any cwd)
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(os.path.join(rd, "merged"), copy / "merged")
    out = subprocess.run([sys.executable, "-c", "import sys; from harness.analyze import analyze_run; "
                          f"print(analyze_run({str(copy / 'merged')!r}, {str(copy / 'an')!r}).main_table_text)"],
                         env=clean_env(), cwd="/", capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert pd.read_csv(copy / "an" / "summary.csv").equals(pd.read_csv(os.path.join(an, "summary.csv")))


def test_sigkilled_shard_resumed_gives_identical_records(tmp_path):
    pool = small_pool(tmp_path, n=6)
    base = dict(N_EXEC_TRIALS=800, BUDGET_RATIOS="1.5", DEADLINE_RATIOS="1 4", DAGS_PER_SHARD=6,
                HEARTBEAT_SECONDS=1)  # fmt: skip
    ref_env = config_env(tmp_path, pool, RUN_NAME="ref", **base)
    for action in ("prepare", "auto", "merge"):  # uninterrupted reference
        harness(action, ref_env)
    env = config_env(tmp_path, pool, RUN_NAME="kill", **base)
    harness("prepare", env)
    rd = _run_dir(tmp_path, "kill")
    out_dir = os.path.join(rd, "outputs", "b00")
    proc = subprocess.Popen(["bash", HARNESS, "shard", "0"], env=clean_env(**env), cwd="/",
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.time() + 300
    n_files = 0
    while time.time() < deadline and proc.poll() is None:
        n_files = len(os.listdir(out_dir)) if os.path.isdir(out_dir) else 0
        if n_files >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = [f for f in os.listdir(out_dir) if f.endswith(".jsonl")]
    assert 0 < len(finished) < 6, f"the kill should land mid-shard ({finished})"
    # the claim survives the kill: status shows it, resume releases it (heartbeat age > 0 s)
    assert "s00000 RUNNING" in harness("status", env).stdout or "STALE" in harness("status", env).stdout
    assert "released 1 stale claim" in harness("resume", env, "--stale-seconds", "0").stdout
    harness("auto", env)
    harness("merge", env)
    log = open(os.path.join(rd, "logs", "s00000.log")).read()
    assert f"{len(finished)} already complete" in log
    assert merged_bytes(rd) == merged_bytes(_run_dir(tmp_path, "ref"))


def test_two_auto_workers_each_shard_once_then_truncation_redone(tmp_path):
    pool = small_pool(tmp_path, n=4)
    env = config_env(tmp_path, pool, BUDGET_RATIOS="0.5 2", DEADLINE_RATIOS="1", DAGS_PER_SHARD=1,
                     HEARTBEAT_SECONDS=1)  # fmt: skip
    harness("prepare", env)
    rd = _run_dir(tmp_path)
    workers = [
        subprocess.Popen(["bash", HARNESS, "auto"], env=clean_env(**env), cwd="/", stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)  # fmt: skip
        for _ in range(2)
    ]
    outs = [w.communicate(timeout=600)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers), outs
    ran = [line.strip() for o in outs for line in o.splitlines() if line.strip().startswith("shard ")]
    assert sorted(ran) == sorted(f"shard {n}: done" for n in range(8)), outs
    for n in range(8):
        log = open(os.path.join(rd, "logs", f"s{n:05d}.log")).read()
        assert log.count("=== ") == 1, f"shard {n} ran more than once:\n{log}"
        assert os.path.exists(os.path.join(rd, "state", f"s{n:05d}.done"))
    harness("merge", env)
    before = merged_bytes(rd)
    # truncate one per-DAG output in the middle of a line
    victim = os.path.join(rd, "outputs", "b01", "dag_000002.jsonl")
    data = open(victim, "rb").read()
    open(victim, "wb").write(data[: len(data) // 2 + 7])
    m = harness("merge", env, check=False)
    assert m.returncode != 0
    assert "missing DAGs: 2" in m.stderr and "truncated" in m.stderr and "s00006" in m.stderr
    harness("local", env, "--no-prepare", "--no-progress")
    assert "1 computed" in open(os.path.join(rd, "logs", "s00006.log")).read()
    assert merged_bytes(rd) == before


def test_always_failing_shard_marked_failed_and_merge_names_the_gaps(tmp_path):
    pool = small_pool(tmp_path, n=4)
    env = config_env(tmp_path, pool, BUDGET_RATIOS="1", DEADLINE_RATIOS="1", DAGS_PER_SHARD=2,
                     MAX_SHARD_FAILURES=2, N_EXEC_TRIALS=4)  # fmt: skip
    harness("prepare", env)
    rd = _run_dir(tmp_path)
    jobs = os.path.join(rd, "jobs_list.txt")
    lines = open(jobs).read().splitlines()
    lines[1] = "echo 'simulated crash' >&2; exit 1"  # a crash (exit 2 and 3 are refusals: not retried)
    open(jobs, "w").write("\n".join(lines) + "\n")
    proc = harness("local", env, "--no-prepare", "--no-progress", check=False)
    assert proc.returncode == 1
    assert "marked FAILED after 2 tries" in proc.stderr
    failures = open(os.path.join(rd, "state", "s00001.failures")).read().splitlines()
    assert len(failures) == 2 and json.loads(failures[-1])["exit_code"] == 1
    status = harness("status", env).stdout
    assert "s00001 FAILED   after 2 tries: exit code 1" in status and "s00000 DONE" in status
    assert "1 done, 1 failed" in status.replace("0 stale, ", "")
    # auto skips failed shards (no fourth attempt)
    harness("auto", env)
    assert len(open(os.path.join(rd, "state", "s00001.failures")).read().splitlines()) == 2
    # merge: non-zero, naming missing DAGs, trials and methods
    m = harness("merge", env, check=False)
    assert m.returncode == 1
    assert "missing DAGs: 2-3" in m.stderr and "missing trials: 0-3" in m.stderr
    assert "missing methods: all 12" in m.stderr and "sequential_64" in m.stderr
    report = json.load(open(os.path.join(rd, "merged", "merge_report.json")))
    assert not report["complete"] and report["missing_dags"] == [2, 3]
    # merge_shards.py works from any directory with --run-dir
    p = subprocess.run([sys.executable, os.path.join(ROOT, "merge_shards.py"), "--run-dir", rd], cwd="/",
                       env=clean_env(), capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 1 and "missing DAGs: 2-3" in p.stderr
    # resume --retry-failed makes it pending again
    assert "pending again" in harness("resume", env, "--retry-failed").stdout
    assert "s00001 PENDING" in harness("status", env).stdout

"""Fixed costs around the planner: hosts started while `prepare` runs, no interpreter teardown, phase timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness_util import ROOT, config_env, harness, merged_records_no_timing, small_pool

import harness.worker as worker
from harness.rundir import RunDir
from harness.shards import RUN_SHARD


def test_exit_now_runs_atexit_and_flushes_but_keeps_the_exit_code():
    code = ("import atexit, sys\nfrom harness.cli_util import exit_now\n"
            "atexit.register(lambda: print('atexit ran'))\nprint('buffered', end='')\n"
            "sys.stderr.write('err')\nexit_now(3)\nprint('never')")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT}, stdin=subprocess.DEVNULL)  # fmt: skip
    assert r.returncode == 3
    assert r.stdout == "bufferedatexit ran\n" and r.stderr == "err"


def test_exit_now_waits_for_a_running_thread():
    code = ("import threading, time\nfrom harness.cli_util import exit_now\n"
            "t = threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', flush=True)))\n"
            "t.start()\nexit_now(0)")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    assert r.returncode == 0 and r.stdout == "thread done\n"


def _prepared(tmp_path, name):
    env = config_env(tmp_path / name, small_pool(tmp_path, n=3), N_EXEC_TRIALS="3", METHOD_SET="sequential,uniform",
                     DAGS_PER_SHARD="1")  # fmt: skip
    harness("prepare", env)
    return RunDir(os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"])), env


def test_a_prestarted_host_is_taken_by_the_worker_and_the_records_do_not_change(tmp_path, monkeypatch):
    rd_a, env_a = _prepared(tmp_path, "a")
    opts = worker.WorkerOptions(threads_per_shard=1)
    worker.prestart_hosts(sys.executable, RUN_SHARD, worker.shard_env(1), 1)
    spare = list(worker._spare_hosts)
    assert len(spare) == 1 and spare[0].key == (sys.executable, RUN_SHARD, "1")
    started = []
    real_init = worker.ShardHost.__init__

    def counting_init(self, *a, **k):
        started.append(1)
        real_init(self, *a, **k)

    monkeypatch.setattr(worker.ShardHost, "__init__", counting_init)
    try:
        counts = worker.auto_loop(worker.ShardRunner(rd_a, opts, log=lambda m: None))
    finally:
        worker.release_spare_hosts()
    assert counts == {"done": len(rd_a.shards)} and started == []  # the spare host ran every shard
    assert worker._spare_hosts == [] and spare[0].proc.poll() == 0  # ended at end of input
    harness("merge", env_a)
    rd_b, env_b = _prepared(tmp_path, "b")  # the same run with a host started when the first shard comes
    worker.auto_loop(worker.ShardRunner(rd_b, opts, log=lambda m: None))
    harness("merge", env_b)
    assert merged_records_no_timing(rd_a.path) == merged_records_no_timing(rd_b.path)


def test_local_records_its_phase_timings_and_each_shard_its_pool_reading(tmp_path):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_EXEC_TRIALS="2", METHOD_SET="sequential,uniform")
    harness("local", env, "--no-progress")
    rd = RunDir(os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"]))
    t = json.load(open(os.path.join(rd.logs, "local_timings.json"), encoding="utf-8"))
    assert {"start_s", "prepare_s", "shards_s", "merge_s", "analysis_s"} <= set(t)
    assert all(t[k] >= 0 for k in ("prepare_s", "shards_s", "merge_s", "analysis_s"))
    assert {"load_s", "tables_s", "plots_wait_s", "report_s"} == set(t["analysis"])
    assert t["analysis_import_wait_s"] >= 0 and t["cpu_s"] > 0  # the analysis ran in its own process
    logs = "".join(open(os.path.join(rd.logs, f), encoding="utf-8").read() for f in os.listdir(rd.logs)
                   if f.endswith(".log"))  # fmt: skip
    assert "(reading the pool " in logs
    assert all(f.endswith(".png") for f in os.listdir(os.path.join(rd.analysis, "plots")) if "." in f)


def test_local_refusing_a_setting_is_one_line_with_hosts_started_early(tmp_path):
    """The hosts start before the settings check; a refused setting still gives one line and exit 2."""
    env = config_env(tmp_path, small_pool(tmp_path, n=2), METHOD_SET="nope")
    r = harness("local", env, "--no-progress", check=False)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "METHOD_SET (environment): unknown method(s) 'nope'" in r.stderr


def test_the_analysis_process_gives_the_same_files_as_analyze_and_a_dead_one_leaves_it_to_the_caller(tmp_path):
    from harness import analysis_host
    from harness.analyze import analyze_run

    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_EXEC_TRIALS="2", METHOD_SET="sequential,uniform,MCPP")
    harness("local", env, "--no-progress")
    rd = RunDir(os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"]))
    here = analyze_run(rd.merged, str(tmp_path / "here"))
    host = analysis_host.AnalysisHost()
    ans = host.analyze(rd.merged, str(tmp_path / "there"), ("png",))
    assert ans["ok"] and ans["main_table_text"] == here.main_table_text and ans["import_wait_s"] >= 0
    for sub in ("", "plots", os.path.join("plots", "heatmaps")):
        names = sorted(f for f in os.listdir(tmp_path / "here" / sub) if "." in f and not f.endswith(".parquet"))
        assert names == sorted(f for f in os.listdir(tmp_path / "there" / sub) if "." in f and not f.endswith(".parquet"))
        for f in names:
            if f.endswith((".png", ".tex")) or f in ("best_baseline.csv", "paired.csv", "main_table.csv"):
                assert (tmp_path / "here" / sub / f).read_bytes() == (tmp_path / "there" / sub / f).read_bytes(), f
    dead = analysis_host.AnalysisHost()
    dead.proc.kill()
    dead.proc.wait()
    assert dead.analyze(rd.merged, str(tmp_path / "gone"), ("png",)) is None
    bad = analysis_host.AnalysisHost()
    no = bad.analyze(str(tmp_path / "no_such_dir"), str(tmp_path / "x"), ("png",))
    assert no["ok"] is False and "merge_report.json" in no["error"]

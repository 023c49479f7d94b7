"""Workers x numba threads never exceed the cores a run may use, and the choice is recorded.

Why: each shard process starts numba's thread pool; one worker per core with
every core's worth of threads each oversubscribes the machine, and a parallel
region then waits for threads the OS has not scheduled (slower than one thread).
"""

from __future__ import annotations

import json
import os

from harness_util import config_env, harness, small_pool

from harness.state import ShardState
from harness.variables import cores
from harness.worker import default_threads, threads_per_worker


def test_threads_per_worker_never_oversubscribe():
    for n_cores in (1, 2, 3, 8, 64):
        for workers in (1, 2, 3, 8, 100):
            t = threads_per_worker(n_cores, workers)
            assert t >= 1 and (workers * t <= n_cores or t == 1)
    assert threads_per_worker(2, 1) == 2 and threads_per_worker(8, 3) == 2


def test_lone_worker_takes_numba_num_threads_else_its_cores():
    assert default_threads({"NUMBA_NUM_THREADS": "3"}) == 3
    assert default_threads({}) == cores()
    assert default_threads({"NUMBA_NUM_THREADS": "junk"}) == cores()


def test_local_records_its_threads_in_run_json_and_per_shard(tmp_path):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), N_WORKERS="2", METHOD_SET="sequential", N_EXEC_TRIALS="2")
    harness("local", env, "--no-progress")
    run_dir = os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"])
    par = json.load(open(os.path.join(run_dir, "run.json")))["parallelism"]
    assert par["action"] == "local" and par["workers"] == 2 and par["cores"] == cores()
    assert par["numba_threads_per_worker"] == threads_per_worker(cores(), 2)
    assert par["workers"] * par["numba_threads_per_worker"] <= max(cores(), 2)
    st = ShardState(os.path.join(run_dir, "state"))
    done = [st.read(f"s{i:05d}", "done") for i in range(len(json.load(open(os.path.join(run_dir, "run.json")))["shards"]))]
    assert done and all(d["numba_threads"] == par["numba_threads_per_worker"] for d in done)

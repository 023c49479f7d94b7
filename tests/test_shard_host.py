"""One shard host per worker runs every shard with the records a process per shard gives, and falls back.

Why: the host (harness/shard_host.py) saves a process start per shard; it
must not change a record, and a host that cannot start or dies must cost no
shard attempt (the shard then runs as its own process).
"""

from __future__ import annotations

import json
import os
import shlex
import sys

import pytest
from harness_util import config_env, harness, small_pool

import harness.shard_host as shard_host
import harness.worker as worker
from harness.merge import strip_timing
from harness.rundir import RunDir
from harness.state import ShardState


def test_hosted_command_takes_only_plain_job_lines():
    flags = ["--shard", "0", "--mcpp-params", '{"M": 4, "base_ks": [1, 4]}']
    line = " ".join(shlex.quote(a) for a in [sys.executable, "/abs/run_shard.py", *flags])
    assert worker.hosted_command(line) == (sys.executable, "/abs/run_shard.py", flags)
    for edited in (line + " ; echo hi", "cd /x && " + line, line.replace("/abs/run_shard.py", "run_shard.py"),
                   line.replace("run_shard.py", "other.py"), "exit 3", "'unclosed"):  # fmt: skip
        assert worker.hosted_command(edited) is None, edited


def _prepared(tmp_path, name):
    env = config_env(tmp_path / name, small_pool(tmp_path, n=3), N_EXEC_TRIALS="3", METHOD_SET="sequential,uniform",
                     DAGS_PER_SHARD="1")  # fmt: skip
    os.makedirs(tmp_path / name, exist_ok=True)
    harness("prepare", env)
    return RunDir(os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"]))


def _outputs(rd: RunDir) -> dict:
    out = {}
    for group in sorted(os.listdir(rd.outputs)):
        for f in sorted(os.listdir(os.path.join(rd.outputs, group))):
            with open(os.path.join(rd.outputs, group, f), encoding="utf-8") as fh:
                out[(group, f)] = [strip_timing(json.loads(x)) for x in fh]
    return out


def test_one_host_runs_all_shards_with_the_records_of_a_process_each(tmp_path, monkeypatch):
    started = []
    real_init = worker.ShardHost.__init__

    def counting_init(self, python, script, env):
        started.append(1)
        # the shard's BLAS threads follow its numba threads (idle BLAS threads spin and took the other core)
        assert env["NUMBA_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
        real_init(self, python, script, env)

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)

    monkeypatch.setattr(worker.ShardHost, "__init__", counting_init)
    hosted, alone = _prepared(tmp_path, "hosted"), _prepared(tmp_path, "alone")
    opts = worker.WorkerOptions(heartbeat_seconds=5.0, threads_per_shard=1)
    counts = worker.auto_loop(worker.ShardRunner(hosted, opts))
    n_shards = len(hosted.shards)
    assert n_shards >= 4 and counts == {"done": n_shards} and started == [1]
    runner = worker.ShardRunner(alone, opts)  # reuse_process off: a process per shard, as before
    assert [runner.run(n) for n in range(n_shards)] == ["done"] * n_shards and started == [1]
    assert _outputs(hosted) == _outputs(alone) and _outputs(hosted)
    log = open(os.path.join(hosted.logs, "s00001.log"), encoding="utf-8").read()
    assert "shard s00001:" in log  # the shard's own output lands in its log


def test_a_set_blas_thread_count_is_kept(tmp_path, monkeypatch):
    seen = []

    def no_host(self, python, script, env):
        seen.append(env)
        raise OSError("no host")

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    monkeypatch.setattr(worker.ShardHost, "__init__", no_host)
    rd = _prepared(tmp_path, "blas")
    runner = worker.ShardRunner(rd, worker.WorkerOptions(heartbeat_seconds=5.0, threads_per_shard=1))
    runner.reuse_process = True
    with pytest.raises(OSError):
        runner.run(0)
    assert seen and seen[0]["OPENBLAS_NUM_THREADS"] == "3"


def test_a_host_that_dies_costs_no_attempt(tmp_path, monkeypatch):
    monkeypatch.setattr(shard_host, "COMMAND", ("-c", "import sys; sys.exit(3)"))
    rd = _prepared(tmp_path, "broken")
    runner = worker.ShardRunner(rd, worker.WorkerOptions(heartbeat_seconds=5.0, threads_per_shard=1))
    counts = worker.auto_loop(runner)
    assert counts == {"done": len(rd.shards)} and runner._host_broken
    st = ShardState(rd.state)
    assert all(not st.failures(f"s{n:05d}") for n in range(len(rd.shards)))

"""Harness reliability (issue 9): each test pins one failure found by trying the tools as a new user.

Fast tests run shards in-process; the few that need real processes (a copied
run resumed by ``local``, a SIGKILLed ``local``) are marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from harness_util import HARNESS, clean_env, config_env, harness, merged_bytes, small_pool

from harness.merge import IncompleteRun, merge
from harness.prepare import prepare
from harness.shard_runner import run_shard


def _finished_run(tmp_path, name="t", **kw):
    """A prepared run whose shards all ran in-process (no state markers), merged."""
    env = config_env(tmp_path, small_pool(tmp_path, n=3), RUN_NAME=name, DAGS_PER_SHARD=1, **kw)
    rd = prepare(env, quiet=True)
    for spec in rd.shards:
        run_shard(spec, log=lambda s: None)
    merge(rd, out=lambda s: None)
    return env, rd


def _truncate(path, keep=0.5):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: int(len(data) * keep) + 7])


# ----------------------------------------------------------------------------- #10 merge counts


def test_incomplete_merge_message_and_report_counts_agree(tmp_path):
    env, rd = _finished_run(tmp_path)
    _truncate(os.path.join(rd.outputs, "b01", "dag_000001.jsonl"))
    with pytest.raises(IncompleteRun) as e:
        merge(rd, out=lambda s: None)
    report = json.load(open(os.path.join(rd.merged, "merge_report.json")))
    n_missing = sum(g["n_missing"] for g in report["missing"])
    assert 0 < n_missing < report["expected_records"]
    # the report's present + missing add up to what was expected, and the message says the same numbers
    assert report["n_records"] + report["n_missing"] == report["expected_records"]
    assert report["n_missing"] == n_missing
    assert sum(c["n_records"] for c in report["cells"]) == report["n_records"]
    assert f"{report['n_records']} of {report['expected_records']} records present, {n_missing} missing" in str(
        e.value
    )


# ----------------------------------------------------------------------------- #4 relocatable runs


def test_paths_inside_a_run_are_relative_to_the_run_directory(tmp_path):
    env, rd = _finished_run(tmp_path)
    for line in rd.job_lines():
        assert rd.path not in line, line
        assert "--out-dir outputs" in line and "--progress-file state/s0000" in line
    run = json.load(open(rd.run_json))
    assert all(s["out_dir"] == "outputs" for s in run["shards"])
    # a copy resolves its shards inside itself
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(rd.path, copy, symlinks=True)
    from harness.rundir import RunDir

    spec = RunDir(str(copy)).shards[0]
    assert spec.out_dir == str(copy / "outputs") and spec.progress_file.startswith(str(copy / "state"))


@pytest.mark.slow
def test_copied_run_is_repaired_in_place_and_the_original_is_untouched(tmp_path):
    env, rd = _finished_run(tmp_path, name="orig")
    original = merged_bytes(rd.path)
    snapshot = {f: open(os.path.join(dp, f), "rb").read() for dp, _, fs in os.walk(rd.outputs) for f in fs}
    copy = os.path.join(tmp_path, "runs", "copy")
    subprocess.run(["cp", "-a", rd.path, copy], check=True)
    _truncate(os.path.join(copy, "outputs", "b00", "dag_000002.jsonl"))
    copy_env = {**env, "RUN_NAME": "copy"}
    m = harness("merge", copy_env, check=False)
    assert m.returncode == 1 and "truncated" in m.stderr
    harness("local", copy_env, "--no-prepare", "--no-progress")
    assert merged_bytes(copy) == original
    after = {f: open(os.path.join(dp, f), "rb").read() for dp, _, fs in os.walk(rd.outputs) for f in fs}
    assert after == snapshot
    assert not os.path.exists(os.path.join(rd.logs, "s00002.log")), "the copy's shard ran in the original"


# ----------------------------------------------------------------------------- #9 dead claims


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _write_claim(rd, sid, **rec):
    os.makedirs(rd.state, exist_ok=True)
    base = {"worker": f"{rec.get('host', 'h')}:{rec.get('pid', 1)}:abcd", "time": time.time()}
    with open(os.path.join(rd.state, f"{sid}.claim"), "w") as fh:
        json.dump({**base, **rec}, fh)


def _prepared(tmp_path, **kw):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), DAGS_PER_SHARD=1, HEARTBEAT_SECONDS=1, **kw)
    return env, prepare(env, quiet=True)


def test_claim_of_a_dead_process_on_this_host_is_stale_at_once(tmp_path):
    from harness.status import collect, render_status, resume

    env, rd = _prepared(tmp_path)
    _write_claim(rd, "s00000", host=socket.gethostname(), pid=_dead_pid())
    _write_claim(rd, "s00001", host=socket.gethostname(), pid=os.getpid())  # alive: running
    states = {s.sid: s for s in collect(rd, stale_seconds=3600)}
    assert states["s00000"].state == "stale" and "is gone" in states["s00000"].note
    assert states["s00001"].state == "running"
    text = render_status(rd, 3600)
    assert "s00000 STALE" in text and "s00001 RUNNING" in text
    out = []
    assert resume(rd, 3600, out=out.append) == 1
    assert "released 1 stale claim" in out[-1]
    assert not os.path.exists(os.path.join(rd.state, "s00000.claim"))
    assert os.path.exists(os.path.join(rd.state, "s00001.claim"))


def test_claim_on_another_host_is_judged_by_its_heartbeat(tmp_path):
    from harness.status import collect

    env, rd = _prepared(tmp_path)
    _write_claim(rd, "s00000", host="some-other-node", pid=_dead_pid())
    assert {s.sid: s.state for s in collect(rd, stale_seconds=3600)}["s00000"] == "running"


def _fake_tool(bin_dir, name, body):
    os.makedirs(bin_dir, exist_ok=True)
    path = os.path.join(bin_dir, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


@pytest.mark.parametrize("squeue_out, state", [("", "stale"), ("777_3|RUNNING|node1", "running")])
def test_claim_of_a_cancelled_slurm_task_is_stale_at_once(tmp_path, monkeypatch, squeue_out, state):
    from harness.status import collect

    env, rd = _prepared(tmp_path)
    bin_dir = str(tmp_path / "bin")
    _fake_tool(bin_dir, "squeue", f"echo '{squeue_out}'" if squeue_out else "exit 0")
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ["PATH"])
    _write_claim(rd, "s00000", host="node1", pid=4242, slurm_job="777_3")
    s = {s.sid: s for s in collect(rd, stale_seconds=3600)}["s00000"]
    assert s.state == state
    if state == "stale":
        assert "SLURM task 777_3 is gone" in s.note


def test_local_takes_over_dead_claims_and_names_live_ones(tmp_path):
    from harness.status import release_dead_claims, unfinished_message

    env, rd = _prepared(tmp_path)
    _write_claim(rd, "s00000", host=socket.gethostname(), pid=_dead_pid())
    _write_claim(rd, "s00001", host="some-other-node", pid=1)
    out = []
    assert release_dead_claims(rd, out=out.append) == ["s00000"]
    assert "s00000" in out[0] and "is gone" in out[0]
    msg = unfinished_message(rd, 3600)
    assert "fix the failures" not in msg and "s00001" in msg and "claimed" in msg


@pytest.mark.slow
def test_sigkilled_local_run_shows_stale_claims_and_local_finishes_it(tmp_path):
    pool = small_pool(tmp_path, n=4)
    base = dict(N_EXEC_TRIALS=400, BUDGET_RATIOS="1.5", DEADLINE_RATIOS="1 4", DAGS_PER_SHARD=1, N_WORKERS=2,
                HEARTBEAT_SECONDS=1)  # fmt: skip
    ref = config_env(tmp_path, pool, RUN_NAME="ref", **base)
    harness("local", ref, "--no-progress")
    env = config_env(tmp_path, pool, RUN_NAME="kill", **base)
    harness("prepare", env)
    rd = os.path.join(tmp_path, "runs", "kill")
    proc = subprocess.Popen(["bash", HARNESS, "local", "--no-prepare", "--no-progress"], env=clean_env(**env),
                            cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t_end = time.time() + 300
    while time.time() < t_end and not any(f.endswith(".claim") for f in os.listdir(os.path.join(rd, "state"))):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    status = harness("status", env).stdout
    assert "RUNNING" not in status and "STALE" in status and "is gone" in status
    again = harness("local", env, "--no-prepare", "--no-progress", check=False)
    assert again.returncode == 0, again.stderr
    assert "fix the failures" not in again.stderr
    assert merged_bytes(rd) == merged_bytes(os.path.join(tmp_path, "runs", "ref"))

"""A real SLURM run (``run_experiment.sh slurm``) gives the same records as ``local``.

Needs a running SLURM cluster (CI starts a single-node one with
``bash .ci/setup_slurm.sh``). Where SLURM cannot be used the test is skipped
with a loud message on the terminal, never silently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import pytest
from harness_util import ROOT, config_env, harness, merged_records_no_timing

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

EXAMPLE_POOL = os.path.join(ROOT, "examples", "example_pool.jsonl")


def slurm_unavailable() -> str | None:
    """None when sbatch works and a node is up, else the reason."""
    for tool in ("sbatch", "sinfo", "squeue"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "sinfo timed out (slurmctld not answering)"
    if p.returncode != 0:
        return f"sinfo failed: {p.stderr.strip()}"
    states = p.stdout.split()
    if not any(s.rstrip("*") in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"no SLURM node is up (sinfo states: {states})"
    return None


def _loud_skip(reason: str) -> None:
    msg = (
        "\n" + "!" * 78 + f"\n!!! SLURM TEST SKIPPED: {reason}\n"
        "!!! Start a single-node cluster with `bash .ci/setup_slurm.sh` (as root) to run it.\n" + "!" * 78 + "\n"
    )
    sys.__stderr__.write(msg)
    sys.__stderr__.flush()
    warnings.warn(f"SLURM test skipped: {reason}", stacklevel=2)
    pytest.skip(f"SLURM unavailable: {reason}")


def _wait_done(rd: str, n_shards: int, timeout: float) -> None:
    t_end = time.time() + timeout
    while time.time() < t_end:
        state = os.path.join(rd, "state")
        done = sum(os.path.exists(os.path.join(state, f"s{n:05d}.done")) for n in range(n_shards))
        failed = [n for n in range(n_shards) if os.path.exists(os.path.join(state, f"s{n:05d}.failed"))]
        if failed:
            raise AssertionError(f"SLURM shards failed: {failed}")
        if done == n_shards:
            return
        time.sleep(1.0)
    logs = os.path.join(rd, "logs", "slurm")
    tails = {f: open(os.path.join(logs, f)).read()[-800:] for f in sorted(os.listdir(logs))} if os.path.isdir(logs) else {}
    raise AssertionError(f"SLURM run did not finish in {timeout:.0f}s; logs: {json.dumps(tails, indent=1)}")


def test_slurm_array_gives_the_same_records_as_local(tmp_path):
    reason = slurm_unavailable()
    if reason:
        _loud_skip(reason)
    settings = dict(
        N_DAGS=2, N_EXEC_TRIALS=3, METHOD_SET="all", BUDGET_RATIOS="1", DEADLINE_RATIOS="1 2", DAGS_PER_SHARD=1,
        MC_PORTFOLIO_M=4, MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=8, MC_PORTFOLIO_BASE_KS="1,4", HEARTBEAT_SECONDS=1,
    )  # fmt: skip
    local_env = config_env(tmp_path, EXAMPLE_POOL, RUN_NAME="local", **settings)
    slurm_env = config_env(tmp_path, EXAMPLE_POOL, RUN_NAME="slurm", SLURM_TIME="00:20:00", **settings)
    sub = harness("slurm", slurm_env)
    assert "submitted SLURM job array" in sub.stdout
    rd = os.path.join(tmp_path, "runs", "slurm")
    status = harness("status", slurm_env).stdout
    assert "SLURM: 1 submission(s)" in status
    harness("local", local_env, "--no-progress")
    _wait_done(rd, 2, timeout=900)
    harness("merge", slurm_env)
    assert os.listdir(os.path.join(rd, "logs", "slurm")), "SLURM logs are written under the run directory"
    a = merged_records_no_timing(os.path.join(tmp_path, "runs", "local"))
    b = merged_records_no_timing(rd)
    assert a.keys() == b.keys() and sum(len(v) for v in a.values()) == 2 * 2 * 13 * 3
    assert a == b
    # resubmitting a finished run submits nothing
    again = harness("slurm", slurm_env)
    assert "nothing to submit" in again.stdout

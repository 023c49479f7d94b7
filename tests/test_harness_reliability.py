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
from harness_util import HARNESS, ROOT, clean_env, config_env, harness, merged_bytes, small_pool

from harness.merge import IncompleteRun, merge
from harness.prepare import prepare
from harness.shard_runner import run_shard
from simulator.base.errors import ConfigError


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


def test_a_relative_python_runs_every_shard(tmp_path):
    """``PYTHON=.venv/bin/python`` (what the missing-packages message advises) names the interpreter from the
    directory the command was started in; shards run elsewhere, so the job lines hold its absolute path."""
    rel = os.path.relpath(sys.executable, "/")  # the harness helper starts run_experiment.sh in /
    env = config_env(tmp_path, small_pool(tmp_path, n=2), PYTHON=rel, N_EXEC_TRIALS=2, DAGS_PER_SHARD=1)
    harness("local", env)
    run = tmp_path / "runs" / "t"
    lines = (run / "jobs_list.txt").read_text().splitlines()
    assert lines and all(line.startswith(sys.executable + " ") for line in lines)
    assert list((run / "merged" / "cells").iterdir())


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


def test_a_shard_claimed_after_the_runners_stopped_is_not_run(tmp_path):
    """Two `local` workers share one stop: when one fails fatally (a full disk) it stops them, then releases its
    shard. The other, which looked at the stop before that, may claim the released shard next: it must not run
    it (the full-disk test saw two attempts of one shard under load). Here the stop is set at the claim."""
    from harness import worker

    env, rd = _prepared(tmp_path)
    runner = worker.ShardRunner(rd, worker.WorkerOptions(heartbeat_seconds=5.0, threads_per_shard=1),
                                log=lambda m: None)
    runner.on_claimed = lambda n: runner.stop.set()
    assert runner.run(0) == "busy"
    assert runner.state.failures("s00000") == [] and not runner.state.is_done("s00000")
    assert not os.path.exists(os.path.join(rd.logs, "s00000.log"))  # never started
    assert not os.path.exists(os.path.join(rd.state, "s00000.claim"))  # and released


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


# ----------------------------------------------------------------------------- #6 / #7 settings checked first


@pytest.mark.parametrize(
    "action, var, value",
    [
        ("local", "STALE_SECONDS", "abc"),
        ("local", "HEARTBEAT_SECONDS", "0"),
        ("local", "MAX_SHARD_FAILURES", "0"),
        ("local", "N_WORKERS", "two"),
        ("status", "STALE_SECONDS", "-5"),
        ("auto", "HEARTBEAT_SECONDS", "soon"),
        ("prepare", "PYTHON", "/no/such/python"),
    ],
)
def test_every_setting_is_checked_before_work_starts(tmp_path, action, var, value):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), **{var: value})
    proc = harness(action, env, *{"local": ["--no-progress"], "prepare": ["--force"]}.get(action, []), check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error: {var} (environment): expected") and value in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not os.path.exists(os.path.join(tmp_path, "runs", "t")), "nothing may be prepared or run"


@pytest.mark.parametrize(
    "var, hint",
    [
        ("MC_PORTFOLIO_MM", "MC_PORTFOLIO_M"),
        ("PLANNING_NOISE_SEEDS", "PLANNING_NOISE_SEED"),
        ("BASELINE_SUIT", "BASELINE_SUITE"),
        ("BUDGET_RATIO", "BUDGET_RATIOS"),
        ("DEADLINE_RATIOS_", "DEADLINE_RATIOS"),
        ("SLURM_MAX_PARALEL", "SLURM_MAX_PARALLEL"),
        ("SLURM_WORKER", "SLURM_WORKERS"),
    ],
)
def test_misspelt_variable_refused_with_the_closest_name(tmp_path, var, hint):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), **{var: "8"})
    with pytest.raises(ConfigError, match=f"'{var}' \\(did you mean '{hint}'\\?\\)"):
        prepare(env, quiet=True)
    assert not os.path.exists(os.path.join(tmp_path, "runs", "t"))


def test_variables_slurm_sets_itself_are_not_refused():
    from harness.variables import check_names

    check_names({"SLURM_JOB_ID": "1", "SLURM_ARRAY_TASK_ID": "3", "SLURM_CPUS_ON_NODE": "4", "SLURM_CONF": "/x",
                 "SLURM_JOB_PARTITION": "p", "SLURM_JOB_ACCOUNT": "a", "SLURM_MEM_PER_NODE": "9", "SLURM_TIME_FORMAT":
                 "relative", "SLURM_CPUS_PER_TASK": "2", "UNRELATED_MM": "1", "N_DAGS": "3"})  # fmt: skip
    with pytest.raises(ConfigError, match="MC_PORTFOLIO_FOO"):
        check_names({"MC_PORTFOLIO_FOO": "1"})


def test_mcpp_variables_checked_even_when_mcpp_does_not_run(tmp_path):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), METHOD_SET="baselines", MC_PORTFOLIO_M="many")
    with pytest.raises(ConfigError, match="MC_PORTFOLIO_.*MCPP parameter M must be an integer"):
        prepare(env, quiet=True)


# ----------------------------------------------------------------------------- one table of variables


def test_help_lists_every_variable_of_the_table_with_its_default(capsys):
    from harness.cli import main
    from harness.variables import VARIABLES

    assert main(["help"]) == 0
    out = capsys.readouterr().out.split("settings (environment variables", 1)[1]
    for v in VARIABLES:
        line = next(x for x in out.splitlines() if x.strip().startswith(v.name + " "))
        assert v.help in line and (not v.default or f"[default: {v.default}]" in line), line


def test_docs_settings_table_is_the_variables_table():
    from harness.variables import markdown_table

    docs = open(os.path.join(ROOT, "docs", "harness.md"), encoding="utf-8").read()
    begin, end = "<!-- settings table: generated by `python -m harness.variables` -->", "<!-- end of settings table -->"
    assert begin in docs and end in docs
    table = docs.split(begin, 1)[1].split(end, 1)[0].strip()
    assert table == markdown_table(), "docs/harness.md: paste the output of `python -m harness.variables`"


def test_defaults_are_the_table_defaults_run_through_the_parsers(tmp_path):
    from harness.config import resolve_config
    from harness.variables import BY_NAME

    cfg = resolve_config(config_env(tmp_path, small_pool(tmp_path, n=2), N_EXEC_TRIALS="", SEED="",
                                    BUDGET_RATIOS="", DEADLINE_RATIOS="", METHOD_SET=""))  # fmt: skip
    assert cfg.n_trials == int(BY_NAME["N_EXEC_TRIALS"].default) and cfg.seed == int(BY_NAME["SEED"].default)
    assert [g.budget.value for g in cfg.grid.groups] == [float(x) for x in BY_NAME["BUDGET_RATIOS"].default.split()]
    assert cfg.cost_mode == BY_NAME["BUDGET_COST_MODE"].default and cfg.latency_dist == BY_NAME["LATENCY_DIST"].default
    assert "mc_portfolio_rollout" in cfg.methods  # METHOD_SET's default "all"
    assert cfg.mcpp["max_candidate_actions"] == int(BY_NAME["MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS"].default)


# ----------------------------------------------------------------------------- #8 without the requirements


def _python_without_site_packages(tmp_path) -> str:
    """An interpreter that cannot import numpy/numba: this Python without its site-packages (-S)."""
    return _fake_tool(str(tmp_path / "nosite"), "python3", f'exec {sys.executable} -S "$@"')


def test_without_the_requirements_the_harness_says_how_to_install_them(tmp_path):
    env = config_env(tmp_path, small_pool(tmp_path, n=2), PYTHON=_python_without_site_packages(tmp_path))
    helped = harness("help", env, check=False)
    assert helped.returncode == 0 and "STALE_SECONDS" in helped.stdout
    assert "pip install -r requirements.txt" in helped.stdout
    for action in ("prepare", "status", "merge"):
        proc = harness(action, env, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: the Python packages of requirements.txt are not installed")
        assert "pip install -r requirements.txt" in proc.stderr and "Traceback" not in proc.stderr


def test_tests_start_python_with_the_interpreter_running_them():
    """#8, second half: ``.venv/bin/python -m pytest`` without an activated venv must pass, so no test
    starts a bare ``python``/``python3`` (the one on PATH may lack the requirements), and the harness
    started by the tests gets ``PYTHON`` = this interpreter."""
    import re

    from harness_util import clean_env

    bare = re.compile(r"""\[\s*["']python3?["']\s*,""")
    here = os.path.dirname(os.path.abspath(__file__))
    offenders = []
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), encoding="utf-8") as fh:
                offenders += [f"{name}:{i}" for i, line in enumerate(fh, 1) if bare.search(line)]
    assert offenders == [], f"use sys.executable: {offenders}"
    assert clean_env()["PYTHON"] == sys.executable


# ----------------------------------------------------------------------------- #12 SLURM, offline


def _fake_sbatch(tmp_path) -> tuple[str, str]:
    """A fake sbatch on PATH that records its arguments (one per line) and answers job id 4242."""
    bin_dir = str(tmp_path / "bin")
    calls = str(tmp_path / "sbatch_calls.txt")
    _fake_tool(bin_dir, "sbatch", f'printf "%s\\n" "$@" > {calls}; echo "4242;cluster"')
    return bin_dir, calls


@pytest.mark.parametrize(
    "var, value",
    [("SLURM_MAX_PARALLEL", "-1"), ("SLURM_WORKERS", "0"), ("SLURM_CPUS_PER_TASK", "0"), ("SLURM_MODE", "array"),
     ("SLURM_MEM", "lots"), ("SLURM_TIME", "soon"), ("SLURM_EXTRA_ARGS", "--comment 'unbalanced")],
)  # fmt: skip
def test_bad_slurm_settings_refused_before_prepare_and_submission(tmp_path, var, value):
    bin_dir, calls = _fake_sbatch(tmp_path)
    env = config_env(tmp_path, small_pool(tmp_path, n=2), **{"SLURM_MODE": "worker", var: value})
    env["PATH"] = bin_dir + os.pathsep + clean_env()["PATH"]
    proc = harness("slurm", env, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: {var} (environment): "), proc.stderr
    assert not os.path.exists(calls), "sbatch must not be called"
    assert not os.path.exists(os.path.join(tmp_path, "runs", "t")), "nothing may be prepared"


def test_worker_mode_array_has_slurm_workers_tasks(tmp_path):
    from harness.slurm import sbatch_command
    from harness.variables import check_environment

    env, rd = _prepared(tmp_path)
    for workers, pending, array in (("3", [0, 1, 5], "0-2"), ("", list(range(20)), "0-7"), ("", [4, 9], "0-1")):
        v = check_environment({**env, "SLURM_MODE": "worker", "SLURM_WORKERS": workers, "SLURM_MAX_PARALLEL": "2"},
                              "slurm --no-prepare")  # fmt: skip
        cmd, got = sbatch_command(rd, v, pending, "x.sh")
        assert got == array + "%2" and f"--array={array}%2" in cmd


def test_pending_reason_from_squeue_shown_in_status(tmp_path, monkeypatch):
    from harness.slurm import status_lines

    env, rd = _prepared(tmp_path)
    os.makedirs(rd.slurm, exist_ok=True)
    with open(os.path.join(rd.slurm, "submissions.jsonl"), "w") as fh:
        fh.write(json.dumps({"job_id": "123", "array": "0-1", "shards": [0, 1]}) + "\n")
    bin_dir = str(tmp_path / "bin")
    _fake_tool(bin_dir, "squeue", "printf '123_0|PENDING|BadConstraints\\n123_1|PENDING|BadConstraints\\n'")
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + "/usr/bin:/bin")
    text = "\n".join(status_lines(rd))
    assert "PENDING because BadConstraints: 2 task(s) (123_0 123_1)" in text
    assert "no node can satisfy the request" in text


@pytest.mark.slow
def test_generated_sbatch_script_runs_the_shards_offline(tmp_path):
    """The SLURM path without a cluster: the sbatch command line, then the generated script run as its tasks."""
    pool = small_pool(tmp_path, n=4)
    bin_dir, calls = _fake_sbatch(tmp_path)
    common = dict(DAGS_PER_SHARD=2, BUDGET_RATIOS="0.5 2", DEADLINE_RATIOS="1 3")
    ref = config_env(tmp_path, pool, RUN_NAME="ref", **common)
    harness("local", ref, "--no-progress")
    env = config_env(tmp_path, pool, RUN_NAME="s", SLURM_MAX_PARALLEL=2, SLURM_MEM="1G", SLURM_TIME="00:10:00",
                     SLURM_PARTITION="debug", SLURM_EXTRA_ARGS="--qos=low --comment 'two words'", **common)  # fmt: skip
    env["PATH"] = bin_dir + os.pathsep + clean_env()["PATH"]
    sub = harness("slurm", env)
    assert "submitted SLURM job array 4242 (shard mode, array 0-3%2)" in sub.stdout
    rd = os.path.join(tmp_path, "runs", "s")
    script = os.path.join(rd, "slurm", "array_shard.sh")
    argv = open(calls).read().splitlines()
    assert argv[:3] == ["--parsable", "--array=0-3%2", "--job-name=mcpp-s"]
    assert f"--output={rd}/logs/slurm/%A_%a.out" in argv and "--cpus-per-task=1" in argv
    assert {"--mem=1G", "--time=00:10:00", "--partition=debug", "--qos=low"} <= set(argv)
    assert argv[argv.index("--comment") + 1] == "two words" and argv[-1] == script
    text = open(script).read()
    assert f"export RUN_DIR={rd}\n" in text and f"export PYTHON={sys.executable}\n" in text
    assert "export NUMBA_NUM_THREADS=1\n" in text and 'task "$SLURM_ARRAY_TASK_ID"' in text
    assert f'export NUMBA_CACHE_DIR="${{NUMBA_CACHE_DIR:-{rd}/numba_cache}}"\n' in text  # one cache for every node
    sub_rec = json.loads(open(os.path.join(rd, "slurm", "submissions.jsonl")).readline())
    assert sub_rec["job_id"] == "4242" and sub_rec["shards"] == [0, 1, 2, 3]
    # run the script as SLURM would run each array task: a bare environment, no venv on PATH
    bare = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    for task in range(4):
        p = subprocess.run(["bash", script], env={**bare, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_JOB_ID": "4242"},
                           capture_output=True, text=True, timeout=600, cwd="/")  # fmt: skip
        assert p.returncode == 0 and f"task shard {task}: done" in p.stdout, p.stdout + p.stderr
    claim_free = [f for f in os.listdir(os.path.join(rd, "state")) if f.endswith(".claim")]
    assert not claim_free
    assert any(f.endswith(".nbi") for _, _, fs in os.walk(os.path.join(rd, "numba_cache")) for f in fs)  # shared cache
    harness("merge", env)
    assert merged_bytes(rd) == merged_bytes(os.path.join(tmp_path, "runs", "ref"))
    # worker mode: SLURM_WORKERS tasks of `auto`; nothing left to submit now
    again = harness("slurm", {**env, "SLURM_MODE": "worker", "SLURM_WORKERS": "3"}, "--no-prepare")
    assert "nothing to submit" in again.stdout

"""Issue 9, command-line failures: episodes that always end, one rule per setting, valid JSON,
bounded memory, outputs checked before work, records that hold the values that produced them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from tests.dags import chain_dag
from tests.harness_util import ROOT, harness

EXAMPLE = os.path.join(ROOT, "examples", "example_pool.jsonl")


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def run_code(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run Python code in a child with a time limit (a hang fails the test instead of the suite)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": ROOT})


def strict_json(text: str):
    """json.loads that refuses NaN / Infinity (which Python's json accepts and writes by default)."""

    def bad(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=bad)


# --------------------------------------------------------------------------- #2 episodes always end


def test_cli_refuses_infinite_budget_like_the_harness():
    from harness.grid import resolve_grid

    r = run("simulate", "--pool", EXAMPLE, "--budget", "inf", "--deadline", "60", "--trials", "5")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--budget (flag): expected a finite number > 0, got 'inf'" in r.stderr
    with pytest.raises(ConfigError, match=r"BUDGET_VALUES \(environment\): expected a finite number > 0"):
        resolve_grid({"BUDGET_VALUES": "inf"})


def test_uncompletable_node_ends_every_episode_at_once(tmp_path):
    """p = 0 on every node and attempts that cost nothing: nothing bounded the retries (hang)."""
    path = tmp_path / "zero.jsonl"
    path.write_text(json.dumps(chain_dag(3, p=0.0, cost=0.0)) + "\n")
    r = run_code(f"""
        import json
        from simulator.pools.pool import load_pool
        from simulator.costs.arrays import dag_arrays, CostSetting
        from simulator.simulate import simulate_baseline, simulate_policy
        from simulator.methods import BASELINE_METHODS, MCPP
        pool = load_pool({str(path)!r})
        arr = dag_arrays(pool, 0, CostSetting())
        out = {{}}
        for m in BASELINE_METHODS:
            b = simulate_baseline(arr, m, 1000.0, range(3), 42, 0)
            out[m] = [b.records(60.0)[0]["termination_reason"], float(b.total_cost.max()),
                      float(b.makespan.max())]
        b = simulate_policy(arr, MCPP, 1000.0, 60.0, range(2), 42, 0, {{"M": 2}})
        out[MCPP] = [b.records()[0]["termination_reason"], float(b.total_cost.max()), float(b.makespan.max())]
        print(json.dumps(out))
    """, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) and all(v == ["stalled", 0.0, 0.0] for v in out.values()), out


def test_cli_zero_probability_dag_with_huge_budget_returns(tmp_path):
    path = tmp_path / "zero.jsonl"
    path.write_text(json.dumps(chain_dag(2, p=0.0)) + "\n")
    r = run("simulate", "--pool", str(path), "--budget", "1e300", "--deadline", "60", "--method", "sequential",
            "--trials", "20", "--json", timeout=240)
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    assert out["termination"] == {"stalled": 20} and out["mean_cost"] == 0.0


def test_event_limit_ends_a_hopeless_episode():
    """p > 0 but tiny, attempts free: the episode would run ~1e12 events; the hard bound ends it."""
    r = run_code("""
        import json, sys
        import numpy as np
        from tests.dags import chain_dag
        from simulator.pools.pool import pool_from_objects
        from simulator.costs.arrays import build_arrays, CostSetting
        from simulator.engine.loop import MAX_EVENTS, REASONS
        from simulator.simulate import simulate_baseline
        from simulator.engine.episode import Policy, run_policy_episode

        pool = pool_from_objects([chain_dag(2, p=1e-12, cost=0.0)])
        arr = build_arrays(pool[0], CostSetting())
        b = simulate_baseline(arr, "sequential", 1000.0, range(2), 42, 0)
        rec = b.records()[0]

        class Retry(Policy):
            name = "retry"
            def reset(self, arr, seed, dag, trial): pass
            def act(self, view):
                return np.zeros(view.arr.n, dtype=np.int64), np.ones(view.arr.n, dtype=np.int64)
            def episode_diagnostics(self): return {}

        ep = run_policy_episode(arr, Retry(), 1000.0, 1e300, 42, 0, 0, max_events=500)
        print(json.dumps([rec["termination_reason"], rec["total_rollouts"], MAX_EVENTS,
                          ep.termination_reason, ep.total_rollouts]))
    """, timeout=240)
    assert r.returncode == 0, r.stderr
    reason, rollouts, limit, ep_reason, ep_rollouts = json.loads(r.stdout)
    assert reason == "event_limit" and rollouts == limit
    assert ep_reason == "event_limit" and ep_rollouts == 500


# --------------------------------------------------------------------------- #17 one rule per setting


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--budget", "0"], "--budget (flag): expected a finite number > 0, got '0'"),
        (["--budget", "nan"], "--budget (flag): expected a finite number > 0, got 'nan'"),
        (["--seed", "-1"], "--seed (flag): expected an integer >= 0 and <= 9223372036854775807, got '-1'"),
        (["--deadline", "-5"], "--deadline (flag): expected a number > 0, got '-5'"),
        (["--trials", "0"], "--trials (flag): expected an integer >= 1"),
        (["--budget-ratio", "inf"], "--budget-ratio (flag): expected a finite number > 0, got 'inf'"),
    ],
)
def test_cli_settings_follow_the_shared_rules(flags, message):
    args = {"--budget": "4000", "--deadline": "60", "--seed": "1", "--trials": "3"}
    if "--budget-ratio" in flags:
        del args["--budget"]
    for k, v in zip(flags[::2], flags[1::2]):
        args[k] = v
    r = run("simulate", "--pool", EXAMPLE, *[x for kv in args.items() for x in kv])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert message in r.stderr, r.stderr


def test_harness_uses_the_same_rules():
    from harness.config import resolve_config
    from harness.grid import resolve_grid

    with pytest.raises(ConfigError, match=r"BUDGET_VALUES \(environment\): expected a finite number > 0, got '0'"):
        resolve_grid({"BUDGET_VALUES": "0"})
    with pytest.raises(ConfigError, match=r"SEED \(environment\): expected an integer >= 0"):
        resolve_config({"SEED": "-1", "DAG_POOL_PATH": EXAMPLE}, check_dags=False)
    with pytest.raises(ConfigError, match=r"DEADLINE_VALUES \(environment\): expected a number > 0"):
        resolve_grid({"DEADLINE_VALUES": "-1"})
    assert resolve_grid({"DEADLINE_VALUES": "inf"}).groups[0].deadlines[0].value == math.inf


def test_unknown_mcpp_model_name_is_refused_not_dropped():
    r = run("simulate", "--pool", EXAMPLE, "--budget", "8000", "--deadline", "60", "--method",
            "mc_portfolio_rollout", "--trials", "1", "--mc-portfolio-m", "2",
            "--mc-portfolio-model-ids", "4B_ins,nosuchmodel")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--mc-portfolio-model-ids (flag): unknown model(s) 'nosuchmodel'" in r.stderr, r.stderr


def test_harness_refuses_unknown_mcpp_model_name_with_the_same_rule():
    from harness.config import resolve_config

    env = {"DAG_POOL_PATH": EXAMPLE, "METHOD_SET": "mcpp", "MC_PORTFOLIO_MODEL_IDS": "4B_ins,nosuchmodel",
           "N_DAGS": "2"}
    with pytest.raises(ConfigError, match=r"MC_PORTFOLIO_MODEL_IDS \(environment\): unknown model\(s\) 'nosuchmodel'"):
        resolve_config(env)


def test_settings_rules_directly():
    from simulator.base.settings import check_budget, check_deadline, check_seed

    assert check_budget("2.5") == 2.5 and check_deadline("inf") == math.inf and check_seed("7") == 7
    for bad in ("inf", "-inf", "0", "-1", "nan", "x", True):
        with pytest.raises(ConfigError):
            check_budget(bad)
    assert np.isfinite(check_budget(1e300))


# --------------------------------------------------------------------------- #19 records hold their values


@pytest.mark.parametrize("given, expected", [(None, None), ("30B_ins,4B_ins", ["30B_ins", "4B_ins"])])
def test_mcpp_records_carry_the_resolved_models(given, expected):
    from simulator.pools.pool import load_pool
    from simulator.simulate import RunSettings, simulate_dag_budget

    pool = load_pool(EXAMPLE)
    mcpp = {"M": 2, "max_candidate_actions": 4, **({"model_ids": given} if given else {})}
    recs = simulate_dag_budget(pool, 0, 8000.0, [60.0], ["mc_portfolio_rollout"], range(2),
                               RunSettings(seed=1, mcpp=mcpp))
    want = expected or list(pool[0].model_ids)
    assert len(recs) == 2 and all(r["mc_portfolio_params"]["model_ids"] == want for r in recs)


# --------------------------------------------------------------------------- #14 predict checks before work

PREDICT = ("predict", "--pool", EXAMPLE, "--dag", "0", "--trials", "1", "--mc-portfolio-m", "2",
           "--mc-portfolio-max-candidate-actions", "4", "--no-progress")


def test_predict_out_naming_a_file_is_refused_before_work(tmp_path):
    f = tmp_path / "taken"
    f.write_text("x")
    r = run(*PREDICT, "--budgets", "8000", "--deadlines", "60", "--out", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--out '{f}': is a file, expected a directory" in r.stderr
    r = run(*PREDICT, "--budgets", "8000", "--deadlines", "60", "--out", str(f / "sub"))
    assert r.returncode == 2 and "is not a directory" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "axes, message",
    [
        (["--budgets", "2000", "--budget-ratios", "1", "--deadlines", "60"],
         "--budgets and --budget-ratios: give one of them, not both"),
        (["--budgets", "2000", "--deadlines", "60", "--deadline-ratios", "1"],
         "--deadlines and --deadline-ratios: give one of them, not both"),
        (["--budgets", "2000", "2000", "--deadlines", "60"], "--budgets (flag): repeated value(s) 2000.0"),
        (["--budget-ratios", "1", "1.0", "--deadlines", "60"], "--budget-ratios (flag): repeated value(s) 1.0"),
        (["--budgets", "2000", "--deadlines", "60", "6e1"], "--deadlines (flag): repeated value(s) 60.0"),
        (["--budgets", "inf", "--deadlines", "60"], "--budgets (flag): expected a finite number > 0, got 'inf'"),
    ],
)
def test_predict_axes_are_checked(tmp_path, axes, message):
    r = run(*PREDICT, *axes, "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written


# --------------------------------------------------------------------------- #15 strict JSON


def test_json_outputs_are_strict_json(tmp_path):
    r = run("simulate", "--pool", EXAMPLE, "--budget", "4000", "--deadline", "inf", "--trials", "20", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    assert out["deadline"] is None and out["non_finite"] == {"deadline": "inf"}
    r = run("plan", "--pool", EXAMPLE, "--budget", "8000", "--deadline", "inf", "--mc-portfolio-m", "2",
            "--mc-portfolio-max-candidate-actions", "4", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    assert out["deadline"] is None and out["non_finite"]["deadline"] == "inf"
    r = run(*PREDICT, "--budgets", "1", "--deadlines", "inf", "--out", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    doc = strict_json((tmp_path / "p" / "predict.json").read_text())
    assert doc["cells"][0]["deadline"] is None and doc["non_finite"]["cells[0].deadline"] == "inf"


def test_strict_json_object_keeps_finite_values():
    from simulator.base.io_utils import dumps_strict

    text = dumps_strict({"a": 1.5, "b": [math.nan, 2], "c": {"d": -math.inf}, "e": np.float64(math.inf)})
    assert strict_json(text) == {"a": 1.5, "b": [None, 2], "c": {"d": None}, "e": None,
                                 "non_finite": {"b[0]": "nan", "c.d": "-inf", "e": "inf"}}


# --------------------------------------------------------------------------- #13 bounded memory


def test_chunked_summary_equals_the_records(tmp_path):
    """Chunks change nothing but memory: same counts and means as one batch of records."""
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.engine.summary import summarize_trials
    from simulator.pools.pool import load_pool
    from simulator.simulate import simulate_baseline

    pool = load_pool(EXAMPLE)
    arr = dag_arrays(pool, 3, CostSetting())
    D = 40.0
    recs = simulate_baseline(arr, "sequential_2", 3000.0, range(1000), 7, 3).records(D)
    s = summarize_trials(lambda tr: simulate_baseline(arr, "sequential_2", 3000.0, tr, 7, 3), 1000, D, chunk=64)
    res = s.result()
    assert res["trials"] == 1000
    assert res["on_time_completion_probability"] == sum(r["on_time_success"] for r in recs) / 1000
    assert res["mean_cost"] == pytest.approx(np.mean([r["total_cost"] for r in recs]), rel=1e-12)
    assert res["mean_makespan"] == pytest.approx(np.mean([r["makespan"] for r in recs]), rel=1e-12)
    counts: dict = {}
    for r in recs:
        counts[r["termination_reason"]] = counts.get(r["termination_reason"], 0) + 1
    assert res["termination"] == dict(sorted(counts.items()))
    again = summarize_trials(lambda tr: simulate_baseline(arr, "sequential_2", 3000.0, tr, 7, 3), 1000, D, chunk=64)
    assert again.result() == res


def test_simulate_does_not_keep_per_trial_records(monkeypatch, capsys):
    """The CLI summary never asks for one dict per trial (what made 1e8 trials run out of memory),
    and still summarises every trial: 40000 of them, every one with its termination reason."""
    from simulator import simulate
    from simulator.cli import main as cli

    def boom(self, deadline=None):
        raise AssertionError("records() called by the CLI summary")

    monkeypatch.setattr(simulate.EpisodeBatch, "records", boom)
    assert cli.main(["simulate", "--pool", EXAMPLE, "--budget", "4000", "--deadline", "60", "--trials",
                     "40000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trials"] == 40000 and sum(out["termination"].values()) == 40000
    p, (lo, hi) = out["on_time_completion_probability"], out["ci95"]
    assert 0 <= lo <= p <= hi <= 1 and hi - lo < 0.02  # 40000 trials: a tight interval
    assert out["termination"].get("completed", 0) / 40000 >= p  # on time implies completed


# --------------------------------------------------------------------------- #17 disk full: one readable line


def test_disk_full_in_a_worker_thread_is_one_line(tmp_path, capsys, monkeypatch):
    """ENOSPC inside a `local` worker thread printed a raw thread traceback before the final status."""
    import errno

    from harness_util import config_env, small_pool

    from harness import worker
    from harness.prepare import prepare
    from harness.rundir import RunDir

    env = config_env(tmp_path, small_pool(tmp_path, n=2), METHOD_SET="sequential", N_EXEC_TRIALS="2")
    rd = prepare(env, quiet=True)
    rd = rd if isinstance(rd, RunDir) else RunDir(rd)

    def full(self, n, foreground=False):
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(self.rd.state, "s00000.claim"))

    monkeypatch.setattr(worker.ShardRunner, "run", full)
    counts = worker.run_local(rd, 2, worker.WorkerOptions(), progress=False)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception in thread" not in err
    lines = [ln for ln in err.splitlines() if "No space left on device" in ln]
    assert len(lines) == 1, err  # the same failure of both workers, said once
    assert "s00000.claim" in lines[0] and lines[0].startswith("error:")
    assert counts.get("worker_error", 0) >= 1 and counts.get("fatal_exit") == 3  # local ends with exit 3


@pytest.mark.parametrize("exc, words", [
    (OSError(28, "No space left on device", "/data/out.jsonl"), "/data/out.jsonl: No space left on device"),
    (MemoryError(), "out of memory"),
])
def test_resource_exhaustion_is_one_line(capsys, exc, words):
    from simulator.base.errors import EXIT_RESOURCE, cli_entry

    def main():
        raise exc

    assert cli_entry(main)() == EXIT_RESOURCE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_other_os_errors_still_show_the_bug():
    from simulator.base.errors import cli_entry

    def main():
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError):
        cli_entry(main)()


# --------------------------------------------------------------------------- closed pipe (`| head -1`)


def test_output_into_a_closed_pipe_is_quiet():
    """``validate ... | head -1``: the reader is gone before the summary is written."""
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run([sys.executable, "-m", "simulator", "validate", "--pool", EXAMPLE], cwd=ROOT,
                           stdout=w_fd, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w_fd)
    assert p.stderr == ""  # neither a traceback nor "Exception ignored ... BrokenPipeError"
    assert p.returncode == 141


def test_head_of_validate_in_a_shell_pipeline():
    p = subprocess.run(["bash", "-c", f'set -o pipefail; "{sys.executable}" -m simulator validate '
                                      f'--pool "{EXAMPLE}" | head -1'],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip().endswith(": OK") and "Traceback" not in p.stderr
    assert "BrokenPipeError" not in p.stderr
    assert p.returncode in (0, 141)  # 0 when the whole summary fitted in the pipe before head left


def test_cli_entry_turns_a_broken_pipe_into_exit_141(monkeypatch):
    import simulator.base.errors as errors

    silenced = []  # the real one re-points fd 1, which would break pytest's capture
    monkeypatch.setattr(errors, "_silence_stdout", lambda: silenced.append(True))

    @errors.cli_entry
    def main() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert main() == 141 and silenced == [True]


def test_disk_full_in_an_atomic_write_names_the_file(tmp_path, monkeypatch, capsys):
    """A write that runs out of disk names no file (ENOSPC from write/fsync): the writer names it (issue 44)."""
    import errno

    from simulator.base import io_utils
    from simulator.base.errors import cli_entry

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io_utils.os, "fsync", full)
    target = tmp_path / "out.json"
    assert cli_entry(lambda: io_utils.atomic_write_json(target, {"a": 1}))() == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(target) in err[0] and "No space left on device" in err[0], err
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_disk_full_while_recording_a_shard_failure_names_the_file(tmp_path, monkeypatch):
    """`local` on a nearly full disk ended with "error: No space left on device" and no file: the failure log's
    append (os.write on an open descriptor) raised ENOSPC without a name (issue 44, found on a real tmpfs)."""
    import errno

    from harness import state as state_mod
    from harness.state import ShardState

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    st = ShardState(str(tmp_path))
    monkeypatch.setattr(state_mod.os, "write", full)
    with pytest.raises(OSError) as info:
        st.add_failure("s00000", {"exit_code": 3}, 3)
    assert info.value.errno == errno.ENOSPC and info.value.filename == st.f("s00000", "failures")


def test_a_shards_relative_paths_are_named_whole(tmp_path, monkeypatch):
    """The job line names the progress file relative to the run folder (the shard runs there); the shard resolves
    it, as it does its outputs, so a full disk at that door names the file inside the run folder, not
    `state/...` (found by the full-disk test below when the progress file was the door that filled)."""
    import argparse

    from harness.shards import add_shard_arguments, spec_from_args

    (tmp_path / "state").mkdir()
    monkeypatch.chdir(tmp_path)
    p = argparse.ArgumentParser()
    add_shard_arguments(p)
    a = p.parse_args(["--pool", EXAMPLE, "--out-dir", "outputs", "--progress-file", "state/s00007.progress",
                      "--budget-group", "b00", "--budget", "ratio:1", "--deadlines", "ratio:1", "--dags", "0",
                      "--trials", "1", "--seed", "0", "--cost-mode", "token_cost_mean", "--latency-dist",
                      "lognormal", "--methods", "sequential"])
    spec = spec_from_args(a)
    assert spec.progress_file == str(tmp_path / "state" / "s00007.progress")
    assert spec.out_dir == str(tmp_path / "outputs")


def _small_tmpfs(path: str, kib: int) -> bool:
    """Mount a tmpfs of ``kib`` KiB at ``path`` (root only; False where that is not allowed)."""
    if os.geteuid() != 0:
        return False
    os.makedirs(path, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", path],
                          capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("free_kib", [300, 1000, 3000])
def test_local_on_a_really_full_disk_is_one_line_naming_a_file(tmp_path, free_kib):
    """A real full file system (a 4 MiB tmpfs filled to leave ``free_kib``), not a patched write: `local` runs out of
    disk in prepare, in a shard's records, in its log or in the failure log, depending on the room left. Whatever
    the door, it exits 3 with one `error:` line naming a file inside the run folder, and retries nothing."""
    mnt = str(tmp_path / "full")
    if not _small_tmpfs(mnt, 4096):
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    try:
        with open(os.path.join(mnt, "fill"), "wb") as fh:
            fh.write(b"\0" * ((4096 - free_kib) * 1024))
        proc = harness("local", {"RESULTS_ROOT": mnt, "RUN_NAME": "df", "N_DAGS": 8, "N_EXEC_TRIALS": 10,
                                 "BUDGET_RATIOS": "0.5 1 2", "DAG_POOL_PATH": EXAMPLE}, check=False, timeout=900)
        errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("error:")]
        assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
        assert len(errors) == 1 and "No space left on device" in errors[0], errors
        assert os.path.join(mnt, "df") in errors[0], errors  # names the file, inside the run folder
        failures = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(mnt, "df", "state")) for f in fs
                    if f.endswith(".failures")]
        for path in failures:  # a full disk is not retried: at most one attempt per shard
            with open(path, encoding="utf-8") as fh:
                assert len(fh.read().splitlines()) <= 1, path
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)

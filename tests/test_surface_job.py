"""The ``surface`` job of the harness: settings refused before work, shards, resume, files (docs/harness.md).

Also the surface against the grid's own records for the same cells (``bash
run_experiment.sh local`` with ``BUDGET_DEADLINE_VALUES_MAP``): identical
on-time successes and costs per trial.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SH = str(ROOT / "run_experiment.sh")
SMALL = {"N_DAGS": "2", "N_EXEC_TRIALS": "3", "SURFACE_BUDGETS": "800:12000:4", "SURFACE_DEADLINES": "30:300:3",
         "MC_PORTFOLIO_M": "8"}  # fmt: skip


def _env(tmp: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SURFACE_", "MC_PORTFOLIO_", "N_DAGS", "RUN_"))}
    env.update(RESULTS_ROOT=str(tmp), RUN_NAME="s", PYTHON=sys.executable, SIMULATOR_PREWARM="0", N_WORKERS="2",
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))  # fmt: skip
    env.update(extra)
    return env


def _run(tmp: Path, *args, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", SH, "surface", "--no-progress", *args], env=_env(tmp, **extra), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def _files(tmp: Path) -> dict[str, object]:
    out = {}
    for p in sorted((tmp / "s" / "surface").rglob("*.json")):
        doc = json.loads(p.read_text())
        if p.name == "manifest.json":
            doc.pop("generated_at")
        out[str(p.relative_to(tmp))] = doc
    return out


@pytest.mark.parametrize(
    "extra,needle",
    [
        ({"SURFACE_BUDGETS": ", ,"}, "empty axis"),
        ({"SURFACE_BUDGETS": "5 3"}, "strictly increasing"),
        ({"SURFACE_DEADLINES": "0:30:4"}, "finite number > 0"),
        ({"SURFACE_DEADLINES": "-5 10"}, "finite number > 0"),
        ({"SURFACE_BUDGETS": "10:5:3"}, "hi > lo"),
        ({"SURFACE_METHODS": "no_such_method"}, "SURFACE_METHODS (environment): unknown method(s) 'no_such_method'"),
        ({"SURFACE_BUDGETS": "1:100:x"}, "integer"),
    ],
)
def test_bad_settings_refused_before_work(tmp_path, extra, needle):
    r = _run(tmp_path, **{**SMALL, **extra})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    if needle:
        assert needle in lines[0]
    assert not (tmp_path / "s").exists()  # nothing was written


def test_a_surface_directory_with_other_settings_is_refused(tmp_path):
    assert _run(tmp_path, **SMALL).returncode == 0
    r = _run(tmp_path, **{**SMALL, "N_EXEC_TRIALS": "4"})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "different settings" in lines[0] and "n_trials" in lines[0]


def test_sharded_unsharded_resumed_identical(tmp_path):
    """One shard per DAG with two workers, one shard for all with one worker, and a run killed and resumed."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert _run(a, **SMALL).returncode == 0
    from harness.surface.files import merge_surface
    from harness.surface.job import prepare_surface, resolve_surface
    from tests.harness_util import run_surface_shards

    cfg, run_cfg = resolve_surface(_env(b, **SMALL))
    job = prepare_surface(str(b / "s"), cfg, run_cfg, dags_per_shard=2)
    run_surface_shards(job)
    merge_surface(str(b / "s"), log=lambda m: None)
    assert _files(a) == {k.replace("b/", "a/", 1): v for k, v in _files(b).items()}
    # killed while running, then resumed: only what was missing is computed
    env = _env(c, **SMALL)
    p = subprocess.Popen(["bash", SH, "surface", "--no-progress"], env=env, cwd=ROOT, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    outputs = c / "s" / "surface_job" / "outputs"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120 and not (outputs.exists() and any(outputs.iterdir())):
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert _run(c, **SMALL).returncode == 0
    assert _files(a) == {k.replace("c/", "a/", 1): v for k, v in _files(c).items()}


@pytest.mark.slow
def test_example_pool_10x10_20_trials_files_and_page(tmp_path):
    env = {"N_EXEC_TRIALS": "20", "SURFACE_BUDGETS": "500:20000:10", "SURFACE_DEADLINES": "20:600:10",
           "SURFACE_METHODS": "mc_portfolio_rollout,sequential_4"}  # fmt: skip
    r = _run(tmp_path, **env)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "s" / "surface"
    man = json.loads((out / "manifest.json").read_text())
    assert man["query_count"] == 24 and man["budget_count"] == 10 and man["deadline_count"] == 10
    assert man["complete_cells"] == 2400 and man["missing_cells"] == 0 and man["partial_cells"] == 0
    assert [m["id"] for m in man["methods"]] == ["mc_portfolio_rollout", "sequential_4"]
    assert man["approximation"] is None and man["budget_unit"] == "tokens"
    axes = json.loads((out / "axes.json").read_text())
    assert len(axes["budgets"]) == 10 and np.all(np.diff(axes["budgets"]) > 0)
    queries = json.loads((out / "queries.json").read_text())
    assert len(queries) == 24
    for q in queries:
        m = json.loads((out / q["matrix_path"]).read_text())
        pct = np.array(m["success_pct"])
        assert pct.shape == (10, 10) and pct.min() >= 0 and pct.max() <= 100
        for meth in m["methods"].values():
            s = np.array(meth["successes"])
            assert np.array_equal(np.floor(100 * s / 20 + 0.5), meth["success_pct"])
            assert np.all(np.array(meth["wilson_low_pct"]) <= np.array(meth["success_pct"]) + 0.05)
    from harness.surface import page  # the page helper's module: its files are written next to the data

    for name in page.ASSETS:
        assert (out / name).is_file()


@pytest.mark.slow
def test_surface_equals_grid_records(tmp_path):
    """The grid (``local`` with the cells in BUDGET_DEADLINE_VALUES_MAP) and the surface: same trials."""
    from simulator.pools.pool import load_pool
    from simulator.simulate import RunSettings
    from simulator.surface.compute import method_surface

    cells = {(1500.0, 40.0), (1500.0, 120.0), (6000.0, 40.0)}
    env = _env(tmp_path, N_DAGS="2", N_EXEC_TRIALS="4", METHOD_SET="mcpp,sequential_4", MC_PORTFOLIO_M="8",
               BUDGET_DEADLINE_VALUES_MAP="1500:40,120;6000:40")  # fmt: skip
    r = subprocess.run(["bash", SH, "local", "--no-progress"], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for f in (tmp_path / "s" / "merged" / "cells").glob("*/records.jsonl")
            for line in f.read_text().splitlines()]  # fmt: skip
    pool = load_pool(str(ROOT / "examples" / "example_pool.jsonl"))
    settings = RunSettings(mcpp={"M": "8", "max_candidate_actions": 2048})
    budgets, deadlines = [1500.0, 6000.0], [40.0, 120.0]
    for dag in (0, 1):
        for method in ("mc_portfolio_rollout", "sequential_4"):
            surf = method_surface(pool, dag, method, budgets, deadlines, list(range(4)), settings)
            for rec in (x for x in recs if x["dag_idx"] == dag and x["method"] == method):
                i, j = budgets.index(rec["budget"]), deadlines.index(rec["deadline"])
                assert (rec["budget"], rec["deadline"]) in cells
                t = rec["exec_trial"]
                assert bool(surf.success[t, i, j]) == rec["on_time_success"]
                assert float(surf.total_cost[t, i, j]) == rec["total_cost"]


def test_grid_and_surface_shards_are_told_apart_by_type():
    """The harness asks a shard for its parts through the methods both shard types have (``verify``, ``part``), or
    by its type; never by probing an attribute (``hasattr``), which a renamed field silently flips."""
    import ast

    from harness.shards import ShardSpec
    from harness.surface.job import SurfaceShard

    for name in ("verify", "part"):
        assert callable(getattr(ShardSpec, name)) and callable(getattr(SurfaceShard, name))
    root = Path(__file__).resolve().parents[1] / "harness"
    probes = [f"{p.relative_to(root.parent)}:{n.lineno}" for p in sorted(root.rglob("*.py"))
              for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
              if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "hasattr"
              and n.args and getattr(n.args[0], "id", None) in ("spec", "shard")]  # fmt: skip
    assert probes == []

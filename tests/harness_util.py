"""Helpers shared by the harness tests: small pools, a clean environment, running the scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.join(ROOT, "run_experiment.sh")



def node(nid, parents, children, p=0.6, lat=2.0, cost=100.0, models=None):
    """A node; ``models`` = {model: (p, lat, cost)} makes it multi-model."""
    n = {"node_id": nid, "parents": list(parents), "children": list(children)}
    if models:
        n["model_templates"] = {
            m: {"success_prob": mp, "lat_mean": ml, "lat_std": ml / 2, "cost_mean": mc, "token_cost_mean": mc}
            for m, (mp, ml, mc) in models.items()
        }
    else:
        n["template"] = {"success_prob": p, "lat_mean": lat, "lat_std": lat / 2, "cost_mean": cost,
                         "token_cost_mean": cost}  # fmt: skip
    return n


def diamond(i, p=0.6, models=None):
    """0 -> {1, 2} -> 3, statistics varying with i."""
    q = min(0.95, p + 0.05 * (i % 4))
    nodes = [
        node(0, [], [1, 2], q, 2.0 + i, 80 + 10 * i, models),
        node(1, [0], [3], q, 3.0, 120, models),
        node(2, [0], [3], q, 1.5, 60, models),
        node(3, [1, 2], [], q, 2.5, 90 + i, models),
    ]
    return {"problem_id": f"diamond{i}", "dag_kind": "test_diamond", "nodes": nodes}


def write_pool(path, dags) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        for d in dags:
            fh.write(json.dumps(d) + "\n")
    return str(path)


def small_pool(tmp_path, n=4, name="pool.jsonl", models=None) -> str:
    return write_pool(tmp_path / name, [diamond(i, models=models) for i in range(n)])


def clean_env(**overrides) -> dict:
    from harness.variables import BY_NAME, CHECKED_PREFIXES

    env = {k: v for k, v in os.environ.items() if k not in BY_NAME and not k.startswith(CHECKED_PREFIXES)}
    env["PYTHONPATH"] = ROOT
    # the interpreter running the tests runs the harness too (no activated venv needed)
    env["PYTHON"] = sys.executable
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def config_env(tmp_path, pool, **overrides) -> dict:
    """Harness variables of a small fast run (no process environment)."""
    env = {
        "DAG_POOL_PATH": pool,
        "RESULTS_ROOT": str(tmp_path / "runs"),
        "RUN_NAME": "t",
        "N_EXEC_TRIALS": "5",
        "BUDGET_RATIOS": "0.5 2",
        "DEADLINE_RATIOS": "1 3",
        "METHOD_SET": "baselines",
        "N_WORKERS": "2",
    }
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def harness(action, env, *args, check=True, timeout=600) -> subprocess.CompletedProcess:
    """``bash run_experiment.sh ACTION args`` with ``env`` on top of a clean environment."""
    full = clean_env(**env)
    proc = subprocess.run(["bash", HARNESS, action, *args], env=full, capture_output=True, text=True,
                          timeout=timeout, cwd="/")  # fmt: skip
    if check and proc.returncode != 0:
        raise AssertionError(f"{action} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def merged_bytes(run_dir) -> dict[str, bytes]:
    """{cell: records.jsonl bytes} of a merged run."""
    cells = os.path.join(run_dir, "merged", "cells")
    out = {}
    for c in sorted(os.listdir(cells)):
        with open(os.path.join(cells, c, "records.jsonl"), "rb") as fh:
            out[c] = fh.read()
    return out


def merged_records_no_timing(run_dir) -> dict[str, list[dict]]:
    from harness.merge import strip_timing

    return {c: [strip_timing(json.loads(line)) for line in b.splitlines()] for c, b in merged_bytes(run_dir).items()}


def run_surface_shards(job: str) -> None:
    """Run every shard of the surface job folder ``job`` in this process, from inside the folder (as a worker does)."""
    from harness.surface.job import load_job, run_surface_shard

    cwd = os.getcwd()
    try:
        os.chdir(job)
        for s in load_job(job)[1]:
            run_surface_shard(s.shard, log=lambda m: None)
    finally:
        os.chdir(cwd)

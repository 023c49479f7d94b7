"""The example of docs/adding_a_policy.md, exactly: one file plus one registry line, runnable everywhere."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.engine.registry import PER_ATTEMPT, PYTHON_POLICY, SCORED
from simulator.methods import METHOD_MODULES, METHOD_ORDER, method_spec, resolve_methods
from simulator.pools.pool import pool_from_objects
from simulator.simulate import SimSpec, simulate_run
from tests.harness_util import ROOT, clean_env, config_env, harness, small_pool

DOC = os.path.join(ROOT, "docs", "adding_a_policy.md")
FILE = os.path.join(ROOT, "simulator", "policies", "cheapest_first.py")


def test_the_page_holds_the_file_verbatim_and_the_registry_line():
    with open(DOC, encoding="utf-8") as fh:
        page = fh.read()
    with open(FILE, encoding="utf-8") as fh:
        code = fh.read()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks[0] == code  # the walk-through is the file
    assert "simulator.policies.cheapest_first" in METHOD_MODULES
    assert '"simulator.policies.cheapest_first",' in blocks[1]
    spec = method_spec("cheapest_first")
    assert (spec.kind, spec.launch, spec.deadline, spec.baseline) == (PYTHON_POLICY, PER_ATTEMPT, SCORED, True)
    assert "cheapest_first" not in METHOD_ORDER  # the paper's 13 stay the set `all`
    assert resolve_methods("examples") == ["cheapest_first"]


def _one_node_two_models(p_cheap: float) -> dict:
    tmpl = {
        "cheap": {"success_prob": p_cheap, "lat_mean": 1.0, "lat_std": 0.5, "cost_mean": 100.0,
                  "token_cost_mean": 100.0},
        "dear": {"success_prob": 0.9, "lat_mean": 1.0, "lat_std": 0.5, "cost_mean": 1000.0,
                 "token_cost_mean": 1000.0},
    }  # fmt: skip
    return {"problem_id": "one", "dag_kind": "test", "nodes": [
        {"node_id": 0, "parents": [], "children": [], "model_templates": tmpl}]}  # fmt: skip


def test_hand_computed_case_cheap_model_retried_until_the_budget_ends():
    """p = 0.3 at cost 100, budget 350: at most floor(350 / 100) = 3 attempts, all of the cheap model.

    P(complete) = 1 - 0.7^3 = 0.657; 4000 trials give a standard error of 0.0075, the tolerance is 4 of them.
    """
    pool = pool_from_objects([_one_node_two_models(0.3)])
    arr = dag_arrays(pool, 0, CostSetting())
    batch = simulate_run(arr, "cheapest_first",
                         SimSpec(budget=350.0, deadline=math.inf, trials=range(4000), seed=7, dag=0))
    assert set(np.unique(batch.total_cost)) <= {100.0, 200.0, 300.0}  # only cheap attempts, at most 3
    assert batch.node_stats[:, 0, 1].max() == 3
    expected = 1 - 0.7**3
    assert abs(batch.completed.mean() - expected) < 4 * math.sqrt(expected * (1 - expected) / 4000)
    # a failed episode spent the 3 attempts and ended on the budget
    assert (batch.total_cost[~batch.completed] == 300.0).all()


def test_cli_runs_it(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "simulator", "simulate", "--pool", os.path.join(ROOT, "examples", "example_pool.jsonl"),
         "--dag", "0", "--budget-ratio", "1", "--deadline-ratio", "1", "--method", "cheapest_first", "--trials", "50",
         "--json"],
        capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["method"] == "cheapest_first" and out["trials"] == 50
    assert 0.0 <= out["on_time_completion_probability"] <= 1.0 and math.isfinite(out["mean_cost"])


@pytest.mark.slow
def test_harness_runs_it_with_a_variant_beside_it(tmp_path):
    pool = small_pool(tmp_path, n=2)
    env = config_env(tmp_path, pool, METHOD_SET="cheapest_first,sequential,mc_portfolio_rollout[M=8]",
                     N_EXEC_TRIALS="4", BUDGET_RATIOS="1", DEADLINE_RATIOS="1")  # fmt: skip
    harness("local", env)
    run = os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"])
    table = pd.read_csv(os.path.join(run, "analysis", "main_table.csv"))
    assert list(table["method"]) == ["sequential", "mc_portfolio_rollout[M=8]", "cheapest_first"]
    paired = pd.read_csv(os.path.join(run, "analysis", "paired.csv"))
    assert set(paired["method"]) == {"mc_portfolio_rollout[M=8]"}
    assert set(paired["baseline"]) == {"sequential", "cheapest_first"}
    with open(os.path.join(run, "analysis", "report.md"), encoding="utf-8") as fh:
        text = fh.read()
    assert "MCPP[M=8] minus each baseline" in text and "`mc_portfolio_rollout[M=8]` in the records" in text


def _harness_lines(text: str) -> list[dict[str, str]]:
    """The variables of each ``VAR=value ... bash run_experiment.sh local`` command in ``text``'s bash blocks."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if "bash run_experiment.sh local" in line:
                words = shlex.split(line.split("bash run_experiment.sh", 1)[0].rsplit("&&", 1)[-1])
                out.append(dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_][A-Z0-9_]*=", w)))
    return out


def test_the_pages_grid_commands_run_right_after_readme_command_1(tmp_path):
    """Command 1 made the run `example`; each grid command of the page names a run of its own (RUN_NAME), so
    the harness takes it instead of refusing a run directory that holds other settings."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        first = _harness_lines(fh.read())[0]  # command 1: the README's first harness command
    assert first.get("N_DAGS") and "RUN_NAME" not in first
    with open(DOC, encoding="utf-8") as fh:
        page = _harness_lines(fh.read())
    assert len(page) == 2 and all(v.get("RUN_NAME") for v in page)
    root = {"RESULTS_ROOT": str(tmp_path / "runs")}
    harness("prepare", {**root, **first})
    for variables in page:
        harness("prepare", {**root, **variables})
        without = {k: v for k, v in variables.items() if k != "RUN_NAME"}  # as the page read before
        refused = harness("prepare", {**root, **without}, check=False)
        assert refused.returncode != 0, variables

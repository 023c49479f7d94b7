"""Every printed output a person reads says MCPP (not ``mc_portfolio_rollout``) and a quantity's unit.

The README's one-off commands (with few trials), the quote, the harness's
settings echo, the executor's run summary; README command 1's table and
report are checked by ``tests/test_readme_commands.py`` (slow: it runs the
grid). The checker itself is tested on the outputs as they were.
"""

from __future__ import annotations

import os
import subprocess
import sys

import human_text
import pytest
from harness_util import ROOT, clean_env, config_env, harness

POOL = os.path.join(ROOT, "examples", "example_pool.jsonl")


def _run(*argv: str) -> str:
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_the_checker_finds_what_the_outputs_used_to_print():
    old = {
        "simulate": "sequential_4 on DAG 0 (syn_layered_0000), budget 9525.25, deadline 51.6271, 2000 trials\n"
                    "  mean cost: 9377.18   mean makespan: 41.06 s",
        "executor run": "method                mc_portfolio_rollout\nmakespan_s            24.090376600001946",
        "plan": "DAG 0 ('syn_layered_0000', 5 nodes)   budget 9525.25   deadline 51.6271 s",
        "table": "method\nmc_portfolio_rollout           68.8        91.2        98.8",
    }
    for what, text in old.items():
        with pytest.raises(AssertionError):
            human_text.check(text, what)
    # a record's name in a code span, a link target or a JSON line is a file's, not prose
    human_text.check('(`mc_portfolio_rollout` in the records)\n![a](plots/mc_portfolio_rollout.png)\n'
                     '{"method": "mc_portfolio_rollout", "budget": 6000.0}', "names of files and records")
    human_text.check("budget 6000 tokens, deadline 60 model seconds, planning 12 ms, at 0.8 x that budget", "units")


def test_the_one_off_commands_name_mcpp_and_their_units(tmp_path):
    common = ["--pool", POOL, "--dag", "0"]
    outs = {
        "simulate (a baseline)": _run("-m", "simulator", "simulate", *common, "--budget-ratio", "1",
                                      "--deadline-ratio", "1", "--method", "sequential_4", "--trials", "200"),
        "simulate (MCPP)": _run("-m", "simulator", "simulate", *common, "--budget", "6000", "--deadline", "60",
                                "--method", "MCPP", "--trials", "2"),
        "plan": _run("-m", "simulator", "plan", *common, "--budget-ratio", "1", "--deadline-ratio", "1",
                     "--mc-portfolio-m", "8"),
        "predict": _run("-m", "simulator", "predict", *common, "--budgets", "2000", "4000", "--deadlines", "60",
                        "--trials", "2", "--mc-portfolio-m", "8", "--no-progress", "--out", str(tmp_path / "p")),
        "quote": _run("-m", "executor", "quote", *common, "--deadline-ratio", "2", "--target", "0.8",
                      "--method", "sequential", "--trials", "50", "--budget", "9000"),
    }
    for what, out in outs.items():
        human_text.check(out, what)
    assert outs["simulate (MCPP)"].startswith("MCPP on DAG 0")
    assert "percentage points" in outs["plan"] and "Hoeffding" in outs["plan"]  # the bound in words
    assert "budget (tokens)" in outs["predict"] and "deadline (model s)" in outs["predict"]  # a table


def test_the_harness_settings_echo_names_mcpp_and_units(tmp_path):
    env = config_env(tmp_path, POOL, METHOD_SET="sequential,MCPP", N_DAGS="2")
    out = harness("prepare", env).stdout
    human_text.check(out, "run_experiment.sh prepare")
    assert "-> sequential, MCPP" in out and "model seconds" in out and "tokens" in out


def test_the_executor_summary_names_mcpp_and_its_units():
    from executor.trace import format_summary

    text = format_summary({"method": "mc_portfolio_rollout", "termination": "completed", "on_time": True,
                           "makespan_s": 24.090376600001946, "spent": 3051.0, "budget": 6000.0, "deadline_s": 60.0,
                           "cost_mode": "token_cost_mean", "plans": 4, "planner_ms": 123.4})  # fmt: skip
    human_text.check(text, "executor run")
    assert "24.09 model seconds" in text and "123 ms of wall-clock planning" in text

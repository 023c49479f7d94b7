"""The README's commands, as written, make what the README says they make (slow: about 1-3 minutes).

The commands are read out of ``README.md`` itself, so the test follows the
README: command 1 (the example experiment), the surface command, and the
one-off questions. The virtual-environment and install steps in front of
command 1 are checked to be only that and left out (the tests already run in
an environment with the requirements); ``python`` is this interpreter, and
everything is written under a temporary ``RESULTS_ROOT`` (command 1 and the
surface) or a temporary working directory (the one-off questions) instead of
the clone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import human_text
import pytest
from harness_util import ROOT, clean_env

from simulator.methods import METHOD_ORDER, is_baseline, method_label, resolve_methods

pytestmark = pytest.mark.slow

README = os.path.join(ROOT, "README.md")
SETUP = ("python3 -m venv .venv", ". .venv/bin/activate", "pip install -r requirements.txt")


def _blocks() -> list[str]:
    with open(README, encoding="utf-8") as fh:
        return re.findall(r"```bash\n(.*?)```", fh.read(), flags=re.S)


def _block(words: str) -> str:
    found = [b for b in _blocks() if words in b]
    assert found, f"README.md: no bash block with {words!r}"
    return found[0]


def _commands(block: str) -> list[str]:
    """The commands of a block: continuation lines joined, comments dropped."""
    text = block.replace("\\\n", " ")
    return [line.split(" #", 1)[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _harness_command(line: str) -> tuple[dict[str, str], list[str]]:
    """``VAR=value ... bash run_experiment.sh ACTION``: (its variables, the harness argv)."""
    words = shlex.split(line)
    env = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[:2] == ["bash", "run_experiment.sh"], line
    return env, ["bash", os.path.join(ROOT, "run_experiment.sh"), *words[2:]]


def _readme_path(words: str) -> str:
    """The path the README says a command writes to, e.g. ``results/runs/example/analysis/``."""
    with open(README, encoding="utf-8") as fh:
        m = re.search(words + r"\s+`(results/[^`]+)`", fh.read())
    assert m, f"README.md: no path after {words!r}"
    return m.group(1)


def _run(argv, env, cwd=ROOT, timeout=600) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_readme_commands_make_what_the_readme_shows(tmp_path):
    results_root = tmp_path / "results" / "runs"  # the README's results/runs/, under tmp_path
    # ---- command 1: the example experiment
    (cmd1,) = [c for c in _commands(_blocks()[0])]
    steps = [s.strip() for s in cmd1.split("&&")]
    assert tuple(steps[:-1]) == SETUP, "command 1 is the set-up steps, then the harness"
    vars1, argv = _harness_command(steps[-1])
    assert argv[-1] == "local"
    env = clean_env(RESULTS_ROOT=str(results_root), **vars1)
    out = _run(argv, env).stdout
    # the settings block, with the README's values
    settings = out.split("Resolved settings:", 1)[1]
    for key, value in vars1.items():
        assert re.search(rf"^\s+{key}\s+= {re.escape(value)}$", settings, flags=re.M), f"{key} = {value}"
    # the table: every method of the README's "all 13 methods", one column per budget ratio, percentages
    table = out.split("On-time success (%) per method (rows) and cell (columns):", 1)[1].strip().splitlines()
    ratios = vars1["BUDGET_RATIOS"].split()
    assert table[0].split()[1:] == [f"B_r{r}__D_r1" for r in ratios]
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in table[2:2 + len(METHOD_ORDER)]}
    assert list(rows) == [method_label(m) for m in METHOD_ORDER] and len(METHOD_ORDER) == 13  # MCPP by its name
    assert all(len(v) == len(ratios) and all(0 <= x <= 100 for x in v) for v in rows.values())
    # the report and plots where the README says they land
    analysis = tmp_path / _readme_path("the report and plots land in")
    report = (analysis / "report.md").read_text(encoding="utf-8")
    assert f"report: {analysis / 'report.md'}" in out
    assert "- pool: `examples/example_pool.jsonl`" in report and ROOT not in report and str(tmp_path) not in report
    assert f"{vars1['N_DAGS']} DAGs, {vars1['N_EXEC_TRIALS']} trials" in report
    assert "## MCPP minus each baseline (paired)" in report
    human_text.check(out, "README command 1 (its printed settings and table)")
    human_text.check(report, "README command 1's report.md")
    for plot in ("success_vs_budget", "mc_portfolio_rollout_minus_best_baseline"):
        assert (analysis / "plots" / f"{plot}.png").stat().st_size > 0
        assert not (analysis / "plots" / f"{plot}.pdf").exists()  # vector formats only when PLOT_FORMATS asks
    # status after local: nothing left to do
    status = _run(["bash", os.path.join(ROOT, "run_experiment.sh"), "status"], env).stdout
    assert "merged and analysed" in status and "`run_experiment.sh merge`" not in status

    # ---- the surface command: the page the README shows (at least two methods, a comparison)
    (line,) = [c for c in _commands(_block("run_experiment.sh surface\n"))]
    vars2, argv = _harness_command(line)
    assert argv[-1] == "surface" and "SURFACE_METHODS" in vars2 and "N_DAGS" in vars2
    human_text.check(_run(argv, clean_env(RESULTS_ROOT=str(results_root), **vars2)).stdout, "the surface command")
    surface = tmp_path / _readme_path("It lands in")
    manifest = json.loads((surface / "manifest.json").read_text(encoding="utf-8"))
    methods = resolve_methods(vars2["SURFACE_METHODS"])
    assert [m["id"] for m in manifest["methods"]] == methods and len(methods) >= 2
    assert any(is_baseline(m) for m in methods) and not all(is_baseline(m) for m in methods)  # the difference view
    assert "MCPP" in {m["display_name"] for m in manifest["methods"]}
    queries = json.loads((surface / "queries.json").read_text(encoding="utf-8"))
    assert manifest["query_count"] == len(queries) == int(vars2["N_DAGS"])
    n_budgets, n_deadlines = (int(vars2[k].rsplit(":", 1)[1]) for k in ("SURFACE_BUDGETS", "SURFACE_DEADLINES"))
    for q in queries:
        matrix = json.loads((surface / q["matrix_path"]).read_text(encoding="utf-8"))
        assert sorted(matrix["methods"]) == sorted(methods)
        for m in methods:
            pct = matrix["methods"][m]["success_pct"]
            assert len(pct) == n_budgets and all(len(row) == n_deadlines for row in pct)
            assert all(x is not None and 0 <= x <= 100 for row in pct for x in row)
    for page in ("index.html", "app.js", "style.css"):
        assert (surface / page).exists()


def test_readme_one_off_questions_answer(tmp_path):
    """The "One-off questions" block, run from a directory holding the example pool (not the clone)."""
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    env = clean_env()
    lines = _commands(_block("python -m simulator validate"))
    assert len(lines) == 5
    outs = []
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "python" and words[1:3] == ["-m", "simulator"], line
        outs.append(_run([sys.executable, *words[1:]], env, cwd=tmp_path).stdout)
    validate, simulate, simulate_json, plan, predict = outs
    assert "examples/example_pool.jsonl: OK" in validate and "DAGs: 24" in validate
    assert "on-time completion probability" in simulate
    result = json.loads(simulate_json)
    assert result["method"] == "mc_portfolio_rollout" and result["trials"] == 20  # --method MCPP, recorded by name
    assert plan.strip()
    for what, out in zip(lines, outs):  # what a person reads: MCPP by name, quantities with units (JSON excepted)
        human_text.check(out, what)
    assert "budget (tokens)" in predict  # predict prints its table
    out_dir = shlex.split(lines[-1])[shlex.split(lines[-1]).index("--out") + 1]
    assert any(name.startswith("predict.") for name in os.listdir(tmp_path / out_dir))

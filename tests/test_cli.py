"""``python -m simulator`` validate / simulate: output and readable errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.dags import chain_dag
from tests.harness_util import ROOT

EXAMPLE = os.path.join(ROOT, "examples", "example_pool.jsonl")


def run(*args):
    return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=ROOT, capture_output=True, text=True)


def _longest_path_levels(nodes):
    """Levels of a DAG (deepest node + 1), by repeated relaxation: the oracle of the summary's depth."""
    depth = {n["node_id"]: 0 for n in nodes}
    for _ in nodes:
        for n in nodes:
            for u in n["parents"]:
                depth[n["node_id"]] = max(depth[n["node_id"]], depth[u] + 1)
    return max(depth.values()) + 1


def test_validate_summary():
    """The summary's numbers are the pool's, counted here from the raw lines."""
    r = run("validate", "--pool", EXAMPLE)
    assert r.returncode == 0, r.stderr
    with open(EXAMPLE, encoding="utf-8") as fh:
        dags = [json.loads(line) for line in fh if line.strip()]
    sizes = sorted(len(d["nodes"]) for d in dags)
    levels = [_longest_path_levels(d["nodes"]) for d in dags]
    kinds = sorted({d["dag_kind"] for d in dags})
    models = dags[0]["model_ids"]
    lines = r.stdout.splitlines()
    assert lines[0] == f"{EXAMPLE}: OK"
    assert lines[1].split() == ["DAGs:", str(len(dags)), "nodes:", str(sum(sizes)), "(min", f"{sizes[0]},",
                                "median", f"{sizes[len(sizes) // 2]},", "max", f"{sizes[-1]})",
                                "depth:", "min", f"{min(levels)},", "max", str(max(levels))]
    assert lines[2].strip() == "kinds: " + ", ".join(
        f"{k} x{sum(d['dag_kind'] == k for d in dags)}" for k in kinds)
    assert lines[3].strip() == "models: " + ", ".join(models)
    n_nodes = sum(sizes)
    for m, line in zip(models, lines[4:], strict=True):
        avail = sum(m in n["model_templates"] for d in dags for n in d["nodes"])
        rows = sum(len(n["empirical_samples_by_model"][m]) for d in dags for n in d["nodes"])
        assert line.strip() == (f"{m}: available on {avail}/{n_nodes} nodes ({100 * avail / n_nodes:.1f}%), "
                                f"{rows} empirical rows")


def test_simulate_json_and_text(tmp_path):
    r = run("simulate", "--pool", EXAMPLE, "--dag", "2", "--budget-ratio", "1", "--deadline-ratio", "2",
            "--method", "sequential_2", "--trials", "300", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    p = out["on_time_completion_probability"]
    lo, hi = out["ci95"]
    assert 0 <= lo <= p <= hi <= 1 and out["trials"] == 300
    assert sum(out["termination"].values()) == 300
    r2 = run("simulate", "--pool", EXAMPLE, "--dag", "2", "--budget-ratio", "1", "--deadline-ratio", "2",
             "--method", "sequential_2", "--trials", "300", "--json")
    assert r2.stdout == r.stdout  # same command, same numbers
    r3 = run("simulate", "--pool", EXAMPLE, "--dag", "2", "--budget", "4000", "--deadline", "50",
             "--method", "uniform", "--trials", "50")
    assert r3.returncode == 0 and "on-time completion probability" in r3.stdout


def test_errors_are_one_readable_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(chain_dag(2)) + "\n{oops\n")
    r = run("validate", "--pool", str(bad))
    assert r.returncode == 2 and "line 2" in r.stderr and "not valid JSON" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("simulate", "--pool", EXAMPLE, "--dag", "0", "--budget", "1", "--deadline", "1", "--method", "nope")
    assert r.returncode == 2 and "unknown method(s) 'nope'" in r.stderr
    r = run("simulate", "--pool", EXAMPLE, "--dag", "0", "--budget", "1", "--deadline", "1",
            "--cost-mode", "dollars")
    assert r.returncode == 2 and "unknown cost mode" in r.stderr
    zero = tmp_path / "zero.jsonl"
    zero.write_text(json.dumps(chain_dag(2, p=0.0)) + "\n")
    r = run("simulate", "--pool", str(zero), "--budget-ratio", "1", "--deadline", "5")
    assert r.returncode == 2 and "success probability 0" in r.stderr and "node 0" in r.stderr


def test_simulate_mcpp_with_models_by_name():
    base = ("simulate", "--pool", EXAMPLE, "--dag", "0", "--budget", "8000", "--deadline", "60",
            "--method", "mc_portfolio_rollout", "--trials", "2", "--mc-portfolio-m", "4",
            "--mc-portfolio-max-candidate-actions", "8", "--json")
    r = run(*base, "--mc-portfolio-model-ids", "4B_ins,30B_ins")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trials"] == 2
    r = run(*base, "--mc-portfolio-model-ids", "nope")
    assert r.returncode == 2 and "--mc-portfolio-model-ids (flag): unknown model(s) 'nope'" in r.stderr


def test_simulate_takes_mcpp_by_its_user_facing_name_and_records_the_registered_one():
    base = ("simulate", "--pool", EXAMPLE, "--dag", "0", "--budget", "6000", "--deadline", "60", "--trials", "3",
            "--json")
    outs = {}
    for name in ("MCPP", "mcpp", "mc_portfolio_rollout"):
        r = run(*base, "--method", name)
        assert r.returncode == 0, r.stderr
        outs[name] = json.loads(r.stdout)
    assert {o["method"] for o in outs.values()} == {"mc_portfolio_rollout"}
    assert outs["MCPP"] == outs["mcpp"] == outs["mc_portfolio_rollout"]  # the same method, trial for trial


def test_unknown_method_gets_at_most_three_suggestions_none_the_refused_name():
    base = ("simulate", "--pool", EXAMPLE, "--dag", "0", "--budget", "1", "--deadline", "1", "--method")
    for name in ("mcpx", "seq4", "sequentail", "baselines"):
        r = run(*base, name)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        hint = r.stderr.split("(did you mean ", 1)[1].split("?)", 1)[0] if "did you mean" in r.stderr else ""
        offered = [s.strip(" '") for s in hint.replace(" or ", ",").split(",") if s.strip()]
        assert len(offered) <= 3 and name not in offered, r.stderr
        assert "baselines" not in offered and "seq" not in offered  # --method takes one method, not a set


def test_help_is_plain_text_and_every_option_has_a_description():
    r = run("--help")
    assert r.returncode == 0
    for markup in ("``", ":func:", ":mod:", ".py"):
        assert markup not in r.stdout, markup  # no reST, no source file
    assert "MCPP" in r.stdout and "simulate" in r.stdout
    for cmd in ("validate", "simulate", "plan", "predict", "methods"):
        out = run(cmd, "--help").stdout
        options = out.split("options:", 1)[1]
        lines = options.splitlines()
        for i, line in enumerate(lines):
            s = line.strip()
            if not s.startswith("-") or s.startswith("-h"):
                continue
            # argparse puts the text after the option on its line, or on the next line, indented further
            parts = s.split("  ", 1)
            has_text = len(parts) == 2 and parts[1].strip()
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            has_text = has_text or (nxt.startswith(" " * 10) and not nxt.strip().startswith("-"))
            assert has_text, f"{cmd} --help: {s} has no description"

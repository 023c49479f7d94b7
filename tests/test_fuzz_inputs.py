"""Fuzz the entry points with corrupted inputs (issue 9): refuse in one line, or finish with finite numbers.

Valid inputs (lines of ``examples/*.jsonl``, index files, grid axes, command-line settings) are
corrupted at random with hypothesis: fields deleted, values replaced by other types, NaN, inf,
huge, tiny, negative or fractional numbers, cycles, duplicate ids and lines, truncated or
undecodable JSON. Each entry point must then either

* refuse: non-zero exit, no ``Traceback`` on stderr, the message on one line (``error: ...``;
  argparse's own refusals print the usage first, then one ``error:`` line); or
* run to completion: exit 0 and, where there is a ``--json`` output or a ``run.json``, strict
  JSON (no NaN/Infinity) whose numbers are all finite;

within a time limit (a hang fails the example). Most cases call the command's ``main`` in this
process with captured output (fast); a few start the real commands in a subprocess.

Knobs: ``FUZZ_EXAMPLES=N`` multiplies nothing and sets the number of examples of every fuzz
test (default: a small CI budget, derandomized so CI is reproducible); with ``FUZZ_EXAMPLES``
set the search is random (``FUZZ_SEED`` fixes it). ``docs/guarantees.md`` records the long run.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, seed, settings
from hypothesis import strategies as st

from tests.harness_util import ROOT

FUZZ_EXAMPLES = os.environ.get("FUZZ_EXAMPLES")
LONG_RUN = FUZZ_EXAMPLES is not None
TIME_LIMIT = float(os.environ.get("FUZZ_TIME_LIMIT", "60"))  # seconds per example


def _settings(ci_examples: int):
    n = int(FUZZ_EXAMPLES) if LONG_RUN else ci_examples
    return settings(max_examples=n, deadline=None, derandomize=not LONG_RUN, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def _seeded(fn):
    return seed(int(os.environ["FUZZ_SEED"]))(fn) if "FUZZ_SEED" in os.environ else fn


def fuzz(ci_examples: int):
    """A fuzz test drawing from ``data``: ``given(data=st.data())`` under ``_settings(ci_examples)``, ``_seeded``."""

    def wrap(fn):
        return _seeded(_settings(ci_examples)(given(data=st.data())(fn)))

    return wrap


with open(os.path.join(ROOT, "examples", "example_single_model.jsonl"), encoding="utf-8") as _fh:
    SINGLE = [json.loads(line) for line in _fh if line.strip()]
with open(os.path.join(ROOT, "examples", "example_pool.jsonl"), encoding="utf-8") as _fh:
    MULTI = json.loads(_fh.readline())  # 5 nodes, 4 models, empirical rows
BASE_DAGS = [SINGLE[0], MULTI, SINGLE[1]]

# --------------------------------------------------------------------------- corruptions

BAD_VALUES = [None, True, False, 0, 1, -1, -0.0, 2**63, -(2**63) - 1, 10**30, 0.5, 1e-320, 1e15, 1e16,
              1e300, -1e300, math.nan, math.inf, -math.inf, "", "x", "1", "nan", "inf", [], [1], {}, {"a": 1}]


def _paths(obj, prefix=()) -> Iterator[tuple]:
    """Every (path to a container, key) in a JSON tree."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def corrupt_dag(data, dag: dict) -> dict:
    """A copy of ``dag`` with 1-3 structural or value corruptions drawn by hypothesis."""
    dag = copy.deepcopy(dag)
    for _ in range(data.draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3]), label="n_corruptions")):
        op = data.draw(st.sampled_from(["delete", "replace", "number", "number", "cycle", "dup_id",
                                        "self_loop", "unknown_parent", "scale", "scale", "scale"]), label="op")
        nodes = dag.get("nodes") if isinstance(dag.get("nodes"), list) else []
        nodes = [n for n in nodes if isinstance(n, dict)]
        if op in ("delete", "replace", "number", "scale"):
            paths = list(_paths(dag))
            if op in ("number", "scale"):
                paths = [p for p in paths if isinstance(_get(dag, p), (int, float))
                         and not isinstance(_get(dag, p), bool)]
            if not paths:
                continue
            path = data.draw(st.sampled_from(paths), label="path")
            parent = _get(dag, path[:-1])
            if op == "delete":
                del parent[path[-1]]
            elif op == "replace":
                parent[path[-1]] = data.draw(st.sampled_from(BAD_VALUES), label="value")
            elif op == "number":
                parent[path[-1]] = data.draw(st.one_of(
                    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 1e16, 1e15, -1.0, 0.0, 5e-324]),
                    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70)), label="number")
            else:
                parent[path[-1]] = _get(dag, path) * data.draw(st.sampled_from([-1, 0, 1e-12, 1e12, 1e200]))
        elif nodes:
            a = data.draw(st.sampled_from(nodes), label="node_a")
            b = data.draw(st.sampled_from(nodes), label="node_b")
            if op == "cycle" and isinstance(a.get("parents"), list) and isinstance(b.get("children"), list):
                # a -> ... -> b plus b's child as a's parent (and the inverse edge)
                a["parents"].append(b.get("node_id"))
                b["children"].append(a.get("node_id"))
            elif op == "dup_id":
                a["node_id"] = b.get("node_id")
            elif op == "self_loop" and isinstance(a.get("parents"), list):
                a["parents"].append(a.get("node_id"))
                if isinstance(a.get("children"), list):
                    a["children"].append(a.get("node_id"))
            elif op == "unknown_parent" and isinstance(a.get("parents"), list):
                a["parents"].append(10_000)
    return dag


def corrupt_text(data, lines: list[str]) -> list[str]:
    """Text-level damage: truncation, stray bytes, NaN tokens, duplicate or empty lines."""
    op = data.draw(st.sampled_from(["none"] * 6 + ["truncate", "byte", "nan_token", "dup_line", "empty_line",
                                    "bom", "not_utf8", "bare_value"]), label="text_op")
    lines = list(lines)
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    if op == "truncate":
        lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i]) - 1), label="cut")]
    elif op == "byte":
        pos = data.draw(st.integers(0, len(lines[i]) - 1), label="pos")
        lines[i] = lines[i][:pos] + data.draw(st.sampled_from(list('{}[]",:0-e. x\\'))) + lines[i][pos + 1:]
    elif op == "nan_token":
        for num in ("0.5", "1", "2"):
            if f":{num}" in lines[i]:
                lines[i] = lines[i].replace(f":{num}", ":" + data.draw(st.sampled_from(
                    ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])), 1)
                break
    elif op == "dup_line":
        lines.insert(i, lines[i])
    elif op == "empty_line":
        lines.insert(i, data.draw(st.sampled_from(["", "   ", "\t"])))
    elif op == "bom":
        lines[0] = "\ufeff" + lines[0]
    elif op == "not_utf8":
        lines[i] = lines[i][:10] + "\udcff" + lines[i][10:]
    elif op == "bare_value":
        lines[i] = data.draw(st.sampled_from(["[]", "1", "null", '"dag"', "{}", "[{}]"]))
    return lines


def draw_pool_lines(data) -> list[str]:
    n = data.draw(st.integers(1, 3), label="n_dags")
    dags = [BASE_DAGS[k % len(BASE_DAGS)] for k in range(n)]
    target = data.draw(st.integers(-n, n - 1), label="corrupted_dag")  # < 0: none (half the time)
    objs = [corrupt_dag(data, d) if k == target else d for k, d in enumerate(dags)]
    if n > 1 and data.draw(st.booleans(), label="dup_problem_id"):
        objs[-1] = dict(objs[-1], problem_id=objs[0].get("problem_id"))
    lines = [json.dumps(o, allow_nan=True) for o in objs]
    return corrupt_text(data, lines) if target >= 0 else lines


def write_pool_text(path: str, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("\n".join(lines) + "\n")


INDEX_TEXTS = st.one_of(
    st.lists(st.integers(-3, 5), max_size=4).map(json.dumps),
    st.lists(st.integers(0, 2), max_size=3).map(lambda v: json.dumps({"dag_indices": v})),
    st.sampled_from(["", "[", "{}", '{"indices": [0]}', "[0.5]", '["0"]', "[true]", "null", "[1e400]", "[0, 0]",
                     "[NaN]", "[[0]]", '{"dag_indices": "0"}', "[9999999999999999999999]"]),
)

GRID_TOKENS = ["1", "0.5", "2", "0", "-1", "inf", "-inf", "nan", "1e400", "1e-400", "1e308", "abc", ",", ";", ":",
               "  ", "1,2", "0.3 0.5", "1e15", "1.0.0", "+1", "0x10", "1_000", "¼"]
GRID_VALUES = st.lists(st.sampled_from(GRID_TOKENS), min_size=0, max_size=4).map(" ".join)

# --------------------------------------------------------------------------- outcome checks


def finite_numbers(obj, where="") -> list[str]:
    """Paths of numbers in a JSON tree that are not finite (strict JSON cannot hold them anyway)."""
    bad = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            bad += finite_numbers(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad += finite_numbers(v, f"{where}[{i}]")
    elif isinstance(obj, float) and not math.isfinite(obj):
        bad.append(where)
    return bad


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def assert_refusal(rc: int, err: str, context: str) -> None:
    assert rc != 0, context
    assert "Traceback" not in err, f"{context}\n{err}"
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines, f"{context}: refused without a message"
    if lines[0].startswith("usage:"):  # argparse: usage, then one error line
        assert ": error: " in lines[-1], f"{context}\n{err}"
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{context}\n{err}"


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Fail the example (not hang the suite) when an in-process call overruns."""

    def on_alarm(signum, frame):
        raise TimeoutError(f"{what}: no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < seconds, what


def call_main(main, argv, what: str) -> tuple[int, str, str]:
    """Run a command's main in this process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with time_limit(TIME_LIMIT, what), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
    return int(rc or 0), out.getvalue(), err.getvalue()


def check_outcome(rc: int, out: str, err: str, context: str, json_out: bool = False) -> None:
    if currently_in_test_context():
        event(f"{context.split()[0]}: {'ran' if rc == 0 else 'refused'}")
    if rc != 0 and os.environ.get("FUZZ_SHOW_REFUSALS") and currently_in_test_context():
        event("refusal: " + re.sub(r"[-+]?\d[\d.e+-]*|'[^']*'|/\S+", "#", (err.strip().splitlines() or [""])[-1])[:90])
    if rc != 0:
        assert_refusal(rc, err, context)
        return
    assert "Traceback" not in err, f"{context}\n{err}"
    if json_out:
        doc = strict_json(out)
        assert finite_numbers(doc) == [], f"{context}: non-finite numbers {finite_numbers(doc)}\n{out}"


# --------------------------------------------------------------------------- simulator CLI, in process

METHODS = ["sequential", "sequential_4", "uniform", "random", "latency_weighted", "critical_path_static",
           "mc_portfolio_rollout"]
COST_MODES = ["token_cost_mean", "cost_mean", "lat_mean", "money", "latency", "tokens", "nosuch"]


def pick(draw, good: list[str], bad: list[str], label: str) -> str:
    """Mostly a valid value, sometimes (1 in 10) a value that must be refused."""
    # (hypothesis favours small integers, so "bad" is a value in the middle of the range)
    if bad and draw(st.integers(0, 9), label=f"{label}_bad") == 7:
        return draw(st.sampled_from(bad), label=label)
    return draw(st.sampled_from(good), label=label)


@st.composite
def simulate_flags(draw) -> list[str]:
    flags = ["--trials", pick(draw, ["1", "3", "20"], ["0", "-1", "abc", "1e3", "2.5", "99999999999999999999999"],
                              "trials")]
    if draw(st.booleans()):
        flags += ["--budget-ratio", pick(draw, ["1", "0.2", "5", "1e-6", "1e12"], ["0", "-1", "inf", "nan", "x"],
                                         "budget_ratio")]
    else:
        flags += ["--budget", pick(draw, ["1", "500", "1e6", "5e-324", "1e300"], ["0", "-5", "inf", "nan"],
                                   "budget")]
    if draw(st.booleans()):
        flags += ["--deadline-ratio", pick(draw, ["1", "0.5", "3", "1e-9", "1e300"], ["0", "-1", "inf", "nan"],
                                           "deadline_ratio")]
    else:
        flags += ["--deadline", pick(draw, ["60", "1e-9", "inf", "1e308"], ["0", "-1", "nan"], "deadline")]
    flags += ["--method", pick(draw, METHODS, ["sequentail", ""], "method")]
    if draw(st.booleans()):
        flags += ["--cost-mode", pick(draw, COST_MODES[:-1], ["nosuch"], "cost_mode")]
    if draw(st.booleans()):
        flags += ["--latency-dist", pick(draw, ["lognormal", "gamma", "gaussian"], ["cauchy"], "latency_dist")]
    if draw(st.booleans()):
        flags += ["--seed", pick(draw, ["0", "7", "9223372036854775807"], ["-1", "2**64", "9223372036854775808",
                                                                              "x"], "seed")]
    if draw(st.booleans()):
        flags += ["--dag", pick(draw, ["0", "1", "2"], ["-1", "99", "x"], "dag")]
    if draw(st.integers(0, 4)) == 0:
        flags += [draw(st.sampled_from(["--mc-portfolio-m", "--mc-portfolio-base-ks", "--mc-portfolio-model-ids",
                                        "--mc-portfolio-delta", "--mc-portfolio-max-rollout-steps"])),
                  draw(st.sampled_from(["1", "0", "-1", "2,4", "nan", "inf", "nosuchmodel", "4B_ins", "1e9"]))]
    return flags


def _mcpp_too_slow(flags: list[str]) -> bool:
    """MCPP with many trials is slow by design; keep those cases small."""
    if "mc_portfolio_rollout" not in flags:
        return False
    trials = flags[flags.index("--trials") + 1]
    return trials not in ("0", "-1", "abc", "1e3", "2.5", "1", "3", "99999999999999999999999")


@fuzz(ci_examples=150)
def test_fuzz_validate_and_simulate_in_process(data):
    from simulator.cli.main import main

    lines = draw_pool_lines(data)
    flags = data.draw(simulate_flags(), label="flags")
    with tempfile.TemporaryDirectory() as tmp:
        pool = os.path.join(tmp, "pool.jsonl")
        write_pool_text(pool, lines)
        rc, out, err = call_main(main, ["validate", "--pool", pool], "validate")
        check_outcome(rc, out, err, "validate")
        if rc == 0:
            assert out.splitlines()[0].endswith(": OK")
        if data.draw(st.booleans(), label="with_index_file"):
            idx = os.path.join(tmp, "idx.json")
            with open(idx, "w", encoding="utf-8") as fh:
                fh.write(data.draw(INDEX_TEXTS, label="index"))
            rc2, out2, err2 = call_main(main, ["validate", "--pool", pool, "--index-file", idx], "validate --index")
            check_outcome(rc2, out2, err2, "validate --index-file")
        if _mcpp_too_slow(flags):
            flags[flags.index("--trials") + 1] = "2"
        rc, out, err = call_main(main, ["simulate", "--pool", pool, *flags, "--json"], "simulate")
        check_outcome(rc, out, err, f"simulate {flags}", json_out=True)


# --------------------------------------------------------------------------- harness prepare, in process

HARNESS_ENV_PREFIXES = ("MC_PORTFOLIO_", "PLANNING_", "BASELINE_", "BUDGET_", "DEADLINE_", "LATENCY_", "DAG_",
                        "DAGS_", "N_EXEC_", "SLURM_", "USE_DAG", "RUN_", "RESULTS_", "N_", "METHOD_", "SEED",
                        "STALE_", "HEARTBEAT_", "MAX_SHARD", "PRICE_", "DEFAULT_PRICE")


@st.composite
def harness_env(draw) -> dict[str, str]:
    env = {"N_EXEC_TRIALS": pick(draw, ["1", "2"], ["0", "-3", "abc", "1e2", "1000000000000"], "n_trials"),
           "METHOD_SET": pick(draw, ["seq", "static", "sequential"], ["nosuch", "seq,nosuch"], "methods")}
    grid = draw(st.sampled_from(["ratios", "values", "map"]))
    good = ["1", "0.5 2", "0.3,1", "1e-6", "1e12", "2 1"]
    if grid == "ratios":
        env["BUDGET_RATIOS"] = pick(draw, good, [draw(GRID_VALUES)], "budget_ratios")
        env["DEADLINE_RATIOS"] = pick(draw, good, [draw(GRID_VALUES)], "deadline_ratios")
    elif grid == "values":
        env["BUDGET_VALUES"] = pick(draw, ["1000", "500 5000", "1e-3", "1e300"], [draw(GRID_VALUES)], "budgets")
        env["DEADLINE_VALUES"] = pick(draw, ["60", "30 inf", "1e-6"], [draw(GRID_VALUES)], "deadlines")
    else:
        env["BUDGET_DEADLINE_VALUES_MAP"] = pick(draw, ["1000:60 120; 2000:60", "1000:inf", "5:1e-3"], [
            "1000:", ":60", "a:b", "nan:60", "1000:60;;", "-1:60", "1e400:1", "1000:60; 1000:60"], "grid_map")
    for name, good, bad in (("N_DAGS", ["1", "2", "all", "100"], ["0", "-1", "x"]),
                            ("SEED", ["0", "9223372036854775807"], ["-1", "x", "99999999999999999999999"]),
                            ("DAGS_PER_SHARD", ["1", "auto"], ["0", "x"]),
                            ("LATENCY_DIST", ["gamma", "gaussian"], ["cauchy"]),
                            ("BUDGET_COST_MODE", ["latency", "money", "cost_mean"], ["nosuch"]),
                            ("PLANNING_NOISE_LATENCY_SIGMA", ["0.1", "0"], ["-1", "nan", "inf"]),
                            ("MC_PORTFOLIO_M", ["4", "1"], ["0", "x"]),
                            ("STALE_SECONDS", ["5", "0"], ["abc", "-1"])):
        if draw(st.integers(0, 5), label=f"set_{name}") == 3:
            env[name] = pick(draw, good, bad, name)
    if draw(st.integers(0, 9), label="misspelt") == 7:
        env["MC_PORTFOLIO_MM"] = "8"
    return env


@contextlib.contextmanager
def harness_environment(values: dict[str, str]):
    """os.environ with the harness variables of this process removed and ``values`` set."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(HARNESS_ENV_PREFIXES)}
    with mock.patch.dict(os.environ, {**clean, **values}, clear=True):
        yield


def check_run_json(run_dir: str, context: str) -> None:
    """run.json is the harness's own file (read back with Python's json): the one non-finite value it
    may hold is +Infinity for a deadline of ``inf`` ("no deadline"), never NaN or -Infinity."""

    def constant(name):
        if name != "Infinity":
            raise ValueError(f"run.json holds {name}")
        return math.inf

    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
        doc = json.loads(fh.read(), parse_constant=constant)
    bad = [p for p in finite_numbers(doc) if "deadline" not in p.rsplit(".", 1)[-1]]
    assert bad == [], f"{context}: non-finite numbers in run.json {bad}"


def _prepare_case(data, tmp: str) -> dict:
    """A pool (corrupted or not) written in ``tmp`` and harness settings for a ``prepare`` of it."""
    lines = draw_pool_lines(data) if data.draw(st.booleans(), label="corrupt_pool") else [
        json.dumps(d) for d in BASE_DAGS]
    env = data.draw(harness_env(), label="env")
    pool = os.path.join(tmp, "pool.jsonl")
    write_pool_text(pool, lines)
    env.update(DAG_POOL_PATH=pool, RESULTS_ROOT=os.path.join(tmp, "runs"), RUN_NAME="fuzz")
    return env


@fuzz(ci_examples=60)
def test_fuzz_harness_prepare_in_process(data):
    from harness.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        env = _prepare_case(data, tmp)
        if data.draw(st.integers(0, 5), label="index") == 0:
            idx = os.path.join(tmp, "idx.json")
            with open(idx, "w", encoding="utf-8") as fh:
                fh.write(data.draw(INDEX_TEXTS, label="index_text"))
            env["USE_DAG_INDICES_FILE"] = idx
        with harness_environment(env):
            rc, out, err = call_main(main, ["prepare"], "prepare")
        context = f"prepare {env}"
        check_outcome(rc, out, err, context)
        if rc == 0:
            check_run_json(os.path.join(tmp, "runs", "fuzz"), context)


# --------------------------------------------------------------------------- the real commands, a few cases


def run_command(cmd: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env=env or {**os.environ, "PYTHONPATH": ROOT})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{cmd}: no answer within {timeout} s")


@fuzz(ci_examples=3)
def test_fuzz_simulator_commands_in_subprocess(data):
    lines = draw_pool_lines(data)
    flags = data.draw(simulate_flags(), label="flags")
    if _mcpp_too_slow(flags):
        flags[flags.index("--trials") + 1] = "2"
    with tempfile.TemporaryDirectory() as tmp:
        pool = os.path.join(tmp, "pool.jsonl")
        write_pool_text(pool, lines)
        r = run_command([sys.executable, "-m", "simulator", "validate", "--pool", pool])
        check_outcome(r.returncode, r.stdout, r.stderr, "validate (subprocess)")
        r = run_command([sys.executable, "-m", "simulator", "simulate", "--pool", pool, *flags, "--json"])
        check_outcome(r.returncode, r.stdout, r.stderr, f"simulate {flags} (subprocess)", json_out=True)


@fuzz(ci_examples=3)
def test_fuzz_run_experiment_prepare_in_subprocess(data):
    with tempfile.TemporaryDirectory() as tmp:
        env = _prepare_case(data, tmp)
        env["PYTHON"] = sys.executable
        full = {k: v for k, v in os.environ.items() if not k.startswith(HARNESS_ENV_PREFIXES)}
        r = run_command(["bash", os.path.join(ROOT, "run_experiment.sh"), "prepare"], env={**full, **env})
        context = f"run_experiment.sh prepare {env}"
        check_outcome(r.returncode, r.stdout, r.stderr, context)
        if r.returncode == 0:
            check_run_json(os.path.join(tmp, "runs", "fuzz"), context)


# --------------------------------------------------------------------------- what the fuzzing found (pinned)


@pytest.mark.parametrize("p", [1.3505437611933638e-83, 5e-324, 1e-17])
def test_found_tiny_success_probability_in_ratio_mode(tmp_path, p):
    """prepare / --budget-ratio on a node with 0 < p < 2**-53: ZeroDivisionError (log(1 - p) = 0) or
    OverflowError before; now the nominal scales are computed with log1p, or refused when not finite."""
    from simulator.cli.main import main

    dag = copy.deepcopy(SINGLE[0])
    dag["nodes"][3]["template"]["success_prob"] = p
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps(dag) + "\n")
    rc, out, err = call_main(main, ["simulate", "--pool", str(pool), "--budget-ratio", "1", "--deadline-ratio",
                                    "1", "--trials", "2", "--json"], "simulate")
    check_outcome(rc, out, err, f"p={p}", json_out=True)
    if p == 5e-324:  # 10 / 5e-324 overflows: the nominal deadline is not a finite number
        assert rc == 2 and "not a finite number" in err


def test_attempts_for_95_is_unchanged_where_it_worked():
    import math as m

    from simulator.costs.nominal import attempts_for_95

    for p in (0.001, 0.3, 0.5, 0.9375, 0.999999, 1 - 2**-52):
        assert attempts_for_95(p) == max(1, m.ceil(m.log(0.05) / m.log(1.0 - p)))
    assert attempts_for_95(1e-20) == m.ceil(m.log(0.05) / m.log1p(-1e-20))  # was ZeroDivisionError


@pytest.mark.parametrize("value", [True, 5, "4B_ins", {"a": 1}, [None], [["4B_ins"]]])
def test_found_dag_level_model_ids_of_the_wrong_type(tmp_path, value):
    """``"model_ids": true`` on a DAG line: TypeError traceback in the loader (found by the long run)."""
    from simulator.cli.main import main

    dag = dict(MULTI, model_ids=value)
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps(dag) + "\n")
    rc, out, err = call_main(main, ["validate", "--pool", str(pool)], "validate")
    assert rc == 2 and "model_ids must be a list of model names" in err, err
    assert_refusal(rc, err, "validate")

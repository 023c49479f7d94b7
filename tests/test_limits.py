"""One way in for a limit (simulator/costs/limits.py): the value type's table, its flags, and no door around it.

Why: a budget or deadline used to come in seven ways (a fake ``argparse.Namespace`` in two callers, fake grid
settings written into the surface job's environment, ``--deadline`` in wall seconds in ``executor run`` and in
model seconds in ``agree`` under the same help, ratios scaled under two rules). These tests hold the one way.
"""

from __future__ import annotations

import argparse
import ast
import math
from pathlib import Path

import pytest

from simulator.base.errors import ConfigError
from simulator.costs.limits import (
    ABSOLUTE,
    BUDGET,
    DEADLINE,
    MODEL_SECONDS,
    RATIO,
    WALL_SECONDS,
    Limit,
    Limits,
    add_limit_arguments,
    limits_from_args,
)

ROOT = Path(__file__).resolve().parents[1]
INF = math.inf

# (kind, value, given, unit, infinite, nominal, time_scale, expected value or the words of the refusal)
TABLE = [
    (BUDGET, "1000", ABSOLUTE, None, True, None, 1.0, 1000.0),  # absolute: no nominal needed
    (BUDGET, "0.5", RATIO, None, True, 300.0, 1.0, 150.0),  # ratio x nominal
    (BUDGET, 0.1, RATIO, None, True, 0.3, 1.0, 0.1 * 0.3),  # the float product, bit for bit
    (DEADLINE, "20", ABSOLUTE, MODEL_SECONDS, True, None, 0.1, 20.0),  # model seconds: the time scale is not applied
    (DEADLINE, "2", ABSOLUTE, WALL_SECONDS, False, None, 0.1, 20.0),  # wall seconds / time scale = model seconds
    (DEADLINE, "1.5", RATIO, MODEL_SECONDS, True, 40.0, 0.1, 60.0),  # a ratio deadline is in model seconds
    (DEADLINE, "inf", ABSOLUTE, MODEL_SECONDS, True, None, 1.0, INF),  # no deadline, where the door allows it
    (DEADLINE, "inf", ABSOLUTE, WALL_SECONDS, False, None, 1.0, "--deadline"),  # a live run must end
    (BUDGET, "inf", ABSOLUTE, None, True, None, 1.0, "--budget"),  # an infinite budget bounds nothing
    (BUDGET, "nan", ABSOLUTE, None, True, None, 1.0, "--budget"),
    (BUDGET, "-1", ABSOLUTE, None, True, None, 1.0, "--budget"),
    (BUDGET, "0", ABSOLUTE, None, True, None, 1.0, "--budget"),
    (BUDGET, "lots", ABSOLUTE, None, True, None, 1.0, "--budget"),
    (DEADLINE, "-3", ABSOLUTE, MODEL_SECONDS, True, None, 1.0, "--deadline"),
    (DEADLINE, "nan", ABSOLUTE, MODEL_SECONDS, True, None, 1.0, "--deadline"),
    (BUDGET, "inf", RATIO, None, True, 10.0, 1.0, "--budget-ratio"),
    (DEADLINE, "-0.5", RATIO, MODEL_SECONDS, True, 10.0, 1.0, "--deadline-ratio"),
    (BUDGET, "2", RATIO, None, True, 0.0, 1.0, "nominal budget of this DAG is 0"),  # free attempts: no budget
    (BUDGET, "1e300", RATIO, None, True, 1e300, 1.0, "beyond the float range"),
    (BUDGET, "2", RATIO, None, True, None, 1.0, "needs the DAG's nominal budget"),
]


@pytest.mark.parametrize("kind, value, given, unit, infinite, nominal, scale, expected", TABLE)
def test_limit_table(kind, value, given, unit, infinite, nominal, scale, expected):
    def concrete():
        return Limit(kind, value, given, unit, infinite=infinite).of_nominal(nominal, time_scale=scale)

    if isinstance(expected, str):
        with pytest.raises(ConfigError, match=expected):
            concrete()
    else:
        assert concrete() == expected


@pytest.mark.parametrize("kind, given, unit", [(BUDGET, ABSOLUTE, MODEL_SECONDS), (DEADLINE, ABSOLUTE, None),
                                               (DEADLINE, RATIO, WALL_SECONDS), ("cost", ABSOLUTE, None),
                                               (BUDGET, "times", None)])  # fmt: skip
def test_limit_shape_is_refused(kind, given, unit):
    """A budget has no unit, a deadline must say its unit, a ratio deadline is in model seconds."""
    with pytest.raises(ValueError):
        Limit(kind, 1.0, given, unit)


def test_flags_say_their_unit_and_read_back():
    ap = argparse.ArgumentParser()
    add_limit_arguments(ap, deadline_unit=WALL_SECONDS, infinite_deadline=False)
    helps = {a.option_strings[0]: a.help for a in ap._actions if a.option_strings}
    assert "wall seconds" in helps["--deadline"] and "model seconds" in helps["--deadline-ratio"]
    lim = limits_from_args(ap.parse_args(["--budget-ratio", "2", "--deadline", "3"]))
    assert lim.budget == Limit(BUDGET, 2.0, RATIO)
    assert lim.deadline.unit == WALL_SECONDS and lim.deadline.of_nominal(None, time_scale=0.5) == 6.0
    with pytest.raises(ConfigError, match="--deadline"):
        limits_from_args(ap.parse_args(["--budget", "5", "--deadline", "inf"]))
    with pytest.raises(SystemExit):  # each pair is exclusive
        ap.parse_args(["--budget", "5", "--budget-ratio", "1", "--deadline", "3"])


def test_resolve_on_a_dag_uses_the_nominal_scales():
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget, nominal_deadline
    from simulator.pools.pool import load_pool

    pool = load_pool(str(ROOT / "examples" / "example_pool.jsonl"))
    arr = dag_arrays(pool, 0, CostSetting())
    b, d = Limits.ratios(0.7, 1.5).resolve(arr)
    assert (b, d) == (0.7 * nominal_budget(arr), 1.5 * nominal_deadline(arr))


@pytest.mark.parametrize("command, unit", [("run", "wall seconds"), ("agree", "model seconds")])
def test_executor_deadline_help_says_which_seconds(command, unit, capsys):
    from executor.cli import COMMANDS

    with pytest.raises(SystemExit):
        COMMANDS[command](["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"deadline in {unit}" in text


def test_quote_deadline_is_model_seconds(capsys):
    from executor.quote import cmd_quote

    with pytest.raises(SystemExit):
        cmd_quote(["--help"])
    assert "deadline in model seconds" in " ".join(capsys.readouterr().out.split())


# --------------------------------------------------------------------------- no way around the one way in

#: the names a limit is given by: flags' destinations and the harness's grid variables
LIMIT_NAMES = {"budget", "deadline", "budget_ratio", "deadline_ratio"}
LIMIT_VARIABLES = {"BUDGET_VALUES", "DEADLINE_VALUES", "BUDGET_RATIOS", "DEADLINE_RATIOS", "BUDGET_DEADLINE_VALUES_MAP"}
DOORS = ("simulator", "executor", "harness", "benchmarks", "poolbuild", "codeflow", "ProofFlow")


def _door_files():
    yield from sorted(ROOT.glob("*.py"))
    for pkg in DOORS:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if not {"lean_project", "__pycache__", "results"} & set(p.parts):
                yield p


def _key(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def ways_around(source: str) -> list[tuple[int, str]]:
    """Lines that pass a limit around the one way in: a hand-made Namespace with limit fields, or a limit's
    grid variable written into an environment mapping (``env[K] = ..``, ``setdefault``, ``update``, ``pop``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "Namespace" and LIMIT_NAMES & {k.arg for k in node.keywords}:
                out.append((node.lineno, "argparse.Namespace carrying a limit"))
            if name in ("setdefault", "pop", "putenv") and node.args and _key(node.args[0]) in LIMIT_VARIABLES:
                out.append((node.lineno, f"{name}({_key(node.args[0])!r}) on an environment"))
            if name == "update" and LIMIT_VARIABLES & {k.arg for k in node.keywords}:
                out.append((node.lineno, "update() of an environment with a limit variable"))
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Subscript) and _key(t.slice) in LIMIT_VARIABLES:
                    out.append((node.lineno, f"[{_key(t.slice)!r}] written"))
    return out


def test_the_checker_sees_each_way_around():
    src = ("import argparse, os\n"
           "ns = argparse.Namespace(budget=None, budget_ratio=1.0)\n"
           "env = dict(os.environ)\nenv.setdefault('BUDGET_VALUES', '1')\nenv['DEADLINE_VALUES'] = '1'\n"
           "env.pop('BUDGET_DEADLINE_VALUES_MAP', None)\nos.environ.update(DEADLINE_RATIOS='1')\n")  # fmt: skip
    assert sorted(line for line, _ in ways_around(src)) == [2, 4, 5, 6, 7]


def test_no_front_door_passes_a_limit_around_the_one_way_in():
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in _door_files()
             for line, what in ways_around(p.read_text(encoding="utf-8"))]  # fmt: skip
    assert found == []

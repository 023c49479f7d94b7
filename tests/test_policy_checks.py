"""The conformance battery (simulator/checks.py) over every registered method, and the battery's own teeth.

Why: no caller probes a policy (``grep "hasattr(policy"`` finds nothing), so
each registered method must keep the :class:`~simulator.engine.episode.Policy`
contract itself; this file is where a new policy learns whether it does
(``docs/adding_a_policy.md``). The battery on a one-node DAG runs in the fast
loop; on an 80-node DAG (about 100 s for all methods) it is marked slow.
"""

from __future__ import annotations

import math
import pathlib
import re
import subprocess

import numpy as np
import pytest

from simulator.checks import CHECKS, check_actions, check_case, check_pickle_round_trip, check_policy
from simulator.engine.episode import Policy
from simulator.engine.registry import ATOMIC, PER_ATTEMPT
from simulator.methods import REGISTRY

METHODS = REGISTRY.names()
ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def one_node():
    return check_case(1)


@pytest.fixture(scope="module")
def eighty_nodes():
    return check_case(80)


@pytest.mark.parametrize("method", METHODS)
def test_every_registered_method_passes_the_battery_on_one_node(method, one_node):
    check_policy(method, one_node)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_every_registered_method_passes_the_battery_on_eighty_nodes(method, eighty_nodes):
    check_policy(method, eighty_nodes)


def test_the_case_binds_budget_and_deadline(eighty_nodes):
    """The battery's case is not trivially loose: sequential retries on it exhaust the budget or the deadline."""
    from simulator.simulate import SimSpec, simulate_run

    c = eighty_nodes
    batch = simulate_run(c.arr, "sequential",
                         SimSpec(budget=c.budget, deadline=c.deadline, trials=range(8), seed=c.seed, dag=0))
    reasons = {r["termination_reason"] for r in batch.records(c.deadline)}
    assert reasons & {"budget_exhausted", "deadline_exhausted"}


# ----------------------------------------------------------------------- the battery catches breaches


class _Cheapest(Policy):
    name = "cheapest"

    def reset(self, arr, seed, dag, trial):
        self.model = np.zeros(arr.n, dtype=np.int64)

    def act(self, view):
        count = np.zeros(view.arr.n, dtype=np.int64)
        count[view.ready] = 1
        return self.model, count


class _OutsideItsModels(_Cheapest):
    """Declares model 1 only, launches model 0."""

    name = "outside"

    def model_positions(self, arr):
        return np.array([1], dtype=np.int64)


class _ShortArrays(_Cheapest):
    name = "short"

    def act(self, view):
        model, count = super().act(view)
        return model[:-1], count[:-1]


class _NotLegacy(_Cheapest):
    name = "not_legacy"
    legacy_only = True

    def reset(self, arr, seed, dag, trial):
        self.model = 1 - np.asarray(arr.legacy, dtype=np.int64)  # two models: the other one


class _Unpicklable(_Cheapest):
    name = "unpicklable"

    def reset(self, arr, seed, dag, trial):
        super().reset(arr, seed, dag, trial)
        self.hook = lambda: None  # a lambda does not pickle


@pytest.mark.parametrize("bad", [_OutsideItsModels, _ShortArrays, _NotLegacy])
@pytest.mark.parametrize("launch", [PER_ATTEMPT, ATOMIC])
def test_an_illegal_action_is_caught(bad, launch):
    case = check_case(3)
    check_actions(_Cheapest(), launch, math.inf, case)  # the well-behaved parent passes
    with pytest.raises(AssertionError, match=bad.name):
        check_actions(bad(), launch, math.inf, case)


def test_a_policy_that_does_not_pickle_after_an_episode_is_caught():
    case = check_case(3)
    check_pickle_round_trip(_Cheapest(), PER_ATTEMPT, math.inf, case)
    with pytest.raises(Exception, match="pickle|lambda"):
        check_pickle_round_trip(_Unpicklable(), PER_ATTEMPT, math.inf, case)


def test_simulate_run_is_simulate_method_with_named_numbers(one_node):
    from simulator.simulate import SimSpec, simulate_method, simulate_run

    c = one_node
    spec = SimSpec(budget=c.budget, deadline=c.deadline, trials=(0, 1, 2), seed=c.seed, dag=3, rules=ATOMIC)
    a = simulate_run(c.arr, "sequential_2", spec)
    b = simulate_method(c.arr, "sequential_2", c.budget, c.deadline, (0, 1, 2), c.seed, 3, execution_rules=ATOMIC)
    drop = ("planner_wall_ms",)  # wall time: the one field that differs between two equal runs
    assert [{k: v for k, v in r.items() if k not in drop} for r in a.records(c.deadline)] == [
        {k: v for k, v in r.items() if k not in drop} for r in b.records(c.deadline)]
    with pytest.raises(TypeError):
        SimSpec(c.budget, c.deadline, (0,), c.seed)  # keyword-only


def test_our_callers_name_their_numbers():
    """No caller in the project's code runs a method through the positional chain: each passes a SimSpec to
    ``simulate_run`` (``simulate_method`` stays, with the published code's signature, for code written against it)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for pkg in ("simulator", "executor", "harness", "benchmarks", "poolbuild"):
        for p in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
                f = getattr(node, "func", None)
                name = getattr(f, "attr", None) or getattr(f, "id", None)
                if isinstance(node, ast.Call) and name == "simulate_method" and p.name != "simulate.py":
                    found.append(f"{p.relative_to(root)}:{node.lineno}")
    assert found == []


def test_the_battery_names_its_checks():
    assert set(CHECKS) == {"deterministic", "legal", "bounded", "pickles"}


def test_no_caller_probes_a_policy():
    """The promise of issue 30: members are declared on Policy, so nobody outside a policy probes or peeks."""
    pattern = r"hasattr(policy\|getattr(policy\|\._tables\|hasattr(self.policy\|getattr(self.policy"
    r = subprocess.run(["grep", "-rn", pattern, "simulator", "harness", "executor", "--include=*.py"],
                       cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert not re.search(r'"MCPP"', (ROOT / "harness" / "surface" / "files.py").read_text(encoding="utf-8"))

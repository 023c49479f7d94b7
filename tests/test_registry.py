"""The method registry: entries, variants, method sets, and one driver for every Python policy."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import Policy
from simulator.engine.registry import (
    ATOMIC,
    COMPILED_BASELINE,
    PER_ATTEMPT,
    PYTHON_POLICY,
    SCORED,
    MethodSpec,
    Registry,
    split_method_list,
)
from simulator.methods import (
    BASELINE_METHODS,
    METHOD_ORDER,
    METHOD_SETS,
    REGISTRY,
    is_baseline,
    method_spec,
    resolve_methods,
)
from simulator.pools.pool import load_pool
from simulator.simulate import SimSpec, simulate_baseline, simulate_policy, simulate_run

FIELDS = ("reason", "makespan", "total_cost", "total_rollouts", "planner_calls", "node_stats", "node_cost")


@pytest.fixture(scope="module")
def pool(example_pool_path):
    return load_pool(example_pool_path)


def test_the_papers_methods_and_sets_come_from_the_entries():
    assert METHOD_ORDER == BASELINE_METHODS + ("mc_portfolio_rollout",)
    assert len(METHOD_ORDER) == 13 and METHOD_SETS["all"] == METHOD_ORDER
    assert METHOD_SETS["seq"] == tuple(m for m in BASELINE_METHODS if m.startswith("sequential"))
    assert len(METHOD_SETS["static"]) == 5 and METHOD_SETS["mcpp"] == ("mc_portfolio_rollout",)
    assert len(METHOD_SETS["further"]) == 8
    for name in REGISTRY.names():
        spec = method_spec(name)
        assert spec.compiled == (spec.kind == COMPILED_BASELINE)
    assert all(method_spec(m).kind == COMPILED_BASELINE for m in BASELINE_METHODS)
    assert method_spec("mc_portfolio_rollout").launch == ATOMIC and not is_baseline("mc_portfolio_rollout")
    assert is_baseline("loader_dual") and method_spec("loader_dual").launch == PER_ATTEMPT
    assert method_spec("deadline_receding").deadline == "hard" and method_spec("loader_static").deadline == SCORED


def test_resolve_methods_sets_lists_and_variants_in_registry_order():
    assert resolve_methods("all,further") == list(METHOD_ORDER) + list(METHOD_SETS["further"])
    got = resolve_methods("mc_portfolio_rollout[crn], sequential, mc_portfolio_rollout, uniform")
    assert got == ["sequential", "uniform", "mc_portfolio_rollout[crn]", "mc_portfolio_rollout"]
    assert resolve_methods("sequential,seq") == list(METHOD_SETS["seq"])
    assert split_method_list("a,b[x=1,y=2], c") == ["a", "b[x=1,y=2]", "c"]


@pytest.mark.parametrize(
    "text, words",
    [
        ("sequentail", "did you mean 'sequential'"),
        ("mc_portfolio_rollout[crm]", "did you mean 'crn'"),
        ("mc_portfolio_rollout[M=0]", "M must be >= 1"),
        ("mc_portfolio_rollout[evaluation=nope]", "evaluation must be one of"),
        ("mc_portfolio_rollout[nonsense=1]", "unknown MCPP parameter"),
        ("mc_portfolio_rollout[crn,evaluation=halving]", "evaluation given twice"),
        ("mc_portfolio_rollout[]", "nothing between the brackets"),
        ("sequential[k=2]", "compiled baseline and has no parameters"),
        ("nosuch[crn]", "unknown method(s) 'nosuch'"),
        ("", None),
    ],
)
def test_bad_names_refused_with_one_line(text, words):
    if words is None:
        assert resolve_methods(text) == list(METHOD_ORDER)  # empty means the default set
        return
    with pytest.raises(ConfigError, match=re.escape(words)) as exc:
        resolve_methods(text)
    assert "\n" not in str(exc.value)


def test_an_entry_is_checked_when_made():
    with pytest.raises(ValueError, match="launch"):
        MethodSpec("x", PYTHON_POLICY, "sometimes", SCORED, baseline=False, factory=lambda p, q: None)
    with pytest.raises(ValueError, match="factory"):
        MethodSpec("x", PYTHON_POLICY, PER_ATTEMPT, SCORED, baseline=False)
    reg = Registry()
    spec = MethodSpec("x", PYTHON_POLICY, PER_ATTEMPT, SCORED, baseline=False, factory=lambda p, q: None)
    reg.register(spec)
    with pytest.raises(ValueError, match="twice"):
        reg.register(spec)


class _PySequential(Policy):
    """Retry-1 written as a Python policy: must be the compiled ``sequential``, record for record."""

    name = "py_sequential"
    legacy_only = True

    def reset(self, arr, seed, dag, trial):
        self.legacy = np.asarray(arr.legacy, dtype=np.int64)

    def act(self, view):
        count = np.zeros(view.arr.n, dtype=np.int64)
        count[view.ready] = 1
        return self.legacy, count

    def episode_diagnostics(self):
        return {}


def test_a_python_policy_under_the_per_attempt_launch_is_the_compiled_baseline(pool, monkeypatch):
    """One driver for Python policies, under the baselines' launch rule, reproduces the compiled loop exactly."""
    spec = MethodSpec("py_sequential", PYTHON_POLICY, PER_ATTEMPT, SCORED, baseline=True,
                      factory=lambda params, planning: _PySequential())  # fmt: skip
    monkeypatch.setitem(REGISTRY._specs, spec.name, spec)
    for mode in ("token", "money"):
        for i in (0, 3, 7, 11):
            arr = dag_arrays(pool, i, CostSetting(cost_mode=mode))
            for ratio in (0.3, 1.0):
                B = ratio * nominal_budget(arr)
                a = simulate_baseline(arr, "sequential", B, range(12), 42, i)
                b = simulate_run(arr, "py_sequential",
                                 SimSpec(budget=B, deadline=math.inf, trials=range(12), seed=42, dag=i))
                for f in FIELDS:
                    np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f"{mode} DAG {i} {f}")


def test_a_variant_runs_with_its_parameters(pool):
    arr = dag_arrays(pool, 2, CostSetting())
    B, D = nominal_budget(arr), nominal_deadline(arr)
    base = {"M": 8, "max_candidate_actions": 64}
    a = simulate_policy(arr, "mc_portfolio_rollout[crn]", B, D, range(3), 42, 2, base)
    b = simulate_policy(arr, "mc_portfolio_rollout", B, D, range(3), 42, 2, {**base, "evaluation": "crn"})
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert a.method == "mc_portfolio_rollout[crn]"
    assert [d["mc_portfolio_params"]["evaluation"] for d in a.diagnostics] == ["crn"] * 3


@pytest.mark.parametrize("given", ["MCPP", "mcpp", "Mcpp", " MCPP "])
def test_mcpp_is_the_user_facing_name_and_records_keep_the_registered_one(given):
    assert method_spec(given).name == "mc_portfolio_rollout"
    assert method_spec(given.strip() + "[crn]").name == "mc_portfolio_rollout[crn]"
    assert resolve_methods(f"sequential,{given}") == ["sequential", "mc_portfolio_rollout"]


@pytest.mark.parametrize(
    "text, sets",
    [("mcpx", False), ("seq4", False), ("sequentail", False), ("baselinez", True), ("loader_duall", True),
     ("Sequential", False), ("uniformm", True), ("zzz", False)],
)
def test_unknown_names_get_at_most_three_suggestions_never_the_refused_name(text, sets):
    with pytest.raises(ConfigError) as exc:
        REGISTRY.get(text, "--method", sets=sets)
    msg = str(exc.value)
    hint = re.search(r"\(did you mean (.*)\?\)", msg)
    offered = re.findall(r"'([^']*)'", hint.group(1)) if hint else []
    assert len(offered) <= 3 and text not in offered
    accepted = set(REGISTRY.names()) | set(REGISTRY.aliases()) | (set(METHOD_SETS) if sets else set())
    assert set(offered) <= accepted  # only what the caller accepts
    assert "sets:" not in msg and len(msg) < 300  # no list of every method


def test_a_set_given_where_one_method_is_taken_says_so():
    with pytest.raises(ConfigError, match="'baselines' is a method set .*takes one method"):
        method_spec("baselines", "--method")
    with pytest.raises(ConfigError, match=r"did you mean 'sequential_4' or 'sequential_64'\?"):
        method_spec("seq4", "--method")


def test_the_light_table_is_the_modules_entries_and_regenerates_to_the_same_file(tmp_path):
    """simulator/method_table.py holds every field of each module's entries but the functions (and which exist)."""
    import importlib

    from simulator import method_table, methods

    assert tuple(method_table.TABLE) == methods.METHOD_MODULES
    for module, rows in method_table.TABLE.items():
        specs = importlib.import_module(module).METHODS
        assert [methods.table_row(s) for s in specs] == list(rows), f"regenerate: python -m simulator.methods ({module})"
        assert methods.module_specs(module) == {s.name: s for s in specs}  # loads and checks against the table
    out = tmp_path / "method_table.py"
    methods.write_table(str(out))
    assert out.read_text(encoding="utf-8") == open(method_table.__file__, encoding="utf-8").read()


def test_registry_entries_run_their_modules_functions_when_called():
    """The registry's entries come from the light table; a function is its module's own, loaded when first called."""
    import pickle

    from simulator.baselines.compiled import METHODS as COMPILED
    from simulator.methods import Deferred

    spec = method_spec("sequential_4")
    assert isinstance(spec.rule, Deferred)
    assert pickle.loads(pickle.dumps(spec.rule)).name == "sequential_4"
    own = {s.name: s for s in COMPILED}["sequential_4"]
    arr = dag_arrays(load_pool_for_registry(), 0, CostSetting())
    assert repr(spec.rule(arr)) == repr(own.rule(arr))
    variant = method_spec("mc_portfolio_rollout[crn]")
    with pytest.raises(ConfigError, match="M"):
        method_spec("mc_portfolio_rollout[M=0]")  # check_params: MCPP's own check, through its module
    assert variant.factory.name == "mc_portfolio_rollout" and variant.params == {"evaluation": "crn"}


def load_pool_for_registry():
    import os

    return load_pool(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                                  "example_pool.jsonl"))  # fmt: skip


def test_naming_and_checking_methods_imports_no_kernel_module():
    """The settings check (METHOD_SET, BUDGET_COST_MODE, LATENCY_DIST, ...) imports neither numba nor numpy."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import os, sys\nfrom harness import variables\n"
            "env = {**os.environ, 'METHOD_SET': 'all,further,MCPP', 'BUDGET_COST_MODE': 'money', 'LATENCY_DIST': 'gamma'}\n"
            "for action in ('local', 'prepare'):\n    variables.check_environment(env, action)\n"
            "from simulator.methods import resolve_methods, method_spec, is_baseline\n"
            "resolve_methods('all'); method_spec('MCPP'); is_baseline('uniform')\n"
            "import harness.analyze, harness.plots, harness.merge, harness.worker\n"
            "print(sorted(m for m in ('numba', 'numpy', 'simulator.mcpp.policy', 'simulator.baselines.compiled') "
            "if m in sys.modules))")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("METHOD_SET", "BUDGET_COST_MODE", "LATENCY_DIST")}
    r = subprocess.run([sys.executable, "-c", code], cwd=root, env={**env, "PYTHONPATH": root}, capture_output=True,
                       text=True, check=True)  # fmt: skip
    # the analysis needs numpy (pandas), never numba nor the kernels
    assert r.stdout.split("\n")[-2] == "['numpy']", r.stdout + r.stderr


def test_the_light_termination_reasons_are_the_event_loops():
    from simulator.engine.loop import REASONS as LOOP
    from simulator.engine.reasons import REASONS

    assert REASONS == LOOP


def test_the_light_cost_mode_and_latency_names_are_the_charges_and_arrays_ones():
    from simulator.costs import arrays, charges, modes

    assert charges.COST_MODES == modes.COST_MODES and arrays.LATENCY_DISTS == modes.LATENCY_DISTS
    assert charges.normalize_cost_mode("money") == "output_money_cost_mean"

"""Remaining-DAG graph routines (orders, tie-breaks, enumeration cap), method names and parameter checks.

The behaviour pinned here is described in docs/further_baselines.md (sections 1, 2, 4 and 5).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from simulator.baselines.further.graph import all_paths, critical_path, dag_value, top_k_paths, topo_order
from simulator.baselines.further.inputs import legacy_inputs
from simulator.baselines.further.loader import FIX_CLAMP_A, FIX_LAMBERT1, FIX_RCUR0, FIX_UNITS, LoaderParams
from simulator.baselines.further.variants import (
    ALL_FURTHER_METHODS,
    FURTHER_METHOD_SETS,
    FURTHER_METHODS,
    FurtherParams,
    check_deadline_params,
    check_loader_params,
    resolve_further_params,
    variant,
)
from simulator.pools.pool import pool_from_objects
from tests.further_dags import DIAMOND, arrays, graph, pool_line


def _csr(g):
    return g.parent_ptr, g.parent_idx, g.child_ptr, g.child_idx


def _paths(nodes, ptr):
    return [list(nodes[ptr[k] : ptr[k + 1]]) for k in range(len(ptr) - 1)]


def test_remaining_dag_orders_and_tie_breaks():
    g = graph([[], [0], [0], [1, 2]])
    alive = np.ones(4, bool)
    order, count = topo_order(*_csr(g), alive)
    assert list(order[:count]) == [0, 1, 2, 3]  # FIFO, children in list order
    eq = np.array([1.0, 2.0, 2.0, 1.0])
    assert list(critical_path(*_csr(g), alive, order, count, eq)) == [0, 1, 3]  # first child on ties
    assert dag_value(*_csr(g), alive, order, count, eq) == 4.0
    # node 0 completed: roots 1 and 2 tie, the first in pool order starts the critical path
    alive = np.array([False, True, True, True])
    order, count = topo_order(*_csr(g), alive)
    assert count == 3 and list(critical_path(*_csr(g), alive, order, count, eq)) == [1, 3]
    assert _paths(*all_paths(*_csr(g), alive, 10)[:2]) == [[1, 3], [2, 3]]
    empty = np.zeros(4, bool)
    order, count = topo_order(*_csr(g), empty)
    assert count == 0 and dag_value(*_csr(g), empty, order, count, eq) == 0.0
    assert critical_path(*_csr(g), empty, order, count, eq).shape == (0,)


def test_top_k_halving_stops_on_a_repeat():
    g = graph([[], [0], [0], [1, 2]])
    alive = np.ones(4, bool)
    order, count = topo_order(*_csr(g), alive)
    heavy = np.array([1.0, 10.0, 1.0, 1.0])  # the heavy branch stays critical after halving
    assert _paths(*top_k_paths(*_csr(g), alive, order, count, heavy, 4)) == [[0, 1, 3]]
    even = np.array([1.0, 2.0, 1.9, 1.0])  # halving makes the other branch critical
    assert _paths(*top_k_paths(*_csr(g), alive, order, count, even, 4)) == [[0, 1, 3], [0, 2, 3]]


def test_all_paths_cap_semantics():
    g = graph([[], [0], [0], [1, 2]])
    alive = np.ones(4, bool)
    nodes, ptr, aborted = all_paths(*_csr(g), alive, 2)
    assert not aborted and _paths(nodes, ptr) == [[0, 1, 3], [0, 2, 3]]  # exactly cap paths: fine
    assert all_paths(*_csr(g), alive, 1)[2]  # more than cap: aborted
    single = graph([[]])
    assert _paths(*all_paths(*_csr(single), np.ones(1, bool), 5)[:2]) == [[0]]


def test_wide_dag_beyond_5000_paths_aborts_quickly():
    width, layers = 9, 4  # 9^4 = 6561 paths
    parents = [[] for _ in range(width)]
    for layer in range(1, layers):
        parents += [list(range((layer - 1) * width, layer * width)) for _ in range(width)]
    g = graph(parents)
    assert all_paths(*_csr(g), np.ones(len(parents), bool), 5000)[2]
    assert not all_paths(*_csr(g), np.ones(len(parents), bool), 6561)[2]


def test_method_names_and_sets():
    assert FURTHER_METHOD_SETS["further"] == FURTHER_METHODS
    assert FURTHER_METHODS == (
        "loader_static", "loader_dual", "loader_dual_all_paths", "loader_dual_colgen", "loader_static_bf",
        "loader_dual_bf", "deadline_static", "deadline_receding",
    )  # fmt: skip
    assert len(set(ALL_FURTHER_METHODS)) == len(ALL_FURTHER_METHODS)
    assert variant("loader_dual").fixes == 0 and not variant("deadline_static").use_kappa
    assert variant("loader_dual_units").fixes == FIX_UNITS
    assert variant("loader_static_rcur0").fixes == FIX_RCUR0
    assert variant("loader_dual_bf_clamp").fixes == FIX_CLAMP_A
    assert variant("loader_dual_colgen_lambert1").fixes == FIX_LAMBERT1
    assert variant("loader_static_fixed").fixes == FIX_UNITS | FIX_RCUR0 | FIX_CLAMP_A | FIX_LAMBERT1
    assert variant("loader_dual_fixed").fixes == FIX_UNITS | FIX_CLAMP_A | FIX_LAMBERT1
    assert variant("deadline_receding_kappa").use_kappa and variant("deadline_static_fixed").use_kappa
    assert variant("deadline_static_kappa").corrections == ("kappa",)
    assert "loader_dual_rcur0" not in ALL_FURTHER_METHODS  # `_rcur0` concerns the static policies only
    with pytest.raises(ConfigError, match="did you mean 'loader_dual_units'"):
        variant("loader_dual_unit")


def test_parameter_checks_refuse_bad_settings():
    with pytest.raises(ConfigError, match=r"^eta_beta \(x\): expected a finite number > 0, got -0.1$"):
        check_loader_params({"eta_beta": -0.1}, "x")
    with pytest.raises(ConfigError, match="max_cg_iters.*expected an integer >= 1, got 0"):
        check_loader_params({"max_cg_iters": 0})
    with pytest.raises(ConfigError, match="max_dual_iters.*got 0"):
        check_loader_params({"max_dual_iters": 0})
    with pytest.raises(ConfigError, match="unknown LOADER parameter"):
        check_loader_params({"eta": 1})
    with pytest.raises(ConfigError, match="dual_lr.*> 0"):
        check_deadline_params({"dual_lr": -1})
    with pytest.raises(ConfigError, match="unknown value 'cubic'"):
        check_deadline_params({"theta_grid_spacing": "cubic"})
    assert check_deadline_params({"theta_grid_spacing": "lin"}).theta_grid_spacing == "linear"
    assert check_deadline_params({"budget_reservation_mode": "0"}).budget_reservation_mode == "hard"
    assert check_deadline_params({"theta_grid_size": 1}).theta_grid_size == 2  # raised to 2, as published
    assert check_loader_params({"max_cg_iters": 3}).max_cg_iters == 3


def test_environment_resolution(tmp_path):
    assert resolve_further_params({}) == FurtherParams()
    env = {
        "DEADLINE_THETA_GRID_SIZE": "5",
        "DEADLINE_THETA_GRID_SPACING": "linear",
        "DEADLINE_BUDGET_RESERVATION_MODE": "deadline_adaptive",
        "DEADLINE_BUDGET_RESERVATION_C": "1.5",
        "DEADLINE_BUDGET_RESERVATION_ALPHA": "0.25",
        "DEADLINE_TRACE": "1",
    }
    fp = resolve_further_params(env)
    assert (fp.deadline.theta_grid_size, fp.deadline.theta_grid_spacing) == (5, "linear")
    assert fp.deadline.budget_reservation_mode == "adaptive" and fp.deadline.budget_reservation_c == 1.5
    assert fp.trace == "theta"
    assert FurtherParams.from_json(json.loads(json.dumps(fp.to_json()))) == fp
    for var, val, msg in [
        ("DEADLINE_THETA_GRID_SIZE", "abc", "DEADLINE_THETA_GRID_SIZE (environment): expected an integer"),
        ("DEADLINE_BUDGET_RESERVATION_C", "-1", "DEADLINE_BUDGET_RESERVATION_C (environment): expected a finite number >= 0"),
        ("DEADLINE_BUDGET_RESERVATION_ALPHA", "1.5", "<= 1"),
        ("DEADLINE_BUDGET_RESERVATION_MODE", "soft", "unknown value 'soft'"),
        ("DEADLINE_THETA_GRID_SPACING", "geo", "DEADLINE_THETA_GRID_SPACING (environment): unknown value"),
        ("DEADLINE_TRACE_LEVEL", "all", "DEADLINE_TRACE_LEVEL"),
    ]:  # fmt: skip
        with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            resolve_further_params({var: val})
    good = tmp_path / "cg.json"
    good.write_text(json.dumps({"max_cg_iters": 3, "eta_beta": 0.1}))
    fp = resolve_further_params({"LOADER_COLGEN_PARAMS_PATH": str(good)})
    assert fp.colgen == LoaderParams(max_cg_iters=3, eta_beta=0.1) and fp.loader == LoaderParams()
    for content, msg in [
        ({"eta_lambda": -2}, "eta_lambda.*> 0"),
        ({"inner_dual_iters": 0}, "inner_dual_iters.*>= 1"),
        ({"n_restarts": 2}, "unknown column-generation parameter"),
        ([1, 2], "must hold a JSON object"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(content))
        with pytest.raises(ConfigError, match=msg):
            resolve_further_params({"LOADER_COLGEN_PARAMS_PATH": str(bad)})
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_further_params({"LOADER_COLGEN_PARAMS_PATH": str(tmp_path / "missing.json")})


def test_unavailable_legacy_model_is_refused_naming_dag_and_node():
    """An unavailable legacy model is refused, naming the DAG and the node.

    The pool loader already falls back to an available model for the legacy
    one; a baseline suite re-targeting every node to one model can still
    point at a model a node lacks.
    """
    from simulator.costs.arrays import CostSetting, build_arrays

    line = pool_line(DIAMOND)
    line["model_ids"] = ["30B_ins", "4B_ins"]
    for nd in line["nodes"]:
        tpl = nd.pop("template")
        nd["model_templates"] = {"30B_ins": tpl, "4B_ins": dict(tpl, lat_mean=5.0)}
    line["nodes"][2]["model_templates"]["30B_ins"]["lat_mean"] = float("inf")
    arr = build_arrays(pool_from_objects([line])[0], CostSetting(legacy_model="30B_ins"))
    with pytest.raises(ConfigError, match=r"^DAG 7, node 2: loader_dual needs finite statistics"):
        legacy_inputs(arr, "loader_dual", 7)
    ok = legacy_inputs(arrays(DIAMOND), "loader_dual", 0)
    np.testing.assert_allclose(ok.kappa, [0.00064, 0.0024, 0.00048, 0.00096])

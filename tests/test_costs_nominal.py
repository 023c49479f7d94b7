"""Cost modes, prices, nominal scales and parametric latency draws."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from simulator.base.rng import make_key
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.charges import DEFAULT_PRICES, load_price_table, normalize_cost_mode
from simulator.costs.nominal import attempts_for_95, nominal_budget, nominal_deadline
from simulator.engine.loop import sample_latency
from simulator.pools.pool import pool_from_objects
from simulator.simulate import simulate_baseline
from tests.dags import chain_dag, make_node


def _arr(dag, **kw):
    return dag_arrays(pool_from_objects([dag]), 0, CostSetting(**kw))


def multi_model_dag():
    node = make_node(0, [], [], rows=None)
    del node["template"]
    node["model_templates"] = {
        "4B_ins": {"success_prob": 0.5, "lat_mean": 2.0, "lat_std": 0.0, "cost_mean": 9.0, "token_cost_mean": 100.0},
        "30B_ins": {"success_prob": 0.8, "lat_mean": 4.0, "lat_std": 0.0, "cost_mean": 9.0, "token_cost_mean": 200.0},
    }
    node["empirical_samples_by_model"] = {
        "4B_ins": [{"latency": 1.0, "success": 1, "cost": 7.0, "token_cost": 1000.0}],
    }
    node["legacy_template_model"] = "30B_ins"
    return {"problem_id": "mm", "nodes": [node]}


def test_aliases_and_unknown_mode():
    assert normalize_cost_mode("token") == "token_cost_mean"
    assert normalize_cost_mode("money") == "output_money_cost_mean"
    assert normalize_cost_mode("cost") == "cost_mean"
    assert normalize_cost_mode("latency") == "lat_mean"
    with pytest.raises(ConfigError, match="unknown cost mode 'dollars'"):
        normalize_cost_mode("dollars")


@pytest.mark.parametrize("mode,row_charge,tmpl_charge,kappa_rows", [
    ("token_cost_mean", 1000.0, 200.0, 100.0),
    ("output_money_cost_mean", 1000.0 * 0.42 / 1e6, 200.0 * 0.8 / 1e6, 100.0 * 0.42 / 1e6),
    ("cost_mean", 7.0, 9.0, 7.0),
    ("lat_mean", 0.0, 4.0, 1.0),
])
def test_charges_in_each_mode(mode, row_charge, tmpl_charge, kappa_rows):
    arr = _arr(multi_model_dag(), cost_mode=mode)
    j4, j30 = 0, 1
    assert math.isclose(arr.row_charge[0], row_charge)
    assert math.isclose(arr.tmpl_charge[0, j30], tmpl_charge)
    # kappa: template token_cost_mean when present (token/money), else row means
    assert math.isclose(arr.kappa[0, j4], kappa_rows)
    assert arr.legacy[0] == j30


def test_latency_mode_charges_the_drawn_latency():
    arr = _arr(chain_dag(1, p=1.0, rows=[(3.5, 1, 100.0)]), cost_mode="latency")
    b = simulate_baseline(arr, "sequential", 10.0, range(3), 0, 0)
    assert np.allclose(b.total_cost, 3.5)


def test_price_file_overrides_and_missing_price(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"4B_ins": 1.0, "new_model": 3.0}))
    prices = load_price_table(f)
    assert prices["4B_ins"] == 1.0 and prices["new_model"] == 3.0 and prices["30B_ins"] == DEFAULT_PRICES["30B_ins"]
    arr = _arr(multi_model_dag(), cost_mode="money", prices=prices)
    assert math.isclose(arr.row_charge[0], 1000.0 / 1e6)
    # the single-model id 'default' is priced through the legacy model, else fails clearly
    with pytest.raises(ConfigError, match="no price for model 'default'"):
        _arr(chain_dag(1), cost_mode="money")
    arr = _arr(chain_dag(1), cost_mode="money", default_price_model="30B_ins")
    assert math.isclose(arr.tmpl_charge[0, 0], 100.0 * 0.8 / 1e6)
    d = chain_dag(1)
    d["nodes"][0]["legacy_template_model"] = "goedel32b"
    assert math.isclose(_arr(d, cost_mode="money").tmpl_charge[0, 0], 100.0 * 2.8 / 1e6)
    with pytest.raises(ConfigError, match="unknown_model"):
        d["nodes"][0]["legacy_template_model"] = "unknown_model"
        _arr(d, cost_mode="money")
    (tmp_path / "bad.json").write_text('{"a": -1}')
    with pytest.raises(ConfigError, match="bad.json"):
        load_price_table(tmp_path / "bad.json")


def test_nominal_scales_by_hand():
    # chain: p = 0.5 (5 attempts for 95%: ceil(ln .05 / ln .5) = 5), kappa 100; p = 1 -> 1 attempt
    d = chain_dag(2, p=0.5, lat=2.0)
    d["nodes"][1]["template"]["success_prob"] = 1.0
    d["nodes"][1]["template"]["lat_mean"] = 3.0
    arr = _arr(d)
    assert attempts_for_95(0.5) == 5 and attempts_for_95(1.0) == 1 and attempts_for_95(0.05) == 59
    assert nominal_budget(arr) == 5 * 100 + 1 * 100
    assert nominal_deadline(arr) == 2.0 / 0.5 + 3.0 / 1.0
    # fork: longest path wins
    fork = {"nodes": [make_node(0, [], [1, 2], p=1.0, lat=1.0), make_node(1, [0], [], p=0.5, lat=1.0),
                      make_node(2, [0], [], p=1.0, lat=5.0)]}
    assert nominal_deadline(_arr(fork)) == 6.0


def test_nominal_refuses_p_zero_naming_node():
    d = chain_dag(3, p=0.5)
    d["nodes"][2]["template"]["success_prob"] = 0.0
    arr = _arr(d)
    with pytest.raises(ConfigError, match="node 2 has success probability 0"):
        nominal_budget(arr, where="DAG 0: ")
    with pytest.raises(ConfigError, match="ratio mode"):
        nominal_deadline(arr)


@pytest.mark.parametrize("dist", [0, 1, 2])
def test_parametric_latency_moments(dist):
    mean, std, n = 4.0, 1.5, 40000
    xs = np.array([sample_latency(dist, mean, std, np.uint64(make_key(5, 0, t, 9, 0, 0, 0)), 1) for t in range(n)])
    # sample mean within 4 standard errors, sample std within 5%
    assert abs(xs.mean() - mean) < 4 * std / math.sqrt(n)
    assert abs(xs.std() / std - 1) < 0.05
    assert xs.min() >= 1e-3

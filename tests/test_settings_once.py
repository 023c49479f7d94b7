"""Settings are parsed once, where they enter, and passed down typed (``docs/simulator.md``).

The tests follow one shard's settings from the harness down to the engine
with a counter on :func:`simulator.costs.charges.normalize_cost_mode`: the cost mode
is parsed where it enters (the harness variable, the ``CostSetting``
constructor of the shard runner or the Python API), never again per DAG,
method, deadline or (node, model) -- and the records do not change.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from harness_util import config_env, diamond, write_pool

import simulator.costs.charges as costs
from harness.shards import part_records
from simulator.base.errors import ConfigError
from simulator.costs.arrays import CostSetting, build_arrays
from simulator.pools.pool import load_pool
from simulator.simulate import RunSettings, simulate_dag_budget

MODELS = {"m1": (0.6, 2.0, 100.0), "m2": (0.8, 3.0, 150.0)}


@pytest.fixture
def count_parses(monkeypatch):
    """Count calls of the cost mode parser, wherever a loaded module imported it from."""
    calls: list[object] = []
    original = costs.normalize_cost_mode

    def counting(mode):
        calls.append(mode)
        return original(mode)

    for mod in list(sys.modules.values()):
        name = getattr(mod, "__name__", "") or ""
        if name.split(".")[0] in ("simulator", "harness") and getattr(mod, "normalize_cost_mode", None) is original:
            monkeypatch.setattr(mod, "normalize_cost_mode", counting)
    return calls


def _stable(records: list[dict]) -> str:
    """The records without the measured times (planner wall clock), which differ from run to run."""
    return json.dumps(
        [{k: v for k, v in r.items() if "wall" not in k and not k.endswith("_ms")} for r in records], sort_keys=True
    )


def _pool(tmp_path, n=3):
    return write_pool(tmp_path / "pool.jsonl", [diamond(i, models=MODELS) for i in range(n)])


def test_cost_setting_holds_the_canonical_mode(count_parses):
    s = CostSetting(cost_mode="token")
    assert s.cost_mode == "token_cost_mean" and len(count_parses) == 1
    # a copy (the baseline suite's re-targeted setting) and a canonical name are not parsed again
    dataclasses.replace(s, legacy_model="m2")
    CostSetting(cost_mode="lat_mean")
    assert len(count_parses) == 1
    with pytest.raises(ConfigError, match="unknown cost mode 'dollars'"):
        CostSetting(cost_mode="dollars")
    with pytest.raises(ConfigError, match="unknown latency distribution 'weibull'"):
        CostSetting(latency_dist="weibull")


def test_charging_functions_take_only_canonical_modes():
    import numpy as np

    with pytest.raises(ValueError, match="not a canonical name"):
        costs.row_charges("token", np.zeros(1), np.zeros(1), 0.0)
    with pytest.raises(ValueError, match="not a canonical name"):
        costs.template_charge("money", 1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="not a canonical name"):
        costs.expected_attempt_cost("latency", 1.0, 1.0, 1.0, np.zeros(0), np.zeros(0), np.zeros(0), 1.0)


def test_python_api_parses_a_raw_mode_once_per_run(tmp_path, count_parses):
    """Several DAGs x methods x deadlines: one parse (at construction), same records as the canonical name."""
    path = _pool(tmp_path)
    methods = ["sequential", "uniform", "mc_portfolio_rollout"]
    mcpp = {"M": 2, "base_ks": "1", "max_candidate_actions": 2}

    def run(mode):
        pool = load_pool(path)
        settings = RunSettings(seed=3, cost=CostSetting(cost_mode=mode), mcpp=mcpp)
        out = []
        for i in range(len(pool)):
            out += simulate_dag_budget(pool, i, 800.0, [5.0, 20.0], methods, [0, 1], settings)
            s_m = dataclasses.replace(settings, cost=dataclasses.replace(settings.cost, legacy_model="m2"))
            out += simulate_dag_budget(pool, i, 800.0, [5.0, 20.0], methods[:2], [0, 1], s_m)
        return out

    aliased = run("tokens")
    assert count_parses == ["tokens"]
    assert {r["budget_cost_mode"] for r in aliased} == {"token_cost_mean"}
    assert {r["method"] for r in aliased} == set(methods)
    canonical = run("token_cost_mean")
    assert count_parses == ["tokens"]  # a canonical name is not parsed at all
    assert _stable(aliased) == _stable(canonical)


def test_harness_parses_the_mode_at_prepare_and_not_in_the_shard(tmp_path, count_parses):
    from harness.prepare import prepare
    from harness.shard_runner import run_shard

    env = config_env(tmp_path, _pool(tmp_path), N_EXEC_TRIALS=2, BUDGET_RATIOS="2", DEADLINE_RATIOS="1 3",
                     METHOD_SET="all", BASELINE_SUITE="m1,m2", BUDGET_COST_MODE="token", DAGS_PER_SHARD=3,
                     MC_PORTFOLIO_M=2, MC_PORTFOLIO_BASE_KS="1", MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=2)  # fmt: skip
    rd = prepare(env, quiet=True)
    assert rd.run["settings"]["cost_mode"] == "token_cost_mean"
    assert count_parses == ["token"]  # the harness variable, parsed once at the edge
    count_parses.clear()
    spec = rd.shards[0]
    assert spec.cost_mode == "token_cost_mean" and len(spec.dags) > 1
    run_shard(spec, log=lambda s: None)
    assert count_parses == []  # every DAG, method, deadline and suite model of the shard: no parse
    def records(sp):
        return [_stable(part_records(sp.dag_output(d))) for d in sp.dags]

    first = records(spec)
    methods = {r["method"] for r in part_records(spec.dag_output(spec.dags[0]))}
    assert {"mc_portfolio_rollout", "sequential", "sequential@m2"} <= methods
    # a shard given the alias (a hand-written worker command line): parsed once for the whole shard
    raw = dataclasses.replace(spec, cost_mode="tokens", out_dir=str(tmp_path / "again"), progress_file=None)
    run_shard(raw, log=lambda s: None)
    assert count_parses == ["tokens"]
    assert records(raw) == first


def test_build_arrays_reads_the_parsed_mode(tmp_path, count_parses):
    pool = load_pool(_pool(tmp_path, n=1))
    setting = CostSetting(cost_mode="latency")
    count_parses.clear()
    arr = build_arrays(pool[0], setting)
    assert count_parses == [] and arr.charge_is_latency

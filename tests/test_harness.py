"""Fast harness tests: grid expansion, validation before any work, shard specs, verification, statistics."""

from __future__ import annotations

import json
import math
import os

import pytest
from harness_util import ROOT, config_env, diamond, harness, small_pool, write_pool

from harness.config import resolve_config
from harness.grid import ABSOLUTE, RATIO, AxisValue, parse_map, resolve_grid
from harness.methods import method_labels
from harness.prepare import prepare
from harness.shards import ShardSpec, check_dag_output, compress_ints, expand_ints, part_records
from simulator.base.errors import ConfigError, PoolError, UserError

# ----------------------------------------------------------------------------- grid


def test_map_grid_with_both_separators():
    g = resolve_grid({"BUDGET_DEADLINE_VALUES_MAP": "2000:300,600; 4000:300|900|inf"})
    assert g.source == "map"
    assert [(grp.budget.value, [d.value for d in grp.deadlines]) for grp in g.groups] == [
        (2000.0, [300.0, 600.0]),
        (4000.0, [300.0, 900.0, math.inf]),
    ]
    assert all(c.budget.kind == ABSOLUTE and c.deadline.kind == ABSOLUTE for c in g.cells())
    assert len(g.cells()) == 5 and len({c.cell_id for c in g.cells()}) == 5


def test_map_has_priority_over_axes():
    g = resolve_grid({"BUDGET_DEADLINE_VALUES_MAP": "10:5", "BUDGET_VALUES": "1 2", "BUDGET_RATIOS": "3"})
    assert [c.cell_id for c in g.cells()] == ["B_10__D_5"]


def test_value_axes_crossed_and_mixed_with_ratios():
    g = resolve_grid({"BUDGET_VALUES": "1000, 2000", "DEADLINE_VALUES": "30 60"})
    assert len(g.cells()) == 4
    mixed = resolve_grid({"BUDGET_VALUES": "1000", "DEADLINE_RATIOS": "0.5 1"})
    assert [(c.budget.kind, c.deadline.kind) for c in mixed.cells()] == [(ABSOLUTE, RATIO)] * 2
    mixed2 = resolve_grid({"BUDGET_RATIOS": "2", "DEADLINE_VALUES": "100"})
    assert [(c.budget.kind, c.deadline.kind) for c in mixed2.cells()] == [(RATIO, ABSOLUTE)]


def test_default_grid_is_the_ratio_grid():
    g = resolve_grid({})
    assert [grp.budget.value for grp in g.groups] == [0.3, 0.5, 1.0, 2.0, 5.0, 10.0]
    assert all(len(grp.deadlines) == 1 and grp.deadlines[0] == AxisValue(RATIO, 1.0) for grp in g.groups)


@pytest.mark.parametrize(
    "text, words",
    [
        ("1000", "malformed"),
        ("1000:", "no deadlines"),
        (":5", "no budget"),
        ("abc:5", "budget in 'abc:5': expected a finite number > 0, got 'abc'"),
        ("1000:5,x", "deadline in '1000:5,x': expected a number > 0, got 'x'"),
        ("1000:5;1000:6", "two groups"),
        ("1000:5,5", "deadlines of group '1000:5,5': repeated value\\(s\\) '5'"),
        ("-1:5", "expected a finite number > 0, got '-1'"),
        ("1:2:3", "malformed"),
    ],
)
def test_malformed_map_is_refused_readably(text, words):
    with pytest.raises(ConfigError, match=words):
        parse_map(text)


def test_bad_axis_values_refused():
    with pytest.raises(ConfigError, match="BUDGET_RATIOS"):
        resolve_grid({"BUDGET_RATIOS": "0.5 zero"})
    with pytest.raises(ConfigError, match="BUDGET_VALUES \\(environment\\): repeated value\\(s\\) '1'"):
        resolve_grid({"BUDGET_VALUES": "1 1"})
    with pytest.raises(ConfigError, match="finite"):
        resolve_grid({"BUDGET_VALUES": "inf"})


def test_axis_value_tokens_round_trip():
    for v in (AxisValue(RATIO, 0.3), AxisValue(ABSOLUTE, 1e6), AxisValue(ABSOLUTE, math.inf)):
        assert AxisValue.parse_token(v.token()) == v
    assert AxisValue(RATIO, 2.0).realize(10.0) == 20.0
    assert AxisValue(ABSOLUTE, 7.0).realize(None) == 7.0


# ----------------------------------------------------------------------------- validation


def _env(tmp_path, pool=None, **kw):
    pool = pool or small_pool(tmp_path)
    return config_env(tmp_path, pool, **kw)


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"METHOD_SET": "sequential,telepathy"}, "unknown method"),
        ({"BUDGET_COST_MODE": "bananas"}, "unknown cost mode"),
        ({"BUDGET_DEADLINE_VALUES_MAP": "100:"}, "no deadlines"),
        ({"LATENCY_DIST": "cauchy"}, "LATENCY_DIST"),
        ({"N_EXEC_TRIALS": "many"}, "N_EXEC_TRIALS"),
        ({"N_DAGS": "50"}, "N_DAGS=50"),
        ({"BASELINE_SUITE": "gpt9"}, "BASELINE_SUITE"),
        ({"MC_PORTFOLIO_M": "0", "METHOD_SET": "all"}, "MCPP parameter M"),
        ({"PLANNING_NOISE_COST_SIGMA": "-1"}, "PLANNING_NOISE_COST_SIGMA"),
        ({"DAG_POOL_PATH": "/nonexistent/pool.jsonl"}, "pool file not found"),
    ],
)
def test_bad_configuration_refused_before_work(tmp_path, overrides, words):
    env = _env(tmp_path, **overrides)
    with pytest.raises(UserError, match=words):
        prepare(env, quiet=True)
    assert not os.path.exists(tmp_path / "runs" / "t" / "jobs_list.txt")


def test_index_outside_the_pool(tmp_path):
    idx = tmp_path / "idx.json"
    idx.write_text(json.dumps({"dag_indices": [0, 99]}))
    with pytest.raises(PoolError, match="index 99") as e:
        prepare(_env(tmp_path, USE_DAG_INDICES_FILE=str(idx)), quiet=True)
    assert str(idx) in str(e.value)


def test_money_budget_on_pool_without_prices(tmp_path):
    models = {"mystery7b": (0.6, 2.0, 100.0)}
    pool = write_pool(tmp_path / "p.jsonl", [diamond(i, models=models) for i in range(2)])
    with pytest.raises(ConfigError, match="no price for model 'mystery7b'"):
        prepare(_env(tmp_path, pool, BUDGET_COST_MODE="money", BUDGET_VALUES="0.01"), quiet=True)
    # a price file makes it valid
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"mystery7b": 1.5}))
    cfg = resolve_config(_env(tmp_path, pool, BUDGET_COST_MODE="money", BUDGET_VALUES="0.01", PRICE_FILE=str(prices)))
    assert cfg.prices["mystery7b"] == 1.5 and cfg.cost_mode == "output_money_cost_mean"


def test_ratio_grid_on_dag_with_zero_success(tmp_path):
    dags = [diamond(0), diamond(1)]
    dags[1]["nodes"][2]["template"]["success_prob"] = 0.0
    pool = write_pool(tmp_path / "p.jsonl", dags)
    with pytest.raises(ConfigError) as e:
        prepare(_env(tmp_path, pool), quiet=True)
    msg = str(e.value)
    assert "DAG 1" in msg and "node 2" in msg and "success probability 0" in msg
    # absolute values work on the same pool
    rd = prepare(_env(tmp_path, pool, BUDGET_VALUES="500", DEADLINE_VALUES="20"), quiet=True)
    assert os.path.exists(rd.jobs_list)


def test_cli_prints_one_readable_line_and_exits_nonzero(tmp_path):
    proc = harness("prepare", _env(tmp_path, METHOD_SET="nope"), check=False)
    assert proc.returncode != 0
    assert proc.stderr.startswith("error: METHOD_SET (environment): unknown method(s) 'nope'")
    assert "Traceback" not in proc.stderr


def test_prepare_writes_self_contained_jobs_and_refuses_a_different_config(tmp_path):
    env = _env(tmp_path, MC_PORTFOLIO_M="8", DAGS_PER_SHARD="4")
    rd = prepare(env, quiet=True)
    run = json.loads(open(rd.run_json).read())
    lines = rd.job_lines()
    assert len(lines) == len(run["shards"]) == 2  # 2 budgets x 1 slice of 4 DAGs (baselines only)
    assert "--seed 42" in lines[0] and "--trials 5" in lines[0] and "--methods sequential," in lines[0]
    assert run["pool"]["sha256"] and run["environment"]["versions"]["numpy"]
    # same config again: fine, same fingerprint
    assert prepare(env, quiet=True).run["fingerprint"] == run["fingerprint"]
    # a different config is refused, naming what differs
    with pytest.raises(ConfigError, match="seed: prepared 42, now 7"):
        prepare({**env, "SEED": "7"}, quiet=True)
    # a finished output survives --force (archived)
    os.makedirs(os.path.join(rd.outputs, "b00"), exist_ok=True)
    marker = os.path.join(rd.outputs, "b00", "dag_000000.jsonl")
    open(marker, "w").write("x\n")
    rd2 = prepare({**env, "SEED": "7"}, force=True, quiet=True)
    archived = [os.path.join(dp, f) for dp, _, fs in os.walk(rd2.p("archive")) for f in fs]
    assert any(p.endswith("outputs/b00/dag_000000.jsonl") for p in archived)
    assert rd2.run["settings"]["seed"] == 7


def test_mcpp_settings_go_into_job_lines(tmp_path):
    env = _env(tmp_path, METHOD_SET="mcpp", MC_PORTFOLIO_M="8", MC_PORTFOLIO_BASE_KS="1,4",
               PLANNING_NOISE_LATENCY_SIGMA="0.2", PLANNING_NOISE_SEED="3")  # fmt: skip
    rd = prepare(env, quiet=True)
    line = rd.job_lines()[0]
    spec = rd.shards[0]
    assert spec.mcpp["M"] == 8 and spec.mcpp["base_ks"] == [1, 4] and spec.mcpp["max_candidate_actions"] == 2048
    assert spec.planning == {"noise_latency_sigma": 0.2, "noise_seed": 3}
    assert '"M":8' in line and "noise_latency_sigma" in line
    assert rd.run["settings"]["planning"] == spec.planning


# ----------------------------------------------------------------------------- shards


def test_int_ranges_round_trip():
    vals = [0, 1, 2, 5, 7, 8, 3]
    assert compress_ints(vals) == "0-2,5,7-8,3"
    assert expand_ints(compress_ints(vals)) == vals


def _spec(tmp_path, **kw):
    base = dict(shard=3, group="b01", budget=AxisValue(RATIO, 0.5),
                deadlines=[AxisValue(RATIO, 1.0), AxisValue(ABSOLUTE, 30.0)], dags=[0, 1, 2, 7],
                pool=str(tmp_path / "p.jsonl"), pool_sha256="ab", out_dir=str(tmp_path / "o"), n_trials=3, seed=1,
                cost_mode="token_cost_mean", latency_dist="lognormal", methods=["sequential", "uniform"],
                baseline_suite=["m1"], mcpp={"M": 8}, planning={"noise_seed": 1})  # fmt: skip
    base.update(kw)
    return ShardSpec(**base)


def test_shard_spec_round_trips_through_its_command_line(tmp_path):
    import argparse

    from harness.shards import add_shard_arguments, spec_from_args

    spec = _spec(tmp_path)
    ap = argparse.ArgumentParser()
    add_shard_arguments(ap)
    back = spec_from_args(ap.parse_args(spec.to_argv()))
    assert back == spec
    assert ShardSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_method_labels_with_suite():
    labels = method_labels(["sequential", "uniform", "mc_portfolio_rollout"], ["4B", "30B"])
    assert [m.label for m in labels] == [
        "sequential", "uniform", "mc_portfolio_rollout", "sequential@4B", "uniform@4B", "sequential@30B",
        "uniform@30B",
    ]  # fmt: skip
    assert labels[3].baseline_model == "4B" and labels[3].method == "sequential"


def test_check_dag_output_detects_truncation_and_gaps(tmp_path):
    spec = _spec(tmp_path, baseline_suite=[])
    expected = spec.expected_keys()
    recs = [{"dag_idx": 7, "cell": c, "method": m, "exec_trial": t} for (c, m, t) in sorted(expected)]
    path = tmp_path / "dag.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in recs)
    path.write_text(text)
    assert check_dag_output(str(path), 7, expected).ok
    assert check_dag_output(str(path), 8, expected).problem == "unexpected records"
    path.write_text(text[: len(text) - 10])  # cut inside the last line
    assert check_dag_output(str(path), 7, expected).problem == "truncated"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs[:-2]))  # cut at a line boundary
    assert check_dag_output(str(path), 7, expected).problem == "incomplete"
    path.write_text(text + json.dumps(recs[0]) + "\n")
    assert check_dag_output(str(path), 7, expected).problem == "unexpected records"
    assert check_dag_output(str(tmp_path / "none.jsonl"), 7, expected).problem == "missing"


# ----------------------------------------------------------------------------- robustness settings


def test_planning_pool_checked_recorded_and_used(tmp_path):
    from harness.shard_runner import run_shard
    from harness.shards import verify_shard

    pool = small_pool(tmp_path, n=2)
    bad = write_pool(tmp_path / "plan_bad.jsonl", [diamond(0)])
    env = _env(tmp_path, pool, METHOD_SET="mcpp", N_EXEC_TRIALS=1, BUDGET_RATIOS="2", DEADLINE_RATIOS="2",
               MC_PORTFOLIO_M=2, MC_PORTFOLIO_BASE_KS="1", MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=2)  # fmt: skip
    with pytest.raises(ConfigError, match="aligned row by row"):
        prepare({**env, "PLANNING_POOL_PATH": bad}, quiet=True)
    # aligned: same rows, node ids and models, different statistics
    plan_dags = [diamond(i) for i in range(2)]
    for d in plan_dags:
        for n in d["nodes"]:
            n["template"]["success_prob"] = 0.99
    plan = write_pool(tmp_path / "plan.jsonl", plan_dags)
    rd = prepare({**env, "PLANNING_POOL_PATH": plan}, quiet=True)
    assert rd.run["settings"]["planning"] == {"pool": plan}
    assert plan in rd.job_lines()[0]
    spec = rd.shards[0]
    run_shard(spec, log=lambda s: None)
    assert all(c.ok for c in verify_shard(spec).values())
    rec = part_records(spec.dag_output(0))[0]
    assert rec["method"] == "mc_portfolio_rollout" and rec["deadline_enforced"]


def test_planning_noise_recorded_and_run(tmp_path):
    from harness.shard_runner import run_shard
    from harness.shards import verify_shard

    pool = small_pool(tmp_path, n=1)
    env = _env(tmp_path, pool, METHOD_SET="mcpp", N_EXEC_TRIALS=2, BUDGET_RATIOS="2", DEADLINE_RATIOS="2",
               MC_PORTFOLIO_M=2, MC_PORTFOLIO_BASE_KS="1", MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=2,
               PLANNING_NOISE_LATENCY_SIGMA="0.5", PLANNING_NOISE_LOGIT_SIGMA="1", PLANNING_NOISE_SEED="7")  # fmt: skip
    rd = prepare(env, quiet=True)
    planning = rd.run["settings"]["planning"]
    assert planning["noise_latency_sigma"] == 0.5 and planning["noise_seed"] == 7
    assert "noise_latency_sigma" in rd.job_lines()[0]
    spec = rd.shards[0]
    run_shard(spec, log=lambda s: None)
    assert all(c.ok for c in verify_shard(spec).values())
    recs = part_records(spec.dag_output(0))
    assert len(recs) == 2 and all(r["method"] == "mc_portfolio_rollout" for r in recs)


@pytest.mark.parametrize(
    "model_ids,message",
    [
        # the registry's check_dag hook: a portfolio position off the DAG
        ("7", r"DAG 0 .*MC_PORTFOLIO_MODEL_IDS: MCPP model position 7 out of range"),
        ("no_such_model", r"MC_PORTFOLIO_MODEL_IDS \(environment\): unknown model\(s\) 'no_such_model'"),
    ],
)
def test_bad_mcpp_models_refused_before_work(tmp_path, model_ids, message):
    """The harness asks every method's registry hook (``check_dag``) and checks the model names before any work."""
    from simulator.methods import method_spec

    assert method_spec("mc_portfolio_rollout").check_dag is not None
    pool = small_pool(tmp_path, n=1)
    env = _env(tmp_path, pool, METHOD_SET="mcpp", MC_PORTFOLIO_MODEL_IDS=model_ids)
    with pytest.raises(ConfigError, match=message):
        prepare(env, quiet=True)
    assert not os.path.exists(os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"], "jobs_list.txt"))


def test_status_after_local_says_it_is_finished_and_the_report_has_no_absolute_pool_path(tmp_path):
    pool = small_pool(tmp_path, n=2)
    env = config_env(tmp_path, pool, METHOD_SET="sequential,uniform", N_EXEC_TRIALS=2, BUDGET_RATIOS="1",
                     DEADLINE_RATIOS="1")  # fmt: skip
    harness("prepare", env)
    status = harness("status", env).stdout
    assert "merge" not in status.splitlines()[-1]  # nothing done yet: no next step about merging
    harness("local", env, "--no-progress")
    status = harness("status", env).stdout
    assert "merged and analysed" in status and "`run_experiment.sh merge`" not in status, status
    run_dir = os.path.join(env["RESULTS_ROOT"], env["RUN_NAME"])
    report = open(os.path.join(run_dir, "analysis", "report.md"), encoding="utf-8").read()
    assert "- pool: `pool.jsonl`" in report and str(tmp_path) not in report  # outside the repository: the file name
    os.remove(os.path.join(run_dir, "analysis", "report.md"))
    assert "`run_experiment.sh analyze`" in harness("status", env).stdout  # merged, not analysed


def test_report_shows_a_pool_inside_the_repository_relative_to_its_root():
    from harness.report import shown_path

    assert shown_path(os.path.join(ROOT, "examples", "example_pool.jsonl")) == "examples/example_pool.jsonl"
    assert shown_path("/somewhere/else/p.jsonl") == "p.jsonl"

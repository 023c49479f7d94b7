"""The stand-alone planner API and the plan / predict commands."""

from __future__ import annotations

import csv
import json

import pytest

from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_jsonl
from simulator.cli.planner import plan_main, predict_main
from simulator.engine.testing import layered_dag, node, tpl
from simulator.mcpp.api import InFlight, plan


def chain_line():
    t = {"A": tpl(0.5, lat=1.0, cost=10.0), "B": tpl(0.9, lat=1.0, cost=30.0)}
    return {"problem_id": "chain", "nodes": [node(10, [], [11], t), node(11, [10], [12], t), node(12, [11], [], t)]}


def test_plan_from_line_with_state():
    line = chain_line()
    res = plan(line, budget_left=200.0, time_left=10.0, completed=[10], params={"M": 64, "base_ks": "1,2"})
    assert list(res.action) == [11] and res.action[11][0] in ("A", "B") and res.action[11][1] in (1, 2)
    assert 0.0 <= res.estimate <= 1.0 and res.ready == [11]
    # node 11 running: nothing is ready -> no action, plan again later
    res = plan(line, 200.0, 10.0, completed=[10], inflight=[InFlight(11, "A", [0.5])])
    assert res.action == {} and res.mode == "waiting"
    res = plan(line, 200.0, 10.0, completed=[10, 11, 12])
    assert res.estimate == 1.0 and res.mode == "done"
    with pytest.raises(ConfigError):
        plan(line, 200.0, 10.0, completed=[11])  # completed before its parent
    with pytest.raises(ConfigError):
        plan(line, 200.0, 10.0, inflight=[("10", "Z", [1.0])])  # unknown model


def test_plan_and_predict_commands(tmp_path, capsys):
    pool = tmp_path / "pool.jsonl"
    atomic_write_jsonl(pool, [layered_dag(2, n_nodes=4, models=("a", "b"))])
    assert plan_main(["--pool", str(pool), "--budget-ratio", "1", "--deadline-ratio", "1", "--json",
                      "--mc-portfolio-m", "8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["candidates"] > 0 and 0.0 <= out["estimate"] <= 1.0 and out["action"]
    out_dir = tmp_path / "pred"
    assert predict_main(["--pool", str(pool), "--budget-ratios", "0.5", "1", "--deadline-ratios", "1",
                         "--trials", "4", "--out", str(out_dir), "--no-progress",
                         "--mc-portfolio-m", "4", "--mc-portfolio-max-candidate-actions", "20"]) == 0
    rows = list(csv.DictReader(open(out_dir / "predict.csv")))
    assert len(rows) == 2 and all(0 <= float(r["wilson_lo"]) <= float(r["wilson_hi"]) <= 1 for r in rows)
    assert (out_dir / "predict.png").stat().st_size > 1000
    assert json.loads((out_dir / "predict.json").read_text())["mcpp_params"]["M"] == 4

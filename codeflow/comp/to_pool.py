"""Convert judged CodeFlow-Comp harness files (the published pipeline's output) to a DAG pool.

A harness file is the Comp input (``dataset.py``) where each subproblem
also carries ``rollout_candidates`` (inference: ``rollout_id``, code, latency
and token fields), ``rollout_records`` (judging: the same latency fields,
``eval_latency_sec``, ``total_latency_sec``, ``harness_result``,
``pass_rate``, ``success``, maybe ``blocked_by_prereq_failure``),
``harness_result`` and ``selected_rollout_id``. One file holds one model's
rollouts; each problem becomes one pool line, following the published
conversion:

- one node per subproblem, ``node_id`` = its position; ``parents`` = the
  positions of its ``dependencies`` (unknown names ignored), ``children`` the
  inverse, both sorted; ``layer`` = the problem's largest ``depth`` - the
  node's ``depth`` when every depth is an int, else the position;
- with rollout records, one empirical row per record: ``success`` as int;
  ``latency`` = the batch latency (``infer_batch_latency_sec`` of the record,
  else of the candidate with the same ``rollout_id``), else the inference
  latency, else the total latency, each floored at 1e-9, else 0;
  ``token_cost`` = ``output_tokens`` (record, else candidate) floored at
  1e-9; ``cost`` = the token cost, else an explicit ``cost`` (floored), else
  ``total_tokens``, else prompt + output tokens, else the total latency.
  Template: mean success, mean latency, ``lat_std`` = max(population
  standard deviation, 1e-3), mean cost, ``token_cost_mean`` over the records
  that have a token cost (else null) and ``cost_source``. A records list with
  no usable record (an object with a numeric ``success``) gives one row with
  latency 1, success 0, cost 1;
- without records (judged only): success = mean of the 0/1 entries of
  ``harness_result``, else 0 when the node has tests, else 0.5; latency and
  cost proxies = max(tests, verdicts, 1), ``lat_std`` = max(0.2 x mean,
  1e-3); one row per verdict, else one row with success = [p >= 0.5];
- node ``meta``: ``name``, ``status`` (``success`` if a record succeeded,
  ``failed`` if records exist and none did; without records from
  ``harness_result``: all 1 -> success, any 0 -> failed, else unknown),
  ``harness_result``, ``n_rollouts``, ``num_tests``.

Usage::

    python -m codeflow.comp.to_pool judged_4B.json --out pools/comp_4B.jsonl --model 4B_ins
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path
from typing import Any

from codeflow.comp.dataset import comp_problem_id
from codeflow.dataset import read_json_list
from simulator.base import cliargs
from simulator.base.errors import ConfigError, UserError, cli_entry
from simulator.base.io_utils import atomic_write_json
from simulator.base.outputs import check_output_path
from simulator.base.validation import check_int_field, json_type
from simulator.pools.graph import graph_from_named
from simulator.pools.pool import write_pool
from simulator.pools.stats import template_from_columns

log = logging.getLogger(__name__)

VALUE_FLOOR = 1e-9  # latencies and costs of a record
STD_FLOOR = 1e-3  # lat_std of a template
LATENCY_FIELDS = ("infer_latency_sec", "infer_batch_latency_sec", "infer_per_rollout_latency_sec",
                  "eval_latency_sec", "total_latency_sec", "latency_observation")
#: weakest first: a node's cost_source is the weakest one any of its rows used
COST_SOURCE_RANK = {"output_tokens": 0, "explicit_cost": 1, "latency_fallback": 2}


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _field(record: dict[str, Any], cand: dict[str, Any] | None, key: str) -> float | None:
    """A numeric field of the record, else of its candidate."""
    v = _num(record.get(key))
    if v is None and cand is not None:
        v = _num(cand.get(key))
    return v


def record_row(record: dict[str, Any], cand: dict[str, Any] | None) -> dict[str, Any]:
    """The empirical row of one usable rollout record (``cand``: its candidate, if any)."""
    lat = 0.0
    for key in ("infer_batch_latency_sec", "infer_latency_sec", "total_latency_sec"):
        v = _field(record, cand, key)
        if v is not None:
            lat = max(v, VALUE_FLOOR)
            break
    tok = _field(record, cand, "output_tokens")
    tok = None if tok is None else max(tok, VALUE_FLOOR)
    explicit = _field(record, cand, "cost")
    total_tokens = _field(record, cand, "total_tokens")
    total_lat = _field(record, cand, "total_latency_sec")
    if tok is not None:
        cost, source, detail = tok, "output_tokens", "output_tokens"
    elif explicit is not None:
        cost, source, detail = explicit, "explicit_cost", "explicit_cost"
    elif total_tokens is not None:
        cost, source, detail = total_tokens, "latency_fallback", "total_tokens"
    else:  # (prompt + output tokens, the next rule, needs output tokens, which came first)
        cost = total_lat if total_lat is not None else lat
        source, detail = "latency_fallback", "total_latency"
    row: dict[str, Any] = {"rollout_id": record.get("rollout_id")}
    for key in LATENCY_FIELDS:
        if key in record:
            row[key] = record[key]
        elif cand is not None and key in cand:
            row[key] = cand[key]
    s = _num(record.get("success"))
    row.update({
        "latency": lat,
        "success": 1 if s is not None and s >= 1 else 0,
        "token_cost": tok,
        "cost": max(cost, VALUE_FLOOR),
        "pass_rate": _num(record.get("pass_rate")),
        "cost_source": source,
        "cost_detail": detail,
    })
    if record.get("blocked_by_prereq_failure"):
        row["blocked_by_prereq_failure"] = True
    return row


def _usable(record: Any) -> bool:
    return isinstance(record, dict) and _num(record.get("success")) is not None


def _template(rows: list[dict[str, Any]], cost_source: str) -> dict[str, Any]:
    lat = [r["latency"] for r in rows]
    tpl: dict[str, Any] = template_from_columns(lat, [r["success"] for r in rows],
                                                [r["cost"] for r in rows],
                                                [r["cost"] for r in rows])
    toks = [r["token_cost"] for r in rows if r.get("token_cost") is not None]
    tpl["lat_std"] = max(tpl["lat_std"], STD_FLOOR)
    tpl["token_cost_mean"] = math.fsum(toks) / len(toks) if toks else None
    tpl["cost_source"] = cost_source
    return tpl


def _verdicts(harness_result: Any) -> list[int]:
    if not isinstance(harness_result, list):
        return []
    return [int(v) for v in harness_result if isinstance(v, (bool, int, float)) and v in (0, 1)]


def node_statistics(sub: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """(template, empirical rows, status) of one judged subproblem."""
    records = sub.get("rollout_records")
    records = records if isinstance(records, list) else []
    cands = {c.get("rollout_id"): c for c in sub.get("rollout_candidates") or []
             if isinstance(c, dict) and "rollout_id" in c}
    n_tests = len(sub.get("test_code") or [])
    if records:
        usable = [r for r in records if _usable(r)]
        if usable:
            rows = [record_row(r, cands.get(r.get("rollout_id"))) for r in usable]
            source = max((r["cost_source"] for r in rows), key=COST_SOURCE_RANK.__getitem__)
        else:
            rows = [{"latency": 1.0, "success": 0, "token_cost": None, "cost": 1.0,
                     "cost_source": "latency_fallback", "note": "no usable rollout record"}]
            source = "latency_fallback"
        status = "success" if any(r["success"] for r in rows) else "failed"
        return _template(rows, source), rows, status
    verdicts = _verdicts(sub.get("harness_result"))
    p = math.fsum(verdicts) / len(verdicts) if verdicts else (0.0 if n_tests else 0.5)
    proxy = float(max(n_tests, len(verdicts), 1))
    tpl = {"success_prob": p, "lat_mean": proxy, "lat_std": max(0.2 * proxy, STD_FLOOR),
           "cost_mean": proxy, "token_cost_mean": None, "cost_source": "judged_only_proxy"}
    row = {"latency": proxy, "cost": proxy, "token_cost": None, "judged_only": True}
    rows = [{**row, "success": v} for v in verdicts] or [{**row, "success": int(p >= 0.5)}]
    hr = sub.get("harness_result")
    hr = hr if isinstance(hr, list) else []
    if hr and all(v == 1 for v in hr):
        status = "success"
    elif any(v == 0 for v in hr):
        status = "failed"
    else:
        status = "unknown"
    return tpl, rows, status


def _check_judged_fields(sub: dict[str, Any], where: str) -> None:
    """The judged fields of a subproblem have the published types (else one line, before any work)."""
    for key in ("rollout_records", "rollout_candidates"):
        v = sub.get(key)
        if v is not None and not isinstance(v, list):
            raise UserError(f"{where}: {key!r} must be a list, got {json_type(v)}")
        if isinstance(v, list) and not all(isinstance(x, dict) for x in v):
            bad = next(x for x in v if not isinstance(x, dict))
            raise UserError(f"{where}: every entry of {key!r} must be an object, got {json_type(bad)}")
    hr = sub.get("harness_result")
    if hr is not None:
        if not isinstance(hr, list):
            raise UserError(f"{where}: 'harness_result' must be a list of 0/1 verdicts, got {json_type(hr)} {hr!r}")
        bad = [v for v in hr if isinstance(v, bool) or v not in (0, 1)]
        if bad:
            raise UserError(f"{where}: every 'harness_result' verdict must be 0 or 1, got {bad[0]!r}")


def problem_to_dag(raw: Any, pos: int, source: str, model: str | None = None) -> dict[str, Any]:
    """The pool line of one judged problem (``pos``: its position in the harness file)."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: problem #{pos} is not an object")
    pid = comp_problem_id(raw)
    if pid is None:
        raise UserError(f"{source}: problem #{pos} has no 'problem-id' (or 'task_id')")
    where = f"{source}: problem {pid!r}"
    subs = raw.get("subproblems")
    if not isinstance(subs, list) or not subs:
        raise UserError(f"{where}: no 'subproblems' list")
    seen: set[str] = set()
    for k, s in enumerate(subs):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            raise UserError(f"{where}: subproblem #{k} has no 'name'")
        if not s["name"].strip():
            raise UserError(f"{where}: subproblem #{k} has an empty 'name'")
        _check_judged_fields(s, f"{where}, subproblem {s['name']!r}")
        if s["name"] in seen:
            raise UserError(f"{where}: subproblem {s['name']!r} appears twice")
        seen.add(s["name"])
    for s in subs:
        if not isinstance(s.get("dependencies") or [], list):
            raise UserError(f"{where}, subproblem {s['name']!r}: 'dependencies' is not a list")
    # the published conversion ignores a dependency on an unknown name (the shared builder refuses it)
    steps = [(s["name"], [d for d in s.get("dependencies") or [] if isinstance(d, str) and d in seen])
             for s in subs]
    graph = graph_from_named(steps, path=source, problem_id=pid, logger=log)
    parents = [sorted(ps) for ps in graph.parents]
    depths = [s.get("depth") for s in subs]
    int_depths = all(isinstance(d, int) and not isinstance(d, bool) for d in depths)
    top = max(depths) if int_depths else 0
    nodes = []
    for k, s in enumerate(subs):
        tpl, rows, status = node_statistics(s)
        hr = s.get("harness_result")
        records = s.get("rollout_records")
        n_rollouts = len(records) if isinstance(records, list) and records else len(
            s.get("rollout_candidates") or [])
        node: dict[str, Any] = {
            "node_id": k, "parents": parents[k], "children": graph.children[k],
            "layer": top - depths[k] if int_depths else k, "name": s["name"],
            "template": tpl, "empirical_samples": rows,
            "meta": {"name": s["name"], "status": status,
                     "harness_result": hr if isinstance(hr, list) else None,
                     "n_rollouts": n_rollouts, "num_tests": len(s.get("test_code") or [])},
        }
        if model is not None:
            node["legacy_template_model"] = model
        nodes.append(node)
    src_index = raw.get("_source_index")
    turns, depth = raw.get("overall-turns"), raw.get("overall-depth")
    try:
        for key, value in (("overall-turns", turns), ("_source_index", src_index)):
            if value is not None:
                check_int_field(value, key, lo=0)
    except ConfigError as exc:
        raise UserError(f"{where}: {exc}") from None
    dag: dict[str, Any] = {
        "dag_kind": "codeflow_comp", "source": source, "problem_id": pid,
        "codeflow_source_index": src_index if isinstance(src_index, int) else pos,
        "n_nodes": len(nodes),
        "overall_turns": turns if isinstance(turns, int) else len(nodes),
        "overall_depth": depth if isinstance(depth, int) else graph.overall_depth,
    }
    if model is not None:
        dag.update({"model": model, "baseline_model": model})
    dag["nodes"] = nodes
    return dag


def convert(inputs: list[str | Path], out: str | Path, model: str | None = None,
            index_out: str | Path | None = None) -> dict[str, Any]:
    """Convert harness files (concatenated, in order) into one pool; returns a summary."""
    out = Path(out)
    index_out = Path(index_out) if index_out else out.parent / "selected_dag_indices.json"
    check_output_path(out, inputs=inputs, flag="--out")  # before any work: an output never replaces an input
    check_output_path(index_out, inputs=(*inputs, out), flag="--index-out")
    dags: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for path in inputs:
        raw = read_json_list(path, "harness file")
        if not raw:
            raise UserError(f"{path}: the harness file holds no problem")
        for pos, problem in enumerate(raw):
            dag = problem_to_dag(problem, pos, str(path), model)
            pid = dag["problem_id"]
            if pid in seen:
                raise UserError(f"problem {pid!r} appears twice: in {seen[pid]} and {path}")
            seen[pid] = str(path)
            dags.append(dag)
    write_pool(out, dags)
    index = {"dag_indices": list(range(len(dags))), "problem_ids": [d["problem_id"] for d in dags],
             "sources": [str(p) for p in inputs]}
    atomic_write_json(index_out, index)
    return {"pool": str(out), "index_file": str(index_out), "dags_written": len(dags),
            "nodes": sum(d["n_nodes"] for d in dags), "model": model}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = cliargs.ArgumentParser(
        prog="python -m codeflow.comp.to_pool",
        description="Convert judged CodeFlow-Comp harness files (one model's rollouts) into a "
                    "DAG pool; join several models with build_aligned_union_dag_pools.py --pool.")
    ap.add_argument("inputs", type=cliargs.input_path(), nargs="+", metavar="HARNESS_JSON", help="judged harness file(s)")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, help="output pool (.jsonl)")
    ap.add_argument("--model", default=None,
                    help="model id recorded on the DAGs (model, baseline_model) and nodes "
                         "(legacy_template_model)")
    ap.add_argument("--index-out", type=cliargs.output_path(), default=None,
                    help="index file (default: selected_dag_indices.json next to the pool)")
    return ap.parse_args(argv)


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    s = convert(args.inputs, args.out, args.model, args.index_out)
    print(f"wrote {s['dags_written']} DAGs ({s['nodes']} nodes) to {s['pool']}; "
          f"index file {s['index_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

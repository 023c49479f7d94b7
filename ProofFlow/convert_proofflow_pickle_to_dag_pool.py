"""Convert completed ProofFlow run pickles into a DAG pool (one DAG per pickle).

Each proof step becomes a node; its dependencies become parents (a step that
depends on itself, which the benchmark contains 8 times, loses that self-loop
with a warning). A node's empirical rows are one attempt each:

- lemmas and theorem statements, which have prover attempts, use those:
  success = ``lean_verify`` (Lean accepted the proof, no ``sorry``);
- theorem conditions and definitions, which are only formalized, use the
  formalizer's attempts: success = ``lean_pass`` (the statement compiles).

Latency = the attempt's total time (inference + Lean check); ``token_cost`` and
``cost`` = its output tokens (the node's mean when an attempt lacks them, with
``token_cost_source: "node_mean"`` in the row). ``--semantic-gate T`` turns every
attempt of a node whose recorded semantic score is below T into a failure (the
formalization was judged unfaithful), marking the rows ``semantic_gated``.

Pickles are read with a restricted unpickler (``ProofFlow/safe_pickle.py``).

    python -m ProofFlow.convert_proofflow_pickle_to_dag_pool \\
        ProofFlow/source_pickles/*.pickle --out ProofFlow/pools/proofflow_real_2dag.jsonl
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

from ProofFlow.lean_check import classify_messages, parse_lean_json_output
from ProofFlow.safe_pickle import ProofItem, load_proofflow_pickle
from simulator.base import cliargs
from simulator.base.errors import PoolError, UserError, cli_entry
from simulator.base.validation import check_number, check_output_file
from simulator.pools.graph import graph_from_named
from simulator.pools.pool import MAX_POOL_VALUE, parse_dag
from simulator.pools.stats import template_from_rows

log = logging.getLogger("proofflow.convert")

DEFAULT_MODEL_ID = "goedel32b"
PROVER_KINDS = ("lemma", "theorem_statement")


def problem_id_from_path(path: str | os.PathLike) -> str:
    """``AI4MathInequality_18b.json.pickle`` -> ``AI4MathInequality_18b``."""
    name = Path(path).name
    for suffix in (".pickle", ".pkl", ".json"):
        name = name.removesuffix(suffix)
    return name


def _records(stage: Any) -> list[dict[str, Any]]:
    if not isinstance(stage, dict):
        return []
    recs = stage.get("rollout_records") or []
    return [r for r in recs if isinstance(r, dict)]


def _latency(rec: dict[str, Any]) -> float | None:
    """Total attempt time: ``total_latency_sec``, else inference + verification."""
    tot = rec.get("total_latency_sec")
    if isinstance(tot, (int, float)) and math.isfinite(tot):
        return float(tot)
    inf, ver = rec.get("infer_latency_sec"), rec.get("verify_latency_sec")
    if isinstance(inf, (int, float)) and isinstance(ver, (int, float)):
        return float(inf) + float(ver)
    lat = rec.get("latency_sec")
    return float(lat) if isinstance(lat, (int, float)) else None


def failure_reason(rec: dict[str, Any], success_field: str) -> str | None:
    """Why an attempt failed, from its recorded verdict and error log.

    ``lean_unavailable`` marks attempts the original run could not check
    (its Lean executable was missing): they are kept as recorded failures,
    so the pool matches the run, but they are counted in the node's meta.
    """
    if rec.get(success_field):
        return None
    msg = rec.get("error_msg")
    text = "\n".join(map(str, msg)) if isinstance(msg, list) else str(msg or "")
    if "Lean executable not found" in text:
        return "lean_unavailable"
    if "No Lean 4 code block found" in text:
        return "no_code"
    if rec.get("lean_pass") and success_field == "lean_verify":
        return "sorry"
    messages, _ = parse_lean_json_output(text)
    return classify_messages(messages)[3] or "unknown"


def _node_mean_tokens(recs: list[dict[str, Any]], stage: dict[str, Any]) -> float | None:
    toks = [r["output_tokens"] for r in recs if isinstance(r.get("output_tokens"), (int, float))]
    if toks:
        return math.fsum(toks) / len(toks)
    us = stage.get("usage_summary") or {}
    if us.get("n_calls") and isinstance(us.get("output_tokens"), (int, float)):
        return float(us["output_tokens"]) / float(us["n_calls"])
    return None


def _attempt_number(value: Any, what: str, error) -> float:
    """A finite attempt measurement in [0, MAX_POOL_VALUE] (what a pool row may hold)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and 0 <= value <= MAX_POOL_VALUE):
        raise error(f"{what} is {value!r}; expected a finite number in [0, {MAX_POOL_VALUE:g}]")
    return float(value)


def node_rows(
    item: ProofItem,
    problem_id: str,
    semantic_gate: float | None = None,
    *,
    path: str | os.PathLike | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Empirical rows of one proof step and a small ``meta`` dict describing them.

    Errors are :class:`PoolError` naming ``path`` (the pickle), the problem
    and the step id, and the attempt when one is at fault.
    """
    f = item.fields
    step = str(f.get("id"))

    def error(message: str) -> PoolError:
        return PoolError(message, path=os.fspath(path) if path is not None else None,
                         problem_id=problem_id, node=step)

    prover = _records(f.get("solved_lemma"))
    if item.kind in PROVER_KINDS or prover:
        if not prover:
            raise error(f"a {item.kind} without prover attempts (no solved_lemma.rollout_records)")
        stage_name, stage, recs, field = "prover", f["solved_lemma"], prover, "lean_verify"
    else:
        stage_name, stage, recs, field = "formalizer", f.get("formalization"), None, "lean_pass"
        recs = _records(stage)
        if not recs:
            raise error("no formalizer attempts (no formalization.rollout_records)")
    score = (f.get("score") or {}).get("semantic_score")
    score = float(score) if isinstance(score, (int, float)) else None
    gated = semantic_gate is not None and score is not None and score < semantic_gate
    mean_tok = _node_mean_tokens(recs, stage)
    rows = []
    for k, rec in enumerate(recs):
        lat = _latency(rec)
        if lat is None:
            raise error(f"attempt {k} of the {stage_name} has no latency")
        lat = _attempt_number(lat, f"the latency of attempt {k} of the {stage_name}", error)
        tok = rec.get("output_tokens")
        tok_src = "attempt"
        if not isinstance(tok, (int, float)):
            if mean_tok is None:
                raise error("no output token counts recorded")
            tok, tok_src = mean_tok, "node_mean"
        tok = _attempt_number(tok, f"the output tokens of attempt {k} of the {stage_name}", error)
        ok = bool(rec.get(field))
        row: dict[str, Any] = {
            "latency": lat,
            "success": int(ok and not gated),
            "cost": float(tok),
            "token_cost": float(tok),
            "token_cost_source": tok_src,
            "rollout_id": f"{problem_id}/{step}/{stage_name}/{rec.get('rollout_id', k)}",
            "infer_latency_sec": rec.get("infer_latency_sec"),
            "eval_latency_sec": rec.get("verify_latency_sec"),
            "latency_source": "request"
            if rec.get("latency_observation") == "openai_compatible_request"
            else str(rec.get("latency_observation", "unknown")),
            "stage": stage_name,
            "lean_pass": bool(rec.get("lean_pass")),
        }
        if stage_name == "prover":
            row["lean_verify"] = bool(rec.get("lean_verify"))
        for key in ("input_tokens", "total_tokens"):
            if isinstance(rec.get(key), (int, float)):
                row[key] = rec[key]
        reason = failure_reason(rec, field)
        if reason is not None:
            row["failure_reason"] = reason
        if gated:
            row["semantic_gated"] = True
        rows.append(row)
    meta = {
        "step_kind": item.kind,
        "stage": stage_name,
        "success_field": field,
        "n_attempts": len(rows),
        "n_success": sum(r["success"] for r in rows),
        "semantic_score": score,
    }
    if semantic_gate is not None:
        meta["semantic_gate"] = {"threshold": semantic_gate, "gated": gated}
    infra = sum(r.get("failure_reason") == "lean_unavailable" for r in rows)
    if infra:
        meta["lean_unavailable_failures"] = infra
    if any(r["token_cost_source"] != "attempt" for r in rows):
        meta["token_cost_imputed"] = sum(r["token_cost_source"] != "attempt" for r in rows)
    return rows, meta


def convert_pickle(
    path: str | os.PathLike,
    model_id: str = DEFAULT_MODEL_ID,
    semantic_gate: float | None = None,
    problem_id: str | None = None,
) -> dict[str, Any]:
    """One pool line (DAG object) from one ProofFlow run pickle."""
    if semantic_gate is not None:
        semantic_gate = check_number(semantic_gate, "semantic_gate", lo=0.0, hi=1.0)
    data = load_proofflow_pickle(path)
    pid = problem_id or problem_id_from_path(path)
    items: list[ProofItem] = data["proof_items"]
    if not items:
        raise UserError(f"{path}: no proof items")
    g = graph_from_named(_steps(items, path, pid), path=path, problem_id=pid, logger=log)
    nodes = []
    for k, it in enumerate(items):
        rows, meta = node_rows(it, pid, semantic_gate, path=path)
        if k in g.dropped_self_loops:
            meta["dropped_self_loop"] = True
        nodes.append(
            {
                "node_id": k,
                "name": g.names[k],
                "parents": g.parents[k],
                "children": g.children[k],
                "layer": g.depth[k],
                "template": template_from_rows(rows),
                "empirical_samples": rows,
                "legacy_template_model": model_id,
                "meta": meta,
            }
        )
    rm = data.get("run_metadata") or {}
    dag = {
        "problem_id": pid,
        "dag_kind": "proofflow_rollout",
        "benchmark": "proofflow",
        "source": "proofflow_pickle",
        "source_path": Path(path).name,
        "baseline_model": model_id,
        "n_nodes": len(nodes),
        "overall_depth": g.overall_depth,
        "run_metadata": {
            k: rm[k]
            for k in ("node_reroll_n_rollouts", "node_reroll_context_mode", "node_reroll_mode")
            if k in rm
        },
        "semantic_gate": semantic_gate,
        "nodes": nodes,
    }
    _validate_converted(dag, path, g.names)
    return dag


def _steps(items: list[ProofItem], path: str | os.PathLike, pid: str) -> list[tuple[str, list[str]]]:
    """``(step id, dependency ids)`` per proof item; an item without a usable id is named by position.

    Checked here, before the graph is built: a missing id would otherwise
    become the name ``'None'`` and be reported as an unknown dependency of
    whichever step needs it.
    """
    out = []
    for k, it in enumerate(items):
        sid, deps = it.get("id"), it.get("dependencies")
        where = f"proof item #{k} ({type(it).__name__})"
        if isinstance(sid, bool) or not isinstance(sid, (str, int)) or not str(sid).strip():
            raise PoolError(f"{where} has no usable 'id' (got {sid!r}); expected a non-empty string",
                            path=os.fspath(path), problem_id=pid)
        if deps is None:
            deps = []
        if not isinstance(deps, (list, tuple)) or not all(isinstance(d, (str, int)) for d in deps):
            raise PoolError(f"'dependencies' must be a list of step ids, got {deps!r}",
                            path=os.fspath(path), problem_id=pid, node=str(sid))
        out.append((str(sid), [str(d) for d in deps]))
    return out


def _validate_converted(dag: dict[str, Any], path: str | os.PathLike, names: list[str]) -> None:
    """Check the converted DAG with the pool loader's rules, reporting the pickle and the step id.

    Without this, a problem would surface only when the pool is written,
    named after the output file (never written) and the node's position.
    """
    try:
        parse_dag(dag, path=os.fspath(path))
    except PoolError as exc:
        node = names[exc.node] if isinstance(exc.node, int) and 0 <= exc.node < len(names) else exc.node
        raise PoolError(exc.reason, path=os.fspath(path), problem_id=exc.problem_id, node=node) from None


def convert_many(
    paths: list[str | os.PathLike],
    out: str | os.PathLike,
    model_id: str = DEFAULT_MODEL_ID,
    semantic_gate: float | None = None,
) -> list[dict[str, Any]]:
    """Convert pickles (in the given order) and write the validated pool atomically."""
    from simulator.pools.pool import write_pool

    dags = [convert_pickle(p, model_id, semantic_gate) for p in paths]
    ids = [d["problem_id"] for d in dags]
    if len(set(ids)) != len(ids):
        raise UserError(f"two pickles give the same problem id: {ids}")
    write_pool(out, dags)
    return dags


@cli_entry
def main(argv: list[str] | None = None) -> int:
    ap = cliargs.ArgumentParser(
        description="Convert ProofFlow run pickles (one DAG each) into a DAG pool (JSONL).",
        epilog="Example: %(prog)s ProofFlow/source_pickles/*.pickle "
        "--out ProofFlow/pools/proofflow_real_2dag.jsonl",
    )
    ap.add_argument("pickles", type=cliargs.input_path("any"), nargs="+", help="ProofFlow .pickle files, or directories of them")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, help="output pool (.jsonl), written atomically")
    ap.add_argument("--model-id", default=DEFAULT_MODEL_ID,
                    help="model id of the rows (price tables use it; default %(default)s)")
    ap.add_argument("--semantic-gate", default=None, metavar="T",
                    help="count every attempt of a node with semantic score < T as a failure (T in [0, 1])")
    args = ap.parse_args(argv)
    gate = None
    if args.semantic_gate is not None:
        gate = check_number(args.semantic_gate, "--semantic-gate", "flag", lo=0.0, hi=1.0)
    check_output_file(args.out, "--out", "flag", overwrite=True)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    paths: list[Path] = []
    for p in map(Path, args.pickles):
        paths.extend(sorted(p.glob("*.pickle")) if p.is_dir() else [p])
    if not paths:
        raise UserError("no pickle files given")
    dags = convert_many(paths, args.out, args.model_id, gate)
    for d in dags:
        rates = ", ".join(
            f"{n['name']} {n['meta']['n_success']}/{n['meta']['n_attempts']}" for n in d["nodes"]
        )
        print(f"{d['problem_id']}: {rates}")
    print(f"wrote {len(dags)} DAGs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

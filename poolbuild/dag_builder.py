"""One rollout record -> one DAG (pool line), with the builder filters.

Per attempt, one empirical row:

- ``latency`` = the attempt's own generation time ``infer_latency_sec``
  (+ ``eval_latency_sec`` when verification time is included). When an attempt
  only records the wall time of the batch it was generated in
  (``batch_latency_sec``, optionally ``batch_id``), its latency is that wall
  time scaled by its share of the batch's output tokens, and the row says
  ``latency_source: "batch_token_share"``;
- ``cost`` = ``token_cost`` = output tokens (the node's mean, flagged
  ``token_cost_source: "node_mean"``, when an attempt lacks them);
- ``success``, ``pass_rate``, ``rollout_id``, ``infer_latency_sec``,
  ``eval_latency_sec``, ``latency_source`` are carried.

Filters (each optional) exclude a whole DAG with a reason: a node without
attempts, a node that never succeeded, an attempt without latency. Without the
first and last filter such a record is an error, because the DAG could not be
simulated.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from simulator.base.errors import UserError
from simulator.pools.graph import children_of, node_depths
from simulator.pools.stats import template_from_rows

from .records import Record

log = logging.getLogger("poolbuild")


@dataclass
class BuildOptions:
    """How attempts become rows, and which DAGs to drop."""

    include_eval_latency: bool = False
    drop_no_attempts: bool = False
    drop_never_succeeded: bool = False
    drop_no_latency: bool = False

    @property
    def latency_label(self) -> str:
        """What a row's latency measures, as the builders' summaries say it."""
        return "infer+eval" if self.include_eval_latency else "infer"


def add_build_option_flags(ap: argparse.ArgumentParser, helps: Mapping[str, str]) -> None:
    """One ``--flag`` per :class:`BuildOptions` field named in ``helps`` (field -> help).

    Why: the pool builders share these options, so the flag of a field is its
    name by construction; each builder words the help for what a dropped DAG
    means there.
    """
    known = {f.name for f in fields(BuildOptions)}
    for name, text in helps.items():
        if name not in known:
            raise ValueError(f"BuildOptions has no field {name!r}")
        ap.add_argument("--" + name.replace("_", "-"), action="store_true", help=text)


def build_options_from_args(args: argparse.Namespace) -> BuildOptions:
    """The options of the flags :func:`add_build_option_flags` added (others: defaults)."""
    return BuildOptions(**{f.name: getattr(args, f.name) for f in fields(BuildOptions)
                           if hasattr(args, f.name)})


class Excluded(Exception):
    """The DAG is dropped by a filter; ``reason`` is written to the summary."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind  # no_attempts | never_succeeded | no_latency


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and x >= 0 else None


def _batch_latencies(attempts: list[dict[str, Any]]) -> dict[int, float]:
    """Attempt index -> batch wall time x (its output tokens / the batch's output tokens)."""
    groups: dict[Any, list[int]] = {}
    for k, a in enumerate(attempts):
        own, wall = _num(a.get("infer_latency_sec")), _num(a.get("batch_latency_sec"))
        if own is None and wall is not None:
            groups.setdefault(a.get("batch_id", ("wall", a["batch_latency_sec"])), []).append(k)
    out: dict[int, float] = {}
    for ks in groups.values():
        toks = [_num(attempts[k].get("output_tokens")) for k in ks]
        if any(t is None for t in toks) or sum(toks) <= 0:  # type: ignore[arg-type]
            continue
        total = math.fsum(toks)  # type: ignore[arg-type]
        for k, t in zip(ks, toks, strict=True):
            out[k] = float(attempts[k]["batch_latency_sec"]) * t / total  # type: ignore[operator]
    return out


def topology(rec: Record) -> tuple[list[int], dict[int, list[int]], dict[int, dict[str, Any]]]:
    """Node ids in record order, parents per node (self-loops dropped with a warning)."""
    where = f"{rec.source}: problem {rec.problem_id!r}"
    nodes = {}
    order = []
    for nd in rec.data["nodes"]:
        nid = nd["node_id"]
        if nid in nodes:
            raise UserError(f"{where}: duplicate node id {nid}")
        nodes[nid] = nd
        order.append(nid)
    parents: dict[int, list[int]] = {}
    for nid in order:
        ps: list[int] = []
        for p in nodes[nid].get("parents", []):
            if p == nid:
                log.warning("%s node %s depends on itself; self-loop dropped", where, nid)
                continue
            if p not in nodes:
                raise UserError(f"{where} node {nid}: parent {p!r} is not a node")
            if p not in ps:
                ps.append(p)
        parents[nid] = ps
    try:
        node_depths(parents)
    except ValueError as exc:
        raise UserError(f"{where}: dependency graph has a cycle ({exc})") from None
    return order, parents, nodes


def node_rows(rec: Record, node: dict[str, Any], opts: BuildOptions) -> list[dict[str, Any]]:
    """Empirical rows of one node (raises :class:`Excluded` or :class:`UserError`)."""
    where = f"{rec.source}: problem {rec.problem_id!r} node {node['node_id']}"
    label = f"node {node['node_id']} ({node.get('name', '?')})"
    attempts = node.get("attempts") or []
    if not attempts:
        if opts.drop_no_attempts:
            raise Excluded(f"{label} has no attempts", "no_attempts")
        raise UserError(f"{where} has no attempts (use --drop-no-attempts to skip such DAGs)")
    batch = _batch_latencies(attempts)
    toks = [_num(a.get("output_tokens")) for a in attempts]
    known = [t for t in toks if t is not None]
    mean_tok = math.fsum(known) / len(known) if known else None
    rows = []
    for k, a in enumerate(attempts):
        if not isinstance(a, dict):
            raise UserError(f"{where}: attempt {k} must be an object")
        if not isinstance(a.get("success"), (bool, int)) or a.get("success") not in (0, 1):
            raise UserError(f"{where}: attempt {k} has no verifier verdict 'success'")
        infer = _num(a.get("infer_latency_sec"))
        source = str(a.get("latency_source") or "request")
        if infer is None and k in batch:
            infer, source = batch[k], "batch_token_share"
        if infer is None:
            if opts.drop_no_latency:
                raise Excluded(f"{label} attempt {k} has no latency", "no_latency")
            raise UserError(
                f"{where}: attempt {k} has no latency (use --drop-no-latency to skip such DAGs)"
            )
        ev = _num(a.get("eval_latency_sec"))
        lat = infer + (ev or 0.0) if opts.include_eval_latency else infer
        tok, tok_src = toks[k], "attempt"
        if tok is None:
            if mean_tok is None:
                raise UserError(f"{where}: no attempt records output_tokens")
            tok, tok_src = mean_tok, "node_mean"
        success = bool(a["success"])
        pr = _num(a.get("pass_rate"))
        row: dict[str, Any] = {
            "latency": lat,
            "success": int(success),
            "cost": tok,
            "token_cost": tok,
            "rollout_id": a.get(
                "rollout_id", f"{rec.problem_id}/{node['node_id']}/{rec.model}/{k}"
            ),
            "infer_latency_sec": infer,
            "eval_latency_sec": ev,
            "pass_rate": pr if pr is not None else float(success),
            "latency_source": source,
        }
        if tok_src != "attempt":
            row["token_cost_source"] = tok_src
        if a.get("token_source") not in (None, "usage"):
            row["token_source"] = a["token_source"]
        if a.get("failure_reason"):
            row["failure_reason"] = a["failure_reason"]
        rows.append(row)
    if opts.drop_never_succeeded and not any(r["success"] for r in rows):
        raise Excluded(f"{label} never succeeded ({len(rows)} attempts)", "never_succeeded")
    return rows


def dag_from_record(rec: Record, opts: BuildOptions) -> dict[str, Any]:
    """The pool line of one record (raises :class:`Excluded` when a filter drops it)."""
    order, parents, nodes = topology(rec)
    depth = node_depths(parents)
    children = children_of(parents)
    out_nodes = []
    for nid in order:
        nd = nodes[nid]
        rows = node_rows(rec, nd, opts)
        node: dict[str, Any] = {
            "node_id": nid,
            "parents": parents[nid],
            "children": children[nid],
            "layer": depth[nid],
            "template": template_from_rows(rows),
            "empirical_samples": rows,
            "legacy_template_model": rec.model,
        }
        if "name" in nd:
            node["name"] = nd["name"]
        out_nodes.append(node)
    data = rec.data
    benchmark = str(data.get("benchmark", "unknown"))
    dag: dict[str, Any] = {
        "problem_id": rec.problem_id,
        "dag_kind": f"{benchmark}_rollout",
        "benchmark": benchmark,
        "source": "rollouts",
        "source_path": rec.source,
        "baseline_model": rec.model,
        "n_nodes": len(out_nodes),
    }
    for key in ("overall_depth", "overall_turns"):
        if key in data:
            dag[key] = data[key]
    if isinstance(data.get("generation"), dict):
        dag["generation"] = {k: v for k, v in data["generation"].items() if k != "api_key"}
    dag["nodes"] = out_nodes
    return dag

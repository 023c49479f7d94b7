"""Align rollouts/pools of several models into per-model pools and one multi-model pool.

Every source (one per model: a rollout directory/file, or a single-model pool)
is read into ``{problem_id: ModelDag}``. Problems are matched by
``problem_id``; the topology (node ids, parents, node names) must be the same
for every model that has the problem, otherwise the run stops with an error
naming the problem, the two models and the first difference.

A *missing pair* is a (problem, model) without data, or a node of a problem on
which a model has no attempts. ``missing_policy``:

- ``error``: stop, naming the problem, the model (and the node);
- ``drop``: leave the problem out of every output;
- ``impute``: keep it in the multi-model pool, with the model marked
  unavailable on the affected nodes (``success_prob`` 0, ``Infinity``
  latency and cost, ``imputed: true``; no rows), so no policy can choose it.

Outputs: per-model pools hold the problems *complete* for every model, in the
same order and with the same topology (row i is the same problem in each).
The multi-model pool starts with the same complete problems in the same order,
followed (under ``impute``) by the problems with imputed models; so
``selected_dag_indices.json`` (the complete rows) selects the same DAGs in all
of them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.base.errors import UserError
from simulator.pools.graph import children_of, node_depths
from simulator.pools.stats import template_from_rows, unavailable_template

from .dag_builder import BuildOptions, Excluded, node_rows, topology
from .records import load_records

MISSING_POLICIES = ("impute", "drop", "error")
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass
class NodeData:
    """One model's data on one node: ``template`` None = no attempts (missing)."""

    name: Any
    parents: list[int]
    template: dict[str, Any] | None
    rows: list[dict[str, Any]] | None


@dataclass
class ModelDag:
    """One model's view of one problem."""

    problem_id: str
    order: list[int]
    nodes: dict[int, NodeData]
    extra: dict[str, Any] = field(default_factory=dict)  # DAG-level fields carried through
    source: str = ""


def check_model_id(model: str) -> str:
    if not _MODEL_RE.match(model):
        raise UserError(f"model id {model!r} must be letters, digits, '_', '.', '+' or '-'")
    return model


# ---------------------------------------------------------------------------- reading sources


def dags_from_rollouts(
    model: str, path: str | Path, opts: BuildOptions
) -> tuple[dict[str, ModelDag], int, list[dict[str, Any]]]:
    """``{problem: ModelDag}`` of one model from rollout records, files scanned, exclusions."""
    records, n_files = load_records([path])
    out: dict[str, ModelDag] = {}
    excluded: list[dict[str, Any]] = []
    node_opts = BuildOptions(
        include_eval_latency=opts.include_eval_latency,
        drop_no_attempts=True,  # a node without attempts is a missing pair, handled by the policy
        drop_never_succeeded=False,  # judged across models, after alignment
        drop_no_latency=opts.drop_no_latency,
    )
    other = sorted({r.model for r in records if r.model != model})
    if other:
        raise UserError(f"{path}: records of other models {other} in the source of model {model!r}")
    for rec in records:
        order, parents, nodes = topology(rec)
        data: dict[int, NodeData] = {}
        try:
            for nid in order:
                try:
                    rows = node_rows(rec, nodes[nid], node_opts)
                    tpl: dict[str, Any] | None = template_from_rows(rows)
                except Excluded as exc:
                    if exc.kind != "no_attempts":
                        raise
                    rows, tpl = None, None
                data[nid] = NodeData(nodes[nid].get("name"), parents[nid], tpl, rows)
        except Excluded as exc:
            excluded.append({"problem_id": rec.problem_id, "model": model, "filter": exc.kind,
                             "reason": exc.reason, "source": rec.source})
            continue
        extra = {k: rec.data[k] for k in ("overall_depth", "overall_turns") if k in rec.data}
        bench = str(rec.data.get("benchmark", "unknown"))
        extra.update({"benchmark": bench, "dag_kind": f"{bench}_rollout"})
        out[rec.problem_id] = ModelDag(rec.problem_id, order, data, extra, rec.source)
    return out, n_files, excluded


def dags_from_pool(model: str, path: str | Path) -> dict[str, ModelDag]:
    """``{problem: ModelDag}`` from a single-model pool (validated by the project loader)."""
    from simulator.pools.pool import load_pool

    load_pool(path)  # full validation first: a clear error on a bad line
    out: dict[str, ModelDag] = {}
    with open(path, encoding="utf-8") as fh:
        for ln, line in enumerate(fh, 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            pid = obj.get("problem_id")
            if pid is None:
                raise UserError(f"{path} line {ln}: DAG without problem_id cannot be aligned")
            pid = str(pid)
            if pid in out:
                raise UserError(f"{path} line {ln}: problem {pid!r} appears twice")
            nodes: dict[int, NodeData] = {}
            order = []
            for nd in obj["nodes"]:
                nid = int(nd["node_id"])
                if nd.get("model_templates"):
                    raise UserError(
                        f"{path} line {ln}: problem {pid!r} is a multi-model DAG; "
                        "give one single-model pool per model"
                    )
                rows = nd.get("empirical_samples") or None
                tpl = nd.get("template")
                if tpl is None:
                    tpl = template_from_rows(rows)  # loader guarantees rows exist
                elif _is_unavailable(tpl):
                    tpl, rows = None, None
                nodes[nid] = NodeData(nd.get("name"), [int(p) for p in nd["parents"]], tpl, rows)
                order.append(nid)
            extra = {
                k: obj[k]
                for k in ("dag_kind", "benchmark", "overall_depth", "overall_turns")
                if k in obj
            }
            out[pid] = ModelDag(pid, order, nodes, extra, f"{path}:{ln}")
    return out


def _is_unavailable(tpl: dict[str, Any]) -> bool:
    vals = [tpl.get(k) for k in ("lat_mean", "cost_mean", "token_cost_mean")]
    return any(isinstance(v, float) and math.isinf(v) for v in vals)


# ---------------------------------------------------------------------------- alignment


def check_topology(pid: str, a_model: str, a: ModelDag, b_model: str, b: ModelDag) -> None:
    """Raise a :class:`UserError` naming the problem and the first difference."""
    where = f"problem {pid!r}: topology differs between models {a_model!r} and {b_model!r}"
    only_a = sorted(set(a.nodes) - set(b.nodes))
    only_b = sorted(set(b.nodes) - set(a.nodes))
    if only_a or only_b:
        raise UserError(
            f"{where}: nodes only in {a_model!r}: {only_a}, only in {b_model!r}: {only_b}"
        )
    for nid in a.order:
        pa, pb = sorted(a.nodes[nid].parents), sorted(b.nodes[nid].parents)
        if pa != pb:
            raise UserError(f"{where}: node {nid} has parents {pa} in {a_model!r} but {pb} in "
                            f"{b_model!r}")
        na, nb = a.nodes[nid].name, b.nodes[nid].name
        if na is not None and nb is not None and na != nb:
            raise UserError(f"{where}: node {nid} is named {na!r} in {a_model!r} but {nb!r} in "
                            f"{b_model!r}")


@dataclass
class AlignResult:
    models: list[str]
    per_model: dict[str, list[dict[str, Any]]]
    multi: list[dict[str, Any]]
    complete: list[str]  # problem ids in per-model pools (and first rows of multi)
    imputed: list[dict[str, Any]]  # problems kept with imputed models
    dropped: list[dict[str, Any]]  # problems left out, with the reason


def align(
    sources: dict[str, dict[str, ModelDag]],
    missing_policy: str = "error",
    baseline_model: str | None = None,
    drop_never_succeeded: bool = False,
) -> AlignResult:
    """Align per-model DAGs (``{model: {problem: ModelDag}}``, models in order)."""
    if missing_policy not in MISSING_POLICIES:
        raise UserError(
            f"--missing-policy must be one of {MISSING_POLICIES}, got {missing_policy!r}"
        )
    models = list(sources)
    if len(models) < 1:
        raise UserError("no models to align")
    baseline = baseline_model or models[0]
    if baseline not in sources:
        raise UserError(f"baseline model {baseline!r} is not one of {models}")
    problems: list[str] = []
    for m in models:
        for pid in sources[m]:
            if pid not in problems:
                problems.append(pid)

    complete, partial, dropped = [], [], []
    for pid in problems:
        have = [m for m in models if pid in sources[m]]
        ref_m = have[0]
        ref = sources[ref_m][pid]
        for m in have[1:]:
            check_topology(pid, ref_m, ref, m, sources[m][pid])
        missing: dict[str, list[int] | str] = {}
        for m in models:
            if m not in have:
                missing[m] = "all nodes"
                continue
            absent = [nid for nid in ref.order if sources[m][pid].nodes[nid].template is None]
            if absent:
                missing[m] = absent
        if missing and missing_policy == "error":
            m, what = next(iter(missing.items()))
            detail = "no rollouts" if what == "all nodes" else f"no attempts on nodes {what}"
            raise UserError(f"problem {pid!r} model {m!r}: {detail} (use --missing-policy "
                            "impute or drop)")
        if missing and missing_policy == "drop":
            dropped.append({"problem_id": pid, "reason": f"missing models: {_fmt(missing)}"})
            continue
        dead = [nid for nid in ref.order
                if all(m in missing and (missing[m] == "all nodes" or nid in missing[m])
                       for m in models)]
        if dead:
            dropped.append({"problem_id": pid,
                            "reason": f"nodes {dead} have no attempts under any model"})
            continue
        if drop_never_succeeded:
            never = [nid for nid in ref.order if not any(
                pid in sources[m] and (t := sources[m][pid].nodes[nid].template) is not None
                and t["success_prob"] > 0 for m in models)]
            if never:
                dropped.append({"problem_id": pid,
                                "reason": f"nodes {never} never succeeded under any model"})
                continue
        (partial if missing else complete).append((pid, missing))

    per_model = {m: [_single_dag(m, sources[m][pid], sources) for pid, _ in complete]
                 for m in models}
    multi = [_multi_dag(pid, models, baseline, sources, miss) for pid, miss in complete + partial]
    imputed = [{"problem_id": pid, "imputed_models": _jsonable(miss)} for pid, miss in partial]
    return AlignResult(models, per_model, multi, [p for p, _ in complete], imputed, dropped)


def _fmt(missing: dict[str, Any]) -> str:
    return ", ".join(f"{m} ({'all nodes' if w == 'all nodes' else f'nodes {w}'})"
                     for m, w in missing.items())


def _jsonable(missing: dict[str, Any]) -> dict[str, Any]:
    return {m: w for m, w in missing.items()}


def _ref(pid: str, sources: dict[str, dict[str, ModelDag]]) -> ModelDag:
    return next(s[pid] for s in sources.values() if pid in s)


def _skeleton(ref: ModelDag) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, int]]:
    parents = {nid: list(ref.nodes[nid].parents) for nid in ref.order}
    return parents, children_of(parents), node_depths(parents)


def _single_dag(model: str, dag: ModelDag, sources: dict[str, dict[str, ModelDag]]) -> dict:
    ref = _ref(dag.problem_id, sources)
    parents, children, depth = _skeleton(ref)
    nodes = []
    for nid in ref.order:
        nd = dag.nodes[nid]
        node: dict[str, Any] = {"node_id": nid, "parents": parents[nid],
                                "children": children[nid], "layer": depth[nid]}
        if ref.nodes[nid].name is not None:
            node["name"] = ref.nodes[nid].name
        node["template"] = nd.template
        if nd.rows:
            node["empirical_samples"] = nd.rows
        node["legacy_template_model"] = model
        nodes.append(node)
    out = {"problem_id": dag.problem_id, **ref.extra, "source": "aligned",
           "baseline_model": model, "n_nodes": len(nodes), "nodes": nodes}
    out.setdefault("dag_kind", "aligned")
    return out


def _multi_dag(
    pid: str,
    models: list[str],
    baseline: str,
    sources: dict[str, dict[str, ModelDag]],
    missing: dict[str, Any],
) -> dict[str, Any]:
    ref = _ref(pid, sources)
    parents, children, depth = _skeleton(ref)
    nodes = []
    for nid in ref.order:
        mt: dict[str, Any] = {}
        by_model: dict[str, Any] = {}
        avail = []
        for m in models:
            nd = sources[m][pid].nodes[nid] if pid in sources[m] else None
            if nd is None or nd.template is None:
                mt[m] = unavailable_template()
                continue
            mt[m] = nd.template
            avail.append(m)
            if nd.rows:
                by_model[m] = nd.rows
        legacy = baseline if baseline in avail else avail[0]
        node: dict[str, Any] = {"node_id": nid, "parents": parents[nid],
                                "children": children[nid], "layer": depth[nid]}
        if ref.nodes[nid].name is not None:
            node["name"] = ref.nodes[nid].name
        node.update({
            "template": mt[legacy],
            "legacy_template_model": legacy,
            "model_templates": mt,
            "empirical_samples_by_model": by_model,
            "available_model_ids": avail,
        })
        nodes.append(node)
    out = {"problem_id": pid, **ref.extra, "source": "aligned", "model_ids": models,
           "baseline_model": baseline, "n_nodes": len(nodes)}
    out.setdefault("dag_kind", "aligned")
    if missing:
        out["imputed_models"] = _jsonable(missing)
    out["nodes"] = nodes
    return out

"""DAG pools: load, validate and write the JSONL format of ``docs/pool_format.md``.

A pool is parsed once, line by line. Each line is validated and turned into
a :class:`DagStats` (numpy arrays of the per-node, per-model statistics and
empirical rows, independent of cost mode); the parsed JSON object itself is
not kept, so a 10,000-DAG pool stays small in memory. ``Pool.raw(i)`` re-reads
the original line when a caller needs the untouched object (writers,
converters).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator.base.errors import ConfigError, PoolError
from simulator.base.io_utils import atomic_write_jsonl
from simulator.base.jsonread import JsonRefused, loads_strict
from simulator.base.validation import INT64_MAX, check_input_file, check_int_field
from simulator.pools.graph import csr, longest_path_depths, topological_order
from simulator.pools.stats import template_from_columns

DEFAULT_MODEL = "default"
LATENCY_FLOOR = 1e-3
COST_FLOOR = 1e-9
#: Largest finite number a template or row may hold (latencies in s, costs in tokens
#: or the pool's cost unit). Larger values are refused at load: they mean a unit
#: error, and with them sums of draws (makespans, episode costs) could overflow.
#: ``Infinity`` stays allowed where it marks an unavailable model.
MAX_POOL_VALUE = 1e15
INDEX_KEYS = ("dag_indices", "selected_dag_indices", "selected_indices", "indices")


@dataclass
class DagStats:
    """Compact, cost-mode independent statistics of one DAG.

    Shapes: ``n`` nodes in pool-line order, ``m`` models (``model_ids``).
    Template arrays are ``(n, m)``; rows of (node v, model j) are
    ``row_*[row_ptr[v*m+j]:row_ptr[v*m+j+1]]``.
    """

    index: int
    line: int
    problem_id: Any
    dag_kind: str
    node_ids: np.ndarray  # int64 (n,)
    parent_ptr: np.ndarray  # int64 (n+1,) CSR into parent_idx (node positions)
    parent_idx: np.ndarray  # int64
    child_ptr: np.ndarray
    child_idx: np.ndarray
    model_ids: tuple[str, ...]
    available: np.ndarray  # bool (n, m)
    success_prob: np.ndarray  # float64 (n, m) template success probability
    lat_mean: np.ndarray
    lat_std: np.ndarray
    cost_mean: np.ndarray
    token_cost_mean: np.ndarray  # NaN where the template has none
    row_ptr: np.ndarray  # int64 (n*m+1,)
    row_latency: np.ndarray  # float64
    row_success: np.ndarray  # bool
    row_cost: np.ndarray
    row_token_cost: np.ndarray
    legacy_model: np.ndarray  # int64 (n,) model position the legacy template describes
    legacy_model_name: tuple[str | None, ...]  # node's legacy_template_model (pricing of 'default')
    meta: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return int(self.node_ids.shape[0])

    @property
    def n_models(self) -> int:
        return len(self.model_ids)

    def rows(self, v: int, j: int) -> slice:
        """Slice of the rows of node position ``v`` and model position ``j``."""
        k = v * self.n_models + j
        return slice(int(self.row_ptr[k]), int(self.row_ptr[k + 1]))

    def depth(self) -> int:
        """Number of nodes on the longest path (1 for a single node)."""
        order = topological_order(self.parent_ptr, self.parent_idx, self.child_ptr, self.child_idx)
        return max(longest_path_depths(order, self.parent_ptr, self.parent_idx), default=-1) + 1


class Pool:
    """A loaded DAG pool: ``len(pool)``, ``pool[i]`` -> :class:`DagStats`."""

    def __init__(
        self,
        dags: list[DagStats],
        path: str | None,
        offsets: list[int] | None = None,
        raw_objects: list[dict] | None = None,
    ) -> None:
        self.dags = dags
        self.path = path
        self._offsets = offsets
        self._raw = raw_objects
        seen: dict[str, None] = {}
        for d in dags:
            for m in d.model_ids:
                seen.setdefault(m, None)
        self.model_ids: tuple[str, ...] = tuple(seen)

    def __len__(self) -> int:
        return len(self.dags)

    def __getitem__(self, i: int) -> DagStats:
        return self.dags[i]

    def __iter__(self) -> Iterator[DagStats]:
        return iter(self.dags)

    def raw(self, i: int) -> dict:
        """The original JSON object of DAG ``i`` (re-read from the file)."""
        if self._raw is not None:
            return self._raw[i]
        assert self.path is not None and self._offsets is not None
        with open(self.path, "rb") as fh:
            fh.seek(self._offsets[i])
            return json.loads(fh.readline())

    def subset(self, indices: Sequence[int], source: str | None = None) -> Pool:
        """The DAGs at ``indices`` (in that order) as a pool; an index out of range is refused, naming ``source``."""
        for i in indices:
            if not (0 <= int(i) < len(self)):
                raise PoolError(
                    f"index {i} does not exist (the pool has {len(self)} DAGs, rows 0..{len(self) - 1})",
                    path=source,
                )
        sub = Pool([self.dags[int(i)] for i in indices], self.path)
        sub._offsets = [self._offsets[int(i)] for i in indices] if self._offsets else None
        sub._raw = [self._raw[int(i)] for i in indices] if self._raw else None
        return sub

    def checksum(self) -> str:
        """SHA-256 of the pool file (or of its compact serialisation)."""
        import hashlib

        h = hashlib.sha256()
        if self.path is not None and os.path.exists(self.path):
            with open(self.path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        else:
            for i in range(len(self)):
                h.update(json.dumps(self.raw(i), sort_keys=True).encode())
        return h.hexdigest()


# ----------------------------------------------------------------------------
# Parsing one DAG object
# ----------------------------------------------------------------------------


class _Ctx:
    """Location of the object being parsed, to build errors."""

    def __init__(self, path: str | None, line: int | None, problem_id: Any) -> None:
        self.path, self.line, self.problem_id = path, line, problem_id

    def error(self, message: str, node: Any = None) -> PoolError:
        return PoolError(
            message, path=self.path, line=self.line, problem_id=self.problem_id, node=node
        )


def _number(ctx: _Ctx, value: Any, what: str, node: Any, allow_inf: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.error(f"{what} must be a number, got {value!r}", node)
    try:
        x = float(value)
    except OverflowError:  # an integer of hundreds of digits: no float holds it
        raise ctx.error(f"{what} is an integer of {len(str(abs(value)))} digits, above the largest value a pool "
                        f"may hold ({MAX_POOL_VALUE:g})", node) from None
    if math.isnan(x):
        raise ctx.error(f"{what} is NaN", node)
    if x < 0:
        raise ctx.error(f"{what} is negative ({x})", node)
    if math.isinf(x) and not allow_inf:
        raise ctx.error(f"{what} is infinite", node)
    if x > MAX_POOL_VALUE and not math.isinf(x):
        raise ctx.error(f"{what} is {x:g}, above the largest value a pool may hold ({MAX_POOL_VALUE:g})", node)
    return x


def _parse_template(ctx: _Ctx, tpl: Any, node: Any, model: str) -> dict[str, float] | None:
    """Validated template dict, or None when the model is unavailable (Infinity)."""
    if not isinstance(tpl, dict):
        raise ctx.error(f"template of model {model!r} must be an object", node)
    if "success_prob" not in tpl:
        raise ctx.error(f"template of model {model!r} has no success_prob", node)
    p = tpl["success_prob"]
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0.0 <= float(p) <= 1.0):
        raise ctx.error(f"success_prob of model {model!r} must be in [0, 1], got {p!r}", node)
    out = {"success_prob": float(p)}
    infinite = False
    for key in ("lat_mean", "lat_std", "cost_mean", "token_cost_mean"):
        if key in tpl and tpl[key] is not None:
            x = _number(ctx, tpl[key], f"{key} of model {model!r}", node)
            infinite |= math.isinf(x) and key != "lat_std"
            out[key] = x
    if infinite:
        return None
    if math.isinf(out.get("lat_std", 0.0)):
        raise ctx.error(
            f"lat_std of model {model!r} is infinite (Infinity marks an unavailable model only in "
            "lat_mean, cost_mean or token_cost_mean)",
            node,
        )
    if "lat_mean" not in out:
        raise ctx.error(f"template of model {model!r} has no lat_mean", node)
    if "cost_mean" not in out and "token_cost_mean" not in out:
        raise ctx.error(
            f"template of model {model!r} has neither cost_mean nor token_cost_mean "
            "(a template must state what an attempt costs)",
            node,
        )
    out.setdefault("lat_std", 0.0)
    if "cost_mean" not in out:
        out["cost_mean"] = out["token_cost_mean"]
    return out


def _parse_rows_fast(rows: list) -> np.ndarray | None:
    """Vectorised parse of well-formed rows; None when anything needs the careful path.

    Each column goes through ``np.array`` without a dtype, so strings, None
    or nested values give a non-numeric array and send the rows to the
    careful path, which names the offending row.
    """
    try:
        cols = (
            np.array([r["latency"] for r in rows]),
            np.array([r["success"] for r in rows]),
            np.array([r["cost"] for r in rows]),
            np.array([r["token_cost"] for r in rows]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    if any(c.dtype.kind not in "biuf" or c.ndim != 1 for c in cols):
        return None
    out = np.empty((len(rows), 4))
    for k, c in enumerate(cols):
        out[:, k] = c
    if (
        not np.isfinite(out).all()
        or (out < 0).any()
        or (out > MAX_POOL_VALUE).any()
        or not np.isin(out[:, 1], (0.0, 1.0)).all()
    ):
        return None
    np.maximum(out[:, 0], LATENCY_FLOOR, out=out[:, 0])
    np.maximum(out[:, 2:], COST_FLOOR, out=out[:, 2:])
    return out


def _parse_rows(ctx: _Ctx, rows: Any, node: Any, model: str) -> np.ndarray:
    """(k, 4) float array: latency, success, cost, token_cost (with fallbacks)."""
    if not isinstance(rows, list):
        raise ctx.error(f"empirical samples of model {model!r} must be a list", node)
    out = np.empty((len(rows), 4), dtype=np.float64)
    for r, row in enumerate(rows):
        what = f"empirical row {r} of model {model!r}"
        if not isinstance(row, dict):
            raise ctx.error(f"{what} must be an object", node)
        if "latency" not in row or "success" not in row:
            missing = "latency" if "latency" not in row else "success"
            raise ctx.error(f"{what} has no {missing!r}", node)
        lat = max(_number(ctx, row["latency"], f"latency of {what}", node), LATENCY_FLOOR)
        s = row["success"]
        if s not in (0, 1, True, False) or (isinstance(s, float) and s not in (0.0, 1.0)):
            raise ctx.error(f"success of {what} must be 0/1 or a bool, got {s!r}", node)
        cost = row.get("cost")
        if cost is None:
            cost = row.get("token_cost", lat)
        tok = row.get("token_cost")
        if tok is None:
            tok = row.get("total_tokens", row.get("cost", lat))
        cost = _number(ctx, cost, f"cost of {what}", node)
        tok = _number(ctx, tok, f"token_cost of {what}", node)
        if math.isinf(lat) or math.isinf(cost) or math.isinf(tok):
            raise ctx.error(f"{what} has an infinite value", node)
        out[r] = (lat, float(bool(s)), max(cost, COST_FLOOR), max(tok, COST_FLOOR))
    return out


class _PendingRows:
    """Rows of one (node, model), parsed later together with the whole DAG's rows."""

    __slots__ = ("rows", "node", "model")

    def __init__(self, rows: Any, node: Any, model: str) -> None:
        self.rows, self.node, self.model = rows, node, model


def _resolve_pending_rows(ctx: _Ctx, per_node: list[dict]) -> None:
    """Parse every pending row group of a DAG in one vectorised pass (careful path on failure)."""
    pending = [(stats, m, r) for stats in per_node for m, (_, r) in stats.items() if isinstance(r, _PendingRows)]
    if not pending:
        return
    fast = None
    if all(isinstance(r.rows, list) for _, _, r in pending):
        fast = _parse_rows_fast([row for _, _, r in pending for row in r.rows])
    start = 0
    for stats, m, r in pending:
        if fast is not None:
            block = fast[start : start + len(r.rows)]
            start += len(r.rows)
        else:
            block = _parse_rows(ctx, r.rows, r.node, r.model)
        stats[m] = (stats[m][0], block)


def _template_from_rows(rows: np.ndarray) -> dict[str, float]:
    """Template of a parsed row table (columns latency, success, cost, token_cost): one rule, simulator.pools.stats."""
    return template_from_columns(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3])


def _id(ctx: _Ctx, value: Any, what: str, node: Any) -> int:
    try:  # a 64-bit integer (the arrays' type): 2**70 is refused here, not an OverflowError later
        return check_int_field(value, what, integral_floats=True, hi=INT64_MAX)
    except ConfigError as exc:
        raise ctx.error(str(exc), node) from None


# Parsing happens in stages, each a function with one job, so that a rule of
# the format lives in one place and its message is written once:
#
# 1. ``_check_line``: the line is an object with a non-empty ``nodes`` list;
# 2. ``_parse_graph``: node ids, parent/child lists, their consistency and
#    acyclicity, as CSR arrays (``_node_ids``, ``_edge_lists``,
#    ``_check_inverse``, ``_check_acyclic``; CSR and order from simulator.pools.graph);
# 3. ``_parse_statistics``: each node's templates and rows per model
#    (``_node_stats``) and the DAG's model list;
# 4. ``_build_tables``: the (node, model) arrays of :class:`DagStats`.
#
# Checks run in this order, so a line with several problems reports the
# first one met in it.


@dataclass
class _Graph:
    """Validated structure of one DAG (node positions in pool-line order)."""

    ids: list[int]
    parent_ptr: np.ndarray
    parent_idx: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray


def _check_line(obj: Any, path: str | None, line: int | None) -> tuple[_Ctx, list]:
    """Stage 1: the line is an object with a non-empty ``nodes`` list (and a matching ``n_nodes``)."""
    if not isinstance(obj, dict):
        raise PoolError("a pool line must be a JSON object", path=path, line=line)
    ctx = _Ctx(path, line, obj.get("problem_id"))
    nodes = obj.get("nodes")
    if nodes is None:
        raise ctx.error("missing 'nodes'")
    if not isinstance(nodes, list) or not nodes:
        raise ctx.error("'nodes' must be a non-empty list")
    if "n_nodes" in obj:
        try:
            n = check_int_field(obj["n_nodes"], "n_nodes", lo=1)
        except ConfigError as exc:
            raise ctx.error(str(exc)) from None
        if n != len(nodes):
            raise ctx.error(f"n_nodes={n} but the line has {len(nodes)} nodes")
    return ctx, nodes


def _node_ids(ctx: _Ctx, nodes: list) -> tuple[list[int], dict[int, int]]:
    """Integer node ids in line order and their positions; each node is an object with its three keys."""
    ids: list[int] = []
    pos: dict[int, int] = {}
    for k, nd in enumerate(nodes):
        if not isinstance(nd, dict):
            raise ctx.error(f"node #{k} must be an object")
        for key in ("node_id", "parents", "children"):
            if key not in nd:
                raise ctx.error(f"node #{k} has no {key!r}", nd.get("node_id"))
        nid = _id(ctx, nd["node_id"], "node_id", nd["node_id"])
        if nid in pos:
            raise ctx.error("duplicate node id", nid)
        pos[nid] = k
        ids.append(nid)
    return ids, pos


def _edge_lists(
    ctx: _Ctx, nodes: list, ids: list[int], pos: dict[int, int]
) -> tuple[list[list[int]], list[list[int]]]:
    """Parent and child lists as node positions: lists of known, distinct ids, no self-loop."""
    parents: list[list[int]] = []
    children: list[list[int]] = []
    for k, nd in enumerate(nodes):
        nid = ids[k]
        for key, acc in (("parents", parents), ("children", children)):
            lst = nd[key]
            if not isinstance(lst, list):
                raise ctx.error(f"{key!r} must be a list", nid)
            conv = []
            for x in lst:
                x = _id(ctx, x, f"{key} entry", nid)
                if x == nid:
                    raise ctx.error(f"self-loop: the node lists itself in {key!r}", nid)
                if x not in pos:
                    raise ctx.error(f"{key[:-1] if key == 'parents' else 'child'} {x} is not a node", nid)
                conv.append(pos[x])
            if len(set(conv)) != len(conv):
                raise ctx.error(f"duplicate entries in {key!r}", nid)
            acc.append(conv)
    return parents, children


def _check_inverse(ctx: _Ctx, ids: list[int], parents: list[list[int]], children: list[list[int]]) -> None:
    """``children`` must be exactly the inverse of ``parents``."""
    for k in range(len(ids)):
        for p in parents[k]:
            if k not in children[p]:
                raise ctx.error(
                    f"children inconsistent with parents: parent {ids[p]} does not list it as a child",
                    ids[k],
                )
        for c in children[k]:
            if k not in parents[c]:
                raise ctx.error(
                    f"children inconsistent with parents: child {ids[c]} does not list it as a parent",
                    ids[k],
                )


def _check_acyclic(ctx: _Ctx, graph: _Graph) -> None:
    """Refuse a cycle, naming (up to ten of) the nodes on or behind it."""
    n = len(graph.ids)
    order = topological_order(graph.parent_ptr, graph.parent_idx, graph.child_ptr, graph.child_idx)
    if len(order) < n:
        on_cycle = sorted(set(range(n)) - set(order))
        raise ctx.error(
            f"the graph has a cycle through nodes {[graph.ids[v] for v in on_cycle][:10]}",
            graph.ids[on_cycle[0]],
        )


def _parse_graph(ctx: _Ctx, nodes: list) -> _Graph:
    """Stage 2: ids, edges, their consistency and acyclicity."""
    ids, pos = _node_ids(ctx, nodes)
    parents, children = _edge_lists(ctx, nodes, ids, pos)
    _check_inverse(ctx, ids, parents, children)
    pptr, pidx = csr(parents)
    cptr, cidx = csr(children)
    graph = _Graph(ids, pptr, pidx, cptr, cidx)
    _check_acyclic(ctx, graph)
    return graph


# per model of a node: (template or None when unavailable, rows or pending rows or None)
_NodeStats = dict[str, tuple[dict | None, Any]]


def _node_stats(ctx: _Ctx, nd: dict, nid: int) -> _NodeStats:
    """Templates and rows of one node per model (rows of multi-model nodes left pending)."""
    stats: _NodeStats = {}
    mt = nd.get("model_templates")
    by_model = nd.get("empirical_samples_by_model") or {}
    if not isinstance(by_model, dict):
        raise ctx.error("'empirical_samples_by_model' must be an object", nid)
    legacy = nd.get("legacy_template_model")
    if mt:
        if not isinstance(mt, dict):
            raise ctx.error("'model_templates' must be an object", nid)
        for m, tpl in mt.items():
            m = str(m)
            t = _parse_template(ctx, tpl, nid, m)
            rows = by_model.get(m)
            if rows is None and "empirical_samples" in nd and m == (legacy or DEFAULT_MODEL):
                rows = nd["empirical_samples"]
            # rows of an unavailable (imputed) model are ignored
            r = _PendingRows(rows, nid, m) if (rows and t is not None) else None
            stats[m] = (t, r)
    else:
        tpl = nd.get("template")
        rows = nd.get("empirical_samples")
        t = _parse_template(ctx, tpl, nid, DEFAULT_MODEL) if tpl is not None else None
        r = None
        if rows and tpl is None:  # statistics from the rows alone
            r = _parse_rows(ctx, rows, nid, DEFAULT_MODEL)
            t = _template_from_rows(r)
        elif rows and t is not None:
            r = _PendingRows(rows, nid, DEFAULT_MODEL)
        if t is None:
            raise ctx.error("no usable statistics for any model (no template, no rows)", nid)
        stats[DEFAULT_MODEL] = (t, r)
    if not any(t is not None for t, _ in stats.values()):
        raise ctx.error("no usable statistics for any model (every model unavailable)", nid)
    return stats


def _parse_statistics(
    ctx: _Ctx, obj: dict, nodes: list, ids: list[int]
) -> tuple[tuple[str, ...], list[_NodeStats], list[str | None]]:
    """Stage 3: per-node statistics, the DAG's model list and each node's legacy model name.

    Models are in first-seen order over the nodes, after the DAG-level
    ``model_ids`` when given.
    """
    model_order: dict[str, None] = {}
    listed = obj.get("model_ids") or []
    if not isinstance(listed, list) or any(isinstance(m, (dict, list, bool)) or m is None for m in listed):
        raise ctx.error(f"model_ids must be a list of model names, got {str(listed)[:60]}")
    for m in listed:
        model_order.setdefault(str(m), None)
    per_node: list[_NodeStats] = []
    legacy_names: list[str | None] = []
    for k, nd in enumerate(nodes):
        stats = _node_stats(ctx, nd, ids[k])
        for m in stats:
            model_order.setdefault(m, None)
        per_node.append(stats)
        legacy = nd.get("legacy_template_model")
        legacy_names.append(str(legacy) if legacy is not None else None)
    _resolve_pending_rows(ctx, per_node)
    return tuple(model_order), per_node, legacy_names


def _legacy_choice(stats: _NodeStats, legacy_name: str | None, baseline_model: Any) -> str:
    """The model the legacy template describes (used by the baselines), see docs/semantics.md."""
    cand = [legacy_name, baseline_model, DEFAULT_MODEL]
    choice = next((c for c in cand if c is not None and c in stats and stats[c][0] is not None), None)
    if choice is None:
        choice = next(m for m in stats if stats[m][0] is not None)
    return choice


def _build_tables(
    model_ids: tuple[str, ...],
    per_node: list[_NodeStats],
    legacy_names: list[str | None],
    baseline_model: Any,
) -> dict[str, np.ndarray]:
    """Stage 4: the (node, model) template tables, the rows in CSR order and the legacy positions."""
    n = len(per_node)
    mi = {m: j for j, m in enumerate(model_ids)}
    m_count = len(model_ids)
    shape = (n, m_count)
    available = np.zeros(shape, dtype=np.bool_)
    arrs = {k: np.zeros(shape) for k in ("success_prob", "lat_mean", "lat_std", "cost_mean")}
    token_cost_mean = np.full(shape, np.nan)
    row_blocks: list[np.ndarray] = []
    row_ptr = np.zeros(n * m_count + 1, dtype=np.int64)
    legacy_pos = np.zeros(n, dtype=np.int64)
    empty = np.empty((0, 4))
    for k in range(n):
        stats = per_node[k]
        for j, m in enumerate(model_ids):
            t, r = stats.get(m, (None, None))
            if t is not None:
                available[k, j] = True
                for key in arrs:
                    arrs[key][k, j] = t[key]
                token_cost_mean[k, j] = t.get("token_cost_mean", np.nan)
            block = r if (r is not None and t is not None) else empty
            row_blocks.append(block)
            row_ptr[k * m_count + j + 1] = row_ptr[k * m_count + j] + len(block)
        legacy_pos[k] = mi[_legacy_choice(stats, legacy_names[k], baseline_model)]
    rows_all = np.concatenate(row_blocks) if row_blocks else empty
    return dict(
        available=available,
        token_cost_mean=token_cost_mean,
        row_ptr=row_ptr,
        rows_all=rows_all,
        legacy_pos=legacy_pos,
        **arrs,
    )


_META_KEYS = ("dag_kind", "problem_id", "baseline_model", "overall_depth", "overall_turns")


def parse_dag(obj: Any, index: int = 0, path: str | None = None, line: int | None = None) -> DagStats:
    """Validate one pool line (already JSON-decoded) and build its :class:`DagStats`."""
    ctx, nodes = _check_line(obj, path, line)
    graph = _parse_graph(ctx, nodes)
    model_ids, per_node, legacy_names = _parse_statistics(ctx, obj, nodes, graph.ids)
    tab = _build_tables(model_ids, per_node, legacy_names, obj.get("baseline_model"))
    rows_all = tab["rows_all"]
    return DagStats(
        index=index,
        line=line if line is not None else index + 1,
        problem_id=obj.get("problem_id"),
        dag_kind=str(obj.get("dag_kind", "unknown")),
        node_ids=np.array(graph.ids, dtype=np.int64),
        parent_ptr=graph.parent_ptr,
        parent_idx=graph.parent_idx,
        child_ptr=graph.child_ptr,
        child_idx=graph.child_idx,
        model_ids=model_ids,
        available=tab["available"],
        success_prob=tab["success_prob"],
        lat_mean=tab["lat_mean"],
        lat_std=tab["lat_std"],
        cost_mean=tab["cost_mean"],
        token_cost_mean=tab["token_cost_mean"],
        row_ptr=tab["row_ptr"],
        row_latency=np.ascontiguousarray(rows_all[:, 0]),
        row_success=rows_all[:, 1] > 0.5,
        row_cost=np.ascontiguousarray(rows_all[:, 2]),
        row_token_cost=np.ascontiguousarray(rows_all[:, 3]),
        legacy_model=tab["legacy_pos"],
        legacy_model_name=tuple(legacy_names),
        meta={k: obj[k] for k in _META_KEYS if k in obj},
    )


# ----------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------


def _loads(raw: bytes):
    """One pool line, by the one strict reader (:mod:`simulator.base.jsonread`): a repeated key, a BOM, a
    float beyond the range or nesting too deep is refused here; NaN/Infinity are read, so that the field that
    holds one is refused by name (with its node) by :func:`parse_dag`, and integers are bounded by each
    field's own rule (:func:`check_int_field`)."""
    return loads_strict(raw, allow_nonfinite=True, check_ints=False)


def _preview(raw: bytes, width: int = 80) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    return text if len(text) <= width else text[: width - 3] + "..."


def _pool_lines(fh) -> Iterator[tuple[int, int, bytes]]:
    """(byte offset, 1-based line number, raw line) of each non-blank line: the pool's DAG rows, in order.

    The one rule of what a row is, shared by :func:`load_pool` and :func:`index_pool_lines`
    (so an index's row ``i`` is ``load_pool``'s DAG ``i``).
    """
    lineno = 0
    while True:
        off = fh.tell()
        raw = fh.readline()
        if not raw:
            return
        lineno += 1
        if raw.strip():
            yield off, lineno, raw


@dataclass(frozen=True)
class LineEntry:
    """Where DAG row ``dag`` of a pool file is: byte ``offset``, ``length`` bytes, ``line``, ``sha256`` of the bytes."""

    dag: int
    offset: int
    length: int
    line: int
    sha256: str

    def to_json(self) -> list:
        return [self.offset, self.length, self.line, self.sha256]

    @staticmethod
    def from_json(dag: int, item: Any) -> LineEntry:
        offset, length, line, sha = item
        return LineEntry(int(dag), int(offset), int(length), int(line), str(sha))


def index_pool_lines(path: str | os.PathLike) -> tuple[str, list[LineEntry]]:
    """The file's SHA-256 and the place and digest of every DAG row, in one read (no parsing).

    Lets a reader that needs a few rows of a large pool seek to them and check
    they are the rows indexed (:func:`load_pool_rows`) instead of reading,
    hashing and validating the whole file.
    """
    import hashlib

    path = str(path)
    whole = hashlib.sha256()
    entries: list[LineEntry] = []
    try:
        with open(path, "rb") as fh:
            for off, lineno, raw in _pool_lines(fh):
                entries.append(LineEntry(len(entries), off, len(raw), lineno, hashlib.sha256(raw).hexdigest()))
            fh.seek(0)
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                whole.update(chunk)
    except FileNotFoundError:
        raise PoolError("pool file not found", path=path) from None
    return whole.hexdigest(), entries


def load_pool_rows(path: str | os.PathLike, entries: Sequence[LineEntry]) -> Pool:
    """The DAG rows ``entries`` of a pool file (in that order), read by seeking to each.

    Each row's bytes must have the indexed length and SHA-256 (else the file
    changed since it was indexed: refused, naming the row). Only these rows are
    parsed and validated; the result equals ``load_pool(path, indices=[e.dag ...])``
    for an unchanged file.
    """
    import hashlib

    path = str(path)
    dags: list[DagStats] = []
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise PoolError("pool file not found", path=path) from None
    with fh:
        for e in entries:
            fh.seek(e.offset)
            raw = fh.read(e.length)
            if len(raw) != e.length or hashlib.sha256(raw).hexdigest() != e.sha256:
                raise PoolError(
                    f"DAG {e.dag} is not the row indexed when the run was prepared (the pool file changed: "
                    f"expected {e.length} bytes with sha256 {e.sha256[:12]}... at byte {e.offset}); prepare a new "
                    "run (or --force) instead of mixing pools",
                    path=path,
                    line=e.line,
                )
            try:
                obj = _loads(raw)
            except JsonRefused as exc:  # pragma: no cover - the digest matched
                raise PoolError(f"{exc.msg}: {_preview(raw)!r}", path=path, line=e.line) from None
            dags.append(parse_dag(obj, index=e.dag, path=path, line=e.line))
    return Pool(dags, path, [e.offset for e in entries])


def load_pool(path: str | os.PathLike, indices: Sequence[int] | None = None) -> Pool:
    """Load and validate a JSONL pool; ``indices`` keeps only those rows (in that order).

    Raises :class:`PoolError` naming file, line, problem id and node on any
    invalid input, before any simulation work starts.
    """
    path = str(path)
    if not os.path.exists(path):
        raise PoolError("pool file not found", path=path)
    check_input_file(path, "pool file")
    dags: list[DagStats] = []
    offsets: list[int] = []
    with open(path, "rb") as fh:
        for off, lineno, raw in _pool_lines(fh):
            try:
                obj = _loads(raw)
            except JsonRefused as exc:
                raise PoolError(
                    f"{exc.msg}: {_preview(raw)!r}",
                    path=path,
                    line=lineno,
                ) from None
            dags.append(parse_dag(obj, index=len(dags), path=path, line=lineno))
            offsets.append(off)
    if not dags:
        raise PoolError("the pool has no DAGs", path=path)
    pool = Pool(dags, path, offsets)
    if indices is not None:
        pool = pool.subset(indices, source=path)
    return pool


def pool_from_objects(objs: Iterable[dict], name: str = "<memory>") -> Pool:
    """Validate in-memory pool lines (generators, tests) into a :class:`Pool`."""
    objs = list(objs)
    dags = [parse_dag(o, index=i, path=name, line=i + 1) for i, o in enumerate(objs)]
    return Pool(dags, None, raw_objects=objs)


def load_index_file(path: str | os.PathLike, pool_size: int | None = None) -> list[int]:
    """Read an index file (plain list or an object with one of ``INDEX_KEYS``).

    The one index-file rule of every entry point (``validate``, ``prepare``,
    the shards): a non-empty list of distinct integers, each a row of the pool
    when ``pool_size`` is given. An empty or repeating list is refused here
    rather than by each caller, so no command accepts what another refuses.
    """
    path = str(path)
    if not os.path.exists(path):
        raise PoolError("index file not found", path=path)
    check_input_file(path, "index file")
    try:
        with open(path, "rb") as fh:
            data = loads_strict(fh.read(64 << 20))
    except FileNotFoundError:
        raise PoolError("index file not found", path=path) from None
    except JsonRefused as exc:
        raise PoolError(f"index file: {exc.msg}", path=path, line=exc.lineno) from None
    if isinstance(data, dict):
        key = next((k for k in INDEX_KEYS if k in data), None)
        if key is None:
            raise PoolError(f"index file needs a list or one of the keys {list(INDEX_KEYS)}", path=path)
        data = data[key]
    if not isinstance(data, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in data):
        raise PoolError("index file must hold a list of integers", path=path)
    if not data:
        raise PoolError("the index file selects no DAG", path=path)
    seen: set[int] = set()
    for i in data:
        if i in seen:
            raise PoolError(f"the index file lists DAG {i} twice", path=path)
        seen.add(i)
    if pool_size is not None:
        for i in data:
            if not (0 <= i < pool_size):
                raise PoolError(
                    f"index {i} names a row that does not exist (pool has {pool_size} DAGs)", path=path
                )
    return list(data)


def write_index_file(path: str | os.PathLike, indices: Sequence[int]) -> None:
    """Write ``{"dag_indices": [...]}`` atomically."""
    from simulator.base.io_utils import atomic_write_json

    atomic_write_json(path, {"dag_indices": [int(i) for i in indices]}, indent=None)


def write_pool(path: str | os.PathLike, dags: Iterable[dict], validate: bool = True) -> int:
    """Write pool lines atomically (compact JSON, UTF-8); validates them first."""
    dags = list(dags)
    if validate:
        for i, d in enumerate(dags):
            parse_dag(d, index=i, path=str(path), line=i + 1)
    return atomic_write_jsonl(Path(path), dags)

"""Synthetic pool lines: a topology and a statistics source made into DAGs, keyed by seed.

:func:`generate` turns ``(topology, count)`` groups into pool lines, spread
evenly over the pool (:func:`interleave`) or in blocks; every draw comes from
a numpy Generator keyed by ``(seed, DAG index, purpose)``, so the same
arguments give the same bytes and DAG ``k``'s shape does not depend on the
statistics settings. :func:`build_dag` writes one line (``synthetic: true``,
``dag_kind`` ``synthetic_*``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from poolbuild.synthetic.stats import LibraryStats, ParametricStats
from poolbuild.synthetic.topology import (
    BENCHMARKS,
    TOPOLOGIES,
    ShapeConfig,
    Topology,
    benchmark_topologies,
    depths,
    generated_topology,
)
from simulator.base.errors import UserError
from simulator.pools.graph import children_of

DAG_KINDS = {
    "layered": "synthetic_layered",
    "chain": "synthetic_chain",
    "fork_join": "synthetic_fork_join",
    "codeflow": "synthetic_codeflow_topology",
    "proofflow": "synthetic_proofflow_topology",
}


# purposes of the keyed generators
_TOPO, _STATS, _SELECT = 0, 1, 2


def build_dag(
    topo: Topology,
    stats: ParametricStats | LibraryStats,
    rng: np.random.Generator,
    *,
    topology: str,
    index: int,
    n_rows: int,
    legacy: str,
    multi_model: bool,
    seed: int,
) -> dict[str, Any]:
    """One pool line from a topology and a statistics source."""
    n = topo.n
    layer = depths(topo.parents)
    children = children_of(dict(enumerate(topo.parents)))
    nodes = []
    for v in range(n):
        per_model = stats.node(rng, n_rows, legacy)
        node: dict[str, Any] = {"node_id": v}
        if topo.names is not None:
            node["name"] = topo.names[v]
        node.update({"parents": list(topo.parents[v]), "children": children[v], "layer": layer[v]})
        if multi_model:
            tpl, rows = per_model[legacy]
            node["template"] = tpl
            if rows is not None:
                node["empirical_samples"] = rows
            node["legacy_template_model"] = legacy
            node["model_templates"] = {m: t for m, (t, _) in per_model.items()}
            if n_rows > 0:
                node["empirical_samples_by_model"] = {m: r for m, (_, r) in per_model.items()}
        else:
            (tpl, rows), = per_model.values()
            node["template"] = tpl
            if rows is not None:
                node["empirical_samples"] = rows
            if legacy != "default":
                node["legacy_template_model"] = legacy
        nodes.append(node)
    info = dict(topo.info or {})
    source_pid = info.get("source_problem_id")
    pid = f"syn_{topology}_{index:04d}" + (f"_{source_pid}" if source_pid else "")
    dag: dict[str, Any] = {
        "problem_id": pid,
        "dag_kind": DAG_KINDS[topology],
        "synthetic": True,
        "n_nodes": n,
        "overall_depth": max(layer) + 1,
    }
    if multi_model:
        dag["model_ids"] = stats.model_ids
        dag["baseline_model"] = legacy
    elif legacy != "default":
        dag["baseline_model"] = legacy
    dag["synthetic_info"] = {"generator": "poolbuild.synthetic", "seed": seed, "index": index, **info}
    dag["nodes"] = nodes
    return dag


def _rng(seed: int, index: int, purpose: int) -> np.random.Generator:
    return np.random.default_rng([seed, index, purpose])


def make_topologies(
    topology: str,
    count: int | None,
    shape: ShapeConfig,
    seed: int,
    start_index: int = 0,
    benchmark_file: str | Path | None = None,
) -> list[Topology]:
    """``count`` topologies of one kind (a convenience for callers outside :func:`generate`).

    Generated shapes are those DAGs ``start_index, start_index + 1, ...`` get
    in :func:`generate`; benchmark problems are picked with the key
    ``(seed, start_index, select)`` (in :func:`generate` the key holds the group number).
    """
    if topology in BENCHMARKS:
        rng = _rng(seed, start_index, _SELECT)
        return benchmark_topologies(topology, count, shape, rng, benchmark_file)
    if count is None:
        raise UserError(f"{topology}: give --n-dags (or {topology}:COUNT in --topology)")
    return [
        generated_topology(topology, shape, _rng(seed, start_index + i, _TOPO)) for i in range(count)
    ]


def interleave(counts: Sequence[int]) -> list[tuple[int, int]]:
    """Spread groups evenly: ``(group, j)`` ordered by ``(j + 0.5) / count``, ties by group.

    ``[2, 4]`` -> (1,0) (0,0) (1,1) (1,2) (0,1) (1,3): every prefix of the pool is a mix.
    """
    slots = [((j + 0.5) / c, g, j) for g, c in enumerate(counts) for j in range(c)]
    return [(g, j) for _, g, j in sorted(slots)]


def generate(
    topologies: Sequence[tuple[str, int | None]],
    *,
    stats: ParametricStats | LibraryStats,
    shape: ShapeConfig | None = None,
    n_rows: int = 0,
    seed: int = 0,
    legacy: str | None = None,
    benchmark_file: str | Path | None = None,
    order: str = "interleaved",
) -> list[dict[str, Any]]:
    """Pool lines for a list of ``(topology, count)`` groups.

    ``order="interleaved"`` spreads the groups evenly over the pool (any prefix,
    e.g. ``N_DAGS=8``, is a mix); ``"grouped"`` keeps them in the given order.
    Benchmark problems are picked with the generator ``(seed, group, select)``;
    DAG ``i`` draws its shape from ``(seed, i, topology)`` and its statistics
    from ``(seed, i, statistics)``.
    """
    shape = shape or ShapeConfig()
    model_ids = stats.model_ids
    legacy = legacy or model_ids[0]
    if legacy not in model_ids:
        raise UserError(f"legacy model {legacy!r} is not among the models {model_ids}")
    if order not in ("interleaved", "grouped"):
        raise UserError(f"order must be 'interleaved' or 'grouped', got {order!r}")
    multi = len(model_ids) > 1
    picked: list[list[Topology] | None] = []
    counts: list[int] = []
    for g, (topology, count) in enumerate(topologies):
        if topology in BENCHMARKS:
            rng = _rng(seed, g, _SELECT)
            picked.append(benchmark_topologies(topology, count, shape, rng, benchmark_file))
            counts.append(len(picked[-1]))
        else:
            if topology not in TOPOLOGIES:
                raise UserError(f"unknown topology {topology!r}; choose from {', '.join(TOPOLOGIES)}")
            if count is None:
                raise UserError(f"{topology}: give --n-dags (or {topology}:COUNT in --topology)")
            picked.append(None)
            counts.append(count)
    slots = (
        interleave(counts)
        if order == "interleaved"
        else [(g, j) for g, c in enumerate(counts) for j in range(c)]
    )
    dags: list[dict[str, Any]] = []
    for k, (g, j) in enumerate(slots):
        topology = topologies[g][0]
        group = picked[g]
        if group is not None:
            topo = group[j]
        else:
            topo = generated_topology(topology, shape, _rng(seed, k, _TOPO))
        dags.append(
            build_dag(
                topo,
                stats,
                _rng(seed, k, _STATS),
                topology=topology,
                index=k,
                n_rows=n_rows,
                legacy=legacy,
                multi_model=multi,
                seed=seed,
            )
        )
    return dags

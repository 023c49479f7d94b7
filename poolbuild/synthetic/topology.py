"""The graphs of synthetic pools: generated shapes and the bundled benchmarks' dependency graphs.

A :class:`Topology` is a parents list indexed by node position (node id ==
position). ``layered``, ``chain`` and ``fork_join`` are drawn from a
:class:`ShapeConfig` with a keyed generator; ``codeflow`` and ``proofflow``
are the real graphs of CodeFlowBench-Repo and ProofFlowBench, read with their
loaders, filtered by size and width and picked at random. Depths come from
:mod:`simulator.pools.graph`, the rule every pool builder shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codeflow.dataset import DEFAULT_DATASET as CODEFLOW_DATASET
from codeflow.dataset import load_problems as load_codeflow_problems
from ProofFlow.benchmark import DEFAULT_BENCHMARK as PROOFFLOW_BENCHMARK
from ProofFlow.benchmark import load_benchmark as load_proofflow_benchmark
from simulator.base.errors import UserError
from simulator.pools.graph import node_depths

#: the bundled benchmark files (the loaders' defaults)
CODEFLOW_FILE = CODEFLOW_DATASET
PROOFFLOW_FILE = PROOFFLOW_BENCHMARK
TOPOLOGIES = ("layered", "chain", "fork_join", "codeflow", "proofflow")
#: the topologies read from a benchmark file (the others are generated)
BENCHMARKS = ("codeflow", "proofflow")


@dataclass
class Topology:
    """A DAG shape: ``parents[v]`` lists the parents of node ``v`` (ids 0..n-1)."""

    parents: list[list[int]]
    names: list[str] | None = None
    info: dict[str, Any] | None = None  # per-DAG provenance (source problem, shape params)

    @property
    def n(self) -> int:
        return len(self.parents)


def depths(parents: Sequence[Sequence[int]]) -> list[int]:
    """Longest-path depth of every node (roots 0); raises UserError on a cycle."""
    try:
        return list(node_depths(dict(enumerate(parents))).values())
    except ValueError as exc:
        raise UserError(f"the dependency graph has a cycle ({exc})") from None


def layered(
    n: int,
    n_layers: int,
    edge_prob: float,
    rng: np.random.Generator,
    max_width: int | None = None,
) -> Topology:
    """``n`` nodes in ``n_layers`` non-empty layers of at most ``max_width`` nodes.

    ``n_layers`` is raised to ``ceil(n / max_width)`` when needed.

    Each node of layer ``l >= 1`` links to every node of layer ``l-1`` with
    probability ``edge_prob`` (at least one such parent is forced, so the
    ``layer`` equals the graph depth) and to every node of layer ``l-2`` with
    probability ``edge_prob / 2``.
    """
    if n < 1:
        raise UserError("layered: --n-nodes must be >= 1")
    if max_width is not None:
        if max_width < 1:
            raise UserError("layered: --max-width must be >= 1")
        n_layers = max(n_layers, -(-n // max_width))
    n_layers = max(1, min(n_layers, n))
    sizes = np.ones(n_layers, dtype=np.int64)
    for _ in range(n - n_layers):  # each extra node joins a random layer that has room
        room = np.flatnonzero(sizes < max_width) if max_width is not None else np.arange(n_layers)
        sizes[room[int(rng.integers(len(room)))]] += 1
    layers: list[list[int]] = []
    nid = 0
    for s in sizes:
        layers.append(list(range(nid, nid + int(s))))
        nid += int(s)
    parents: list[list[int]] = [[] for _ in range(n)]
    for li in range(1, n_layers):
        prev, prev2 = layers[li - 1], layers[li - 2] if li >= 2 else []
        for v in layers[li]:
            ps = [u for u in prev if rng.random() < edge_prob]
            if not ps:
                ps = [prev[int(rng.integers(len(prev)))]]
            ps += [u for u in prev2 if rng.random() < edge_prob / 2]
            parents[v] = sorted(ps)
    info = {"n_layers": int(n_layers), "edge_prob": float(edge_prob)}
    if max_width is not None:
        info["max_width"] = int(max_width)
    return Topology(parents, info=info)


def chain(n: int) -> Topology:
    """0 -> 1 -> ... -> n-1."""
    if n < 1:
        raise UserError("chain: --n-nodes must be >= 1")
    return Topology([[v - 1] if v else [] for v in range(n)], info={})


def fork_join(width: int, length: int, repeats: int) -> Topology:
    """Root -> ``width`` parallel branches of ``length`` nodes -> join, ``repeats`` times.

    The join of one stage is the root of the next: ``1 + repeats*(width*length + 1)`` nodes.
    """
    if width < 1 or length < 1 or repeats < 1:
        raise UserError("fork_join: --width, --branch-length and --repeats must be >= 1")
    parents: list[list[int]] = [[]]
    root = 0
    for _ in range(repeats):
        tails = []
        for _b in range(width):
            prev = root
            for _s in range(length):
                parents.append([prev])
                prev = len(parents) - 1
            tails.append(prev)
        parents.append(sorted(tails))
        root = len(parents) - 1
    return Topology(parents, info={"width": width, "branch_length": length, "repeats": repeats})


def codeflow_topologies(path: str | Path = CODEFLOW_FILE) -> list[Topology]:
    """Every CodeFlowBench-Repo problem as a topology (subproblems, dependencies by name).

    Read with the CodeFlow loader (:func:`codeflow.dataset.load_problems`), so
    a synthetic pool names a problem as a real CodeFlow pool does (including
    the suffix ``__2`` the loader gives the second of two problems sharing an id).
    """
    out = []
    for prob in load_codeflow_problems(path):
        parents = [sorted(prob.by_name[d].index for d in sub.dependencies) for sub in prob.subproblems]
        info = {"source": "codeflowbench_repo", "source_index": prob.source_index,
                "source_problem_id": prob.problem_id}  # fmt: skip
        out.append(Topology(parents, [sub.name for sub in prob.subproblems], info))
    return out


def proofflow_topologies(path: str | Path = PROOFFLOW_FILE) -> list[Topology]:
    """Every ProofFlowBench proof graph as a topology; self-loops are dropped with a warning.

    Read with the ProofFlow loader (:func:`ProofFlow.benchmark.load_benchmark`),
    so a synthetic pool names a problem as a real ProofFlow pool does (spaces
    in the benchmark's ids become ``_``).
    """
    out = []
    for i, prob in enumerate(load_proofflow_benchmark(path)):
        parents = [sorted(step.parents) for step in prob.steps]
        info: dict[str, Any] = {"source": "proofflowbench_0409", "source_index": i,
                                "source_problem_id": prob.problem_id}  # fmt: skip
        dropped = [step.name for step in prob.steps if step.self_loop_dropped]
        if dropped:
            info["dropped_self_loops"] = dropped
        out.append(Topology(parents, [step.name for step in prob.steps], info))
    return out


@dataclass
class ShapeConfig:
    """Shape parameters of the generated topologies (ranges are inclusive)."""

    n_nodes: tuple[int, int] = (5, 12)
    layers: tuple[int, int] | None = None  # default: about sqrt(n)..n/2 layers
    edge_prob: float = 0.5
    width: tuple[int, int] = (2, 3)
    branch_length: tuple[int, int] = (1, 2)
    repeats: tuple[int, int] = (1, 2)
    filter_nodes: tuple[int, int] | None = None  # benchmark topologies: keep sizes in range
    max_width: int | None = None  # most nodes per layer (layered; filter for benchmarks)


def _int_in(rng: np.random.Generator, r: tuple[int, int]) -> int:
    return int(rng.integers(r[0], r[1] + 1))


def max_layer_width(topo: Topology) -> int:
    """Most nodes at one depth (a proxy for how many nodes can be ready at once)."""
    counts: dict[int, int] = {}
    for d in depths(topo.parents):
        counts[d] = counts.get(d, 0) + 1
    return max(counts.values())


def benchmark_topologies(
    topology: str,
    count: int | None,
    shape: ShapeConfig,
    rng: np.random.Generator,
    benchmark_file: str | Path | None = None,
) -> list[Topology]:
    """Benchmark problems of the size filter: all of them, or ``count`` picked at random.

    The picked problems keep their file order.
    """
    load = codeflow_topologies if topology == "codeflow" else proofflow_topologies
    default = CODEFLOW_FILE if topology == "codeflow" else PROOFFLOW_FILE
    topos = load(benchmark_file or default)
    if shape.filter_nodes is not None:
        lo, hi = shape.filter_nodes
        topos = [t for t in topos if lo <= t.n <= hi]
    if shape.max_width is not None:
        topos = [t for t in topos if max_layer_width(t) <= shape.max_width]
    if not topos:
        raise UserError(
            f"{topology}: no benchmark problem has {shape.filter_nodes or 'any number of'} nodes "
            f"and at most {shape.max_width or 'any number of'} nodes per layer "
            "(--benchmark-nodes, --max-width)"
        )
    if count is None:
        return topos
    if count > len(topos):
        raise UserError(
            f"{topology}: asked for {count} DAGs but only {len(topos)} benchmark problems "
            f"match (--benchmark-nodes {shape.filter_nodes or 'any'}, --max-width "
            f"{shape.max_width or 'any'})"
        )
    pick = rng.choice(len(topos), size=count, replace=False)
    return [topos[int(i)] for i in sorted(pick)]


def generated_topology(topology: str, shape: ShapeConfig, rng: np.random.Generator) -> Topology:
    """One ``layered``/``chain``/``fork_join`` topology drawn with ``rng``."""
    if topology == "chain":
        return chain(_int_in(rng, shape.n_nodes))
    if topology == "layered":
        n = _int_in(rng, shape.n_nodes)
        if shape.layers is not None:
            n_layers = _int_in(rng, shape.layers)
        else:
            lo = max(2, round(math.sqrt(n)))
            n_layers = int(rng.integers(min(lo, n), max(lo, n // 2) + 1))
        return layered(n, n_layers, shape.edge_prob, rng, shape.max_width)
    if topology == "fork_join":
        return fork_join(
            _int_in(rng, shape.width), _int_in(rng, shape.branch_length), _int_in(rng, shape.repeats)
        )
    raise UserError(f"unknown topology {topology!r}; choose from {', '.join(TOPOLOGIES)}")

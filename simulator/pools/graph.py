"""Dependency graphs: one rule for parents, children, depth and self-loops.

Why one module: the benchmark loaders (ProofFlowBench, CodeFlowBench-Repo),
the ProofFlow pickle converter, the pool builders and the synthetic generator
all turn "step X depends on steps Y, Z" into a pool's ``parents`` /
``children`` / ``layer``. Keeping the rule here guarantees that they agree:

- step names are unique; a dependency on an unknown name is an error;
- a dependency listed twice counts once (first mention decides the order);
- a step that depends on itself (ProofFlowBench has 8) loses that self-loop
  with a warning, or is an error where the caller says so;
- depth is the longest path from a root (roots 0), computed without recursion
  so that long chains work; a cycle is an error naming the nodes on it;
- one topological order (:func:`topological_order`, Kahn's) serves every
  walk over a DAG, here and in the simulator (pool loader, nominal scales,
  baselines, MCPP).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from simulator.base.errors import PoolError

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class CycleError(ValueError):
    """The graph has a cycle; ``cycle`` lists its nodes, each a parent of the next."""

    def __init__(self, cycle: list) -> None:
        super().__init__(f"cycle through nodes {cycle}")
        self.cycle = cycle


def topological_order(parent_ptr: Any, parent_idx: Any, child_ptr: Any, child_idx: Any) -> list[int]:
    """Kahn's order of a graph in CSR form (positions 0..n-1); shorter than n when there is a cycle.

    The one topological order of the project: the pool loader, the nominal
    scales, the static baselines and MCPP's bounds all walk the graph with it.
    Any valid order gives them the same numbers (they take maxima and sums
    along paths), so the tie rule (last ready first) is not part of any result.
    """
    n = len(parent_ptr) - 1
    indeg = np.diff(np.asarray(parent_ptr)).astype(np.int64)
    stack = [v for v in range(n) if indeg[v] == 0]
    order: list[int] = []
    while stack:
        v = stack.pop()
        order.append(v)
        for c in child_idx[child_ptr[v] : child_ptr[v + 1]]:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(int(c))
    return order


def longest_path_depths(order: Sequence[int], parent_ptr: Any, parent_idx: Any) -> list[int]:
    """Depth of every position (roots 0, else 1 + the deepest parent), given a topological ``order``."""
    depth = [0] * (len(parent_ptr) - 1)
    for v in order:
        for e in range(parent_ptr[v], parent_ptr[v + 1]):
            depth[v] = max(depth[v], depth[parent_idx[e]] + 1)
    return depth


def csr(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, idx)`` of a list of int lists: item ``v`` is ``idx[ptr[v]:ptr[v+1]]``."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.array([i for x in lists for i in x], dtype=np.int64)
    return ptr, idx


def node_depths(parents: Mapping[K, Iterable[K]]) -> dict[K, int]:
    """Longest-path depth of every node (roots 0), in the mapping's order.

    Raises :class:`CycleError` (a ``ValueError``) naming the nodes of a
    cycle, ``KeyError`` for a parent that is not a node.
    """
    ps = {v: list(p) for v, p in parents.items()}
    nodes = list(ps)
    pos = {v: k for k, v in enumerate(nodes)}
    by_pos = [[pos[u] for u in ps[v]] for v in nodes]
    pptr, pidx = csr(by_pos)
    cptr, cidx = csr(list(children_of(dict(enumerate(by_pos))).values()))
    order = topological_order(pptr, pidx, cptr, cidx)
    if len(order) < len(nodes):
        done = {nodes[k]: 0 for k in order}
        raise CycleError(_a_cycle(ps, done))
    depth = longest_path_depths(order, pptr, pidx)
    return {v: depth[k] for k, v in enumerate(nodes)}


def _a_cycle(parents: dict[K, list[K]], done: Mapping[K, int]) -> list[K]:
    """A cycle among the nodes a topological pass could not reach, parents first.

    Every such node has a parent that was not reached either, so following
    those parents must come back to a node already on the walk.
    """
    v = next(u for u in parents if u not in done)
    walk: list[K] = []
    pos: dict[K, int] = {}
    while v not in pos:
        pos[v] = len(walk)
        walk.append(v)
        v = next(u for u in parents[v] if u not in done)
    return walk[pos[v]:][::-1]


def children_of(parents: Mapping[K, Iterable[K]]) -> dict[K, list[K]]:
    """Inverse adjacency, children listed in node order."""
    ch: dict[K, list[K]] = {v: [] for v in parents}
    for v, ps in parents.items():
        for p in ps:
            ch[p].append(v)
    return ch


@dataclass(frozen=True)
class NamedGraph:
    """A graph over steps ``0..n-1`` (file order) built from dependency names."""

    names: list[str]
    parents: list[list[int]]  # by position, in first-mention order
    children: list[list[int]]
    depth: list[int]  # longest path from a root, roots 0
    dropped_self_loops: list[int]  # positions of steps that listed themselves

    @property
    def overall_depth(self) -> int:
        """Number of levels (deepest step + 1)."""
        return max(self.depth) + 1 if self.depth else 0


def graph_from_named(
    steps: Sequence[tuple[str, Iterable[object]]],
    *,
    path: str | os.PathLike | None = None,
    problem_id: object = None,
    drop_self_loops: bool = True,
    logger: logging.Logger = log,
) -> NamedGraph:
    """The graph of ``[(name, dependency names), ...]``; errors are :class:`PoolError`.

    ``path`` and ``problem_id`` locate errors and the self-loop warning, which
    goes to ``logger`` (the caller's, so its log configuration applies).
    """
    path = os.fspath(path) if path is not None else None

    def error(message: str, node: object = None) -> PoolError:
        return PoolError(message, path=path, problem_id=problem_id, node=node)

    index: dict[str, int] = {}
    for k, (name, _deps) in enumerate(steps):
        if name in index:
            raise error("duplicate step id", name)
        index[name] = k
    parents: list[list[int]] = []
    dropped: list[int] = []
    for k, (name, deps) in enumerate(steps):
        ps: list[int] = []
        for dep in map(str, deps):
            if dep == name:
                if not drop_self_loops:
                    raise error("depends on itself", name)
                logger.warning("%s; self-loop dropped", error("depends on itself", name))
                if k not in dropped:
                    dropped.append(k)
                continue
            if dep not in index:
                raise error(f"depends on unknown {dep!r}", name)
            if index[dep] not in ps:
                ps.append(index[dep])
        parents.append(ps)
    names = [name for name, _ in steps]
    by_pos = dict(enumerate(parents))
    try:
        depth = node_depths(by_pos)
    except CycleError as exc:
        cycle = " -> ".join(names[v] for v in exc.cycle)
        raise error(f"the dependency graph has a cycle ({cycle})") from None
    return NamedGraph(names, parents, list(children_of(by_pos).values()), list(depth.values()),
                      dropped)

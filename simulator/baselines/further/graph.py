"""Graph routines of the further baselines over the *remaining DAG*, compiled.

The remaining DAG ``R`` is the subgraph induced by the nodes not yet
completed. Nothing is copied: every routine takes the full DAG's CSR arrays
(:class:`~simulator.costs.arrays.DagArrays` ``parent_ptr``/``parent_idx``/
``child_ptr``/``child_idx``) and a boolean mask ``alive`` of the nodes of
``R``. Parent and child lists keep their pool-line order, which decides the
tie-breaks the policies depend on:

* topological order: Kahn's algorithm with a FIFO queue seeded with the
  roots in pool order, children released in list order;
* longest path: a node's best child is the *first* child (list order) with
  the maximal distance; the critical path starts at the first root (pool
  order) with the maximal distance;
* path enumeration: depth first from each root in pool order, children in
  list order, with a cap on the number of paths (the search aborts when a
  node is visited while ``cap`` paths are already recorded).

Paths are returned flat: the nodes of path ``k`` are
``nodes[ptr[k]:ptr[k+1]]``, from root to sink.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.base.jit import njit


class Remaining(NamedTuple):
    """The remaining DAG as the LOADER and deadline kernels read it (one argument instead of nine).

    The full DAG's CSR arrays, the ``alive`` mask, the alive nodes by node id
    (``id_order[:n_alive]``, the published "all nodes" order) and in Kahn
    order (``order[:count]``).
    """

    parent_ptr: np.ndarray
    parent_idx: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
    alive: np.ndarray
    id_order: np.ndarray
    n_alive: int
    order: np.ndarray
    count: int


def remaining(csr: tuple, alive: np.ndarray, node_ids: np.ndarray) -> Remaining:
    """:class:`Remaining` of the alive nodes of the DAG with CSR arrays ``csr`` and ids ``node_ids``."""
    alive = np.ascontiguousarray(alive, dtype=np.bool_)
    ids, n_alive = alive_id_order(alive, node_ids)
    order, count = topo_order(*csr, alive)
    return Remaining(*csr, alive, ids, int(n_alive), order, int(count))


@njit(cache=True, nogil=True)
def alive_id_order(alive, node_ids):
    """Alive node positions sorted by node id (the published "all nodes" order)."""
    order = np.argsort(node_ids, kind="mergesort")
    out = np.empty(alive.shape[0], dtype=np.int64)
    k = 0
    for v in order:
        if alive[v]:
            out[k] = v
            k += 1
    return out, k


@njit(cache=True, nogil=True)
def topo_order(parent_ptr, parent_idx, child_ptr, child_idx, alive):
    """Kahn order of the alive nodes (FIFO, roots in pool order); returns (order, count)."""
    n = alive.shape[0]
    indeg = np.zeros(n, dtype=np.int64)
    for v in range(n):
        if alive[v]:
            for e in range(parent_ptr[v], parent_ptr[v + 1]):
                if alive[parent_idx[e]]:
                    indeg[v] += 1
    order = np.empty(n, dtype=np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if alive[v] and indeg[v] == 0:
            order[tail] = v
            tail += 1
    while head < tail:
        v = order[head]
        head += 1
        for e in range(child_ptr[v], child_ptr[v + 1]):
            c = child_idx[e]
            if alive[c]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    order[tail] = c
                    tail += 1
    return order, tail


@njit(cache=True, nogil=True)
def is_root(parent_ptr, parent_idx, alive, v):
    """No alive parent."""
    for e in range(parent_ptr[v], parent_ptr[v + 1]):
        if alive[parent_idx[e]]:
            return False
    return True


@njit(cache=True, nogil=True)
def is_sink(child_ptr, child_idx, alive, v):
    """No alive child."""
    for e in range(child_ptr[v], child_ptr[v + 1]):
        if alive[child_idx[e]]:
            return False
    return True


@njit(cache=True, nogil=True)
def longest_dist(child_ptr, child_idx, alive, order, count, g, dist, best_child):
    """Longest path to a sink from every alive node under node weights ``g`` (fills ``dist``, ``best_child``)."""
    for q in range(count - 1, -1, -1):
        v = order[q]
        best = -1
        for e in range(child_ptr[v], child_ptr[v + 1]):
            c = child_idx[e]
            if alive[c] and (best < 0 or dist[c] > dist[best]):
                best = c
        best_child[v] = best
        dist[v] = g[v] if best < 0 else g[v] + dist[best]


@njit(cache=True, nogil=True)
def dag_value(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, g):
    """Longest-path value of the alive DAG under ``g`` (0 for an empty DAG)."""
    n = alive.shape[0]
    dist = np.zeros(n)
    best_child = np.empty(n, dtype=np.int64)
    longest_dist(child_ptr, child_idx, alive, order, count, g, dist, best_child)
    val = 0.0
    first = True
    for v in range(n):
        if alive[v] and is_root(parent_ptr, parent_idx, alive, v):
            if first or dist[v] > val:
                val = dist[v]
                first = False
    return val


@njit(cache=True, nogil=True)
def critical_path(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, g):
    """The critical path (first maximal root, then best children) as an int64 array (empty if no node)."""
    n = alive.shape[0]
    dist = np.zeros(n)
    best_child = np.empty(n, dtype=np.int64)
    longest_dist(child_ptr, child_idx, alive, order, count, g, dist, best_child)
    start = -1
    for v in range(n):
        if alive[v] and is_root(parent_ptr, parent_idx, alive, v):
            if start < 0 or dist[v] > dist[start]:
                start = v
    path = np.empty(count, dtype=np.int64)
    k = 0
    v = start
    while v >= 0:
        path[k] = v
        k += 1
        v = best_child[v]
    return path[:k].copy()


@njit(cache=True, nogil=True)
def same_path(nodes, ptr, k, path):
    """Is path ``k`` of the flat list equal to ``path``?"""
    lo = ptr[k]
    hi = ptr[k + 1]
    if hi - lo != path.shape[0]:
        return False
    for i in range(hi - lo):
        if nodes[lo + i] != path[i]:
            return False
    return True


@njit(cache=True, nogil=True)
def find_path(nodes, ptr, n_paths, path):
    """Index of ``path`` among the first ``n_paths`` flat paths, or -1."""
    for k in range(n_paths):
        if same_path(nodes, ptr, k, path):
            return k
    return -1


@njit(cache=True, nogil=True)
def top_k_paths(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, g, k):
    """Up to ``k`` paths: the critical path, then halve its weights and repeat; stop on an empty or repeated path."""
    gw = g.copy()
    nodes = np.empty(max(k, 1) * max(count, 1), dtype=np.int64)
    ptr = np.zeros(k + 1, dtype=np.int64)
    n_paths = 0
    for _ in range(k):
        path = critical_path(parent_ptr, parent_idx, child_ptr, child_idx, alive, order, count, gw)
        if path.shape[0] == 0 or find_path(nodes, ptr, n_paths, path) >= 0:
            break
        lo = ptr[n_paths]
        for i in range(path.shape[0]):
            nodes[lo + i] = path[i]
            gw[path[i]] *= 0.5
        ptr[n_paths + 1] = lo + path.shape[0]
        n_paths += 1
    return nodes[: ptr[n_paths]].copy(), ptr[: n_paths + 1].copy()


@njit(cache=True, nogil=True)
def all_paths(parent_ptr, parent_idx, child_ptr, child_idx, alive, cap):
    """Every root-to-sink path of the alive DAG, depth first; returns (nodes, ptr, aborted).

    ``aborted`` is True when a node was visited while ``cap`` paths were
    already recorded (so more than ``cap`` paths exist); the lists are then
    incomplete and must not be used.
    """
    n = alive.shape[0]
    sink = np.zeros(n, dtype=np.bool_)
    for v in range(n):
        sink[v] = alive[v] and is_sink(child_ptr, child_idx, alive, v)
    cap_nodes = 64
    nodes = np.empty(cap_nodes, dtype=np.int64)
    ptr_list = np.empty(64, dtype=np.int64)
    ptr_list[0] = 0
    n_paths = 0
    stack = np.empty(n, dtype=np.int64)
    edge = np.empty(n, dtype=np.int64)
    for root in range(n):
        if not alive[root] or not is_root(parent_ptr, parent_idx, alive, root):
            continue
        depth = 0
        c = root
        while True:
            if c >= 0:  # visit c
                if n_paths >= cap:
                    return nodes[:0].copy(), ptr_list[:1].copy(), True
                stack[depth] = c
                edge[depth] = child_ptr[c]
                depth += 1
                if sink[c]:
                    end = ptr_list[n_paths] + depth
                    if end > cap_nodes:
                        while cap_nodes < end:
                            cap_nodes *= 2
                        grown = np.empty(cap_nodes, dtype=np.int64)
                        grown[: ptr_list[n_paths]] = nodes[: ptr_list[n_paths]]
                        nodes = grown
                    nodes[ptr_list[n_paths] : end] = stack[:depth]
                    if n_paths + 2 > ptr_list.shape[0]:
                        grown_p = np.empty(2 * ptr_list.shape[0], dtype=np.int64)
                        grown_p[: n_paths + 1] = ptr_list[: n_paths + 1]
                        ptr_list = grown_p
                    n_paths += 1
                    ptr_list[n_paths] = end
                    depth -= 1
            if depth == 0:
                break
            v = stack[depth - 1]
            e = edge[depth - 1]
            while e < child_ptr[v + 1] and not alive[child_idx[e]]:
                e += 1
            if e == child_ptr[v + 1]:
                depth -= 1
                c = -1
                if depth == 0:
                    break
                continue
            edge[depth - 1] = e + 1
            c = child_idx[e]
    return nodes[: ptr_list[n_paths]].copy(), ptr_list[: n_paths + 1].copy(), False


@njit(cache=True, nogil=True)
def path_sums(nodes, ptr, n_paths, g, out):
    """``out[k]`` = sum of ``g`` over path ``k`` (in path order)."""
    for k in range(n_paths):
        s = 0.0
        for i in range(ptr[k], ptr[k + 1]):
            s += g[nodes[i]]
        out[k] = s

"""MCPP's candidate actions at a decision, in the published order (``docs/policies.md``).

An action gives every ready node one level (model position, count). The
faithful generator reproduces the published list exactly, biases included:

1. base actions: for each k in ``base_ks``: (first model, k) on every ready
   node, then (model, k) on every ready node for each model available on all
   of them; duplicates dropped (first occurrence kept);
2. ``full_log_scale``: at most ``random_free_n`` ready nodes and a product of
   level counts <= ``max_exact_actions``: the whole Cartesian product of the
   nodes' levels (first node varies slowest);
3. ``random_free_shared_level`` otherwise: ``min(|ready|, random_free_n)``
   free nodes drawn at random (keyed); the fixed nodes share (first model,
   shared k) for each shared k in ``base_ks`` (only the first when there is
   no fixed node); for each shared k the product of the free nodes' levels.

The list is cut at ``max_candidate_actions`` distinct actions; base actions
come first and are never cut. A node's levels are (model, k) for each of its
available models (portfolio order) and each k (model-major), its "first
model" the first portfolio model available on it.

The ``corrected`` generator (option) removes the published biases: the exact
branch is used whenever the full product fits in ``max_candidate_actions``,
fixed nodes share any (model, k) level available on all of them, and a
product that does not fit is sampled uniformly (keyed) instead of keeping
its prefix.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from simulator.base.rng import STREAM_CANDIDATES, make_key, uniform

FULL = "full_log_scale"
RANDOM = "random_free_shared_level"
CORRECTED_FULL = "corrected_full_product"
CORRECTED_SAMPLED = "corrected_sampled_product"
Level = tuple[int, int]
Action = tuple[Level, ...]


def candidates_key(seed: int, dag: int, trial: int, decision: int) -> np.uint64:
    """Key of the random choices of the candidate generator at one decision."""
    return np.uint64(make_key(seed, dag, trial, STREAM_CANDIDATES, decision, 0, 0))


def choose_free_nodes(key: np.uint64, n_ready: int, n_free: int) -> list[int]:
    """Positions (into the ready list) of the free nodes, drawn without replacement.

    Partial Fisher-Yates with keyed uniforms: the i-th pick swaps position i
    with a uniform position in [i, n_ready). The drawn order is kept (it is
    the order of the free nodes in the product).
    """
    pos = list(range(n_ready))
    for i in range(n_free):
        j = i + min(int(uniform(key, i) * (n_ready - i)), n_ready - i - 1)
        pos[i], pos[j] = pos[j], pos[i]
    return pos[:n_free]


def node_levels(available: np.ndarray, v: int, models: Sequence[int], ks: Sequence[int]) -> list[Level]:
    """(model, k) levels of node v: its available portfolio models x ks, model-major."""
    return [(j, k) for j in models if available[v, j] for k in ks]


class _Collector:
    """Ordered, duplicate-free list of actions with a size cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.items: list[Action] = []
        self.seen: set[Action] = set()

    def add(self, a: Action) -> bool:
        """Add ``a`` unless already present; False once the cap is reached."""
        if a not in self.seen:
            self.seen.add(a)
            self.items.append(a)
        return len(self.items) < self.cap

    @property
    def full(self) -> bool:
        return len(self.items) >= self.cap


def generate_candidates(
    available: np.ndarray,
    ready: Sequence[int],
    models: Sequence[int],
    base_ks: Sequence[int],
    random_free_n: int,
    max_exact_actions: int,
    max_candidate_actions: int,
    key: int,
    generator: str = "faithful",
) -> tuple[list[Action], str, int] | None:
    """Candidate actions ``(list, mode, number of base actions)``, or None if a ready node has no model.

    Each action is a tuple over ``ready`` (same order) of (model position, k).
    """
    ready = [int(v) for v in ready]
    levels = [node_levels(available, v, models, base_ks) for v in ready]
    if not ready or any(not lv for lv in levels):
        return None
    first = [next(j for j in models if available[v, j]) for v in ready]
    common = [j for j in models if all(available[v, j] for v in ready)]
    base = _Collector(cap=math.inf)  # type: ignore[arg-type]
    for k in base_ks:
        base.add(tuple((f, k) for f in first))
        for j in common:
            base.add(tuple((j, k) for _ in ready))
    n_base = len(base.items)
    out = _Collector(cap=max(max_candidate_actions, n_base))
    for a in base.items:
        out.add(a)
    sizes = [len(lv) for lv in levels]
    product = math.prod(sizes)
    if generator == "corrected":
        mode = _corrected(out, ready, levels, first, models, available, base_ks, random_free_n, key, product)
    else:
        mode = _faithful(out, ready, levels, first, base_ks, random_free_n, max_exact_actions, key, product)
    return out.items, mode, n_base


def _add_product(out, levels) -> None:
    """Add the Cartesian product of the nodes' levels (first node slowest) until the cap."""
    for combo in itertools.product(*levels):
        if not out.add(combo):
            break


def _split_free(key, R: int, random_free_n: int) -> tuple[list[int], list[int]]:
    """Keyed free nodes (drawn order) and the remaining fixed nodes."""
    free = list(faithful_draw(key, R, random_free_n))
    return free, [r for r in range(R) if r not in free]


def faithful_draw(key, n_ready: int, random_free_n: int) -> tuple[int, ...]:
    """All the faithful generator reads of its key: the free nodes, in their drawn order.

    Its list is a function of the ready nodes, the fixed settings (models,
    ``base_ks``, the caps) and this tuple, so a planner may keep the list of
    a (ready nodes, draw) it has seen (:meth:`simulator.mcpp.policy.MCPortfolioPolicy.prepare`).
    """
    return tuple(choose_free_nodes(key, n_ready, min(n_ready, random_free_n)))


def _faithful(out, ready, levels, first, base_ks, random_free_n, max_exact, key, product) -> str:
    R = len(ready)
    if R <= random_free_n and product <= max_exact:
        _add_product(out, levels)
        return FULL
    free, fixed = _split_free(key, R, random_free_n)
    shared_ks = list(base_ks) if fixed else list(base_ks[:1])
    action: list[Level] = [(0, 0)] * R
    for sk in shared_ks:
        if out.full:
            break
        for r in fixed:
            action[r] = (first[r], sk)
        for combo in itertools.product(*(levels[r] for r in free)):
            for r, lv in zip(free, combo):
                action[r] = lv
            if not out.add(tuple(action)):
                break
    return RANDOM


def _corrected(out, ready, levels, first, models, available, base_ks, random_free_n, key, product) -> str:
    R = len(ready)
    if product <= out.cap:
        _add_product(out, levels)
        return CORRECTED_FULL
    free, fixed = _split_free(key, R, random_free_n)
    if fixed:
        shared = [(j, k) for j in models if all(available[ready[r], j] for r in fixed) for k in base_ks]
    else:
        shared = [(0, 0)]
    dims = [len(shared)] + [len(levels[r]) for r in free]
    space = math.prod(dims)
    room = out.cap - len(out.items)
    if space <= room:
        order = range(space)
    else:
        rng = np.random.default_rng(int(key))
        order = np.sort(rng.choice(space, size=room, replace=False))
    action: list[Level] = [(0, 0)] * R

    def decode(idx: int) -> tuple:
        """Mixed-radix index -> action (shared level on fixed nodes, own levels on free ones)."""
        digits = []
        for d in reversed(dims):
            digits.append(idx % d)
            idx //= d
        digits.reverse()
        for r in fixed:
            action[r] = shared[digits[0]]
        for r, dgt in zip(free, digits[1:]):
            action[r] = levels[r][dgt]
        return tuple(action)

    for idx in order:
        if not out.add(decode(int(idx))):
            break
    # duplicates of base actions may leave room: top up with further samples
    if not out.full and space > room:
        rng = np.random.default_rng([int(key), 1])
        for idx in rng.permutation(space) if space <= 1 << 22 else rng.integers(0, space, 4 * room):
            if not out.add(decode(int(idx))):
                break
    return CORRECTED_SAMPLED


def actions_to_arrays(actions: list[Action]) -> tuple[np.ndarray, np.ndarray]:
    """(C, R) int64 arrays of model positions and counts.

    Flattened with ``np.fromiter`` (numpy's conversion of 2,048 nested tuples
    was 2.4 ms of a surface decision's 4); the same arrays.
    """
    R = len(actions[0]) if actions else 0
    if R == 0:  # no ready node cannot happen; keep shapes sane anyway
        a = np.asarray(actions, dtype=np.int64).reshape(len(actions), 0, 2)
    else:
        flat = itertools.chain.from_iterable(itertools.chain.from_iterable(actions))
        a = np.fromiter(flat, dtype=np.int64, count=len(actions) * R * 2).reshape(len(actions), R, 2)
    return np.ascontiguousarray(a[:, :, 0]), np.ascontiguousarray(a[:, :, 1])

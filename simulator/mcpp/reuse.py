"""MCPP's ``reuse="state"`` option: a decision is a function of the planner state, and is reused.

The paper's planner keys its draws by (run seed, DAG, trial, decision index),
so two decisions never share simulations, even when they plan from the same
state. Which states repeat? Within one episode, none in practice: every
decision follows an attempt's finish at a continuous time, with its own
remaining times of the attempts still running, budget and horizon. Across
the trials of one (DAG, budget, deadline) cell, the first decision always
repeats (nothing done, nothing running, the whole budget and horizon), and
so do later ones on DAGs whose outcomes are certain. Simulations made from
one state say nothing exact about another (their futures are conditioned on
it), so an identical state is where reuse is sound.

Under ``reuse="state"`` the decision's draws (the candidate generator's
choices and the simulations) are keyed by (run seed, DAG, a 63-bit digest
of the state) instead of (trial, decision index), which makes the decision
a pure function of the state (with ``time_limit_ms`` also of the wall
clock: how many simulations fit). A state met again then takes the decision
computed for it, with no simulation: the same result a recomputation would
give, so results do not depend on which trials share a process, shard or
machine. The price is a coupling the faithful planner does not have: the
trials of one cell share their first decision's Monte Carlo luck (their
executions still differ).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np

from simulator.engine.episode import DecisionView

#: the "trial" field of a state-keyed draw (real trials are >= 0, so the key spaces never meet)
STATE_TRIAL = -1
#: decisions remembered per policy (first in, first out); a cell's first decision is all that usually repeats
MEMO_SIZE = 4096


def state_digest(view: DecisionView) -> int:
    """A 63-bit digest of everything a decision depends on in ``view`` (not the trial, not the decision index).

    The planner sees the horizon (deadline - t), not t itself, so two states
    at different times with the same horizon plan alike.
    """
    h = hashlib.blake2b(digest_size=8)
    h.update(np.array([view.seed, view.dag], dtype=np.int64).tobytes())
    h.update(np.array([view.budget_left, view.deadline - view.t], dtype=np.float64).tobytes())
    for a, dt in (
        (view.completed, np.bool_),
        (view.ready, np.int64),
        (view.inflight_node, np.int64),
        (view.inflight_model, np.int64),
        (view.already_success, np.bool_),
        (view.remaining_ptr, np.int64),
        (view.remaining, np.float64),
    ):
        b = np.ascontiguousarray(a, dtype=dt)
        h.update(np.int64(b.size).tobytes())  # lengths too: arrays of different splits never collide
        h.update(b.tobytes())
    return int.from_bytes(h.digest(), "little") >> 1


class DecisionMemo:
    """Decisions by state digest, for one policy and one DAG's planning statistics."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[int, Any] = OrderedDict()
        self.owner: object | None = None  # the planning arrays the entries were computed on

    def for_arrays(self, arr: object) -> DecisionMemo:
        """This memo, emptied first if its entries were computed on other planning arrays."""
        if self.owner is not arr:
            self._items.clear()
            self.owner = arr
        return self

    def get(self, digest: int) -> Any | None:
        return self._items.get(digest)

    def put(self, digest: int, decision: Any) -> None:
        self._items[digest] = decision
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

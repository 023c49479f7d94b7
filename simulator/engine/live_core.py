"""The live rules' decisions in positions, stated once for the two drivers of a live run.

:mod:`simulator.engine.live_rules` holds the numbers of the ``live``
execution rules (an admission's verdict, a sample's reservation, a charge
cut at it). This module holds the steps a driver takes with them: which
nodes are ready, in what order a per-attempt launch admits its samples and
what a refusal consumes, when an atomic launch stalls, launches, waits or
ends the run, which (node, model) pairs a method may still use, when an
unfinished node is stuck, and whether any launch still fits. Everything is a
pure function of positions (node and model indices), the rules' arrays and
numbers the caller passes in; nothing here knows a clock, a request or a
trace.

Two drivers call it: the simulated live episode
(:mod:`simulator.engine.live_episode`, MCPP's calibrated estimate and the
``live`` grid) and the live executor (:mod:`executor.live`). What differs
between them is passed in at the call site, where it can be read: the
executor's expected charge and ceiling of a sample add its prompt's cost
(the simulator's charges are output only), its room is its ledger's answer
(:meth:`executor.ledger.Ledger.room`), and a sample admitted there must also
buy at least one output token (``take`` may refuse it).

MCPP's member simulations run inside its compiled kernel and state the
same rules over arrays (:mod:`simulator.mcpp.kernel`); a new live rule
touches :mod:`~simulator.engine.live_rules`, this module and that kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from simulator.engine.live_rules import (
    END,
    LAUNCH,
    WAIT,
    atomic_admission,
    atomic_reservation,
    attempt_reservation,
)

#: an atomic action that gives a ready node no sample (or a model it may not use): the run ends ``stalled``
STALL = 3

__all__ = ["END", "LAUNCH", "STALL", "WAIT", "Admission", "admit_atomic", "admit_attempts", "atomic_shares",
           "launch_order", "method_uses", "ready_nodes", "some_launch_fits", "stuck_node"]


class Admission(NamedTuple):
    """An atomic launch's verdict: ``LAUNCH``, ``WAIT``, ``END`` or ``STALL`` (``node``: the node it stalls on),
    its plan (node, model, count, expected cost of one sample) and its whole expected cost."""

    what: int
    plan: list[tuple[int, int, int, float]]
    total: float
    node: int = -1


def ready_nodes(n: int, completed: Sequence[bool], inflight: Callable[[int], bool],
                parents: Sequence[Sequence[int]]) -> list[int]:
    """Positions of the unfinished nodes with no batch in flight whose parents all completed."""
    return [v for v in range(n) if not completed[v] and not inflight(v) and all(completed[p] for p in parents[v])]


def method_uses(arr, mask, legacy_only: bool, v: int, j: int) -> bool:
    """Is model ``j`` on node ``v`` one of the method's (its models, or the node's legacy model) and in the pool?"""
    ok = (j == int(arr.legacy[v])) if legacy_only else bool(mask[j])
    return ok and bool(arr.available[v, j])


def launch_order(ready: Sequence[int], counts, node_ids: Sequence[int]) -> list[int]:
    """A per-attempt launch admits nodes by decreasing count, ties to the higher node id."""
    return sorted((int(v) for v in ready if counts[v] > 0), key=lambda v: (-int(counts[v]), -int(node_ids[v])))


def admit_attempts(k: int, kappa: float, room: Callable[[], float], ceiling: float, unit: float,
                   take: Callable[[float], bool], refuse: Callable[[], None]) -> None:
    """Admit up to ``k`` samples one attempt at a time: each on ``room()``, what the node may reserve now.

    ``take(r)`` launches an admitted sample of reservation ``r`` (False: it
    cannot, and is refused); ``refuse()`` records a refusal (its attempt's
    number is consumed). The first refusal skips the rest of the batch.
    """
    for _ in range(int(k)):
        r = attempt_reservation(kappa, room(), ceiling, unit)
        if r < 0:
            refuse()
            return
        if not take(r):
            return


def admit_atomic(ready: Sequence[int], models, counts, usable: Callable[[int, int], bool],
                 expected: Callable[[int, int], float], budget_left: float, n_inflight: int) -> Admission:
    """An atomic launch, admitted on its expected cost: every ready node gets a sample of a usable model, else
    ``STALL``; then ``LAUNCH`` when the expected cost fits the budget left, ``WAIT`` while batches are in flight,
    else ``END`` (:func:`simulator.engine.live_rules.atomic_admission`)."""
    plan: list[tuple[int, int, int, float]] = []
    total = 0.0
    for v in ready:
        j = int(models[v])
        if counts[v] < 1 or j < 0 or not usable(int(v), j):
            return Admission(STALL, [], 0.0, int(v))
        need = expected(int(v), j)
        plan.append((int(v), j, int(counts[v]), need))
        total += need * int(counts[v])
    return Admission(atomic_admission(total, budget_left, n_inflight), plan, total)


def atomic_shares(adm: Admission, budget_left: float, ceiling: Callable[[int, int], float],
                  unit: float) -> list[tuple[int, int, int, float]]:
    """(node, model, count, reservation of each sample) of an admitted atomic launch: shares of the budget left."""
    return [(v, j, k, atomic_reservation(need, adm.total, budget_left, ceiling(v, j), unit))
            for v, j, k, need in adm.plan]


def stuck_node(n: int, m: int, completed: Sequence[bool], passed: Callable[[int], bool],
               allowed: Callable[[int, int], bool], running: Callable[[int], bool]) -> int:
    """The first unfinished node that no model left can complete and no running sample may pass, else -1."""
    for v in range(n):
        if completed[v] or passed(v):
            continue
        if any(allowed(v, j) for j in range(m)):
            continue
        if running(v):
            continue  # its batch may still pass
        return v
    return -1


def some_launch_fits(ready: Sequence[int], m: int, allowed: Callable[[int, int], bool],
                     expected: Callable[[int, int], float], room: Callable[[int], float]) -> bool:
    """Does any ready node have a model it may use whose expected cost fits its room? (no: budget exhausted)"""
    return any(allowed(v, j) and expected(v, j) <= room(v) for v in ready for j in range(m))

"""A live run's rule state as one pure state machine (:class:`LiveCore`), stated once for its two drivers.

:mod:`simulator.engine.live_rules` holds the numbers of the ``live``
execution rules (an admission's verdict, a sample's reservation, a charge
cut at it). This module holds the state a run has under them and the steps
a driver takes with them, as h11's connection holds HTTP's: events in,
state transitions, the driver does the I/O. A :class:`LiveCore` holds the
completed nodes, the attempt numbers consumed per (node, model), the
batches in flight (per node: its model, its launch time as a number the
driver gives, each sample's attempt number, reservation and state) and the
(node, model) pairs the run may still use. Its events: a launch, per
attempt (in what order nodes are admitted, each sample on the room left,
what a refusal consumes) or atomic (stall, launch, wait or end, and the
shares); a sample answered, passed or failed; a sample lost; a batch
ended; a model down or a pair refused (:meth:`LiveCore.narrow`). Its
questions: the ready nodes, the decisions' view of the batches in flight,
whether an unfinished node is stuck, whether any launch still fits, and a
snapshot (:class:`LiveState`) for the calibrated estimate. Everything is in
positions (node and model indices); nothing here knows a clock, a request,
a trace or money: the module's free functions are its steps, pure
functions of the numbers the caller passes in.

Two drivers hold one: the simulated live episode
(:mod:`simulator.engine.live_episode`, MCPP's calibrated estimate and the
``live`` grid; it keeps the clock, the budget left and the drawn answers)
and the live executor (:mod:`executor.live`; it keeps the requests, the
clock, the trace and the ledger). What differs between them is passed in at
the call site, where it can be read: the executor's expected charge and
ceiling of a sample add its prompt's cost (the simulator's charges are
output only), its room is its ledger's answer
(:meth:`executor.ledger.Ledger.room`), and a sample admitted there must also
buy at least one output token (``take`` may refuse it).

MCPP's member simulations run inside its compiled kernel and state the
same rules over arrays (:mod:`simulator.mcpp.kernel`); a new live rule
touches :mod:`~simulator.engine.live_rules`, this module and that kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

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

#: a sample's state in its batch (:class:`LiveCore`)
RUNNING, PASSED, FAILED, LOST = 0, 1, 2, 3

__all__ = ["END", "FAILED", "LAUNCH", "LOST", "PASSED", "RUNNING", "STALL", "WAIT", "Admission", "Answered", "CoreBatch",
           "LiveCore", "LiveFlight", "LiveState", "admit_atomic", "admit_attempts", "atomic_shares", "launch_order",
           "method_uses", "ready_nodes", "some_launch_fits", "stuck_node"]


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


@dataclass
class LiveFlight:
    """An in-flight batch of a run part-way: its samples still running, for how long, and what each holds."""

    v: int
    j: int
    elapsed: float
    running: int
    reservation: float
    passed: bool = False  # one of its answered samples passed


@dataclass
class LiveState:
    """What a live run knows part-way (:meth:`LiveCore.snapshot`): the completed nodes, the batches in flight,
    attempts drawn per (node, model)."""

    completed: np.ndarray  # bool (n,)
    attempt_no: np.ndarray  # int64 (n * m,)
    inflight: list[LiveFlight]


@dataclass
class CoreBatch:
    """One (node, model) batch in flight: when it was launched (a number the driver gives), each sample's
    attempt number, reservation and state (``RUNNING``, ``PASSED``, ``FAILED``, ``LOST``)."""

    j: int
    t_launch: float
    attempts: list[int] = field(default_factory=list)
    reservations: list[float] = field(default_factory=list)
    states: list[int] = field(default_factory=list)
    passed: bool = False  # one of its answered samples passed
    #: it entered from a snapshot whose answered samples had passed (:meth:`LiveCore.__init__`'s ``start``):
    #: the node completes at its end, though the decisions' view says ``passed`` of its own samples only
    carried: bool = False

    def running(self) -> int:
        """Its samples still running (neither answered nor lost)."""
        return sum(1 for x in self.states if x == RUNNING)

    def answered(self) -> int:
        """Its samples answered (passed or failed; a lost sample is not)."""
        return sum(1 for x in self.states if x in (PASSED, FAILED))

    def completes(self, early_end: bool) -> bool:
        """Does its end complete the node, as things stand: one passed, and all answered or ``early_end``."""
        return self.passed and (early_end or self.answered() == len(self.states))


class Answered(NamedTuple):
    """What an answer did (:meth:`LiveCore.answer`): the batch's first pass; the batch ends with it."""

    first: bool
    over: bool


class LiveCore:
    """The rule state of one live run: events in, state transitions out; the driver does the I/O.

    It holds the completed nodes, the attempt numbers consumed per (node,
    model), the batches in flight (per node: model, samples, their
    reservations and states) and what the run may still use (a model down,
    a (node, model) refused: :meth:`narrow`). Its events are the launches
    (:meth:`launch_per_attempt`, :meth:`launch_atomic`: admission, refusals,
    attempt numbers), a sample answered (:meth:`answer`), a sample lost
    (:meth:`lose`), a batch ended (:meth:`end_batch`); its questions the ready
    nodes, the decisions' view of the batches in flight (:meth:`inflight`),
    the stuck and no-progress tests and a snapshot for the calibrated
    estimate. Money is the driver's (the simulated episode's budget left, the
    executor's ledger): what a sample costs and what a node may reserve are
    passed in at the call site, where the two drivers differ.
    """

    def __init__(self, arr, mask, legacy_only: bool, node_ids: Sequence[int], *,
                 start: LiveState | None = None, available: np.ndarray | None = None, early_end: bool = False) -> None:
        self.n, self.m = int(arr.n), int(arr.m)
        #: a batch ends at its first pass, its running samples to be cancelled (the executor's ``cancel_siblings``,
        #: a departure from the rules); by default it ends when every sample answered or was lost
        self.early_end = bool(early_end)
        self.arr, self.mask, self.legacy_only = arr, mask, bool(legacy_only)
        self.node_ids = [int(x) for x in node_ids]
        self.parents = [[int(p) for p in arr.parent_idx[arr.parent_ptr[v]:arr.parent_ptr[v + 1]]]
                        for v in range(self.n)]
        #: what the run may still launch per (node, model): the pool's, less what :meth:`narrow` took out
        self.available = np.array(arr.available if available is None else available, dtype=np.bool_)
        self.completed = np.zeros(self.n, dtype=np.bool_)
        self.attempt_no = np.zeros(self.n * self.m, dtype=np.int64)
        self.batches: dict[int, CoreBatch] = {}
        if start is not None:
            self.completed[:] = start.completed
            self.attempt_no[:] = start.attempt_no
            for f in start.inflight:  # entered at time 0 of the continuation; its samples' numbers unknown (-1)
                self.batches[f.v] = CoreBatch(f.j, 0.0, [-1] * f.running, [float(f.reservation)] * f.running,
                                              [RUNNING] * f.running, False, bool(f.passed))

    # -- questions ---------------------------------------------------------------------

    def ready(self) -> list[int]:
        """Positions of the unfinished nodes with no batch in flight whose parents all completed."""
        return ready_nodes(self.n, self.completed, self.batches.__contains__, self.parents)

    def usable(self, v: int, j: int) -> bool:
        """May a launch use model ``j`` on node ``v`` (a model given, still available to the run)?"""
        return j >= 0 and bool(self.available[v, j])

    def method_uses(self, v: int, j: int) -> bool:
        """Is model ``j`` on node ``v`` one of the method's (its models, or the node's legacy model), in the pool?"""
        return method_uses(self.arr, self.mask, self.legacy_only, v, j)

    def allowed(self, v: int, j: int) -> bool:
        """May the run still launch model ``j`` on node ``v`` (the method's, not taken out by :meth:`narrow`)?"""
        return self.method_uses(v, j) and bool(self.available[v, j])

    def inflight(self, remaining: Callable[[int, int, float], float], t: float) -> list[tuple[int, int, list[float], bool]]:
        """The decisions' view of the batches in flight at time ``t``, by node: (node, model, the estimated
        remaining time of each running sample, ``remaining(v, j, elapsed)``, one of its samples passed)."""
        out = []
        for v in sorted(self.batches):
            b = self.batches[v]
            out.append((v, b.j, [remaining(v, b.j, t - b.t_launch) for _ in range(b.running())], b.passed))
        return out

    def stuck(self) -> int:
        """The first unfinished node that no model left can complete and no running sample may pass, else -1."""
        return stuck_node(self.n, self.m, self.completed,
                          lambda u: u in self.batches and self.batches[u].passed, self.allowed,
                          lambda u: u in self.batches and self.batches[u].running() > 0)

    def uncompletable(self) -> int:
        """The first node no model of the method can ever complete (the run is ``stalled`` at once), else -1
        (:func:`simulator.engine.loop.first_uncompletable`, compiled: ``arr`` is the pool line's arrays)."""
        from simulator.engine.loop import first_uncompletable

        return int(first_uncompletable(self.arr, self.mask, self.legacy_only))

    def launch_fits(self, expected: Callable[[int, int], float], room: Callable[[int], float]) -> bool:
        """Nothing in flight and nothing launched: does a launch still fit (``stalled``) or not (budget exhausted)?"""
        return some_launch_fits(self.ready(), self.m, self.allowed, expected, room)

    def snapshot(self, t: float) -> LiveState:
        """The run's state at time ``t`` for the calibrated estimate: each batch with running samples as a
        :class:`LiveFlight` (the mean reservation of its running samples)."""
        flights = []
        for v in sorted(self.batches):
            b = self.batches[v]
            run = [r for r, x in zip(b.reservations, b.states, strict=True) if x == RUNNING]
            if run:
                flights.append(LiveFlight(v, b.j, t - b.t_launch, len(run), float(np.mean(run)), b.passed))
        return LiveState(self.completed.copy(), self.attempt_no.copy(), flights)

    # -- events ------------------------------------------------------------------------

    def consume(self, v: int, j: int, k: int = 1) -> int:
        """Consume ``k`` attempt numbers of (v, j); the first of them."""
        a = int(self.attempt_no[v * self.m + j])
        self.attempt_no[v * self.m + j] += int(k)
        return a

    def _open(self, v: int, j: int, t: float) -> CoreBatch:
        if v in self.batches:
            raise ValueError(f"node {v} has a batch in flight")
        return CoreBatch(int(j), float(t))

    def launch_per_attempt(self, ready: Sequence[int], models, counts, t: float, *,
                           expected: Callable[[int, int], float], ceiling: Callable[[int, int], float],
                           room: Callable[[int], float], unit: float,
                           take: Callable[[int, int, int, float], float | None]
                           ) -> Iterator[tuple[int, int, CoreBatch | None, int]]:
        """The per-attempt launch (:func:`launch_order`, :func:`admit_attempts`), node by node.

        For each node admitted it yields (node, model, its batch or None, the
        refused attempt's number or -1) once that node is decided, so the
        driver starts the batch (and writes the refusal) before the next node
        is admitted on ``room(v)``, what node ``v`` may reserve now.
        ``take(v, j, attempt, r)`` reserves a sample the rules admitted at
        ``r`` and returns what it reserved (None: it cannot, and the attempt is
        refused); ``expected``, ``ceiling``: a sample's expected and largest cost.
        """
        for v in launch_order(ready, counts, self.node_ids):
            j = int(models[v])
            if not self.usable(v, j):
                continue
            b = self._open(v, j, t)
            refused = [-1]

            def one(r: float, v: int = v, j: int = j, b: CoreBatch = b, refused: list = refused) -> bool:
                a = self.consume(v, j)
                got = take(v, j, a, r)
                if got is None:
                    refused[0] = a
                    return False
                b.attempts.append(a)
                b.reservations.append(float(got))
                b.states.append(RUNNING)
                return True

            def refuse(v: int = v, j: int = j, refused: list = refused) -> None:
                refused[0] = self.consume(v, j)

            admit_attempts(int(counts[v]), expected(v, j), lambda v=v: room(v), ceiling(v, j), unit, one, refuse)
            if b.attempts:
                self.batches[v] = b
            yield v, j, (b if b.attempts else None), refused[0]

    def launch_atomic(self, ready: Sequence[int], models, counts, t: float, *, expected: Callable[[int, int], float],
                      ceiling: Callable[[int, int], float], budget_left: float, unit: float,
                      take: Callable[[int, int, int, float], float]) -> tuple[Admission, list[tuple[int, CoreBatch]]]:
        """The atomic launch (:func:`admit_atomic`, :func:`atomic_shares`): its verdict and, when it launches,
        the batches opened (node, batch), each sample reserved by ``take(v, j, attempt, r)`` at its share ``r``."""
        adm = admit_atomic(ready, models, counts, self.usable, expected, budget_left, len(self.batches))
        if adm.what != LAUNCH:
            return adm, []
        out = []
        for v, j, k, r in atomic_shares(adm, budget_left, ceiling, unit):
            b = self._open(v, j, t)
            a0 = self.consume(v, j, k)
            for i in range(k):
                b.attempts.append(a0 + i)
                b.reservations.append(float(take(v, j, a0 + i, r)))
                b.states.append(RUNNING)
            self.batches[v] = b
            out.append((v, b))
        return adm, out

    def answer(self, v: int, i: int, passed: bool) -> Answered:
        """Sample ``i`` of node ``v``'s batch answered (``passed``: accepted): was it the batch's first pass, and
        does the batch end with it (every sample answered; under ``early_end``, a pass)?"""
        b = self.batches[v]
        if b.states[i] != RUNNING:
            raise ValueError(f"sample {i} of node {v} is not running")
        b.states[i] = PASSED if passed else FAILED
        first = bool(passed) and not b.passed
        b.passed = b.passed or bool(passed)
        all_in = b.answered() == len(b.states)
        return Answered(first, bool(passed and self.early_end) or (all_in and not (b.passed and self.early_end)))

    def running(self, v: int) -> list[int]:
        """The samples of node ``v``'s batch still running (to cancel when a pass ends it early)."""
        b = self.batches.get(v)
        return [] if b is None else [i for i, x in enumerate(b.states) if x == RUNNING]

    def lose(self, v: int, i: int) -> None:
        """Sample ``i`` of node ``v``'s batch was lost (cancelled, or the run ended) without an answer."""
        b = self.batches.get(v)
        if b is not None and b.states[i] == RUNNING:
            b.states[i] = LOST

    def all_answered(self, v: int) -> bool:
        """Has every sample of node ``v``'s batch answered?"""
        b = self.batches[v]
        return b.answered() == len(b.states)

    def end_batch(self, v: int) -> CoreBatch | None:
        """Node ``v``'s batch ended: it leaves the flight, and the node completes if one of its samples passed."""
        b = self.batches.pop(v, None)
        if b is not None and (b.passed or b.carried):
            self.completed[v] = True
        return b

    def model_down(self, j: int) -> None:
        """Model ``j`` is down for the run: no node may launch it again."""
        self.narrow([(v, int(j)) for v in range(self.n)])

    def narrow(self, pairs: Sequence[tuple[int, int]]) -> None:
        """(node, model) pairs the run may no longer launch (a model down, a refusal that would repeat)."""
        for v, j in pairs:
            self.available[v, j] = False

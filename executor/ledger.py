"""The run's money: one ledger that reserves, settles, marks possibly billed and releases, and checks its invariant.

Every amount is in the run's cost unit (tokens, or dollars in money mode).
A request reserves its worst case before it is sent; what happens to the
reservation afterwards is one of three things, decided by
:func:`billing_of` (the one place of that rule):

* **settled**: the answer was fully received; the charge is its reported
  usage and the rest is freed. A trusted usage report above the reservation
  (a server that answered more than it was asked: choices beyond ``n = 1``)
  is spent as reported (``settle(..., beyond=True)``), and the excess is
  kept apart as ``over``: the server's doing, not a launch the run made;
* **possibly billed** (*unbilled*): the request reached the server and its
  answer was not fully received (a timeout, a body cut or refused, a
  cancellation mid-request): the provider may bill it, so the whole
  reservation stays counted and is never re-sent;
* **released**: the request never reached the server (connection refused,
  waiting in a backoff or for a concurrency slot) or the server refused it
  with a complete error answer (4xx, 5xx, 429), which providers do not bill.

**Batch holds** (the live rules' settlement per batch): a sample launched in
a batch opens its reservation with :meth:`Ledger.hold`; what its settlements
and releases free stays *kept* for the batch until :meth:`Ledger.end_batch`,
so the budget left a decision sees (:meth:`Ledger.available`) and a node's
room under its static cap (:meth:`Ledger.room`) are the ledger's answers
alone. A retry's fresh reservation joins the same hold.

The invariant, checked after every change: every amount is finite and >= 0,
and ``spent - over + reserved + unbilled + kept <= budget``: what the run
launched fits in the budget; ``over`` is what servers billed beyond what
they were asked (the run ends when it leaves nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: float slack of the invariant (the running sums add and subtract reservations)
EPS = 1e-9

HELD, SETTLED, UNBILLED, RELEASED = "held", "settled", "unbilled", "released"


class LedgerError(AssertionError):
    """The ledger's invariant was broken (a bug in the caller, never a provider's fault)."""


@dataclass
class Hold:
    """One sample's place in its batch: what its first reservation took, kept for the batch until it ends."""

    amount: float
    #: what the ledger counts for the sample now (held, settled, possibly billed); the batch keeps the rest
    now: float

    def kept(self) -> float:
        return max(0.0, self.amount - self.now)


@dataclass
class Reservation:
    """One request's worst case, held until it is settled, marked possibly billed or released."""

    amount: float
    key: int  # the node position it is charged to (the static caps of the baselines)
    state: str = HELD
    charge: float = 0.0
    hold: Hold | None = None  # its sample's place in a batch (:meth:`Ledger.hold`)


@dataclass
class Ledger:
    """spent + reserved + unbilled <= budget, always (see the module docstring)."""

    budget: float
    spent: float = 0.0
    reserved: float = 0.0
    unbilled: float = 0.0
    #: spent beyond reservations: trusted usage reports above what the request could cost (a server's excess)
    over: float = 0.0
    #: cost committed per key (held + settled + possibly billed): a node's share of the static caps
    committed: dict[int, float] = field(default_factory=dict)
    #: per batch (its node position): its samples' holds, until :meth:`end_batch`
    batches: dict[int, list[Hold]] = field(default_factory=dict)
    _held: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.budget, (int, float)) and math.isfinite(self.budget) and self.budget >= 0):
            raise LedgerError(f"the budget must be a finite number >= 0, got {self.budget!r}")
        self.budget = float(self.budget)

    def available(self) -> float:
        """What a new reservation may take: the budget left, less what batches in flight keep until they end."""
        return max(0.0, max(0.0, self.budget - self.spent - self.reserved - self.unbilled) - self.kept())

    def kept(self, key: int | None = None) -> float:
        """What the settlements of batch ``key``'s samples freed and the batch keeps until it ends (all: None)."""
        if key is not None:
            return sum(h.kept() for h in self.batches.get(key, ()))
        return sum(sum(h.kept() for h in hs) for hs in self.batches.values())

    def room(self, key: int, cap: float) -> float:
        """What node ``key`` may still reserve: the budget left, within its static cap ``cap``."""
        return min(self.available(), cap - self.committed.get(key, 0.0) - (self.kept(key) if key in self.batches
                                                                          else 0.0))

    def hold(self, amount: float, key: int) -> Reservation:
        """Reserve ``amount`` for a new sample of batch ``key``: the batch keeps it until :meth:`end_batch`."""
        h = Hold(_amount(amount, "reservation"), 0.0)
        r = self.reserve(amount, key, hold=h)
        self.batches.setdefault(int(key), []).append(h)
        return r

    def end_batch(self, key: int) -> None:
        """Batch ``key`` ended: what its samples' settlements freed is free for the run."""
        self.batches.pop(int(key), None)
        self._check()

    def may_have_billed(self) -> float:
        """The most the provider may bill for this run so far: spent + reserved + unbilled."""
        return self.spent + self.reserved + self.unbilled

    def reserve(self, amount: float, key: int, *, hold: Hold | None = None) -> Reservation:
        """Hold ``amount`` for one request (of the sample ``hold``, a retry's fresh reservation); refused
        (LedgerError) when it is not finite, < 0 or does not fit."""
        amount = _amount(amount, "reservation")
        if amount > self.available() + EPS * max(1.0, self.budget):
            raise LedgerError(f"reservation {amount!r} does not fit in {self.available()!r}")
        r = Reservation(amount, int(key), hold=hold)
        if hold is not None:
            hold.now += amount
        self.reserved += amount
        self._held += 1
        self.committed[r.key] = self.committed.get(r.key, 0.0) + amount
        self._check()
        return r

    def settle(self, r: Reservation, charge: float, *, beyond: bool = False) -> float:
        """An answer fully received: the reservation becomes its charge (capped at the reservation, unless
        ``beyond``: a trusted report above it is spent as reported, the excess counted in ``over``)."""
        self._leave(r, SETTLED)
        c = _amount(charge, "charge") if beyond else min(_amount(charge, "charge"), r.amount)
        r.charge = c
        self.spent += c
        self.over += max(0.0, c - r.amount)
        self.committed[r.key] -= r.amount - c
        if r.hold is not None:
            r.hold.now += c - r.amount
        self._check()
        return c

    def mark_possibly_billed(self, r: Reservation) -> None:
        """The request reached the server and its answer was not fully received: keep it all, as unbilled."""
        self._leave(r, UNBILLED)
        self.unbilled += r.amount
        self._check()

    def release(self, r: Reservation) -> None:
        """Nothing of the request can be billed: free the reservation."""
        self._leave(r, RELEASED)
        self.committed[r.key] -= r.amount
        if r.hold is not None:
            r.hold.now -= r.amount
        self._check()

    def _leave(self, r: Reservation, state: str) -> None:
        if r.state != HELD:
            raise LedgerError(f"a {r.state} reservation cannot become {state}")
        r.state = state
        self.reserved -= r.amount
        self._held -= 1
        if self._held == 0:
            self.reserved = 0.0  # no drift from the running sum once nothing is held

    def _check(self) -> None:
        tol = EPS * max(1.0, self.budget)
        for name in ("spent", "reserved", "unbilled"):
            x = getattr(self, name)
            if not math.isfinite(x) or x < -tol:
                raise LedgerError(f"{name} = {x!r}")
            if x < 0:
                setattr(self, name, 0.0)
        kept = self.kept()
        if self.spent - self.over + self.reserved + self.unbilled + kept > self.budget + tol:
            raise LedgerError(f"spent {self.spent!r} - over {self.over!r} + reserved {self.reserved!r} + unbilled "
                              f"{self.unbilled!r} + kept {kept!r} > budget {self.budget!r}")

    def exhausted(self) -> bool:
        """A server's excess left no budget: spent + reserved + unbilled reached it."""
        return self.over > 0 and self.spent + self.reserved + self.unbilled >= self.budget * (1 - EPS)


def _amount(x: float, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise LedgerError(f"a {what} must be a finite number >= 0, got {x!r}")
    return float(x)


def billing_of(reached_server: bool, answer_received: bool, error_answer: bool) -> str:
    """The one rule of what a finished try does with its reservation (``SETTLED``, ``UNBILLED``, ``RELEASED``).

    ``answer_received``: a complete, usable 200 answer came back (settled on
    its usage); ``error_answer``: a complete HTTP error answer (4xx, 5xx,
    429) came back, which providers do not bill (released). Any other try
    that reached the server (a timeout, a cut or undecodable body, a
    cancellation mid-request) is possibly billed and never re-sent on that
    reservation; a try that never reached it (connection refused) is released.
    """
    if answer_received:
        return SETTLED
    if error_answer or not reached_server:
        return RELEASED
    return UNBILLED

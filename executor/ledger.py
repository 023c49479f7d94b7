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

The invariant, checked after every change: every amount is finite and >= 0,
and ``spent - over + reserved + unbilled <= budget``: what the run launched
fits in the budget; ``over`` is what servers billed beyond what they were
asked (the run ends when it leaves nothing).
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
class Reservation:
    """One request's worst case, held until it is settled, marked possibly billed or released."""

    amount: float
    key: int  # the node position it is charged to (the static caps of the baselines)
    state: str = HELD
    charge: float = 0.0


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
    _held: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.budget, (int, float)) and math.isfinite(self.budget) and self.budget >= 0):
            raise LedgerError(f"the budget must be a finite number >= 0, got {self.budget!r}")
        self.budget = float(self.budget)

    def available(self) -> float:
        """What a new reservation may take."""
        return max(0.0, self.budget - self.spent - self.reserved - self.unbilled)

    def may_have_billed(self) -> float:
        """The most the provider may bill for this run so far: spent + reserved + unbilled."""
        return self.spent + self.reserved + self.unbilled

    def reserve(self, amount: float, key: int) -> Reservation:
        """Hold ``amount`` for one request; refused (LedgerError) when it is not finite, < 0 or does not fit."""
        amount = _amount(amount, "reservation")
        if amount > self.available() + EPS * max(1.0, self.budget):
            raise LedgerError(f"reservation {amount!r} does not fit in {self.available()!r}")
        r = Reservation(amount, int(key))
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
        if self.spent - self.over + self.reserved + self.unbilled > self.budget + tol:
            raise LedgerError(f"spent {self.spent!r} - over {self.over!r} + reserved {self.reserved!r} + unbilled "
                              f"{self.unbilled!r} > budget {self.budget!r}")

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

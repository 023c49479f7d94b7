"""The ledger as a state machine: random reservations, answers, usage reports, cut bodies, timeouts, cancellations.

Whatever the sequence, every amount stays finite and >= 0, spent + reserved +
unbilled <= budget, and a reservation leaves the held state exactly once.
The usage reports are the hostile ones a provider can send (missing,
negative, huge, strings, booleans), parsed by the client's own rule.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from executor.client import classify_body, usage_count
from executor.ledger import HELD, RELEASED, SETTLED, UNBILLED, Ledger, LedgerError, billing_of

USAGE = st.one_of(st.none(), st.integers(-10, 10**13), st.floats(allow_nan=True, allow_infinity=True),
                  st.text(max_size=5), st.booleans())


def test_billing_rule_table():
    assert billing_of(True, True, False) == SETTLED
    assert billing_of(True, False, True) == RELEASED  # a complete error answer is not billed
    assert billing_of(True, False, False) == UNBILLED  # reached the server, no whole answer: possibly billed
    assert billing_of(False, False, False) == RELEASED  # never reached it


def test_usage_counts_refuse_what_is_not_a_count():
    assert usage_count(True) is None and usage_count(False) is None  # a boolean is not 1 token
    assert usage_count(-1) is None and usage_count("12") is None and usage_count(math.inf) is None
    assert usage_count(None) is None and usage_count(12) == 12.0
    r = classify_body({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": True, "completion_tokens": True}}, [{"content": "hi"}])
    assert r.usage_source == "local"


def test_a_reservation_that_does_not_fit_or_is_not_a_number_is_refused():
    led = Ledger(100.0)
    with pytest.raises(LedgerError):
        led.reserve(100.5, 0)
    for bad in (-1.0, math.nan, math.inf, True, "3"):
        with pytest.raises(LedgerError):
            led.reserve(bad, 0)
    r = led.reserve(60.0, 0)
    led.settle(r, 10.0)
    with pytest.raises(LedgerError):  # a reservation leaves the held state once
        led.release(r)
    assert led.spent == 10.0 and led.reserved == 0.0 and led.available() == 90.0


def test_a_batch_keeps_what_its_settlements_free_until_it_ends():
    """The live rules settle per batch: an answer below its reservation frees nothing for a decision (nor for
    its node's cap) until its batch ends; a retry's fresh reservation joins its sample's hold."""
    led = Ledger(100.0)
    a, b = led.hold(40.0, 3), led.hold(40.0, 3)
    led.settle(a, 10.0)
    assert led.kept(3) == 30.0 and led.available() == 20.0 and led.room(3, 100.0) == 20.0
    assert led.room(3, 60.0) == 60.0 - 50.0 - 30.0  # the cap counts what the batch keeps
    led.release(b)  # released: the batch keeps its 40 too; a fresh reservation of the sample takes from that
    assert led.available() == 20.0 and led.kept(3) == 70.0
    c = led.reserve(20.0, 3, hold=b.hold)
    assert led.kept(3) == 50.0 and led.reserved == 20.0 and led.available() == 20.0
    led.mark_possibly_billed(c)
    led.end_batch(3)
    assert led.kept() == 0.0 and led.available() == 100.0 - 10.0 - 20.0
    with pytest.raises(LedgerError):  # what a batch keeps is not for a reservation to take
        Ledger(50.0).reserve(60.0, 0)
    led2 = Ledger(50.0)
    led2.settle(led2.hold(50.0, 0), 0.0)
    with pytest.raises(LedgerError):
        led2.reserve(1.0, 1)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ledger = Ledger(1000.0)
        self.held: list = []
        self.done: list = []  # reservations that left the held state (a retry may join their hold)
        self.model_spent = 0.0
        self.model_unbilled = 0.0

    @rule(fraction=st.floats(0.0, 1.0), key=st.integers(0, 4))
    def reserve(self, fraction, key):
        amount = fraction * self.ledger.available()
        self.held.append(self.ledger.reserve(amount, key))

    @rule(fraction=st.floats(0.0, 1.0), key=st.integers(0, 4))
    def hold(self, fraction, key):
        amount = fraction * self.ledger.available()
        self.held.append(self.ledger.hold(amount, key))

    @precondition(lambda self: any(r.hold is not None and r.state != HELD for r in self.done))
    @rule(i=st.integers(0, 100), fraction=st.floats(0.0, 1.0))
    def retry(self, i, fraction):
        gone = [r for r in self.done if r.hold is not None and r.state != HELD]
        r = gone[i % len(gone)]
        if any(h is r.hold for hs in self.ledger.batches.values() for h in hs):
            self.held.append(self.ledger.reserve(fraction * self.ledger.available(), r.key, hold=r.hold))

    @rule(key=st.integers(0, 4))
    def end_batch(self, key):
        self.ledger.end_batch(key)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100), pt=USAGE, ct=USAGE)
    def answer(self, i, pt, ct):
        r = self.held.pop(i % len(self.held))
        res = classify_body({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": pt, "completion_tokens": ct}}, [{"content": "p"}])
        charge = (res.completion_tokens or 0.0)
        got = self.ledger.settle(r, charge)
        self.done.append(r)
        assert 0.0 <= got <= r.amount and r.state == SETTLED
        self.model_spent += got

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100), kind=st.sampled_from(["cut_body", "timeout", "cancel_mid_request", "decode"]))
    def possibly_billed(self, i, kind):
        r = self.held.pop(i % len(self.held))
        self.ledger.mark_possibly_billed(r)
        self.done.append(r)
        assert r.state == UNBILLED
        self.model_unbilled += r.amount

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100), kind=st.sampled_from(["connect", "http_5xx", "http_429", "cancel_in_backoff"]))
    def released(self, i, kind):
        r = self.held.pop(i % len(self.held))
        self.ledger.release(r)
        self.done.append(r)
        assert r.state == RELEASED

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100))
    def double_use_is_refused(self, i):
        r = self.held[i % len(self.held)]
        assert r.state == HELD
        self.ledger.release(r)
        with pytest.raises(LedgerError):
            self.ledger.settle(r, 1.0)
        self.held.remove(r)

    @invariant()
    def within_budget(self):
        led = self.ledger
        for x in (led.spent, led.reserved, led.unbilled):
            assert math.isfinite(x) and x >= 0
        assert led.spent + led.reserved + led.unbilled + led.kept() <= led.budget * (1 + 1e-12)
        assert led.available() == pytest.approx(max(0.0, led.budget - led.spent - led.reserved - led.unbilled
                                                    - led.kept()), abs=1e-9)
        assert led.spent == pytest.approx(self.model_spent) and led.unbilled == pytest.approx(self.model_unbilled)
        assert led.reserved == pytest.approx(sum(r.amount for r in self.held), abs=1e-6)


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                      suppress_health_check=list(HealthCheck), derandomize=True)

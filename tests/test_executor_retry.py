"""The retry decision as a table: one row per fault kind a try can end with (:func:`executor.retry.next_step`).

Each row gives the try's kind, its Retry-After, the wall seconds left, what
the endpoint's health says, the tries spent and the back-off drawn, and the
step the ladder must take. The thunks count their calls: health is recorded
and the back-off drawn only when the ladder reaches them (the live run's
health counters and random stream depend on it).
"""

from __future__ import annotations

import pytest

from executor.client import DOWN_KINDS, RETRYABLE
from executor.retry import ANSWER, DOWN, DOWN_BY_RETRY_AFTER, REFUSE_PAIR, RETRY, STOP, next_step

# kind, retry_after, wall_left, down, tries, backoff -> action, status, wait, gate_s, health asked, backoff drawn
ROWS = [
    ("ok", None, 10.0, False, 1, 0.1, ANSWER, "ok", 0.0, None, 0, 0),
    ("truncated", None, 10.0, False, 1, 0.1, ANSWER, "truncated", 0.0, None, 0, 0),
    ("http_429", 0.5, 10.0, False, 1, 0.5, RETRY, "", 0.5, 0.5, 1, 1),
    ("http_429", 20.0, 10.0, False, 1, 0.1, DOWN_BY_RETRY_AFTER, "model_down", 0.0, None, 0, 0),
    ("http_429", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("http_5xx", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("gw_timeout", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("connect", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("reset", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("timeout", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("decode_error", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("too_large", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("invalid_json", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("no_choices", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("mismatch", None, 10.0, False, 1, 0.2, RETRY, "", 0.2, None, 1, 1),
    ("http_4xx", None, 10.0, False, 1, 0.2, REFUSE_PAIR, "http_4xx", 0.0, None, 1, 0),
    ("http_4xx", None, 10.0, True, 1, 0.2, DOWN, "http_4xx", 0.0, None, 1, 0),  # three refusals in a row
    ("http_fatal", None, 10.0, True, 1, 0.2, DOWN, "http_fatal", 0.0, None, 1, 0),
    ("http_5xx", None, 10.0, True, 3, 0.2, DOWN, "provider_unavailable", 0.0, None, 1, 0),  # stays down
    ("timeout", None, 10.0, True, 3, 0.2, DOWN, "provider_unavailable", 0.0, None, 1, 0),
    ("http_5xx", None, 10.0, False, 6, 0.2, STOP, "gave_up", 0.0, None, 1, 0),  # the tries are spent
    ("http_5xx", None, 0.1, False, 1, 0.2, STOP, "deadline", 0.0, None, 1, 1),  # the back-off outlasts the run
    ("http_429", 0.5, 0.6, False, 1, 0.7, STOP, "deadline", 0.0, 0.5, 1, 1),  # Retry-After fits, jitter does not
    ("executor_error", None, 10.0, False, 1, 0.2, STOP, "executor_error", 0.0, None, 1, 0),  # not retryable
]


@pytest.mark.parametrize("kind,retry_after,wall_left,down,tries,wait,action,status,step_wait,gate_s,n_health,n_backoff",
                         ROWS)
def test_the_retry_table(kind, retry_after, wall_left, down, tries, wait, action, status, step_wait, gate_s,
                         n_health, n_backoff):
    calls = {"health": 0, "backoff": 0}

    def health() -> bool:
        calls["health"] += 1
        return down

    def backoff() -> float:
        calls["backoff"] += 1
        return wait

    step = next_step(kind, retry_after=retry_after, wall_left=lambda: wall_left, tries=tries, max_tries=6,
                     health=health, backoff=backoff)
    assert (step.action, step.status, step.wait, step.gate_s) == (action, status, step_wait, gate_s)
    assert (calls["health"], calls["backoff"]) == (n_health, n_backoff)


def test_every_fault_kind_has_a_row():
    kinds = {r[0] for r in ROWS}
    assert RETRYABLE | DOWN_KINDS | {"ok", "truncated", "http_4xx", "http_fatal"} <= kinds

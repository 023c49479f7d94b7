"""What a sample does after a try that did not answer: the retry decision, one pure function.

:func:`next_step` is the whole ladder, in the order it is decided (a
``Retry-After`` longer than the time left, the endpoint's health, a
refusal that would repeat, a fault that no retry cures, the tries spent,
a back-off longer than the time left). The two inputs that have effects
of their own when asked (recording the try in the endpoint's health, drawing
the back-off's jitter) come in as thunks, called in the ladder's order and
only when the ladder reaches them, so the caller's health counters and random
stream move exactly as they did when the ladder was written inline.
:class:`executor.live.LiveRun` performs what the step says (the trace, the
ledger, the gate, the model's exit); ``tests/test_executor_retry.py`` holds
the table, one row per fault kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from executor.client import RETRYABLE

#: the try answered (whole, or cut at max_tokens): the sample goes to its verdict
ANSWER = "answer"
#: send again after ``wait`` wall seconds
RETRY = "retry"
#: stop with ``status`` (nothing else to do)
STOP = "stop"
#: the model is out for the run: a ``Retry-After`` longer than the time left (``status`` model_down)
DOWN_BY_RETRY_AFTER = "down_by_retry_after"
#: the model is out for the run: its health says so (refusing everything, or down)
DOWN = "down"
#: this (node, model) is out for the run: a refusal that would repeat for this prompt
REFUSE_PAIR = "refuse_pair"


class Step(NamedTuple):
    action: str
    status: str = ""
    wait: float = 0.0
    #: a Retry-After the endpoint's gate closes for (every sample and run of the process waits for it)
    gate_s: float | None = None


def next_step(kind: str, *, retry_after: float | None, wall_left: Callable[[], float], tries: int, max_tries: int,
              health: Callable[[], bool], backoff: Callable[[], float]) -> Step:
    """The step after a try of ``kind`` (the ``tries``-th of its sample); ``wall_left()``: the wall seconds left,
    ``health()``: records the try, True when its endpoint is now down, ``backoff()``: the jittered wait."""
    if kind in ("ok", "truncated"):
        return Step(ANSWER, kind)
    gate_s = None
    if kind == "http_429" and retry_after is not None:
        if retry_after >= wall_left():  # unavailable for the rest of the run
            return Step(DOWN_BY_RETRY_AFTER, "model_down")
        gate_s = retry_after
    if health():
        return Step(DOWN, kind if kind in ("http_fatal", "http_4xx") else "provider_unavailable", gate_s=gate_s)
    if kind == "http_4xx":  # would repeat for this prompt: not re-sent
        return Step(REFUSE_PAIR, "http_4xx", gate_s=gate_s)
    if kind not in RETRYABLE:
        return Step(STOP, kind, gate_s=gate_s)
    if tries >= max_tries:
        return Step(STOP, "gave_up", gate_s=gate_s)
    wait = backoff()
    if wait >= wall_left():
        return Step(STOP, "deadline", gate_s=gate_s)
    return Step(RETRY, "", wait, gate_s=gate_s)

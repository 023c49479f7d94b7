"""What an error answer means for the bill, when something may stand between us and the provider.

A gateway (LiteLLM, Portkey, a hosted router) or a CDN in front of the
provider can answer for it: a 408 when the gateway's own request timeout
fired, a 504 or 524 when an upstream did not answer in time, a 499 when a
request was cancelled in between. In each of those the provider may have
produced, and billed, the answer nobody received: it is *possibly billed*
at its reservation, exactly like a body cut mid-way. A gateway that retries
(``errors_may_bill = true`` on the endpoint, or an answer whose retry-count
header says it retried) may hide billed tries behind any 5xx or 429 it
finally returns: possibly billed too. Every other complete error answer is
a refusal providers do not bill: released.

:func:`error_billing` is that rule, the one place of it (a pure function:
its table test has one row per answer class; ``docs/executor.md`` shows the
same table). :func:`gateway_retries` reads the retries a gateway says it
made, so the trace shows them and an outage behind a retrying gateway can
be named as one (:mod:`executor.live`).
"""

from __future__ import annotations

from collections.abc import Mapping

from executor.ledger import RELEASED, UNBILLED

#: statuses that report a timeout or a cancellation by something between us and the provider
#: (408 request timeout, 499 client closed request, 504 gateway timeout, 524 a CDN's origin timeout)
TIMEOUT_STATUSES = frozenset({408, 499, 504, 524})

#: response headers in which a gateway says how many times it retried the request upstream
RETRY_HEADERS = ("x-portkey-retry-attempt-count", "x-litellm-attempted-retries", "x-ratelimit-retries",
                 "x-retry-count")


def gateway_retries(headers: Mapping[str, str] | None) -> int | None:
    """How many retries a gateway says it made for this answer (the largest count any known header gives), or
    None when no header says. Portkey writes -1 when every retry it was configured for failed: at least one
    retry, counted as 1; an unreadable count is no count."""
    if not headers:
        return None
    best = None
    for name in RETRY_HEADERS:
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            n = int(str(raw).strip())
        except ValueError:
            continue
        n = 1 if n < 0 else n
        best = n if best is None else max(best, n)
    return best


def error_billing(status: int, *, retrying_gateway: bool = False, retries: int | None = None,
                  permanent: bool = False) -> str:
    """What a complete error answer of ``status`` does with the try's reservation: ``UNBILLED`` (possibly
    billed, kept) or ``RELEASED`` (a refusal, freed).

    ``retrying_gateway``: the endpoint is a gateway known to retry (its
    ``errors_may_bill``); ``retries``: the retries the answer says the
    gateway made (:func:`gateway_retries`); ``permanent``: the answer reads
    as a refusal of everything (a 429 out of quota or budget: nothing was
    sent upstream).

    ======================================  =================
    answer class                            reservation
    ======================================  =================
    408, 499, 504, 524 (a timeout or        possibly billed
    cancellation reported in between)
    5xx or 429 from a retrying gateway      possibly billed
    (configured, or retries > 0 said)
    a 429 out of quota or budget            released
    any other 5xx or 429                    released
    any other 4xx                           released
    ======================================  =================
    """
    if status in TIMEOUT_STATUSES:
        return UNBILLED
    retried = retrying_gateway or (retries is not None and retries > 0)
    if retried and (status >= 500 or (status == 429 and not permanent)):
        return UNBILLED
    return RELEASED


__all__ = ["RETRY_HEADERS", "TIMEOUT_STATUSES", "error_billing", "gateway_retries"]

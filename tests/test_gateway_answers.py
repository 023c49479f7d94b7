"""What a gateway's answer means for the bill and for the run (issue 41, items 1 and 8).

Behind Portkey with ``request_timeout`` 800 ms and an upstream taking 1.2 s,
the gateway answered 408 and the executor counted a refusal (nothing spent,
nothing possibly billed) while the upstream billed 1.81x the budget. An
outage behind a retrying gateway ended ``deadline_exhausted`` with no word
of the upstream's 500s. The rule is :func:`executor.gateway.error_billing`
(one row per answer class below); the hostile world serves the gateway
classes (408, 504, 524 after billing upstream; 500 and 429 after a
gateway's retries, with retry-count headers; a 200 after a retry).
"""

from __future__ import annotations

from collections import Counter

import pytest

from executor.client import classify_error
from executor.gateway import error_billing, gateway_retries
from executor.ledger import RELEASED, UNBILLED
from tests.executor_helpers import nominal, workflow
from tests.test_executor_hostile import check_promises, faults, hostile_runs


@pytest.mark.parametrize("status, retrying, retries, expect", [
    (408, False, None, UNBILLED),    # a gateway's request timeout (Portkey request_timeout): the upstream may bill
    (499, False, None, UNBILLED),    # a request cancelled in between (nginx's client closed request)
    (504, False, None, UNBILLED),    # a gateway or proxy gave up waiting on the upstream
    (524, False, None, UNBILLED),    # a CDN's origin timeout
    (500, True, None, UNBILLED),     # a 5xx from a gateway known to retry (errors_may_bill)
    (429, True, None, UNBILLED),     # a 429 from a gateway known to retry
    (502, False, 2, UNBILLED),       # a 5xx whose retry-count header says the gateway retried
    (429, False, 1, UNBILLED),       # a 429 whose retry-count header says the gateway retried
    (500, False, None, RELEASED),    # a direct 5xx: providers do not bill an error answer
    (500, False, 0, RELEASED),       # a gateway that says it did not retry
    (429, False, None, RELEASED),    # a direct rate limit
    (400, True, 3, RELEASED),        # a client error is a refusal, retried or not
    (401, True, None, RELEASED),     # a bad key
])
def test_the_bill_rule_per_answer_class(status, retrying, retries, expect):
    assert error_billing(status, retrying_gateway=retrying, retries=retries) == expect


def test_a_gateways_own_budget_refusal_is_released():
    """A 429 that reads as out of quota or budget (LiteLLM's 'crossed budget') sent nothing upstream."""
    assert error_billing(429, retrying_gateway=True, retries=2, permanent=True) == RELEASED
    r = classify_error(429, b'{"error": {"message": "model=x crossed budget"}}', {}, retrying_gateway=True)
    assert r.kind == "http_fatal" and r.billing == RELEASED


def test_retry_count_headers_are_read():
    assert gateway_retries({"x-portkey-retry-attempt-count": "2"}) == 2
    assert gateway_retries({"x-litellm-attempted-retries": "3"}) == 3
    assert gateway_retries({"x-portkey-retry-attempt-count": "-1"}) == 1  # Portkey: every retry failed
    assert gateway_retries({"x-portkey-retry-attempt-count": "0"}) == 0
    assert gateway_retries({"x-portkey-retry-attempt-count": "many"}) is None
    assert gateway_retries({}) is None and gateway_retries(None) is None
    r = classify_error(500, b'{"error": {"message": "upstream down"}}', {"x-portkey-retry-attempt-count": "2"})
    assert r.kind == "http_5xx" and r.billing == UNBILLED and r.gateway_retries == 2 and "2 gateway retries" in r.detail
    r = classify_error(408, b"{}", {})
    assert r.kind == "gw_timeout" and r.billing == UNBILLED


@pytest.mark.parametrize("cls", ["gw_timeout_408", "gw_timeout_504", "cdn_timeout_524"])
def test_a_gateway_timeout_after_the_upstream_billed_keeps_the_budget(cls):
    pool, wf = workflow()
    B, D = nominal(wf)
    budget = 0.5 * B
    for method, params in (("sequential", None), ("mcpp", {"M": 8})):
        out, world = hostile_runs(wf, pool, method, budget, 5 * D, range(3), classes={cls: 3, "ok": 1},
                                  params=params)
        check_promises(out, world, wf, budget, 5 * D, 0.01)  # the bill <= spent + unbilled <= budget
        assert sum(faults(ev)["gw_timeout"] for _, ev, _ in out) > 0
        assert sum(world.bill.values()) > 0 and all(res.unbilled > 0 for res, _, _ in out)


def _two_sequential_runs(cls: str):
    """Two ``sequential`` runs (budget 2 B, deadline 5 D) against one gateway class, promises checked: (runs,
    world, B)."""
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 5 * D, range(2), classes=(cls,))
    check_promises(out, world, wf, 2 * B, 5 * D, 0.01)
    return out, world, B


def test_an_outage_behind_a_retrying_gateway_is_named_provider_unavailable():
    out, world, B = _two_sequential_runs("gw_retry_500")
    for res, ev, _ in out:
        assert res.termination == "provider_unavailable", (res.termination, res.message)
        assert "gateway retries" in res.message and "upstream" in res.message
        assert sum(e.get("gateway_retries", 0) for e in ev if e["event"] == "request") >= 2
        # a retried error may hide a billed try (the executor cannot see which codes the gateway retries on):
        # kept as possibly billed, within the budget
        assert res.spent == 0 and 0 < res.unbilled <= 2 * B
    assert sum(world.bill.values()) == 0


@pytest.mark.parametrize("down_after", [8, 1000])
def test_tries_timing_out_behind_a_retrying_gateway_are_the_outage_not_a_missed_deadline(down_after):
    """The gateway's first answer says it retried an upstream 500; afterwards its backoff outlasts our timeout.
    Named when the model goes down (its failures count the gateway's retries) or, never down, at the deadline."""
    from dataclasses import replace

    from executor.live import Options

    pool, wf = workflow()
    B, D = nominal(wf)

    def schedule(dag, node, trial, attempt, model, n):
        return "gw_retry_500" if n == 0 else "hang"

    def short(eps):
        return {m: replace(e, request_timeout_s=0.3) for m, e in eps.items()}

    out, world = hostile_runs(wf, pool, "sequential", 20 * B, 1.5 * D, range(2), schedule=schedule,
                              endpoints_edit=short, options=Options(backoff_base_s=0.01, down_after=down_after))
    check_promises(out, world, wf, 20 * B, 1.5 * D, 0.01)
    named = 0
    for res, ev, _ in out:
        st = Counter(e["status"] for e in ev if e["event"] == "request")
        if not any(e.get("gateway_retries") for e in ev if e["event"] == "request"):
            # starved of CPU, the gateway's first answer may come after the 0.4 s deadline: nothing said why
            assert ev[-1]["cpu_wait_s"] is None or ev[-1]["cpu_wait_s"] > 0.1, (ev[-1], st)
            continue
        assert res.termination == "provider_unavailable", (res.termination, res.message, st)
        assert "last upstream error: HTTP 500" in res.message
        named += 1
    assert named or all(ev[-1].get("cpu_wait_s", 0) > 0.1 for _, ev, _ in out)


def test_a_gateway_that_retried_into_an_answer_shows_its_retries():
    out, _, _ = _two_sequential_runs("gw_retried_ok")
    for res, ev, _ in out:
        assert res.success
        reqs = [e for e in ev if e["event"] == "request" and e["status"] == "ok"]
        assert reqs and all(e["gateway_retries"] == 1 and e["faults"]["gateway_retried"] == 1 for e in reqs)


def test_tries_that_only_time_out_behind_a_retrying_gateway_stay_a_missed_deadline_but_say_so():
    """No answer ever said why: not named an outage (a slow upstream looks the same), but the message says it."""
    from dataclasses import replace

    pool, wf = workflow()
    B, D = nominal(wf)

    def gateway(eps):
        return {m: replace(e, request_timeout_s=0.3, errors_may_bill=True) for m, e in eps.items()}

    out, world = hostile_runs(wf, pool, "sequential", 20 * B, 1.5 * D, range(1), classes=("hang",),
                              endpoints_edit=gateway)
    check_promises(out, world, wf, 20 * B, 1.5 * D, 0.01)
    res = out[0][0]
    assert res.termination == "deadline_exhausted" and "none said why" in res.message, res.message

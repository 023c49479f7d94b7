"""The executor behind the Portkey AI gateway (npm @portkey-ai/gateway 1.15.2), configured from its documentation.

Portkey is configured per request by the ``x-portkey-config`` header (a JSON
config: the upstream as ``provider: openai`` with a ``custom_host``, its
``request_timeout`` in ms, ``retry`` with ``attempts`` and
``on_status_codes``, fallback ``targets``, ``forward_headers``). It drops
the body's ``mcpp`` object and unknown headers unless ``forward_headers``
names them, so the config forwards the ``X-MCPP-*`` keys. Each endpoint
sends the header from its ``headers`` table, the config read from the
environment as a user would keep it (``x-portkey-config = { env =
"MCPP_PORTKEY_CONFIG" }``: a config may hold a provider's key).

Covered, each a failure seen before: Portkey's ``request_timeout`` (800 ms)
against an upstream that takes 1.2 s answers 408 after the upstream billed:
the bill must stay within the budget (it was 1.81x); a fallback from a
failing upstream to a healthy one completes within the budget; an upstream
answering 500 behind Portkey's retries (backoff 1 s, then 2 s) is named
``provider_unavailable``, not a missed deadline. Skipped with one line when
node or the gateway is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

import httpx
import pytest

from executor.agree import HTTP_LIMITS
from executor.clock import Clock
from executor.hostile import HostileWorld
from executor.live import Options, RunSpec, open_run
from executor.trace import Trace
from executor.world import World
from tests.executor_helpers import nominal, workflow
from tests.gateway_helpers import (
    PortkeyGateway,
    WorldThread,
    portkey_gateway_missing,
    portkey_headers,
    portkey_target,
)

REASON = portkey_gateway_missing()
if REASON:
    pytest.skip(REASON, allow_module_level=True)

SCALE = 0.01


class SlowUpstream(HostileWorld):
    """An upstream that bills each answer when it accepts the request and sends it ``slow_s`` wall seconds later."""

    slow_s = 1.2

    async def produce(self, call, *, sleep=True):
        got = await super().produce(call, sleep=False)
        await asyncio.sleep(self.slow_s)
        return got


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with PortkeyGateway(tmp_path_factory.mktemp("portkey")) as g:
        yield g


@pytest.fixture(scope="module")
def pw():
    return workflow()


def _through(world: WorldThread, gateway: PortkeyGateway, timeout_s: float = 30.0):
    """The world's endpoints pointed at the gateway (no key of ours: the config carries the upstream's)."""
    return {e.model_id: replace(e, base_url=gateway.url, api_key_env="", request_timeout_s=timeout_s)
            for e in world.world.endpoints()}


def _run(wf, endpoints, method, budget, deadline_wall_s, config, *, params=None, trial=0, options=None):
    endpoints = {m: replace(e, headers=(("x-portkey-config", "", "MCPP_PORTKEY_CONFIG"),))
                 for m, e in endpoints.items()}

    async def go():
        tr = Trace(None)
        async with httpx.AsyncClient(limits=HTTP_LIMITS, trust_env=False) as http:
            async with open_run(wf, endpoints, method, RunSpec(budget=budget, deadline=deadline_wall_s / SCALE,
                                                               trial=trial),
                                http=http, clock=Clock(SCALE), trace=tr, params=params,
                                options=options or Options(backoff_base_s=0.05)) as run:
                return await run.run(), tr.events

    before = os.environ.get("MCPP_PORTKEY_CONFIG")
    os.environ["MCPP_PORTKEY_CONFIG"] = portkey_headers(config)["x-portkey-config"]
    try:
        return asyncio.run(go())
    finally:
        if before is None:
            del os.environ["MCPP_PORTKEY_CONFIG"]
        else:
            os.environ["MCPP_PORTKEY_CONFIG"] = before


def _faults(ev):
    out = {}
    for e in ev:
        if e["event"] == "request":
            for k, n in (e.get("faults") or {}).items():
                out[k] = out.get(k, 0) + n
    return out


@pytest.mark.slow
@pytest.mark.parametrize("method, params", [("sequential", None), ("mcpp", {"M": 8})])
def test_a_408_from_portkeys_request_timeout_keeps_the_budget(gateway, pw, method, params):
    pool, wf = pw
    budget = 3000.0
    with WorldThread(SlowUpstream(pool, seed=2, clock=Clock(SCALE), tasks={wf.dag_row: wf.tasks})) as up:
        config = {**portkey_target(up.url), "request_timeout": 800}
        trial = 0 if method == "sequential" else 1
        res, ev = _run(wf, _through(up, gateway), method, budget, 12.0, config, params=params, trial=trial)
        # billed when the upstream accepted each request (the world's own bill), whatever reached us
        bill = sum(v for (d, t, _m), v in up.world.bills.items() if d == wf.dag_row and t == trial)
    assert _faults(ev).get("gw_timeout", 0) > 0, _faults(ev)
    assert bill > 0 and bill <= budget, (bill, res.spent, res.unbilled)
    assert bill <= res.spent + res.unbilled + 1e-6, (bill, res.spent, res.unbilled)  # the ledger never understates
    assert res.spent + res.unbilled <= budget + 1e-6


@pytest.mark.slow
def test_a_fallback_to_a_healthy_upstream_completes_within_the_budget(gateway, pw):
    pool, wf = pw
    B, D = nominal(wf)
    with WorldThread(HostileWorld(pool, classes=("http_500",), seed=2, clock=Clock(SCALE))) as bad, \
            WorldThread(World(pool, seed=2, clock=Clock(SCALE), tasks={wf.dag_row: wf.tasks})) as good:
        config = {"strategy": {"mode": "fallback"}, "targets": [portkey_target(bad.url), portkey_target(good.url)]}
        res, ev = _run(wf, _through(good, gateway), "sequential", 2 * B, 5 * D * SCALE + 5.0, config)
        billed = good.world.bills
        refused = len(bad.world.seen)
    assert res.success, (res.termination, res.message)
    assert refused > 0  # every request met the failing upstream first
    assert sum(billed.values()) <= res.spent + res.unbilled + 1e-6 <= 2 * B + 1e-6


@pytest.mark.slow
def test_an_upstream_500_behind_portkeys_retries_is_named_provider_unavailable(gateway, pw):
    pool, wf = pw
    B, _ = nominal(wf)
    with WorldThread(HostileWorld(pool, classes=("http_500",), seed=2, clock=Clock(SCALE))) as bad:
        config = {**portkey_target(bad.url), "retry": {"attempts": 2, "on_status_codes": [500]}}
        res, ev = _run(wf, _through(bad, gateway), "sequential", 2 * B, 10.0, config)
        bill = sum(bad.world.bills.values())
    assert res.termination == "provider_unavailable", (res.termination, res.message)
    assert "HTTP 500" in res.message and "internal server error" in res.message
    assert sum(e.get("gateway_retries", 0) for e in ev if e["event"] == "request") > 0
    assert bill == 0 and res.spent + res.unbilled <= 2 * B + 1e-6

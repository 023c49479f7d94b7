"""The world behind a LiteLLM proxy with default settings: the body's ``mcpp`` keys get through, the draws are the same.

The proxy is started once for the module (it takes several seconds to
import); skipped with one line when the proxy's modules are not installed.
"""

from __future__ import annotations

import os

import httpx
import pytest

from executor.clock import Clock
from executor.hostile import FAULT_CLASSES, HostileWorld
from executor.world import World
from tests.executor_helpers import POOL
from tests.gateway_helpers import LiteLLMProxy, WorldThread, gateway_endpoints, litellm_proxy_missing

REASON = litellm_proxy_missing()
if REASON:
    pytest.skip(REASON, allow_module_level=True)

SCALE = 0.005
MSG = [{"role": "user", "content": "Step 2 of the problem."}]


CLASSES = list(FAULT_CLASSES)


@pytest.fixture(scope="module")
def pool(dag0_pool):
    return dag0_pool


@pytest.fixture(scope="module")
def world(dag0_pool):
    with WorldThread(World(dag0_pool, seed=2, clock=Clock(SCALE))) as w:
        yield w


@pytest.fixture(scope="module")
def hostile(pool):
    """A hostile world serving trial t the class CLASSES[t], behind the proxy as ``hostile-<model>``."""
    hw = HostileWorld(pool, schedule=lambda d, n, trial, a, m, k: CLASSES[trial] if trial < len(CLASSES) else None,
                      seed=2, clock=Clock(SCALE))
    with WorldThread(hw) as w:
        yield w


@pytest.fixture(scope="module")
def proxy(world, hostile, tmp_path_factory):
    models = {m: world.url for m in world.world.models()}
    models["hostile-30B_ins"] = ("30B_ins", hostile.url)
    try:
        p = LiteLLMProxy(models, tmp_path_factory.mktemp("litellm"))
    except RuntimeError as exc:
        if "ModuleNotFoundError" in str(exc):
            pytest.skip(f"the LiteLLM proxy cannot start: {str(exc)[-200:]}")
        raise
    with p:
        yield p


def keys(node=2, trial=0, attempt=0):
    return {"dag": 0, "node": node, "trial": trial, "attempt": attempt}


def test_body_keys_pass_the_gateway_and_draw_the_same(world, proxy):
    with httpx.Client(timeout=30) as c:
        for trial, model in ((0, "30B_ins"), (1, "4B_think"), (2, "30B_think"), (3, "4B_ins")):
            body = {"model": model, "messages": MSG, "max_tokens": 3000, "mcpp": keys(trial=trial, attempt=trial)}
            before = world.world.stats.requests
            via = c.post(f"{proxy.url}/chat/completions", json=body, headers=proxy.headers)
            assert via.status_code == 200, via.text
            assert world.world.stats.requests - before == 1  # one request through, no retry, no probe
            direct = c.post(f"{world.url}/chat/completions", json=body).json()
            got = via.json()
            assert got["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
            assert got["choices"][0]["finish_reason"] == direct["choices"][0]["finish_reason"]
            assert got["usage"]["completion_tokens"] == direct["usage"]["completion_tokens"]
            assert got["usage"]["completion_tokens"] == round(world.world.draw(0, 2, [
                "4B_ins", "4B_think", "30B_ins", "30B_think"].index(model), trial, trial)[2])


def test_headers_alone_are_dropped_and_the_refusal_says_both_ways(world, hostile, proxy):
    h = {**proxy.headers, "X-MCPP-Dag": "0", "X-MCPP-Node": "2", "X-MCPP-Trial": "0", "X-MCPP-Attempt": "0"}
    r = httpx.post(f"{proxy.url}/chat/completions", json={"model": "30B_ins", "messages": MSG}, headers=h, timeout=30)
    assert r.status_code == 400 and '"mcpp"' in r.text.replace('\\"', '"') and "X-MCPP-Attempt" in r.text
    wrong = httpx.post(f"{proxy.url}/chat/completions", json={"model": "30B_ins", "messages": MSG, "mcpp": keys()},
                       headers={"Authorization": "Bearer sk-wrong"}, timeout=30)
    assert wrong.status_code == 400 and wrong.json()["error"]["message"] == "No connected db.", wrong.text
    typo = httpx.post(f"{proxy.url}/chat/completions", json={"model": "30B_inz", "messages": MSG, "mcpp": keys()},
                      headers=proxy.headers, timeout=30)
    assert typo.status_code == 400 and "Invalid model name passed in model=30B_inz" in typo.text, typo.text
    # the hostile world's imitations of these two are the proxy's own words
    for cls, real in (("bad_key_400", wrong), ("unknown_model_400", typo)):
        fake = httpx.post(f"{hostile.url}/chat/completions", json={
            "model": "30B_ins", "messages": MSG, "mcpp": keys(trial=CLASSES.index(cls))}).json()["error"]
        want = {k: real.json()["error"][k] for k in ("type", "code")}
        assert {k: fake[k] for k in ("type", "code")} == want
        assert fake["message"] == real.json()["error"]["message"].replace("30B_inz", "30B_ins")


def test_cap_n_and_stream_through_the_gateway(world, proxy):
    openai = pytest.importorskip("openai", reason="the official openai SDK is not installed")
    with openai.OpenAI(base_url=proxy.url, api_key=proxy.key, max_retries=0) as c:
        cut = c.chat.completions.create(model="30B_ins", messages=MSG, max_completion_tokens=5,
                                        extra_body={"mcpp": keys(1)})
        assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 5
        three = c.chat.completions.create(model="4B_ins", messages=MSG, n=3, extra_body={"mcpp": keys(3, 5)})
        singles = [httpx.post(f"{world.url}/chat/completions",
                              json={"model": "4B_ins", "messages": MSG, "mcpp": keys(3, 5, i)}).json() for i in range(3)]
        assert [ch.message.content for ch in three.choices] == [s["choices"][0]["message"]["content"] for s in singles]
        chunks = list(c.chat.completions.create(model="4B_ins", messages=MSG, stream=True,
                                                stream_options={"include_usage": True},
                                                extra_body={"mcpp": keys(3, 5)}))
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == singles[0]["choices"][0][
            "message"]["content"]
        assert chunks[-1].usage.completion_tokens == singles[0]["usage"]["completion_tokens"]


def test_gateway_endpoints_point_at_the_proxy(world, proxy):
    eps = gateway_endpoints({e.model_id: e for e in world.world.endpoints()}, proxy)
    assert {e.base_url for e in eps.values()} == {proxy.url} and set(eps) == set(world.world.models())
    e = eps["30B_ins"]
    r = httpx.post(e.url, json={"model": e.model, "messages": MSG, "mcpp": keys()},
                   headers={"Authorization": f"Bearer {os.environ[e.api_key_env]}"}, timeout=30)
    assert r.status_code == 200 and r.json()["model"] == "30B_ins"


@pytest.mark.parametrize("cls, status, words", [
    ("bad_key_400", 400, "No connected db."),
    ("unknown_model_400", 400, "Invalid model name passed in model=30B_ins"),
    ("quota_429", 429, "insufficient_quota"),
    ("cut_body", 500, "Connection error"),
])
def test_the_backends_words_reach_the_client_through_the_gateway(hostile, proxy, cls, status, words):
    """What an executor behind a gateway sees: the status and the backend's words (a cut body: a 500 yet billed)."""
    trial = CLASSES.index(cls)
    r = httpx.post(f"{proxy.url}/chat/completions", headers=proxy.headers, timeout=60, json={
        "model": "hostile-30B_ins", "messages": MSG, "max_tokens": 100, "mcpp": keys(trial=trial)})
    assert r.status_code == status and words in r.json()["error"]["message"], r.text
    seen = [s for s in hostile.world.seen if s.trial == trial]
    assert seen and all(s.cls == cls for s in seen)
    assert (hostile.world.bill_of(0, trial) > 0) == FAULT_CLASSES[cls][0]  # the cut body was billed, every try


def test_executor_run_through_the_gateway_makes_the_same_requests(world, proxy, tmp_path):
    """``executor run --method sequential`` through a default LiteLLM proxy: request for request, outcome for
    outcome, the same run straight at the world (the keys travel in the body's ``mcpp`` object)."""
    import json
    import subprocess
    import sys

    from executor.endpoints import endpoints_toml
    from tests.executor_helpers import ENV, ROOT

    direct = {e.model_id: e for e in world.world.endpoints()}
    via = gateway_endpoints(direct, proxy)
    runs = {}
    for name, eps in (("direct", direct), ("gateway", via)):
        ep_file, trace = tmp_path / f"{name}.toml", tmp_path / f"{name}.jsonl"
        ep_file.write_text(endpoints_toml(eps.values()))
        r = subprocess.run([sys.executable, "-m", "executor", "run", "--pool", POOL, "--dag", "0", "--endpoints",
                            str(ep_file), "--budget-ratio", "2", "--deadline-ratio", "20", "--time-scale", str(SCALE),
                            "--method", "sequential", "--trial", "11", "--trace", str(trace)],
                           cwd=ROOT, env={**ENV, **os.environ}, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        ev = [json.loads(x) for x in trace.read_text().splitlines()]
        runs[name] = (ev[-1], sorted((e["node"], e["model"], e["attempt"], e["status"], e["output_tokens"], e["cost"])
                                     for e in ev if e["event"] == "request"))
    (end_a, reqs_a), (end_b, reqs_b) = runs["direct"], runs["gateway"]
    assert reqs_a and reqs_a == reqs_b  # the same requests and outcomes (their order: timing)
    assert end_a["termination"] == end_b["termination"] and end_a["spent"] == end_b["spent"]

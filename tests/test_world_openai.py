"""The loopback world speaks OpenAI: the official ``openai`` SDK as its client (strict types, errors, streams, n, models)."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from executor.clock import Clock
from executor.world import Faults, World
from simulator.base.errors import ConfigError
from tests.executor_helpers import POOL, cli
from tests.gateway_helpers import WorldThread

openai = pytest.importorskip("openai", reason="the official openai SDK is not installed")
from openai.types.chat import ChatCompletion, ChatCompletionChunk  # noqa: E402

SCALE = 0.005
MSG = [{"role": "user", "content": "Step 1: say something the verifier accepts."}]


def keys(node: int = 1, trial: int = 3, attempt: int = 0, dag: int = 0) -> dict:
    return {"dag": dag, "node": node, "trial": trial, "attempt": attempt}


def headers(node: int = 1, trial: int = 3, attempt: int = 0, dag: int = 0) -> dict:
    return {"X-MCPP-Dag": str(dag), "X-MCPP-Node": str(node), "X-MCPP-Trial": str(trial),
            "X-MCPP-Attempt": str(attempt)}


@pytest.fixture(scope="module")
def pool(dag0_pool):
    return dag0_pool


@pytest.fixture(scope="module")
def world(dag0_pool):
    with WorldThread(World(dag0_pool, seed=1, clock=Clock(SCALE))) as w:
        yield w


@pytest.fixture(scope="module")
def client(world):
    with openai.OpenAI(base_url=world.url, api_key="none", max_retries=0) as c:
        yield c


def test_answers_validate_strictly_and_are_the_worlds_draw(world, client):
    raw = httpx.post(f"{world.url}/chat/completions", json={"model": "30B_ins", "messages": MSG, "mcpp": keys()})
    data = raw.json()
    cc = ChatCompletion.model_validate(data, strict=True)
    assert cc.object == "chat.completion" and cc.model == "30B_ins" and cc.created > 0 and cc.system_fingerprint
    lat, succ, tokens = world.world.draw(0, 1, 2, 3, 0)  # node position 1, model 30B_ins (index 2), trial 3
    assert cc.usage.completion_tokens == round(tokens) and cc.choices[0].finish_reason == "stop"
    assert ("LOOPBACK-PASS" in cc.choices[0].message.content) == succ
    # the SDK itself, keys in headers: the same answer
    sdk = client.chat.completions.create(model="30B_ins", messages=MSG, extra_headers=headers())
    assert sdk.choices[0].message.content == cc.choices[0].message.content
    assert sdk.usage == cc.usage and sdk.id == cc.id


def test_keys_in_headers_or_body_and_refused_in_words(world, client):
    via_body = client.chat.completions.create(model="4B_ins", messages=MSG, extra_body={"mcpp": keys(2, 7, 1)})
    via_headers = client.chat.completions.create(model="4B_ins", messages=MSG, extra_headers=headers(2, 7, 1))
    assert via_body.usage == via_headers.usage and via_body.choices[0].message == via_headers.choices[0].message
    both = client.chat.completions.create(model="4B_ins", messages=MSG, extra_headers=headers(2, 7, 1),
                                          extra_body={"mcpp": keys(2, 7, 5)})
    assert both.id == via_headers.id  # the headers win
    for kwargs in ({}, {"extra_headers": {"X-MCPP-Dag": "0"}}, {"extra_body": {"mcpp": {"dag": 0, "node": 1}}},
                   {"extra_body": {"mcpp": {**keys(), "trial": True}}}, {"extra_body": {"mcpp": [0, 1, 2, 3]}},
                   {"extra_headers": {**headers(), "X-MCPP-Trial": "x"}}):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="4B_ins", messages=MSG, **kwargs)
        msg = e.value.body["message"]
        assert "X-MCPP-Attempt" in msg and '"mcpp"' in msg and "\n" not in msg


def test_stream_is_served_as_server_sent_events(world, client):
    plain = client.chat.completions.create(model="30B_ins", messages=MSG, extra_body={"mcpp": keys(3)})
    chunks = list(client.chat.completions.create(model="30B_ins", messages=MSG, stream=True,
                                                 stream_options={"include_usage": True},
                                                 extra_body={"mcpp": keys(3)}))
    assert len(chunks) >= 3 and all(isinstance(c, ChatCompletionChunk) for c in chunks)
    for c in chunks:
        ChatCompletionChunk.model_validate(c.model_dump(exclude_unset=True), strict=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage == plain.usage  # include_usage: the last chunk
    assert all(c.usage is None for c in chunks[:-1])
    # without include_usage: no usage chunk
    bare = list(client.chat.completions.create(model="30B_ins", messages=MSG, stream=True,
                                               extra_body={"mcpp": keys(3)}))
    assert all(c.choices and c.usage is None for c in bare)


def test_n_choices_are_the_next_attempts(world, client):
    three = client.chat.completions.create(model="4B_think", messages=MSG, n=3, extra_body={"mcpp": keys(0, 4, 2)})
    assert [c.index for c in three.choices] == [0, 1, 2]
    singles = [client.chat.completions.create(model="4B_think", messages=MSG, extra_body={"mcpp": keys(0, 4, 2 + i)})
               for i in range(3)]
    assert [c.message.content for c in three.choices] == [s.choices[0].message.content for s in singles]
    assert three.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="4B_think", messages=MSG, n=0, extra_body={"mcpp": keys()})
    assert "'n'" in e.value.body["message"]
    streamed = list(client.chat.completions.create(model="4B_think", messages=MSG, n=3, stream=True,
                                                   extra_body={"mcpp": keys(0, 4, 2)}))
    for i in range(3):
        got = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices and c.choices[0].index == i)
        assert got == three.choices[i].message.content


def test_max_completion_tokens_is_the_cap(world, client):
    r = client.chat.completions.create(model="30B_ins", messages=MSG, max_completion_tokens=5,
                                       extra_body={"mcpp": keys()})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    assert "LOOPBACK-FAIL" in r.choices[0].message.content  # a cut answer fails
    both = client.chat.completions.create(model="30B_ins", messages=MSG, max_completion_tokens=9, max_tokens=7,
                                          extra_body={"mcpp": keys()})
    assert both.usage.completion_tokens == 7  # both: the smaller
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="30B_ins", messages=MSG, max_completion_tokens=0,
                                       extra_body={"mcpp": keys()})
    assert "max_completion_tokens" in e.value.body["message"]


def test_errors_are_openai_error_objects(pool):
    with WorldThread(World(pool, seed=1, clock=Clock(SCALE), faults=Faults(rate_429=1.0, retry_after_s=7))) as w, \
            openai.OpenAI(base_url=w.url, api_key="none", max_retries=0) as c:
        with pytest.raises(openai.RateLimitError) as e:
            c.chat.completions.create(model="30B_ins", messages=MSG, extra_body={"mcpp": keys()})
        assert e.value.response.headers["retry-after"] == "7"
        assert e.value.body["message"] and e.value.body["type"] and e.value.body["code"] == "rate_limit_exceeded"
        with pytest.raises(openai.NotFoundError) as e:
            c.chat.completions.create(model="gpt-none", messages=MSG, extra_body={"mcpp": keys()})
        assert "gpt-none" in e.value.body["message"] and e.value.body["code"] == "model_not_found"
        for method, path, status in (("GET", "/chat/completions", 405), ("POST", "/nowhere", 404),
                                     ("POST", "/chat/completions", 400)):
            r = httpx.request(method, w.url + path, content=b"not json")
            err = r.json()["error"]
            assert r.status_code == status and set(err) >= {"message", "type", "code"} and err["message"]
    with WorldThread(World(pool, seed=1, clock=Clock(SCALE), faults=Faults(rate_500=1.0))) as w, \
            openai.OpenAI(base_url=w.url, api_key="none", max_retries=0) as c:
        with pytest.raises(openai.InternalServerError) as e:
            c.chat.completions.create(model="30B_ins", messages=MSG, extra_body={"mcpp": keys()})
        assert e.value.body["type"] == "server_error"


def test_models_lists_the_pools_models(world, client, pool):
    ids = [m.id for m in client.models.list()]
    expected = list(dict.fromkeys(str(m) for d in range(len(pool)) for m in pool[d].model_ids))
    assert ids == expected and "30B_ins" in ids
    assert client.models.retrieve("30B_think").id == "30B_think"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_many_concurrent_async_requests(world):
    async def go():
        async with openai.AsyncOpenAI(base_url=world.url, api_key="none", max_retries=0) as c:
            return await asyncio.gather(*(c.chat.completions.create(
                model="30B_think", messages=MSG, extra_body={"mcpp": keys(4, 100 + i)}) for i in range(200)))

    before = world.world.stats.answered
    out = asyncio.run(go())
    assert len({r.id for r in out}) == 200 and world.world.stats.answered - before == 200
    for i in (0, 57, 199):
        assert out[i].usage.completion_tokens == round(world.world.draw(0, 4, 3, 100 + i, 0)[2])


def test_a_busy_port_is_one_line(pool):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]

        async def start():
            await World(pool).start(port=port)

        with pytest.raises(ConfigError) as e:
            asyncio.run(start())
        assert f"--port {port}" in str(e.value) and "\n" not in str(e.value)
        r = cli("world", "--pool", POOL, "--port", str(port), "--max-seconds", "5", timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(port) in r.stderr, r.stderr

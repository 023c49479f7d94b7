"""What the executor trusts of a server (issue 41): its connections, its words, its encodings, its usage.

Each test is a failure seen against the executor before: a kept-alive
connection holding a second copy of an answer gave it to the next request;
a key echoed in a 401 or 500 body reached the trace, the summary and stderr;
``Content-Encoding: gzip, gzip`` decoded a gigabyte on the event loop; five
choices for ``n = 1`` were charged at the reservation while the server billed
them all; duplicate usage keys charged the last one; a 30,000-deep JSON
answer crashed the sample (``RecursionError``) instead of being a fault.
Live tests: the hostile world on 127.0.0.1 and real asyncio.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
import tracemalloc
from dataclasses import replace

import httpx
import pytest

from executor.agree import http_client
from executor.client import classify_body, try_once
from executor.clock import Clock
from executor.endpoints import check_keys, endpoints_toml, parse_endpoints
from executor.hostile import HostileWorld
from executor.live import Options
from executor.redact import redact
from executor.trace import format_summary, summarize
from simulator.base.errors import ConfigError
from tests.executor_helpers import ENV, POOL, ROOT, cli, nominal, workflow
from tests.test_executor_hostile import check_promises, faults, hostile_runs

SECRET = "sk-mcpp-test-" + "Zq7x" * 10
HEADER_SECRET = "pk-cfg-" + "Wd93" * 8
MSG = [{"role": "user", "content": "Step 1."}]


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("MCPP_TRUST_KEY", SECRET)
    monkeypatch.setenv("MCPP_TRUST_HDR", HEADER_SECRET)


def keyed(eps, **more):
    """The world's endpoints, each sending the test's key (and an env-sourced and a literal header)."""
    hdrs = (("x-gateway-config", "", "MCPP_TRUST_HDR"), ("x-gateway-provider", "openai", ""))
    return {m: replace(e, api_key_env="MCPP_TRUST_KEY", headers=hdrs, **more) for m, e in eps.items()}


async def _tries(world: HostileWorld, reqs: list[tuple[str, dict]], ep_edit=None):
    """Send ``reqs`` ((model, mcpp keys)) one after the other on one client: their TryResults."""
    await world.start()
    eps = {e.model_id: e for e in world.endpoints()}
    if ep_edit is not None:
        eps = ep_edit(eps)
    out = []
    try:
        async with http_client() as http:
            for model, keys in reqs:
                ep = eps[model]
                body = {"model": ep.model, "messages": MSG, "max_tokens": ep.max_tokens, "mcpp": keys}
                out.append(await try_once(http, ep, body, {}, 10.0, MSG))
    finally:
        await world.stop()
    return out


# -- 2. a response belongs to its request --------------------------------------------------------


def test_an_answer_written_twice_is_never_read_as_the_next_requests_answer():
    pool, wf = workflow()
    world = HostileWorld(pool, seed=3, clock=Clock(0.001), schedule=["double_answer", "ok"])
    first = {"dag": 0, "node": 1, "trial": 0, "attempt": 0}
    second = {"dag": 0, "node": 2, "trial": 5, "attempt": 3}
    got = asyncio.run(_tries(world, [("30B_ins", first), ("30B_ins", second)]))
    st = pool[0]
    own = [round(world.draw(0, [int(x) for x in st.node_ids].index(k["node"]), st.model_ids.index("30B_ins"),
                            k["trial"], k["attempt"])[2]) for k in (first, second)]
    assert own[0] != own[1]  # the two answers can be told apart by their usage
    assert [r.kind for r in got] == ["ok", "ok"]
    assert [r.completion_tokens for r in got] == own, "the second request read the first one's copy"
    assert [s.cls for s in world.seen] == ["double_answer", "ok"]


def test_runs_against_doubled_answers_keep_every_promise():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 5 * D, range(4), classes={"double_answer": 1, "ok": 1},
                              concurrency=4)
    check_promises(out, world, wf, 2 * B, 5 * D, 0.01)
    assert world.served["double_answer"] > 0


# -- 3. no secret in any output -------------------------------------------------------------------


def test_redact_removes_configured_values_and_token_shapes():
    from executor.redact import remember

    remember("a-configured-value-123", "$SOME_ENV")
    text = ("Incorrect API key provided: Bearer abcDEF123456789. key sk-proj-" + "x" * 30
            + " and a-configured-value-123 and Authorization: Bearer  tok_0123456789abcdef")
    out = redact(text)
    for leaked in ("abcDEF123456789", "sk-proj-", "a-configured-value-123", "tok_0123456789abcdef"):
        assert leaked not in out, out
    assert "$SOME_ENV" in out and "Incorrect API key provided" in out
    assert redact("risk-adjusted task-1 ask-me sk-short") == "risk-adjusted task-1 ask-me sk-short"


def test_a_key_echoed_in_a_401_reaches_no_trace_summary_or_stderr(tmp_path):
    eps = tmp_path / "eps.toml"
    trace = tmp_path / "t.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "executor.hostile", "--pool", POOL, "--classes", "key_echo_401",
                               "--write-endpoints", str(eps), "--max-seconds", "60"],
                              cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "on http://127.0.0.1" in server.stdout.readline()
        eps.write_text(eps.read_text().replace('api_key_env = ""', 'api_key_env = "MCPP_TRUST_KEY"'))
        env = {**ENV, "MCPP_TRUST_KEY": SECRET}
        r = subprocess.run([sys.executable, "-m", "executor", "run", "--pool", POOL, "--endpoints", str(eps),
                            "--budget-ratio", "1", "--deadline-ratio", "1", "--trace", str(trace), "--method",
                            "sequential"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.terminate()
        server.wait(10)
    assert r.returncode == 4, r.stderr
    assert "Incorrect API key provided" in r.stderr and "$MCPP_TRUST_KEY" in r.stderr
    summary = cli("summary", str(trace))
    for where, text in (("stdout", r.stdout), ("stderr", r.stderr), ("trace", trace.read_text()),
                        ("summary", summary.stdout)):
        assert SECRET not in text and SECRET[:20] not in text, where


def test_keys_and_header_secrets_echoed_in_500s_reach_neither_the_trace_nor_models_down(tmp_path, secret_env):
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 50 * D, [0], classes=("key_echo_500",),
                              endpoints_edit=keyed, options=Options(backoff_base_s=0.001, down_after=2))
    res, ev, _ = out[0]
    assert res.termination == "provider_unavailable"
    text = json.dumps(ev) + res.message + format_summary(summarize(ev))
    assert "x-gateway-provider=openai" in text  # a literal header is configuration, not a secret
    assert "authorization=[redacted $MCPP_TRUST_KEY]" in text and "x-gateway-config=[redacted $MCPP_TRUST_HDR]" in text
    for secret in (SECRET, HEADER_SECRET):
        assert secret not in text
    down = summarize(ev)["models_down"]
    assert down and all("upstream failed" in m for m in down.values())


def test_the_trace_file_redacts_whatever_reaches_it(tmp_path):
    from executor.redact import remember
    from executor.trace import Trace

    remember("tracevalue-0123456789", "$X")
    tr = Trace(tmp_path / "t.jsonl")
    rec = tr.write("endpoint", message="said tracevalue-0123456789", nested={"a": ["Bearer qwertyuiop123"]})
    tr.write("ledger", spent=1.0)
    tr.close()
    text = (tmp_path / "t.jsonl").read_text()
    assert "tracevalue" not in text + json.dumps(rec) and "qwertyuiop" not in text + json.dumps(tr.events)
    assert "[redacted $X]" in text and "Bearer [redacted]" in text and len(text.splitlines()) == 2


# -- 4. decoding within the caps -------------------------------------------------------------------


def test_a_stacked_gzip_bomb_is_refused_without_decoding():
    pool, wf = workflow()
    world = HostileWorld(pool, seed=3, clock=Clock(0.001), classes=("gzip_bomb",), bomb_bytes=64 << 20)
    tracemalloc.start()
    try:
        got = asyncio.run(_tries(world, [("30B_ins", {"dag": 0, "node": 1, "trial": 0, "attempt": 0})]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got[0].kind == "decode_error" and "gzip, gzip" in got[0].detail
    assert peak < 16 << 20, peak


async def _raw_server(response: bytes, seen: list[bytes]):
    """A server answering every request on a connection with ``response`` (raw bytes); the requests' heads kept."""
    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                seen.append(head)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                writer.write(response)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()
    return await asyncio.start_server(handle, "127.0.0.1", 0)


def _ep(port: int, **kw):
    from executor.endpoints import Endpoint

    return Endpoint(model_id="m", base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env="",
                    input_price_per_1m=0, output_price_per_1m=1, concurrency=1, max_tokens=100,
                    request_timeout_s=10, **kw)


def _serve_once(response: bytes, **ep_kw):
    seen: list[bytes] = []

    async def go():
        srv = await _raw_server(response, seen)
        try:
            async with http_client() as http:
                ep = _ep(srv.sockets[0].getsockname()[1], **ep_kw)
                return await try_once(http, ep, {"model": "m", "messages": MSG, "max_tokens": 100, "n": 1}, {},
                                      10.0, MSG)
        finally:
            srv.close()
    return asyncio.run(go()), seen


def _response(body: bytes, encoding: str | None) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % len(body)
    if encoding:
        head += b"content-encoding: " + encoding.encode() + b"\r\n"
    return head + b"\r\n" + body


ANSWER = json.dumps({"object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}).encode()


def test_a_gzip_answer_decodes_and_accept_encoding_names_what_is_decoded():
    res, seen = _serve_once(_response(gzip.compress(ANSWER), "gzip"))
    assert res.kind == "ok" and res.text == "hi"
    head = seen[0].decode().lower()
    accept = [x.split(":", 1)[1].strip() for x in head.split("\r\n") if x.startswith("accept-encoding:")]
    assert accept and {a.strip() for a in accept[0].split(",")} <= {"gzip", "deflate", "identity"}


def test_a_single_gzip_bomb_is_cut_at_the_cap_while_decoding():
    bomb = gzip.compress(b" " * (256 << 20), compresslevel=9)
    tracemalloc.start()
    try:
        res, _ = _serve_once(_response(bomb, "gzip"), max_response_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.kind == "too_large"
    assert peak < 24 << 20, peak  # today the whole chunk decoded in one call: 256 MiB


@pytest.mark.parametrize("encoding", ["compress", "gzip, gzip", "br", "gzip, identity, deflate"])
def test_stacked_or_unknown_encodings_are_decode_errors(encoding):
    res, _ = _serve_once(_response(ANSWER, encoding))
    assert res.kind == "decode_error" and res.billing == "unbilled", res


def test_the_hostile_unknown_encoding_is_a_decode_error():
    pool, wf = workflow()
    world = HostileWorld(pool, seed=3, clock=Clock(0.001), classes=("unknown_encoding",))
    got = asyncio.run(_tries(world, [("30B_ins", {"dag": 0, "node": 1, "trial": 0, "attempt": 0})]))
    assert got[0].kind == "decode_error"


# -- 6. usage the executor did not ask for --------------------------------------------------------------


def test_the_request_asks_for_one_choice():
    from executor.client import request_body

    pool, wf = workflow()
    world = HostileWorld(pool, seed=3, clock=Clock(0.001))
    ep = world.endpoints()[0]
    assert request_body(ep, MSG, 10, {"dag": 0}, None)["n"] == 1


def test_choices_beyond_n_are_spent_as_reported_and_shown(tmp_path):
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 1.0 * B, 5 * D, range(3), classes=("many_choices",),
                              concurrency=3)
    for res, ev, _ in out:
        trial = ev[0]["trial"]
        bill = world.bill_of(wf.dag_row, trial)
        assert bill <= res.spent + res.unbilled + 1e-6, (bill, res.spent, res.unbilled)
        end = ev[-1]
        assert end["over_reservation"] > 0 and res.spent > 0
        assert end["spent"] + end["unbilled"] - end["over_reservation"] <= 1.0 * B + 1e-6
        reqs = [e for e in ev if e["event"] == "request" and e["status"] == "ok"]
        assert reqs and all(e["faults"].get("extra_choices") == 1 for e in reqs)
        s = summarize(ev)
        assert s["over_reservation"] == end["over_reservation"] and "over_reservation" in format_summary(s)
        if res.spent + res.unbilled >= B:
            assert res.termination == "budget_exhausted"


def test_duplicate_usage_keys_are_charged_the_reservation():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 5 * D, range(2), classes=("duplicate_usage",))
    check_promises(out, world, wf, 2 * B, 5 * D, 0.01)
    reqs = [e for _, ev, _ in out for e in ev if e["event"] == "request" and e["status"] == "ok"]
    assert reqs and all(e["usage"] == "local" and e["cost"] == e["max_tokens"] for e in reqs)
    assert all(e["faults"].get("duplicate_keys") == 1 for e in reqs)


@pytest.mark.parametrize("usage", [{"prompt_tokens": 3, "completion_tokens": 2.0},
                                   {"prompt_tokens": 3, "completion_tokens": 1e12},
                                   {"prompt_tokens": "3", "completion_tokens": 2},
                                   {"prompt_tokens": 3, "completion_tokens": -1},
                                   {"prompt_tokens": 3, "completion_tokens": True},
                                   {"prompt_tokens": 3, "completion_tokens": 10 ** 4000},
                                   {"prompt_tokens": 2 ** 53 + 1, "completion_tokens": 2}])
def test_usage_that_is_not_plain_integer_counts_is_not_trusted(usage):
    data = json.loads(ANSWER)
    data["usage"] = usage
    assert classify_body(data, MSG).usage_source == "local"
    data["usage"] = {"prompt_tokens": 3, "completion_tokens": 2}
    assert classify_body(data, MSG).usage_source == "usage"


def test_deep_json_is_invalid_json_and_retried_like_one():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 3 * B, 5 * D, [0], classes={"deep_json": 1, "ok": 1})
    check_promises(out, world, wf, 3 * B, 5 * D, 0.01)
    ev = out[0][1]
    assert faults(ev)["invalid_json"] > 0
    assert not any("executor_error" in str(e.get("status")) + str(e.get("reason")) for e in ev)


def test_an_answer_that_is_not_a_chat_completion_is_refused():
    data = json.loads(ANSWER)
    data["object"] = "text_completion"
    r = classify_body(data, MSG)
    assert r.kind == "mismatch" and r.billing == "unbilled"


# -- 7. headers per endpoint ---------------------------------------------------------------------------

ROW = {"base_url": "http://x/v1", "model": "m", "api_key_env": "", "input_price_per_1m": 0,
       "output_price_per_1m": 1, "concurrency": 1, "max_tokens": 10, "request_timeout_s": 1}


def test_headers_are_literal_or_named_environment_variables(monkeypatch):
    eps = parse_endpoints({"models": {"m": {**ROW, "headers": {"x-portkey-provider": "openai",
                                                               "x-portkey-config": {"env": "MCPP_PK_CFG"}}}}},
                          "e.toml")
    ep = eps["m"]
    assert ep.headers == (("x-portkey-provider", "openai", ""), ("x-portkey-config", "", "MCPP_PK_CFG"))
    with pytest.raises(ConfigError, match=r"e.toml: \[models.m\]: headers: x-portkey-config names MCPP_PK_CFG"):
        check_keys(eps, ["m"], "e.toml")
    monkeypatch.setenv("MCPP_PK_CFG", "pc-secret-config-1234")
    check_keys(eps, ["m"], "e.toml")
    again = parse_endpoints(__import__("tomllib").loads(endpoints_toml(eps.values())), "w.toml")
    assert again["m"].headers == ep.headers


@pytest.mark.parametrize("headers, words", [
    ("x", "headers must be a table"),
    ({"x-a": 3}, "x-a must be a string or {env = \"NAME\"}"),
    ({"x-a": {"env": ""}}, "x-a must be a string or {env = \"NAME\"}"),
    ({"x-a": {"env": "A", "b": 1}}, "x-a must be a string or {env = \"NAME\"}"),
    ({"bad name": "v"}, "'bad name' is not a header name"),
    ({"x-a": "v\r\nx-b: w"}, "x-a holds a line break"),
    ({"X-MCPP-Node": "1"}, "X-MCPP-Node is set by the executor"),
    ({"Content-Type": "text/plain"}, "Content-Type is set by the executor"),
    ({"X-Org": "a", "x-org": "b"}, "x-org is named twice"),
])
def test_bad_headers_are_refused_in_one_line(headers, words):
    with pytest.raises(ConfigError, match=r"e.toml: \[models.m\]: headers: ") as e:
        parse_endpoints({"models": {"m": {**ROW, "headers": headers}}}, "e.toml")
    assert words in str(e.value)


def test_authorization_comes_from_api_key_env_or_headers_not_both():
    with pytest.raises(ConfigError, match="Authorization comes from api_key_env"):
        parse_endpoints({"models": {"m": {**ROW, "api_key_env": "K", "headers": {"Authorization": "x"}}}}, "e.toml")
    ok = parse_endpoints({"models": {"m": {**ROW, "headers": {"api-key": {"env": "AZ"}}}}}, "e.toml")
    assert ok["m"].headers == (("api-key", "", "AZ"),)


def test_headers_are_sent_and_env_values_read_at_the_request(monkeypatch):
    monkeypatch.setenv("MCPP_PK_CFG", "pc-secret-config-1234")
    _, seen = _serve_once(_response(ANSWER, None), headers=(("x-portkey-provider", "openai", ""),
                                                             ("x-portkey-config", "", "MCPP_PK_CFG")))
    head = seen[0].decode().lower()
    assert "x-portkey-provider: openai" in head and "x-portkey-config: pc-secret-config-1234" in head


def test_the_hostile_world_serves_the_trust_faults():
    pool, wf = workflow()
    order = ["many_choices", "duplicate_usage", "deep_json", "key_echo_401", "key_echo_500", "gzip_bomb",
             "unknown_encoding", "double_answer"]
    world = HostileWorld(pool, seed=3, clock=Clock(0.001), schedule=order, bomb_bytes=1 << 20)

    async def go():
        await world.start()
        out = []
        try:
            for a in range(len(order)):
                async with httpx.AsyncClient() as c:  # one connection per request: the double answer crosses nothing
                    r = await c.post(f"http://127.0.0.1:{world.port}/v1/chat/completions", json={
                        "model": "30B_ins", "messages": MSG, "mcpp": {"dag": 0, "node": 1, "trial": 0, "attempt": a}},
                        headers={"Authorization": "Bearer echo-me-0123456789", "x-extra": "v"})
                    out.append(r)
            return out
        finally:
            await world.stop()

    many, dup, deep, k401, k500, bomb, unknown, double = asyncio.run(go())
    assert [s.cls for s in world.seen] == order
    body = many.json()
    assert len(body["choices"]) == 5 and body["usage"]["completion_tokens"] == world.seen[0].billed_tokens
    assert 0 < world.seen[0].excess_tokens < world.seen[0].billed_tokens  # all but the first choice
    assert dup.content.count(b'"completion_tokens"') == 2 and json.loads(dup.content)["usage"]["completion_tokens"] == 1
    assert deep.content.startswith(b"[[[[") and len(deep.content) == 60000
    assert k401.status_code == 401 and "Bearer echo-me-0123456789" in k401.json()["error"]["message"]
    assert k401.headers["x-echo-authorization"] == "Bearer echo-me-0123456789"
    msg = k500.json()["error"]["message"]
    assert k500.status_code == 500 and msg.index("authorization=Bearer echo-me") < msg.index("x-extra=v")
    assert bomb.headers["content-encoding"] == "gzip, gzip" and bomb.content == bytes(1 << 20)
    assert unknown.headers["content-encoding"] == "compress" and json.loads(unknown.content)["choices"]
    assert double.json()["choices"]
    billed = [s.billed_tokens > 0 for s in world.seen]
    assert billed == [True, True, True, False, False, True, True, True]


def test_the_decoder_refuses_what_does_not_decode_and_takes_raw_deflate():
    import zlib

    from executor.decoding import BodyDecoder, DecodeFault, TooLarge

    def decode(body: bytes, coding: str | None, cap: int = 1 << 20, pieces: int = 7) -> bytes:
        d = BodyDecoder(coding, cap)
        step = max(1, len(body) // pieces)
        for i in range(0, len(body), step):
            d.feed(body[i:i + step])
        return d.finish()

    assert decode(gzip.compress(ANSWER), "x-gzip") == ANSWER
    assert decode(zlib.compress(ANSWER), "deflate") == ANSWER
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert decode(raw.compress(ANSWER) + raw.flush(), "Deflate") == ANSWER
    assert decode(ANSWER, "identity") == ANSWER and decode(ANSWER, None) == ANSWER
    with pytest.raises(DecodeFault, match="ends early"):
        decode(gzip.compress(ANSWER)[:-12], "gzip")
    with pytest.raises(DecodeFault, match="after the end"):
        decode(gzip.compress(ANSWER) + gzip.compress(ANSWER), "gzip")
    with pytest.raises(TooLarge):
        decode(gzip.compress(b"a" * 5000), "gzip", cap=4096)
    with pytest.raises(TooLarge):
        decode(b"a" * 5000, None, cap=4096)


def test_a_model_named_otherwise_is_noted_never_refused():
    from executor.client import same_model

    assert same_model("gpt-4o", "gpt-4o-2024-08-06") and same_model("openai/gpt-4o", "gpt-4o")
    assert same_model("Qwen/Qwen3-30B-A3B-Instruct", "qwen3-30b-a3b-instruct") and same_model("m", None)
    data = json.loads(ANSWER)
    data["model"] = "another-model"
    r = classify_body(data, MSG, model="m")
    assert r.kind == "ok" and r.notes == ["model_mismatch"]


def test_a_dropped_connection_is_counted_in_the_requests_faults():
    pool, wf = workflow()
    B, D = nominal(wf)
    out, world = hostile_runs(wf, pool, "sequential", 2 * B, 5 * D, [0], classes=("double_answer",), concurrency=1)
    assert faults(out[0][1])["stale_bytes"] > 0


def test_a_copy_arriving_while_the_connection_is_idle_is_never_read():
    """The copy comes 50 ms after the answer: the idle connection is readable, and it is not reused."""
    def answer(i: int) -> bytes:
        data = json.loads(ANSWER)
        data["usage"]["completion_tokens"] = i + 1
        return _response(json.dumps(data).encode(), None)

    async def go():
        served = [0]

        async def handle(reader, writer):
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n")
                                  if x.lower().startswith(b"content-length:"))
                    await reader.readexactly(length)
                    one = answer(served[0])
                    served[0] += 1
                    writer.write(one)
                    await writer.drain()
                    await asyncio.sleep(0.05)
                    writer.write(one)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        try:
            async with http_client() as http:
                ep = _ep(srv.sockets[0].getsockname()[1])
                out = []
                for _ in range(2):
                    out.append(await try_once(http, ep, {"model": "m", "messages": MSG, "max_tokens": 100}, {},
                                              10.0, MSG))
                    await asyncio.sleep(0.3)
                return out
        finally:
            srv.close()

    got = asyncio.run(go())
    assert [r.completion_tokens for r in got] == [1.0, 2.0]


def test_the_ledger_spends_a_trusted_excess_and_keeps_the_runs_own_share_within_the_budget():
    from executor.ledger import Ledger

    led = Ledger(100.0)
    a, b = led.reserve(30.0, 0), led.reserve(50.0, 1)
    assert led.settle(a, 80.0, beyond=True) == 80.0 and led.over == 50.0 and led.available() == 0.0
    assert led.exhausted()  # the run ends: its own launches fit, the server's excess left nothing
    assert led.settle(b, 80.0) == 50.0  # an untrusted charge is capped at its reservation, as before
    assert led.spent == 130.0 and led.spent - led.over <= led.budget


def test_an_error_body_nested_too_deep_is_read_as_text():
    from executor.client import classify_error

    r = classify_error(500, b"[" * 4096, {})
    assert r.kind == "http_5xx" and r.detail.startswith("HTTP 500: [[[")


def test_no_answer_body_makes_the_classification_raise():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from executor.client import classify_answer

    ep = _ep(1)
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-10, 10 ** 30), st.floats(allow_nan=True),
                     st.text(max_size=8), st.sampled_from(["chat.completion", "length", "stop"]))
    tree = st.recursive(leaf, lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(
        st.sampled_from(["choices", "message", "content", "usage", "prompt_tokens", "completion_tokens", "object",
                         "model", "finish_reason", "error", "detail"]), kids, max_size=5)), max_leaves=20)

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(tree, st.sampled_from([200, 200, 400, 429, 500, 503]))
    def check(data, status):
        raw = json.dumps(data).encode()
        r = classify_answer(ep, status, raw, {}, MSG)
        assert r.kind and (r.kind not in ("ok", "truncated") or isinstance(r.text, str))

    check()
    for raw in (b"", b"\xff\xfe", b"[" * 50000, b'{"usage": ' * 3000, b"1" * 5000, b'{"a": 1e999999}'):
        classify_answer(ep, 200, raw, {}, MSG)
        classify_answer(ep, 500, raw, {}, MSG)

"""The OpenAI-compatible client against a scripted local server (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from codeflow.llm_client import (
    ChatClient,
    ChatRequest,
    ClientConfig,
    EndpointError,
    RequestJournal,
    parse_retry_after,
    run_many,
    run_many_async,
)
from tests.fake_openai_server import FakeServer, Reply, identity


def _cfg(server: FakeServer, **kw) -> ClientConfig:
    base = dict(base_url=server.base_url, model="test-model", concurrency=4, max_tries=4,
                backoff_base_sec=0.001, backoff_max_sec=0.01, timeout_sec=10.0)
    base.update(kw)
    return ClientConfig(**base)


def _reqs(n: int, prefix: str = "q") -> list[ChatRequest]:
    return [ChatRequest(f"{prefix}{i}", [{"role": "user", "content": f"{prefix} {i}"}])
            for i in range(n)]


def test_body_carries_sampling_settings_and_key_header(tmp_path, monkeypatch):
    monkeypatch.setenv("CF_TEST_KEY", "sk-test-123")
    with FakeServer(lambda body, seen: Reply()) as server:
        res = run_many(_cfg(server, api_key_env="CF_TEST_KEY"), _reqs(1), tmp_path / "j.jsonl",
                       progress=False)
    body = server.bodies[0]
    assert body["model"] == "test-model"
    assert (body["temperature"], body["top_p"], body["top_k"], body["n"]) == (0.6, 0.95, 20, 1)
    assert server.auth_headers == ["Bearer sk-test-123"]
    assert "sk-test-123" not in (tmp_path / "j.jsonl").read_text()
    r = res["q0"]
    assert r.ok and r.choices[0].text == "ok" and r.tries == 1


def test_retries_on_429_and_500_then_succeeds(tmp_path):
    def script(body, seen):
        if seen == 0:
            return Reply(status=429, headers={"Retry-After": "0"})
        if seen == 1:
            return Reply(status=500)
        if seen == 2:
            return Reply(status=503)
        return Reply(usage={"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})

    with FakeServer(script) as server:
        res = run_many(_cfg(server), _reqs(3), tmp_path / "j.jsonl", progress=False)
    assert all(r.ok and r.tries == 4 for r in res.values())
    assert server.total == 12
    assert all(r.prompt_tokens == 5 and r.completion_tokens == 3 and r.total_tokens == 8
               and r.token_source == "usage" for r in res.values())


def test_an_answer_nested_30000_deep_is_malformed_and_retried_not_a_crash(tmp_path):
    """Python's JSON parser recurses: such an answer used to raise RecursionError out of the whole run."""
    deep = "[" * 30000 + "]" * 30000
    with FakeServer(lambda body, seen: Reply(text=deep)) as server:
        res = run_many(_cfg(server, max_tries=2), _reqs(2), tmp_path / "j.jsonl", progress=False)
    assert server.total == 4
    assert all(not r.ok and "nests deeper than" in r.error for r in res.values())


def test_gives_up_after_max_tries_and_does_not_journal(tmp_path):
    with FakeServer(lambda body, seen: Reply(status=502)) as server:
        res = run_many(_cfg(server, max_tries=3), _reqs(2), tmp_path / "j.jsonl",
                       progress=False)
    assert server.total == 6
    assert all(not r.ok and "gave up after 3 tries" in r.error for r in res.values())
    journal = RequestJournal(tmp_path / "j.jsonl")
    assert journal.done == {}  # transient failures are retried on the next run
    journal.close()


def test_permanent_4xx_is_journalled_and_not_repeated(tmp_path):
    with FakeServer(lambda body, seen: Reply(status=400, text="context too long")) as server:
        res = run_many(_cfg(server), _reqs(2), tmp_path / "j.jsonl", progress=False)
        assert server.total == 2
        assert all(r.status_code == 400 and "context too long" in r.error for r in res.values())
        again = run_many(_cfg(server), _reqs(2), tmp_path / "j.jsonl", progress=False)
        assert server.total == 2
        assert all(r.from_journal for r in again.values())


def test_auth_error_aborts_the_run(tmp_path):
    with FakeServer(lambda body, seen: Reply(status=401)) as server:
        with pytest.raises(EndpointError, match="401"):
            run_many(_cfg(server), _reqs(5), tmp_path / "j.jsonl", progress=False)


def test_slow_reply_times_out_and_is_retried(tmp_path):
    def script(body, seen):
        return Reply(delay=2.0) if seen == 0 else Reply()

    with FakeServer(script) as server:
        res = run_many(_cfg(server, timeout_sec=0.3), _reqs(1), tmp_path / "j.jsonl",
                       progress=False)
    assert res["q0"].ok and res["q0"].tries == 2


def test_concurrency_never_exceeds_limit(tmp_path):
    with FakeServer(lambda body, seen: Reply(delay=0.05)) as server:
        res = run_many(_cfg(server, concurrency=3), _reqs(15), tmp_path / "j.jsonl",
                       progress=False)
    assert len(res) == 15 and all(r.ok for r in res.values())
    assert 1 <= server.max_in_flight <= 3


def test_missing_usage_is_estimated_and_flagged(tmp_path):
    with FakeServer(lambda body, seen: Reply(usage=None, contents=["x" * 40])) as server:
        res = run_many(_cfg(server), _reqs(1), tmp_path / "j.jsonl", progress=False)
    r = res["q0"]
    assert r.token_source == "estimated"
    assert r.completion_tokens == 10 and r.prompt_tokens > 0


def test_n_choices_are_kept_in_order(tmp_path):
    with FakeServer(lambda body, seen: Reply(contents=["a", "b", "c"])) as server:
        req = ChatRequest("k", [{"role": "user", "content": "hi"}], n=3)
        res = run_many(_cfg(server), [req], tmp_path / "j.jsonl", progress=False)
    assert [c.text for c in res["k"].choices] == ["a", "b", "c"]
    assert server.bodies[0]["n"] == 3


def test_interrupted_run_resumes_without_repeating_finished_requests(tmp_path):
    journal = tmp_path / "j.jsonl"
    reqs = _reqs(12)

    with FakeServer(lambda body, seen: Reply(delay=0.02)) as server:
        async def interrupted():
            task = asyncio.create_task(run_many_async(_cfg(server, concurrency=2), reqs, journal,
                                                      progress=False))
            while sum(server.succeeded.values()) < 5:
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupted())
        finished_first = RequestJournal(journal)
        done_keys = set(finished_first.done)
        finished_first.close()
        assert 5 - 2 <= len(done_keys) < 12  # at most 2 were in flight when cancelled
        # a request sent just before the cancellation may reach the server after it: let the server settle
        settled_at, last = time.monotonic(), server.total
        while server.in_flight or time.monotonic() - settled_at < 0.3:
            if server.total != last:
                settled_at, last = time.monotonic(), server.total
            time.sleep(0.01)
        seen_after_first = dict(server.seen)
        total_after_first = server.total

        res = run_many(_cfg(server, concurrency=2), reqs, journal, progress=False)
        assert len(res) == 12 and all(r.ok for r in res.values())
        ident = {r.key: identity({"messages": r.messages, "n": 1}) for r in reqs}
        for key in done_keys:  # answered from the journal, never sent again
            assert server.seen[ident[key]] == seen_after_first[ident[key]]
            assert res[key].from_journal
        # only the unfinished requests were sent again (one each: no errors scripted);
        # a request cut off in flight may have been answered once before the interruption
        assert server.total - total_after_first == 12 - len(done_keys)
        for key in set(ident) - done_keys:
            assert not res[key].from_journal
        # a third run sends nothing at all
        total = server.total
        run_many(_cfg(server), reqs, journal, progress=False)
        assert server.total == total


def test_torn_journal_line_is_ignored(tmp_path):
    journal = tmp_path / "j.jsonl"
    with FakeServer(lambda body, seen: Reply()) as server:
        run_many(_cfg(server), _reqs(2), journal, progress=False)
        with open(journal, "a") as fh:
            fh.write('{"key": "q1", "choi')  # killed mid-write
        res = run_many(_cfg(server), _reqs(3), journal, progress=False)
    assert server.total == 3
    assert res["q0"].from_journal and res["q1"].from_journal and not res["q2"].from_journal
    lines = [json.loads(x) for x in journal.read_text().splitlines()[:2]]
    assert {x["key"] for x in lines} == {"q0", "q1"}


def test_retry_after_header_is_honoured_as_lower_bound():
    import httpx

    assert parse_retry_after(httpx.Headers({"Retry-After": "7"})) == 7.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert parse_retry_after(httpx.Headers({})) is None
    client = ChatClient(ClientConfig(base_url="http://127.0.0.1:9", model="m",
                                     backoff_base_sec=0.001, backoff_max_sec=0.01),
                        rng=random.Random(0))
    assert client._backoff(0, 2.5) == 2.5
    assert 0 <= client._backoff(5, None) <= 0.01


def test_config_rejects_bad_values():
    from simulator.base.errors import ConfigError

    with pytest.raises(ConfigError):
        ClientConfig(base_url="localhost:8000", model="m")
    with pytest.raises(ConfigError):
        ClientConfig(base_url="http://x", model="m", concurrency=0)
    assert ClientConfig(base_url="http://x/v1/", model="m").url == "http://x/v1/chat/completions"

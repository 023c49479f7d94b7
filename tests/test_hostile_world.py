"""The hostile world itself, seen by a plain httpx client: each fault class does what it says; its bill and its record."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import httpx
import pytest

from executor.clock import Clock
from executor.hostile import FAULT_CLASSES, LIES, HostileWorld
from executor.inputs import load_dag
from simulator.base.errors import ConfigError
from tests.executor_helpers import ENV, POOL, ROOT
from tests.gateway_helpers import WorldThread

SCALE = 0.002
CLASSES = list(FAULT_CLASSES)
MSG = [{"role": "user", "content": "Step 1."}]
OVERSIZED = 8 << 20
TRICKLE_S = 0.003


def by_trial(dag, node, trial, attempt, model, n):
    """The targeted schedule: trial t is served class CLASSES[t] (other trials: the draw, 'ok')."""
    return CLASSES[trial] if trial < len(CLASSES) else None


@pytest.fixture(scope="module")
def pool():
    return load_dag(POOL, 0)[0]


@pytest.fixture(scope="module")
def hw(pool):
    world = HostileWorld(pool, schedule=by_trial, trickle_interval_s=TRICKLE_S, oversized_bytes=OVERSIZED, seed=1,
                         clock=Clock(SCALE))
    with WorldThread(world) as w:
        yield w


def post(w, cls: str, *, attempt: int = 0, timeout: float = 10.0, model: str = "30B_ins", **extra) -> httpx.Response:
    body = {"model": model, "messages": MSG, "max_tokens": 4000,
            "mcpp": {"dag": 0, "node": 1, "trial": CLASSES.index(cls), "attempt": attempt}, **extra}
    return httpx.post(f"{w.url}/chat/completions", json=body, timeout=timeout)


def drawn_tokens(w, cls: str, attempt: int = 0) -> int:
    return round(w.world.draw(0, 1, 2, CLASSES.index(cls), attempt)[2])


def last(w):
    return w.world.seen[-1]


def test_ok_answers_and_bills_the_draw(hw):
    r = post(hw, "ok")
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == drawn_tokens(hw, "ok")
    s = last(hw)
    assert (s.cls, s.dag, s.node, s.trial, s.attempt, s.model) == ("ok", 0, 1, CLASSES.index("ok"), 0, "30B_ins")
    assert s.billed_tokens == drawn_tokens(hw, "ok") == hw.world.bill_of(0, CLASSES.index("ok"))


def test_cut_body_is_billed_then_cut(hw):
    with pytest.raises(httpx.RemoteProtocolError):
        post(hw, "cut_body")
    assert last(hw).cls == "cut_body" and hw.world.bill_of(0, CLASSES.index("cut_body")) == drawn_tokens(hw, "cut_body")
    with httpx.Client() as c, c.stream("POST", f"{hw.url}/chat/completions", json={
            "model": "30B_ins", "messages": MSG, "mcpp": {"dag": 0, "node": 1, "trial": CLASSES.index("cut_body"),
                                                          "attempt": 1}}) as r:
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):
            for piece in r.iter_bytes():
                got += piece
        assert r.status_code == 200 and 0 < len(got) < int(r.headers["content-length"])
        assert got.startswith(b'{"id"')


def test_false_gzip_and_bad_text(hw):
    with pytest.raises(httpx.DecodingError):
        post(hw, "false_gzip")
    with httpx.Client() as c, c.stream("POST", f"{hw.url}/chat/completions", json={
            "model": "30B_ins", "messages": MSG, "mcpp": {"dag": 0, "node": 1, "trial": CLASSES.index("false_gzip"),
                                                          "attempt": 1}}) as r:
        raw = b"".join(r.iter_raw())
    assert r.headers["content-encoding"] == "gzip" and json.loads(raw)["choices"]  # plain JSON under a gzip label
    r = post(hw, "lone_surrogate")
    assert b"\\ud800" in r.content
    text = json.loads(r.content)["choices"][0]["message"]["content"]
    assert text[0] == "\ud800" and "LOOPBACK" in text
    with pytest.raises(UnicodeEncodeError):
        text.encode("utf-8")
    r = post(hw, "invalid_utf8")
    assert r.status_code == 200
    with pytest.raises(UnicodeDecodeError):
        r.content.decode("utf-8")
    assert {s.cls for s in hw.world.seen} >= {"false_gzip", "lone_surrogate", "invalid_utf8"}
    for cls in ("false_gzip", "lone_surrogate", "invalid_utf8"):
        assert hw.world.bill_of(0, CLASSES.index(cls)) > 0


def test_refusals_bill_nothing_and_say_why(hw):
    r = post(hw, "retry_after_huge")
    assert r.status_code == 429 and r.headers["retry-after"] == "100000" and r.json()["error"]["message"]
    a, b = post(hw, "bad_request"), post(hw, "bad_request")
    assert a.status_code == b.status_code == 400 and a.json() == b.json()
    assert "prompt too long" in a.json()["error"]["message"]
    r = post(hw, "quota_429")
    assert r.status_code == 429 and "retry-after" not in r.headers
    assert r.json() == {"error": {"message": "insufficient_quota", "type": "insufficient_quota", "param": None,
                                  "code": "insufficient_quota"}}
    r = post(hw, "litellm_budget_429")
    assert r.status_code == 429 and "retry-after" not in r.headers and "crossed budget" in r.json()["error"]["message"]
    r = post(hw, "bad_key_400")
    assert r.status_code == 400 and "No connected db." in r.json()["error"]["message"]
    r = post(hw, "unknown_model_400")
    assert r.status_code == 400 and "Invalid model name passed in model=30B_ins" in r.json()["error"]["message"]
    r = post(hw, "http_500")
    assert r.status_code == 500 and r.json()["error"]["message"]
    for cls in ("retry_after_huge", "bad_request", "quota_429", "litellm_budget_429", "bad_key_400",
                "unknown_model_400", "http_500"):
        assert hw.world.bill_of(0, CLASSES.index(cls)) == 0
        assert all(s.billed_tokens == 0 for s in hw.world.seen if s.cls == cls)


def test_trickle_is_fast_per_read_and_long_per_try(hw):
    t0 = time.monotonic()
    gaps, got, prev = [], b"", t0
    with httpx.Client(timeout=httpx.Timeout(0.5)) as c, c.stream("POST", f"{hw.url}/chat/completions", json={
            "model": "30B_ins", "messages": MSG,
            "mcpp": {"dag": 0, "node": 1, "trial": CLASSES.index("trickle"), "attempt": 0}}) as r:
        for piece in r.iter_raw():
            now = time.monotonic()
            gaps.append(now - prev)
            prev, got = now, got + piece
    whole = time.monotonic() - t0
    assert json.loads(got)["usage"]["completion_tokens"] == drawn_tokens(hw, "trickle")
    assert whole >= 0.8 * len(got) * TRICKLE_S and max(gaps[1:]) < 0.5  # a 0.5 s read timeout never fires
    assert len(gaps) > len(got) / 4  # it really came in small pieces


def test_oversized_streams_past_any_sane_answer_then_closes(hw):
    with httpx.Client() as c:
        with c.stream("POST", f"{hw.url}/chat/completions", json={
                "model": "30B_ins", "messages": MSG, "max_tokens": 50,
                "mcpp": {"dag": 0, "node": 1, "trial": CLASSES.index("oversized"), "attempt": 0}}) as r:
            n = 0
            with pytest.raises(httpx.RemoteProtocolError):
                for piece in r.iter_raw():
                    n += len(piece)
        # past any sane answer (the last piece may be lost with the close)
        assert n >= OVERSIZED - (1 << 20) and "content-length" not in r.headers
        with c.stream("POST", f"{hw.url}/chat/completions", json={  # a client that stops early
                "model": "30B_ins", "messages": MSG, "max_tokens": 50,
                "mcpp": {"dag": 0, "node": 1, "trial": CLASSES.index("oversized"), "attempt": 1}}) as r:
            n = 0
            for piece in r.iter_raw():
                n += len(piece)
                if n > 1 << 20:
                    break
    assert hw.world.bill_of(0, CLASSES.index("oversized")) == 100  # two requests, each billed at its cap
    assert post(hw, "ok", attempt=5).status_code == 200  # the world goes on


def test_lying_usage_lies_in_every_way_but_bills_the_truth(hw):
    kinds = Counter()
    for a in range(40):
        r = post(hw, "lying_usage", attempt=a)
        s = last(hw)
        assert r.status_code == 200 and s.cls == "lying_usage" and s.billed_tokens == drawn_tokens(hw, "lying_usage", a)
        u = r.json().get("usage")
        kinds[s.detail] += 1
        if s.detail == "missing":
            assert u is None
        elif s.detail == "negative":
            assert u["completion_tokens"] < 0
        elif s.detail == "huge":
            assert u["completion_tokens"] == 1e12
        elif s.detail == "string":
            assert isinstance(u["completion_tokens"], str)
        else:
            assert u["completion_tokens"] is True
    assert set(kinds) == set(LIES)
    assert hw.world.bill_of(0, CLASSES.index("lying_usage")) == sum(
        drawn_tokens(hw, "lying_usage", a) for a in range(40))


def test_catastrophic_regex_answer(hw):
    r = post(hw, "catastrophic_regex")
    assert r.json()["choices"][0]["message"]["content"] == "a" * 34 + "!"


def test_hang_and_reset_are_billed_without_an_answer(hw):
    with pytest.raises(httpx.ReadTimeout):
        post(hw, "hang", timeout=0.5)
    with pytest.raises(httpx.RemoteProtocolError):
        post(hw, "reset")
    assert hw.world.bill_of(0, CLASSES.index("hang")) == drawn_tokens(hw, "hang")
    assert hw.world.bill_of(0, CLASSES.index("reset")) == drawn_tokens(hw, "reset")


def test_record_and_bill_add_up(hw):
    post(hw, "ok", attempt=9)
    with pytest.raises(httpx.HTTPStatusError):
        httpx.post(f"{hw.url}/chat/completions", json={"model": "30B_ins", "messages": MSG}).raise_for_status()
    seen = hw.world.seen
    assert seen[-1].cls == "world_refused" and seen[-1].dag is None and seen[-1].status == 400
    billed = Counter()
    for s in seen:
        assert s.cls in FAULT_CLASSES or s.cls == "world_refused"
        billed[(s.dag, s.trial)] += s.billed_tokens
        assert (s.billed_tokens > 0) <= FAULT_CLASSES.get(s.cls, (False,))[0]
    assert {k: v for k, v in billed.items() if v} == {k: v for k, v in hw.world.bill.items() if v}
    rec = hw.world.record_dict()
    assert len(rec["seen"]) == len(seen) and sum(b["tokens"] for b in rec["bill"]) == sum(hw.world.bill.values())
    assert hw.world.bill_of(0, CLASSES.index("ok"), prices={"30B_ins": 2e6}) == 2 * hw.world.bill_of(
        0, CLASSES.index("ok"))


def test_keyed_mix_is_reproducible_and_the_schedule_comes_first(pool):
    mix = {"ok": 2, "http_500": 1, "reset": 1, "quota_429": 1}

    def served(schedule=None):
        world = HostileWorld(pool, classes=mix, schedule=schedule, seed=7, clock=Clock(SCALE))
        with WorldThread(world) as w, httpx.Client() as c:
            for trial in range(60):
                for _ in range(2):  # a retry of the same keys meets a fresh draw
                    try:
                        c.post(f"{w.url}/chat/completions", headers={
                            "X-MCPP-Dag": "0", "X-MCPP-Node": "2", "X-MCPP-Trial": str(trial), "X-MCPP-Attempt": "0"},
                            json={"model": "4B_ins", "messages": MSG})
                    except httpx.TransportError:
                        pass
            return [(s.trial, s.cls) for s in world.seen]

    a, b = served(), served()
    assert a == b and len(a) == 120
    counts = Counter(c for _, c in a)
    assert set(counts) == set(mix) and counts["ok"] > counts["http_500"]
    assert any(a[2 * t][1] != a[2 * t + 1][1] for t in range(60))
    c = served(["http_500", "bad_request"])
    assert [x[1] for x in c[:2]] == ["http_500", "bad_request"]
    assert c[2:] == a[2:]  # then the same draws
    with pytest.raises(ConfigError):
        HostileWorld(pool, classes=["ok", "no_such_class"])
    with pytest.raises(ConfigError):
        HostileWorld(pool, schedule=["ok", "nope"])


def _busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


def test_command_line(tmp_path):
    eps, rec = tmp_path / "endpoints.toml", tmp_path / "record.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "executor.hostile", "--pool", POOL, "--classes", "http_500:1,ok:1", "--schedule",
         "bad_key_400", "--time-scale", "0.002", "--write-endpoints", str(eps), "--record", str(rec),
         "--max-seconds", "60"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "hostile world on" in line, proc.stderr.read()
        url = line.split()[3]
        assert url in eps.read_text()
        statuses = [httpx.post(f"{url}/chat/completions", json={
            "model": "30B_ins", "messages": MSG, "mcpp": {"dag": 0, "node": 0, "trial": t, "attempt": 0}}).status_code
            for t in range(10)]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert statuses[0] == 400 and set(statuses[1:]) <= {200, 500} and len(set(statuses[1:])) == 2
    data = json.loads(rec.read_text())
    assert [s["cls"] for s in data["seen"]][0] == "bad_key_400" and len(data["seen"]) == 10
    assert sum(b["tokens"] for b in data["bill"]) == sum(s["billed_tokens"] for s in data["seen"]) > 0
    s, port = _busy_port()
    with s:
        r = subprocess.run([sys.executable, "-m", "executor.hostile", "--pool", POOL, "--port", str(port)],
                           cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(port) in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "executor.hostile", "--pool", POOL, "--classes", "ok,boom"],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "boom" in r.stderr, r.stderr

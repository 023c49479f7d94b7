"""A local stand-in for an OpenAI-compatible chat-completions server (tests only).

Listens on 127.0.0.1 with a random port in a background thread. A
``script(body, n_seen)`` callable decides each reply: it receives the request
body and how many times a request with the same identity (the last user
message plus ``n``) has been seen before, and returns a :class:`Reply`. The
server counts requests per identity, successful replies, and the peak number
of requests in flight, so tests can check retries, resumption and the
concurrency bound without timing assertions.

Scripts that only decide the answer text (or an HTTP error) wrap it with
:func:`text_replies`. A POST to any path other than ``.../chat/completions``
gets a 404 without reaching the script.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    contents: list[str] | None = None  # one per choice; default: "ok"
    usage: dict | None = field(default_factory=lambda: {"prompt_tokens": 11,
                                                        "completion_tokens": 7,
                                                        "total_tokens": 18})
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # the raw body (error replies; a 200 with it set answers it as is)


def text_replies(responder: Callable[[dict], str | tuple[int, str]]
                 ) -> Callable[[dict, int], Reply]:
    """A script from ``responder(body) -> text | (status, message)``.

    Every choice gets the same text; usage is reported like a real server's
    (10 prompt tokens, words of the answer + 1 completion tokens per choice),
    and ``(status, message)`` becomes that HTTP error with body
    ``{"error": message}``.
    """

    def script(body: dict, n_seen: int) -> Reply:
        out = responder(body)
        if isinstance(out, tuple):
            return Reply(status=out[0], text=json.dumps({"error": out[1]}))
        n = int(body.get("n", 1))
        ct = n * (len(out.split()) + 1)
        return Reply(contents=[out] * n, usage={"prompt_tokens": 10, "completion_tokens": ct,
                                                "total_tokens": 10 + ct})

    return script


def identity(body: dict) -> str:
    msgs = body.get("messages") or []
    last = next((m["content"] for m in reversed(msgs) if m.get("role") == "user"), "")
    return f"{last}|n={body.get('n', 1)}"


class FakeServer:
    def __init__(self, script: Callable[[dict, int], Reply]) -> None:
        self.script = script
        self.lock = threading.Lock()
        self.seen: Counter[str] = Counter()
        self.succeeded: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.auth_headers: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.total = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                ident = identity(body)
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    n_seen = server.seen[ident]
                    server.seen[ident] += 1
                    server.total += 1
                    server.bodies.append(body)
                    server.auth_headers.append(self.headers.get("Authorization"))
                try:
                    if self.path.endswith("/chat/completions"):
                        reply = server.script(body, n_seen)
                    else:
                        reply = Reply(status=404, text=json.dumps({"error": "not found"}))
                    if reply.delay:
                        time.sleep(reply.delay)
                    if reply.status == 200 and reply.text is None:
                        n = int(body.get("n", 1))
                        contents = reply.contents or ["ok"] * n
                        payload = {
                            "id": "chatcmpl-test", "object": "chat.completion",
                            "model": body.get("model"),
                            "choices": [{"index": i, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": c}}
                                        for i, c in enumerate(contents[:n])],
                        }
                        if reply.usage is not None:
                            payload["usage"] = reply.usage
                        data = json.dumps(payload).encode()
                    else:
                        data = (reply.text or json.dumps({"error": {"message": "scripted"}})
                                ).encode()
                    try:
                        self.send_response(reply.status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        for k, v in reply.headers.items():
                            self.send_header(k, v)
                        self.end_headers()
                        self.wfile.write(data)
                        if reply.status == 200:
                            with server.lock:
                                server.succeeded[ident] += 1
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the client gave up (timeout test)
                finally:
                    with server.lock:
                        server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

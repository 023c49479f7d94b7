"""A local HTTP server speaking the chat-completions protocol, for rollout tests.

``responder(body) -> str | (status, str)`` returns the assistant text (or an
HTTP error). Usage counts are reported (prompt 10 tokens, completion = words
of the answer + 1), like a real server's ``usage``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], "str | tuple[int, str]"]


class FakeChatServer:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.calls.append(body)
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": "not found"})
                    return
                out = outer.responder(body)
                if isinstance(out, tuple):
                    self._send(out[0], {"error": out[1]})
                    return
                n = int(body.get("n", 1))
                choices = [{"index": i, "message": {"role": "assistant", "content": out},
                            "finish_reason": "stop"} for i in range(n)]
                ct = n * (len(out.split()) + 1)
                self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                 "choices": choices,
                                 "usage": {"prompt_tokens": 10, "completion_tokens": ct,
                                           "total_tokens": 10 + ct}})

            def _send(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

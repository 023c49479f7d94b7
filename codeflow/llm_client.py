"""OpenAI-compatible chat-completions client with retries, bounded concurrency and a journal.

Works with any server speaking ``POST {base_url}/chat/completions`` (vLLM,
SGLang, hosted APIs). It knows nothing about prompts: callers hand it
:class:`ChatRequest` objects (a stable ``key``, the messages, ``n``) and get
:class:`ChatResult` objects back, so CodeFlow and ProofFlow rollouts share it.

Robustness:

* at most ``concurrency`` HTTP requests in flight (an asyncio semaphore,
  released while a request waits to be retried);
* transient failures (HTTP 408/409/425/429/500/502/503/504, timeouts,
  connection errors, malformed JSON) are retried up to ``max_tries`` times
  with exponential backoff and full jitter; a ``Retry-After`` header (seconds
  or HTTP date) is honoured as a lower bound on the wait;
* 401/403/404 abort the whole run with a readable :class:`EndpointError`
  (wrong key, model name or URL); other 4xx answers (e.g. a prompt longer
  than the context) are permanent failures of that request only;
* token counts come from the response's ``usage``; when a server sends none,
  counts are estimated (4 characters per token) and marked
  ``token_source: "estimated"``, with one warning;
* latency is the wall time of the successful HTTP exchange (retries and
  backoff excluded; ``total_wall_sec`` includes them).

Resumability: :class:`RequestJournal` appends one JSON line per finished
request (success or permanent 4xx failure) and is flushed and fsynced
after each line. A run started again with the same journal returns journalled
results without contacting the server, so an interrupted run never repeats a
finished request. Requests that failed transiently are not journalled and are
tried again on the next run. The API key is read from an environment variable
and is never written anywhere.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from simulator.base.errors import ConfigError, UserError
from simulator.base.io_utils import dumps_compact_strict, naming
from simulator.base.jsonread import refuse_deep_answer

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 403, 404})
CHARS_PER_TOKEN_ESTIMATE = 4.0


class EndpointError(UserError):
    """The endpoint rejects every request (bad key, model or URL): stop the run."""


@dataclass
class ClientConfig:
    """Where to send requests and how (sampling defaults follow the paper)."""

    base_url: str
    model: str  # the served model name sent in the request body
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = 0.6
    top_p: float | None = 0.95
    top_k: int | None = 20  # sent as an extra body field; None leaves it out
    max_tokens: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 8
    max_tries: int = 6
    backoff_base_sec: float = 1.0
    backoff_max_sec: float = 60.0
    retry_after_max_sec: float = 300.0
    timeout_sec: float = 600.0
    connect_timeout_sec: float = 10.0

    def __post_init__(self) -> None:
        if not self.base_url or not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base URL must start with http:// or https://: {self.base_url!r}")
        if not self.model:
            raise ConfigError("a served model name is required")
        if self.concurrency < 1:
            raise ConfigError("concurrency must be at least 1")
        if self.max_tries < 1:
            raise ConfigError("max_tries must be at least 1")

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def public(self) -> dict[str, Any]:
        """Settings worth recording next to results (no key, only its variable name)."""
        return {"endpoint": self.base_url, "served_model": self.model,
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "max_tokens": self.max_tokens, "extra_body": self.extra_body}


@dataclass
class ChatRequest:
    """One chat-completions call. ``key`` must be stable across runs (it is the journal key)."""

    key: str
    messages: list[dict[str, Any]]
    n: int = 1
    params: dict[str, Any] = field(default_factory=dict)  # per-request overrides of the body

    def body(self, config: ClientConfig) -> dict[str, Any]:
        body: dict[str, Any] = {"model": config.model, "messages": self.messages, "n": self.n}
        for name in ("temperature", "top_p", "top_k", "max_tokens"):
            value = getattr(config, name)
            if value is not None:
                body[name] = value
        body.update(config.extra_body)
        body.update(self.params)
        return body

    def sha(self, config: ClientConfig) -> str:
        text = json.dumps(self.body(config), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class ChatChoice:
    text: str
    finish_reason: str | None = None
    reasoning: str | None = None  # reasoning_content, when the server separates it


@dataclass
class ChatResult:
    """The outcome of one request; ``error`` is set when it failed for good."""

    key: str
    choices: list[ChatChoice]
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    token_source: str  # "usage" or "estimated"
    latency_sec: float | None
    total_wall_sec: float
    tries: int
    request_sha: str
    response_model: str | None = None
    error: str | None = None
    status_code: int | None = None
    from_journal: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("from_journal")
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ChatResult:
        d = dict(d)
        d["choices"] = [ChatChoice(**c) for c in d.get("choices") or []]
        d.pop("from_journal", None)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known}, from_journal=True)


class RequestJournal:
    """Append-only JSONL of finished requests, keyed by request key.

    A torn last line (the process was killed mid-write) is ignored on load.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.done: dict[str, ChatResult] = {}
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            with open(self.path, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        res = ChatResult.from_json(json.loads(line))
                    except (ValueError, TypeError, KeyError):
                        log.warning("%s line %d: unreadable journal entry skipped", self.path,
                                    lineno)
                        continue
                    self.done[res.key] = res
        self._fh = open(self.path, "a", encoding="utf-8")

    def get(self, key: str) -> ChatResult | None:
        return self.done.get(key)

    def append(self, result: ChatResult) -> None:
        line = dumps_compact_strict(result.to_json()) + "\n"
        with self._lock, naming(self.path):  # disk full: one line naming the journal (exit 3)
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.done[result.key] = result

    def close(self) -> None:
        with self._lock:
            self._fh.close()

    def __enter__(self) -> RequestJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds a server asked us to wait (``Retry-After``: seconds or an HTTP date), else ``None``.

    Public because the live executor honours the header by the same rule.
    """
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def estimate_tokens(text: str) -> int:
    """Token count estimated from the length of ``text`` (when a server reports no usage).

    Public because the live executor estimates unreported usage by the same rule.
    """
    return max(1, int(round(len(text) / CHARS_PER_TOKEN_ESTIMATE))) if text else 0


class ChatClient:
    """Async client; use :meth:`complete` per request or :meth:`run_many` for a batch."""

    def __init__(self, config: ClientConfig, *, rng: random.Random | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._rng = rng or random.Random()
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._sem: asyncio.Semaphore | None = None
        self._warned_estimate = False
        self.stats = {"requests": 0, "retries": 0, "failed": 0, "from_journal": 0}

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def __aenter__(self) -> ChatClient:
        timeout = httpx.Timeout(self.config.timeout_sec, connect=self.config.connect_timeout_sec)
        limits = httpx.Limits(max_connections=self.config.concurrency,
                              max_keepalive_connections=self.config.concurrency)
        self._http = httpx.AsyncClient(timeout=timeout, limits=limits, headers=self._headers(),
                                       transport=self._transport)
        self._sem = asyncio.Semaphore(self.config.concurrency)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = min(self.config.backoff_max_sec, self.config.backoff_base_sec * (2 ** attempt))
        wait = self._rng.uniform(0.0, cap)  # full jitter
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.config.retry_after_max_sec))
        return wait

    def _parse(self, req: ChatRequest, data: dict[str, Any], latency: float, wall: float,
               tries: int, sha: str) -> ChatResult:
        raw_choices = data.get("choices")
        if not isinstance(raw_choices, list) or not raw_choices:
            raise ValueError("response has no choices")
        choices = []
        for c in sorted(raw_choices, key=lambda c: c.get("index", 0)):
            msg = c.get("message") or {}
            choices.append(ChatChoice(
                text=msg.get("content") or "",
                finish_reason=c.get("finish_reason"),
                reasoning=msg.get("reasoning_content") or msg.get("reasoning"),
            ))
        usage = data.get("usage") or {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(pt, int) and isinstance(ct, int):
            tt = usage.get("total_tokens")
            source = "usage"
            total = tt if isinstance(tt, int) else pt + ct
        else:
            if not self._warned_estimate:
                log.warning("the endpoint returned no token usage; token counts are ESTIMATED "
                            "from text length and marked token_source='estimated'")
                self._warned_estimate = True
            source = "estimated"
            pt = estimate_tokens(json.dumps(req.messages, ensure_ascii=False))
            ct = sum(estimate_tokens(c.text + (c.reasoning or "")) for c in choices)
            total = pt + ct
        return ChatResult(key=req.key, choices=choices, prompt_tokens=pt, completion_tokens=ct,
                          total_tokens=total, token_source=source, latency_sec=latency,
                          total_wall_sec=wall, tries=tries, request_sha=sha,
                          response_model=data.get("model"))

    async def complete(self, req: ChatRequest) -> ChatResult:
        """Send one request with retries. Raises EndpointError on 401/403/404."""
        if self._http is None or self._sem is None:
            raise RuntimeError("use 'async with ChatClient(...)'")
        body = req.body(self.config)
        sha = req.sha(self.config)
        t_start = time.perf_counter()
        last_error = "no attempt made"
        status: int | None = None
        for attempt in range(self.config.max_tries):
            retry_after = None
            async with self._sem:
                self.stats["requests"] += 1
                t0 = time.perf_counter()
                try:
                    resp = await self._http.post(self.config.url, json=body)
                    latency = time.perf_counter() - t0
                    status = resp.status_code
                    if status == 200:
                        try:
                            refuse_deep_answer(resp.text)  # before a recursive parser sees it
                            return self._parse(req, resp.json(), latency,
                                               time.perf_counter() - t_start, attempt + 1, sha)
                        except (ValueError, TypeError, AttributeError) as exc:
                            last_error = f"malformed response: {exc}"
                    elif status in FATAL_STATUS:
                        raise EndpointError(
                            f"{self.config.url} answered HTTP {status} for model "
                            f"{self.config.model!r}: {resp.text[:300]} (check the URL, the "
                            f"served model name and ${self.config.api_key_env})")
                    elif status in RETRY_STATUS:
                        retry_after = parse_retry_after(resp.headers)
                        last_error = f"HTTP {status}: {resp.text[:200]}"
                    else:
                        self.stats["failed"] += 1
                        return ChatResult(req.key, [], None, None, None, "none", None,
                                          time.perf_counter() - t_start, attempt + 1, sha,
                                          error=f"HTTP {status}: {resp.text[:500]}",
                                          status_code=status)
                except (httpx.TimeoutException, httpx.TransportError) as exc:
                    status = None
                    last_error = f"{type(exc).__name__}: {exc}"
            if attempt + 1 < self.config.max_tries:
                self.stats["retries"] += 1
                await asyncio.sleep(self._backoff(attempt, retry_after))
        self.stats["failed"] += 1
        return ChatResult(req.key, [], None, None, None, "none", None,
                          time.perf_counter() - t_start, self.config.max_tries, sha,
                          error=f"gave up after {self.config.max_tries} tries: {last_error}",
                          status_code=status)


class JournaledRunner:
    """Runs requests through a client, answering finished ones from the journal.

    ``submit`` is safe to call from many coroutines at once; a shared tqdm
    bar counts finished requests. Results of permanent failures (4xx) are
    journalled, transient give-ups are not (they are retried next run).
    """

    def __init__(self, client: ChatClient, journal: RequestJournal, *, progress: bool = True,
                 total: int | None = None, desc: str = "requests") -> None:
        self.client = client
        self.journal = journal
        self._bar = None
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="req", disable=None)
        self._sha_warned = False

    async def submit(self, req: ChatRequest) -> ChatResult:
        done = self.journal.get(req.key)
        if done is not None:
            if done.request_sha != req.sha(self.client.config) and not self._sha_warned:
                log.warning("journal entry %s was produced for a different request body "
                            "(prompt or settings changed); reusing it. Use a new journal "
                            "to regenerate.", req.key)
                self._sha_warned = True
            self.client.stats["from_journal"] += 1
            if self._bar is not None:
                self._bar.update(1)
            return done
        res = await self.client.complete(req)
        if res.ok or (res.status_code is not None and 400 <= res.status_code < 500):
            self.journal.append(res)
        if self._bar is not None:
            self._bar.update(1)
        return res

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


async def run_many_async(config: ClientConfig, requests: Iterable[ChatRequest],
                         journal_path: str | os.PathLike, *, progress: bool = True,
                         transport: httpx.AsyncBaseTransport | None = None,
                         rng: random.Random | None = None) -> dict[str, ChatResult]:
    """Run a batch (resuming from ``journal_path``); returns results by key."""
    reqs = list(requests)
    keys = [r.key for r in reqs]
    if len(set(keys)) != len(keys):
        raise ConfigError("request keys must be unique")
    with RequestJournal(journal_path) as journal:
        async with ChatClient(config, transport=transport, rng=rng) as client:
            runner = JournaledRunner(client, journal, progress=progress, total=len(reqs))
            try:
                # A TaskGroup cancels the remaining requests if one raises (EndpointError).
                async with asyncio.TaskGroup() as tg:
                    tasks = [tg.create_task(runner.submit(r)) for r in reqs]
            except* EndpointError as group:
                raise group.exceptions[0] from None
            finally:
                runner.close()
    return {k: t.result() for k, t in zip(keys, tasks)}


def run_many(config: ClientConfig, requests: Iterable[ChatRequest],
             journal_path: str | os.PathLike, *, progress: bool = True) -> dict[str, ChatResult]:
    """Synchronous wrapper of :func:`run_many_async` for scripts."""
    return asyncio.run(run_many_async(config, requests, journal_path, progress=progress))

"""No secret in any output: the one function every text from a server passes before the trace, a log or stderr.

A server may echo what it was sent (``Incorrect API key provided: Bearer
sk-...``, a debugging proxy's dump of the request headers), and traces are
made to be shared. So every text that came from a server, and every trace
event as a last net, is passed through :func:`redact`, which replaces

* every **configured secret value** the process has read: the value of each
  endpoint's ``api_key_env`` and of each header taken from the environment
  (``headers = { name = { env = "NAME" } }``), by ``[redacted $NAME]``
  (the variable's name is no secret, and says which one leaked);
* anything shaped like a credential: ``Bearer <token>`` and ``sk-...``
  keys (OpenAI, LiteLLM virtual keys), by ``[redacted]``.

Values are registered (:func:`remember`) where they are read from the
environment (:mod:`executor.endpoints`), so a value is known before any
request can carry it. Redaction happens before any cut to a length, so no
prefix of a secret survives a truncation. Literal header values written in
the endpoints file are configuration, not secrets (put a secret in the
environment); values shorter than :data:`MIN_SECRET` characters are not
replaced (a 3-letter "key" would blank every word that holds it).
"""

from __future__ import annotations

import re
import threading
from typing import Any

#: configured values shorter than this are not redacted (they cannot be told from words)
MIN_SECRET = 6
#: credential shapes redacted whoever configured them
TOKEN_SHAPES = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=:-]{8,}|(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}")
REDACTED = "[redacted]"

_lock = threading.Lock()
_secrets: dict[str, str] = {}  # value -> its label ("$NAME")
_pattern: re.Pattern[str] | None = None


def remember(value: str | None, label: str) -> None:
    """Register a configured secret ``value`` (read from environment variable ``label``, e.g. ``$OPENAI_API_KEY``)."""
    global _pattern
    if not value or len(value) < MIN_SECRET:
        return
    with _lock:
        if _secrets.get(value) == label:
            return
        _secrets.setdefault(value, label)
        longest_first = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(v) for v in longest_first))


def needs_redaction(text: str) -> bool:
    """Might ``text`` hold a registered secret or a token shape? Substring tests only (a regex search of every
    trace line cost 10 times the line's serialization): the fast path of every trace event."""
    low = text.lower()
    return "bearer" in low or "sk-" in low or any(v in text for v in _secrets)


def redact(text: str) -> str:
    """``text`` without any registered secret value or credential-shaped token."""
    if not text or not needs_redaction(text):
        return text
    pat = _pattern
    if pat is not None:
        text = pat.sub(lambda m: f"[redacted {_secrets.get(m.group(0), '')}]".replace(" ]", "]"), text)
    return TOKEN_SHAPES.sub(_shape, text)


def _shape(m: re.Match[str]) -> str:
    word = m.group(0)
    return f"{word.split()[0]} {REDACTED}" if word[:6].lower() == "bearer" else REDACTED


def redact_all(obj: Any) -> Any:
    """``obj`` (a trace event's fields: strings, numbers, lists, dicts) with every string passed through :func:`redact`."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: redact_all(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_all(v) for v in obj]
    return obj


__all__ = ["MIN_SECRET", "REDACTED", "TOKEN_SHAPES", "needs_redaction", "redact", "redact_all", "remember"]

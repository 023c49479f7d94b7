"""The one reader of JSON the project did not write itself: strict, bounded, one line when refused.

Python's ``json`` module accepts what no other parser does and fails in ways
a user cannot act on: ``NaN`` and ``Infinity`` (not JSON), a number such as
``1e400`` read as infinity, an integer of 400 digits that overflows when a
field turns it into a float, a key given twice (the last one silently wins),
a byte order mark (``Unexpected UTF-8 BOM``), and a ``RecursionError``
traceback for a document nested a few thousand levels deep. Every reader of
an index file, price file, tasks file, trace, parameters file, dataset or
pool line goes through :func:`loads_strict` / :func:`load_json_file`, which
refuse each of these with one line (:class:`~simulator.base.errors.ConfigError`,
exit 2 under ``cli_entry``):

* nesting: deeper than the interpreter can parse (Python's recursion limit,
  1000 levels by default) -- "nested too deeply";
* size: a file larger than ``max_bytes`` (stated per reader);
* numbers: ``NaN`` / ``Infinity`` unless the reader says a field may hold
  them (``allow_nonfinite``: pools, whose fields are then checked one by one
  with the node named); a float beyond the float range; an integer beyond
  64 bits (no field of the project holds more);
* a key repeated in one object;
* a UTF-8 byte order mark, named as such; bytes that are not UTF-8.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .errors import ConfigError

try:  # the fast path of pool lines and records (the same values; see loads_strict)
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

#: the largest integer magnitude any field of the project holds (unsigned 64 bits: seeds, hashes)
INT_LIMIT = 2**64 - 1
_BOM = "\ufeff"


class JsonRefused(ValueError):
    """Why a JSON text was refused (``msg``) and on which line of the text (``lineno``, 1-based, if known)."""

    def __init__(self, msg: str, lineno: int | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.lineno = lineno


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise JsonRefused(f"the key {dup!r} is given twice in one object")
    return d


def _constant(allow: bool):
    def parse(name: str) -> float:
        if not allow:
            raise JsonRefused(f"{name} is not a JSON number (write a finite number)")
        return float(name.replace("Infinity", "inf"))

    return parse


def _float(text: str) -> float:
    x = float(text)
    if x in (float("inf"), float("-inf")):
        raise JsonRefused(f"the number {text[:40]}{'...' if len(text) > 40 else ''} is beyond the float range")
    return x


def _int(text: str) -> int:
    x = int(text)
    if len(text) > 18 and abs(x) > INT_LIMIT:
        shown = text if len(text) <= 30 else f"{text[:20]}... ({len(text)} digits)"
        raise JsonRefused(f"the integer {shown} is beyond 64 bits")
    return x


def loads_strict(raw: str | bytes, *, allow_nonfinite: bool = False, check_ints: bool = True) -> Any:
    """Parse one JSON document strictly (see the module docstring); raises :class:`JsonRefused`.

    ``check_ints=False`` leaves integers unbounded here (a hot reader whose
    fields bound every integer themselves: the pool loader).

    Fast path: orjson (strict about NaN, nesting and 64-bit integers) parses
    the text, and when the text is exactly orjson's own serialization of the
    result (what the project's writers produce) it is accepted: no key can
    have been dropped, so none was repeated. Anything else is parsed by the
    checking parser below, which decides (the result is the same value).
    """
    if _orjson is not None and isinstance(raw, (bytes, bytearray)) and raw[:1] == b"{":
        try:
            obj = _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
        else:
            if _orjson.dumps(obj) == raw.strip():
                return obj
    if isinstance(raw, (bytes, bytearray)):
        if raw[:3] == b"\xef\xbb\xbf":
            raise JsonRefused("starts with a UTF-8 byte order mark (BOM): save it as UTF-8 without a BOM", 1)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise JsonRefused(f"not UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})", line) from None
    else:
        text = raw
    if text.startswith(_BOM):
        raise JsonRefused("starts with a UTF-8 byte order mark (BOM): save it as UTF-8 without a BOM", 1)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_constant(allow_nonfinite),
                          parse_float=_float, parse_int=_int if check_ints else None)  # fmt: skip
    except JsonRefused as exc:
        raise exc from None
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", exc.lineno) from None
    except RecursionError:
        raise JsonRefused("nested too deeply (more levels of [ and { than the reader allows, about 1000)") from None


def loads_checked(raw: str | bytes, where: str, **kw) -> Any:
    """:func:`loads_strict`, refusing with a :class:`ConfigError` ``<where>: <why>``."""
    try:
        return loads_strict(raw, **kw)
    except JsonRefused as exc:
        raise ConfigError(f"{where}: {exc.msg}") from None


def load_json_file(path: str | os.PathLike, *, what: str = "file", max_bytes: int = 64 << 20, **kw) -> Any:
    """Read and parse a JSON file strictly; a missing, oversized or refused file is one :class:`ConfigError`
    line naming ``what`` and the path (``what``: how the user knows it, e.g. ``PRICE_FILE``, ``--tasks``)."""
    p = os.fspath(path)
    where = f"{what} {p!r}" if what != "file" else p
    try:
        size = os.path.getsize(p)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if os.path.isdir(p):
        raise ConfigError(f"{where}: is a directory, expected a JSON file")
    if size > max_bytes:
        raise ConfigError(f"{where}: {size} bytes, more than the {max_bytes} this reader accepts")
    with open(p, "rb") as fh:
        raw = fh.read(max_bytes + 1)
    return loads_checked(raw, where, **kw)


#: the deepest nesting a server's answer is parsed at (a chat completion nests about 6 deep). Python's parser
#: recurses, so a 30,000-deep array ran it to the interpreter's recursion limit, where anything else called
#: meanwhile (a finalizer, a collector's callback, pytest's unraisable hook) fails too: CI saw a RecursionError
#: that even the hook reporting it could not format. Deeper answers are refused before a parser sees them (the
#: live executor's client, the rollout generator's client).
MAX_ANSWER_DEPTH = 64
#: a JSON string, escapes included (unrolled: linear on any input)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS_ONLY = {c: None for c in range(128) if chr(c) not in "[]{}"}


def nesting_depth(text: str, limit: int = MAX_ANSWER_DEPTH) -> int:
    """How deep the text's arrays and objects nest outside its strings (counting stops past ``limit``),
    without recursion; a text that is not JSON gets some number, and its parse says the rest."""
    depth = deepest = 0
    for ch in _JSON_STRING.sub("", text).translate(_BRACKETS_ONLY):
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif ch in "]}":
            depth -= 1
    return deepest


def refuse_deep_answer(text: str) -> None:
    """ValueError when a server's answer nests deeper than :data:`MAX_ANSWER_DEPTH` (call before parsing it)."""
    if nesting_depth(text) > MAX_ANSWER_DEPTH:
        raise ValueError(f"the answer nests deeper than {MAX_ANSWER_DEPTH} levels")


__all__ = ["INT_LIMIT", "MAX_ANSWER_DEPTH", "JsonRefused", "load_json_file", "loads_checked", "loads_strict",
           "nesting_depth", "refuse_deep_answer"]

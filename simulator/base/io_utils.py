"""Atomic file writers: a temporary file in the same directory, then rename.

An interrupted run therefore never leaves a truncated pool, record file or
report behind: readers see either the old file or the complete new one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """Give ``path`` to an ``OSError`` raised without a file name (a ``write`` or ``fsync`` that ran out of disk),
    so that the one line the command prints (exit 3) names the file being written."""
    try:
        yield
    except OSError as exc:
        if exc.filename or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def atomic_write_bytes(path: str | os.PathLike, data: bytes, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (fsync, then rename).

    ``fsync=False``: rename without the fsync, for a file rewritten every few seconds whose loss in a power cut
    costs nothing (a heartbeat, a progress file): readers still see the old file or the whole new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        with naming(path):  # a write or fsync that ran out of disk names no file: name the one being written
            raise


def atomic_write_text(path: str | os.PathLike, text: str, fsync: bool = True) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"), fsync)


def dumps_compact(obj: Any) -> str:
    """One compact JSON line (the pool and record format); allows Infinity."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def dumps_compact_strict(obj: Any) -> str:
    """One compact JSON line that every parser reads: never ``Infinity``/``NaN``.

    The same text as :func:`dumps_compact` whenever every number is finite;
    otherwise (a dict) the non-finite values become ``null`` and a
    ``non_finite`` field says which (:func:`strict_json_object`), so nothing
    is lost and no reader meets a bare ``Infinity`` (traces, journals).
    """
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        if not isinstance(obj, dict):
            raise
        return json.dumps(strict_json_object(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2, fsync: bool = True,
                      strict: bool = False) -> None:  # fmt: skip
    """Write one JSON document atomically (pretty-printed by default); ``strict``: never ``Infinity``/``NaN``
    (non-finite values of a dict become ``null``, named in its ``non_finite`` field)."""
    if strict:
        try:
            text = json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)
        except ValueError:
            text = json.dumps(strict_json_object(obj), indent=indent, ensure_ascii=False, allow_nan=False)
    else:
        text = json.dumps(obj, indent=indent, ensure_ascii=False)
    atomic_write_text(path, text + "\n", fsync)


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Write one compact JSON object per line atomically; returns the row count."""
    lines = [dumps_compact(r) for r in rows]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def _finite_only(obj: Any, path: str, found: dict[str, str]) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        found[path] = "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
        return None
    if isinstance(obj, dict):
        return {k: _finite_only(v, f"{path}.{k}" if path else str(k), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_only(v, f"{path}[{i}]", found) for i, v in enumerate(obj)]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "shape", None) == ():  # numpy scalar
        return _finite_only(obj.item(), path, found)
    return obj


def strict_json_object(obj: dict) -> dict:
    """``obj`` with every non-finite float replaced by ``null``, and a ``non_finite`` field saying why.

    ``non_finite`` maps the path of each replaced value to ``"inf"``, ``"-inf"``
    or ``"nan"`` (e.g. ``{"deadline": "inf"}`` for a run without deadline), so
    the output is JSON every parser accepts (Python's ``json`` writes
    ``Infinity``/``NaN`` by default, which strict parsers refuse) and loses
    nothing.
    """
    found: dict[str, str] = {}
    out = _finite_only(dict(obj), "", found)
    out["non_finite"] = found
    return out


def dumps_strict(obj: dict, indent: int | None = None) -> str:
    """Strict JSON text of a dict (see :func:`strict_json_object`); never ``Infinity`` or ``NaN``."""
    return json.dumps(strict_json_object(obj), indent=indent, ensure_ascii=False, allow_nan=False)


try:  # orjson parses two to three times faster (the same values); it refuses NaN/Infinity, which json then reads
    import orjson

    def loads_fast(raw: str | bytes) -> Any:
        """``json.loads`` of one JSON document (a pool line, a record), faster; NaN/Infinity still read."""
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return json.loads(raw)

except ImportError:  # pragma: no cover
    loads_fast = json.loads

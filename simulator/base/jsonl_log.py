"""Reading an append-only JSON-lines log whose last line may have been cut mid-write.

An append-only log (an executor trace) written by a process that was killed
can end with a partial line. That line is the only one that may be damaged:
it is dropped and reported (``torn``), while any other line that is not a
JSON object is an error naming the file and the line. Used by the executor's
trace reader and by the pool builder that learns from traces, so both read a
cut trace the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from simulator.base.errors import ConfigError


def read_json_lines(path: str | os.PathLike, what: str = "log") -> tuple[list[dict[str, Any]], bool]:
    """(records, torn): the JSON objects of ``path`` up to its last complete line; ``torn``: a cut last line."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: {what} file not found")
    records, torn = [], False
    with open(p, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i >= len(lines) - 1:  # the last line, cut mid-write
                torn = True
                break
            raise ConfigError(f"{path}: line {i}: not a JSON event") from None
        if not isinstance(rec, dict):
            raise ConfigError(f"{path}: line {i}: not a {what} event")
        records.append(rec)
    return records, torn


def read_json_file(path: str | os.PathLike, what: str) -> Any:
    """The JSON document of a user's file (``what``: "tasks file", "workflow file"), refused in one line naming
    the file: missing, not UTF-8, not valid JSON (with the line)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: {what} not found")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: line {exc.lineno}: {what} is not valid JSON") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: {what} is not UTF-8 text") from None

"""Reading an append-only JSON-lines log whose last line may have been cut mid-write, and users' JSON files.

An append-only log (an executor trace) written by a process that was killed
can end with a partial line. That line is the only one that may be damaged:
it is dropped and reported (``torn``), while any other line that is not a
JSON object is an error naming the file and the line. Used by the executor's
trace reader and by the pool builder that learns from traces, so both read a
cut trace the same way. Every line is parsed by the project's strict reader
(:func:`simulator.base.jsonread.loads_strict`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.jsonread import JsonRefused, load_json_file, loads_strict


def read_json_lines(path: str | os.PathLike, what: str = "log",
                    events: Collection[str] | None = None) -> tuple[list[dict[str, Any]], bool]:
    """(records, torn): the JSON objects of ``path`` up to its last complete line; ``torn``: a cut last line.
    ``events``: the allowed values of each record's ``event`` (else "line N: not a <what> event")."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: {what} file not found")
    records, torn = [], False
    with open(p, "rb") as fh:
        lines = fh.read().split(b"\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = loads_strict(line)
        except JsonRefused as exc:
            if i >= len(lines) - 1 and exc.msg.startswith("not valid JSON"):  # the last line, cut mid-write
                torn = True
                break
            raise ConfigError(f"{path}: line {i}: not a JSON event ({exc.msg})") from None
        if not isinstance(rec, dict) or (events is not None and rec.get("event") not in events):
            raise ConfigError(f"{path}: line {i}: not a {what} event")
        records.append(rec)
    return records, torn


def read_json_file(path: str | os.PathLike, what: str) -> Any:
    """The JSON document of a user's file (``what``: "workflow file"), refused in one line naming the file:
    missing, too large, not valid JSON (:func:`simulator.base.jsonread.load_json_file`)."""
    if not Path(path).is_file():
        raise ConfigError(f"{path}: {what} not found")
    return load_json_file(path, what=what, max_bytes=256 << 20)

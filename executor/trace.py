"""The trace of a live run: one JSON event per line, nothing lost; and its summary.

Every event is written and flushed at once (a run killed with SIGKILL leaves
every event it reached in the file: the operating system holds flushed
bytes) and fsynced: by default a background thread of the trace fsyncs
after every write, so the event loop never waits for the disk (each event
is covered by an fsync started after it was written; a power cut can lose
only the last few milliseconds); ``fsync="inline"`` fsyncs inside
:meth:`Trace.write`. Events (``docs/executor.md``): ``run``, ``plan``,
``request``, ``verdict``, ``ledger``, ``end``.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.io_utils import dumps_compact

EVENTS = ("run", "plan", "request", "verdict", "ledger", "end")


class Trace:
    """Append-only JSONL trace (``path`` None: events are kept in memory only, as ``agree`` does)."""

    def __init__(self, path: str | os.PathLike | None, fsync: str = "background") -> None:
        self.path = Path(path) if path is not None else None
        self.events: list[dict[str, Any]] = []
        self._fh = None
        self._fsync = fsync
        self._dirty = threading.Event()
        self._closed = False
        self._thread = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", encoding="utf-8")
            if fsync == "background":
                self._thread = threading.Thread(target=self._syncer, name="trace-fsync", daemon=True)
                self._thread.start()

    def _syncer(self) -> None:
        while True:
            self._dirty.wait()
            self._dirty.clear()
            fh = self._fh
            if fh is None:
                return
            try:
                os.fsync(fh.fileno())
            except (OSError, ValueError):
                return
            if self._closed:
                return

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        rec = {"event": event, **fields}
        self.events.append(rec)
        if self._fh is not None:
            self._fh.write(dumps_compact(rec) + "\n")
            self._fh.flush()
            if self._fsync == "inline":
                os.fsync(self._fh.fileno())
            else:
                self._dirty.set()
        return rec

    def close(self) -> None:
        if self._fh is None:
            return
        self._closed = True
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._fh.close()
        self._fh = None


def read_trace(path: str | os.PathLike) -> tuple[list[dict[str, Any]], bool]:
    """(events, torn): the events of a trace up to its last complete line; ``torn``: a partial last line."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: trace file not found")
    events, torn = [], False
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
        if not isinstance(rec, dict) or rec.get("event") not in EVENTS:
            raise ConfigError(f"{path}: line {i}: not a trace event")
        events.append(rec)
    if not events or events[0]["event"] != "run":
        raise ConfigError(f"{path}: not an executor trace (no 'run' event first)")
    return events, torn


def summarize(events: list[dict[str, Any]], torn: bool = False) -> dict[str, Any]:
    """The summary of a complete or cut-off trace."""
    run = events[0]
    reqs = [e for e in events if e["event"] == "request"]
    verdicts = [e for e in events if e["event"] == "verdict"]
    ledgers = [e for e in events if e["event"] == "ledger"]
    plans = [e for e in events if e["event"] == "plan"]
    end = next((e for e in events if e["event"] == "end"), None)
    faults: Counter = Counter()
    for r in reqs:
        faults.update(r.get("faults") or {})
    completed = sorted({e["node"] for e in verdicts if e.get("node_completed")})
    out: dict[str, Any] = {
        "method": run.get("method"),
        "problem_id": run.get("problem_id"),
        "budget": run.get("budget"),
        "deadline_s": run.get("deadline_s"),
        "complete": end is not None,
        "torn_last_line": torn,
        "events": len(events),
        "plans": len(plans),
        "planner_ms": round(sum(p.get("planner_ms", 0.0) for p in plans), 3),
        "requests": len(reqs),
        "request_status": dict(Counter(r["status"] for r in reqs)),
        "retries": int(sum(r.get("retries", 0) for r in reqs)),
        "faults": dict(faults),
        "samples_passed": int(sum(1 for v in verdicts if v.get("passed"))),
        "nodes_completed": completed,
        "n_nodes": run.get("n_nodes"),
    }
    if end is not None:
        for k in ("success", "on_time", "makespan_s", "spent", "unbilled", "termination", "message"):
            out[k] = end.get(k)
    else:
        last = ledgers[-1] if ledgers else {"spent": 0.0, "reserved": 0.0}
        out.update(success=None, on_time=None, termination="cut_off (no end event)",
                   spent=last.get("spent"), reserved_at_cut=last.get("reserved"),
                   last_event_s=max((e.get("t", 0.0) or 0.0) for e in events))
    return out


def format_summary(s: dict[str, Any]) -> str:
    keys = ("method", "termination", "success", "on_time", "makespan_s", "spent", "unbilled", "budget",
            "deadline_s", "plans", "planner_ms", "requests", "retries", "faults", "request_status",
            "nodes_completed", "n_nodes", "complete", "events", "message")
    return "\n".join(f"{k:16s} {s[k]}" for k in keys if k in s and s[k] is not None)

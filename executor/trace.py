"""The trace of a live run: one JSON event per line, nothing lost; and its summary.

Every event is written and flushed at once (a run killed with SIGKILL leaves
every event it reached in the file: the operating system holds flushed
bytes) and fsynced: by default the process's one fsync thread fsyncs the
trace after every write, so the event loop never waits for the disk (each event
is covered by an fsync started after it was written; a power cut can lose
only the last few milliseconds); ``fsync="inline"`` fsyncs inside
:meth:`Trace.write`. Events (``docs/executor.md``): ``run``, ``plan``,
``request``, ``verdict``, ``ledger``, ``endpoint`` (a model out for the run), ``end``.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from executor.redact import needs_redaction, redact, redact_all
from simulator.base.errors import ConfigError
from simulator.base.io_utils import dumps_compact_strict, naming
from simulator.base.jsonl_log import read_json_lines

EVENTS = ("run", "plan", "request", "verdict", "ledger", "endpoint", "end")


class _Syncer:
    """One background thread fsyncing every trace of the process that has unsynced writes.

    One thread for all traces, not one per trace: with hundreds of runs in a
    process, hundreds of threads woken at every event would keep taking the
    interpreter lock from the event loop (measured: timers fired hundreds of
    milliseconds late).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirty: dict[int, Any] = {}
        self._closing: list[Any] = []  # files to fsync once more and close
        self._idle = threading.Event()
        self._idle.set()
        self._event = threading.Event()
        self._thread: threading.Thread | None = None

    def mark(self, fh) -> None:
        with self._lock:
            self._dirty[id(fh)] = fh
        self.mark_wakeup()

    def close_later(self, fh) -> None:
        """Fsync and close ``fh`` on the thread (its last events are flushed already)."""
        with self._lock:
            self._dirty.pop(id(fh), None)
            self._closing.append(fh)
            self._idle.clear()
        self.mark_wakeup()

    def mark_wakeup(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="trace-fsync", daemon=True)
                self._thread.start()
        self._event.set()

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until every trace handed to :meth:`close_later` is fsynced and closed."""
        self._idle.wait(timeout)

    def _run(self) -> None:
        while True:
            self._event.wait()
            self._event.clear()
            with self._lock:
                batch, self._dirty = list(self._dirty.values()), {}
                closing, self._closing = self._closing, []
            for fh in batch + closing:
                try:
                    os.fsync(fh.fileno())
                except (OSError, ValueError):  # closed meanwhile: close() fsynced it
                    pass
            for fh in closing:
                fh.close()
            with self._lock:
                if not self._closing:
                    self._idle.set()


_SYNCER = _Syncer()


class Trace:
    """Append-only JSONL trace (``path`` None: events are kept in memory only, as ``agree`` does)."""

    def __init__(self, path: str | os.PathLike | None, fsync: str = "background", trace_id: str | None = None,
                 ) -> None:
        if fsync not in ("background", "inline"):
            raise ValueError(f"fsync must be 'background' or 'inline', got {fsync!r}")
        self.path = Path(path) if path is not None else None
        #: the run's identity in its ``run`` event; None: a random one (a run on real endpoints is never repeated)
        self.trace_id = trace_id
        self.events: list[dict[str, Any]] = []
        self._fh = None
        self._fsync = fsync
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event; a line written to the file has every string redacted (:func:`executor.redact.redact_all`:
        the last net under the promise that no configured secret reaches an output; the server's words are redacted
        where they enter, :func:`executor.client.said`, so the in-memory events of a file-less trace are too)."""
        rec = {"event": event, **fields}
        if self._fh is not None:
            line = dumps_compact_strict(rec)
            if needs_redaction(line):  # rare: the common path is one substring test of the line
                rec = {"event": event, **redact_all(fields)}
                line = dumps_compact_strict(rec)
            with naming(self.path):  # disk full: one line naming the trace (exit 3)
                self._fh.write(line + "\n")
                self._fh.flush()
                if self._fsync == "inline":
                    os.fsync(self._fh.fileno())
                else:
                    _SYNCER.mark(self._fh)
        self.events.append(rec)
        return rec

    def close(self, wait: bool = True) -> None:
        """Flush, fsync and close (``wait=False``: the fsync thread fsyncs and closes; see :func:`drain`)."""
        if self._fh is None:
            return
        self._fh.flush()
        if wait:
            os.fsync(self._fh.fileno())
            with _SYNCER._lock:
                _SYNCER._dirty.pop(id(self._fh), None)
            self._fh.close()
        else:
            _SYNCER.close_later(self._fh)
        self._fh = None


def drain() -> None:
    """Wait for the fsync thread to finish the traces closed with ``wait=False``."""
    _SYNCER.drain()


def read_trace(path: str | os.PathLike) -> tuple[list[dict[str, Any]], bool]:
    """(events, torn): the events of a trace up to its last complete line; ``torn``: a partial last line."""
    events, torn = read_json_lines(path, "trace", EVENTS)
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
        "cost_mode": run.get("cost_mode"),
        "trace_complete": end is not None,
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
    out["models_down"] = {e["model"]: e.get("message") for e in events if e["event"] == "endpoint"}
    if end is not None:
        for k in ("success", "on_time", "makespan_s", "spent", "unbilled", "over_reservation", "termination",
                  "message"):
            out[k] = end.get(k)
        if end.get("slip"):  # the wall time passed the deadline by more than 0.5 s: why, in words
            out["deadline_slip"] = end["slip"].get("why")
    else:  # cut off: the money that may have been billed is what the last ledger held, all of it
        last = ledgers[-1] if ledgers else {"spent": 0.0, "reserved": 0.0, "unbilled": 0.0}
        spent, reserved, unbilled = (float(last.get(k) or 0.0) for k in ("spent", "reserved", "unbilled"))
        out.update(success=None, on_time=None, termination="cut_off (no end event)",
                   spent=spent, unbilled=unbilled, reserved_at_cut=reserved,
                   may_have_been_billed=spent + unbilled + reserved,
                   last_event_s=max((e.get("t", 0.0) or 0.0) for e in events))
    return out


def format_summary(s: dict[str, Any]) -> str:
    """The summary as a person reads it: MCPP by its name, every number with its unit (model seconds: the
    workflow's clock, which a time scale shrinks on the wall; wall-clock ms: the planner's own time)."""
    from simulator.costs.modes import cost_unit
    from simulator.methods import method_label

    unit = cost_unit(s["cost_mode"]) if s.get("cost_mode") else "budget units"
    shown = {
        "method": lambda v: method_label(v),
        "makespan_s": lambda v: f"{v:.2f} model seconds",
        "deadline_s": lambda v: f"{v:.4g} model seconds",
        "last_event_s": lambda v: f"{v:.2f} model seconds",
        "planner_ms": lambda v: f"{v:.0f} ms of wall-clock planning",
        **{k: (lambda v: f"{v:.10g} {unit}") for k in ("spent", "unbilled", "over_reservation", "reserved_at_cut",
                                                         "may_have_been_billed", "budget")},
    }
    keys = ("method", "termination", "success", "on_time", "makespan_s", "spent", "unbilled", "over_reservation",
            "reserved_at_cut", "may_have_been_billed", "budget", "deadline_s", "plans", "planner_ms", "requests",
            "retries", "faults", "request_status", "models_down", "nodes_completed", "n_nodes", "trace_complete",
            "events", "message", "deadline_slip")
    lines = []
    for k in keys:
        v = s.get(k)
        if v is None or v == "" or v == {} or (k == "over_reservation" and not v):
            continue
        text = shown[k](v) if k in shown and isinstance(v, (int, float, str)) and not isinstance(v, bool) else v
        lines.append(f"{k:21s} {text}")
    return redact("\n".join(lines))

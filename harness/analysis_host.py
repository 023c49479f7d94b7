"""The analysis in a process of its own, started while the last shards run (``local``).

Why: the analysis's libraries (pandas, pyarrow, matplotlib)
take one to two seconds of one core to import. ``local`` starts this host
when the first worker finds no shard left (a core is free from then on): the
host imports them there, in parallel with the last shards and with the
merge, which ``local`` runs in its own process meanwhile (an import thread
in ``local`` itself held the interpreter lock the merge needed). The host
then runs :func:`harness.analyze.analyze_run` on request: the same function
``analyze`` runs, so the tables, figures and report are the same files.

Protocol: one JSON line on stdin ``{"merged": ..., "out": ..., "formats":
[...]}``; the host answers one JSON line on its own stdout: ``{"ok": true,
"main_table_text": ..., "report_path": ..., "plots": [...], "timings":
{...}}``, or ``{"ok": false, "error": ...}`` when the analysis raised (the
caller then runs the analysis itself and raises the real error). At end of
input (``local`` ended without asking) the host ends. Started as ``python -m
harness.analysis_host`` in the tree's root (:func:`start`).

The caller's side is :class:`AnalysisHost`; it imports only the standard library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_lock = threading.Lock()
_hosts: list[AnalysisHost] = []


class AnalysisHost:
    """The caller's side: a host process importing the analysis's libraries, asked once."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.analysis_host"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip

    def analyze(self, merged: str, out: str, formats) -> dict | None:
        """The host's answer (``ok`` True or False), or None when the host is gone (the caller analyses itself).

        ``import_wait_s`` in the answer: how long the request waited for the host's imports.
        """
        import time

        asked = time.time()
        try:
            self.proc.stdin.write(json.dumps({"merged": merged, "out": out, "formats": list(formats)}) + "\n")
            self.proc.stdin.close()
            line = self.proc.stdout.readline()
        except (OSError, ValueError):
            line = ""
        finally:
            self.close()
        try:
            ans = json.loads(line) if line.strip() else None
        except ValueError:
            return None
        if ans is not None and "ready" in ans:
            ans["import_wait_s"] = round(max(0.0, ans.pop("ready") - asked), 3)
        return ans

    def close(self) -> None:
        """End the host (at end of input it ends by itself; a host stuck in its imports is killed)."""
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            self.proc.wait()


def start() -> None:
    """Start the host (once per process; ``local``'s ``on_idle``)."""
    with _lock:
        if _hosts:
            return
        try:
            _hosts.append(AnalysisHost())
        except OSError:  # no process to spare: the analysis runs in the caller, as before
            pass


def take() -> AnalysisHost | None:
    """The started host, handed over to the caller (None if none was started)."""
    with _lock:
        return _hosts.pop() if _hosts else None


def release() -> None:
    """End a host nobody asked (``local`` stopping early)."""
    host = take()
    if host is not None:
        host.close()


def _serve() -> None:  # pragma: no cover - runs in the host (tests drive it through `local`)
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for `local`; this process ends at end of input
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the analysis prints goes where the caller's errors go, never on the answer channel
    sys.stdout = sys.stderr
    from .prefetch import MODULES

    for name in MODULES:
        try:
            __import__(name)
        except Exception:
            pass
    from . import analyze, plots

    plots._mpl()
    import time
    ready = time.time()
    line = sys.stdin.readline()
    if not line.strip():
        return
    req = json.loads(line)
    try:
        res = analyze.analyze_run(req["merged"], req["out"], formats=tuple(req["formats"]))
        answer = {"ok": True, "main_table_text": res.main_table_text, "report_path": res.report_path,
                  "plots": res.plots, "timings": res.timings, "ready": ready}  # fmt: skip
    except BaseException as exc:
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    answers.write(json.dumps(answer) + "\n")
    answers.flush()


if __name__ == "__main__":  # pragma: no cover
    _serve()
    from .cli_util import exit_now

    exit_now(0)  # the caller waits for the answer, not for the teardown of pandas' and matplotlib's heap

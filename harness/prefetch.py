"""The analysis's libraries imported ahead (imports only the standard library).

pandas, pyarrow (the Parquet tables) and matplotlib take about a second of
one core to import.
``local`` imports :data:`MODULES` in the analysis's own process
(``harness/analysis_host.py``), started when a core frees up;
:func:`start_prefetch` imports them in a background thread of the calling
process instead, for a caller that analyses in its own process.
:func:`harness.analyze.analyze_run` waits for such a thread first
(:func:`join_prefetch`), so nothing is half imported when the figures'
worker processes fork. Importing changes no result.
"""

from __future__ import annotations

import threading

_threads: list[threading.Thread] = []
_lock = threading.Lock()

#: imported in this order; matplotlib last, with its non-interactive backend (harness.plots._mpl)
#: (scipy.special, for the paired table's exact test, is imported when that table is made: after the figures'
#: workers have forked, beside them, rather than before the analysis can start)
MODULES = ("pandas", "pyarrow", "pyarrow.parquet")


def _work() -> None:
    for name in MODULES:
        try:
            __import__(name)
        except Exception:  # pragma: no cover - the analysis imports it itself and reports what is wrong
            pass
    try:
        from .plots import _mpl

        _mpl()
    except Exception:  # pragma: no cover
        pass


def start_prefetch() -> None:
    """Start importing the analysis's libraries in a background thread (once)."""
    with _lock:
        if _threads:
            return
        t = threading.Thread(target=_work, name="analysis-imports", daemon=True)
        _threads.append(t)
    t.start()


def join_prefetch() -> None:
    """Wait for the imports started by :func:`start_prefetch` (nothing to wait for if none was started)."""
    with _lock:
        threads = list(_threads)
    for t in threads:
        t.join()

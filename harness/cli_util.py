"""Command-line glue: one readable message and a non-zero exit for user errors."""

from __future__ import annotations

from collections.abc import Callable

from simulator.base.errors import EXIT_USER_ERROR, cli_entry

__all__ = ["EXIT_USER_ERROR", "exit_now", "run_cli"]


def run_cli(fn: Callable[[], int | None]) -> int:
    """Run ``fn`` under the project's one rule for user errors (:func:`simulator.base.errors.cli_entry`)."""
    return cli_entry(fn)()


def exit_now(code: int) -> None:
    """End the process with ``code`` without the interpreter's teardown (measured: 0.4-2.5 s with numba,
    pandas and matplotlib loaded, most of it freeing the heap object by object at shutdown).

    Everything a command writes is written atomically and closed before this
    point, so only the teardown is skipped: the ``atexit`` callbacks still run
    (helpers stopped, logging flushed) and the standard streams are flushed.
    With a non-daemon thread still running, the interpreter's ordinary exit
    (which waits for it) is used instead.
    """
    import atexit
    import os
    import sys
    import threading

    main = threading.main_thread()
    if any(t is not main and t.is_alive() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say
            pass
    os._exit(code)

"""Command-line glue: one readable message and a non-zero exit for user errors."""

from __future__ import annotations

import sys
from collections.abc import Callable

from simulator.errors import UserError

EXIT_USER_ERROR = 2


def run_cli(fn: Callable[[], int | None]) -> int:
    """Run ``fn``; a :class:`UserError` becomes ``error: <message>`` on stderr and exit 2."""
    try:
        rc = fn()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)

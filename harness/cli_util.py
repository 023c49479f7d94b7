"""Command-line glue: one readable message and a non-zero exit for user errors."""

from __future__ import annotations

from collections.abc import Callable

from simulator.base.errors import EXIT_USER_ERROR, cli_entry

__all__ = ["EXIT_USER_ERROR", "run_cli"]


def run_cli(fn: Callable[[], int | None]) -> int:
    """Run ``fn`` under the project's one rule for user errors (:func:`simulator.base.errors.cli_entry`)."""
    return cli_entry(fn)()

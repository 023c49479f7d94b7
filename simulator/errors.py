"""Error types that carry a readable location (file, line, problem, node).

Every user-facing rejection in the project raises one of these so that the
command-line entry points can print a single clear message and exit non-zero
before any work starts.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable


class UserError(ValueError):
    """A problem with the user's input or configuration (not a bug)."""


class PoolError(UserError):
    """A DAG pool (or index file) that cannot be loaded, with its location."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        problem_id: object = None,
        node: object = None,
    ) -> None:
        self.path = path
        self.line = line
        self.problem_id = problem_id
        self.node = node
        self.reason = message
        parts = []
        if path is not None:
            parts.append(str(path))
        if line is not None:
            parts.append(f"line {line}")
        if problem_id is not None:
            parts.append(f"problem {problem_id!r}")
        if node is not None:
            parts.append(f"node {node!r}")
        where = ", ".join(parts)
        super().__init__(f"{where}: {message}" if where else message)


class ConfigError(UserError):
    """An impossible or inconsistent experiment setting."""


EXIT_USER_ERROR = 2


def cli_entry(main: Callable[..., int | None]) -> Callable[..., int]:
    """Decorate a command's ``main``: a :class:`UserError` becomes one line on stderr, exit 2.

    Every entry point of the project uses it, so users always get
    ``error: <file, line, problem, node>: <what>`` and never a traceback for
    bad input; Ctrl-C exits 130 with one line.
    """

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            rc = main(*args, **kwargs)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USER_ERROR
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        return int(rc or 0)

    return wrapper

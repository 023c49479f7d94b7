"""Error types that carry a readable location (file, line, problem, node).

Every user-facing rejection in the project raises one of these so that the
command-line entry points can print a single clear message and exit non-zero
before any work starts.
"""

from __future__ import annotations


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

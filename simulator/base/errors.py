"""Error types that carry a readable location (file, line, problem, node).

Every user-facing rejection in the project raises one of these so that the
command-line entry points can print a single clear message and exit non-zero
before any work starts.
"""

from __future__ import annotations

import contextvars
import errno
import functools
import os
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
EXIT_RESOURCE = 3
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE

#: errno values meaning "the machine ran out of something" (disk, quota, file size, file handles, memory):
#: not a bug and not bad input, so one line naming the file rather than a traceback.
RESOURCE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EMFILE", "ENFILE", "ENOMEM")
    if hasattr(errno, name)
)


def is_resource_error(exc: BaseException) -> bool:
    """Whether ``exc`` is resource exhaustion (disk full, quota, memory ...), see :data:`RESOURCE_ERRNOS`."""
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS)


def describe_resource_error(exc: BaseException) -> str:
    """One line for a resource error: ``<file>: No space left on device`` / ``out of memory``."""
    if isinstance(exc, MemoryError):
        return "out of memory (use fewer trials or workers, or a machine with more memory)"
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if getattr(exc, "filename", None) else what


#: errno values meaning "this file or folder may not be written (or read) here": a read-only results root,
#: run folder or file system. The user's setup, not a bug: one line naming the file, exit 2.
ACCESS_ERRNOS = frozenset(getattr(errno, name) for name in ("EACCES", "EPERM", "EROFS") if hasattr(errno, name))


def is_access_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a refused access (permission denied, read-only file system) to a named file."""
    return isinstance(exc, OSError) and exc.errno in ACCESS_ERRNOS and bool(getattr(exc, "filename", None))


def describe_access_error(exc: OSError) -> str:
    """One line for an access error: ``<file>: Permission denied (...)``."""
    return (f"{exc.filename}: {exc.strerror or exc} (a read-only folder or file? give a writable one, "
            "e.g. another RESULTS_ROOT or --out)")  # fmt: skip


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the flush at interpreter exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in tests)
        pass


#: True while a command runs under :func:`cli_entry` (whose one line a :class:`UserError` becomes); a parser
#: refusing outside it (a maintainer's tool that parses first) prints the line and exits 2 itself
IN_CLI_ENTRY: contextvars.ContextVar[bool] = contextvars.ContextVar("in_cli_entry", default=False)


def cli_entry(main: Callable[..., int | None]) -> Callable[..., int]:
    """Decorate a command's ``main``: a :class:`UserError` becomes one line on stderr, exit 2.

    Every entry point of the project uses it, so users always get
    ``error: <file, line, problem, node>: <what>`` and never a traceback for
    bad input; resource exhaustion (disk full, quota, out of memory) is one
    line naming the file, exit 3; a file or folder that may not be written
    (permission denied, read-only file system) is one line naming it, exit
    2; Ctrl-C exits 130 with one line; a reader
    that closes the pipe early (``... | head -1``) ends the command quietly
    with exit 141, as a tool killed by SIGPIPE would. Other exceptions are
    bugs and keep their traceback.
    """

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        token = IN_CLI_ENTRY.set(True)
        try:
            rc = main(*args, **kwargs)
            # Piped output is block-buffered: flush here so a closed pipe is seen now,
            # not as an "Exception ignored" message during interpreter shutdown.
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USER_ERROR
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except (OSError, MemoryError) as exc:
            if is_access_error(exc):
                print(f"error: {describe_access_error(exc)}", file=sys.stderr)
                return EXIT_USER_ERROR
            if not is_resource_error(exc):
                raise
            print(f"error: {describe_resource_error(exc)}", file=sys.stderr)
            return EXIT_RESOURCE
        finally:
            IN_CLI_ENTRY.reset(token)
        return int(rc or 0)

    return wrapper

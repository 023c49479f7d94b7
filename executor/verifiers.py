"""Verdicts with a bound: nothing a verifier does can block the event loop or outlive its run.

* **Regexes** are compiled with the ``regex`` package at load and matched
  with its ``timeout``: on the event loop for at most 20 ms, then (a slow
  match) on a judge thread for the rest of the verifier's bound (the
  standard ``re`` holds the interpreter lock for as long as it backtracks,
  so a catastrophic pattern would freeze every run of the process).
* **Commands** run in a process group of their own (a new session) in a
  fresh temporary directory with an empty environment and limits: address
  space, CPU seconds, processes (``RLIMIT_NPROC``; as root, whom that limit
  does not bind, the command runs as ``nobody``), file size; their output is
  discarded. The whole group is killed at the command's timeout, when the
  run's deadline cancels the verdict, after the command exits (its
  background children die with it), and at interpreter exit.
* **Other kinds** (the CodeFlow sandbox, Lean) run on a judge thread, raced
  against the time left; a late verdict is abandoned.

Whatever a verifier raises becomes a failed verdict whose reason starts with
``verifier_error``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import resource
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from executor.offload import JUDGES

COMMAND_MEMORY_BYTES = 512 * 1024 * 1024
COMMAND_MAX_PROCESSES = 64
COMMAND_MAX_FILE_BYTES = 16 * 1024 * 1024
NOBODY = 65534
#: the longest a regex may run on the event loop before it moves to a judge thread (a thread hop costs
#: milliseconds under load: most matches take microseconds)
INLINE_REGEX_S = 0.02
#: process groups of running verifier commands (killed at interpreter exit)
_GROUPS: set[int] = set()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@atexit.register
def kill_all() -> None:
    """Kill the process group of every verifier command still running."""
    for pgid in list(_GROUPS):
        _kill_group(pgid)


def _child_setup(cpu_s: int, drop_to_nobody: bool) -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (COMMAND_MEMORY_BYTES, COMMAND_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_NPROC, (COMMAND_MAX_PROCESSES, COMMAND_MAX_PROCESSES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (COMMAND_MAX_FILE_BYTES, COMMAND_MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if drop_to_nobody:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


async def run_command(argv: Sequence[str], answer: str, timeout_s: float) -> tuple[bool, str]:
    """A generic verifier command: the answer on stdin; passes when it exits 0 within ``timeout_s``."""
    if timeout_s <= 0:
        return False, "verifier_error: no time left for the verifier"
    drop = os.geteuid() == 0
    tmp = tempfile.mkdtemp(prefix="executor_verify_")
    proc = None
    try:
        if drop:
            os.chown(tmp, NOBODY, NOBODY)
        cpu = max(1, int(timeout_s) + 1)
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, cwd=tmp, env={"PATH": "/usr/bin:/bin", "HOME": tmp},
            start_new_session=True, preexec_fn=lambda: _child_setup(cpu, drop))  # noqa: PLW1509
        _GROUPS.add(proc.pid)
        try:
            await asyncio.wait_for(proc.communicate(answer.encode("utf-8", "replace")), timeout_s)
        except TimeoutError:
            return False, f"verifier_error: command timed out after {timeout_s:.3g} s"
        except (BrokenPipeError, ConnectionResetError):  # it exited without reading the answer
            await proc.wait()
        return proc.returncode == 0, f"verifier exit status {proc.returncode}"
    except OSError as exc:
        return False, f"verifier_error: command could not start: {exc}"
    finally:
        if proc is not None:
            _kill_group(proc.pid)  # the group (background children included) never outlives the verdict
            _GROUPS.discard(proc.pid)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.shield(proc.wait())
        shutil.rmtree(tmp, ignore_errors=True)


def _search(pattern: Any, text: str, timeout_s: float) -> bool:
    return pattern.search(text, timeout=timeout_s, concurrent=True) is not None


async def judge(task: Any, answer: str, parent_answers: Mapping[int, str], time_left_s: float) -> tuple[bool, str]:
    """(passed, reason) of one answer, within ``time_left_s`` wall seconds whatever the verifier does."""
    bound = max(0.0, min(task.timeout_s, time_left_s))
    try:
        if task.kind == "generic" and task.regex is not None:
            try:  # almost every match takes microseconds: on the loop, cut at INLINE_REGEX_S
                ok = _search(task.regex, answer or "", min(INLINE_REGEX_S, max(bound, 1e-3)))
            except TimeoutError:  # a slow match: the rest of its bound on a judge thread
                try:
                    ok = await asyncio.wait_for(JUDGES.run(_search, task.regex, answer or "", max(bound, 1e-3)),
                                                bound + 0.5)
                except TimeoutError:
                    return False, f"verifier_error: regex timed out after {bound:.3g} s"
            return ok, "regex matched" if ok else "regex did not match"
        if task.kind == "generic":
            return await run_command(task.command or [], answer, bound)
        try:
            return await asyncio.wait_for(JUDGES.run(task.judge, answer, parent_answers), max(time_left_s, 1e-3))
        except TimeoutError:
            return False, f"verifier_error: no verdict within the {time_left_s:.3g} s left"
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 (any verifier failure is a failed verdict, never a crash)
        return False, f"verifier_error: {type(exc).__name__}: {exc}"[:200]

"""Verdicts with a bound: nothing a verifier does can block the event loop or outlive its run.

* **Regexes** are compiled with the ``regex`` package at load and matched
  with its ``timeout``: on the event loop for at most 20 ms, then (a slow
  match) on a judge thread for the rest of the verifier's bound (the
  standard ``re`` holds the interpreter lock for as long as it backtracks,
  so a catastrophic pattern would freeze every run of the process).
* **Commands** run under a reaper of their own (:mod:`executor.reaper`: a
  child subreaper in a new session), in a fresh temporary directory with an
  empty environment and limits: address space, CPU seconds, processes
  (``RLIMIT_NPROC``; as root, whom that limit does not bind, the command runs
  as ``nobody``), file size; their output is discarded. Every descendant of
  the command (whatever it does: ``setsid``, a double fork) is killed at the
  command's timeout, when the run's deadline cancels the verdict, after the
  command exits (its background children die with it), at interpreter exit
  and if this process dies; the reaper's process group is killed after it.
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
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from executor.offload import JUDGES
from executor.reaper import NOBODY, alive, become_reaper, load_libc

#: the reaper script every verifier command runs under
REAPER = str(Path(__file__).with_name("reaper.py"))
load_libc()  # now, in the executor: its forked children set their reaper flags without importing anything

#: the longest a regex may run on the event loop before it moves to a judge thread (a thread hop costs
#: milliseconds under load: most matches take microseconds)
INLINE_REGEX_S = 0.02
#: how long a verifier's reaper gets to end every descendant after SIGTERM before its group is killed
REAPER_GRACE_S = 2.0
#: running verifier commands' reapers (pid -> process group), ended at interpreter exit
_REAPERS: dict[int, int] = {}


def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@atexit.register
def kill_all() -> None:
    """End every verifier command still running: its reaper ends all its descendants (then its group dies)."""
    for pid in list(_REAPERS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    t_end = time.monotonic() + REAPER_GRACE_S
    for pid, pgid in list(_REAPERS.items()):
        while time.monotonic() < t_end and alive(pid):
            time.sleep(0.01)
        _kill_group(pgid)


async def run_command(argv: Sequence[str], answer: str, timeout_s: float) -> tuple[bool, str]:
    """A generic verifier command: the answer on stdin; passes when it exits 0 within ``timeout_s``.

    It runs under its own reaper (:mod:`executor.reaper`, a child subreaper
    in a session of its own), which ends every descendant of the command,
    whatever it does (``setsid``, double fork), when the command exits, at
    SIGTERM (its timeout, the deadline's cancellation, interpreter exit) and
    when this process dies.
    """
    if timeout_s <= 0:
        return False, "verifier_error: no time left for the verifier"
    if not argv:
        return False, "verifier_error: an empty command"
    drop = os.geteuid() == 0
    tmp = tempfile.mkdtemp(prefix="executor_verify_")
    proc = None
    try:
        if drop:
            os.chown(tmp, NOBODY, NOBODY)
        cpu = max(1, int(timeout_s) + 1)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", REAPER, str(os.getpid()), str(cpu), "1" if drop else "0", "0", "--", *argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, cwd=tmp, env={"PATH": "/usr/bin:/bin", "HOME": tmp},
            start_new_session=True, preexec_fn=become_reaper)  # noqa: PLW1509
        _REAPERS[proc.pid] = proc.pid
        try:
            await asyncio.wait_for(proc.communicate(answer.encode("utf-8", "replace")), timeout_s)
        except TimeoutError:
            return False, f"verifier_error: command timed out after {timeout_s:.3g} s"
        except (BrokenPipeError, ConnectionResetError):  # it exited without reading the answer
            await proc.wait()
        if proc.returncode == 127:
            return False, f"verifier_error: command could not start: {argv[0]!r}"
        return proc.returncode == 0, f"verifier exit status {proc.returncode}"
    except OSError as exc:
        return False, f"verifier_error: command could not start: {exc}"
    finally:
        if proc is not None:
            if proc.returncode is None:  # the reaper ends the command and every descendant, then exits
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                # the verdict (and the deadline) does not wait for it: its group is killed once it is done
                task = asyncio.ensure_future(_after_reaper(proc))
                _CLEANUPS.add(task)
                task.add_done_callback(_CLEANUPS.discard)
            else:
                _kill_group(proc.pid)  # the group never outlives the verdict (the fallback without a subreaper)
                _REAPERS.pop(proc.pid, None)
        shutil.rmtree(tmp, ignore_errors=True)


#: reapers told to end, waited for in the background
_CLEANUPS: set[asyncio.Task] = set()


async def _after_reaper(proc: asyncio.subprocess.Process) -> None:
    """Wait (at most :data:`REAPER_GRACE_S`) for a reaper told to end, then kill its process group. Cancelled
    with its event loop, it leaves the reaper to finish alone (it has SIGTERM, and its parent's death sends it
    another) and to :func:`kill_all` at exit."""
    try:
        await asyncio.wait_for(proc.wait(), REAPER_GRACE_S)
    except TimeoutError:
        pass
    except asyncio.CancelledError:
        return
    _kill_group(proc.pid)
    _REAPERS.pop(proc.pid, None)


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

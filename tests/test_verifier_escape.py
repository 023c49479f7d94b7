"""Verifier commands cannot leave anything behind: every descendant ends, whatever it does (issue 41, item 5).

The command runs the answer as code (``python3 -c "exec(stdin)"``, as a
verifier that executes a model's program does). The answer double-forks and
calls ``setsid()``, so its grandchild leaves the process group the old code
killed: 5 processes were alive after such a run. Each test names its
processes by a token in their command line and finds none alive after the
verdict: when the command exits, at its timeout, and when the run's deadline
cancels the verdict; each with the PID namespace (as root) and with the
subreaper alone.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from types import SimpleNamespace

import pytest

from executor import reaper, verifiers
from executor.reaper import alive


@pytest.fixture(autouse=True, params=["pid_namespace", "subreaper_only"])
def containment(request, monkeypatch):
    """Both ways a command is contained: as root a PID namespace whose init is the command (plus the
    subreaper), and the subreaper alone (not root, or a container that refuses the namespace)."""
    if request.param == "subreaper_only":
        monkeypatch.setattr(reaper, "USE_PID_NAMESPACE", False)
    return request.param

ESCAPE = """
import os, time
for _ in range(2):
    if os.fork() == 0:          # double fork, then a session of its own: out of the process group
        os.setsid()
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        time.sleep(120)
        os._exit(0)
{tail}
"""


def _alive_with(token: str) -> list[int]:
    """Processes (not zombies) whose command line holds ``token``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if token.encode() in cmd and alive(name):
            out.append(int(name))
    return out


def _settled(token: str, limit_s: float = 3.0) -> list[int]:
    t0 = time.monotonic()
    while (alive := _alive_with(token)) and time.monotonic() - t0 < limit_s:
        time.sleep(0.05)
    return alive


#: the verify command is a user's command run with the executor's minimal PATH (/usr/bin:/bin), as the issue's
#: ``python3 -c "exec(stdin)"`` was: the system's python3, not the interpreter running the tests
VERIFIER_PYTHON = "python3"


def _argv(token: str) -> list[str]:
    return [VERIFIER_PYTHON, "-c", "import sys; exec(sys.stdin.read())", token]


def _spawned(token: str) -> bool:
    return len(_alive_with(token)) >= 3


def test_a_double_forking_setsid_answer_leaves_nothing_after_the_command_exits():
    token = "mcpp-escape-" + secrets.token_hex(6)
    answer = ESCAPE.format(tail="time.sleep(0.5)\nraise SystemExit(0)")
    ok, why = asyncio.run(verifiers.run_command(_argv(token), answer, 20.0))
    assert ok, why
    assert _settled(token) == []


def test_the_timeout_ends_every_descendant():
    token = "mcpp-escape-" + secrets.token_hex(6)
    answer = ESCAPE.format(tail="time.sleep(120)")
    ok, why = asyncio.run(verifiers.run_command(_argv(token), answer, 1.5))
    assert not ok and "timed out" in why
    assert _settled(token) == []


def test_the_deadline_cancelling_the_verdict_ends_every_descendant():
    token = "mcpp-escape-" + secrets.token_hex(6)
    task = SimpleNamespace(kind="generic", regex=None, command=_argv(token), timeout_s=60.0)

    async def go():
        judge = asyncio.ensure_future(verifiers.judge(task, ESCAPE.format(tail="time.sleep(120)"), {}, 60.0))
        t0 = time.monotonic()
        while not _spawned(token) and time.monotonic() - t0 < 20:
            await asyncio.sleep(0.05)
        assert _spawned(token)
        judge.cancel()
        try:
            await judge
        except asyncio.CancelledError:
            pass

    asyncio.run(go())
    assert _settled(token) == []


def test_interpreter_exit_ends_every_descendant(tmp_path):
    """The executor's process exits with a verdict running: its atexit hook (or, killed, PDEATHSIG) ends all."""
    import subprocess
    import sys

    token = "mcpp-escape-" + secrets.token_hex(6)
    code = f"""
import asyncio, time
from executor import verifiers
from executor.reaper import alive
async def go():
    t = asyncio.ensure_future(verifiers.run_command({_argv(token)!r}, {ESCAPE.format(tail="time.sleep(120)")!r}, 60))
    await asyncio.sleep(3)
asyncio.run(go())
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], cwd=root, timeout=60, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert _settled(token) == []


def test_a_killed_executor_leaves_nothing_behind():
    """SIGKILL to the executor (no atexit): the reaper's PDEATHSIG ends the command and its descendants."""
    import signal
    import subprocess
    import sys

    token = "mcpp-escape-" + secrets.token_hex(6)
    code = f"""
import asyncio
from executor import verifiers
from executor.reaper import alive
asyncio.run(verifiers.run_command({_argv(token)!r}, {ESCAPE.format(tail="time.sleep(120)")!r}, 60))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.Popen([sys.executable, "-c", code], cwd=root)
    try:
        t0 = time.monotonic()
        while not _spawned(token) and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        assert _spawned(token)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert _settled(token) == []

"""Run untrusted Python against input/output tests in a separate, limited process.

Generated code is untrusted, so it never runs in the calling process. Every
run gets a fresh ``python -I`` process with:

* resource limits set by ``prlimit`` before the program starts: address space
  (RLIMIT_AS, default 2 GiB), CPU seconds (RLIMIT_CPU, the wall budget of the
  remaining tests), file size (RLIMIT_FSIZE, 16 MiB), no core files, a process
  cap;
* a scrubbed environment (PATH, HOME, LANG, thread-count variables and the
  OpenBLAS core-type settings; nothing else, so no API keys or tokens);
* a per-test wall-clock timeout (default 5 s) enforced from outside: when a
  test overruns, the whole process group is killed, the test is recorded as
  ``timeout`` and a new process continues with the next test;
* stdin/stdout/stderr of the user code pointed at /dev/null; events come
  back on a private copy of stdout, one JSON line per event, each line capped.

The child never sees a test's expected output and never decides a verdict:
it reports what the function returned (a JSON value tree, its repr and str,
each size-bounded; see ``sandbox_runner.py``). The parent checks that events
arrive in order (``loaded``, then ``start i`` / ``result i`` for each test in
turn, then ``done``; anything else ends the run as a protocol error charged
to the running test) and compares the value with the expected output itself
(``compare.py``). A program that writes forged lines to every descriptor it
inherited, patches the runner or exits early can therefore only fail its
tests or report a value, which is judged like any other.

Isolation has two modes, chosen by :func:`detect_isolation`:

``namespace`` (Linux, root, ``unshare``/``setpriv`` present; used on this
machine): the process runs in new network, mount and PID namespaces. The
network namespace has no interfaces up, so every connection fails (also to
127.0.0.1 of the host). Fresh private tmpfs are mounted on /tmp, /var/tmp,
/dev/shm and /run/lock, /root and /home are hidden behind empty tmpfs (the
Python installation is bound back read-only if it lives there), the root file
system is remounted read-only, and the program runs as user ``nobody``
without capabilities (``no_new_privs``) in ``/tmp/work`` of the private tmpfs.
It sees only its own processes in /proc.

``process`` (fallback anywhere else): same limits and environment, a fresh
temporary working directory, and in-process audit hooks that refuse network
sockets, process creation and writes outside the working directory. Audit
hooks are best effort (code using ctypes can get around them), which is why
the namespace mode is preferred whenever it works.

What is not protected: the expected outputs are in the dataset file, which
lies in the project tree and is readable from inside the sandbox (both
modes); a model that deliberately cheats by reading it could return correct
values without computing them. In ``process`` mode the child also runs as the
parent's user, so it could in principle read the parent's memory.
"""

from __future__ import annotations

import functools
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from codeflow.compare import judge
from simulator.base.errors import ConfigError

RUNNER_SOURCE = (Path(__file__).resolve().parent / "sandbox_runner.py").read_text(
    encoding="utf-8"
)
HIDDEN_DIRS = ("/root", "/home")
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
PASS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# Runs as root inside the new namespaces, then drops to nobody and execs "$@".
_NAMESPACE_SCRIPT = r"""
set -eu
for d in $SANDBOX_TMPFS; do
  if [ -d "$d" ]; then mount -t tmpfs -o size=64m,mode=1777,nosuid,nodev tmpfs "$d"; fi
done
mkdir /tmp/.expose
i=0
for d in $SANDBOX_EXPOSE; do
  mkdir "/tmp/.expose/$i"; mount --bind "$d" "/tmp/.expose/$i"; i=$((i+1))
done
for h in $SANDBOX_HIDE; do
  if [ -d "$h" ]; then mount -t tmpfs -o size=1m,mode=755,nosuid,nodev tmpfs "$h"; fi
done
i=0
for d in $SANDBOX_EXPOSE; do
  mkdir -p "$d"; mount --bind "/tmp/.expose/$i" "$d"
  mount -o remount,bind,ro "$d"; umount "/tmp/.expose/$i"; rmdir "/tmp/.expose/$i"
  i=$((i+1))
done
rmdir /tmp/.expose
mount -o remount,bind,ro /
mkdir -m 0700 /tmp/work
chown 65534:65534 /tmp/work
cd /tmp/work
unset SANDBOX_TMPFS SANDBOX_EXPOSE SANDBOX_HIDE
exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
  --bounding-set=-all --no-new-privs "$@"
"""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. ``isolation`` is ``auto``, ``namespace`` or ``process``."""

    test_timeout_sec: float = 5.0
    load_timeout_sec: float = 20.0
    memory_mb: int = 2048
    file_size_mb: int = 16
    max_processes: int = 256
    max_line_bytes: int = 256 * 1024
    isolation: str = "auto"


@dataclass
class TestOutcome:
    index: int
    status: str  # pass, wrong_answer, runtime_error, timeout, memory, blocked, crashed, ...
    detail: str | None = None
    got: str | None = None


@dataclass
class SandboxRun:
    """What happened to one program: load verdict, per-test outcomes, timing."""

    load_ok: bool
    load_reason: str | None
    load_detail: str | None
    outcomes: list[TestOutcome]
    wall_sec: float
    isolation: str
    processes: int = 0
    notes: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=1)
def detect_isolation() -> str:
    """``namespace`` when new net/mount/pid namespaces work here, else ``process``."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "process"
    if not (shutil.which("unshare") and shutil.which("setpriv") and shutil.which("mount")):
        return "process"
    try:
        cp = subprocess.run(
            ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc",
             "--propagation", "private", "sh", "-c",
             "mount -t tmpfs tmpfs /tmp && mount -o remount,bind,ro / && "
             "setpriv --reuid=65534 --regid=65534 --clear-groups true"],
            capture_output=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "process"
    return "namespace" if cp.returncode == 0 else "process"


def resolve_isolation(requested: str) -> str:
    if requested not in ("auto", "namespace", "process"):
        raise ConfigError(f"isolation must be auto, namespace or process, not {requested!r}")
    found = detect_isolation()
    if requested == "auto":
        return found
    if requested == "namespace" and found != "namespace":
        raise ConfigError("namespace isolation is not available here (needs Linux, root, "
                          "unshare and setpriv); use isolation 'process' or 'auto'")
    return requested


def _clean_env(home: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": "/tmp" if home == "/tmp/work" else home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }
    for key in PASS_ENV:  # CPU-specific correctness settings of this machine, not secrets
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _python_dirs_to_expose() -> list[str]:
    """Directories of the running Python that sit under a hidden directory."""
    out: list[str] = []
    for p in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
              os.path.dirname(os.path.realpath(sys.executable))}:
        if any(p == h or p.startswith(h + "/") for h in HIDDEN_DIRS) and p not in out:
            out.append(p)
    # A nested path would be re-hidden by its parent's bind; keep only outermost ones.
    out.sort()
    return [p for i, p in enumerate(out) if not any(p.startswith(q + "/") for q in out[:i])]


def _limits_prefix(limits: SandboxLimits, cpu_sec: int) -> list[str]:
    mem = int(limits.memory_mb) * 1024 * 1024
    fsize = int(limits.file_size_mb) * 1024 * 1024
    return ["prlimit", f"--as={mem}", f"--cpu={cpu_sec}:{cpu_sec + 1}", f"--fsize={fsize}",
            "--core=0", f"--nproc={limits.max_processes}", "--nofile=256", "--"]


def _preexec_limits(limits: SandboxLimits, cpu_sec: int):
    import resource

    def apply() -> None:
        mem = int(limits.memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_sec, cpu_sec + 1))
        fsize = int(limits.file_size_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _signal_name(rc: int | None) -> str:
    if rc is None:
        return "unknown exit"
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


def _run_once(job: dict, limits: SandboxLimits, isolation: str, n_remaining: int
              ) -> tuple[list[dict], str, int | None, int | None, str]:
    """Start one child for ``job``; returns (events, end, returncode, running_test, workdir).

    ``end`` is ``done``, ``eof`` (the child exited early), ``load_timeout``,
    ``test_timeout`` or ``protocol`` (an oversized, garbled or out-of-order
    event line). Only events in protocol order are returned: ``loaded`` once,
    then ``start i`` and ``result i`` for i = start, start+1, ... and ``done``
    after the last test.
    """
    cpu_sec = int(math.ceil(limits.load_timeout_sec + limits.test_timeout_sec * n_remaining)) + 1
    python = os.path.realpath(sys.executable)
    child_cmd = [python, "-I", "-c", RUNNER_SOURCE]
    tmpdir = None
    preexec = None
    if isolation == "namespace":
        cwd = "/"
        env = _clean_env("/tmp/work")
        env["SANDBOX_TMPFS"] = " ".join(PRIVATE_TMPFS)
        env["SANDBOX_HIDE"] = " ".join(HIDDEN_DIRS)
        env["SANDBOX_EXPOSE"] = " ".join(_python_dirs_to_expose())
        workdir = "/tmp/work"
        cmd = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child",
               "--mount-proc", "--propagation", "private", "sh", "-c", _NAMESPACE_SCRIPT, "sandbox", *child_cmd]
    else:
        tmpdir = tempfile.mkdtemp(prefix="codeflow-sandbox-")
        cwd = tmpdir
        workdir = os.path.realpath(tmpdir)
        env = _clean_env(tmpdir)
        cmd = child_cmd
        job = dict(job, guard=True)
    if shutil.which("prlimit"):
        cmd = _limits_prefix(limits, cpu_sec) + cmd
    else:
        preexec = _preexec_limits(limits, cpu_sec)
    events: list[dict] = []
    running: int | None = None
    end = "eof"
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=cwd, env=env,
                                start_new_session=True, preexec_fn=preexec)
        try:
            try:
                proc.stdin.write(json.dumps(job).encode("utf-8"))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            fd = proc.stdout.fileno()
            buf = b""
            deadline = time.monotonic() + limits.load_timeout_sec
            loaded = False
            seen_loaded = False
            next_test = int(job["start"])
            n_tests = len(job["inputs"])
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    end = "test_timeout" if loaded else "load_timeout"
                    _kill(proc)
                    break
                if not sel.select(remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    end = "eof"
                    break
                buf += chunk
                stop = False
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        ev = json.loads(line)
                        kind = ev["ev"]
                    except (ValueError, KeyError, TypeError):
                        end, stop = "protocol", True
                        break
                    index = ev.get("i") if isinstance(ev, dict) else None
                    if kind == "loaded" and not seen_loaded:
                        seen_loaded = True
                        loaded = ev.get("ok") is True
                        if not loaded:
                            events.append(ev)
                            end, stop = "done", True
                            break
                        deadline = time.monotonic() + limits.test_timeout_sec
                    elif (kind == "start" and loaded and running is None
                          and index == next_test and next_test < n_tests):
                        running = next_test
                        deadline = time.monotonic() + limits.test_timeout_sec
                    elif kind == "result" and running is not None and index == running:
                        running = None
                        next_test += 1
                        deadline = time.monotonic() + limits.test_timeout_sec
                    elif kind == "done" and loaded and running is None and next_test == n_tests:
                        end, stop = "done", True
                        break
                    else:
                        end, stop = "protocol", True
                        break
                    events.append(ev)
                if stop:
                    break
                if len(buf) > limits.max_line_bytes:
                    end = "protocol"
                    break
            sel.close()
        finally:
            _kill(proc)
            proc.stdout.close()
            rc = proc.wait()
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return events, end, rc, running, workdir


CHILD_FAILURES = ("runtime_error", "memory", "blocked", "bad_test")

#: ``judge(event, expected, workdir, cache) -> (status, detail, got)`` of one returned test.
Judge = Callable[[dict, str, str, dict], tuple[str, "str | None", "str | None"]]


def _outcome(i: int, event: dict, expected: str, workdir: str, cache: dict,
             judge_fn: Judge = judge) -> TestOutcome:
    """The verdict of one test, decided here from what the child reported."""
    status = event.get("status")
    detail = event.get("detail")
    detail = str(detail)[:1000] if detail is not None else None
    if status == "returned":
        verdict, why, got = judge_fn(event, expected, workdir, cache)
        return TestOutcome(i, verdict, why, got)
    if status in CHILD_FAILURES:  # a failure the program reports about itself
        return TestOutcome(i, status, detail)
    return TestOutcome(i, "crashed", f"unknown event status {str(status)[:40]!r}")


def run_tests(segments: list[dict], func_name: str, tests: list[dict],
              limits: SandboxLimits | None = None, *, judge_fn: Judge = judge,
              job_options: dict | None = None) -> SandboxRun:
    """Load ``segments`` (``{name, kind, code}``; kind ``prelude``, ``dependency`` or
    ``solution``) into one module and call ``func_name`` on every test
    (``{input, output}``). A test that hangs or kills the process is charged
    alone: a fresh process continues with the following test.

    ``judge_fn`` decides a returned test (default: the CodeFlowBench-Repo rule
    of ``compare.py``); ``job_options`` are extra job keys for the child
    (``capture``, ``print_result``, ``stdin``: see ``sandbox_runner.py``)."""
    limits = limits or SandboxLimits()
    isolation = resolve_isolation(limits.isolation)
    t0 = time.perf_counter()
    outcomes: dict[int, TestOutcome] = {}
    start = 0
    processes = 0
    notes: list[str] = []
    inputs = [t["input"] for t in tests]  # the expected outputs stay in this process
    max_line = max(1024, int(limits.max_line_bytes) - 1024)
    cache: dict = {}
    while True:
        job = {**(job_options or {}), "segments": segments, "func_name": func_name,
               "inputs": inputs, "start": start, "max_line": max_line}
        events, end, rc, running, workdir = _run_once(job, limits, isolation, len(tests) - start)
        processes += 1
        loaded = next((e for e in events if e["ev"] == "loaded"), None)
        if loaded is None or not loaded.get("ok"):
            if loaded is not None:
                reason = str(loaded.get("reason") or "load_error")[:40]
                detail = loaded.get("detail")
                detail = str(detail)[:1000] if detail is not None else None
            elif end == "load_timeout":
                reason, detail = "load_timeout", (
                    f"loading the code took more than {limits.load_timeout_sec:g} s")
            else:
                reason, detail = "crashed", f"process ended while loading ({_signal_name(rc)})"
            for i in range(start, len(tests)):
                outcomes[i] = TestOutcome(i, reason, detail)
            if start == 0:
                return SandboxRun(False, reason, detail, [outcomes[i] for i in range(len(tests))],
                                  time.perf_counter() - t0, isolation, processes, notes)
            break
        for e in events:
            if e["ev"] == "result":
                i = int(e["i"])
                outcomes[i] = _outcome(i, e, tests[i]["output"], workdir, cache, judge_fn)
        if end == "done":
            break
        if running is None:
            # Ended between tests (protocol error or an exit outside a test call).
            running = next((i for i in range(start, len(tests)) if i not in outcomes), None)
            if running is None:
                break
        if end == "test_timeout":
            outcomes[running] = TestOutcome(
                running, "timeout", f"no result within {limits.test_timeout_sec:g} s")
        elif rc is not None and rc < 0 and -rc == signal.SIGXCPU:
            outcomes[running] = TestOutcome(running, "timeout", "CPU time limit exceeded")
        elif end == "protocol":
            outcomes[running] = TestOutcome(running, "crashed",
                                            "garbled, out-of-order or oversized event")
        else:
            outcomes[running] = TestOutcome(
                running, "crashed", f"process died during the test ({_signal_name(rc)})")
        start = running + 1
        if start >= len(tests):
            break
    ordered = [outcomes.get(i) or TestOutcome(i, "crashed", "no verdict") for i in range(len(tests))]
    return SandboxRun(True, None, None, ordered, time.perf_counter() - t0, isolation, processes,
                      notes)

"""The parent of one verifier command: it outlives every descendant of the command and ends them all.

Run as ``python -I -S reaper.py PARENT_PID CPU_S DROP PRCTL -- ARGV...`` by
:func:`executor.verifiers.run_command` (a standalone script: it imports
nothing of the project, so it starts in milliseconds). ``PRCTL`` 1: it sets
its own ``prctl`` flags (importing ``ctypes``, about 0.1 s on a loaded
machine); 0: the executor set them before ``exec`` (:func:`become_reaper`,
with the ``ctypes`` it has loaded already; both flags survive ``exec``), and
as root also gave it a PID namespace for its children, whose init is the
command: when the command ends, the kernel ends everything left in it. Why a process of its
own: a command that double-forks and calls ``setsid()`` leaves its process
group, so killing the group misses it; its orphans are re-parented to the
nearest *child subreaper* above them, and this process is one
(``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+). Whatever they do, every
descendant stays its child or grandchild, and it kills them all (SIGKILL, in
rounds until none is left):

* when the command exits (its background children die with it);
* on SIGTERM or SIGINT (the executor's timeout, its deadline, its exit);
* when the executor dies (``PR_SET_PDEATHSIG``: SIGTERM to this process).

It exits with the command's status (128 + signal when killed by one). The
command runs with the limits it is given (address space, CPU seconds,
processes, file size; as root, as ``nobody``, so it cannot signal this
process). Fallback where ``prctl`` is missing (not Linux): only the process
group is killed, and a command that leaves it escapes; where the command
runs as the executor's own user, it could kill this process first and its
orphans would then escape to init.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
MEMORY_BYTES = 512 * 1024 * 1024
MAX_PROCESSES = 64
MAX_FILE_BYTES = 16 * 1024 * 1024
NOBODY = 65534


CLONE_NEWPID = 0x20000000
#: as root, also make the command the init of a PID namespace of its own (``become_reaper``)
USE_PID_NAMESPACE = True
_LIBC: dict[str, object] = {}


def load_libc() -> dict[str, object]:
    """libc's ``prctl`` and ``unshare`` (absent where there are none), looked up once: the executor does it at
    import, so the forked child that becomes a reaper only calls them (no import between ``fork`` and ``exec``)."""
    if not _LIBC:
        _LIBC["loaded"] = True
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            for name in ("prctl", "unshare"):
                if hasattr(libc, name):
                    _LIBC[name] = getattr(libc, name)
        except (OSError, ImportError):
            pass
    return _LIBC


def _prctl(option: int, value: int) -> bool:
    fn = load_libc().get("prctl")
    return fn is not None and fn(option, value, 0, 0, 0) == 0


def become_reaper() -> None:
    """In the reaper's process before ``exec`` (a ``preexec_fn``): SIGTERM when its parent dies, a child
    subreaper (both kept across ``exec``) and, as root, a new PID namespace for its children: the command it
    forks is that namespace's init, and when the command ends the kernel kills every process left in it
    (where it is refused, e.g. in a container without ``CAP_SYS_ADMIN``, the subreaper alone does it)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    unshare = load_libc().get("unshare")
    if USE_PID_NAMESPACE and unshare is not None and os.geteuid() == 0:
        unshare(CLONE_NEWPID)


def _children(pid: int) -> list[int]:
    """The live children of ``pid`` (from /proc; every descendant left is re-parented to us as it is orphaned)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            return _children_by_scan(pid)
    return out


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def alive(pid: int | str) -> bool:
    """Is process ``pid`` running (not gone, not a zombie waiting to be reaped)?"""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != b"Z"


def _children_by_scan(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields and len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(name))
    return out


def kill_descendants() -> None:
    """SIGKILL every descendant, round after round (a killed process's children come to us), and reap them."""
    me = os.getpid()
    for _ in range(10000):
        kids = _children(me)
        if not kids:
            break
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(block=True)
    _reap(block=False)


def _reap(block: bool) -> None:
    deadline = time.monotonic() + 0.5
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not block or time.monotonic() > deadline:
                return
            time.sleep(0.002)


def _which(name: str) -> str:
    """The program's path, found on PATH now (after dropping to ``nobody`` the interpreter's own lazy imports
    may be unreadable, so nothing is left to look up then)."""
    if "/" in name:
        return name
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return name


def _child(prog: str, argv: list[str], cpu_s: int, drop: bool) -> None:  # in the command's process, before exec
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if drop:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        os.execve(prog, argv, os.environ)
    except BaseException as exc:  # noqa: BLE001 (report and leave: never return into the reaper's code)
        os.write(2, f"reaper: cannot run {argv[0]!r}: {exc}\n".encode())
    os._exit(127)


class _Stop(Exception):
    """SIGTERM or SIGINT: end the command and every descendant now."""


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def main(args: list[str]) -> int:
    parent, cpu_s, drop, own_prctl = int(args[0]), int(args[1]), args[2] == "1", args[3] == "1"
    argv = args[args.index("--") + 1:]
    if not argv:
        return 127
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    status, pid = None, 0
    try:
        if own_prctl:
            become_reaper()
        if os.getppid() != parent:  # the executor died before its death signal was set
            return 128 + signal.SIGTERM
        prog = _which(argv[0])
        pid = os.fork()
        if pid == 0:
            _child(prog, argv, cpu_s, drop)
        os.close(0)  # the answer's pipe is the command's alone: its end of input is the executor's
        while status is None:
            got, st = os.waitpid(pid, 0)
            if got == pid:
                status = st
    except (_Stop, ChildProcessError):
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if status is None and pid > 0:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        kill_descendants()
    if status is None:
        return 128 + signal.SIGTERM
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

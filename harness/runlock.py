"""The run folder's lock: a run being computed cannot be re-prepared under it.

Every process that computes a run (``local``, ``surface``, ``shard N`` /
``task``, ``auto``) holds a shared lock on ``<run>/.lock`` for its whole life
(:func:`hold`); any number of them may hold it at once (several workers, SLURM
tasks on a shared file system). ``prepare --force``, which moves the run's
files into ``archive/``, first takes the lock exclusively without waiting
(:func:`exclusive`): while any other process holds it the command refuses in
one line naming that process, so an old ``local`` can no longer finish into
the folder of a new configuration.

POSIX record locks (``fcntl.lockf``) are used: the kernel releases them when
the process ends however it ends (SIGKILL included), so a dead run never
leaves a lock behind; they work over NFS; and the holder's pid can be asked
(``F_GETLK``) to name it. A process holds one open file per run folder and
keeps it open (closing any descriptor of the file would drop the lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import sys
from collections.abc import Iterator

from simulator.base.errors import ConfigError

LOCK_NAME = ".lock"
_HELD: dict[str, int] = {}  # run folder -> the descriptor this process holds its lock by


def lock_path(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), LOCK_NAME)


def _open(run_dir: str) -> int:
    key = os.path.abspath(run_dir)
    if key not in _HELD:
        os.makedirs(key, exist_ok=True)
        _HELD[key] = os.open(lock_path(key), os.O_RDWR | os.O_CREAT, 0o666)
    return _HELD[key]


def holder_pid(run_dir: str) -> int | None:
    """The pid of a process (other than this one) holding the run's lock, None if none (or unknown)."""
    path = lock_path(run_dir)
    if not os.path.exists(path):
        return None
    fd = _HELD.get(os.path.abspath(run_dir))
    own = fd is None
    if own:
        fd = os.open(path, os.O_RDWR)
    try:
        if sys.platform.startswith("linux"):  # struct flock: short, short, off_t, off_t, pid_t (x86-64, arm64)
            fmt = "hhxxxxqqixxxx"
            query = struct.pack(fmt, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            l_type, _, _, _, pid = struct.unpack(fmt, fcntl.fcntl(fd, fcntl.F_GETLK, query))
            return pid if l_type != fcntl.F_UNLCK and pid > 0 else None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return -1  # held, by a process we cannot name here
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        if own:
            os.close(fd)


def hold(run_dir: str) -> None:
    """Hold the run's lock shared until this process ends (waits for a ``prepare --force`` in progress)."""
    fcntl.lockf(_open(run_dir), fcntl.LOCK_SH)


@contextlib.contextmanager
def exclusive(run_dir: str, what: str) -> Iterator[None]:
    """Hold the run's lock alone for the block (``what``: the action, for the message), or refuse at once in
    one line naming the process that holds it. A lock this process held shared is held shared again after."""
    fd = _open(run_dir)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pid = holder_pid(run_dir)
        who = f"process {pid}" if pid and pid > 0 else "another process"
        raise ConfigError(f"{os.path.abspath(run_dir)}: {who} is computing this run (it holds "
                          f"{lock_path(run_dir)}); {what} would pull the run from under it: wait for it to "
                          f"end or stop it (kill {pid if pid and pid > 0 else '<pid>'}), then run it again"
                          ) from None  # fmt: skip
    try:
        yield
    finally:
        fcntl.lockf(fd, fcntl.LOCK_SH)


__all__ = ["LOCK_NAME", "exclusive", "hold", "holder_pid", "lock_path"]

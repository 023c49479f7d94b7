"""Shard hosts as the workers start them (light: nothing heavy is imported here).

A worker runs its shards one after another in a long-lived shard host
(``harness.shard_host``). This module holds the worker's side of it and the
*spare* hosts ``local`` starts before anything else (even before the
settings check imports the simulator): their imports then run alongside the
orchestrator's own start-up and ``prepare`` instead of after them. It
imports only the standard library, so starting the hosts costs the
orchestrator next to nothing.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading

#: the job lines' script in this tree (as ``harness.shards.RUN_SHARD``)
RUN_SHARD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run_shard.py")


def threads_per_worker(cores: int, workers: int) -> int:
    """NUMBA_NUM_THREADS of each of ``workers`` shard processes sharing ``cores``: never more threads than cores.

    Why: every shard process starts numba's thread pool; ``workers`` processes
    of ``cores`` threads each would oversubscribe the machine (a parallel
    region then waits for threads the OS has not scheduled).
    """
    return max(1, int(cores) // max(1, int(workers)))


def shard_env(threads: int) -> dict:
    """The environment of a shard process (and of the cold-start warm-up, which must compile alike)."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["NUMBA_NUM_THREADS"] = str(threads)  # always set: numba's own default is every core of the node
    # and the BLAS of numpy/scipy too, unless set: its pools (a thread per core in every shard process)
    # took CPU from the other workers (measured: 2 workers no faster than 1 on 2 cores; 2.2x with this)
    env.setdefault("OPENBLAS_NUM_THREADS", str(threads))
    return env


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child
    """Kill the shard process if the worker that started it dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class ShardHost:
    """The worker's side of :mod:`harness.shard_host`: one long-lived process that runs shard after shard.

    Saves the start-up of a process per shard (imports and the compiled-code
    cache, about a second). Started lazily by :class:`ShardRunner` in
    :func:`auto_loop`; killed to stop a shard, as a shard process would be.
    """

    def __init__(self, python: str, script: str, env: dict, preload: bool = False) -> None:
        from .shard_host import COMMAND

        root = os.path.dirname(script)
        self.key = (python, script, env.get("NUMBA_NUM_THREADS"))
        self.proc = subprocess.Popen(
            [python, *COMMAND, *(("--preload", script) if preload else ())], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root, preexec_fn=_set_pdeathsig,
        )  # fmt: skip
        self._buf = b""

    def send(self, req: dict) -> bool:
        """Hand over one shard; False if the host is gone."""
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def answer(self, timeout: float) -> int | str | None:
        """The shard's exit code, None if still running, "dead" if the host ended without answering."""
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        data = os.read(fd, 4096)
        if not data:
            self.proc.wait()
            return "dead"
        self._buf += data
        if b"\n" not in self._buf:
            return None
        line, self._buf = self._buf.split(b"\n", 1)
        return int(json.loads(line)["rc"])

    def kill(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """End of input: the host exits after its current shard (none is running when this is called)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


_spare_hosts: list[ShardHost] = []
_spare_lock = threading.Lock()


def prestart_hosts(python: str, script: str, env: dict, n: int) -> None:
    """Start ``n`` shard hosts that import the simulator now (``local`` calls this before ``prepare``).

    The imports of a host (about a second) then run while the orchestrator
    validates the pool and writes the job list, instead of after it; a
    worker takes a spare host with its key (interpreter, script, threads)
    instead of starting one. Hosts nobody took are ended by
    :func:`release_spare_hosts`.
    """
    with _spare_lock:
        for _ in range(n):
            _spare_hosts.append(ShardHost(python, script, env, preload=True))


def take_spare_host(key: tuple) -> ShardHost | None:
    """A prestarted, still running host with ``key``, or None."""
    with _spare_lock:
        for i, h in enumerate(_spare_hosts):
            if h.key == key and h.proc.poll() is None:
                return _spare_hosts.pop(i)
    return None


def release_spare_hosts() -> None:
    """End the prestarted hosts no worker took.

    They never received a shard, so they are stopped (SIGTERM) rather than
    waited for: a refused setting is reported at once, not after the hosts'
    imports.
    """
    with _spare_lock:
        hosts, _spare_hosts[:] = list(_spare_hosts), []
    for h in hosts:
        h.kill()

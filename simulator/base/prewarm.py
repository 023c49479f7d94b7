"""A cold start on two cores: a helper process compiles part of a run's kernels while the run starts.

Numba compiles under one lock per process, so on a fresh machine (empty
numba cache) a run compiles its kernels one after the other on one core
while the other core idles. A second process can compile the other part:
numba's cache (``NUMBA_CACHE_DIR``, or ``__pycache__`` next to the sources)
is shared by every process, and its files are written atomically. This
module is the mechanism; what the helper compiles for ``python -m simulator
simulate`` is :mod:`simulator.cli.prewarm_groups`.

* :func:`launch` starts the helper (before the run's own imports);
* :func:`attached` hooks the cache lookup of the kernels the helper
  compiles: the run's first lookup of each waits until the helper's entry is
  in the cache, or the helper has exited, and loads it from there, instead
  of compiling its own copy;
* :func:`compile_ahead` lets the run compile, while it waits anyway, a
  kernel it needs only later.

Results cannot change: compiled code is the same whichever process compiled
it. No helper starts when ``SIMULATOR_PREWARM=0``, when fewer than two CPUs
are usable, or when the JIT is disabled. A helper that fails or hangs costs
only its own time: after it exits (or after :data:`WAIT_LIMIT_S`) the run
compiles what it still needs itself, as without a helper.

Only the standard library is imported at the top: :func:`launch` runs
before anything heavy is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from simulator.base.sources import SIMULATOR_DIR, package_digest

#: longest wait for the helper's copy of one kernel before compiling it here
WAIT_LIMIT_S = 120.0
#: how often the cache is looked at while waiting
POLL_S = 0.01
#: set to 0 to never start a helper
ENV_SWITCH = "SIMULATOR_PREWARM"
ROOT = Path(__file__).resolve().parents[2]
#: the directory of the ``simulator`` package as numba names it (the absolute path of the sources, symlinks kept)
_HERE = SIMULATOR_DIR

_helper: subprocess.Popen | None = None


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def enabled() -> bool:
    """Whether a helper may start here (switch, JIT, at least two usable CPUs)."""
    if os.environ.get(ENV_SWITCH, "1") == "0" or os.environ.get("NUMBA_DISABLE_JIT", "0") != "0":
        return False
    return _usable_cpus() >= 2


def cache_dir(package: str = "") -> str:
    """Where numba keeps the compiled code of ``simulator`` (or its subpackage ``package``, e.g. "engine" or "baselines/further").

    Numba's own rule: ``NUMBA_CACHE_DIR/<directory name>_<sha1 of the
    directory's absolute path>`` when that variable is set, else
    ``__pycache__`` next to the sources (so two checkouts sharing one
    ``NUMBA_CACHE_DIR`` never see each other's entries).
    """
    src = os.path.join(_HERE, *package.split("/")) if package else _HERE
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return os.path.join(root, os.path.basename(src) + "_" + hashlib.sha1(src.encode()).hexdigest())
    return os.path.join(src, "__pycache__")


def cache_has(stems: Iterable[str]) -> bool:
    """Whether numba's cache holds an index for every kernel file stem (``[package/]<module>.<function>``).

    Numba names an index ``<module>.<function>-<line>.py<version>.nbi``; it
    counts only if it holds the stamp of today's sources (the package digest
    of :mod:`simulator.base.jitcache`, found as bytes in the file: nothing is
    unpickled or imported). An index left by older sources (after a ``git
    pull``) is cold, so the helper compiles beside the run as on a fresh
    machine.
    """
    stamp = package_digest(_HERE)
    for s in stems:
        package, _, stem = s.rpartition("/")
        if not any(_holds(path, stamp) for path in glob.glob(
                os.path.join(glob.escape(cache_dir(package)), f"{stem}-*.nbi"))):  # fmt: skip
            return False
    return True


def _holds(path: str, stamp: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return stamp in f.read()
    except OSError:
        return False


def launch(argv: Sequence[str]) -> subprocess.Popen | None:
    """Start ``python -m simulator ARGV`` as this process's helper (stopped when this process exits)."""
    global _helper
    stop()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    _helper = subprocess.Popen([sys.executable, "-m", "simulator", *argv], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    atexit.register(stop)
    return _helper


def stop() -> None:
    """Stop the helper if it still runs (this process no longer needs it)."""
    global _helper
    if _helper is not None:
        if _helper.poll() is None:
            _helper.kill()
        _helper.wait()
        _helper = None


def running() -> bool:
    """Whether a helper of this process is still compiling."""
    return _helper is not None and _helper.poll() is None


def _wait_hook(dispatcher) -> Callable[[], None]:
    """Make ``dispatcher``'s first cache lookup wait for the helper's entry; returns the undo."""
    from numba.core import types

    cache = dispatcher._cache
    original = cache.load_overload

    def load_overload(sig, target_context):
        if any(isinstance(t, types.Literal) for t in sig):  # numba's first try for a constant argument:
            return original(sig, target_context)  # the helper compiles the general signature, asked next
        cache.load_overload = original  # one wait per kernel: later lookups are numba's own
        t_end = time.monotonic() + WAIT_LIMIT_S
        while True:
            cres = original(sig, target_context)
            if cres is not None or not running() or time.monotonic() > t_end:
                break
            time.sleep(POLL_S)
        if cres is None and not running():
            cres = original(sig, target_context)  # written just before the helper exited
        return cres

    cache.load_overload = load_overload
    return lambda: setattr(cache, "load_overload", original)


@contextlib.contextmanager
def attached(kernels: Iterable) -> Iterator[None]:
    """While inside, the first lookup of each of ``kernels`` waits for the helper (if one runs); then stop it."""
    undo = [_wait_hook(k) for k in kernels] if running() else []
    try:
        yield
    finally:
        for u in undo:
            u()
        stop()


def compile_for(dispatcher, *args) -> None:
    """Compile ``dispatcher`` for a call with ``args``, without running it (also a compiled-only kernel)."""
    from numba import typeof

    dispatcher.compile(tuple(typeof(a) for a in args))


def compile_ahead(dispatcher, *args) -> None:
    """While a helper compiles: compile ``dispatcher`` for these arguments now (otherwise nothing).

    For a kernel the run needs right after one the helper compiles (MCPP's
    atomic launch comes after its first decision): compiled while the run
    would wait anyway, instead of after.
    """
    if running():
        compile_for(dispatcher, *args)

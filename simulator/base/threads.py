"""Independent work spread over threads: ``nogil`` kernels on contiguous chunks.

Every draw is keyed (simulator/base/rng.py), so a chunk's results do not depend on
which thread runs it or how the work is split: any thread count gives the same
numbers. Threads here are Python threads calling compiled ``nogil`` kernels
(numba releases the interpreter lock while a kernel runs), not numba's
``parallel=True``: a ``prange`` kernel costs seconds of extra compilation on a
fresh machine (numba's parallel-loop passes and thread-pool wrappers), for the
same speed-up. The thread count is numba's setting (``NUMBA_NUM_THREADS``,
``numba.set_num_threads``), which the harness chooses per worker so that
workers x threads never exceed the cores a run may use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numba

#: chunks per thread: small enough pieces that a thread finishing early takes the next one (the
#: pairs of an MCPP decision differ a lot in cost: pruned, short and long simulations)
CHUNKS_PER_THREAD = 16
#: fewest items per chunk: each chunk is one call into compiled code (tens of µs of argument unboxing)
MIN_CHUNK = 8

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def thread_count() -> int:
    """Threads a parallel call may use (numba's thread setting of this thread)."""
    return int(numba.get_num_threads())


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < threads:
            if _pool is not None:
                _pool.shutdown(wait=True)
            _pool, _pool_size = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernel"), threads
        return _pool


def start_threads(threads: int) -> None:
    """Start the pool's threads now (a planner with a time limit does it before its first decision)."""
    if threads > 1:
        for f in [_executor(threads).submit(int) for _ in range(threads)]:
            f.result()


def chunk_bounds(n_items: int, n_chunks: int) -> list[tuple[int, int]]:
    """``n_chunks`` contiguous, nearly equal ranges covering ``range(n_items)``."""
    n_chunks = max(1, min(n_items, n_chunks))
    return [(c * n_items // n_chunks, (c + 1) * n_items // n_chunks) for c in range(n_chunks)]


def run_chunked(fn: Callable[[int, int], None], n_items: int, threads: int | None = None) -> None:
    """Call ``fn(lo, hi)`` on chunks covering ``range(n_items)``, on up to ``threads`` threads.

    ``fn`` must write only its own rows ``lo:hi`` of its outputs. One thread
    (or one item) runs ``fn(0, n_items)`` on the calling thread. An exception
    in any chunk is raised here after every chunk has ended.
    """
    threads = thread_count() if threads is None else int(threads)
    if threads <= 1 or n_items <= 1:
        fn(0, n_items)
        return
    pool = _executor(threads)
    n_chunks = min(threads * CHUNKS_PER_THREAD, max(threads, n_items // MIN_CHUNK))
    futures = [pool.submit(fn, lo, hi) for lo, hi in chunk_bounds(n_items, n_chunks)]
    errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e

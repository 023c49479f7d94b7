"""How the numba kernels are compiled, in one place.

Kernels callable from Python are ``@njit(cache=True, nogil=True)``. A kernel
that only compiled code ever calls is :data:`compiled_only`: the same options
plus no CPython and no C-function wrapper. Numba builds, optimises and
code-generates both wrappers for every function it compiles, and for a small
function they are most of its compile time; on a fresh machine (empty numba
cache) the first run compiles every kernel it needs, so the wrappers of
internal functions were a large share of the cold start (measured in
``benchmarks/bench_coldstart.py``).

Small steps are not marked ``inline="always"``: LLVM inlines a small
compiled callee into its caller anyway (checked on the keyed RNG: no call is
left in the caller's machine code), and numba's own inlining re-types the
callee at every call site, which measured about 1.5 s more compilation on a
cold start for no faster loop (the baseline episode loop, example pool and
20-node DAGs, side by side with and without).

The exception is :data:`inlined`, for a step that takes arrays and runs once per
simulated pair or more: a call taking arrays costs an atomic reference-count
update per array, in and out, which LLVM's inlining does not remove. On the
prediction surface's hot path (``run_pair`` and its per-pair steps inside
``decide_cells_kernel``) such calls were about 8% of a DAG's CPU (sampled
with ``perf``: ``lock incq`` / ``lock decq`` in numba's ``NRT_incref`` /
``NRT_decref``); the same code inlined there made the kernel 1.11-1.15x
faster (``benchmarks/README.md``, "Per-pair calls inlined"). A function
inlined that way is typed again at every call site, so it is used only where
it pays, mostly through an inlined twin of a ``compiled_only`` function
(``inlined(f.py_func)``: the same code, one place for its rule).

A ``compiled_only`` function has no entry point for the interpreter: calling
it from Python would crash the process instead of raising. Keep it private to
compiled code; ``tests/test_compiled_only.py`` fails if Python code (outside a
``@njit`` body) refers to one.
"""

from __future__ import annotations

from numba import njit

from simulator.base import jitcache
from simulator.base.sources import SIMULATOR_DIR

# before any kernel is decorated: every module with kernels takes ``njit`` from here (tests/test_jitcache.py)
jitcache.install(SIMULATOR_DIR)

#: decorator of a kernel only compiled code calls (no interpreter entry point)
compiled_only = njit(cache=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
#: decorator of a step inlined into its compiled callers (numba IR inlining; see the module's docstring)
inlined = njit(nogil=True, inline="always", no_cpython_wrapper=True, no_cfunc_wrapper=True)

__all__ = ["compiled_only", "inlined", "njit"]

"""How the numba kernels are compiled, in one place.

Kernels callable from Python are ``@njit(cache=True, nogil=True)``. A kernel
that only compiled code ever calls is :data:`compiled_only`: the same options
plus no CPython and no C-function wrapper. Numba builds, optimises and
code-generates both wrappers for every function it compiles, and for a small
function they are most of its compile time; on a fresh machine (empty numba
cache) the first run compiles every kernel it needs, so the wrappers of
internal functions were a large share of the cold start (measured in
``benchmarks/bench_coldstart.py``). :data:`compiled_inline` is the same for
the small steps of hot loops that numba inlines into their callers.

A ``compiled_only`` or ``compiled_inline`` function has no entry point for the interpreter: calling
it from Python would crash the process instead of raising. Keep it private to
compiled code; ``tests/test_compiled_only.py`` fails if Python code (outside a
``@njit`` body) refers to one.
"""

from __future__ import annotations

from numba import njit

#: decorator of a kernel only compiled code calls (no interpreter entry point)
compiled_only = njit(cache=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)

#: the same, inlined into its callers by numba (``inline="always"``): for small steps of hot loops
#: that take arrays, where a call costs reference-count updates of every array argument (measured:
#: the baseline episode loop 14% slower without it)
compiled_inline = njit(cache=True, nogil=True, inline="always", no_cpython_wrapper=True, no_cfunc_wrapper=True)

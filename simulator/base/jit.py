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

Where a call taking arrays cannot be inlined (the surface's ``run_pair``, compiled on its own) or its
arguments are tuples whose fields an inlined body reads over and over, :func:`borrowed` passes views that
own nothing: the same memory and the same numba type, whose reference counts are a null test instead of
an atomic update. The decide loop and the planner's pair loop borrow their own arguments for the length of
the call (their caller's references keep them alive) and their scratch arrays in each call's expression.

A ``compiled_only`` function has no entry point for the interpreter: calling
it from Python would crash the process instead of raising. Keep it private to
compiled code; ``tests/test_compiled_only.py`` fails if Python code (outside a
``@njit`` body) refers to one.
"""

from __future__ import annotations

from numba import njit
from numba.core import cgutils
from numba.core import types as nbtypes
from numba.extending import intrinsic

from simulator.base import jitcache
from simulator.base.sources import SIMULATOR_DIR

# before any kernel is decorated: every module with kernels takes ``njit`` from here (tests/test_jitcache.py)
jitcache.install(SIMULATOR_DIR)

#: decorator of a kernel only compiled code calls (no interpreter entry point)
compiled_only = njit(cache=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
#: decorator of a step inlined into its compiled callers (numba IR inlining; see the module's docstring)
inlined = njit(nogil=True, inline="always", no_cpython_wrapper=True, no_cfunc_wrapper=True)

__all__ = ["borrowed", "compiled_only", "inlined", "njit"]


def _borrow(context, builder, ty, value):
    """``value`` of numba type ``ty`` with every array's ownership (meminfo, parent) cleared, recursively."""
    if isinstance(ty, nbtypes.Array):
        ary = context.make_array(ty)(context, builder, value=value)
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()
    if isinstance(ty, nbtypes.BaseTuple):
        for i, member in enumerate(ty.types):
            value = builder.insert_value(value, _borrow(context, builder, member, builder.extract_value(value, i)), i)
        return value
    return value


def _borrowable(ty) -> bool:
    if isinstance(ty, nbtypes.BaseTuple):
        return all(_borrowable(member) for member in ty.types)
    return isinstance(ty, (nbtypes.Array, nbtypes.Number, nbtypes.Boolean))


@intrinsic(prefer_literal=False)
def borrowed(typingctx, x):
    """``x`` (an array, or a tuple or named tuple of arrays and scalars) as views that own nothing.

    Why: numba counts references to an array with an atomic update (``lock incq`` / ``lock decq`` in
    ``NRT_incref`` / ``NRT_decref``) each time a compiled call takes it, a tuple's field is read, or a view is
    made, in and out; a view that owns nothing (null meminfo) skips them (``NRT_incref`` tests the pointer
    first). On the prediction surface's hot call (``run_pair`` once per simulated pair, its tuples holding
    about 50 arrays) they were about 12% of a DAG's CPU. The same memory, the same numba type, so the same
    compiled callee and the same results.

    Only where something else owns the memory for as long as the view is used: a call's arguments inside
    the call's expression (``f(borrowed(a))``: the caller's own reference keeps ``a`` alive for the call),
    or a compiled function's own arguments for the length of that function (its caller's references).
    Nothing may keep a borrowed view longer: never return one, store it, or hand it to Python.
    """
    if not _borrowable(x):
        return None
    return x(x), lambda context, builder, sig, args: _borrow(context, builder, x, args[0])

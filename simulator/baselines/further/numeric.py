"""Numeric helpers shared by the LOADER and deadline kernels (one definition each)."""

from __future__ import annotations

from simulator.base.jit import njit


@njit(cache=True, nogil=True, inline="always")
def clip(x, lo, hi):
    """``x`` limited to [lo, hi] (scalars; ``lo <= hi``)."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x

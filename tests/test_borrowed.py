"""``simulator.base.jit.borrowed``: views that own nothing are the same memory and the same numba type."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from numba.core.errors import TypingError

from simulator.base.jit import borrowed, njit


class Pack(NamedTuple):
    n: int
    x: np.ndarray
    grid: np.ndarray
    flags: np.ndarray


@njit
def _total(pack, extra):
    """A compiled callee taking a named tuple and a tuple of arrays: what the kernels' hot calls look like."""
    s = float(pack.n)
    for i in range(pack.x.shape[0]):
        s += pack.x[i]
    for i in range(pack.grid.shape[0]):
        for j in range(pack.grid.shape[1]):
            if pack.flags[i]:
                s += pack.grid[i, j]
    a, b = extra
    return s + a.sum() + b.sum()


@njit
def _write(x, v):
    x[:] = v
    x[1:3][0] = -v  # a view of a borrowed view writes the same memory too


@njit
def _through_borrowed(pack, extra, v):
    _write(borrowed(pack.x), v)
    return _total(borrowed(pack), borrowed(extra)), _total(pack, extra)


def test_borrowed_views_read_and_write_the_callers_memory():
    rng = np.random.default_rng(3)
    pack = Pack(4, rng.random(7), rng.random((3, 5)), np.array([True, False, True]))
    extra = (rng.random(2), np.arange(4, dtype=np.float64))
    via_borrowed, direct = _through_borrowed(pack, extra, 2.5)
    assert via_borrowed == direct
    expected = 4.0 + 2.5 * 6 - 2.5 + pack.grid[[0, 2]].sum() + extra[0].sum() + extra[1].sum()
    assert via_borrowed == pytest.approx(expected, rel=1e-12)
    assert pack.x[0] == 2.5 and pack.x[1] == -2.5 and pack.x[2] == 2.5


def test_many_borrowed_calls_leave_the_arrays_whole():
    """Thousands of borrowed calls neither free nor leak the caller's arrays (no reference is dropped twice)."""

    @njit
    def loop(pack, extra, n):
        s = 0.0
        for _ in range(n):
            s += _total(borrowed(pack), borrowed(extra))
        return s

    pack = Pack(1, np.ones(3), np.ones((2, 2)), np.array([True, True]))
    extra = (np.ones(1), np.ones(1))
    assert loop(pack, extra, 10_000) == 10_000 * (1 + 3 + 4 + 2)
    assert pack.x.sum() == 3.0 and pack.grid.sum() == 4.0


def test_what_holds_other_objects_is_refused_when_compiled():
    @njit
    def with_list(x):
        return borrowed([x])

    with pytest.raises(TypingError):
        with_list(1.0)

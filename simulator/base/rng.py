"""Keyed (counter-based) randomness: every draw is a pure function of its key.

A draw is identified by a tuple of integers, e.g. (run seed, DAG, trial,
stream, node, model, attempt) for the i-th attempt of node v with model m.
The tuple is folded into one 64-bit key with the SplitMix64 finaliser, and
the j-th uniform number of that key is ``mix(key ^ mix(j))``. Nothing is
streamed, so results do not depend on the number of threads, processes,
shards or machines, and every method meets the same luck on the same attempt
(common random numbers).

All functions are compiled with numba and callable from Python too.
"""

from __future__ import annotations

import numpy as np
from numba import uint64

from simulator.base import jitmode
from simulator.base.jit import njit


def _jit(signature: str):
    """``njit(signature, cache=True, nogil=True)``: compiled at import, one version per function.

    Where :data:`simulator.base.jitmode.EAGER` is False (a process that runs no compiled code), nothing
    is compiled: the function is declared with compilation disabled, so a call there fails loudly instead of
    compiling another version.
    """
    if jitmode.EAGER:
        return njit(signature, cache=True, nogil=True)

    def declare(fn):
        dispatcher = njit(cache=True, nogil=True)(fn)
        dispatcher._can_compile = False  # numba's disable_compile() without a compiled version: calls raise
        return dispatcher

    return declare

#: 2**64 / golden ratio (odd): SplitMix64's increment, also the step between the attempt keys of one batch
#: in MCPP's kernel and the reference simulator (``batch_key + a * GOLDEN``)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53

# Stream tags: separate key spaces for each kind of draw.
STREAM_ATTEMPT = 1  # execution attempts: (node, model, attempt)
STREAM_STATIC = 2  # per-(DAG, trial) draws of static baselines (Dirichlet shares)
STREAM_PLANNER = 3  # MCPP: (decision, candidate, member, sample)
STREAM_CANDIDATES = 4  # MCPP: random free-node choice per decision
STREAM_NOISE = 5  # noisy planning statistics
STREAM_FURTHER = 6  # further baselines: loader_static's restart generator, per (DAG, trial)


@_jit("uint64(uint64)")
def mix64(z):
    """SplitMix64 finaliser (a bijection of uint64)."""
    z = uint64(z)
    z = (z ^ (z >> uint64(30))) * _M1
    z = (z ^ (z >> uint64(27))) * _M2
    return z ^ (z >> uint64(31))


@_jit("uint64(uint64, int64)")
def fold(key, value):
    """Fold one more integer field into a key."""
    return mix64(uint64(key) ^ (mix64(uint64(value) + GOLDEN) + GOLDEN))


@_jit("uint64(int64, int64, int64, int64, int64, int64, int64)")
def make_key(seed, dag, trial, stream, a, b, c):
    """Key of a draw: (run seed, DAG, trial, stream tag, three stream fields)."""
    k = mix64(uint64(seed) + GOLDEN)
    k = fold(k, dag)
    k = fold(k, trial)
    k = fold(k, stream)
    k = fold(k, a)
    k = fold(k, b)
    return fold(k, c)


@_jit("float64(uint64, int64)")
def uniform(key, j):
    """The j-th uniform number of ``key``, in the open interval (0, 1)."""
    x = mix64(uint64(key) ^ mix64(uint64(j) * GOLDEN + uint64(1)))
    return (float(x >> uint64(11)) + 0.5) * _INV53


@_jit("float64(uint64, int64)")
def normal(key, j):
    """Standard normal from uniforms j and j+1 (Box-Muller)."""
    u1 = uniform(key, j)
    u2 = uniform(key, j + 1)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


#: what :func:`cos_2pi_lower` takes off its polynomial (its truncation is below 7e-11, its roundings ~1e-15)
COS_LOWER_MARGIN = 1e-9
_R12, _R30, _R56, _R90, _R132, _R182 = 1 / 12, 1 / 30, 1 / 56, 1 / 90, 1 / 132, 1 / 182


@_jit("float64(float64)")
def cos_2pi_lower(u):
    """A value never above ``np.cos(2.0 * np.pi * u)`` for u in (0, 1), and within 1.1e-9 of it, without ``cos``.

    cos(2 pi u) = -cos(2 pi y) with y = |u - 1/2| in [0, 1/2], folded to z in [0, 1/4] (an angle of at most
    pi/2), where the Taylor series to w^7 / 14! (w = (2 pi z)^2) is within w^8 / 16! < 7e-11 (alternating,
    decreasing terms); the roundings of these few operations and of ``np.cos``'s own argument are about
    1e-15, so taking off ``COS_LOWER_MARGIN`` leaves a lower bound (checked densely by tests). Five
    times cheaper than ``np.cos``: the planner's screens bound a latency from below with it.
    """
    y = abs(u - 0.5)
    flip = y > 0.25
    z = 0.5 - y if flip else y
    a = 2.0 * np.pi * z
    w = a * a
    # the divisions by 12, 30, ... as products with their reciprocals (a division costs several
    # products; the reciprocals' roundings, ~1e-16 each, are far inside the margin)
    c = 1.0 - w * 0.5 * (1.0 - w * _R12 * (1.0 - w * _R30 * (1.0 - w * _R56 * (1.0 - w * _R90 * (
        1.0 - w * _R132 * (1.0 - w * _R182))))))
    return (c if flip else -c) - COS_LOWER_MARGIN


@_jit("float64(uint64, int64)")
def normal_lower(key, j):
    """A value never above :func:`normal` (key, j) (within 1.1e-9 x sqrt(-2 ln u1) of it), without ``cos``."""
    u1 = uniform(key, j)
    u2 = uniform(key, j + 1)
    r = np.sqrt(-2.0 * np.log(u1))
    return r * cos_2pi_lower(u2)


@_jit("float64(uint64, int64, float64)")
def gamma(key, j, shape):
    """Gamma(shape, 1) by Marsaglia-Tsang with keyed sub-draws starting at j."""
    boost = 1.0
    a = shape
    if a < 1.0:
        boost = uniform(key, j) ** (1.0 / a)
        a += 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    i = j + 1
    while True:
        x = normal(key, i)
        v = 1.0 + c * x
        if v > 0.0:
            v = v * v * v
            u = uniform(key, i + 2)
            if np.log(u) < 0.5 * x * x + d - d * v + d * np.log(v):
                return d * v * boost
        i += 3


@_jit("int64(uint64, int64, int64)")
def randint(key, j, n):
    """Uniform integer in [0, n)."""
    r = int(uniform(key, j) * n)
    return r if r < n else n - 1

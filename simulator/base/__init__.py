"""The base layer: what every other layer stands on.

Errors and their one-line messages, input validation, atomic file I/O, the
keyed random streams (the seed of every draw), the numba wrapper and the
cache key of its kernels (the whole package's sources), thread pools, score
intervals, run settings and the cold-start helper's mechanism.

May import: nothing of the project (the standard library, numpy, numba).
"""

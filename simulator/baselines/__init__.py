"""The paper's baselines: the twelve compiled ones and the further family.

``compiled`` holds Sequential-k (Retry) and the static dispatch-once
baselines as numba trial loops; ``further/`` holds the LOADER and
Chernoff-deadline policies.

May import: :mod:`simulator.base`, :mod:`simulator.pools`,
:mod:`simulator.costs`, :mod:`simulator.engine`.
"""

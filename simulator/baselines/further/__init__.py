"""The further published baselines: LOADER (Lagrangian path duals) and Chernoff-deadline policies.

Decision math only, as pure functions over per-node numpy arrays:
:mod:`.graph` (remaining-DAG paths), :mod:`.loader` (the six LOADER
variants) and :mod:`.chernoff` (the two deadline policies).

May import: :mod:`simulator.base`, :mod:`simulator.pools`,
:mod:`simulator.costs`, :mod:`simulator.engine`.
"""

"""What an attempt costs and the flat arrays the kernels read.

``charges`` (the cost modes and the one rule for the cost of an attempt),
``arrays`` (a pool line as flat numpy arrays, built once per DAG),
``nominal`` (the nominal budget and deadline scales) and ``planning``
(the statistics a planner plans with).

May import: :mod:`simulator.base`, :mod:`simulator.pools`.
"""

"""What an attempt costs and the flat arrays the kernels read.

``charges`` (the cost modes and the one rule for the cost of an attempt),
``arrays`` (a pool line as flat numpy arrays, built once per DAG),
``nominal`` (the nominal budget and deadline scales, and the one rule of a
ratio), ``limits`` (a budget or deadline as given: absolute or a ratio, and
for a deadline model or wall seconds; every front door reads its limits
through it) and ``planning`` (the statistics a planner plans with).

May import: :mod:`simulator.base`, :mod:`simulator.pools`.
"""

"""Monte Carlo Portfolio Planning, the paper's method.

``params`` (its parameters and their checks), ``candidates`` (the candidate
actions), ``kernel`` (the numba simulation kernel), ``anytime`` (the
time-limited planner), ``reuse`` (decisions keyed by the planner state),
``policy`` (the policy the engine drives) and ``api`` (``plan``: "what do I
launch now?" for one planner state).

May import: :mod:`simulator.base`, :mod:`simulator.pools`,
:mod:`simulator.costs`, :mod:`simulator.engine`.
"""

"""The execution semantics of one episode: where the simulator's rules live.

``loop`` (the numba event loop: launches, completions, refusals), ``episode``
(a Python policy driven through the loop), ``registry`` (what a method is:
:class:`~simulator.engine.registry.MethodSpec`), ``summary`` (streaming
aggregation of trials), ``reference`` (a plain-Python reference simulator the
tests compare with) and ``testing`` (small DAGs for tests and benchmarks).

May import: :mod:`simulator.base`, :mod:`simulator.pools`, :mod:`simulator.costs`.
"""

"""The execution semantics of one episode: where the simulator's rules live.

``loop`` (the numba event loop: launches, completions, refusals), ``live_rules``
(the live execution rules, also followed by the executor) with ``live_episode``
(their episode driver), ``types`` (what a policy is shown and an episode returns), ``episode``
(a Python policy driven through the loop), ``registry`` (what a method is:
:class:`~simulator.engine.registry.MethodSpec`), ``summary`` (streaming
aggregation of trials), ``reference`` (a plain-Python reference simulator the
tests compare with) and ``testing`` (small DAGs for tests and benchmarks).

May import: :mod:`simulator.base`, :mod:`simulator.pools`, :mod:`simulator.costs`.
"""

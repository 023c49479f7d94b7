"""Where a user's own policy goes: Python policies added through the method registry.

Each module holds a ``METHODS`` tuple of
:class:`~simulator.engine.registry.MethodSpec` entries and gets one line in
:data:`simulator.methods.METHOD_MODULES`; ``cheapest_first`` is the worked
example of ``docs/adding_a_policy.md``.

May import: :mod:`simulator.base`, :mod:`simulator.pools`,
:mod:`simulator.costs`, :mod:`simulator.engine`, :mod:`simulator.mcpp`.
"""

"""The command line ``python -m simulator``: ``main`` (the commands), ``args``
(their flags and checks) and ``planner`` (the ``plan`` command).

May import: every layer of :mod:`simulator` below it.
"""

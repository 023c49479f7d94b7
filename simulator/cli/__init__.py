"""The command line ``python -m simulator``: ``main`` (the commands), ``args``
(their flags and checks), ``planner`` (``plan``, ``predict``), ``calibrate`` and
``prewarm_groups`` (what the cold-start helper of ``simulate`` compiles; standard
library only at its top, as :mod:`simulator.__main__` imports it first).

May import: every layer of :mod:`simulator` below it.
"""

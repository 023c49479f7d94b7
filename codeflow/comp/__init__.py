"""CodeFlow-Comp: CodeFlowBench's competition split, from the problem file to a DAG pool.

``dataset`` (the loader: Codeforces problems cut into dependent functions),
``prompts`` and ``judge`` (one turn's messages and its multi-turn judging),
``rollouts`` (the nodes of one problem, generated and judged turn by turn;
driven by ``python -m codeflow.generate_rollouts --split comp``),
``to_pool`` (the published pipeline's judged files -> a DAG pool, graphs
from :mod:`simulator.pools.graph` like every other converter), ``sample``
and ``split`` (a restorable subset of a large problem file; streaming
shards). The three with a command line run as
``python -m codeflow.comp.<module>`` (``docs/codeflow.md``).

May import: the rest of :mod:`codeflow`, :mod:`simulator.base`,
:mod:`simulator.pools` (the ``data`` layer of ``tests/test_layers.py``).
"""

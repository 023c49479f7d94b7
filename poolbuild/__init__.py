"""Building DAG pools from verified rollouts: statistics, record reading, DAG assembly, alignment.

``poolbuild.synthetic`` makes synthetic pools (no rollouts) from generated
shapes or the bundled benchmarks' dependency graphs. The rules every builder
shares sit one layer lower, in the pool format layer of ``simulator``:
``simulator.pools.graph`` (parents, children, depth, self-loops) and
``simulator.pools.stats`` (a template from empirical rows).

The command-line entry points are the top-level scripts
``build_loader_dag_pool_from_rollouts.py`` and ``build_aligned_union_dag_pools.py``
and ``ProofFlow/convert_proofflow_pickle_to_dag_pool.py``.
"""

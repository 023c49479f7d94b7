"""Building DAG pools from verified rollouts: statistics, record reading, DAG assembly, alignment.

``poolbuild.graph`` holds the dependency-graph rule (parents, children, depth,
self-loops) that the benchmark loaders and the synthetic generator share too.

The command-line entry points are the top-level scripts
``build_loader_dag_pool_from_rollouts.py`` and ``build_aligned_union_dag_pools.py``
and ``ProofFlow/convert_proofflow_pickle_to_dag_pool.py``.
"""

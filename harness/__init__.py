"""Experiment harness: grid expansion, shards, workers (local / auto / SLURM), merge, analysis.

The top-level scripts (``run_experiment.sh``, ``gen_jobs.py``, ``run_shard.py``,
``merge_shards.py``) are thin entry points into this package. See
``docs/harness.md``.
"""

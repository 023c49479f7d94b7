"""Prediction surfaces: the ``surface`` job, its files and its page.

A prediction surface is, for every problem (DAG) of a pool, the on-time-within-budget success rate of one
or more methods over a log-spaced grid of budgets and deadlines. This package runs the job that computes
it, writes the published data layout (``manifest.json``, ``axes.json``, ``queries.json``,
``matrices/query_NNN.json``) plus our extra fields, and writes the static page that shows it
(:mod:`harness.surface.page`; served by ``run_experiment.sh surface-serve``).
"""

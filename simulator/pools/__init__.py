"""The pool format: a JSONL DAG pool parsed, validated and written.

``pool`` (the line format and its checks), ``graph`` (dependency graphs and
their cycles) and ``stats`` (per-(node, model) statistics from rollout rows),
the rules every pool builder shares.

May import: :mod:`simulator.base`.
"""

# ruff: noqa: N999  (the directory name ProofFlow is fixed by the project layout)
"""ProofFlow half of the data pipeline: Lean checking, node rollouts, pickle conversion."""

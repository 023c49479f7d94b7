"""Shared fixtures: a tmp pool writer, the example pool, its first DAG as the loopback worlds' pool.

Only fixtures live here; a test receives them by naming them as arguments
and never imports this file (the DAG builders are in :mod:`tests.dags`, the
repository root in :mod:`tests.harness_util`).
"""

from __future__ import annotations

import os

import pytest

from tests.dags import write_lines
from tests.harness_util import ROOT


@pytest.fixture
def pool_file(tmp_path):
    """Write a list of DAG objects (or raw strings) as a pool file; returns its path."""

    def _make(lines, name="pool.jsonl"):
        return write_lines(tmp_path / name, lines)

    return _make


@pytest.fixture(scope="session")
def example_pool_path() -> str:
    """The bundled example pool (``examples/example_pool.jsonl``)."""
    return os.path.join(ROOT, "examples", "example_pool.jsonl")


@pytest.fixture(scope="module")
def dag0_pool():
    """The example pool's DAG 0, as ``executor.inputs.load_dag`` reads it (the loopback worlds' pool)."""
    from executor.inputs import load_dag

    return load_dag(os.path.join(ROOT, "examples", "example_pool.jsonl"), 0)[0]


@pytest.fixture(scope="session")
def cf_pool(tmp_path_factory):
    """A 4-model synthetic pool whose DAG 0 is the 9-node CodeFlow DAG of the surface benchmarks (lognormal)."""
    from poolbuild.synthetic.cli import main as synthetic_main
    from simulator.pools.pool import load_pool

    out = tmp_path_factory.mktemp("cf") / "cf9.jsonl"
    args = ["--topology", "codeflow:2", "--benchmark-nodes", "9", "--models", "4", "--seed", "3", "--out", str(out)]
    assert synthetic_main(args) == 0
    return load_pool(str(out))

"""Synthetic DAG pools: experiments without rollouts, always labelled synthetic.

Why: MCPP and the baselines need a DAG pool to run, and real rollouts (GPU
hours, Lean) are not always at hand. This package builds pools in the format
of ``docs/pool_format.md`` from

* a **topology** (:mod:`poolbuild.synthetic.topology`): ``layered``,
  ``chain``, ``fork_join``, or the real dependency graphs of the bundled
  benchmarks (``codeflow``: CodeFlowBench-Repo subproblems; ``proofflow``:
  ProofFlowBench proof graphs, self-loops dropped with a warning), and
* **statistics** (:mod:`poolbuild.synthetic.stats`): a parametric family of
  LLMs (default: the paper's CodeFlow models ``4B_ins``, ``4B_think``,
  ``30B_ins``, ``30B_think``) or a template library CSV (``success_prob,
  lat_mean, lat_std, cost_mean[, token_cost_mean, model_id]``), optionally
  with ``R`` empirical rows per (node, model),

made into pool lines by :mod:`poolbuild.synthetic.build` and written by the
command line, :mod:`poolbuild.synthetic.cli`.

Every line carries ``synthetic: true`` and a ``dag_kind`` starting with
``synthetic_``, so a synthetic pool is never mistaken for measured data. All
randomness comes from numpy Generators keyed by ``(seed, DAG index, purpose)``:
the same command writes the same bytes, and the topology of DAG ``k`` does not
depend on the statistics settings.

The names below are the Python API (``from poolbuild import synthetic as syn``;
``docs/synthetic.md``). Command line: ``python -m poolbuild.synthetic --help``.
"""

from poolbuild.synthetic.build import build_dag, generate
from poolbuild.synthetic.cli import main
from poolbuild.synthetic.stats import (
    DEFAULT_MODELS,
    LibraryStats,
    ModelSpec,
    ParamConfig,
    ParametricStats,
    read_template_csv,
)
from poolbuild.synthetic.topology import (
    ShapeConfig,
    Topology,
    chain,
    codeflow_topologies,
    fork_join,
    layered,
    proofflow_topologies,
)

__all__ = [
    "DEFAULT_MODELS",
    "LibraryStats",
    "ModelSpec",
    "ParamConfig",
    "ParametricStats",
    "ShapeConfig",
    "Topology",
    "build_dag",
    "chain",
    "codeflow_topologies",
    "fork_join",
    "generate",
    "layered",
    "main",
    "proofflow_topologies",
    "read_template_csv",
]

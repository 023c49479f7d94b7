"""What the further baselines read from a DAG: its structure and the legacy model's statistics.

Every further policy plans with one model per node, the node's *legacy*
model (the one the twelve baselines use): its latency mean ``t_v``, success
probability ``p_v`` and expected attempt cost ``kappa_v`` in the run's cost
mode. A node whose legacy model has no finite statistics (an unavailable
model) is refused with an error naming the DAG and the node: the published
code silently produced NaN duals or infeasible bounds there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.base.errors import ConfigError
from simulator.baselines.further.loader import LoaderGraph
from simulator.costs.arrays import DagArrays


@dataclass(frozen=True)
class LegacyInputs:
    """Per-node inputs (pool order) of the further policies for one DAG and cost setting."""

    graph: LoaderGraph
    t: np.ndarray  # lat_mean of the legacy model (seconds)
    p: np.ndarray  # success probability of the legacy model
    kappa: np.ndarray  # expected attempt cost of the legacy model in the cost mode


def graph_of(arr: DagArrays) -> LoaderGraph:
    return LoaderGraph(arr.parent_ptr, arr.parent_idx, arr.child_ptr, arr.child_idx, arr.node_ids)


def legacy_inputs(arr: DagArrays, method: str = "further baseline", dag: object = None) -> LegacyInputs:
    """The legacy model's ``t``, ``p``, ``kappa`` per node; refuses a node without finite values."""
    v = np.arange(arr.n)
    j = arr.legacy
    t = np.ascontiguousarray(arr.lat_mean[v, j], dtype=np.float64)
    p = np.ascontiguousarray(arr.p[v, j], dtype=np.float64)
    kappa = np.ascontiguousarray(arr.kappa[v, j], dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(p) & np.isfinite(kappa) & arr.available[v, j]
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        where = f"DAG {dag}, " if dag is not None else ""
        vals = ", ".join(
            f"{name}={float(x[bad])!r}" for name, x in (("lat_mean", t), ("success_prob", p), ("expected cost", kappa))
            if not math.isfinite(float(x[bad]))
        )  # fmt: skip
        raise ConfigError(
            f"{where}node {int(arr.node_ids[bad])}: {method} needs finite statistics of the node's legacy model"
            f" ({vals or 'the model is unavailable'})"
        )
    return LegacyInputs(graph_of(arr), t, p, kappa)

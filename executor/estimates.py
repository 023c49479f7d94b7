"""What the planner is told about the live run: remaining times of running attempts, re-estimated statistics.

* **Remaining times** are the live rules' (:class:`simulator.engine.live_rules.Residuals`,
  re-exported here): the conditional mean residual ``E[L - e | L > e]`` over
  the (node, model)'s latency sample, as the simulator's ``live`` mode gives them.
* **Posterior** (``--update posterior``): before each plan, each (node,
  model) the run has observed gets a Beta posterior success probability
  with the pool's rate as prior mean and ``strength`` pseudo-observations
  (``(strength p + successes) / (strength + n)``), and its latency and
  charge scaled by the shrinkage ratio ``((strength mu + sum) / (strength + n)) / mu``.
  The planning arrays keep their rows: latencies and charges are scaled,
  success flags flipped towards the posterior rate with the planning-noise
  rule (:func:`simulator.costs.planning.shift_row_successes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulator.base.rng import make_key
from simulator.costs.arrays import DagArrays, replace_tables
from simulator.costs.planning import shift_row_successes
from simulator.engine.live_rules import Residuals, latency_sample

__all__ = ["Observations", "Residuals", "latency_sample", "posterior_arrays"]

#: keyed stream of the executor's own draws (posterior flips)
STREAM_EXECUTOR = 102


@dataclass
class Observations:
    """What a run has seen per (node, model): answered samples, their successes, latencies, charges."""

    n: dict[tuple[int, int], int] = field(default_factory=dict)
    succ: dict[tuple[int, int], int] = field(default_factory=dict)
    lat: dict[tuple[int, int], float] = field(default_factory=dict)
    charge: dict[tuple[int, int], float] = field(default_factory=dict)

    def add(self, v: int, j: int, passed: bool, latency: float, charge: float) -> None:
        k = (v, j)
        self.n[k] = self.n.get(k, 0) + 1
        self.succ[k] = self.succ.get(k, 0) + int(passed)
        self.lat[k] = self.lat.get(k, 0.0) + float(latency)
        self.charge[k] = self.charge.get(k, 0.0) + float(charge)


def posterior_arrays(arr: DagArrays, obs: Observations, strength: float, seed: int = 0) -> DagArrays:
    """``arr`` with each observed (node, model) re-estimated (module docstring); unobserved ones unchanged."""
    if not obs.n:
        return arr
    p, lat_mean, lat_std = arr.p.copy(), arr.lat_mean.copy(), arr.lat_std.copy()
    tmpl_charge, kappa = arr.tmpl_charge.copy(), arr.kappa.copy()
    row_lat, row_charge, row_succ = arr.row_lat.copy(), arr.row_charge.copy(), arr.row_succ.copy()
    for (v, j), n in obs.n.items():
        lo, hi = arr.row_ptr[v * arr.m + j], arr.row_ptr[v * arr.m + j + 1]
        prior_p = float(arr.p[v, j])
        post_p = (strength * prior_p + obs.succ[(v, j)]) / (strength + n)
        mu = float(lat_mean[v, j]) if hi == lo else float(arr.row_lat[lo:hi].mean())
        f_lat = ((strength * mu + obs.lat[(v, j)]) / (strength + n)) / mu if mu > 0 else 1.0
        kap = float(arr.kappa[v, j])
        f_cost = ((strength * kap + obs.charge[(v, j)]) / (strength + n)) / kap if kap > 0 else 1.0
        if arr.charge_is_latency:
            f_cost = f_lat
        lat_mean[v, j] *= f_lat
        lat_std[v, j] *= f_lat
        tmpl_charge[v, j] *= f_cost
        kappa[v, j] *= f_cost
        row_lat[lo:hi] *= f_lat
        row_charge[lo:hi] *= f_cost
        if hi > lo and post_p != prior_p:
            key = np.uint64(make_key(seed, 0, 0, STREAM_EXECUTOR, v, j, 1))
            post_p = shift_row_successes(row_succ, lo, hi, prior_p, post_p, key)
        elif hi > lo:
            post_p = float(row_succ[lo:hi].mean())
        p[v, j] = post_p
    return replace_tables(arr, p=p, lat_mean=lat_mean, lat_std=lat_std, tmpl_charge=tmpl_charge, kappa=kappa,
                          row_lat=row_lat, row_charge=row_charge, row_succ=row_succ)

"""Cheapest-first: each ready node gets one attempt of its cheapest model that can succeed."""

import numpy as np

from simulator.engine.episode import Policy
from simulator.engine.registry import PER_ATTEMPT, PYTHON_POLICY, SCORED, MethodSpec


class CheapestFirst(Policy):
    name = "cheapest_first"

    def reset(self, arr, seed, dag, trial):
        # expected cost of one attempt per (node, model); models that cannot succeed never chosen
        cost = np.where(arr.available & (arr.p > 0), arr.kappa, np.inf)
        self.model = cost.argmin(axis=1)

    def act(self, view):
        count = np.zeros(view.arr.n, dtype=np.int64)
        count[view.ready] = 1
        return self.model, count

    def episode_diagnostics(self):
        return {}


METHODS = (
    MethodSpec("cheapest_first", PYTHON_POLICY, PER_ATTEMPT, SCORED, baseline=True, sets=("examples",),
               factory=lambda params, planning: CheapestFirst()),
)

"""The further baselines as simulator policies: decision views in, per-node targets out.

Each policy plans with the node's legacy model (planning statistics when the
run has them, else the execution ones) and returns, for every ready node, a
*target*: the number of attempts it wants in flight. The simulator launches
them with the per-attempt rule (served in decreasing count, ties to the
higher node id, each attempt checked against the remaining budget). A target
of 0 launches nothing. Every call counts as a planner call.

* LOADER policies never look at time: they run with ``D = inf`` and are
  scored for every deadline afterwards, like the twelve baselines.
* Chernoff policies read the remaining deadline ``h = D - t``: they run with
  the hard deadline, like MCPP.

Targets are capped at ``MAX_TARGET`` (1,000,000, the static baselines' cap):
the published closed form can ask for about 1e10 attempts on a node that
almost never succeeds, which the budget refuses anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from simulator.base.rng import STREAM_FURTHER, make_key
from simulator.baselines.further.chernoff import (
    MAX_TARGET,
    receding_targets,
    solve_deadline,
    static_counts,
    trace_theta,
)
from simulator.baselines.further.inputs import LegacyInputs, legacy_inputs
from simulator.baselines.further.loader import (
    Snapshot,
    enumerate_paths,
    loader_all_paths_decision,
    loader_colgen_decision,
    loader_dual_decision,
    loader_static_plan,
)
from simulator.baselines.further.variants import (
    FURTHER_METHOD_SETS,
    VARIANTS,
    FurtherParams,
    FurtherVariant,
    variant,
)
from simulator.costs.arrays import DagArrays
from simulator.engine.episode import Policy
from simulator.engine.registry import HARD, PER_ATTEMPT, PYTHON_POLICY, SCORED, MethodSpec


def snapshot_of(view) -> Snapshot:
    """Alive nodes, ``delta_v`` (time until the in-flight batch ends) and ``rho_v`` (attempts still running)."""
    n = view.arr.n
    delta = np.zeros(n)
    rho = np.zeros(n)
    ptr = view.remaining_ptr
    for q, v in enumerate(np.asarray(view.inflight_node, dtype=np.int64)):
        rem = view.remaining[ptr[q] : ptr[q + 1]]
        rho[v] = float(len(rem))
        delta[v] = float(rem.max()) if len(rem) else 0.0
    return Snapshot(~np.asarray(view.completed, dtype=np.bool_), delta, rho)


def static_seed(seed: int, dag: int, trial: int) -> int:
    """``loader_static``'s generator seed, keyed by (run seed, DAG, trial) (32 bits for ``RandomState``)."""
    return int(make_key(int(seed), int(dag), int(trial), STREAM_FURTHER, 0, 0, 0)) & 0xFFFFFFFF


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class FurtherPolicy(Policy):
    """One of the further methods (``variant``) with resolved parameters.

    ``params`` is a :class:`~simulator.baselines.further.variants.FurtherParams`, its
    JSON form, or None (defaults). ``planning`` are the planner's statistics
    when they differ from execution (noisy estimates, a planning pool).
    """

    launch_rule = "per_attempt"
    legacy_only = True  # every launch uses the node's legacy model (the no-progress and stall checks follow it)

    def __init__(
        self,
        method: str,
        params: FurtherParams | Mapping[str, Any] | None = None,
        planning: DagArrays | None = None,
    ) -> None:
        self.variant: FurtherVariant = variant(method)
        self.name = self.variant.name
        if params is None:
            params = FurtherParams()
        elif not isinstance(params, FurtherParams):
            params = FurtherParams.from_json(params)
        self.params = params
        self.planning = planning
        self.hard_deadline = self.variant.family == "deadline"
        self._inputs: LegacyInputs | None = None

    # -- episode -------------------------------------------------------------

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        """Per-episode state; the legacy inputs are checked (and kept) once per DAG."""
        src = self.planning if self.planning is not None else arr
        if self._inputs is None or self._src is not src:
            self._inputs = legacy_inputs(src, self.name, dag)
            self._src = src
        self._legacy = np.asarray(arr.legacy, dtype=np.int64)
        # the simulator's "can launch any model" check (by expected cost) of the safety fallback
        self._kappa_any = np.where(src.available, src.kappa, np.inf).min(axis=1)
        self._seed, self._dag, self._trial = int(seed), int(dag), int(trial)
        self._static: np.ndarray | None = None
        self._paths_key: bytes | None = None
        self._paths = None
        self._decisions = 0
        self._fallbacks = 0
        self._iters = 0
        self._solves = 0
        self._theta_evals = 0
        self._last: dict[str, Any] = {}
        self._trace: list[dict] = []

    def check(self, arr: DagArrays, dag: object = None) -> None:
        """Refuse a DAG these policies cannot plan (before any work): see :func:`legacy_inputs`."""
        legacy_inputs(self.planning if self.planning is not None else arr, self.name, dag)

    def act(self, view) -> tuple[np.ndarray, np.ndarray] | None:
        """Targets for the ready nodes as (model, count) arrays of length n, or None (nothing to do)."""
        ready = np.asarray(view.ready, dtype=np.int64)
        if ready.size == 0:
            return None
        self._decisions += 1
        if self.variant.family == "loader":
            counts = self._loader(view)
        else:
            counts = self._deadline(view, ready)
            if counts is None:
                return None
        n = view.arr.n
        out = np.zeros(n, dtype=np.int64)
        out[ready] = np.minimum(counts[ready], MAX_TARGET)
        return self._legacy.copy(), out

    def episode_diagnostics(self) -> dict:
        d: dict[str, Any] = {"further_decisions": self._decisions}
        if self.variant.family == "loader":
            d["loader_fallbacks"] = self._fallbacks
            d["loader_dual_iterations"] = self._iters
            if self._static is not None:
                d["loader_static_attempts"] = int(self._static.sum())
        else:
            d["deadline_solves"] = self._solves
            d["deadline_theta_evaluations"] = self._theta_evals
            d.update(self._last)
            if self._trace:
                d["deadline_trace"] = self._trace
        return d

    # -- LOADER --------------------------------------------------------------

    def _loader(self, view) -> np.ndarray:
        inp = self._inputs
        v = self.variant
        base = v.base
        lp = self.params.loader
        if base in ("loader_static", "loader_static_bf"):
            if self._static is None:  # first decision: t = 0, b = B
                self._static = loader_static_plan(
                    inp.graph, inp.t, inp.p, inp.kappa, float(view.budget_left),
                    static_seed(self._seed, self._dag, self._trial), lp, bf=base.endswith("_bf"), fixes=v.fixes,
                )  # fmt: skip
            return self._static
        snap = snapshot_of(view)
        b = float(view.budget_left)
        if base in ("loader_dual", "loader_dual_bf"):
            r = loader_dual_decision(inp.graph, snap, inp.t, inp.p, inp.kappa, b, lp, base.endswith("_bf"), v.fixes)
        elif base == "loader_dual_all_paths":
            key = snap.alive.tobytes()
            if key != self._paths_key:  # paths change only with the completed set
                self._paths = enumerate_paths(inp.graph, snap.alive, lp.max_paths)
                self._paths_key = key
            r = loader_all_paths_decision(inp.graph, snap, inp.t, inp.p, inp.kappa, b, lp, v.fixes, self._paths)
        else:
            cg = self.params.colgen
            r = loader_colgen_decision(inp.graph, snap, inp.t, inp.p, inp.kappa, b, cg, v.fixes)
        self._iters += r.iterations
        self._fallbacks += 0 if r.planned else 1
        return r.counts

    # -- Chernoff deadline ---------------------------------------------------

    def _deadline(self, view, ready: np.ndarray) -> np.ndarray | None:
        inp = self._inputs
        dp = self.params.deadline
        b = float(view.budget_left)
        h = max(0.0, float(view.deadline) - float(view.t))
        if self.variant.base == "deadline_static":
            if self._static is None:  # first decision, t = 0: the full DAG
                sol = solve_deadline(inp.graph, np.ones(inp.graph.n, bool), inp.t, inp.p, inp.kappa, b, h, dp,
                                     self.variant.use_kappa)  # fmt: skip
                self._record(sol, view.t, np.ones(inp.graph.n, bool), b, h)
                self._static = static_counts(sol, inp.graph.n)
            return self._static
        if h <= 0.0:
            return None
        alive = ~np.asarray(view.completed, dtype=np.bool_)
        sol = solve_deadline(inp.graph, alive, inp.t, inp.p, inp.kappa, b, h, dp, self.variant.use_kappa)
        self._record(sol, view.t, alive, b, h)
        targets, _mode = receding_targets(inp.graph, alive, ready, inp.t, inp.p, inp.kappa, b, sol, self._kappa_any)
        return targets

    def _record(self, sol, t: float, alive: np.ndarray, b: float, h: float) -> None:
        self._solves += 1
        self._theta_evals += int(sol.grid.shape[0])
        self._last = {
            "deadline_theta": _finite(sol.theta) if sol.solved else None,
            "deadline_score": _finite(sol.score) if sol.solved else None,
            "deadline_lb": sol.lower_bound,
            "deadline_phi": _finite(sol.phi) if sol.solved else None,
            "deadline_plan_size": int(np.count_nonzero(sol.plan)) if sol.solved else 0,
        }
        level = self.params.trace
        if level is None:
            return
        entry: dict[str, Any] = {"t": float(t), **self._last}
        if level in ("theta", "theta_full", "iter"):
            entry["thetas"] = [float(x) for x in sol.grid]
            entry["scores"] = [_finite(float(x)) for x in sol.scores]
        if level in ("theta_full", "iter") and sol.solved:
            entry["plan"] = [float(x) for x in sol.plan]
            entry["weights"] = [float(x) for x in sol.weights]
        if level == "iter" and sol.solved:
            inp = self._inputs
            tr = trace_theta(inp.graph, alive, inp.t, inp.p, inp.kappa, b, h, sol.theta, self.params.deadline)
            entry["iterations"] = [[_finite(float(x)) for x in row] for row in tr]
        self._trace.append(entry)


def make_further_policy(method: str, params: Mapping[str, Any] | None = None, planning: DagArrays | None = None):
    """Factory in the registry's shape: ``params`` may carry the resolved further parameters under ``further``."""
    p = dict(params or {})
    return FurtherPolicy(method, p.get("further"), planning)


def _factory(method: str, params: Mapping[str, Any] | None, planning: DagArrays | None) -> FurtherPolicy:
    """The registry's factory: ``params`` are the run's resolved further parameters (JSON form) or empty.

    ``dag_model_ids`` (added for planners that resolve models by name) is not
    a parameter of these policies: they launch each node's legacy model.
    """
    p = {k: v for k, v in (params or {}).items() if k != "dag_model_ids"}
    return FurtherPolicy(method, p or None, planning)


def _spec(v: FurtherVariant) -> MethodSpec:
    sets = tuple(s for s, names in FURTHER_METHOD_SETS.items() if v.name in names)
    return MethodSpec(
        v.name, PYTHON_POLICY, PER_ATTEMPT, HARD if v.family == "deadline" else SCORED, baseline=True,
        family=f"further_{v.family}", sets=sets, factory=partial(_factory, v.name), settings_key="further",
    )  # fmt: skip


#: the registry entries of the further baselines, faithful ones first (listed in simulator.methods)
METHODS: tuple[MethodSpec, ...] = tuple(_spec(v) for v in VARIANTS.values())

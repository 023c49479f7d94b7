"""The conformance battery every registered method passes: :func:`check_policy`.

Why: callers (the episode driver, the surface, the executor) use a policy
only through :class:`simulator.engine.episode.Policy` and never probe it, so
a policy must keep that contract on its own. This battery states the
contract as checks run on any registered method, in the manner of
scikit-learn's ``check_estimator``: ``tests/test_policy_checks.py`` runs it
over every entry of :data:`simulator.methods.REGISTRY`, and a new policy
passes it before it is merged (``docs/adding_a_policy.md``).

The checks, on a DAG of one node and on one of 80 (two models each), under
every execution-rule mode (:data:`~simulator.engine.registry.EXECUTION_RULES`):

* ``deterministic``: the same seed and trials give the same episodes;
* ``legal``: every action has one model and one count per node, and a
  launched (ready, count >= 1) node gets a model that is available there,
  among ``model_positions(arr)``, and its legacy model if ``legacy_only``;
* ``bounded``: an episode never spends more than its budget, nor a node more
  than its ``budget_caps`` under the per-attempt launch, its reason is one of
  the engine's, and a success under a hard deadline ends by the deadline;
* ``pickles``: the policy survives a pickle round trip (shard workers get
  their policies so) and the copy plays the same episodes.

Layer: ``methods`` (it builds policies through :mod:`simulator.simulate`).
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.costs.arrays import CostSetting, DagArrays, build_arrays
from simulator.engine.episode import DecisionView, Policy, run_policy_episode
from simulator.engine.loop import REASONS
from simulator.engine.registry import EXECUTION_RULES, HARD, PER_ATTEMPT, execution_of
from simulator.methods import method_spec
from simulator.pools.pool import pool_from_objects
from simulator.simulate import SimSpec, policy_for, simulate_run

#: the parameters the battery runs each settings key with: small, so the whole battery stays quick
SMALL_PARAMS: Mapping[str, Mapping[str, Any]] = {"mcpp": {"M": 8}}

_CHEAP = {"success_prob": 0.6, "lat_mean": 1.0, "lat_std": 0.5, "cost_mean": 100.0, "token_cost_mean": 100.0}
_DEAR = {"success_prob": 0.9, "lat_mean": 2.0, "lat_std": 0.5, "cost_mean": 300.0, "token_cost_mean": 300.0}


def check_dag(n_nodes: int) -> dict:
    """A pool line of ``n_nodes`` nodes with two models each: a chain with a skip edge at every third node."""
    parents: list[list[int]] = [[] for _ in range(n_nodes)]
    for v in range(1, n_nodes):
        parents[v].append(v - 1)
        if v % 3 == 0 and v >= 3:
            parents[v].append(v - 3)
    children: list[list[int]] = [[] for _ in range(n_nodes)]
    for v, ps in enumerate(parents):
        for u in ps:
            children[u].append(v)
    nodes = [{"node_id": v, "parents": parents[v], "children": children[v],
              "model_templates": {"cheap": dict(_CHEAP), "dear": dict(_DEAR)}} for v in range(n_nodes)]  # fmt: skip
    return {"problem_id": f"check{n_nodes}", "dag_kind": "test", "nodes": nodes}


@dataclass(frozen=True, kw_only=True)
class CheckCase:
    """One DAG, budget and deadline the battery runs a method on."""

    arr: DagArrays
    budget: float
    deadline: float
    seed: int = 7
    trials: tuple[int, ...] = (0, 1)


def check_case(n_nodes: int, trials: int = 2) -> CheckCase:
    """A :func:`check_dag` of ``n_nodes`` with a budget of about 1.5 cheap attempts per node and a deadline
    of about two cheap attempts' latency per node (tight enough that budget and deadline both bind)."""
    arr = build_arrays(pool_from_objects([check_dag(n_nodes)])[0], CostSetting())
    return CheckCase(arr=arr, budget=150.0 * n_nodes, deadline=2.0 * n_nodes, trials=tuple(range(trials)))


class _Checked(Policy):
    """``inner`` with every action checked against the contract (raises AssertionError on a breach)."""

    def __init__(self, inner: Policy) -> None:
        self.inner, self.name = inner, inner.name
        self.legacy_only = inner.legacy_only
        self.actions = 0

    def model_positions(self, arr: DagArrays) -> np.ndarray:
        return self.inner.model_positions(arr)

    def budget_caps(self, arr: DagArrays, budget: float) -> np.ndarray:
        return self.inner.budget_caps(arr, budget)

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        self.inner.reset(arr, seed, dag, trial)
        self.allowed = np.zeros(arr.m, dtype=bool)
        self.allowed[np.asarray(self.inner.model_positions(arr), dtype=np.int64)] = True

    def act(self, view: DecisionView):
        action = self.inner.act(view)
        if action is None:
            return None
        self.actions += 1
        arr = view.arr
        model, count = (np.asarray(a) for a in action)
        assert model.shape == (arr.n,) and count.shape == (arr.n,), f"{self.name}: action arrays must have length n"
        assert np.issubdtype(model.dtype, np.integer) and np.issubdtype(count.dtype, np.integer), (
            f"{self.name}: models and counts must be integers")
        ready = np.asarray(view.ready, dtype=np.int64)
        launched = ready[count[ready] >= 1]
        assert (count[ready] >= 0).all(), f"{self.name}: a negative count"
        if len(launched):
            j = model[launched]
            assert ((j >= 0) & (j < arr.m)).all(), f"{self.name}: a model position out of range"
            assert arr.available[launched, j].all(), f"{self.name}: a model launched where it is not available"
            assert self.allowed[j].all(), f"{self.name}: a model outside model_positions(arr)"
            if self.legacy_only:
                assert (j == arr.legacy[launched]).all(), f"{self.name}: legacy_only but a non-legacy model"
        return action

    def episode_diagnostics(self) -> dict:
        return self.inner.episode_diagnostics()


def _fields(batch) -> list[np.ndarray]:
    return [batch.reason, batch.makespan, batch.total_cost, batch.total_rollouts, batch.node_stats, batch.node_cost]


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(_fields(a), _fields(b), strict=True))


def _episodes(policy: Policy, case: CheckCase, deadline: float, launch: str) -> list:
    return [run_policy_episode(case.arr, policy, case.budget, deadline, case.seed, 0, q, launch=launch)
            for q in case.trials]  # fmt: skip


def check_deterministic(method: str, case: CheckCase, mode: str, params: Mapping[str, Any] | None) -> None:
    """The same seed and trials give the same episodes."""
    run = _runner(method, case, mode, params)
    assert _same(run(), run()), f"{method} under {mode}: two runs with the same key differ"


def check_bounded(method: str, case: CheckCase, mode: str, params: Mapping[str, Any] | None) -> None:
    """Spend within the budget, a known reason, a success under a hard deadline on time."""
    batch = _runner(method, case, mode, params)()
    tol = 1e-9 * max(1.0, case.budget)
    assert (batch.total_cost <= case.budget + tol).all(), f"{method} under {mode}: spent more than the budget"
    assert ((batch.reason >= 0) & (batch.reason < len(REASONS))).all(), f"{method} under {mode}: unknown reason"
    done = batch.reason == REASONS.index("completed")
    if math.isfinite(batch.deadline):
        assert (batch.makespan[done] <= batch.deadline + 1e-9).all(), f"{method} under {mode}: late success"


def check_legal(method: str, case: CheckCase, mode: str, params: Mapping[str, Any] | None) -> None:
    """Every action of the Python policy the mode runs is legal, and per-attempt spend keeps the caps."""
    made = _python_policy(method, case, mode, params)
    if made is not None:
        check_actions(*made, case)


def check_pickles(method: str, case: CheckCase, mode: str, params: Mapping[str, Any] | None) -> None:
    """The policy pickles (fresh and after an episode), and the copy plays the same episodes."""
    made = _python_policy(method, case, mode, params)
    if made is None:
        pickle.dumps(method_spec(method))  # a compiled baseline travels to a shard worker as its registry entry
    else:
        check_pickle_round_trip(*made, case)


def check_actions(policy: Policy, launch: str, deadline: float, case: CheckCase) -> None:
    """``policy``'s episodes on ``case``: every action legal, diagnostics a dict, per-attempt spend within caps."""
    checked = _Checked(policy)
    results = _episodes(checked, case, deadline, launch)
    if launch == PER_ATTEMPT:
        caps = np.asarray(policy.budget_caps(case.arr, case.budget), dtype=np.float64)
        for r in results:
            assert (r.node_cost <= caps + 1e-9 * np.maximum(1.0, caps)).all(), f"{policy.name}: a node above its cap"
    assert all(isinstance(r.diagnostics, dict) for r in results), f"{policy.name}: episode_diagnostics not a dict"


def check_pickle_round_trip(policy: Policy, launch: str, deadline: float, case: CheckCase) -> None:
    """``policy`` pickles fresh and after an episode, and the fresh copy plays the same episodes."""
    copy = pickle.loads(pickle.dumps(policy))
    mine, theirs = _episodes(policy, case, deadline, launch), _episodes(copy, case, deadline, launch)
    keys = ("termination_reason", "makespan", "total_cost", "total_rollouts")
    for a, b in zip(mine, theirs, strict=True):
        same = [getattr(a, k) for k in keys] == [getattr(b, k) for k in keys] and np.array_equal(a.node_cost, b.node_cost)
        assert same, f"{policy.name}: the pickled copy plays other episodes"
    pickle.loads(pickle.dumps(policy))  # after an episode too


def _runner(method: str, case: CheckCase, mode: str, params: Mapping[str, Any] | None) -> Callable[[], Any]:
    def run():
        spec = SimSpec(budget=case.budget, deadline=case.deadline, trials=case.trials, seed=case.seed, rules=mode)
        return simulate_run(case.arr, method, spec, params=params)

    return run


def _python_policy(method: str, case: CheckCase, mode: str, params: Mapping[str, Any] | None):
    """(policy, launch rule, deadline) of the Python policy ``mode`` runs ``method`` as; None: compiled."""
    ex = execution_of(method_spec(method), mode)
    if ex.compiled:
        return None
    policy, launch = policy_for(method, params, launch=ex.launch)
    return policy, launch, (case.deadline if ex.deadline == HARD else math.inf)


#: the battery, by name
CHECKS: dict[str, Callable[[str, CheckCase, str, Mapping[str, Any] | None], None]] = {
    "deterministic": check_deterministic,
    "legal": check_legal,
    "bounded": check_bounded,
    "pickles": check_pickles,
}


def small_params(method: str) -> Mapping[str, Any] | None:
    """The run parameters the battery gives ``method`` (:data:`SMALL_PARAMS` by its settings key)."""
    key = method_spec(method).settings_key
    return SMALL_PARAMS.get(key) if key else None


def check_policy(method: str, case: CheckCase, modes: Sequence[str] = EXECUTION_RULES,
                 checks: Sequence[str] = tuple(CHECKS)) -> None:
    """Run the battery (``checks``) on registered ``method`` for ``case`` under each of ``modes``.

    Raises AssertionError naming the method, the mode and the broken promise.
    """
    params = small_params(method)
    for mode in modes:
        for name in checks:
            CHECKS[name](method, case, mode, params)

"""Reference simulator: a plain-Python event loop written straight from the rules.

Why it exists: the compiled engine (:mod:`simulator.engine.loop`,
:mod:`simulator.baselines.compiled`) and MCPP's kernel (:mod:`simulator.mcpp.kernel`)
are written for speed (flat arrays, one queue entry per batch, counters
instead of sets, unpacked arguments). This module is written for reading: one
loop, named objects, the rules of ``docs/semantics.md`` in the order they are
stated there. ``tests/test_reference_simulator.py`` runs both on random DAGs
and budgets and requires the same records bit for bit, so a change to the
fast code that changes a rule is caught, and a new execution rule can be
written here first and then compared with its compiled version.

Only the randomness is shared with the compiled code: a draw is a pure
function of its key (:mod:`simulator.base.rng`), and :func:`engine.draw_attempt`
turns a key into (latency, success, charged cost). Everything else is plain
Python: the event loop, both launch rules, the order in which nodes are
served, batch ends, the no-progress reason, the baselines' decision rules and
the static baselines' shares and counts.

Pluggable pieces (for new execution-rule modes):

* a **policy** is any callable ``(StateView) -> {node: (model, count)}`` (or
  ``None``: launch nothing at this decision); node and model are positions in
  the pool line's node order and the DAG's model list;
* the **launch rule** is :data:`PER_ATTEMPT` (baselines) or :data:`ATOMIC`
  (MCPP), chosen per run;
* the **deadline treatment** is the ``deadline`` of the run: a finite D is a
  hard deadline; ``math.inf`` simulates without one, and :func:`score` then
  reports the record at any deadline (how baselines are scored);
* the **draws** are a :class:`DrawSource`: :class:`ExecutionDraws` (the
  simulator's keys) or :class:`PlannerDraws` (the keys of one MCPP
  simulation, to reproduce the kernel's member simulations);
* the rule for a **refused draw** (per-attempt launch) is one flag,
  ``refused_draw_consumed`` (default :data:`REFUSED_DRAW_CONSUMED`).

It is slow (tens of microseconds per attempt) and meant for tests and small
experiments, not for the experiment grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from simulator.base.rng import GOLDEN, STREAM_ATTEMPT, STREAM_PLANNER, STREAM_STATIC, fold, make_key, uniform
from simulator.costs.arrays import DagArrays
from simulator.engine.loop import draw_attempt, node_model_key

# ---------------------------------------------------------------------------
# the rules' names
# ---------------------------------------------------------------------------

PER_ATTEMPT = "per_attempt"  # baselines: draw, charge or refuse, one attempt at a time
ATOMIC = "atomic"  # MCPP: every ready node gets a count >= 1, all drawn, all or nothing
LAUNCH_RULES = (PER_ATTEMPT, ATOMIC)

COMPLETED = "completed"
BUDGET_EXHAUSTED = "budget_exhausted"
DEADLINE_EXHAUSTED = "deadline_exhausted"
STALLED = "stalled"

#: The one place of the refused-draw rule (per-attempt launch). True (the rule,
#: docs/semantics.md, as in the published code): the refused draw is consumed
#: and the node's next attempt is a fresh draw. False (the rule before it was
#: fixed): a refused attempt does not advance the (node, model) attempt
#: counter, so the node meets the same draw at its next decision. Runs can
#: override it with ``run_episode(refused_draw_consumed=...)``.
REFUSED_DRAW_CONSUMED = True

#: r_v cap of the static baselines when kappa_v is tiny (docs/semantics.md)
MAX_STATIC_COUNT = 1_000_000

#: The 12 baselines of the rules, in their order.
SEQUENTIAL_KS: dict[str, int] = {"sequential": 1, **{f"sequential_{k}": k for k in (2, 4, 8, 16, 32, 64)}}
STATIC_METHODS = ("uniform", "random", "latency_weighted", "success_rate_weighted", "critical_path_static")
BASELINE_METHODS = tuple(SEQUENTIAL_KS) + STATIC_METHODS

# MCPP's planner keys (docs/mcpp.md): batch b of node v is the sub-key v * 2**32 + b,
# and under common random numbers the candidate field is this constant.
PLANNER_BATCH_SHIFT = 2**32
PLANNER_CRN_CANDIDATE = 0x7FFFFFFF
_U64 = 2**64


# ---------------------------------------------------------------------------
# the DAG, as plain Python tables
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RefDag:
    """The statistics the rules talk about, as Python lists (read once from :class:`DagArrays`).

    The reference does not parse pools: it reads the compiled view of a DAG
    (the pool loader and the cost modes are tested elsewhere) and keeps the
    arrays only to hand them to the keyed draw.
    """

    arrays: DagArrays
    n: int
    m: int
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    node_ids: tuple[int, ...]
    available: tuple[tuple[bool, ...], ...]
    p: tuple[tuple[float, ...], ...]  # success probability (row mean when rows exist)
    lat_mean: tuple[tuple[float, ...], ...]
    kappa: tuple[tuple[float, ...], ...]  # expected attempt cost in the cost mode
    legacy: tuple[int, ...]  # the model the baselines use on each node

    @classmethod
    def from_arrays(cls, arr: DagArrays) -> RefDag:
        n, m = int(arr.n), int(arr.m)

        def csr(ptr: np.ndarray, idx: np.ndarray) -> tuple[tuple[int, ...], ...]:
            return tuple(tuple(int(x) for x in idx[ptr[v] : ptr[v + 1]]) for v in range(n))

        def table(a: np.ndarray, kind: type) -> tuple[tuple, ...]:
            return tuple(tuple(kind(a[v, j]) for j in range(m)) for v in range(n))

        return cls(
            arrays=arr,
            n=n,
            m=m,
            parents=csr(arr.parent_ptr, arr.parent_idx),
            children=csr(arr.child_ptr, arr.child_idx),
            node_ids=tuple(int(x) for x in arr.node_ids),
            available=table(arr.available, bool),
            p=table(arr.p, float),
            lat_mean=table(arr.lat_mean, float),
            kappa=table(arr.kappa, float),
            legacy=tuple(int(x) for x in arr.legacy),
        )


def as_ref_dag(dag: RefDag | DagArrays) -> RefDag:
    return dag if isinstance(dag, RefDag) else RefDag.from_arrays(dag)


# ---------------------------------------------------------------------------
# draws
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Draw:
    """One drawn attempt: latency (s), success, charged cost (cost-mode units)."""

    latency: float
    success: bool
    charge: float


class DrawSource(Protocol):
    """Where the draw of an attempt comes from.

    ``attempt`` is the (node, model) attempt counter (attempts of node v with
    model j charged so far in the episode), ``batch`` the number of batches
    node v started before this one, ``index`` the position of the attempt in
    its batch. A source uses whichever identifies its key.
    """

    def draw(self, v: int, j: int, attempt: int, batch: int, index: int) -> Draw: ...


def _u64(x: int) -> np.uint64:
    return np.uint64(int(x) % _U64)


class ExecutionDraws:
    """The simulator's keys: attempt i of node v with model j in trial ``trial`` of DAG ``dag``.

    Key = (run seed, DAG, trial, attempt stream, v, j, i) folded as in the
    compiled engine, so the same attempt meets the same luck in both.
    """

    def __init__(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        self.arr = arr
        self.base = _u64(make_key(int(seed), int(dag), int(trial), STREAM_ATTEMPT, 0, 0, 0))
        self._node_model: dict[tuple[int, int], np.uint64] = {}

    def key(self, v: int, j: int, attempt: int) -> np.uint64:
        nm = self._node_model.get((v, j))
        if nm is None:
            nm = self._node_model[(v, j)] = _u64(node_model_key(self.base, v, j))
        return _u64(fold(nm, attempt))

    def draw(self, v: int, j: int, attempt: int, batch: int, index: int) -> Draw:
        lat, succ, charge = draw_attempt(self.arr, v, j, self.key(v, j, attempt))
        return Draw(float(lat), bool(succ), float(charge))


class PlannerDraws:
    """The keys of MCPP's simulation ``sample`` of pair (``candidate``, ``member``) at ``decision``.

    Batch b of node v (b counts from 1; 0 is the redraw of a batch already in
    flight at the decision) has key ``fold(skey, v * 2**32 + b)``; attempt a
    of it ``bkey + a * golden`` (docs/mcpp.md). Running the reference loop
    with these draws from the decision's state reproduces one simulation of
    the compiled kernel.
    """

    def __init__(
        self,
        arr: DagArrays,
        seed: int,
        dag: int,
        trial: int,
        decision: int,
        candidate: int,
        member: int,
        sample: int,
        crn: bool = False,
    ) -> None:
        self.arr = arr
        dkey = make_key(int(seed), int(dag), int(trial), STREAM_PLANNER, int(decision), 0, 0)
        ckey = fold(_u64(dkey), PLANNER_CRN_CANDIDATE if crn else int(candidate))
        self.skey = _u64(fold(_u64(fold(_u64(ckey), int(member))), int(sample)))

    def draw(self, v: int, j: int, attempt: int, batch: int, index: int) -> Draw:
        bkey = int(fold(self.skey, v * PLANNER_BATCH_SHIFT + batch + 1))
        lat, succ, charge = draw_attempt(self.arr, v, j, _u64(bkey + index * int(GOLDEN)))
        return Draw(float(lat), bool(succ), float(charge))


# ---------------------------------------------------------------------------
# state and what a policy sees
# ---------------------------------------------------------------------------


@dataclass
class _Batch:
    """The batch in flight on a node: its attempts' absolute end times and successes."""

    model: int
    ends: list[float] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)

    @property
    def end(self) -> float:
        return max(self.ends)

    @property
    def success(self) -> bool:
        return any(self.successes)


@dataclass(frozen=True)
class InflightView:
    """A batch in flight as a planner sees it: exact remaining times, unknown outcomes."""

    node: int
    model: int
    count: int
    remaining: tuple[float, ...]  # remaining times of the attempts still running
    already_success: bool  # an attempt of this batch already finished with a success


@dataclass(frozen=True)
class StateView:
    """What a policy sees at a decision (read-only copies)."""

    dag: RefDag
    t: float
    budget: float
    budget_left: float
    deadline: float
    completed: tuple[bool, ...]
    ready: tuple[int, ...]  # ready nodes, pool order
    inflight: tuple[InflightView, ...]  # by node position
    num_started: tuple[int, ...]
    node_cost: tuple[float, ...]
    decision_index: int  # decisions before this one (every decision point counts)
    seed: int
    dag_key: int
    trial: int

    @property
    def remaining_time(self) -> float:
        return self.deadline - self.t


Action = Mapping[int, tuple[int, int]]
PolicyFn = Callable[[StateView], "Action | None"]


@dataclass
class Result:
    """Result of one reference episode (the fields of ``EpisodeResult`` / the records)."""

    reason: str
    makespan: float
    deadline: float
    budget: float
    total_cost: float
    total_rollouts: int
    decisions: int  # every decision point (what the compiled baselines report as planner calls)
    policy_calls: int  # decisions with a ready node, where the policy was asked (Python-policy driver)
    node_completed: list[bool]
    node_started: list[int]
    node_finished: list[int]
    node_success: list[int]
    node_cost: list[float]

    @property
    def success(self) -> bool:
        return self.reason == COMPLETED

    @property
    def completion_fraction(self) -> float:
        return sum(self.node_completed) / len(self.node_completed)


class _Episode:
    """State of one episode (``simulator.md``, "State") and the rules that change it."""

    def __init__(
        self,
        dag: RefDag,
        budget: float,
        deadline: float,
        draws: DrawSource,
        caps: Sequence[float] | None,
        refused_draw_consumed: bool,
    ) -> None:
        n = dag.n
        self.dag = dag
        self.t = 0.0
        self.budget = float(budget)
        self.b = float(budget)
        self.D = float(deadline)
        self.draws = draws
        self.caps = [math.inf] * n if caps is None else [float(c) for c in caps]
        self.refused_draw_consumed = bool(refused_draw_consumed)
        self.completed = [False] * n
        self.inflight: dict[int, _Batch] = {}
        self.started = [0] * n
        self.finished = [0] * n
        self.successes = [0] * n
        self.cost = [0.0] * n
        self.batches = [0] * n  # batches started per node
        self.attempt_no: dict[tuple[int, int], int] = {}  # (node, model) -> attempts charged
        self.rollouts = 0
        self.decisions = 0
        self.policy_calls = 0
        self.reason: str | None = None

    # -- node status -------------------------------------------------------------------

    def unlocked(self, v: int) -> bool:
        return all(self.completed[u] for u in self.dag.parents[v])

    def is_ready(self, v: int) -> bool:
        """Unlocked, not completed, nothing in flight."""
        return self.unlocked(v) and not self.completed[v] and v not in self.inflight

    def ready(self) -> list[int]:
        return [v for v in range(self.dag.n) if self.is_ready(v)]

    def all_completed(self) -> bool:
        return all(self.completed)

    # -- charging ----------------------------------------------------------------------

    def _charge(self, v: int, j: int, d: Draw) -> None:
        """Charge one attempt at launch and put it in the node's batch (cost is never refunded)."""
        batch = self.inflight.get(v)
        if batch is None:
            batch = self.inflight[v] = _Batch(model=j)
            self.batches[v] += 1
        self.b -= d.charge
        self.cost[v] += d.charge
        self.started[v] += 1
        self.rollouts += 1
        self.attempt_no[(v, j)] = self.attempt_no.get((v, j), 0) + 1
        batch.ends.append(self.t + d.latency)
        batch.successes.append(d.success)

    def _refused(self, v: int, j: int) -> None:
        """A per-attempt launch refused a draw: nothing is charged; the counter rule is the flag."""
        if self.refused_draw_consumed:
            self.attempt_no[(v, j)] = self.attempt_no.get((v, j), 0) + 1

    # -- the two launch rules ----------------------------------------------------------

    def launch_per_attempt(self, action: Action) -> None:
        """Per-attempt launch: nodes by decreasing count (ties to the higher node id), attempts in order.

        Each attempt is drawn; it is refused if its cost exceeds the remaining
        budget or would take the node's cumulative cost past its cap, and a
        refusal ends that node's launch at this decision. Requests on nodes
        that are not ready, with count < 1 or an unavailable model are ignored.
        """
        dag = self.dag
        requests = [
            (v, int(j), int(c))
            for v, (j, c) in action.items()
            if int(c) >= 1 and self.is_ready(v) and 0 <= int(j) < dag.m and dag.available[v][int(j)]
        ]
        requests.sort(key=lambda r: (-r[2], -dag.node_ids[r[0]]))
        for v, j, count in requests:
            for a in range(count):
                d = self.draws.draw(v, j, self.attempt_no.get((v, j), 0), self.batches[v], a)
                if d.charge > self.b or self.cost[v] + d.charge > self.caps[v]:
                    self._refused(v, j)
                    break
                self._charge(v, j, d)

    def launch_atomic(self, action: Action) -> bool:
        """Atomic launch; True when it ended the episode.

        Every ready node must get an available model and a count >= 1 (else
        ``stalled``). All attempts are drawn first; the largest latency beyond
        ``D - t`` ends the episode ``deadline_exhausted`` at ``t = D``; else a
        summed cost beyond ``b`` ends it ``budget_exhausted``; else every
        attempt is charged and scheduled.
        """
        dag = self.dag
        ready = self.ready()
        plan: list[tuple[int, int, list[Draw]]] = []
        for v in ready:
            if v not in action:
                self.reason = STALLED
                return True
            j, c = int(action[v][0]), int(action[v][1])
            if c < 1 or not 0 <= j < dag.m or not dag.available[v][j]:
                self.reason = STALLED
                return True
            a0 = self.attempt_no.get((v, j), 0)
            plan.append((v, j, [self.draws.draw(v, j, a0 + a, self.batches[v], a) for a in range(c)]))
        draws = [d for _, _, ds in plan for d in ds]
        total = 0.0
        for d in draws:  # summed in launch order (ready nodes in pool order)
            total += d.charge
        if max((d.latency for d in draws), default=0.0) > self.D - self.t:
            self.t = self.D
            self.reason = DEADLINE_EXHAUSTED
            return True
        if total > self.b:
            self.reason = BUDGET_EXHAUSTED
            return True
        for v, j, ds in plan:
            for d in ds:
                self._charge(v, j, d)
        return False

    # -- events ------------------------------------------------------------------------

    def next_batch(self) -> int:
        """The node whose batch ends first (ties to the lower node position)."""
        return min(self.inflight, key=lambda v: (self.inflight[v].end, v))

    def end_batch(self, v: int) -> None:
        """The batch's last attempt finished: the node completes if one attempt succeeded."""
        batch = self.inflight.pop(v)
        self.t = batch.end
        self.finished[v] += len(batch.ends)
        self.successes[v] += sum(batch.successes)
        if batch.success:
            self.completed[v] = True  # children whose parents are all complete are now unlocked

    def no_progress_reason(self, models: Sequence[Sequence[int]]) -> str:
        """Why an idle episode cannot go on: time, no affordable model on a ready node, or stalled."""
        if self.t >= self.D:
            return DEADLINE_EXHAUSTED
        dag = self.dag
        for v in self.ready():
            room = min(self.b, self.caps[v] - self.cost[v])
            if any(dag.available[v][j] and dag.kappa[v][j] <= room for j in models[v]):
                return STALLED
        return BUDGET_EXHAUSTED

    # -- the policy's view -------------------------------------------------------------

    def view(self, ready: list[int], seed: int, dag_key: int, trial: int) -> StateView:
        inflight = []
        for v in sorted(self.inflight):
            batch = self.inflight[v]
            running = [e - self.t for e in batch.ends if e > self.t]
            done_success = any(s for e, s in zip(batch.ends, batch.successes) if e <= self.t)
            inflight.append(InflightView(v, batch.model, len(batch.ends), tuple(running), done_success))
        return StateView(
            dag=self.dag,
            t=self.t,
            budget=self.budget,
            budget_left=self.b,
            deadline=self.D,
            completed=tuple(self.completed),
            ready=tuple(ready),
            inflight=tuple(inflight),
            num_started=tuple(self.started),
            node_cost=tuple(self.cost),
            decision_index=self.decisions,
            seed=seed,
            dag_key=dag_key,
            trial=trial,
        )


def run_episode(
    dag: RefDag | DagArrays,
    policy: PolicyFn,
    budget: float,
    *,
    seed: int,
    dag_key: int,
    trial: int,
    launch: str,
    deadline: float = math.inf,
    caps: Sequence[float] | None = None,
    no_progress_models: Sequence[Sequence[int]] | None = None,
    draws: DrawSource | None = None,
    refused_draw_consumed: bool = REFUSED_DRAW_CONSUMED,
) -> Result:
    """One episode of ``policy`` under ``launch`` (``PER_ATTEMPT`` or ``ATOMIC``).

    ``deadline`` is hard when finite (``math.inf``: score the result with
    :func:`score`). ``caps`` are per-node caps on cumulative cost (per-attempt
    launch; static baselines). ``no_progress_models[v]`` lists the models the
    no-progress reason may consider on node v (default: every model).
    ``draws`` defaults to the simulator's keyed draws of (seed, dag_key, trial).

    The loop (``simulator.md``): 1. all completed -> ``completed`` (checked
    first: finishing exactly at D counts), ``t >= D`` -> ``deadline_exhausted``;
    2. nothing in flight: decide; if the launch ended the episode stop; if
    still nothing in flight, end with the no-progress reason; 3. the next
    batch ends after D -> ``t = D``, ``deadline_exhausted``; 4. pop it; the
    batch end is a decision if the DAG is not done and ``t < D``.
    """
    if launch not in LAUNCH_RULES:
        raise ValueError(f"unknown launch rule {launch!r}; choose one of {LAUNCH_RULES}")
    rd = as_ref_dag(dag)
    if draws is None:
        draws = ExecutionDraws(rd.arrays, seed, dag_key, trial)
    models = no_progress_models if no_progress_models is not None else [range(rd.m)] * rd.n
    ep = _Episode(rd, budget, deadline, draws, caps, refused_draw_consumed)
    # every episode ends: a node none of the allowed models can ever complete (available with p > 0) ends it
    # stalled at once, before anything is spent (docs/semantics.md, "Every episode ends")
    hopeless = any(not any(rd.available[v][j] and rd.p[v][j] > 0.0 for j in models[v]) for v in range(rd.n))
    if hopeless:
        ep.reason = STALLED

    def decide() -> bool:
        """One decision point; True when the launch ended the episode."""
        ready = ep.ready()
        action = None
        if ready:  # a decision with no ready node has nothing to ask
            action = policy(ep.view(ready, seed, dag_key, trial))
            ep.policy_calls += 1
        ep.decisions += 1
        if action is None:
            return False
        if launch == PER_ATTEMPT:
            ep.launch_per_attempt(action)
            return False
        return ep.launch_atomic(action)

    while ep.reason is None:
        if ep.all_completed():
            ep.reason = COMPLETED
            break
        if ep.t >= ep.D:
            ep.reason = DEADLINE_EXHAUSTED
            break
        if not ep.inflight:
            if decide():
                break
            if not ep.inflight:
                ep.reason = ep.no_progress_reason(models)
                break
            continue
        v = ep.next_batch()
        if ep.inflight[v].end > ep.D:
            ep.t = ep.D
            ep.reason = DEADLINE_EXHAUSTED
            break
        ep.end_batch(v)
        if not ep.all_completed() and ep.t < ep.D:
            if decide():
                break
    assert ep.reason is not None
    return Result(
        reason=ep.reason,
        makespan=ep.t,
        deadline=ep.D,
        budget=ep.budget,
        total_cost=ep.budget - ep.b,
        total_rollouts=ep.rollouts,
        decisions=ep.decisions,
        policy_calls=ep.policy_calls,
        node_completed=list(ep.completed),
        node_started=list(ep.started),
        node_finished=list(ep.finished),
        node_success=list(ep.successes),
        node_cost=list(ep.cost),
    )


def score(result: Result, deadline: float, planner_calls: str = "decisions") -> dict:
    """The record of ``result`` at ``deadline`` (a run without deadline scored afterwards).

    On-time success = completed and makespan <= deadline. A run still going
    at the deadline is reported as the loop with that deadline would have
    ended it: ``deadline_exhausted`` with makespan = deadline; the uncapped
    time is ``makespan_unconstrained``. ``planner_calls`` names the count
    reported: ``decisions`` (compiled baselines) or ``policy_calls``.
    """
    if planner_calls not in ("decisions", "policy_calls"):
        raise ValueError(f"planner_calls must be 'decisions' or 'policy_calls', got {planner_calls!r}")
    D = float(deadline)
    mk = result.makespan
    late = mk > D
    return {
        "deadline": D,
        "success": result.success,
        "on_time_success": result.success and mk <= D,
        "termination_reason": DEADLINE_EXHAUSTED if late else result.reason,
        "makespan": D if late else mk,
        "makespan_unconstrained": mk,
        "remaining_deadline": max(D - mk, 0.0) if math.isfinite(D) else None,
        "total_cost": result.total_cost,
        "total_rollouts": result.total_rollouts,
        "completion_fraction": result.completion_fraction,
        "planner_calls": getattr(result, planner_calls),
    }


# ---------------------------------------------------------------------------
# policies: the 12 baselines and the portfolio members
# ---------------------------------------------------------------------------


def sequential_policy(k: int, models: Sequence[int]) -> PolicyFn:
    """Sequential-k: every ready node gets k attempts of its model ``models[v]``, at every decision."""

    def act(view: StateView) -> Action:
        return {v: (models[v], k) for v in view.ready}

    return act


def dispatch_once_policy(counts: Sequence[int], models: Sequence[int]) -> PolicyFn:
    """Static dispatch-once: a node gets ``counts[v]`` attempts at its first decision, never again.

    A node counts as dispatched at that decision even if every attempt was refused.
    """
    dispatched: set[int] = set()

    def act(view: StateView) -> Action:
        action = {}
        for v in view.ready:
            if v not in dispatched:
                dispatched.add(v)
                action[v] = (models[v], int(counts[v]))
        return action

    return act


def seq_member_policy(model: int, k: int) -> PolicyFn:
    """Portfolio member Seq-(m, k): every ready node gets (m, k); waits (None) if a ready node lacks m."""

    def act(view: StateView) -> Action | None:
        if not all(view.dag.available[v][model] for v in view.ready):
            return None
        return {v: (model, k) for v in view.ready}

    return act


def _critical_path(dag: RefDag, lat: list[float]) -> list[float]:
    """Longest ``lat``-weighted path from each node to a sink, the node included."""
    memo: dict[int, float] = {}

    def cp(v: int) -> float:
        if v not in memo:
            memo[v] = lat[v] + max((cp(c) for c in dag.children[v]), default=0.0)
        return memo[v]

    return [cp(v) for v in range(dag.n)]


def static_weights(dag: RefDag, method: str, seed: int, dag_key: int, trial: int) -> list[float]:
    """Budget-share weights of a static baseline (legacy model statistics).

    ``random`` draws Exp(1) weights keyed by (run seed, DAG, trial) -- normalised
    they are Dirichlet(1, ..., 1). If a weight is not finite or they sum to 0
    (e.g. ``success_rate_weighted`` with every p = 1) the shares are uniform.
    """
    n, legacy = dag.n, dag.legacy
    lat = [dag.lat_mean[v][legacy[v]] for v in range(n)]
    lat = [x if math.isfinite(x) else 0.0 for x in lat]
    if method == "random":
        key = _u64(make_key(int(seed), int(dag_key), int(trial), STREAM_STATIC, 0, 0, 0))
        return [-math.log(uniform(key, v)) for v in range(n)]
    if method == "uniform":
        w = [1.0] * n
    elif method == "latency_weighted":
        w = lat
    elif method == "success_rate_weighted":
        w = [1.0 - dag.p[v][legacy[v]] for v in range(n)]
    elif method == "critical_path_static":
        w = _critical_path(dag, lat)
    else:
        raise ValueError(f"unknown static baseline {method!r}")
    total = 0.0
    for x in w:
        total += x
    if not all(math.isfinite(x) for x in w) or total <= 0:
        w = [1.0] * n
    return w


def static_plan(
    dag: RefDag | DagArrays, method: str, budget: float, seed: int, dag_key: int, trial: int
) -> tuple[list[float], list[int]]:
    """Per-node caps ``B_v`` (share of the budget) and counts ``r_v = max(1, floor(B_v / kappa_v))``."""
    rd = as_ref_dag(dag)
    w = static_weights(rd, method, seed, dag_key, trial)
    total = 0.0
    for x in w:
        total += x
    caps, counts = [], []
    for v in range(rd.n):
        cap = budget * w[v] / total
        kap = rd.kappa[v][rd.legacy[v]]
        q = cap / kap if kap > 0 else math.inf
        if math.isnan(q) or q < 1.0:
            r = 1
        elif q >= MAX_STATIC_COUNT:
            r = MAX_STATIC_COUNT
        else:
            r = math.floor(q)
        caps.append(cap)
        counts.append(r)
    return caps, counts


@dataclass
class BaselineSetup:
    """A baseline as a plain policy plus its per-node caps and no-progress models."""

    policy: PolicyFn
    caps: list[float] | None
    no_progress_models: list[list[int]]


def baseline_setup(
    dag: RefDag | DagArrays, method: str, budget: float, seed: int, dag_key: int, trial: int
) -> BaselineSetup:
    """The policy of baseline ``method`` for one episode (static shares are per trial for ``random``)."""
    rd = as_ref_dag(dag)
    legacy = list(rd.legacy)
    only_legacy = [[j] for j in legacy]
    if method in SEQUENTIAL_KS:
        return BaselineSetup(sequential_policy(SEQUENTIAL_KS[method], legacy), None, only_legacy)
    if method in STATIC_METHODS:
        caps, counts = static_plan(rd, method, budget, seed, dag_key, trial)
        return BaselineSetup(dispatch_once_policy(counts, legacy), caps, only_legacy)
    raise ValueError(f"unknown baseline {method!r}; choose one of {', '.join(BASELINE_METHODS)}")


def run_baseline(
    dag: RefDag | DagArrays,
    method: str,
    budget: float,
    *,
    seed: int,
    dag_key: int,
    trial: int,
    deadline: float = math.inf,
    launch: str = PER_ATTEMPT,
    refused_draw_consumed: bool = REFUSED_DRAW_CONSUMED,
) -> Result:
    """One episode of a baseline (by default as the experiment runs it: per-attempt, D = inf)."""
    rd = as_ref_dag(dag)
    setup = baseline_setup(rd, method, budget, seed, dag_key, trial)
    return run_episode(
        rd,
        setup.policy,
        budget,
        seed=seed,
        dag_key=dag_key,
        trial=trial,
        launch=launch,
        deadline=deadline,
        caps=setup.caps,
        no_progress_models=setup.no_progress_models,
        refused_draw_consumed=refused_draw_consumed,
    )

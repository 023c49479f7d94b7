"""One live run: the event-driven loop that plans, launches requests, judges answers and keeps the ledger.

The rules are the simulator's (``docs/simulator.md``) wherever a live run
can follow them, and ``docs/executor.md`` lists where it cannot:

* **Decisions.** At the start and after every finished batch the method is
  asked (through its registry entry: :func:`simulator.simulate.policy_for`,
  the same policy objects the simulator drives) with the state of the run:
  completed nodes, in-flight batches (with the estimated remaining times of
  their running samples, :mod:`executor.estimates`), budget left = budget -
  spent - reserved - unbilled, time left = deadline - elapsed. The call runs
  on the planner thread (the kernels release the interpreter lock), so the
  event loop keeps serving the other runs; on a pausable clock the model
  time stops meanwhile.
* **Launches.** Per-attempt methods (the baselines) are served in decreasing
  count, ties to the higher node id; an attempt whose expected cost does not
  fit in the budget left (or in the node's static cap) is refused, its
  attempt number consumed, the rest of that node's batch skipped. Atomic
  methods (MCPP) launch the whole action or nothing: an action whose
  expected cost does not fit ends the run ``budget_exhausted``, as the
  simulator's atomic refusal (which compares the drawn costs; a live run
  knows only their expectation).
* **Batches.** A batch ends when all its samples are judged; the node
  completes if any passed (``cancel_siblings``: the others are cancelled once
  one passes).
* **Budget, hard.** Each request reserves its worst case (prompt bound x
  input price + its ``max_tokens`` x output price; in token mode its
  ``max_tokens``, the simulator's charge being output tokens) before it is
  sent, and is reconciled with the reported usage (a local count when none
  is reported), never above its reservation. A request's ``max_tokens`` is
  the endpoint's, lowered when the budget left cannot pay it: to what the
  budget left pays (per-attempt launch), or to the sample's share of it, in
  proportion to the samples' expected costs (atomic launch); an answer cut
  there ends ``truncated`` and normally fails its verifier. A request that ends without an
  answer keeps its reservation as *unbilled* (what a provider might still
  bill), so spent + unbilled <= budget always.
* **Deadline, hard.** Every try's timeout is at most the time left; at the
  deadline every in-flight request is cancelled and the run ends
  ``deadline_exhausted``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import numpy as np

from executor.client import (
    RETRYABLE,
    UNKNOWN_BILLING,
    EndpointHealth,
    backoff_s,
    prompt_token_bound,
    try_once,
)
from executor.clock import Clock
from executor.endpoints import Endpoint
from executor.estimates import Observations, Residuals, posterior_arrays
from executor.tasks import Task
from executor.trace import Trace
from simulator.baselines.compiled import static_plan
from simulator.costs.arrays import DagArrays
from simulator.engine.loop import first_uncompletable
from simulator.engine.registry import PER_ATTEMPT
from simulator.mcpp.api import build_view
from simulator.methods import method_spec
from simulator.pools.pool import DagStats
from simulator.simulate import policy_for

TERMINATIONS = ("completed", "budget_exhausted", "deadline_exhausted", "stalled", "provider_unavailable")
#: one planner thread for the whole process: planner calls never run on the event loop, and the
#: kernels' own threads (simulator/base/threads.py) are shared, not multiplied by concurrent runs
_PLANNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner")


@dataclass
class Workflow:
    """One pool line (its statistics in the run's cost setting) and a task per node."""

    stats: DagStats
    arr: DagArrays  # planner/charge arrays in the run's cost mode (prices: the endpoints' output prices)
    tasks: Mapping[int, Task]
    cost_mode: str  # token_cost_mean or output_money_cost_mean
    source: str = ""

    @property
    def dag_row(self) -> int:
        return int(self.stats.index)


@dataclass
class Options:
    """How a run behaves beyond the method (defaults: the simulator's rules)."""

    cancel_siblings: bool = False
    update: str = "off"  # "posterior": online re-estimation before each plan
    prior_strength: float = 8.0
    max_tries: int = 6
    backoff_base_s: float = 0.05
    backoff_cap_s: float = 2.0
    down_after: int = 8
    temperature: float | None = None
    fsync: str = "background"
    #: plan once before the clock starts (the first call compiles MCPP's kernels on a cold cache: seconds)
    warm_up: bool = False


@dataclass
class RunResult:
    success: bool
    on_time: bool
    termination: str
    makespan_s: float
    wall_s: float
    spent: float
    unbilled: float
    requests: int
    retries: int
    plans: int
    planner_ms: float
    message: str = ""
    overhead_ms: list[float] = field(default_factory=list)


class _Ended(Exception):
    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.message = message


@dataclass
class _Sample:
    index: int  # attempt number of (node, model) in the run (the world's draw key)
    reservation: float
    max_tokens: int
    task: asyncio.Task | None = None
    passed: bool = False
    done: bool = False


@dataclass
class _Batch:
    v: int
    j: int
    t_launch: float
    samples: list[_Sample]
    judged: int = 0
    passed: bool = False
    answers: dict[int, str] = field(default_factory=dict)


class LiveRun:
    """One run of a workflow by a method under a budget (cost unit) and a deadline (model seconds)."""

    def __init__(self, wf: Workflow, endpoints: Mapping[str, Endpoint], method: str, budget: float,
                 deadline: float, *, http: httpx.AsyncClient, clock: Clock, trace: Trace,
                 params: Mapping[str, Any] | None = None, seed: int = 0, trial: int = 0,
                 options: Options | None = None, health: EndpointHealth | None = None,
                 limits: Mapping[str, asyncio.Semaphore] | None = None) -> None:
        self.wf, self.endpoints, self.method = wf, endpoints, method
        self.budget, self.deadline = float(budget), float(deadline)
        self.http, self.clock, self.trace = http, clock, trace
        self.seed, self.trial = int(seed), int(trial)
        self.opt = options or Options()
        self.health = health or EndpointHealth(self.opt.down_after)
        self.limits = limits if limits is not None else {m: asyncio.Semaphore(ep.concurrency)
                                                         for m, ep in endpoints.items()}
        self.spec = method_spec(method)
        arr = wf.arr
        self.policy, self.launch_rule = policy_for(method, params, None, wf.stats.model_ids)
        self.policy.reset(arr, self.seed, wf.dag_row, self.trial)
        self.mask = np.zeros(arr.m, dtype=np.bool_)
        self.mask[getattr(self.policy, "model_positions", lambda a: np.arange(a.m))(arr)] = True
        self.legacy_only = bool(getattr(self.policy, "legacy_only", False))
        self.cap = np.full(arr.n, np.inf)
        if self.spec.compiled and self.spec.rule(arr).seq_k == 0:  # static baselines: their per-node caps
            self.cap = static_plan(arr, self.spec.rule(arr), self.budget, self.seed, wf.dag_row, self.trial)[0]
        self.n, self.m = arr.n, arr.m
        self.node_ids = [int(x) for x in wf.stats.node_ids]
        self.parents = [list(arr.parent_idx[arr.parent_ptr[v]:arr.parent_ptr[v + 1]]) for v in range(arr.n)]
        self.completed = np.zeros(arr.n, dtype=np.bool_)
        self.batches: dict[int, _Batch] = {}
        self.attempt_no = np.zeros(arr.n * arr.m, dtype=np.int64)
        self.node_cost = np.zeros(arr.n)
        self.accepted: dict[int, str] = {}  # node position -> the passing answer (its children's context)
        self.spent = self.reserved = self.unbilled = 0.0
        self.finished: asyncio.Queue[int] = asyncio.Queue()
        self.residuals = Residuals(arr)
        self.obs = Observations()
        self.rng = random.Random(self.seed * 1_000_003 + self.trial)
        self.decisions = self.requests = self.retries = 0
        self.planner_ms = 0.0
        self.planner_wall = 0.0  # seconds spent waiting for planner calls (queue included)
        self.overhead_ms: list[float] = []  # per batch end: the executor's own time (planner call excluded)
        self.t0 = 0.0
        self._fatal: _Ended | None = None
        self._wake = asyncio.Event()
        #: set once the first decision has launched (or the run ended): ``agree``'s start barrier waits for it
        self.launched = asyncio.Event()
        self.samples_started = 0

    # -- time and money --------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.clock.now() - self.t0

    def time_left(self) -> float:
        return self.deadline - self.elapsed()

    def available(self) -> float:
        return self.budget - self.spent - self.reserved - self.unbilled

    def cost(self, ep: Endpoint, prompt_tokens: float, completion_tokens: float) -> float:
        """The charge of a request in the run's cost unit: the simulator's charge of the same attempt."""
        if self.wf.cost_mode == "token_cost_mean":
            return float(completion_tokens)
        return prompt_tokens * (ep.input_price_per_1m / 1e6) + completion_tokens * (ep.output_price_per_1m / 1e6)

    def expected_cost(self, v: int, j: int) -> float:
        """Expected cost of one sample: the planner's kappa(v, j) plus the bound on its prompt's cost."""
        ep = self.endpoints[self.wf.stats.model_ids[j]]
        return float(self.wf.arr.kappa[v, j]) + self.cost(ep, prompt_token_bound(self.messages(v)), 0)

    def capped(self, v: int, j: int, room: float) -> tuple[int, float]:
        """(max_tokens, reservation) of one sample that may reserve at most ``room`` (max_tokens 0: nothing fits)."""
        ep = self.endpoints[self.wf.stats.model_ids[j]]
        prompt = self.cost(ep, prompt_token_bound(self.messages(v)), 0)
        per_token = self.cost(ep, 0, 1)
        tokens = ep.max_tokens if per_token <= 0 else min(ep.max_tokens, int((room - prompt) // per_token))
        tokens = max(tokens, 0)
        return tokens, prompt + tokens * per_token

    def messages(self, v: int) -> list[dict[str, str]]:
        parents = {self.node_ids[p]: self.accepted.get(p, "") for p in self.parents[v]}
        return self.wf.tasks[self.node_ids[v]].messages(self.wf.stats.problem_id, parents)

    def ledger(self) -> None:
        self.trace.write("ledger", t=round(self.elapsed(), 6), spent=self.spent, reserved=self.reserved,
                         unbilled=self.unbilled, budget=self.budget)

    # -- the run ---------------------------------------------------------------------------

    async def warm_up(self) -> None:
        """One throwaway decision on the initial state, before the deadline's clock starts."""
        if not hasattr(self.policy, "decide") or not self.ready():
            return
        view = build_view(self.wf.stats, self.wf.arr, self.budget, self.deadline, [], [], self.seed, 0)
        await asyncio.get_running_loop().run_in_executor(_PLANNER, self.policy.decide, view)

    async def run(self) -> RunResult:
        st = self.wf.stats
        if self.opt.warm_up:
            await self.warm_up()
        self.t0 = self.clock.now()
        wall0 = time.perf_counter()
        self.trace.write("run", method=self.method, problem_id=st.problem_id, dag=self.wf.dag_row,
                         source=self.wf.source, n_nodes=self.n, node_ids=self.node_ids, budget=self.budget,
                         deadline_s=self.deadline, cost_mode=self.wf.cost_mode, time_scale=self.clock.scale,
                         clock_pauses_for_planning=self.clock.pausable, seed=self.seed, trial=self.trial,
                         launch=self.launch_rule, update=self.opt.update, cancel_siblings=self.opt.cancel_siblings,
                         models={m: {"base_url": e.base_url, "model": e.model} for m, e in self.endpoints.items()
                                 if m in st.model_ids})
        deadline_task = asyncio.ensure_future(self.clock.sleep_until(self.t0 + self.deadline))
        reason, message = "completed", ""
        try:
            if first_uncompletable(self.wf.arr, self.mask, self.legacy_only) >= 0:
                raise _Ended("stalled", "a node no allowed model can complete")
            await self.decide()
            self.launched.set()
            while True:
                if self.completed.all():
                    break
                if self.elapsed() >= self.deadline:
                    raise _Ended("deadline_exhausted")
                if not self.batches:
                    raise _Ended(self.no_progress_reason())
                getter = asyncio.ensure_future(self.finished.get())
                waker = asyncio.ensure_future(self._wake.wait())
                done, _ = await asyncio.wait({getter, deadline_task, waker}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                if self._fatal is not None:
                    getter.cancel()
                    raise self._fatal
                if getter not in done:
                    getter.cancel()
                    if deadline_task in done:
                        raise _Ended("deadline_exhausted")
                    continue
                t_ev = time.perf_counter()
                plan_before = self.planner_wall
                v = getter.result()
                self.end_batch(v)
                if not self.completed.all() and self.elapsed() < self.deadline:
                    await self.decide()
                # the event's own cost: handling the batch end, the replanning bookkeeping and the launches,
                # not the planner call (which runs on the planner thread while the loop serves others)
                self.overhead_ms.append((time.perf_counter() - t_ev - (self.planner_wall - plan_before)) * 1e3)
        except _Ended as e:
            reason, message = e.reason, e.message
        finally:
            self.launched.set()
            deadline_task.cancel()
            await self.cancel_all()
        makespan = min(self.elapsed(), self.deadline) if reason != "completed" else self.elapsed()
        success = reason == "completed"
        on_time = success and makespan <= self.deadline
        res = RunResult(success, on_time, reason, makespan, time.perf_counter() - wall0, self.spent,
                        self.unbilled, self.requests, self.retries, self.decisions, self.planner_ms, message,
                        self.overhead_ms)
        self.trace.write("end", t=round(self.elapsed(), 6), success=success, on_time=on_time,
                         makespan_s=makespan, wall_s=res.wall_s, spent=self.spent, unbilled=self.unbilled,
                         budget=self.budget, termination=reason, message=message,
                         nodes_completed=[self.node_ids[v] for v in range(self.n) if self.completed[v]])
        return res

    def no_progress_reason(self) -> str:
        """Nothing in flight and nothing launched: deadline, budget (no expected cost fits) or stalled."""
        if self.elapsed() >= self.deadline:
            return "deadline_exhausted"
        for v in self.ready():
            for j in range(self.m):
                allowed = (j == int(self.wf.arr.legacy[v])) if self.legacy_only else self.mask[j]
                if allowed and self.wf.arr.available[v, j]:
                    need = self.expected_cost(v, j)
                    if need <= self.available() and self.node_cost[v] + need <= self.cap[v]:
                        return "stalled"
        return "budget_exhausted"

    def ready(self) -> list[int]:
        return [v for v in range(self.n) if not self.completed[v] and v not in self.batches
                and all(self.completed[p] for p in self.parents[v])]

    # -- decisions -------------------------------------------------------------------------

    def planner_arrays(self) -> DagArrays:
        if self.opt.update == "posterior":
            return posterior_arrays(self.wf.arr, self.obs, self.opt.prior_strength, self.seed)
        return self.wf.arr

    async def decide(self) -> None:
        ready = self.ready()
        per_attempt = self.launch_rule == PER_ATTEMPT
        if not ready:  # every remaining node waits on a batch in flight: plan again after the next one ends
            return
        now = self.elapsed()
        inflight = []
        for v, b in sorted(self.batches.items()):
            rem = [self.residuals.remaining(v, b.j, now - b.t_launch) for s in b.samples if not s.done]
            inflight.append({"node_id": self.node_ids[v], "model": self.wf.stats.model_ids[b.j],
                             "remaining": rem, "already_success": b.passed})
        arr = self.wf.arr
        view = build_view(self.wf.stats, arr, max(0.0, self.available()), max(self.time_left(), 1e-9),
                          [self.node_ids[v] for v in range(self.n) if self.completed[v]], inflight,
                          self.seed, self.decisions)
        view = replace(view, dag=self.wf.dag_row, trial=self.trial)
        posterior = self.opt.update == "posterior" and hasattr(self.policy, "planning_arr")
        estimate = None
        t_plan = time.perf_counter()
        with self.clock.paused():
            if posterior:
                parr = self.planner_arrays()
                self.policy.planning_arr = parr
                self.policy.reset(arr, self.seed, self.wf.dag_row, self.trial)
            if hasattr(self.policy, "decide"):
                d = await asyncio.get_running_loop().run_in_executor(_PLANNER, self.policy.decide, view)
                action = None if d is None else (d.act_model, d.act_count)
                estimate = None if d is None else float(d.score)
            else:
                action = await asyncio.get_running_loop().run_in_executor(_PLANNER, self.policy.act, view)
        plan_ms = (time.perf_counter() - t_plan) * 1e3
        self.planner_wall += plan_ms / 1e3
        self.planner_ms += plan_ms
        self.decisions += 1
        act = {}
        if action is not None:
            models, counts = action
            act = {self.node_ids[v]: [self.wf.stats.model_ids[int(models[v])], int(counts[v])]
                   for v in ready if int(counts[v]) > 0 and int(models[v]) >= 0}
        self.trace.write("plan", t=round(now, 6), decision=self.decisions - 1, ready=[self.node_ids[v] for v in ready],
                         completed=[self.node_ids[v] for v in range(self.n) if self.completed[v]],
                         inflight=[f["node_id"] for f in inflight], budget_left=self.available(),
                         time_left=self.time_left(), action=act, estimate=estimate, planner_ms=round(plan_ms, 3))
        if action is not None:
            if per_attempt:
                self.launch_per_attempt(ready, action)
            else:
                self.launch_atomic(ready, action)

    # -- launches --------------------------------------------------------------------------

    def launch_per_attempt(self, ready: list[int], action) -> None:
        models, counts = (np.asarray(a, dtype=np.int64) for a in action)
        order = sorted((v for v in ready if counts[v] > 0), key=lambda v: (-int(counts[v]), -self.node_ids[v]))
        for v in order:
            j = int(models[v])
            if j < 0 or not self.wf.arr.available[v, j]:
                continue
            samples = []
            for _ in range(int(counts[v])):
                need = self.expected_cost(v, j)
                room = min(self.available(), self.cap[v] - self.node_cost[v])
                a = int(self.attempt_no[v * self.m + j])
                self.attempt_no[v * self.m + j] += 1  # a refused attempt's number is consumed, as in the simulator
                tokens, reservation = self.capped(v, j, room)
                if need > room or tokens < 1:
                    self.trace.write("request", t=round(self.elapsed(), 6), node=self.node_ids[v],
                                     model=self.wf.stats.model_ids[j], attempt=a, status="refused",
                                     expected_cost=need, budget_left=self.available())
                    break
                self.reserve(v, reservation)
                samples.append(_Sample(a, reservation, tokens))
            if samples:
                self.start_batch(v, j, samples)
        self.ledger()

    def launch_atomic(self, ready: list[int], action) -> None:
        models, counts = (np.asarray(a, dtype=np.int64) for a in action)
        plan = []
        total = 0.0
        for v in ready:
            j = int(models[v])
            if counts[v] < 1 or j < 0 or not self.wf.arr.available[v, j]:
                raise _Ended("stalled", f"the action gives node {self.node_ids[v]} no sample")
            need = self.expected_cost(v, j)
            plan.append((v, j, int(counts[v]), need))
            total += need * int(counts[v])
        avail = self.available()
        if total > avail:
            self.trace.write("request", t=round(self.elapsed(), 6), node=None, model=None, attempt=None,
                             status="refused", expected_cost=total, budget_left=avail)
            raise _Ended("budget_exhausted", "the launch's expected cost does not fit in the budget left")
        share = avail / total if total > 0 else np.inf  # >= 1: each sample may reserve share x its expected cost
        for v, j, k, need in plan:
            a0 = int(self.attempt_no[v * self.m + j])
            self.attempt_no[v * self.m + j] += k
            tokens, reservation = self.capped(v, j, need * share)
            for _ in range(k):
                self.reserve(v, reservation)
            self.start_batch(v, j, [_Sample(a0 + i, reservation, tokens) for i in range(k)])
        self.ledger()

    def reserve(self, v: int, amount: float) -> None:
        self.reserved += amount
        self.node_cost[v] += amount

    def start_batch(self, v: int, j: int, samples: list[_Sample]) -> None:
        b = _Batch(v, j, self.elapsed(), samples)
        self.batches[v] = b
        self.samples_started += len(samples)
        for s in samples:
            s.task = asyncio.ensure_future(self.sample(b, s))

    # -- one sample ------------------------------------------------------------------------

    async def sample(self, b: _Batch, s: _Sample) -> None:
        """Send one sample's request (with retries), judge the answer, report to its batch."""
        model_id = self.wf.stats.model_ids[b.j]
        ep = self.endpoints[model_id]
        v = b.v
        node_id = self.node_ids[v]
        msgs = self.messages(v)
        body: dict[str, Any] = {"model": ep.model, "messages": msgs, "max_tokens": s.max_tokens}
        if self.opt.temperature is not None:
            body["temperature"] = self.opt.temperature
        headers = {"X-MCPP-Dag": str(self.wf.dag_row), "X-MCPP-Node": str(node_id),
                   "X-MCPP-Trial": str(self.trial), "X-MCPP-Attempt": str(s.index)}
        faults: dict[str, int] = {}
        tries = 0
        start = self.elapsed()
        status, text, pt, ct, source, charge = "failed", "", 0, 0, "none", 0.0
        held = s.reservation  # the reservation this sample holds now (0 once settled)
        try:
            while True:
                tries += 1
                timeout = self.clock.timeout_for(self.time_left(), ep.request_timeout_s)
                if timeout <= 0:
                    status = "deadline"
                    break
                async with self.limits[model_id]:
                    self.requests += 1
                    r = await try_once(self.http, ep, body, headers, timeout, msgs)
                if self.health.record(model_id, r.kind):
                    self._fatal = _Ended("provider_unavailable",
                                         f"endpoint of model {model_id!r} ({ep.url}) is down: {r.kind} {r.detail}".strip())
                    self._wake.set()
                    status = "provider_unavailable"
                    break
                if r.kind in ("ok", "truncated"):
                    charge = min(self.cost(ep, r.prompt_tokens or 0, r.completion_tokens or 0), held)
                    over = self.cost(ep, r.prompt_tokens or 0, r.completion_tokens or 0) > held
                    self.settle(v, held, charge)
                    held = 0.0
                    pt, ct, source, text = r.prompt_tokens, r.completion_tokens, r.usage_source, r.text
                    if over:
                        faults["over_reservation"] = faults.get("over_reservation", 0) + 1
                    if r.kind == "ok":
                        status = "ok"
                        break
                faults[r.kind] = faults.get(r.kind, 0) + 1
                if r.kind == "truncated" and body["max_tokens"] < ep.max_tokens:
                    status = "truncated"  # cut where the budget capped it: a failed sample, not a fault to retry
                    break
                if r.kind not in RETRYABLE:
                    status = r.kind
                    break
                if r.kind in UNKNOWN_BILLING:  # what the provider bills is unknown: the reservation stays held
                    self.unbilled += held
                    self.reserved -= held
                    held = 0.0
                if tries >= self.opt.max_tries:
                    status = "gave_up"
                    break
                wait = backoff_s(tries, r.retry_after, self.opt.backoff_base_s, self.opt.backoff_cap_s, self.rng)
                if wait * 1.0 >= self.clock.to_wall(self.time_left()):
                    status = "deadline"
                    break
                if held == 0.0:  # a retry needs a fresh reservation (at most the one it had)
                    room = min(self.available(), self.cap[v] - self.node_cost[v], s.reservation)
                    tokens, reservation = self.capped(v, b.j, room)
                    if self.expected_cost(v, b.j) > room or tokens < 1:
                        status = "budget"
                        break
                    self.reserve(v, reservation)
                    held = reservation
                    body["max_tokens"] = tokens
                self.retries += 1
                await asyncio.sleep(wait)
        except asyncio.CancelledError:
            if held:
                self.unbilled += held
                self.reserved -= held
                held = 0.0
            self.trace.write("request", t=round(self.elapsed(), 6), node=node_id, model=model_id, attempt=s.index,
                             start=round(start, 6), end=round(self.elapsed(), 6), status="cancelled",
                             input_tokens=None, output_tokens=None, cost=0.0, retries=tries - 1, faults=faults)
            s.done = True
            raise
        if held:  # never answered: nothing known to be billed; the reservation is released
            self.reserved -= held
            self.node_cost[v] -= held
            held = 0.0
        end = self.elapsed()
        self.trace.write("request", t=round(end, 6), node=node_id, model=model_id, attempt=s.index,
                         start=round(start, 6), end=round(end, 6), status=status, input_tokens=pt, output_tokens=ct,
                         usage=source, cost=charge, max_tokens=int(body["max_tokens"]),
                         max_tokens_capped=bool(body["max_tokens"] < ep.max_tokens), retries=tries - 1, faults=faults)
        self.ledger()
        passed, why = False, status
        if status in ("ok", "truncated") or (status == "gave_up" and text):
            task: Task = self.wf.tasks[node_id]
            parents = {self.node_ids[p]: self.accepted.get(p, "") for p in self.parents[v]}
            if task.kind == "generic" and task.regex is not None:
                passed, why = task.judge(text, parents)
            else:
                passed, why = await asyncio.to_thread(task.judge, text, parents)
            self.obs.add(v, b.j, passed, end - start, charge)
        s.passed, s.done = passed, True
        b.judged += 1
        if passed and not b.passed:
            b.passed = True
            b.answers[s.index] = text
        self.trace.write("verdict", t=round(self.elapsed(), 6), node=node_id, model=model_id, attempt=s.index,
                         passed=passed, reason=why,
                         node_completed=bool(b.passed and (b.judged == len(b.samples) or self.opt.cancel_siblings)))
        if passed and self.opt.cancel_siblings:
            for o in b.samples:
                if o is not s and not o.done and o.task is not None:
                    o.task.cancel()
            self.finished.put_nowait(v)
        elif b.judged == len(b.samples) and not (b.passed and self.opt.cancel_siblings):
            self.finished.put_nowait(v)

    def settle(self, v: int, held: float, charge: float) -> None:
        """A sample's answer: its reservation becomes its charge."""
        self.reserved -= held
        self.spent += charge
        self.node_cost[v] += charge - held

    def end_batch(self, v: int) -> None:
        b = self.batches.pop(v, None)
        if b is None:
            return
        if b.passed:
            self.completed[v] = True
            self.accepted[v] = next(iter(b.answers.values()), "")

    async def cancel_all(self) -> None:
        tasks = [s.task for b in self.batches.values() for s in b.samples if s.task is not None and not s.task.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if tasks:
            self.ledger()

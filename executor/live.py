"""One live run: the event-driven loop that plans, launches requests, judges answers and keeps the ledger.

:class:`LiveRun` is the run's shell (the loop, the clock and its holds, the
trace, the deadline, the models' exits); its parts are
:mod:`executor.deciding` (the decisions), :mod:`executor.launching` (the
launches), :mod:`executor.sampling` (the HTTP side, with
:mod:`executor.retry`'s decision) and :mod:`executor.ledger` (the money).
The run follows the simulator's ``live`` execution rules: their state is
the run's :class:`simulator.engine.live_core.LiveCore` (completed nodes,
attempt numbers, batches in flight and their answers, what may still be
used), told what happens and asked what the rules say, as the simulated
live episode does (:mod:`simulator.engine.live_rules` holds their numbers;
``docs/semantics.md``), so a live episode and its simulated twin (the same
keyed draws) end the same way, and the method's planner plans for the rules
it will meet:

* **Decisions.** At the start and after every finished batch the method is
  asked (through its registry entry: :func:`simulator.simulate.policy_for`,
  the same policy objects the simulator drives) with the state of the run:
  completed nodes, in-flight batches (with the estimated remaining times of
  their running samples), the budget left (budget - charged - what batches
  in flight hold), time left = deadline - elapsed. The call runs on the
  planner thread (the kernels release the interpreter lock), so the event
  loop keeps serving the other runs; on a pausable clock the model time
  stops meanwhile.
* **Launches** are admitted on expected costs (the planner's kappa plus the
  prompt bound's cost): per attempt for the baselines (an attempt that does
  not fit is refused, its number consumed, the rest of its batch skipped),
  atomically for MCPP (an action that does not fit waits while batches are
  in flight, else ends the run ``budget_exhausted``). Each sample's
  ``max_tokens`` is its cap under the rules: the largest output the pool saw
  for that (node, model), lowered to what the budget left pays (per attempt)
  or to its share of it (atomic); an answer cut there is paid and fails.
* **Batches.** A batch ends when all its samples are judged; the node
  completes if any passed (``cancel_siblings``: the others are cancelled once
  one passes, a departure from the rules).
* **Budget, hard.** One :class:`~executor.ledger.Ledger` per run. Each
  request reserves its worst case before it is sent and is settled on the
  reported usage (without a usable usage report: at its reservation); a
  trusted report above the reservation (a server that answered more than
  asked) is spent as reported, kept apart (``over_reservation``), and
  ends the run when it leaves no budget. A request that reached the server
  without a whole answer keeps its reservation as *unbilled* and is never
  re-sent on it, so spent + unbilled - over_reservation <= budget always.
* **Deadline, hard.** Every try's timeout is at most the time left and
  bounds the whole try; planner calls and verdicts are raced against the
  deadline (:mod:`executor.offload`, :mod:`executor.verifiers`); at the
  deadline every in-flight request is cancelled and the run ends
  ``deadline_exhausted``. While the run is on the clock, the heap that was
  there before it is kept out of the garbage collector's full passes
  (:mod:`executor.gcpause`): one pass over a large process held the loop
  0.6 s.
* **Refusals.** A refusal that will repeat (``http_4xx``) is not re-sent:
  that (node, model) is out of the planner's view for the run; an endpoint
  that refuses everything (``http_fatal``, or three refusals in a row) or
  stays down is out for the run, and the method plans on with the models
  left. When some unfinished node has no model left, the run ends at once
  (``refused`` or ``provider_unavailable``) with the server's own words.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np

from executor import starvation
from executor.client import (
    DOWN_KINDS,
    EndpointHealth,
    TryResult,
)
from executor.clock import Clock
from executor.deciding import Decisions
from executor.endpoints import Endpoint
from executor.estimates import Observations, Residuals
from executor.gcpause import heap_frozen
from executor.launching import Launcher
from executor.ledger import Ledger
from executor.sampling import Batch, Ended, Sample, SampleRequests
from executor.tasks import Task
from executor.trace import Trace, summarize
from executor.workflow import EXECUTOR_VERSION
from simulator.costs.arrays import DagArrays
from simulator.engine.live_core import CoreBatch, LiveCore
from simulator.engine.live_episode import live_tables
from simulator.engine.registry import LIVE, execution_of
from simulator.methods import method_spec
from simulator.pools.pool import DagStats
from simulator.simulate import policy_for

TERMINATIONS = ("completed", "budget_exhausted", "deadline_exhausted", "stalled", "provider_unavailable", "refused",
                "interrupted")
#: exit status of ``executor run`` per termination (0: the run ended by its own rules)
EXIT_CODES = {"provider_unavailable": 3, "refused": 4, "interrupted": 130}


@dataclass
class Workflow:
    """One pool line (its statistics in the run's cost setting) and a task per node."""

    stats: DagStats
    arr: DagArrays  # planner/charge arrays in the run's cost mode (prices: the endpoints' output prices)
    tasks: Mapping[int, Task]
    cost_mode: str  # token_cost_mean or output_money_cost_mean
    source: str = ""
    #: the workflow's content hash and node names (:mod:`executor.workflow`), written in the trace's ``run`` event
    workflow_hash: str = ""
    node_names: dict[int, str] = field(default_factory=dict)

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
    #: requests per (node, model) in one run, at most (then that pair is out of the run, reason in the trace)
    max_requests_per_pair: int = 64
    temperature: float | None = None
    fsync: str = "background"
    #: plan once before the clock starts (the first call compiles MCPP's kernels on a cold cache: seconds)
    warm_up: bool = False
    #: episodes of the calibrated estimate reported in each ``plan`` event of a planner (0: none; it costs
    #: that many whole simulated episodes of the method per decision, on the planner thread, clock stopped)
    calibrated_episodes: int = 0


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
    #: per planner call: (model time, ready node ids, {node id: [model, count]}) (``agree`` finds where twins part)
    decisions: list[tuple] = field(default_factory=list)
    #: spent beyond the reservations (servers that billed more than they were asked; in ``spent``)
    over_reservation: float = 0.0
    #: the run's trace events, as written (the report reads them here, not back from the file)
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def summary(self) -> dict[str, Any]:
        """The run's report (:func:`executor.trace.summarize` of its events): what ``executor run`` prints."""
        return summarize(self.events)


def run_identity(wf: Workflow, trace_id: str | None = None) -> dict[str, Any]:
    """The ``run`` event's identity fields: a trace id (``trace_id``, else a random one), the UTC start, the
    workflow's hash and node names, the executor's version (what a pool learned from traces checks and records,
    :mod:`poolbuild.from_traces`)."""
    return {"trace_id": trace_id or uuid.uuid4().hex, "started_utc": datetime.now(UTC).isoformat(timespec="microseconds"),
            "workflow_hash": wf.workflow_hash or None,
            "node_names": {str(k): v for k, v in wf.node_names.items()} or None,
            "executor_version": EXECUTOR_VERSION}


class LiveRun:
    """One run of a workflow by a method under a budget (cost unit) and a deadline (model seconds)."""

    def __init__(self, wf: Workflow, endpoints: Mapping[str, Endpoint], method: str, budget: float,
                 deadline: float, *, http: httpx.AsyncClient, clock: Clock, trace: Trace,
                 params: Mapping[str, Any] | None = None, seed: int = 0, trial: int = 0,
                 options: Options | None = None, health: EndpointHealth | None = None,
                 limits: Mapping[str, asyncio.Semaphore] | None = None) -> None:
        self.wf, self.endpoints, self.method = wf, endpoints, method
        self.budget, self.deadline = float(budget), float(deadline)
        self.clock, self.trace = clock, trace
        self.launcher = Launcher(self)
        self.seed, self.trial = int(seed), int(trial)
        self.opt = options or Options()
        # the HTTP side: per run health (one run's faults end no other), per endpoint concurrency
        self.io = SampleRequests(self, http, health or EndpointHealth(self.opt.down_after),
                                 limits if limits is not None else {m: asyncio.Semaphore(ep.concurrency)
                                                                    for m, ep in endpoints.items()},
                                 self.seed, self.trial)
        self.spec = method_spec(method)
        self.params = params
        arr = wf.arr
        # the live run follows the simulator's live rules (simulator.engine.live_rules); its planner plans for them
        self.policy, self.launch_rule = policy_for(method, params, None, wf.stats.model_ids,
                                                   execution_of(self.spec, LIVE).launch)
        self.policy.reset(arr, self.seed, wf.dag_row, self.trial)
        self.rules = live_tables(arr)
        mask = np.zeros(arr.m, dtype=np.bool_)
        mask[self.policy.model_positions(arr)] = True
        self.cap = np.asarray(self.policy.budget_caps(arr, self.budget), dtype=np.float64)  # static baselines' shares
        self.n, self.m = arr.n, arr.m
        self.node_ids = [int(x) for x in wf.stats.node_ids]
        #: the run's rule state (completed nodes, attempt numbers, batches in flight, what it may still use)
        self.core = LiveCore(arr, mask, bool(self.policy.legacy_only), self.node_ids,
                             early_end=self.opt.cancel_siblings)
        self.parents, self.completed = self.core.parents, self.core.completed
        self.batches: dict[int, Batch] = {}  # the I/O side of the core's batches in flight (requests' tasks)
        self.accepted: dict[int, str] = {}  # node position -> the passing answer (its children's context)
        self._messages: dict[int, list[dict[str, str]]] = {}  # node position -> its requests' messages
        self.ledger = Ledger(self.budget)
        #: the planner's view of what may still be launched: (node, model) pairs refused or on a model that is down
        self.plan_arr = arr
        self.down: dict[str, tuple[str, str]] = {}  # model id -> (termination it would cause, message)
        self.pair_refusals: dict[tuple[int, int], str] = {}
        self.finished: asyncio.Queue[int] = asyncio.Queue()
        self.residuals = Residuals(arr)
        self.obs = Observations()
        self.planner = Decisions(self)
        self.overhead_ms: list[float] = []  # per batch end: the executor's own time (planner call excluded)
        self.t0 = 0.0
        self._halt: asyncio.Future | None = None
        self._pending_halt: Ended | None = None
        #: set once the first decision has launched (or the run ended): ``agree``'s start barrier waits for it
        self.launched = asyncio.Event()
        self.samples_started = 0
        self._finish_holds: list = []  # one per batch end queued for the run's loop (see _hold)

    # -- time and money --------------------------------------------------------------------

    @property
    def spent(self) -> float:
        return self.ledger.spent

    @property
    def reserved(self) -> float:
        return self.ledger.reserved

    @property
    def unbilled(self) -> float:
        return self.ledger.unbilled

    def elapsed(self) -> float:
        return self.clock.now() - self.t0

    def time_left(self) -> float:
        return self.deadline - self.elapsed()

    def available(self) -> float:
        """The budget left a decision sees (the ledger's: a batch in flight holds its reservations until it ends)."""
        return self.ledger.available()

    def node_room(self, v: int) -> float:
        """What node ``v`` may still reserve: the budget left, within its static cap (the ledger's answer)."""
        return self.ledger.room(v, float(self.cap[v]))

    def messages(self, v: int) -> list[dict[str, str]]:
        """The messages of node v's requests, built once: a node is launched only when its parents' accepted
        answers are final (a CodeFlow prompt extracts the parents' code; the launch rules ask per sample)."""
        cached = self._messages.get(v)
        if cached is not None:
            return cached
        parents = {self.node_ids[p]: self.accepted.get(p, "") for p in self.parents[v]}
        msgs = self.wf.tasks[self.node_ids[v]].messages(self.wf.stats.problem_id, parents)
        if all(self.completed[p] for p in self.parents[v]):
            self._messages[v] = msgs
        return msgs

    def write_ledger(self) -> None:
        self.trace.write("ledger", t=round(self.elapsed(), 6), spent=self.spent, reserved=self.reserved,
                         unbilled=self.unbilled, budget=self.budget)

    # -- ending ----------------------------------------------------------------------------

    def halt(self, ended: Ended) -> None:
        """End the run at once (the first reason wins): the main loop and a pending planner call wake up."""
        if self._halt is None:
            self._pending_halt = self._pending_halt or ended
        elif not self._halt.done():
            self._halt.set_result(ended)

    def interrupt(self, signal_name: str) -> None:
        """SIGINT/SIGTERM: end the run, cancel what is in flight, write the ``end`` event with the ledger."""
        self.halt(Ended("interrupted", f"{signal_name} received: the run was interrupted"))

    def unfinished(self) -> list[int]:
        return [self.node_ids[v] for v in range(self.n) if not self.completed[v]]

    async def _deadline_watch(self) -> None:
        await self.clock.sleep_until(self.t0 + self.deadline, priority=1)  # after answers due at D
        self.halt(Ended("deadline_exhausted", f"the deadline ({self.deadline:.6g} model s) passed with "
                                               f"node(s) {self.unfinished()} unfinished"))

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> RunResult:
        if self.opt.warm_up:
            await self.planner.warm_up()
        with heap_frozen():  # no full collection pass over the process's heap while on the clock (executor.gcpause)
            return await self._on_the_clock()

    async def _on_the_clock(self) -> RunResult:
        st = self.wf.stats
        # the loop's lag and its thread's CPU wait (for the end event), then the wall time, then the deadline's
        # clock, in that order: each window spans the next, so a thread preempted between two reads (a starved
        # one may wait a second there) has that wait in its wall time and in its CPU wait, never in neither
        starved = starvation.watch()
        wall0 = time.perf_counter()
        self.t0 = self.clock.now()
        self._halt = asyncio.get_running_loop().create_future()
        if self._pending_halt is not None:
            self._halt.set_result(self._pending_halt)
        self.trace.write("run", **run_identity(self.wf, self.trace.trace_id), method=self.method, problem_id=st.problem_id, dag=self.wf.dag_row,
                         source=self.wf.source, n_nodes=self.n, node_ids=self.node_ids, budget=self.budget,
                         deadline_s=self.deadline, cost_mode=self.wf.cost_mode, time_scale=self.clock.scale,
                         clock_pauses_for_planning=self.clock.pausable, seed=self.seed, trial=self.trial,
                         launch=self.launch_rule, update=self.opt.update, cancel_siblings=self.opt.cancel_siblings,
                         models={m: {"base_url": e.base_url, "model": e.model} for m, e in self.endpoints.items()
                                 if m in st.model_ids})
        deadline_task = asyncio.ensure_future(self._deadline_watch())
        reason, message = "completed", ""
        try:
            if self.core.uncompletable() >= 0:
                raise Ended("stalled", "a node no allowed model can complete")
            await self.decide()
            self.launched.set()
            while not self.completed.all():
                if self._halt.done():
                    raise self._halt.result()
                if not self.core.batches:
                    raise Ended(*self.no_progress())
                getter = asyncio.ensure_future(self.finished.get())
                await asyncio.wait({getter, self._halt}, return_when=asyncio.FIRST_COMPLETED)
                if self._halt.done():
                    getter.cancel()
                    raise self._halt.result()
                t_ev = time.perf_counter()
                plan_before = self.planner.planner_wall
                self.end_batch(getter.result())
                if not self.completed.all():
                    await self.decide()
                if self._finish_holds:
                    self._let_go(self._finish_holds.pop())
                # the event's own cost: handling the batch end, the replanning bookkeeping and the launches,
                # not the planner call (which runs on the planner thread while the loop serves others)
                self.overhead_ms.append((time.perf_counter() - t_ev - (self.planner.planner_wall - plan_before)) * 1e3)
        except Ended as e:
            reason, message = e.reason, e.message
        finally:
            self.launched.set()
            deadline_task.cancel()
            while self._finish_holds:
                self._let_go(self._finish_holds.pop())
            await self.cancel_all("deadline" if reason == "deadline_exhausted" else "run_end")
        if reason == "deadline_exhausted":
            out_all, said = self.io.outage()
            if out_all:
                reason, message = "provider_unavailable", f"every model is unavailable: {said} ({message})"
            elif said:
                message = f"{message}; failing meanwhile: {said}"
        makespan = min(self.elapsed(), self.deadline) if reason != "completed" else self.elapsed()
        success = reason == "completed"
        on_time = success and makespan <= self.deadline
        res = RunResult(success, on_time, reason, makespan, time.perf_counter() - wall0, self.spent,
                        self.unbilled, self.io.requests, self.io.retries, self.planner.decisions, self.planner.planner_ms, message,
                        self.overhead_ms, self.planner.decision_log, self.ledger.over, self.trace.events)
        starved.close()
        slip = None if self.clock.pausable else starvation.explain_slip(
            res.wall_s, self.clock.to_wall(self.deadline), starved.max_lag_s, starved.cpu_wait_s)
        self.trace.write("end", t=round(self.elapsed(), 6), success=success, on_time=on_time,
                         makespan_s=makespan, wall_s=res.wall_s, spent=self.spent, unbilled=self.unbilled,
                         over_reservation=self.ledger.over,
                         reserved=self.reserved, budget=self.budget, termination=reason, message=message,
                         nodes_completed=[self.node_ids[v] for v in range(self.n) if self.completed[v]],
                         **starved.fields(), **({} if slip is None else {"slip": slip}))
        return res

    def no_progress(self) -> tuple[str, str]:
        """Nothing in flight and nothing launched: deadline, budget (no expected cost fits) or stalled."""
        if self.elapsed() >= self.deadline:
            return "deadline_exhausted", f"the deadline ({self.deadline:.6g} model s) passed"
        stuck = self.stuck()
        if stuck is not None:
            return stuck
        if self.core.launch_fits(self.launcher.expected_cost, self.node_room):
            return "stalled", f"the method launched nothing for ready node(s) {[self.node_ids[r] for r in self.ready()]}"
        return "budget_exhausted", (f"the budget left ({self.available():.6g} of {self.budget:.6g}) cannot pay the "
                                    f"expected cost of any launch of node(s) {[self.node_ids[r] for r in self.ready()]}")

    def stuck(self) -> tuple[str, str] | None:
        """(termination, message) when an unfinished node has no model left that could complete it."""
        v = self.core.stuck()
        if v >= 0:
            causes = [self.down[m] for j, m in enumerate(self.wf.stats.model_ids)
                      if self.wf.arr.available[v, j] and m in self.down]
            causes += [("refused", msg) for (u, _), msg in self.pair_refusals.items() if u == v]
            if causes:
                termination = "refused" if any(t == "refused" for t, _ in causes) else "provider_unavailable"
                return termination, f"node {self.node_ids[v]} has no model left: {'; '.join(m for _, m in causes)}"
        return None

    def check_stuck(self) -> None:
        stuck = self.stuck()
        if stuck is not None:
            self.halt(Ended(*stuck))

    def ready(self) -> list[int]:
        return self.core.ready()

    # -- what the planner may still use ----------------------------------------------------

    def _narrowed(self) -> None:
        """The core took pairs out: the planner sees what the run may still use; a node left with none ends it."""
        self.plan_arr = self.plan_arr._replace(available=self.core.available.copy())
        self.policy.reset(self.plan_arr, self.seed, self.wf.dag_row, self.trial)
        self.check_stuck()

    def model_down(self, model_id: str, r: TryResult) -> None:
        """An endpoint that refuses everything or stays down: out of the planner's view for the run."""
        if model_id in self.down:
            return
        ep = self.endpoints[model_id]
        termination = "refused" if r.kind in ("http_fatal", "http_4xx") else "provider_unavailable"
        why = r.detail or r.kind
        words = self.io.failing.get(model_id, (0, ""))[1]
        if r.kind in DOWN_KINDS and words and words not in why:  # tries timing out behind a retrying gateway
            why += f"; last upstream error: {words}"
        if r.status_code in (401, 403):  # name where the key came from
            why += (f" (the key comes from ${ep.api_key_env})" if ep.api_key_env
                    else " (no key was sent: the endpoint's api_key_env is empty)")
        self.down[model_id] = (termination, f"model {model_id!r} ({ep.url}) {why}")
        self.trace.write("endpoint", t=round(self.elapsed(), 6), model=model_id, url=ep.url, state="down",
                         termination=termination, kind=r.kind, status=r.status_code, message=why)
        self.core.model_down(self.wf.stats.model_ids.index(model_id))
        self._narrowed()

    def refuse_pair(self, v: int, j: int, why: str) -> None:
        """A refusal that would repeat for this node's request on this model: (v, j) is out for the run."""
        if (v, j) in self.pair_refusals:
            return
        model_id = self.wf.stats.model_ids[j]
        self.pair_refusals[(v, j)] = f"model {model_id!r} ({self.endpoints[model_id].url}) {why}"
        self.core.narrow([(v, j)])
        self._narrowed()

    # -- decisions -------------------------------------------------------------------------

    async def decide(self) -> None:
        """Ask the method at a decision point and launch what it says (:meth:`executor.deciding.Decisions.decide`)."""
        await self.planner.decide()

    # -- launches --------------------------------------------------------------------------

    def start_batch(self, v: int, core: CoreBatch, samples: list[Sample]) -> None:
        """Send the samples of the batch the core opened on node ``v`` (sample i is the core's sample i)."""
        b = Batch(v, core.j, core, samples)
        self.batches[v] = b
        self.samples_started += len(samples)
        for i, s in enumerate(samples):
            s.slot = i
            s.hold = self._hold()  # model time waits until the request is on the wire (or waits for a reason)
            s.task = asyncio.ensure_future(self.io.sample(b, s))
            s.task.add_done_callback(lambda _t, s=s: self._release(s))  # also a task cancelled before it ran

    # -- holding a pausable clock between steps -------------------------------------------

    def _hold(self):
        """Stop a pausable clock until :meth:`_let_go` (a no-op on a wall clock).

        On ``agree``'s virtual clock model time moves once the event loop has
        nothing else to run; a sample task created by a launch, or a batch end
        queued for the run's loop, is work that has not run *yet*, and time
        must not move before it does (measured: a later wave's launch met the
        wire up to 0.15 model s late, so live makespans ran long)."""
        if not self.clock.pausable:
            return None
        cm = self.clock.paused()
        cm.__enter__()
        return cm

    @staticmethod
    def _let_go(cm) -> None:
        if cm is not None:
            cm.__exit__(None, None, None)

    def _release(self, s: Sample) -> None:
        hold, s.hold = s.hold, None
        self._let_go(hold)

    def _finish(self, v: int) -> None:
        """A batch ended: the run's loop handles it (time held until it has, see :meth:`_hold`)."""
        self._finish_holds.append(self._hold())
        self.finished.put_nowait(v)

    # -- one sample ------------------------------------------------------------------------

    def end_batch(self, v: int) -> None:
        b = self.batches.pop(v, None)
        if b is None:
            return
        self.core.end_batch(v)
        self.ledger.end_batch(v)
        if b.core.passed:
            self.accepted[v] = next(iter(b.answers.values()), "")

    async def cancel_all(self, reason: str = "run_end") -> None:
        samples = [s for b in self.batches.values() for s in b.samples if s.task is not None and not s.task.done()]
        tasks = [s.task for s in samples]
        for s in samples:
            s.cancel_reason = s.cancel_reason or reason
            s.task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
            self.write_ledger()


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """What one live run is asked: its budget (cost unit), deadline (model seconds) and random key.

    Keyword-only, so a call site names each number (a budget and a deadline
    are both floats, and swapping them is silent in a positional list).
    """

    budget: float
    deadline: float
    seed: int = 0
    trial: int = 0


@contextlib.asynccontextmanager
async def open_run(wf: Workflow, endpoints: Mapping[str, Endpoint], method: str, spec: RunSpec, *,
                   http: httpx.AsyncClient, clock: Clock, trace: Trace, params: Mapping[str, Any] | None = None,
                   options: Options | None = None, health: EndpointHealth | None = None,
                   limits: Mapping[str, asyncio.Semaphore] | None = None) -> AsyncIterator[LiveRun]:
    """The one way to hold a :class:`LiveRun`: ``method`` on ``wf`` through ``endpoints`` as ``spec`` asks.

    ``async with open_run(...) as run: result = await run.run()``. ``http``,
    ``clock`` and ``trace`` are the run's connections, time and log;
    ``params`` the method's parameters; ``options`` the executor's knobs;
    ``health`` and ``limits`` are shared by concurrent runs (endpoint
    health, per-endpoint concurrency). Leaving the block by any path
    (an error, a cancellation, a caller that gave up) cancels what the run
    still has in flight, whose reservations the ledger then settles.
    """
    run = LiveRun(wf, endpoints, method, spec.budget, spec.deadline, http=http, clock=clock, trace=trace,
                  params=params, seed=spec.seed, trial=spec.trial, options=options, health=health,
                  limits=limits)  # fmt: skip
    try:
        yield run
    finally:
        await run.cancel_all("run_end")  # nothing left in flight (a no-op after a whole run)

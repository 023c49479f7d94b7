"""A run's decisions: the method asked at every decision point, on the planner thread, raced against the run's end.

At the start and after every finished batch the method is asked (its
registry policy, the one the simulator drives) with the state of the run:
completed nodes, in-flight batches with the estimated remaining times of
their running samples (:class:`simulator.engine.live_rules.Residuals`), the
budget left (the ledger's answer) and the time left. The call runs on the
planner thread (:mod:`executor.offload`) or, on a clock that stands still
while planning, inline; a decision later than the deadline is dropped. Its
action goes to the run's :class:`executor.launching.Launcher`; each decision
is written as a ``plan`` event (with MCPP's estimate and, when asked, the
calibrated estimate of :func:`simulator.engine.live_episode.calibrated_estimate`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from executor.estimates import posterior_arrays
from executor.offload import PLANNER
from simulator.costs.arrays import DagArrays
from simulator.engine.live_episode import calibrated_estimate
from simulator.engine.registry import LIVE_PER_ATTEMPT
from simulator.mcpp.api import build_view
from simulator.simulate import policy_for


class Decisions:
    """The decisions of one :class:`~executor.live.LiveRun` (``run``: typed ``Any``, as in
    :class:`executor.sampling.SampleRequests`) and their bookkeeping."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self._twin = None  # the method's own policy object for the calibrated estimate's episodes
        self.decisions = 0
        self.decision_points = 0  # decisions asked for, with or without a ready node (the planner's key)
        self.planner_ms = 0.0
        self.planner_wall = 0.0  # seconds spent waiting for planner calls (queue included)
        #: per planner call: (model time, ready node ids, {node id: [model, count]}) (``agree`` finds where twins part)
        self.decision_log: list[tuple] = []

    async def warm_up(self) -> None:
        """Every kernel the run calls, compiled before the deadline's clock starts: one throwaway decision."""
        self.run.core.uncompletable()
        if not self.run.ready():
            return
        view = build_view(self.run.wf.stats, self.run.wf.arr, self.run.budget, self.run.deadline, [], [], self.run.seed, 0)
        fn = self.run.policy.decide if self.run.policy.plans else self.run.policy.act
        await PLANNER.run(fn, view)
        self.run.policy.reset(self.run.wf.arr, self.run.seed, self.run.wf.dag_row, self.run.trial)

    def planner_arrays(self) -> DagArrays:
        if self.run.opt.update == "posterior":
            parr = posterior_arrays(self.run.wf.arr, self.run.obs, self.run.opt.prior_strength, self.run.seed)
            return parr._replace(available=self.run.plan_arr.available)
        return self.run.plan_arr

    async def _plan(self, fn, *args):
        """The planner's call, raced against the run's end: a decision later than the deadline is dropped.

        On a clock where time stands still while planning (:class:`executor.clock.VirtualClock`, ``agree``) the
        call runs on the loop itself: nothing else runs meanwhile, so a wall-time limit buys the planner what it
        buys in the simulator, and no deadline can pass during it.
        """
        if self.run.clock.plans_inline:
            return fn(*args)
        call = asyncio.ensure_future(PLANNER.run(fn, *args))
        await asyncio.wait({call, self.run._halt}, return_when=asyncio.FIRST_COMPLETED)
        if not call.done():
            call.cancel()
            raise self.run._halt.result()
        return call.result()

    async def decide(self) -> None:
        ready = self.run.ready()
        per_attempt = self.run.launch_rule == LIVE_PER_ATTEMPT
        point = self.decision_points  # the decision's key: every batch end is one, as in the simulator
        self.decision_points += 1
        if not ready:  # every remaining node waits on a batch in flight: plan again after the next one ends
            return
        now = self.run.elapsed()
        inflight = [{"node_id": self.run.node_ids[v], "model": self.run.wf.stats.model_ids[j], "remaining": rem,
                     "already_success": passed}
                    for v, j, rem, passed in self.run.core.inflight(self.run.residuals.remaining, now)]
        arr = self.run.plan_arr
        view = build_view(self.run.wf.stats, arr, max(0.0, self.run.available()), max(self.run.time_left(), 1e-9),
                          [self.run.node_ids[v] for v in range(self.run.n) if self.run.completed[v]], inflight,
                          self.run.seed, point)
        view = replace(view, dag=self.run.wf.dag_row, trial=self.run.trial)
        posterior = self.run.opt.update == "posterior" and self.run.policy.uses_planning_arr
        estimate = calibrated = None
        t_plan = time.perf_counter()
        try:
            with self.run.clock.paused():
                if posterior:
                    self.run.policy.planning_arr = self.planner_arrays()
                    self.run.policy.reset(arr, self.run.seed, self.run.wf.dag_row, self.run.trial)
                if self.run.policy.plans:
                    d = await self._plan(self.run.policy.decide, view)
                    action = None if d is None else (d.act_model, d.act_count)
                    estimate = None if d is None else float(d.score)
                    if self.run.opt.calibrated_episodes > 0 and d is not None:
                        calibrated = await self._plan(self.calibrated, view.budget_left, view.deadline - view.t)
                else:
                    action = await self._plan(self.run.policy.act, view)
        finally:
            plan_ms = (time.perf_counter() - t_plan) * 1e3
            self.planner_wall += plan_ms / 1e3
            self.planner_ms += plan_ms
            self.decisions += 1
        act = {}
        if action is not None:
            models, counts = action
            act = {self.run.node_ids[v]: [self.run.wf.stats.model_ids[int(models[v])], int(counts[v])]
                   for v in ready if int(counts[v]) > 0 and int(models[v]) >= 0}
        self.decision_log.append((round(now, 6), [self.run.node_ids[v] for v in ready], act))
        self.run.trace.write("plan", t=round(now, 6), decision=self.decisions - 1, ready=[self.run.node_ids[v] for v in ready],
                         completed=[self.run.node_ids[v] for v in range(self.run.n) if self.run.completed[v]],
                         inflight=[f["node_id"] for f in inflight], budget_left=self.run.available(),
                         time_left=self.run.time_left(), action=act, estimate=estimate, planner_ms=round(plan_ms, 3),
                         **({} if calibrated is None else {"calibrated_estimate": calibrated}))
        if action is not None:
            if per_attempt:
                self.run.launcher.launch_per_attempt(ready, action)
            else:
                self.run.launcher.launch_atomic(ready, action)

    def calibrated(self, budget_left: float, time_left: float) -> float:
        """The calibrated estimate from the run's state now (:func:`simulator.engine.live_episode.calibrated_estimate`)."""
        start = self.run.core.snapshot(self.run.elapsed())
        if self._twin is None:  # the method's own policy object for the estimate's episodes
            self._twin = policy_for(self.run.method, self.run.params, None, self.run.wf.stats.model_ids, self.run.launch_rule)[0]
        return calibrated_estimate(self.run.plan_arr, self._twin, budget_left, time_left, start, seed=self.run.seed,
                                   dag=self.run.wf.dag_row, episodes=self.run.opt.calibrated_episodes,
                                   per_attempt=self.run.launch_rule == LIVE_PER_ATTEMPT)

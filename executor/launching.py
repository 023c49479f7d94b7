"""A run's launches: a decision's action admitted under the live rules, with the prompt's cost, into the ledger.

Admission is the run's :class:`simulator.engine.live_core.LiveCore`'s, as in
the simulated live episode; what is the executor's own is passed in here,
at the call site: a sample's expected cost and ceiling add the cost of its
prompt (:func:`executor.client.prompt_token_bound` priced at the endpoint's
input price; the simulator's charges are output only), its room is the
ledger's answer (:meth:`executor.ledger.Ledger.room`), its reservation is
turned into a ``max_tokens`` (a sample that cannot buy one output token is
refused), and it is held in the ledger for its batch
(:meth:`executor.ledger.Ledger.hold`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from executor.client import prompt_token_bound
from executor.endpoints import Endpoint
from executor.sampling import Ended, Sample
from simulator.engine import live_core as core
from simulator.engine.live_rules import tokens_within


class Launcher:
    """The launches of one :class:`~executor.live.LiveRun` (``run``: typed ``Any``, as in
    :class:`executor.sampling.SampleRequests`)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def cost(self, ep: Endpoint, prompt_tokens: float, completion_tokens: float) -> float:
        """The charge of a request in the run's cost unit: the simulator's charge of the same attempt."""
        if self.run.wf.cost_mode == "token_cost_mean":
            return float(completion_tokens)
        return prompt_tokens * (ep.input_price_per_1m / 1e6) + completion_tokens * (ep.output_price_per_1m / 1e6)

    def expected_cost(self, v: int, j: int) -> float:
        """Expected cost of one sample: the planner's kappa(v, j) plus the bound on its prompt's cost."""
        ep = self.run.endpoints[self.run.wf.stats.model_ids[j]]
        return float(self.run.wf.arr.kappa[v, j]) + self.cost(ep, prompt_token_bound(self.run.messages(v)), 0)

    def ceiling(self, v: int, j: int) -> float:
        """The largest cost one sample of (v, j) can have: the pool's largest charge plus the prompt's bound."""
        ep = self.run.endpoints[self.run.wf.stats.model_ids[j]]
        return float(self.run.rules.ceiling[v, j]) + self.cost(ep, prompt_token_bound(self.run.messages(v)), 0)

    def capped(self, v: int, j: int, room: float) -> tuple[int, float]:
        """(max_tokens, reservation) of one sample that may reserve at most ``room`` (max_tokens 0: nothing fits)."""
        ep = self.run.endpoints[self.run.wf.stats.model_ids[j]]
        prompt = self.cost(ep, prompt_token_bound(self.run.messages(v)), 0)
        per_token = self.cost(ep, 0, 1)
        tokens = ep.max_tokens if per_token <= 0 else min(ep.max_tokens, tokens_within(room - prompt, per_token))
        tokens = max(tokens, 0)
        return tokens, prompt + tokens * per_token

    def _take(self, samples: dict[int, list[Sample]], *, refuse_empty: bool):
        """A sample the rules admitted at ``r``: its ``max_tokens`` and reservation, held in the ledger for its
        batch (None, a refusal, when ``refuse_empty`` and it cannot buy one output token)."""
        def take(v: int, j: int, a: int, r: float) -> float | None:
            tokens, reservation = self.capped(v, j, r)
            if refuse_empty and tokens < 1:
                return None
            samples.setdefault(v, []).append(Sample(a, reservation, tokens, res=self.run.ledger.hold(reservation, v)))
            return reservation
        return take

    def launch_per_attempt(self, ready: list[int], action) -> None:
        """The live rules' per-attempt launch (:meth:`simulator.engine.live_core.LiveCore.launch_per_attempt`); a
        sample's expected cost and ceiling add its prompt's cost, its room is the ledger's, and it must buy at
        least one output token."""
        models, counts = (np.asarray(a, dtype=np.int64) for a in action)
        samples: dict[int, list[Sample]] = {}
        for v, j, b, refused in self.run.core.launch_per_attempt(
                ready, models, counts, self.run.elapsed(), expected=self.expected_cost, ceiling=self.ceiling,
                room=self.run.node_room, unit=self.run.rules.unit, take=self._take(samples, refuse_empty=True)):
            if refused >= 0:
                self.refused(v, j, refused, self.expected_cost(v, j))
            if b is not None:
                self.run.start_batch(v, b, samples[v])
        self.run.write_ledger()

    def refused(self, v: int, j: int, a: int, need: float) -> None:
        self.run.trace.write("request", t=round(self.run.elapsed(), 6), node=self.run.node_ids[v],
                             model=self.run.wf.stats.model_ids[j], attempt=a, status="refused", expected_cost=need,
                             budget_left=self.run.available())

    def launch_atomic(self, ready: list[int], action) -> None:
        """The live rules' atomic launch (:meth:`simulator.engine.live_core.LiveCore.launch_atomic`): admitted on
        expected costs (with the prompts' costs), each sample capped at its share."""
        models, counts = (np.asarray(a, dtype=np.int64) for a in action)
        avail = self.run.available()
        samples: dict[int, list[Sample]] = {}
        adm, opened = self.run.core.launch_atomic(ready, models, counts, self.run.elapsed(),
                                                  expected=self.expected_cost, ceiling=self.ceiling,
                                                  budget_left=avail, unit=self.run.rules.unit,
                                                  take=self._take(samples, refuse_empty=False))
        if adm.what == core.STALL:
            raise Ended("stalled", f"the action gives node {self.run.node_ids[adm.node]} no sample")
        if adm.what == core.END:
            self.run.trace.write("request", t=round(self.run.elapsed(), 6), node=None, model=None, attempt=None,
                                 status="refused", expected_cost=adm.total, budget_left=avail)
            raise Ended("budget_exhausted", f"the launch's expected cost ({adm.total:.6g}) does not fit in the "
                                             f"budget left ({avail:.6g} of {self.run.budget:.6g})")
        if adm.what != core.LAUNCH:
            return  # samples in flight hold part of the budget: decide again when the next batch ends
        for v, b in opened:
            self.run.start_batch(v, b, samples[v])
        self.run.write_ledger()

"""Summary of many trials aggregated as they are simulated, in fixed chunks.

``python -m simulator simulate --trials N`` used to keep one record dict per
trial (1e6 trials = 1.2 GB, 1e8 killed for lack of memory). Here trials are
simulated ``CHUNK_TRIALS`` at a time and folded into running totals, so memory
does not depend on N (``benchmarks/bench_summary_memory.py`` measures it).

The chunk size is a constant, not a function of the machine or of N, so the
same command prints the same numbers: trials are keyed (a trial's outcome does
not depend on the chunk it is simulated in), and means are the exactly rounded
sum (``math.fsum``) of the per-chunk sums divided by N.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simulator.base.scoring import wilson_interval
from simulator.engine.loop import REASONS

CHUNK_TRIALS = 16384


@dataclass
class TrialSummary:
    """Running totals of the trials of one method on one DAG, scored at ``deadline``."""

    deadline: float
    n: int = 0
    n_on_time: int = 0
    reasons: Counter = field(default_factory=Counter)
    _cost: list = field(default_factory=list)
    _makespan: list = field(default_factory=list)
    _makespan_ok: list = field(default_factory=list)

    def add(self, batch) -> None:
        """Fold one :class:`~simulator.simulate.EpisodeBatch` in (then it can be dropped)."""
        ok, reason, mk = batch.scored(self.deadline)
        self.n += len(ok)
        self.n_on_time += int(ok.sum())
        codes, counts = np.unique(reason, return_counts=True)
        for c, k in zip(codes, counts):
            self.reasons[REASONS[int(c)]] += int(k)
        self._cost.append(float(np.sum(batch.total_cost)))
        self._makespan.append(float(np.sum(mk)))
        self._makespan_ok.append(float(np.sum(mk[ok])))

    def result(self) -> dict:
        """Probability of on-time completion with its Wilson 95% interval, means, termination counts."""
        lo, hi = wilson_interval(self.n_on_time, self.n)
        return {
            "trials": self.n,
            "on_time_completion_probability": self.n_on_time / self.n,
            "ci95": [lo, hi],
            "mean_cost": math.fsum(self._cost) / self.n,
            "mean_makespan": math.fsum(self._makespan) / self.n,
            "mean_makespan_successes": math.fsum(self._makespan_ok) / self.n_on_time if self.n_on_time else None,
            "termination": dict(sorted(self.reasons.items())),
        }


def summarize_trials(
    simulate_chunk: Callable[[range], object], n_trials: int, deadline: float, chunk: int = CHUNK_TRIALS
) -> TrialSummary:
    """Simulate trials ``0 .. n_trials-1`` ``chunk`` at a time with ``simulate_chunk(range)`` and summarize."""
    summary = TrialSummary(deadline=float(deadline))
    for q0 in range(0, n_trials, chunk):
        summary.add(simulate_chunk(range(q0, min(q0 + chunk, n_trials))))
    return summary

"""The quote's search: which budgets to simulate, and how few episodes settle each one.

Why: under the live rules MCPP's episodes cannot share work across budgets (a
sample's cap is a share of the budget left, so every budget has its own
trajectory: the surface's one-pass tree serves the atomic rules only), and
each episode plans several times. The quote used to simulate all 24 budgets of
its axis in full, then 6 bisection steps, 31 x 200 episodes. Two exact savings:

* **Early stopping.** Whether a budget reaches the target over N trials is
  settled as soon as K = the least count with K / N >= target episodes
  succeeded, or N - K + 1 failed; the rest of its episodes cannot change it.
  Trials run in order 0, 1, ... in chunks, each episode keyed by its trial as
  in a whole batch, so a budget's outcomes are the same episodes however many
  are run (a budget probed twice reuses what it ran).
* **Bisection over the axis.** The first axis budget that reaches the target
  is found by bisection over the axis' indices (about 5 budgets, not 24),
  which finds the same budget as the scan whenever the on-time count does not
  fall as the budget grows between the budgets probed.

Only the budgets whose rate is printed (the quoted one, 0.8 x it, the
user's) run all N episodes. ``tests/test_executor_quote.py`` compares the
answer with the full scan's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simulator.simulate import RunSettings
from simulator.surface.compute import method_surface

#: trials simulated per call between two stopping checks (and progress updates), at first
CHUNK = 5
#: a call quicker than this doubles the next one's trials (a compiled baseline runs thousands a second: calls
#: of 5 would cost more in set-up than in episodes); the chunks never change which episodes run
QUICK_S = 0.25


def needed_successes(target: float, trials: int) -> int:
    """The least count k with k / trials >= target (the float comparison the rates are reported with)."""
    k = max(0, math.ceil(target * trials) - 1)
    while k <= trials and k / trials < target:
        k += 1
    return k


@dataclass
class Probe:
    """One budget's on-time outcomes over trials 0, 1, ... (run so far)."""

    budget: float
    outcomes: list[bool] = field(default_factory=list)

    @property
    def wins(self) -> int:
        return int(sum(self.outcomes))


class BudgetSearch:
    """Runs episodes of ``method`` at any budget, lazily and once, and answers "does it reach?" / "its rate"."""

    def __init__(self, pool, pos: int, method: str, deadline: float, trials: int, settings: RunSettings,
                 progress: Callable[[int, float], None] | None = None) -> None:
        self.pool, self.pos, self.method, self.deadline = pool, pos, method, float(deadline)
        self.trials, self.settings, self.progress = int(trials), settings, progress
        self.probes: dict[float, Probe] = {}
        self.episodes = 0
        self.chunk = CHUNK

    def _run(self, probe: Probe, upto: int) -> None:
        lo = len(probe.outcomes)
        if upto <= lo:
            return
        t0 = time.perf_counter()
        s = method_surface(self.pool, self.pos, self.method, [probe.budget], [self.deadline], list(range(lo, upto)),
                           self.settings)  # fmt: skip
        if time.perf_counter() - t0 < QUICK_S:
            self.chunk = min(self.chunk * 2, self.trials)
        probe.outcomes.extend(bool(x) for x in s.success[:, 0, 0])
        self.episodes += upto - lo
        if self.progress is not None:
            self.progress(upto - lo, probe.budget)

    def probe(self, budget: float) -> Probe:
        b = float(budget)
        if b not in self.probes:
            self.probes[b] = Probe(b)
        return self.probes[b]

    def reaches(self, budget: float, target: float) -> bool:
        """Whether the on-time rate at ``budget`` over all the trials is >= ``target`` (exact, stops early)."""
        p, N = self.probe(budget), self.trials
        K = needed_successes(target, N)
        while True:
            wins, done = p.wins, len(p.outcomes)
            if wins >= K:
                return True
            if done - wins > N - K:
                return False
            self._run(p, min(N, done + self.chunk))

    def rate(self, budget: float) -> float:
        """The on-time rate at ``budget`` over all the trials."""
        p = self.probe(budget)
        while len(p.outcomes) < self.trials:  # in chunks: the progress bar keeps moving
            self._run(p, min(self.trials, len(p.outcomes) + self.chunk))
        return p.wins / self.trials


def first_reaching(search: BudgetSearch, axis: np.ndarray, target: float) -> int | None:
    """The index of the first budget of the increasing ``axis`` that reaches ``target`` (bisection), or None.

    The largest budget is probed only when every budget probed below it falls short (it is the most
    expensive to settle: most of its episodes succeed, and each plans to the end)."""
    lo, hi = -1, len(axis)  # axis[lo] does not reach (-1: nothing below); axis[hi] does (len: not known to)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if search.reaches(axis[mid], target):
            hi = mid
        else:
            lo = mid
    return hi if hi < len(axis) else None


def cheapest(search: BudgetSearch, axis: np.ndarray, target: float, bisections: int) -> float | None:
    """The quoted budget: the first axis budget reaching ``target``, refined by ``bisections`` geometric
    bisection steps towards the axis budget below it (None: not even the last axis budget reaches it)."""
    i = first_reaching(search, axis, target)
    if i is None:
        return None
    hi = float(axis[i])
    if i == 0:
        return hi
    lo = float(axis[i - 1])
    for _ in range(bisections):
        mid = float(np.sqrt(lo * hi))
        if search.reaches(mid, target):
            hi = mid
        else:
            lo = mid
    return hi

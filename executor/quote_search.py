"""The quote's search: which budgets to simulate, and how few episodes settle each one.

Why: under the live rules MCPP's episodes cannot share work across budgets (a
sample's cap is a share of the budget left, so every budget has its own
trajectory: the surface's one-pass tree serves the atomic rules only), and
each episode plans several times. The quote used to simulate all 24 budgets of
its axis in full, then 6 bisection steps, 31 x 200 episodes. Three exact
savings, none of which changes which episodes a budget's rate counts:

* **Early stopping.** Whether a budget reaches the target over N trials is
  settled as soon as K = the least count with K / N >= target episodes
  succeeded, or N - K + 1 failed; the rest of its episodes cannot change it.
  Each episode is keyed by its trial (:mod:`executor.quote_episodes`), so a
  budget's outcomes are the same episodes whichever ran first (a budget
  probed twice reuses what it ran).
* **The likeliest failures first.** A budget's trials run in the order that
  settles it soonest: the trials that failed at the nearest budgets probed
  already first (common random numbers: the same trial at a nearby budget
  meets the same draws, so it mostly ends the same way). A budget that falls
  short is then settled after about N - K + 1 episodes instead of most of
  its N; one that reaches the target costs at most the N - K failures more
  than the K it needs anyway. The order changes how many episodes run, never
  the rate: a rate is a count over the same N trials.
* **Bisection over the axis.** The first axis budget that reaches the target
  is found by bisection over the axis' indices (about 5 budgets, not 24),
  which finds the same budget as the scan whenever the on-time count does not
  fall as the budget grows between the budgets probed.

Only the budgets whose rate is printed (the quoted one, 0.8 x it, the
user's) run all N episodes. ``tests/test_executor_quote.py`` compares the
answer with the full scan's and with the search before the reordering.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from executor.quote_episodes import EpisodeRunner
from simulator.simulate import RunSettings


def needed_successes(target: float, trials: int) -> int:
    """The least count k with k / trials >= target (the float comparison the rates are reported with)."""
    k = max(0, math.ceil(target * trials) - 1)
    while k <= trials and k / trials < target:
        k += 1
    return k


@dataclass
class Probe:
    """One budget's on-time outcomes, trial -> on time (the trials run so far)."""

    budget: float
    outcomes: dict[int, bool] = field(default_factory=dict)
    wins: int = 0

    def add(self, trial: int, on_time: bool) -> None:
        if trial not in self.outcomes:
            self.outcomes[trial] = on_time
            self.wins += int(on_time)


class BudgetSearch:
    """Runs episodes of ``method`` at any budget, lazily and once, and answers "does it reach?" / "its rate"."""

    def __init__(self, pool, pos: int, method: str, deadline: float, trials: int, settings: RunSettings,
                 progress: Callable[[int, float], None] | None = None, *, threads: int | None = None,
                 reorder: bool = True) -> None:
        self.trials, self.progress, self.reorder = int(trials), progress, reorder
        self.runner = EpisodeRunner(pool, pos, method, deadline, settings, threads)
        self.probes: dict[float, Probe] = {}
        self.episodes = 0

    def close(self) -> None:
        """Stop the worker threads (the search can still be asked again: they start again)."""
        self.runner.close()

    def order(self, p: Probe) -> list[int]:
        """The trials ``p`` has not run, likeliest failures first (see the module docstring); ties by trial.

        A trial's evidence of failing at ``p``'s budget: each other budget probed weighs 1 / (0.05 + its log
        distance); a failure there counts for it, an on-time episode against it, twice when the budget above
        failed or the budget below succeeded (what a trial mostly does as the budget grows)."""
        left = [t for t in range(self.trials) if t not in p.outcomes]
        if not self.reorder:
            return left
        score = np.zeros(self.trials)
        for q in self.probes.values():
            if q is p or not q.outcomes:
                continue
            w = 1.0 / (0.05 + abs(math.log(q.budget / p.budget)))
            above = q.budget > p.budget
            for t, ok in q.outcomes.items():
                score[t] += (-w * (1.0 if above else 2.0)) if ok else (w * (2.0 if above else 1.0))
        return sorted(left, key=lambda t: (-score[t], t))

    def _run(self, p: Probe, enough: Callable[[], bool], room: Callable[[], int] | None = None) -> None:
        batch = 0
        for trial, ok in self.runner.run(p.budget, self.order(p), enough, room):
            p.add(trial, ok)
            self.episodes += 1
            batch += 1
            if self.progress is not None and batch >= PROGRESS_EVERY:
                self.progress(batch, p.budget)
                batch = 0
        if self.progress is not None and batch:
            self.progress(batch, p.budget)

    def probe(self, budget: float) -> Probe:
        b = float(budget)
        if b not in self.probes:
            self.probes[b] = Probe(b)
        return self.probes[b]

    def reaches(self, budget: float, target: float) -> bool:
        """Whether the on-time rate at ``budget`` over all the trials is >= ``target`` (exact, stops early)."""
        p, N = self.probe(budget), self.trials
        K = needed_successes(target, N)

        def settled() -> bool:
            return p.wins >= K or len(p.outcomes) - p.wins > N - K

        def room() -> int:  # the fewest episodes that can settle it: none of that many is wasted
            return min(K - p.wins, N - K + 1 - (len(p.outcomes) - p.wins))

        if not settled():
            self._run(p, settled, room)
        return p.wins >= K

    def rate(self, budget: float) -> float:
        """The on-time rate at ``budget`` over all the trials."""
        p = self.probe(budget)
        if len(p.outcomes) < self.trials:
            self._run(p, lambda: False)
        return p.wins / self.trials


#: episodes between two progress updates
PROGRESS_EVERY = 1


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

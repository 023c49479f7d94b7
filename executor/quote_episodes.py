"""The quote's episodes: one trial at one budget on demand, the trials of a budget in any order, on every core.

Why a module of its own: the quote's search (:mod:`executor.quote_search`)
asks for the on-time outcome of chosen trials at chosen budgets, a few at a
time, and stops as soon as a budget is settled. Every episode is keyed by
(seed, DAG, trial, ...), so its outcome does not depend on which trials ran
before it, in what order, or on which thread: the search may run a budget's
trials in the order that settles it soonest and on both cores, and still
get, trial for trial, the grid's and ``predict``'s episodes.

Two ways to run them, chosen by the prediction surface's route for the
method (:func:`simulator.surface.compute.route_of`):

* **per cell** (MCPP under the live rules, every Python policy with a hard
  deadline): one episode per (budget, trial), as
  :func:`simulator.simulate.simulate_policy` runs it (its policy, its launch
  rule, :func:`simulator.engine.episode.run_policy_episode`), dispatched one
  trial at a time to ``threads`` worker threads, each with its own policy
  object and the planner on one thread (numba's setting is per thread). The
  planner's kernels release the interpreter lock, so two episodes plan at
  once; a planner splitting each decision over both cores instead spends
  much of its time handing out and waiting for chunks.
* **the other routes** (compiled baselines: thousands of episodes a second;
  MCPP's one-pass tree under the published rules) run in batches through
  :func:`simulator.surface.compute.method_surface` on the calling thread.

``tests/test_executor_quote.py`` checks the outcomes against
``method_surface``'s, trial for trial.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import numba

from simulator.base.threads import thread_count
from simulator.costs.arrays import dag_arrays
from simulator.engine.episode import run_policy_episode
from simulator.engine.registry import execution_of
from simulator.methods import method_spec
from simulator.simulate import RunSettings, planning_arrays, policy_for
from simulator.surface.compute import PER_CELL, method_params, method_surface, route_of


class EpisodeRunner:
    """On-time outcomes of ``method`` on DAG ``pool[pos]`` at deadline ``deadline``, trial by trial.

    :meth:`run` takes a budget and the trials to run in order, and yields
    (trial, on time) pairs as they finish until ``enough()`` says stop (the
    episodes already running then finish and are yielded too: they count).
    """

    def __init__(self, pool, pos: int, method: str, deadline: float, settings: RunSettings,
                 threads: int | None = None) -> None:
        self.pool, self.pos, self.method, self.deadline, self.settings = pool, pos, method, float(deadline), settings
        self.stats = pool[pos]
        self.arr = dag_arrays(pool, pos, settings.cost)
        self.ex = execution_of(method_spec(method), settings.execution_rules)
        self.params = method_params(method, settings)
        self.plan = planning_arrays(pool, pos, settings) if not self.ex.compiled else None
        policy = None
        if not self.ex.compiled:
            policy, _ = policy_for(method, self.params, self.plan, self.stats.model_ids, self.ex.launch)
        self.per_cell = route_of(method, settings, policy) == PER_CELL
        self.threads = max(1, thread_count() if threads is None else int(threads))
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        #: trials per batch of the other routes (doubles while a batch is quick, as the search used to)
        self.batch = 5

    # -- per cell: one episode per call, on worker threads ------------------------------------------------------

    def episode(self, budget: float, trial: int) -> bool:
        """Trial ``trial`` at ``budget``: on time (completed by the deadline), as ``simulate_policy`` runs it."""
        loc = self._local
        if getattr(loc, "policy", None) is None:
            numba.set_num_threads(1)  # this thread's setting: the planner runs its decision on this thread
            loc.policy, loc.launch = policy_for(self.method, self.params, self.plan, self.stats.model_ids,
                                                self.ex.launch)  # fmt: skip
        r = run_policy_episode(self.arr, loc.policy, float(budget), self.deadline, self.settings.seed,
                               int(self.stats.index), int(trial), launch=loc.launch)  # fmt: skip
        return bool(r.success and r.makespan <= self.deadline)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="quote")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def run(self, budget: float, trials: Sequence[int], enough: Callable[[], bool],
            room: Callable[[], int] | None = None) -> Iterator[tuple[int, bool]]:
        """(trial, on time) of ``trials`` at ``budget`` in about that order, until ``enough()`` (checked between).

        ``room()``: how many more outcomes can be needed for certain (none can settle the caller sooner); no
        more episodes than that run at once, so the threads never run an episode the caller will not use."""
        if not self.per_cell:
            yield from self._batches(budget, trials, enough, room)
            return
        if self.threads <= 1:
            for t in trials:
                if enough():
                    return
                yield int(t), self.episode(budget, int(t))
            return
        pool = self._executor()
        todo = iter(trials)
        running: dict[Future, int] = {}
        try:
            while True:
                while len(running) < min(self.threads, room() if room else self.threads) and not enough():
                    t = next(todo, None)
                    if t is None:
                        break
                    running[pool.submit(self.episode, budget, int(t))] = int(t)
                if not running:
                    return
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=running.__getitem__):
                    yield running.pop(f), f.result()
        finally:  # an error or a caller that stops: the episodes started still end before we go on
            for f in running:
                f.cancel()
            wait(running)

    # -- the other routes: batches on this thread -----------------------------------------------------------------

    def _batches(self, budget: float, trials: Sequence[int], enough: Callable[[], bool],
                 room: Callable[[], int] | None) -> Iterator[tuple[int, bool]]:
        import time

        trials = [int(t) for t in trials]
        i = 0
        while i < len(trials) and not enough():
            chunk = trials[i : i + (min(self.batch, room()) if room else self.batch)]
            t0 = time.perf_counter()
            s = method_surface(self.pool, self.pos, self.method, [budget], [self.deadline], chunk, self.settings)
            if time.perf_counter() - t0 < QUICK_S:
                self.batch *= 2
            i += len(chunk)
            yield from zip(chunk, (bool(x) for x in s.success[:, 0, 0]))


#: a batch quicker than this doubles the next one (a compiled baseline runs thousands of episodes a second: batches
#: of 5 would cost more in set-up than in episodes); the batches never change which episodes run
QUICK_S = 0.25

"""A quote before the run: the cheapest budget at which a method finishes a workflow on time with a target probability.

``python -m executor quote --pool P --dag I --deadline D --target 0.9
[--method MCPP] [--budget B] [--trials 200] [--execution-rules live]`` answers
the question a user asks before launching a workflow. The episodes follow the
``live`` execution rules by default, the rules the executor's runs follow
(``docs/semantics.md``), so the quote describes the run the user will get. The
probability is the simulated on-time rate of whole episodes of the method from
the start (the realized rate over ``--trials`` episodes, not the planner's own
score), each budget's episodes the grid's and ``predict``'s (the prediction
surface's :func:`simulator.surface.compute.method_surface`, trial for trial):

1. a budget axis of 24 log-spaced budgets from 0.05 to 8 times the DAG's
   nominal budget, all at the deadline; the first one whose rate reaches the
   target, found by bisection over the axis;
2. 6 geometric bisection steps between it and the axis budget below it;
3. the answer with its Wilson 95% interval, the rate at 0.8 x the quoted
   budget, and the rate at a budget the user names (``--budget``).

A budget is settled by as few episodes as decide it, its likeliest failures first,
on every core (:mod:`executor.quote_search`, :mod:`executor.quote_episodes`: why,
and why the answer is the full scan's). The header is printed before the
work and a progress bar (on a terminal) counts the episodes. A target no
budget of the axis reaches is one line on standard error (exit 1), naming the
rate at the largest budget tried.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# light imports only (no numpy, numba or the live executor): the header is printed before the rest loads
from simulator.base import cliargs
from simulator.base.errors import ConfigError, cli_entry
from simulator.base.settings import check_seed
from simulator.base.validation import check_number
from simulator.costs.limits import (
    ABSOLUTE,
    BUDGET,
    MODEL_SECONDS,
    Limit,
    add_limit_arguments,
    limits_from_args,
)
from simulator.costs.modes import cost_unit
from simulator.engine.registry import EXECUTION_RULES, LIVE
from simulator.methods import canonical_method, method_label, method_spec

AXIS_LO, AXIS_HI, AXIS_N, BISECTIONS = 0.05, 8.0, 24, 6


@dataclass
class Quote:
    method: str
    dag: int
    problem_id: str
    deadline: float
    target: float
    trials: int
    budget: float | None  # None: the target is not reached on the axis
    rate: float  # at ``budget`` (unreachable targets: at the largest budget tried)
    interval: tuple[float, float]
    best_budget: float  # where ``rate`` was found (unreachable targets: the largest budget tried)
    rate_at_80pct: float | None
    asked_budget: float | None = None
    asked_rate: float | None = None
    asked_interval: tuple[float, float] | None = None
    seconds: float = 0.0
    rules: str = LIVE
    episodes: int = 0  # simulated in all (a budget stops as soon as its outcome is settled)


def quote(pool, pos: int, method: str, deadline: float, target: float, trials: int, *, seed: int = 0,
          cost_mode: str = "token_cost_mean", asked_budget: float | None = None, rules: str = LIVE,
          progress: Callable[[int, float], None] | None = None, threads: int | None = None,
          reorder: bool = True) -> Quote:
    """The quote (see the module docstring); ``progress(episodes, budget)`` is called as episodes finish.

    ``threads``: worker threads of the episodes (default: numba's thread setting, the cores); ``reorder``
    False runs each budget's trials in the order 0, 1, ... (the search before the reordering: the tests'
    reference; the answer is the same)."""
    import numpy as np

    from executor.quote_search import BudgetSearch, cheapest
    from simulator.base.scoring import wilson_interval
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget
    from simulator.simulate import RunSettings

    t0 = time.perf_counter()
    method = canonical_method(method)
    method_spec(method, "--method")
    setting = CostSetting(cost_mode=cost_mode)
    settings = RunSettings(seed=seed, cost=setting, execution_rules=rules)
    arr = dag_arrays(pool, pos, setting)
    st = pool[pos]
    b0 = nominal_budget(arr, f"DAG {pos} ({st.problem_id}): ")
    axis = b0 * np.geomspace(AXIS_LO, AXIS_HI, AXIS_N)
    search = BudgetSearch(pool, pos, method, deadline, trials, settings, progress, threads=threads,
                          reorder=reorder)
    try:
        found = cheapest(search, axis, target, BISECTIONS)
        at = float(axis[-1]) if found is None else found
        rate = search.rate(at)
        q = Quote(method, pos, st.problem_id, deadline, target, trials, found, rate,
                  wilson_interval(int(round(rate * trials)), trials), at, None)
        if found is not None:
            q.rate_at_80pct = search.rate(0.8 * found)
        if asked_budget is not None:
            r = search.rate(asked_budget)
            q.asked_budget, q.asked_rate = float(asked_budget), r
            q.asked_interval = wilson_interval(int(round(r * trials)), trials)
    finally:
        search.close()
    q.episodes = search.episodes
    q.seconds = time.perf_counter() - t0
    q.rules = rules
    return q


def header(method: str, dag: int, pool: str, deadline: str, target: float, trials: int, rules: str) -> str:
    """The quote's first line, printed from the flags alone before anything heavy loads (``deadline``: as said)."""
    return (f"quote: {method_label(method)} on DAG {dag} of {pool}, deadline {deadline}, target {target:.0%}, "
            f"up to {trials} simulated episodes per budget ({rules} rules)")


def format_quote(q: Quote, unit: str) -> str:
    """The lines after the header (an unreachable target is the error line alone: :func:`unreachable`)."""
    lines = []
    if q.budget is not None:
        lo, hi = q.interval
        lines.append(f"cheapest budget: {q.budget:.6g} {unit} (on time {q.rate:.1%}, 95% interval "
                     f"{lo:.1%}-{hi:.1%}); at 0.8 x that budget: {q.rate_at_80pct:.1%}")
    if q.asked_budget is not None:
        lo, hi = q.asked_interval
        lines.append(f"at your budget {q.asked_budget:.6g} {unit}: on time {q.asked_rate:.1%} (95% interval "
                     f"{lo:.1%}-{hi:.1%})")
    lines.append(f"computed in {q.seconds:.1f} s of wall-clock time ({q.episodes} simulated episodes)")
    return "\n".join(lines)


def unreachable(q: Quote, unit: str) -> str:
    """The one line of a target no budget of the axis reaches."""
    return (f"error: target {q.target:.0%} is not reachable at deadline {q.deadline:.6g} model seconds: "
            f"no budget up to {AXIS_HI:g} x the nominal reaches it (on time {q.rate:.1%} at {q.best_budget:.6g} "
            f"{unit}, the largest budget tried)")


@cli_entry
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m executor quote ...`` without loading the rest of the executor first (:mod:`executor.__main__`)."""
    return cmd_quote(sys.argv[2:] if argv is None else argv)


def cmd_quote(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor quote",
                                 description="The cheapest budget at which a method finishes on time with a target "
                                             "probability (simulated whole episodes).")
    ap.add_argument("--pool", type=cliargs.input_path(), required=True, help="DAG pool JSONL")
    ap.add_argument("--dag", type=int, default=0, help="row of the DAG in the pool (0-based)")
    add_limit_arguments(ap, deadline_unit=MODEL_SECONDS, budget=False, infinite_deadline=False)
    ap.add_argument("--target", required=True, help="on-time probability to reach, in (0, 1)")
    ap.add_argument("--method", default="MCPP", help="a registered method (MCPP, sequential, uniform, ...)")
    ap.add_argument("--budget", default=None, help="also: the on-time probability at this budget (cost unit; "
                                                   "finite, > 0)")
    ap.add_argument("--trials", type=int, default=200, help="simulated episodes per budget")
    ap.add_argument("--seed", default="0", help="seed of the simulated episodes")
    ap.add_argument("--cost-mode", default="token", help="token (output tokens) or money (dollars)")
    ap.add_argument("--execution-rules", default=LIVE, choices=EXECUTION_RULES,
                    help="the rules of the simulated episodes (default live: the rules the executor follows)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    # the checks that need nothing loaded, then the header at once (numpy, numba and the pool take seconds)
    target = check_number(args.target, "--target", "flag", lo=0.0, hi=1.0, lo_inclusive=False, hi_inclusive=False)
    if args.trials < 1:
        raise ConfigError(f"--trials must be >= 1, got {args.trials}")
    seed = check_seed(args.seed, "--seed", "flag")
    method_spec(canonical_method(args.method), "--method")
    limit = limits_from_args(args).deadline
    said = f"{limit.value:.6g} model seconds" if limit.given == ABSOLUTE else f"{limit.value:g} x the DAG's nominal"
    asked = None if args.budget is None else Limit(BUDGET, args.budget).value
    if not args.json:
        print(header(args.method, args.dag, args.pool, said, float(target), args.trials, args.execution_rules),
              flush=True)
    from tqdm import tqdm  # light: the bar is on screen before numpy, numba and the pool load

    with tqdm(unit=" episodes", desc="loading the simulator", file=sys.stderr, disable=None, mininterval=0.5,
              bar_format="{desc}: {n_fmt}{unit} simulated [{elapsed}, {rate_fmt}]") as bar:
        try:
            q, unit = _load_and_quote(args, bar, float(target), seed, asked, limit)
        except BaseException:
            bar.leave = False  # an error is its one line, without the bar's
            raise
    out = json.dumps(q.__dict__) if args.json else format_quote(q, unit)
    if out:
        print(out, flush=True)
    if q.budget is None:
        print(unreachable(q, unit), file=sys.stderr)
        return 1
    return 0


def _load_and_quote(args, bar, target: float, seed: int, asked: float | None, limit):
    """The pool, the DAG's line (written above the bar) and the quote: ``(Quote, unit)`` (``limit``: the
    deadline flag's :class:`Limit`, resolved on the DAG)."""
    from executor.inputs import live_cost_mode, load_dag
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget

    cost_mode = live_cost_mode(args.cost_mode)
    unit = cost_unit(cost_mode)
    pool, dag = load_dag(args.pool, args.dag)
    arr = dag_arrays(pool, dag, CostSetting(cost_mode=cost_mode))
    deadline = limit.resolve(arr, f"{args.pool}: DAG {dag}: ")
    if not args.json:
        bar.write(f"DAG {dag} is {pool[dag].problem_id} ({pool[dag].n_nodes} nodes): nominal budget "
                  f"{nominal_budget(arr):.6g} {unit}, deadline {deadline:.6g} model seconds", file=sys.stdout)
        from executor.quote_learned import learned_note

        note = learned_note(pool.raw(dag))  # a learned pool: what the interval leaves out
        if note:
            bar.write(note, file=sys.stdout)
        sys.stdout.flush()
    bar.set_description_str("simulating")

    def progress(n: int, budget: float) -> None:
        bar.set_description_str(f"budget {budget:.6g} {unit}", refresh=False)
        bar.update(n)

    q = quote(pool, dag, args.method, float(deadline), target, args.trials, seed=seed, cost_mode=cost_mode,
              asked_budget=asked, rules=args.execution_rules, progress=progress)
    return q, unit

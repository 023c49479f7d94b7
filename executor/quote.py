"""A quote before the run: the cheapest budget at which a method finishes a workflow on time with a target probability.

``python -m executor quote --pool P --dag I --deadline D --target 0.9
[--method MCPP] [--budget B] [--trials 200] [--execution-rules live]`` answers
the question a user asks before launching a workflow. The episodes follow the
``live`` execution rules by default, the rules the executor's runs follow
(``docs/semantics.md``), so the quote describes the run the user will get. The
probability is the simulated on-time
rate of whole episodes of the method from the start (the realized rate over
``--trials`` episodes, not the planner's own score), computed with the
prediction-surface machinery (:func:`simulator.surface.compute.method_surface`:
exact, every budget trial for trial what the grid and ``predict`` give):

1. a budget axis of 24 log-spaced budgets from 0.05 to 8 times the DAG's
   nominal budget, all at the deadline;
2. the first budget of the axis whose rate reaches the target, then 6
   bisection steps between it and the budget below it (each step one more
   budget simulated over the same trials);
3. the answer with its Wilson 95% interval, the rate at 0.8 x the quoted
   budget, and the rate at a budget the user names (``--budget``).

A target no budget of the axis reaches is one line (exit 1), naming the best
rate found and where.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from executor.inputs import live_cost_mode, load_dag
from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.scoring import wilson_interval
from simulator.base.settings import check_seed
from simulator.base.validation import check_number
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.registry import EXECUTION_RULES, LIVE
from simulator.methods import canonical_method, method_spec
from simulator.simulate import RunSettings
from simulator.surface.compute import method_surface

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
    rate: float  # at ``budget`` (or the best rate found)
    interval: tuple[float, float]
    best_budget: float  # where the best rate was found (unreachable targets)
    rate_at_80pct: float | None
    asked_budget: float | None = None
    asked_rate: float | None = None
    asked_interval: tuple[float, float] | None = None
    seconds: float = 0.0
    rules: str = LIVE


def _rates(pool, pos, method, budgets, deadline, trials, settings) -> np.ndarray:
    s = method_surface(pool, pos, method, list(budgets), [deadline], trials, settings)
    return s.successes[:, 0] / len(trials)


def quote(pool, pos: int, method: str, deadline: float, target: float, trials: int, *, seed: int = 0,
          cost_mode: str = "token_cost_mean", asked_budget: float | None = None, rules: str = LIVE) -> Quote:
    """The quote (see the module docstring)."""
    t0 = time.perf_counter()
    method = canonical_method(method)
    method_spec(method, "--method")
    setting = CostSetting(cost_mode=cost_mode)
    settings = RunSettings(seed=seed, cost=setting, execution_rules=rules)
    arr = dag_arrays(pool, pos, setting)
    st = pool[pos]
    where = f"DAG {pos} ({st.problem_id}): "
    b0 = nominal_budget(arr, where)
    tr = list(range(trials))
    axis = b0 * np.geomspace(AXIS_LO, AXIS_HI, AXIS_N)
    rates = _rates(pool, pos, method, axis, deadline, tr, settings)
    reach = np.flatnonzero(rates >= target)
    best = int(np.argmax(rates))
    q = Quote(method, pos, st.problem_id, deadline, target, trials, None, float(rates[best]),
              wilson_interval(int(round(rates[best] * trials)), trials), float(axis[best]), None)
    if len(reach):
        i = int(reach[0])
        lo, hi, hi_rate = (axis[i - 1] if i > 0 else None), axis[i], rates[i]
        if lo is not None:
            for _ in range(BISECTIONS):
                mid = float(np.sqrt(lo * hi))
                r = float(_rates(pool, pos, method, [mid], deadline, tr, settings)[0])
                if r >= target:
                    hi, hi_rate = mid, r
                else:
                    lo = mid
        q.budget, q.rate = float(hi), float(hi_rate)
        q.interval = wilson_interval(int(round(hi_rate * trials)), trials)
        q.rate_at_80pct = float(_rates(pool, pos, method, [0.8 * hi], deadline, tr, settings)[0])
    if asked_budget is not None:
        r = float(_rates(pool, pos, method, [asked_budget], deadline, tr, settings)[0])
        q.asked_budget, q.asked_rate = float(asked_budget), r
        q.asked_interval = wilson_interval(int(round(r * trials)), trials)
    q.seconds = time.perf_counter() - t0
    q.rules = rules
    return q


def format_quote(q: Quote, unit: str) -> str:
    head = (f"quote: {q.method} on DAG {q.dag} ({q.problem_id}), deadline {q.deadline:.6g} model seconds, "
            f"target {q.target:.0%}, {q.trials} simulated episodes per budget")
    lines = [head + f" ({q.rules} rules)"]
    if q.budget is None:
        lines.append(f"unreachable: no budget up to {AXIS_HI:g} x the nominal reaches {q.target:.0%} at this deadline "
                     f"(best {q.rate:.1%} at {q.best_budget:.6g} {unit})")
    else:
        lo, hi = q.interval
        lines.append(f"cheapest budget: {q.budget:.6g} {unit} (on time {q.rate:.1%}, 95% interval "
                     f"{lo:.1%}-{hi:.1%}); at 0.8 x that budget: {q.rate_at_80pct:.1%}")
    if q.asked_budget is not None:
        lo, hi = q.asked_interval
        lines.append(f"at your budget {q.asked_budget:.6g} {unit}: on time {q.asked_rate:.1%} (95% interval "
                     f"{lo:.1%}-{hi:.1%})")
    lines.append(f"computed in {q.seconds:.1f} s")
    return "\n".join(lines)


def cmd_quote(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor quote",
                                 description="The cheapest budget at which a method finishes on time with a target "
                                             "probability (simulated whole episodes).")
    ap.add_argument("--pool", type=cliargs.input_path(), required=True, help="DAG pool JSONL")
    ap.add_argument("--dag", type=int, default=0, help="row of the DAG in the pool (0-based)")
    d = ap.add_mutually_exclusive_group(required=True)
    d.add_argument("--deadline", help="deadline in model seconds")
    d.add_argument("--deadline-ratio", help="multiple of the DAG's nominal deadline")
    ap.add_argument("--target", required=True, help="on-time probability to reach, in (0, 1)")
    ap.add_argument("--method", default="MCPP", help="a registered method (MCPP, sequential, uniform, ...)")
    ap.add_argument("--budget", default=None, help="also: the on-time probability at this budget")
    ap.add_argument("--trials", type=int, default=200, help="simulated episodes per budget")
    ap.add_argument("--seed", default="0", help="seed of the simulated episodes")
    ap.add_argument("--cost-mode", default="token", help="token (output tokens) or money (dollars)")
    ap.add_argument("--execution-rules", default=LIVE, choices=EXECUTION_RULES,
                    help="the rules of the simulated episodes (default live: the rules the executor follows)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    target = check_number(args.target, "--target", "flag", lo=0.0, hi=1.0, lo_inclusive=False, hi_inclusive=False)
    if args.trials < 1:
        raise ConfigError(f"--trials must be >= 1, got {args.trials}")
    seed = check_seed(args.seed, "--seed", "flag")
    cost_mode = live_cost_mode(args.cost_mode)
    method_spec(canonical_method(args.method), "--method")
    pool, dag = load_dag(args.pool, args.dag)
    arr = dag_arrays(pool, dag, CostSetting(cost_mode=cost_mode))
    if args.deadline is not None:
        deadline = check_number(args.deadline, "--deadline", "flag", lo=0.0, lo_inclusive=False)
    else:
        deadline = check_number(args.deadline_ratio, "--deadline-ratio", "flag", lo=0.0, lo_inclusive=False) * \
            nominal_deadline(arr, f"{args.pool}: DAG {dag}: ")
    asked = None if args.budget is None else check_number(args.budget, "--budget", "flag", lo=0.0, lo_inclusive=False)
    q = quote(pool, dag, args.method, float(deadline), float(target), args.trials, seed=seed, cost_mode=cost_mode,
              asked_budget=asked, rules=args.execution_rules)
    unit = "tokens" if cost_mode == "token_cost_mean" else "dollars"
    print(json.dumps(q.__dict__) if args.json else format_quote(q, unit), flush=True)
    if q.budget is None:
        print(f"error: target {q.target:.0%} is not reachable at deadline {q.deadline:.6g} model seconds "
              f"(best {q.rate:.1%} at {q.best_budget:.6g} {unit})", file=sys.stderr)
        return 1
    return 0

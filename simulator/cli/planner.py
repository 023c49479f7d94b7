"""``python -m simulator plan`` and ``predict``: MCPP on one DAG from the command line.

* ``plan --pool P --dag I --budget B --deadline D`` (or ``--budget-ratio`` /
  ``--deadline-ratio``): MCPP's first decision on the DAG and its estimated
  completion probability (``--json`` for one machine-readable object);
* ``predict --pool P --dag I --budgets B1 B2 .. --deadlines D1 D2 .. --trials N
  --out DIR``: the completion-probability map over the (budget, deadline)
  grid, MCPP simulated N trials per cell with Wilson 95% intervals, written to
  ``DIR/predict.csv``, ``DIR/predict.json`` and a heatmap ``DIR/predict.png``.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from collections.abc import Sequence

import numpy as np

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_bytes, atomic_write_text, dumps_strict
from simulator.base.scoring import wilson_interval
from simulator.base.settings import check_budget, check_deadline, check_ratio
from simulator.base.validation import check_distinct, check_output_dir
from simulator.cli.args import (
    add_pool_arguments,
    check_common_args,
    check_mcpp_models,
    cost_setting_from_args,
    load_pool_and_dag,
)
from simulator.costs.arrays import dag_arrays
from simulator.costs.limits import DEADLINE, MODEL_SECONDS, RATIO, Limit, add_limit_arguments, resolve_limits
from simulator.costs.modes import cost_unit
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.registry import ATOMIC, EXECUTION_RULES, PUBLISHED, execution_of
from simulator.mcpp.api import plan
from simulator.mcpp.params import MCPP, add_mcpp_arguments, mcpp_params_from_args, resolve_params
from simulator.methods import method_spec


def plan_main(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(
        prog="python -m simulator plan", description="MCPP's first decision on one DAG and its estimate."
    )
    add_pool_arguments(ap)
    add_limit_arguments(ap, deadline_unit=MODEL_SECONDS)  # 'inf' allowed: no deadline
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    add_rules_argument(ap)
    add_mcpp_arguments(ap)
    args = check_common_args(ap.parse_args(argv))
    params = mcpp_params_from_args(args)
    resolve_params(params)  # fail fast on bad values
    launch = execution_of(method_spec(MCPP), args.execution_rules).launch
    if launch != ATOMIC:  # the planner simulates the rules the run will follow
        params = {**params, "launch_rule": launch}
    pool, i = load_pool_and_dag(args)
    check_mcpp_models(params, pool)
    setting = cost_setting_from_args(args)
    arr = dag_arrays(pool, i, setting)
    stats = pool[i]
    budget, deadline = resolve_limits(args, arr, f"{args.pool}: DAG {i}: ")
    res = plan(stats, budget, deadline, params=params, cost=setting, seed=args.seed)
    out = {
        "dag": i,
        "problem_id": stats.problem_id,
        "n_nodes": stats.n_nodes,
        "budget": budget,
        "deadline": deadline,
        "action": {str(k): {"model": m, "k": c} for k, (m, c) in res.action.items()},
        "estimate": res.estimate,
        "hoeffding_epsilon": res.epsilon,
        "continuation": {"model": res.member[0], "k": res.member[1]} if res.member else None,
        "candidate_mode": res.mode,
        "candidates": res.n_candidates,
        "simulations": res.n_simulations,
        "planner_wall_ms": res.wall_ms,
        "execution_rules": args.execution_rules,
    }
    if res.interval is not None:  # anytime planner: how sure the estimate is, and whether the limit stopped it
        out["estimate_interval"] = list(res.interval)
        out["time_limit_hit"] = res.limit_hit
    if args.json:
        print(dumps_strict(out))
        return 0
    P = resolve_params(params)
    unit = cost_unit(setting.cost_mode)
    print(f"DAG {i} ({stats.problem_id!r}, {stats.n_nodes} nodes)   budget {budget:.6g} {unit}   "
          f"deadline {deadline:.4g} model seconds   ({args.execution_rules} rules)")
    print("first decision:")
    for nid, (m, c) in res.action.items():
        print(f"  node {nid}: {c} x {m}")
    if res.member:
        print(f"  (estimated as: this action, then Seq-({res.member[0]}, {res.member[1]}))")
    print(f"estimated completion probability: {res.estimate:.1%}")
    print(f"  how sure: with probability {1 - P.delta:.0%}, every (candidate, continuation) pair's estimate is "
          f"within {100 * res.epsilon:.1f} percentage points of its true probability, all pairs at once "
          f"(Hoeffding's inequality over the pairs evaluated, {P.M} simulations each)")
    if res.interval is not None:
        print(f"anytime planner: 95% interval [{res.interval[0]:.1%}, {res.interval[1]:.1%}]"
              + ("; stopped by the time limit" if res.limit_hit else ""))  # fmt: skip
    print(f"{res.n_candidates} candidates ({res.mode}), {res.n_simulations} simulations, {res.wall_ms:.0f} ms of "
          "wall-clock planning")
    return 0


def predict_table(rows: list[dict], unit: str) -> str:
    """``predict``'s cells as a table a person reads: MCPP's realized on-time rate per (budget, deadline)."""
    head = (f"{'budget (' + unit + ')':>16} {'deadline (model s)':>18} {'on time':>8} {'95% interval':>15} "
            f"{'mean cost (' + unit + ')':>20}")
    lines = ["MCPP's on-time completion per cell:", head]
    for r in rows:
        interval = f"{r['wilson_lo']:.0%}-{r['wilson_hi']:.0%}"
        lines.append(f"{r['budget']:>16.6g} {r['deadline']:>18.4g} {r['completion_probability']:>8.1%} "
                     f"{interval:>15} {r['mean_cost']:>20.6g}")
    return "\n".join(lines)


def add_rules_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--execution-rules", default=PUBLISHED, choices=EXECUTION_RULES,
                    help="execution-rule mode MCPP plans and runs under (docs/semantics.md); live: what a live run knows")


def _parse_axis(values, ratios, what: str, check_value) -> tuple[list[float] | None, list[float] | None]:
    """Check one axis's flags before any work: one of the two forms, valid and distinct values."""
    flag, rflag = f"--{what}s", f"--{what}-ratios"
    if values and ratios:
        raise ConfigError(f"{flag} and {rflag}: give one of them, not both (mixing them would drop one axis)")
    if not values and not ratios:
        raise ConfigError(f"give {flag} or {rflag}")
    if values:
        out = [check_value(x, flag, "flag") for x in values]
        check_distinct(out, flag, "flag")
        return out, None
    out = [check_ratio(x, rflag, "flag") for x in ratios]
    check_distinct(out, rflag, "flag")
    return None, out


def _realize_axis(values, ratios, nominal, what: str, where: str = "") -> list[float]:
    if values is not None:
        out = list(values)
    else:  # each ratio by the one rule (simulator.costs.limits), the DAG's nominal computed once
        scale, unit = nominal(), (MODEL_SECONDS if what == DEADLINE else None)
        out = [Limit(what, r, RATIO, unit, name=f"--{what}-ratios").of_nominal(scale, where) for r in ratios]
    if what == "budget" and not all(math.isfinite(x) and x > 0 for x in out):
        raise ConfigError(f"the budgets must be finite numbers > 0, got {out}")
    if what == "deadline" and not all(x > 0 for x in out):
        raise ConfigError(f"the deadlines must be > 0, got {out}")
    return out


def predict_main(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(
        prog="python -m simulator predict",
        description="MCPP completion-probability map of one DAG over a (budget, deadline) grid.",
    )
    add_pool_arguments(ap)
    ap.add_argument("--budgets", nargs="+", help="absolute budgets (finite, > 0)")
    ap.add_argument("--budget-ratios", nargs="+", help="multiples of the nominal budget")
    ap.add_argument("--deadlines", nargs="+", help="absolute deadlines (s; 'inf' allowed)")
    ap.add_argument("--deadline-ratios", nargs="+", help="multiples of the nominal deadline")
    ap.add_argument("--trials", default="100", help="MCPP episodes per cell (an integer >= 1)")
    ap.add_argument("--out", type=cliargs.output_path("dir"), required=True, help="output directory (created; predict.* in it are replaced)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_rules_argument(ap)
    add_mcpp_arguments(ap)
    args = check_common_args(ap.parse_args(argv))
    # every check before the simulation: a bad axis or output must not cost a whole run
    b_vals, b_ratios = _parse_axis(args.budgets, args.budget_ratios, "budget", check_budget)
    d_vals, d_ratios = _parse_axis(args.deadlines, args.deadline_ratios, "deadline", check_deadline)
    out_dir = check_output_dir(args.out, "--out", "flag", files=PREDICT_FILES)
    params = mcpp_params_from_args(args)
    resolved = resolve_params(params)
    pool, i = load_pool_and_dag(args)
    check_mcpp_models(params, pool)
    setting = cost_setting_from_args(args)
    arr = dag_arrays(pool, i, setting)
    stats = pool[i]
    where = f"{args.pool}: DAG {i}: "
    budgets = _realize_axis(b_vals, b_ratios, lambda: nominal_budget(arr, where), "budget", where)
    deadlines = _realize_axis(d_vals, d_ratios, lambda: nominal_deadline(arr, where), "deadline", where)
    launch = execution_of(method_spec(MCPP), args.execution_rules).launch

    from simulator.simulate import simulate_policy

    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(budgets) * len(deadlines) * args.trials, unit="episode", desc="predict")
    rows = []
    trials = list(range(args.trials))
    for B in budgets:
        for D in deadlines:
            batch = simulate_policy(
                arr, MCPP, B, D, trials, args.seed, int(stats.index), params, None,
                bar.update if bar is not None else None, model_names=stats.model_ids, launch=launch,
            )
            k = int(batch.on_time(D).sum())
            lo, hi = wilson_interval(k, len(trials))
            first = [g.get("mc_portfolio_best_score_first") for g in batch.diagnostics]
            first = [x for x in first if x is not None]
            rows.append({
                "budget": B,
                "deadline": D,
                "trials": len(trials),
                "successes": k,
                "completion_probability": k / len(trials),
                "wilson_lo": lo,
                "wilson_hi": hi,
                "first_decision_estimate": float(np.mean(first)) if first else None,
                "mean_cost": float(batch.total_cost.mean()),
                "planner_wall_ms_mean": float(batch.planner_wall_ms.mean()),
            })
    if bar is not None:
        bar.close()
    _write_outputs(str(out_dir), rows, budgets, deadlines, stats, resolved.record(), args.seed)
    print(predict_table(rows, cost_unit(setting.cost_mode)))
    print(f"wrote {args.out}/predict.csv, predict.json, predict.png ({len(rows)} cells x {args.trials} trials)")
    return 0


PREDICT_FILES = ("predict.csv", "predict.json", "predict.png")


def _write_outputs(out_dir, rows, budgets, deadlines, stats, params, seed) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(f"{out_dir}/predict.csv", buf.getvalue())
    doc = {"dag": int(stats.index), "problem_id": stats.problem_id, "seed": seed, "mcpp_params": params, "cells": rows}
    atomic_write_text(f"{out_dir}/predict.json", dumps_strict(doc, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.array([[r["completion_probability"] for r in rows[b * len(deadlines):(b + 1) * len(deadlines)]]
                     for b in range(len(budgets))])
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(deadlines), 1.0 + 0.6 * len(budgets)))
    im = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for b in range(len(budgets)):
        for d in range(len(deadlines)):
            ax.text(d, b, f"{grid[b, d]:.2f}", ha="center", va="center",
                    color="white" if grid[b, d] < 0.6 else "black", fontsize=8)
    ax.set_xticks(range(len(deadlines)), [f"{x:.4g}" for x in deadlines])
    ax.set_yticks(range(len(budgets)), [f"{x:.4g}" for x in budgets])
    ax.set_xlabel("deadline (s)")
    ax.set_ylabel("budget")
    ax.set_title(f"MCPP completion probability, DAG {stats.index} ({stats.n_nodes} nodes)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(f"{out_dir}/predict.png", png.getvalue())

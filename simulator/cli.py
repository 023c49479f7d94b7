"""``python -m simulator``: one-off questions about a pool.

* ``validate --pool P``: check a pool, print a summary;
* ``simulate --pool P --dag I --budget B --deadline D --method M --trials N``:
  on-time completion probability with a 95% (Wilson) interval, mean cost and
  makespan (``--budget-ratio`` / ``--deadline-ratio`` use the nominal scales,
  ``--json`` prints one machine-readable object);
* ``plan`` / ``predict``: MCPP's first decision / completion-probability map
  (see ``simulator/planner_cli.py``).

Every user error is printed as one readable line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

import numpy as np

from .arrays import LATENCY_DISTS, CostSetting, dag_arrays
from .costs import COST_MODE_ALIASES, COST_MODES, load_price_table
from .errors import ConfigError, cli_entry
from .methods import METHOD_ORDER, is_baseline
from .nominal import nominal_budget, nominal_deadline
from .pool import Pool, load_pool
from .scoring import wilson_interval
from .settings import check_budget, check_deadline, check_ratio, check_seed, check_trials


def add_pool_arguments(ap: argparse.ArgumentParser) -> None:
    """--pool/--dag and the cost setting flags shared by every subcommand."""
    ap.add_argument("--pool", required=True, help="DAG pool JSONL")
    ap.add_argument("--dag", type=int, default=0, help="row of the DAG in the pool (0-based)")
    ap.add_argument("--cost-mode", default="token_cost_mean",
                    help=f"one of {', '.join(COST_MODES)} (aliases {', '.join(COST_MODE_ALIASES)})")
    ap.add_argument("--latency-dist", default="lognormal", choices=LATENCY_DISTS,
                    help="parametric latency when a (node, model) has no rows")
    ap.add_argument("--price-file", default=None,
                    help="JSON {model_id: dollars per 1M output tokens} overriding the default prices")
    ap.add_argument("--default-price-model", default=None,
                    help="model id that prices the single-model id 'default' in money mode")
    ap.add_argument("--seed", default="42", help="run seed (keyed randomness), an integer >= 0")


def add_budget_deadline_arguments(ap: argparse.ArgumentParser) -> None:
    """--budget/--budget-ratio and --deadline/--deadline-ratio, parsed by :func:`check_common_args`."""
    b = ap.add_mutually_exclusive_group(required=True)
    b.add_argument("--budget", help="absolute budget (unit of the cost mode), a finite number > 0")
    b.add_argument("--budget-ratio", help="multiple of the nominal budget")
    d = ap.add_mutually_exclusive_group(required=True)
    d.add_argument("--deadline", help="absolute deadline in seconds ('inf' allowed)")
    d.add_argument("--deadline-ratio", help="multiple of the nominal deadline")


def check_common_args(args: argparse.Namespace) -> argparse.Namespace:
    """Parse the shared flags with the rules of :mod:`simulator.settings` (the harness uses the same ones).

    Flags are read as text and parsed here, not by argparse, so that a bad
    value gets the same one-line message as the same setting given to the
    harness. Runs before the pool is read.
    """
    args.seed = check_seed(args.seed, "--seed", "flag")
    for name, check in (("budget", check_budget), ("deadline", check_deadline),
                        ("budget_ratio", check_ratio), ("deadline_ratio", check_ratio),
                        ("trials", check_trials)):  # fmt: skip
        if getattr(args, name, None) is not None:
            setattr(args, name, check(getattr(args, name), "--" + name.replace("_", "-"), "flag"))
    return args


def cost_setting_from_args(args: argparse.Namespace) -> CostSetting:
    return CostSetting(
        cost_mode=args.cost_mode,
        latency_dist=args.latency_dist,
        prices=load_price_table(args.price_file),
        default_price_model=args.default_price_model,
    )


def load_pool_and_dag(args: argparse.Namespace) -> tuple[Pool, int]:
    pool = load_pool(args.pool)
    if not (0 <= args.dag < len(pool)):
        raise ConfigError(f"{args.pool}: --dag {args.dag} does not exist (the pool has {len(pool)} DAGs)")
    return pool, args.dag


def resolve_budget_deadline(args, arr, where: str) -> tuple[float, float]:
    """Absolute (budget, deadline) from absolute or ratio flags (already checked by :func:`check_common_args`)."""
    budget = args.budget if args.budget is not None else args.budget_ratio * nominal_budget(arr, where)
    deadline = (
        args.deadline if args.deadline is not None else args.deadline_ratio * nominal_deadline(arr, where)
    )
    if not (math.isfinite(budget) and budget > 0):  # ratio x nominal: a zero-cost DAG has nominal budget 0
        raise ConfigError(f"{where}the budget must be a finite number > 0, got {budget}")
    if not (deadline > 0):
        raise ConfigError(f"{where}the deadline must be > 0, got {deadline}")
    return float(budget), float(deadline)


def cmd_validate(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator validate", description="Check a DAG pool.")
    ap.add_argument("--pool", required=True)
    ap.add_argument("--index-file", default=None, help="optional index file selecting rows")
    args = ap.parse_args(argv)
    from .pool import load_index_file

    pool = load_pool(args.pool)
    if args.index_file:
        pool = pool.subset(load_index_file(args.index_file, len(pool)), source=args.index_file)
    sizes = np.array([d.n_nodes for d in pool])
    depths = np.array([d.depth() for d in pool])
    kinds: dict[str, int] = {}
    for d in pool:
        kinds[d.dag_kind] = kinds.get(d.dag_kind, 0) + 1
    print(f"{args.pool}: OK")
    print(f"  DAGs: {len(pool)}   nodes: {sizes.sum()} (min {sizes.min()}, median {int(np.median(sizes))}, "
          f"max {sizes.max()})   depth: min {depths.min()}, max {depths.max()}")
    print(f"  kinds: {', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))}")
    print(f"  models: {', '.join(pool.model_ids)}")
    for m in pool.model_ids:
        avail = tot = rows = 0
        for d in pool:
            if m in d.model_ids:
                j = d.model_ids.index(m)
                avail += int(d.available[:, j].sum())
                rows += sum(d.rows(v, j).stop - d.rows(v, j).start for v in range(d.n_nodes))
            tot += d.n_nodes
        print(f"    {m}: available on {avail}/{tot} nodes ({100.0 * avail / tot:.1f}%), {rows} empirical rows")
    return 0


def cmd_simulate(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m simulator simulate",
        description="On-time completion probability of one method on one DAG.",
    )
    add_pool_arguments(ap)
    add_budget_deadline_arguments(ap)
    ap.add_argument("--method", default="sequential", help=f"one of {', '.join(METHOD_ORDER)}")
    ap.add_argument("--trials", default="1000", help="episodes (an integer >= 1)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    mcpp_args = _mcpp_argument_helpers()
    if mcpp_args:
        mcpp_args[0](ap)
    args = check_common_args(ap.parse_args(argv))
    if args.method not in METHOD_ORDER:
        raise ConfigError(f"unknown method {args.method!r}; choose one of: {', '.join(METHOD_ORDER)}")
    pool, i = load_pool_and_dag(args)
    setting = cost_setting_from_args(args)
    arr = dag_arrays(pool, i, setting)
    where = f"{args.pool}: DAG {i} (problem {pool[i].problem_id!r}): "
    budget, deadline = resolve_budget_deadline(args, arr, where)
    from .simulate import simulate_baseline, simulate_policy

    dag_key = pool[i].index
    if is_baseline(args.method):
        batch = simulate_baseline(arr, args.method, budget, range(args.trials), args.seed, dag_key, parallel=True)
    else:
        params = mcpp_args[1](args) if mcpp_args else {}
        from tqdm import tqdm

        with tqdm(total=args.trials, desc=args.method, disable=args.json or None, file=sys.stderr) as bar:
            batch = simulate_policy(arr, args.method, budget, deadline, range(args.trials), args.seed,
                                    dag_key, params, progress=bar.update, model_names=pool[i].model_ids)
    recs = batch.records(deadline)
    ok = np.array([r["on_time_success"] for r in recs])
    lo, hi = wilson_interval(int(ok.sum()), len(ok))
    mk = np.array([r["makespan"] for r in recs])
    result = {
        "pool": args.pool,
        "dag": i,
        "problem_id": pool[i].problem_id,
        "method": args.method,
        "budget": budget,
        "deadline": deadline,
        "cost_mode": setting.cost_mode,
        "trials": len(recs),
        "seed": args.seed,
        "on_time_completion_probability": float(ok.mean()),
        "ci95": [lo, hi],
        "mean_cost": float(np.mean([r["total_cost"] for r in recs])),
        "mean_makespan": float(mk.mean()),
        "mean_makespan_successes": float(mk[ok].mean()) if ok.any() else None,
        "termination": {str(k): int(v) for k, v in zip(*np.unique([r["termination_reason"] for r in recs],
                                                                 return_counts=True))},
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.method} on DAG {i} ({pool[i].problem_id}), budget {budget:g}, deadline {deadline:g}, "
              f"{len(recs)} trials")
        print(f"  on-time completion probability: {result['on_time_completion_probability']:.4f} "
              f"(95% CI {lo:.4f} - {hi:.4f})")
        print(f"  mean cost: {result['mean_cost']:.6g}   mean makespan: {result['mean_makespan']:.4g} s")
        print(f"  termination: {result['termination']}")
    return 0


def _mcpp_argument_helpers():
    """(add_arguments, params_from_args) of MCPP when its module is present."""
    try:
        from . import mc_portfolio_policy as mp
    except ImportError:
        return None
    add = getattr(mp, "add_mcpp_arguments", None)
    get = getattr(mp, "mcpp_params_from_args", None)
    return (add, get) if add and get else None


COMMANDS = {"validate": cmd_validate, "simulate": cmd_simulate}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = dict(COMMANDS)
    try:
        from .planner_cli import plan_main, predict_main

        commands["plan"] = plan_main
        commands["predict"] = predict_main
    except ImportError:
        pass
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m simulator {" + ",".join(commands) + "} [options]\n")
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in commands:
        print(f"error: unknown command {cmd!r}; choose one of {', '.join(commands)}", file=sys.stderr)
        return 2
    return cli_entry(commands[cmd])(rest)

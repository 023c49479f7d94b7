"""Flags and their resolution shared by every ``python -m simulator`` subcommand.

Why a module of its own: ``validate``/``simulate`` (:mod:`simulator.cli.main`) and
``plan``/``predict`` (:mod:`simulator.cli.planner`) take the same pool, cost
and budget/deadline flags; keeping them here lets the two command modules
share them without importing each other.
"""

from __future__ import annotations

import argparse
import math

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.settings import (
    check_budget,
    check_deadline,
    check_mcpp_model_names,
    check_ratio,
    check_seed,
    check_trials,
)
from simulator.costs.arrays import LATENCY_DISTS, CostSetting
from simulator.costs.charges import COST_MODE_ALIASES, COST_MODES, load_price_table
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.pools.pool import Pool, load_pool


def add_pool_arguments(ap: argparse.ArgumentParser) -> None:
    """--pool/--dag and the cost setting flags shared by every subcommand."""
    ap.add_argument("--pool", type=cliargs.input_path(), required=True, help="DAG pool JSONL")
    ap.add_argument("--dag", type=int, default=0, help="row of the DAG in the pool (0-based)")
    ap.add_argument("--cost-mode", default="token_cost_mean",
                    help=f"one of {', '.join(COST_MODES)} (aliases {', '.join(COST_MODE_ALIASES)})")
    ap.add_argument("--latency-dist", default="lognormal", choices=LATENCY_DISTS,
                    help="parametric latency when a (node, model) has no rows")
    ap.add_argument("--price-file", type=cliargs.input_path(), default=None,
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
    """Parse the shared flags with the rules of :mod:`simulator.base.settings` (the harness uses the same ones).

    Flags are read as text and parsed here, not by argparse, so that a bad
    value gets the same one-line message as the same setting given to the
    harness. Call it right after ``parse_args``, before the pool is read.
    """
    args.seed = check_seed(args.seed, "--seed", "flag")
    for name, check in (("budget", check_budget), ("deadline", check_deadline),
                        ("budget_ratio", check_ratio), ("deadline_ratio", check_ratio),
                        ("trials", check_trials)):  # fmt: skip
        if getattr(args, name, None) is not None:
            setattr(args, name, check(getattr(args, name), "--" + name.replace("_", "-"), "flag"))
    return args


def check_mcpp_models(params: dict, pool: Pool) -> None:
    """--mc-portfolio-model-ids: every name must be a model of the pool (the harness's rule too)."""
    from simulator.mcpp.params import resolve_params

    check_mcpp_model_names(resolve_params(params).model_ids, pool.model_ids, "--mc-portfolio-model-ids", "flag")


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
    """Absolute (budget, deadline) from absolute or ratio flags (checked by :func:`check_common_args`)."""
    from simulator.costs.nominal import scale_by_ratio

    budget = args.budget if args.budget is not None else scale_by_ratio(
        args.budget_ratio, nominal_budget(arr, where), "budget", "--budget-ratio", where)
    deadline = args.deadline if args.deadline is not None else scale_by_ratio(
        args.deadline_ratio, nominal_deadline(arr, where), "deadline", "--deadline-ratio", where)
    if not (math.isfinite(budget) and budget > 0):  # ratio x nominal: a DAG of free attempts has nominal 0
        raise ConfigError(f"{where}the budget must be a finite number > 0, got {budget}")
    if not (deadline > 0):
        raise ConfigError(f"{where}the deadline must be > 0, got {deadline}")
    return float(budget), float(deadline)

"""Flags and their resolution shared by every ``python -m simulator`` subcommand.

Why a module of its own: ``validate``/``simulate`` (:mod:`simulator.cli`) and
``plan``/``predict`` (:mod:`simulator.planner_cli`) take the same pool, cost
and budget/deadline flags; keeping them here lets the two command modules
share them without importing each other.
"""

from __future__ import annotations

import argparse
import math

from .arrays import LATENCY_DISTS, CostSetting
from .costs import COST_MODE_ALIASES, COST_MODES, load_price_table
from .errors import ConfigError
from .nominal import nominal_budget, nominal_deadline
from .pool import Pool, load_pool


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
    ap.add_argument("--seed", type=int, default=42, help="run seed (keyed randomness)")


def add_budget_deadline_arguments(ap: argparse.ArgumentParser) -> None:
    b = ap.add_mutually_exclusive_group(required=True)
    b.add_argument("--budget", type=float, help="absolute budget (unit of the cost mode)")
    b.add_argument("--budget-ratio", type=float, help="multiple of the nominal budget")
    d = ap.add_mutually_exclusive_group(required=True)
    d.add_argument("--deadline", type=float, help="absolute deadline in seconds ('inf' allowed)")
    d.add_argument("--deadline-ratio", type=float, help="multiple of the nominal deadline")


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
    """Absolute (budget, deadline) from absolute or ratio flags."""
    budget = args.budget if args.budget is not None else args.budget_ratio * nominal_budget(arr, where)
    deadline = (
        args.deadline if args.deadline is not None else args.deadline_ratio * nominal_deadline(arr, where)
    )
    if not (budget >= 0) or math.isnan(budget):
        raise ConfigError(f"budget must be a non-negative number, got {budget}")
    if not (deadline > 0):
        raise ConfigError(f"deadline must be positive, got {deadline}")
    return float(budget), float(deadline)

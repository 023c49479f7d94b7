"""Flags and their resolution shared by every ``python -m simulator`` subcommand.

Why a module of its own: ``validate``/``simulate`` (:mod:`simulator.cli.main`) and
``plan``/``predict`` (:mod:`simulator.cli.planner`) take the same pool, cost
and budget/deadline flags; keeping them here lets the two command modules
share them without importing each other.
"""

from __future__ import annotations

import argparse

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.settings import check_mcpp_model_names, check_seed, check_trials
from simulator.costs.arrays import LATENCY_DISTS, CostSetting
from simulator.costs.charges import COST_MODE_ALIASES, COST_MODES, load_price_table
from simulator.costs.limits import FLAGS_DEST as LIMIT_FLAGS
from simulator.costs.limits import limits_from_args
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


def check_common_args(args: argparse.Namespace) -> argparse.Namespace:
    """Parse the shared flags with the rules of :mod:`simulator.base.settings` (the harness uses the same ones).

    Flags are read as text and parsed here, not by argparse, so that a bad
    value gets the same one-line message as the same setting given to the
    harness. Call it right after ``parse_args``, before the pool is read.
    """
    args.seed = check_seed(args.seed, "--seed", "flag")
    if getattr(args, LIMIT_FLAGS, None) is not None:
        limits_from_args(args)  # a bad budget or deadline is refused here, before the pool is read
    if getattr(args, "trials", None) is not None:
        args.trials = check_trials(args.trials, "--trials", "flag")
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

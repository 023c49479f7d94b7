"""``python -m poolbuild.synthetic``: its flags, their checks, and the pool written atomically."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from poolbuild.synthetic.build import generate
from poolbuild.synthetic.stats import (
    DEFAULT_MODELS,
    LibraryStats,
    ParametricStats,
    load_model_spec,
    read_template_csv,
    resolve_models,
)
from poolbuild.synthetic.topology import TOPOLOGIES, ShapeConfig
from simulator.base import cliargs
from simulator.base.errors import UserError, cli_entry
from simulator.pools.pool import write_pool


def parse_range(text: str | int, what: str) -> tuple[int, int]:
    """``"5-12"`` -> (5, 12); ``"7"`` -> (7, 7)."""
    s = str(text).strip()
    try:
        if "-" in s:
            a, b = s.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(s)
    except ValueError:
        raise UserError(f"{what}: expected an integer or a range like 5-12, got {text!r}") from None
    if lo > hi or lo < 1:
        raise UserError(f"{what}: bad range {text!r}")
    return lo, hi


def parse_topologies(text: str, n_dags: int | None) -> list[tuple[str, int | None]]:
    """``"codeflow:8,layered:10"`` -> [("codeflow", 8), ("layered", 10)]; a bare name takes --n-dags."""
    out: list[tuple[str, int | None]] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name, _, count = part.partition(":")
        name = name.strip().replace("-", "_")
        if name not in TOPOLOGIES:
            raise UserError(f"unknown topology {name!r}; choose from {', '.join(TOPOLOGIES)}")
        if count:
            try:
                k = int(count)
            except ValueError:
                raise UserError(f"topology {part!r}: count must be an integer") from None
        else:
            k = n_dags
        if k is not None and k < 1:
            raise UserError(f"topology {part!r}: the number of DAGs must be >= 1")
        out.append((name, k))
    if not out:
        raise UserError("--topology is empty")
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = cliargs.ArgumentParser(
        prog="python -m poolbuild.synthetic",
        description=(
            "Write a SYNTHETIC DAG pool (JSONL): generated or benchmark topologies with "
            "per-node statistics from a parametric multi-LLM model or a template CSV. "
            "Every DAG is labelled synthetic (dag_kind synthetic_*, synthetic: true)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  python -m poolbuild.synthetic --topology layered --n-dags 20 --rows 16 --out p.jsonl\n"
            "  python -m poolbuild.synthetic --topology codeflow:8,layered:10,fork_join:6 \\\n"
            "      --benchmark-nodes 4-9 --max-width 2 --rows 16 --seed 2024 --out mix.jsonl\n"
            "  python -m poolbuild.synthetic --topology proofflow --models 30B_ins --out pf.jsonl\n"
            "  python -m poolbuild.synthetic --topology chain --n-dags 5 --template-csv lib.csv \\\n"
            "      --out c.jsonl\n"
            "details: docs/synthetic.md"
        ),
    )
    ap.add_argument(
        "--topology",
        default="layered",
        help="layered|chain|fork_join|codeflow|proofflow, or a mix like codeflow:8,layered:10 "
        "(default: layered)",
    )
    ap.add_argument(
        "--n-dags",
        type=int,
        default=None,
        help="DAGs per topology without a :COUNT (codeflow/proofflow: default all problems that "
        "pass --benchmark-nodes/--max-width)",
    )
    ap.add_argument("--n-nodes", default="5-12", help="nodes per generated DAG, N or LO-HI (default: 5-12)")
    ap.add_argument(
        "--benchmark-nodes",
        default=None,
        help="codeflow/proofflow: keep only problems with this many nodes, N or LO-HI",
    )
    ap.add_argument("--layers", default=None, help="layered: number of layers, N or LO-HI (default: round(sqrt(n)) to n/2)")
    ap.add_argument("--edge-prob", type=cliargs.number(0, 1), default=0.5, help="layered: edge probability (default: 0.5)")
    ap.add_argument(
        "--max-width",
        type=int,
        default=None,
        help="most nodes per layer (layered); codeflow/proofflow: keep only problems that narrow",
    )
    ap.add_argument("--width", default="2-3", help="fork_join: parallel branches, N or LO-HI (default: 2-3)")
    ap.add_argument("--branch-length", default="1-2", help="fork_join: nodes per branch (default: 1-2)")
    ap.add_argument("--repeats", default="1-2", help="fork_join: fork-join stages (default: 1-2)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument(
        "--models",
        default=None,
        help=f"parametric models: a count or a comma list of ids (default: {','.join(DEFAULT_MODELS)})",
    )
    src.add_argument("--model-spec", type=cliargs.input_path(), default=None, help="JSON file defining parametric models")
    src.add_argument(
        "--template-csv", type=cliargs.input_path(),
        default=None,
        help="template library CSV: success_prob,lat_mean,lat_std,cost_mean"
        "[,token_cost_mean,model_id]",
    )
    ap.add_argument(
        "--legacy-model",
        default=None,
        help="model whose stats fill the legacy template (default: the first model)",
    )
    ap.add_argument("--rows", type=int, default=0, help="empirical rows per (node, model); 0 = parametric templates only (default: 0)")
    ap.add_argument("--benchmark-file", type=cliargs.input_path(), default=None, help="override the bundled benchmark JSON")
    ap.add_argument(
        "--order",
        choices=("interleaved", "grouped"),
        default="interleaved",
        help="mixes: spread the topology groups evenly over the pool, or keep them in blocks "
        "(default: interleaved)",
    )
    ap.add_argument("--seed", type=cliargs.integer(0), default=0, help="seed of every random draw (default: 0)")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, help="output pool (JSONL, written atomically)")
    return ap


@cli_entry
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.rows < 0:
        raise UserError("--rows must be >= 0")
    if not 0.0 <= args.edge_prob <= 1.0:
        raise UserError("--edge-prob must be in [0, 1]")
    tops = parse_topologies(args.topology, args.n_dags)
    shape = ShapeConfig(
        n_nodes=parse_range(args.n_nodes, "--n-nodes"),
        layers=parse_range(args.layers, "--layers") if args.layers else None,
        edge_prob=args.edge_prob,
        max_width=args.max_width,
        width=parse_range(args.width, "--width"),
        branch_length=parse_range(args.branch_length, "--branch-length"),
        repeats=parse_range(args.repeats, "--repeats"),
    )
    if args.benchmark_nodes:
        shape.filter_nodes = parse_range(args.benchmark_nodes, "--benchmark-nodes")
    stats: ParametricStats | LibraryStats
    if args.template_csv:
        stats = LibraryStats(read_template_csv(args.template_csv))
    elif args.model_spec:
        stats = ParametricStats(load_model_spec(args.model_spec))
    else:
        stats = ParametricStats(resolve_models(args.models))
    dags = generate(
        tops,
        stats=stats,
        shape=shape,
        n_rows=args.rows,
        seed=args.seed,
        legacy=args.legacy_model,
        benchmark_file=args.benchmark_file,
        order=args.order,
    )
    n = write_pool(args.out, dags)
    n_nodes = sum(d["n_nodes"] for d in dags)
    print(f"wrote {n} synthetic DAGs ({n_nodes} nodes, models {stats.model_ids}) to {args.out}")
    return 0

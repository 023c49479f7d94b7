"""Align several models' rollouts (or single-model pools) into comparable DAG pools.

Writes into ``--out-dir`` (atomically):

- ``<model>.jsonl`` per model: the problems every model completed, in one order
  and one topology (row i is the same problem in every file);
- ``multi_model.jsonl``: the same problems first, in the same order, each node
  with ``model_templates`` / ``empirical_samples_by_model`` /
  ``available_model_ids``; DAG-level ``model_ids`` and ``baseline_model``.
  Under ``--missing-policy impute`` the problems some model lacks follow, that
  model marked unavailable (success_prob 0, Infinity latency/cost) where it has
  no data;
- ``selected_dag_indices.json``: the complete rows (valid in every pool above);
- ``summary.json``: sources, files scanned, problems kept / imputed / dropped with reasons.

A topology mismatch between models is an error naming the problem.

Example:

    python build_aligned_union_dag_pools.py --rollout-root rollouts/ \\
        --missing-policy impute --baseline-model 4B_ins --out-dir pools/aligned
    python build_aligned_union_dag_pools.py --pool 4B_ins=p4b.jsonl \\
        --pool 30B_ins=p30b.jsonl --out-dir pools/aligned
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from poolbuild.align import (
    MISSING_POLICIES,
    ModelDag,
    align,
    check_model_id,
    dags_from_pool,
    dags_from_rollouts,
)
from poolbuild.dag_builder import BuildOptions, add_build_option_flags, build_options_from_args
from simulator.base import cliargs
from simulator.base.errors import UserError, cli_entry
from simulator.base.io_utils import atomic_write_json
from simulator.pools.pool import write_index_file, write_pool

MULTI_NAME = "multi_model.jsonl"


def _pair(text: str, flag: str) -> tuple[str, Path]:
    if "=" not in text:
        raise UserError(f"{flag} expects MODEL=PATH, got {text!r}")
    m, p = text.split("=", 1)
    return check_model_id(m.strip()), Path(p)


def collect_sources(
    rollouts: list[str], pools: list[str], rollout_root: str | None
) -> list[tuple[str, str, Path]]:
    """``[(model, kind, path)]`` in the order given (root subdirectories sorted)."""
    out: list[tuple[str, str, Path]] = []
    if rollout_root:
        root = Path(rollout_root)
        if not root.is_dir():
            raise UserError(f"--rollout-root {root} is not a directory")
        for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            out.append((check_model_id(d.name), "rollouts", d))
    for t in rollouts:
        m, p = _pair(t, "--rollouts")
        out.append((m, "rollouts", p))
    for t in pools:
        m, p = _pair(t, "--pool")
        out.append((m, "pool", p))
    seen: set[str] = set()
    for m, _, _ in out:
        if m in seen:
            raise UserError(f"model {m!r} is given twice")
        seen.add(m)
    if not out:
        raise UserError(
            "no sources: give --rollout-root, --rollouts MODEL=PATH or --pool MODEL=PATH"
        )
    return out


def build_aligned(
    sources: list[tuple[str, str, Path]],
    out_dir: str | Path,
    missing_policy: str = "error",
    baseline_model: str | None = None,
    opts: BuildOptions | None = None,
) -> dict[str, Any]:
    """Read, align and write every output; returns the summary."""
    opts = opts or BuildOptions()
    out_dir = Path(out_dir)
    data: dict[str, dict[str, ModelDag]] = {}
    scanned: dict[str, int] = {}
    excluded: list[dict[str, Any]] = []
    for m, kind, path in sources:
        if kind == "pool":
            data[m] = dags_from_pool(m, path)
            scanned[m] = 1
        else:
            data[m], scanned[m], exc = dags_from_rollouts(m, path, opts)
            excluded += exc
    # a problem excluded by a filter for one model is missing for that model (policy applies)
    res = align(data, missing_policy, baseline_model, opts.drop_never_succeeded)
    if not res.multi:
        raise UserError("no problem left after alignment: "
                        + "; ".join(f"{d['problem_id']}: {d['reason']}" for d in res.dropped[:5]))
    written: dict[str, str] = {}
    for m in res.models:
        if res.per_model[m]:
            p = out_dir / f"{m}.jsonl"
            write_pool(p, res.per_model[m])
            written[m] = str(p)
    multi_path = out_dir / MULTI_NAME
    write_pool(multi_path, res.multi)
    index_path = out_dir / "selected_dag_indices.json"
    write_index_file(index_path, range(len(res.complete)) if res.complete else [])
    summary = {
        "sources": [{"model": m, "kind": k, "path": str(p), "files_scanned": scanned[m],
                     "problems": len(data[m])} for m, k, p in sources],
        "models": res.models,
        "baseline_model": baseline_model or res.models[0],
        "missing_policy": missing_policy,
        "latency": opts.latency_label,
        "per_model_pools": written,
        "multi_model_pool": str(multi_path),
        "index_file": str(index_path),
        "complete_problems": res.complete,
        "imputed_problems": res.imputed,
        "dropped_problems": res.dropped,
        "excluded_by_filter": excluded,
        "dags_written": {"per_model": len(res.complete), "multi_model": len(res.multi)},
    }
    atomic_write_json(out_dir / "summary.json", summary)
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = cliargs.ArgumentParser(
        description="Align several models' rollouts or pools into per-model pools with one "
        "row order and topology, plus one multi-model pool.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Example:")[1],
    )
    ap.add_argument("--rollout-root", type=cliargs.input_path("dir"), default=None,
                    help="directory with one subdirectory of rollout records per model")
    ap.add_argument("--rollouts", type=cliargs.input_path("any", keyed=True), action="append", default=[], metavar="MODEL=PATH",
                    help="rollout records of one model (file or directory); repeatable")
    ap.add_argument("--pool", type=cliargs.input_path(keyed=True), action="append", default=[], metavar="MODEL=PATH",
                    help="single-model pool of one model; repeatable")
    ap.add_argument("--out-dir", type=cliargs.output_path("dir"), required=True, help="output directory")
    ap.add_argument("--missing-policy", choices=MISSING_POLICIES, default="error",
                    help="missing (problem, model) or (node, model) data: impute marks the model "
                    "unavailable there, drop removes the problem, error stops (default)")
    ap.add_argument("--baseline-model", default=None,
                    help="model filling the legacy template (default: the first model)")
    add_build_option_flags(ap, {
        "include_eval_latency": "latency = generation + verification time (rollout sources)",
        "drop_no_latency": "skip a model's DAG when an attempt has no latency (else an error)",
        "drop_never_succeeded": "drop problems with a node that no model ever solved",
    })
    return ap.parse_args(argv)


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    opts = build_options_from_args(args)
    sources = collect_sources(args.rollouts, args.pool, args.rollout_root)
    s = build_aligned(sources, args.out_dir, args.missing_policy, args.baseline_model, opts)
    print(f"models {s['models']}: {len(s['complete_problems'])} complete problems, "
          f"{len(s['imputed_problems'])} with imputed models, "
          f"{len(s['dropped_problems'])} dropped; outputs in {args.out_dir}")
    for d in s["dropped_problems"]:
        print(f"  dropped {d['problem_id']}: {d['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

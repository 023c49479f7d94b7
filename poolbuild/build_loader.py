"""Build a DAG pool (JSONL) from verified rollout records of one model.

Input: rollout records (``docs/rollout_format.md``): a file, or a directory
searched recursively (``<out_dir>/<model>/<problem_id>.json``). Output, all
written atomically:

- the pool: one DAG per (problem) record, per node a template (success mean,
  latency mean/std, token mean) and one empirical row per attempt;
- ``selected_dag_indices.json``: ``{"dag_indices": [...]}`` (every written row,
  with the problem ids alongside) for the experiment runner;
- a summary JSON: files scanned, DAGs written, DAGs excluded with the reason.

Example:

    python build_loader_dag_pool_from_rollouts.py rollouts/4B_ins \\
        --out pools/codeflow_4B_ins.jsonl --drop-no-attempts --drop-no-latency
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from poolbuild.dag_builder import (
    BuildOptions,
    Excluded,
    add_build_option_flags,
    build_options_from_args,
    dag_from_record,
)
from poolbuild.records import load_records
from simulator.base import cliargs
from simulator.base.errors import UserError, cli_entry
from simulator.base.io_utils import atomic_write_json
from simulator.pools.pool import write_index_file, write_pool


def build_pool(
    inputs: list[str | Path],
    out: str | Path,
    opts: BuildOptions,
    model: str | None = None,
    index_out: str | Path | None = None,
    summary_out: str | Path | None = None,
) -> dict[str, Any]:
    """Build and write the pool, index file and summary; returns the summary."""
    out = Path(out)
    index_out = Path(index_out) if index_out else out.parent / "selected_dag_indices.json"
    summary_out = Path(summary_out) if summary_out else out.with_suffix(".summary.json")
    records, n_files = load_records(list(inputs))
    models = sorted({r.model for r in records})
    if model is not None:
        records = [r for r in records if r.model == model]
        if not records:
            raise UserError(f"no records of model {model!r} (models found: {models})")
    elif len(models) > 1:
        raise UserError(
            f"records of several models found {models}: pass --model to choose one "
            "(build_aligned_union_dag_pools.py builds multi-model pools)"
        )
    if not records:
        raise UserError(f"no rollout records found in {[str(p) for p in inputs]}")
    dags: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    for rec in records:
        try:
            dags.append(dag_from_record(rec, opts))
        except Excluded as exc:
            excluded.append({"problem_id": rec.problem_id, "model": rec.model,
                             "source": rec.source, "filter": exc.kind, "reason": exc.reason})
    if not dags:
        raise UserError(f"every DAG was excluded ({len(excluded)}); see the reasons: "
                        + "; ".join(f"{e['problem_id']}: {e['reason']}" for e in excluded[:5]))
    write_pool(out, dags)
    write_index_file(index_out, range(len(dags)))
    summary = {
        "inputs": [str(p) for p in inputs],
        "model": records[0].model,
        "files_scanned": n_files,
        "records_read": len(records),
        "dags_written": len(dags),
        "dags_excluded": len(excluded),
        "excluded": excluded,
        "filters": {
            "drop_no_attempts": opts.drop_no_attempts,
            "drop_never_succeeded": opts.drop_never_succeeded,
            "drop_no_latency": opts.drop_no_latency,
        },
        "latency": opts.latency_label,
        "pool": str(out),
        "index_file": str(index_out),
        "problem_ids": [d["problem_id"] for d in dags],
    }
    atomic_write_json(summary_out, summary)
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = cliargs.ArgumentParser(
        description="Build a DAG pool (JSONL) from verified rollout records of one model.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Example:")[1],
    )
    ap.add_argument("inputs", type=cliargs.input_path("any"), nargs="+", help="rollout record files or directories")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, help="output pool (.jsonl)")
    ap.add_argument("--model", default=None, help="keep only records of this model id")
    ap.add_argument("--index-out", type=cliargs.output_path(), default=None,
                    help="index file (default: selected_dag_indices.json next to the pool)")
    ap.add_argument("--summary-out", type=cliargs.output_path(), default=None,
                    help="summary JSON (default: <pool>.summary.json)")
    add_build_option_flags(ap, {
        "include_eval_latency": "latency = generation + verification time "
                                "(default: generation only)",
        "drop_no_attempts": "drop DAGs with a node without attempts (otherwise an error)",
        "drop_never_succeeded": "drop DAGs with a node that never succeeded (otherwise kept)",
        "drop_no_latency": "drop DAGs with an attempt without latency (otherwise an error)",
    })
    return ap.parse_args(argv)


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    opts = build_options_from_args(args)
    s = build_pool(args.inputs, args.out, opts, args.model, args.index_out, args.summary_out)
    print(f"scanned {s['files_scanned']} files: wrote {s['dags_written']} DAGs to {s['pool']}, "
          f"excluded {s['dags_excluded']}")
    for e in s["excluded"]:
        print(f"  excluded {e['problem_id']}: {e['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

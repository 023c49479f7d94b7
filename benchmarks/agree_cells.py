"""``executor agree`` over a grid of cells under the live rules: live episodes vs simulated ones, cell by cell.

Run by hand: ``python -m benchmarks.agree_cells [--runs 400] [--dag 0] [--seed 0] [--methods ...]``
writes ``benchmarks/results_agree_cells.json`` (``results_agree_cells_seed<S>.json`` for a seed other
than 0) and prints a Markdown table (quoted in ``docs/executor.md``). The world draws with seed + 1, so
the two sides are independent samples; a cell agrees when both differences (on-time rate, mean spend)
are within 2 standard errors.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("mc_portfolio_rollout", "sequential", "uniform")
BUDGETS = ("0.5", "0.7", "1")
DEADLINES = ("0.7", "1", "1.5")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--dag", default="0")
    ap.add_argument("--seed", type=int, default=0, help="the simulated side's seed (the world's is seed + 1)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out_name = "results_agree_cells.json" if args.seed == 0 else f"results_agree_cells_seed{args.seed}.json"
    args.out = args.out or str(ROOT / "benchmarks" / out_name)
    rows = []
    for method in args.methods:
        for b in BUDGETS:
            for d in DEADLINES:
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "executor", "agree", "--pool",
                                      str(ROOT / "examples" / "example_pool.jsonl"), "--dag", args.dag,
                                      "--method", method, "--runs", str(args.runs), "--budget-ratio", b,
                                      "--deadline-ratio", d, "--z", "2", "--seed", str(args.seed), "--json"],
                                     capture_output=True, text=True, cwd=ROOT)
                r = json.loads(out.stdout)
                rows.append({"method": method, "budget_ratio": b, "deadline_ratio": d,
                             "live": r["on_time"]["live"], "sim": r["on_time"]["sim"],
                             "z_on_time": r["on_time"]["z_score"], "spend_live": r["spend"]["live"],
                             "spend_sim": r["spend"]["sim"], "z_spend": r["spend"]["z_score"], "pass": r["pass"],
                             "seconds": round(time.perf_counter() - t0, 1)})
                print(json.dumps(rows[-1]), flush=True)
    Path(args.out).write_text(json.dumps({"runs": args.runs, "dag": args.dag, "seed": args.seed, "cells": rows}, indent=1))
    print("| method | budget | deadline | on time live | simulated | z | spend live | simulated | z | within 2 SE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['budget_ratio']} | {r['deadline_ratio']} | {r['live']:.3f} | {r['sim']:.3f} | "
              f"{r['z_on_time']:+.2f} | {r['spend_live']:.0f} | {r['spend_sim']:.0f} | {r['z_spend']:+.2f} | "
              f"{'yes' if r['pass'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

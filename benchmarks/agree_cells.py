"""``executor agree`` over a grid of cells under the live rules: live episodes vs simulated ones, cell by cell.

Run by hand: ``python -m benchmarks.agree_cells [--runs 400] [--dag 0] [--seed 0] [--methods ...]``
writes ``benchmarks/results_agree_cells.json`` (``results_agree_cells_seed<S>.json`` for a seed other
than 0) and prints a Markdown table (quoted in ``docs/executor.md``). The world draws with seed + 1, so
the two sides are independent samples; a cell agrees when both differences (on-time rate, mean spend)
are within 2 standard errors.

``python -m benchmarks.agree_cells --summary`` reads every ``results_agree_cells*.json`` (one per seed)
and prints how the z-scores spread over the replications: were the two sides equal in distribution, a
z-score would be standard normal, and 4.6% of comparisons would lie beyond 2 SE by chance.
``--spread METHOD B D [--seeds 40]`` checks the standard errors themselves on the simulated side alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_json
from simulator.base.validation import check_int
from simulator.costs.limits import BUDGET, DEADLINE, MODEL_SECONDS, RATIO, Limit
from simulator.methods import method_spec

ROOT = Path(__file__).resolve().parent.parent
POOL = str(ROOT / "examples" / "example_pool.jsonl")
METHODS = ("mc_portfolio_rollout", "sequential", "uniform")
BUDGETS = ("0.5", "0.7", "1")
DEADLINES = ("0.7", "1", "1.5")


def seed_of(path: Path) -> int:
    """The seed of a replication's file (``results_agree_cells.json`` is seed 0)."""
    return int(path.stem.removeprefix("results_agree_cells").removeprefix("_seed") or 0)


def summary(paths: list[Path]) -> str:
    """The z-scores of every replication, per method and per seed, against a standard normal's."""
    by_method: dict[str, list[tuple[str, float]]] = {}
    lines = ["| seed | cells | within 2 SE |", "|---|---|---|"]
    every_cell = {"all methods": [0, 0], "the baselines": [0, 0]}  # [replications with every cell in, replications]
    for path in paths:
        res = json.loads(path.read_text())
        cells = res["cells"]
        lines.append(f"| {res.get('seed', 0)} | {len(cells)} | {sum(c['pass'] for c in cells)} |")
        baselines = [c for c in cells if c["method"] != METHODS[0]]
        for name, group in (("all methods", cells if len(baselines) < len(cells) else []), ("the baselines", baselines)):
            if group:
                every_cell[name][0] += all(c["pass"] for c in group)
                every_cell[name][1] += 1
        for c in cells:
            degenerate = c["live"] == c["sim"] and c["live"] in (0.0, 1.0)  # both rates 0 or 1: no spread to compare
            if not degenerate:
                by_method.setdefault(c["method"], []).append(("on time", c["z_on_time"]))
            by_method.setdefault(c["method"], []).append(("spend", c["z_spend"]))
    lines += ["", "| method | measure | comparisons | beyond 2 SE | mean z | sd of z |", "|---|---|---|---|---|---|"]
    for method, zs in by_method.items():
        for measure in ("on time", "spend"):
            z = np.array([v for m, v in zs if m == measure])
            if not len(z):  # every on-time comparison of the method degenerate
                continue
            lines.append(f"| {method} | {measure} | {len(z)} | {int((np.abs(z) > 2).sum())} ({(np.abs(z) > 2).mean():.1%}) "
                         f"| {z.mean():+.2f} | {f'{z.std(ddof=1):.2f}' if len(z) > 1 else '-'} |")  # fmt: skip
    z_all = np.array([v for zs in by_method.values() for _, v in zs])
    lines.append(f"\nall: {int((np.abs(z_all) > 2).sum())} of {len(z_all)} comparisons beyond 2 SE "
                 f"({(np.abs(z_all) > 2).mean():.1%}; a standard normal: 4.6%)")  # fmt: skip
    for name, (n_in, n) in every_cell.items():
        lines.append(f"every cell of {name} within 2 SE: {n_in} of {n} replications")
    return "\n".join(lines)


def spread(method: str, budget_ratio: float, deadline_ratio: float, seeds: int, runs: int, dag: int) -> str:
    """The simulated side alone over ``seeds`` seeds: the spread of its on-time rate and mean spend between seeds
    against the standard errors ``agree`` computes within one seed (equal, if its trials are independent draws)."""
    from executor.agree import simulated_side
    from executor.inputs import load_dag, make_workflow
    from simulator.costs.limits import Limits

    pool, row = load_dag(POOL, dag)
    wf = make_workflow(pool, row, POOL, None, "", None, "token_cost_mean")
    budget, deadline = Limits.ratios(budget_ratio, deadline_ratio).resolve(wf.arr, f"{wf.source}: ")
    sides = [simulated_side(wf, method, budget, deadline, runs, s, None) for s in range(seeds)]
    rates = np.array([side.rate()[0] for side in sides])
    spends = np.array([side.mean_spend() for side in sides])
    p = rates.mean()
    far = int(np.argmax(np.abs(spends[:, 0] - spends[:, 0].mean())))
    return (f"{method} at budget {budget_ratio:g} x, deadline {deadline_ratio:g} x, {seeds} seeds of {runs} trials: "
            f"on-time rate sd between seeds {rates.std(ddof=1):.4f}, binomial SE {np.sqrt(p * (1 - p) / runs):.4f}; "
            f"mean spend sd between seeds {spends[:, 0].std(ddof=1):.1f}, "
            f"SE within a seed {spends[:, 1].mean():.1f} (mean); farthest seed's spend {far}: "
            f"{(spends[far, 0] - spends[:, 0].mean()) / spends[:, 1].mean():+.2f} SE from the mean of the seeds")  # fmt: skip


def agree_cell(method: str, budget_ratio: str, deadline_ratio: str, args: argparse.Namespace) -> dict:
    """One ``executor agree`` cell in its own process: the row of the results table."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "executor", "agree", "--pool", POOL, "--dag", str(args.dag),
                          "--method", method, "--runs", str(args.runs), "--budget-ratio", budget_ratio,
                          "--deadline-ratio", deadline_ratio, "--z", "2", "--seed", str(args.seed), "--json"],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    if out.returncode not in (0, 1):  # 1: the cell disagrees, still a result
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"executor agree ({method}, budget {budget_ratio}, deadline {deadline_ratio}) "
                          f"exited {out.returncode}: {last}")  # fmt: skip
    r = json.loads(out.stdout)
    return {"method": method, "budget_ratio": budget_ratio, "deadline_ratio": deadline_ratio,
            "live": r["on_time"]["live"], "sim": r["on_time"]["sim"], "z_on_time": r["on_time"]["z_score"],
            "spend_live": r["spend"]["live"], "spend_sim": r["spend"]["sim"], "z_spend": r["spend"]["z_score"],
            "pass": r["pass"], "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked before any cell runs (a bad one is one line, exit 2)."""
    ap = cliargs.ArgumentParser(prog="python -m benchmarks.agree_cells")
    ap.add_argument("--summary", action="store_true", help="summarise the replications on disk and exit")
    ap.add_argument("--spread", nargs=3, metavar=("METHOD", "BUDGET_RATIO", "DEADLINE_RATIO"),
                    help="the simulated side alone over --seeds seeds: its spread between seeds against its SE")
    ap.add_argument("--seeds", default="40")
    ap.add_argument("--runs", default="400")
    ap.add_argument("--dag", default="0")
    ap.add_argument("--seed", default="0", help="the simulated side's seed (the world's is seed + 1)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--out", type=cliargs.output_path(), default=None)
    ap.add_argument("--results", type=cliargs.input_path("dir"), default=str(ROOT / "benchmarks"), help="where --summary finds the replications")
    args = ap.parse_args(argv)
    args.seeds = check_int(args.seeds, "--seeds", "flag", lo=2)
    args.runs = check_int(args.runs, "--runs", "flag", lo=2)
    args.dag = check_int(args.dag, "--dag", "flag", lo=0)
    args.seed = check_int(args.seed, "--seed", "flag", lo=0)
    if args.spread:
        method, b, d = args.spread
        args.spread = (method, Limit(BUDGET, b, RATIO, name="--spread BUDGET_RATIO").value,
                       Limit(DEADLINE, d, RATIO, MODEL_SECONDS, name="--spread DEADLINE_RATIO").value)
    for method in [args.spread[0]] if args.spread else args.methods:
        method_spec(method)
    if not args.summary:
        from executor.inputs import load_dag

        load_dag(POOL, args.dag)  # a row the pool lacks: refused here, not by the first cell's process
    return args


def run_cells(args: argparse.Namespace) -> list[dict]:
    """Every cell of ``args.methods``, merged into the seed's results file (other methods' cells kept)."""
    out_name = "results_agree_cells.json" if args.seed == 0 else f"results_agree_cells_seed{args.seed}.json"
    out = Path(args.out or ROOT / "benchmarks" / out_name)
    rows = []
    for method in args.methods:
        for b in BUDGETS:
            for d in DEADLINES:
                rows.append(agree_cell(method, b, d, args))
                print(json.dumps(rows[-1]), flush=True)
    if out.exists():  # a replication run a method at a time: keep the other methods' cells of the same seed
        old = json.loads(out.read_text())
        if (old["runs"], int(old["dag"]), old.get("seed", 0)) == (args.runs, args.dag, args.seed):
            rows = [c for c in old["cells"] if c["method"] not in args.methods] + rows
    rows.sort(key=lambda c: METHODS.index(c["method"]) if c["method"] in METHODS else len(METHODS))
    atomic_write_json(out, {"runs": args.runs, "dag": str(args.dag), "seed": args.seed, "cells": rows}, indent=1)
    return rows


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        if args.spread:
            print(spread(*args.spread, args.seeds, args.runs, args.dag))
            return 0
        if args.summary:
            print(summary(sorted(Path(args.results).glob("results_agree_cells*.json"), key=seed_of)))
            return 0
        rows = run_cells(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("| method | budget | deadline | on time live | simulated | z | spend live | simulated | z | within 2 SE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['budget_ratio']} | {r['deadline_ratio']} | {r['live']:.3f} | {r['sim']:.3f} | "
              f"{r['z_on_time']:+.2f} | {r['spend_live']:.0f} | {r['spend_sim']:.0f} | {r['z_spend']:+.2f} | "
              f"{'yes' if r['pass'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

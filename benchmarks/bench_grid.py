#!/usr/bin/env python3
"""The 13-method grid of a 1-model pool end to end: today's tree against a git revision, side by side.

What runs: ``bash run_experiment.sh local`` (one worker per core, the harness
defaults: faithful MCPP, all 13 default methods) on a synthetic 1-model pool
of 20 DAGs (:mod:`poolbuild.synthetic`, built here with a fixed seed), 10
trials x 4 cells (budget 0.5x/2x nominal x deadline 1x/2x nominal). The
other tree is the given revision exported with ``git archive`` into a
temporary directory. Each tree has its own fresh ``NUMBA_CACHE_DIR``: its
first run is the cold one (compiles), the next ones are warm; every run gets
a fresh results directory. Warm runs alternate (old, new, new, old, ...) and
the ratio is taken per pair, since on a shared machine only side-by-side
ratios mean something. Records of all runs must be identical (timing fields
aside, as ``harness.merge.strip_timing``).

    python -m benchmarks.bench_grid                    # against 5f48d5e, 2 warm pairs
    python -m benchmarks.bench_grid --rev HEAD~3 --pairs 3
    python -m benchmarks.bench_grid --write-readme     # also the section in benchmarks/README.md

Never run by the test suite (minutes of wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "results_grid.json")
START = "<!-- bench_grid:start -->"
END = "<!-- bench_grid:end -->"
DEFAULT_REV = "5f48d5e"

POOL_ARGS = [
    "--topology", "layered:10,fork_join:5,codeflow:5", "--benchmark-nodes", "4-9", "--max-width", "2",
    "--n-nodes", "5-10", "--width", "2", "--models", "30B_ins", "--seed", "7",
]  # fmt: skip


def build_pool(path: str) -> None:
    """The 1-model pool (20 DAGs, parametric templates), with today's pool builder."""
    subprocess.run([sys.executable, "-m", "poolbuild.synthetic", *POOL_ARGS, "--out", path], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip


def export_rev(rev: str, dest: str) -> str:
    """``git archive REV`` unpacked into ``dest``; returns the full commit hash."""
    full = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    os.makedirs(dest, exist_ok=True)
    arch = subprocess.Popen(["git", "archive", full], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", dest], stdin=arch.stdout, check=True)
    arch.stdout.close()
    if arch.wait() != 0:
        raise RuntimeError(f"git archive {rev} failed")
    return full


def run_grid(tree: str, results: str, cache: str, pool: str, trials: int) -> float:
    """One whole run (prepare, shards, merge, analysis) of ``tree``; its wall time in seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MC_PORTFOLIO_", "PLANNING_"))}
    env.pop("NUMBA_NUM_THREADS", None)  # `local` gives each worker cores // workers threads
    env.update({
        "PYTHON": sys.executable, "NUMBA_CACHE_DIR": cache, "DAG_POOL_PATH": pool, "RESULTS_ROOT": results,
        "RUN_NAME": "grid", "N_EXEC_TRIALS": str(trials), "BUDGET_RATIOS": "0.5 2", "DEADLINE_RATIOS": "1 2",
        "METHOD_SET": "all", "N_WORKERS": "all",
    })  # fmt: skip
    t = time.perf_counter()
    p = subprocess.run(["bash", "run_experiment.sh", "local"], cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"run in {tree} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall


def records(results: str) -> dict:
    """Records per cell, timing fields removed (the same rule as the example digest)."""
    cells = os.path.join(results, "grid", "merged", "cells")
    out = {}
    for c in sorted(os.listdir(cells)):
        rows = []
        with open(os.path.join(cells, c, "records.jsonl"), encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                for k in list(r):
                    if "wall" in k or k.endswith("_ms") or k in ("host", "timestamp"):
                        r.pop(k)
                rows.append(r)
        out[c] = rows
    return out


def markdown(res: dict) -> str:
    old, new = res["old"], res["new"]
    lines = [
        START,
        "## The 1-model grid end to end (`benchmarks/bench_grid.py`)",
        "",
        "```bash",
        "python -m benchmarks.bench_grid --write-readme   # -> benchmarks/results_grid.json",
        "```",
        "",
        f"`bash run_experiment.sh local` (one worker per core, harness defaults: faithful MCPP) with all 13 default "
        f"methods on a synthetic 1-model pool of 20 DAGs (`poolbuild.synthetic {' '.join(POOL_ARGS)}`), "
        f"{res['trials']} trials x 4 cells (budget 0.5x/2x x deadline 1x/2x nominal): {res['n_records']} records. "
        f"Today's tree against `{res['rev'][:7]}` exported with `git archive`, each with its own fresh numba cache "
        f"(first run cold, then warm), fresh results directories, warm runs alternating.",
        "",
        f"| | `{res['rev'][:7]}` | today | ratio |",
        "|---|---|---|---|",
        f"| cold run (s) | {old['cold_s']:.1f} | {new['cold_s']:.1f} | {old['cold_s'] / new['cold_s']:.2f} |",
        f"| warm runs (s, median) | {statistics.median(old['warm_s']):.1f} | {statistics.median(new['warm_s']):.1f} | "
        f"**{res['ratio_median']:.2f}** (per pair: {', '.join(f'{r:.2f}' for r in res['ratios'])}) |",
        "",
        f"Records identical (timing fields aside) across all {2 * (1 + res['pairs'])} runs: "
        f"{'yes' if res['identical'] else 'NO'}.",
        "",
        f"Measured {res['date']} on `{res['host']}` ({res['cpus']} cores, Python {res['python']}); 1-minute load "
        f"average before/after: {res['load_before']:.1f} / {res['load_after']:.1f} (shared machine: compare the "
        "ratios, not the times).",
        END,
    ]
    return "\n".join(lines)


def write_readme(section: str) -> None:
    from simulator.io_utils import atomic_write_text

    path = os.path.join(ROOT, "benchmarks", "README.md")
    text = open(path, encoding="utf-8").read()
    if START in text and END in text:
        a, b = text.index(START), text.index(END) + len(END)
        text = text[:a] + section + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    atomic_write_text(path, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default=DEFAULT_REV, help=f"git revision to compare against ({DEFAULT_REV})")
    ap.add_argument("--pairs", type=int, default=2, help="warm (old, new) pairs, alternating order (2)")
    ap.add_argument("--trials", type=int, default=10, help="trials per (DAG, cell, method) (10)")
    ap.add_argument("--out", default=OUT, help="results JSON (benchmarks/results_grid.json)")
    ap.add_argument("--write-readme", action="store_true", help="update the section in benchmarks/README.md")
    ap.add_argument("--keep", default=None, help="keep the trees and runs in this directory (default: temp, removed)")
    args = ap.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="bench_grid_")
    os.makedirs(work, exist_ok=True)
    try:
        pool = os.path.join(work, "pool_1model.jsonl")
        build_pool(pool)
        old_tree = os.path.join(work, "old")
        rev = export_rev(args.rev, old_tree)
        trees = {"old": old_tree, "new": ROOT}
        caches = {k: os.path.join(work, f"numba_cache_{k}") for k in trees}
        for c in caches.values():
            shutil.rmtree(c, ignore_errors=True)
        load_before = os.getloadavg()[0]
        res = {k: {"warm_s": []} for k in trees}
        digests, n = [], 0

        def one(which: str, label: str) -> float:
            nonlocal n
            n += 1
            results = os.path.join(work, f"run{n:02d}_{which}_{label}")
            shutil.rmtree(results, ignore_errors=True)
            wall = run_grid(trees[which], results, caches[which], pool, args.trials)
            digests.append(records(results))
            shutil.rmtree(results, ignore_errors=True)
            print(f"{which:3s} {label}: {wall:6.1f} s", flush=True)
            return wall

        for which in ("old", "new"):
            res[which]["cold_s"] = one(which, "cold")
        ratios = []
        for i in range(args.pairs):
            order = ("old", "new") if i % 2 == 0 else ("new", "old")
            w = {k: one(k, "warm") for k in order}
            res["old"]["warm_s"].append(w["old"])
            res["new"]["warm_s"].append(w["new"])
            ratios.append(w["old"] / w["new"])
        identical = all(d == digests[0] for d in digests[1:])
        out = {
            "rev": rev, "trials": args.trials, "pairs": args.pairs, "old": res["old"], "new": res["new"],
            "ratios": ratios, "ratio_median": statistics.median(ratios), "identical": identical,
            "n_records": sum(len(v) for v in digests[0].values()), "date": time.strftime("%Y-%m-%d %H:%M"),
            "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_before": load_before, "load_after": os.getloadavg()[0],
        }  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)
    section = markdown(out)
    print(section)
    if args.write_readme:
        write_readme(section)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())

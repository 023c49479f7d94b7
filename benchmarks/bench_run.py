#!/usr/bin/env python3
"""Whole-run benchmark of the harness: the example pool, a 4-cell grid, all 13 methods.

Runs the same run twice — with 1 and with 2 worker processes (one compiled
thread each, NUMBA_NUM_THREADS=1, so the comparison is about processes) —
and reports per phase the wall time, the CPU time of the shard processes and
the parallel efficiency T(1) / (2 x T(2)) of the shard phase. It also checks
that both runs produced the same records (timing fields aside).

    python3 -m benchmarks.bench_run                 # 10 trials, harness MCPP defaults
    python3 -m benchmarks.bench_run --trials 3      # quicker
    python3 -m benchmarks.bench_run --write-readme  # also update benchmarks/README.md

The machine load (1-minute load average) is printed and recorded with the
numbers: on a shared machine it explains most of the noise.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time

from simulator.base import cliargs

from .common import write_readme_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

START = "<!-- bench_run:start -->"
END = "<!-- bench_run:end -->"


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_once(root: str, workers: int, trials: int, extra: dict) -> dict:
    from harness.analyze import analyze_run
    from harness.merge import merge
    from harness.prepare import prepare
    from harness.worker import WorkerOptions, run_local

    env = {
        "DAG_POOL_PATH": os.path.join(ROOT, "examples", "example_pool.jsonl"),
        "RESULTS_ROOT": root,
        "RUN_NAME": f"bench_w{workers}",
        "N_EXEC_TRIALS": str(trials),
        "BUDGET_RATIOS": "0.5 2",
        "DEADLINE_RATIOS": "1 2",
        "METHOD_SET": "all",
        **extra,
    }
    out = {"workers": workers}
    t = time.perf_counter()
    rd = prepare(env, quiet=True)
    out["prepare_s"] = time.perf_counter() - t
    out["shards"] = len(rd.shards)
    out["dags_per_shard"] = rd.run["layout"]["dags_per_shard"]
    c0, t = _cpu_children(), time.perf_counter()
    run_local(rd, workers, WorkerOptions(heartbeat_seconds=5.0, threads_per_shard=1), progress=False)
    out["shards_wall_s"] = time.perf_counter() - t
    out["shards_cpu_s"] = _cpu_children() - c0
    c0, t = _cpu_self(), time.perf_counter()
    report = merge(rd, out=lambda s: None)
    out["merge_s"] = time.perf_counter() - t
    t = time.perf_counter()
    analyze_run(rd.merged, rd.analysis)
    out["analyze_s"] = time.perf_counter() - t
    out["merge_analyze_cpu_s"] = _cpu_self() - c0
    out["records"] = report["n_records"]
    out["total_wall_s"] = out["prepare_s"] + out["shards_wall_s"] + out["merge_s"] + out["analyze_s"]
    out["run_dir"] = rd.path
    return out


def markdown(res: dict) -> str:
    r1, r2 = res["runs"]
    rows = [
        ("shard phase wall (s)", r1["shards_wall_s"], r2["shards_wall_s"]),
        ("shard phase CPU (s)", r1["shards_cpu_s"], r2["shards_cpu_s"]),
        ("prepare (s)", r1["prepare_s"], r2["prepare_s"]),
        ("merge (s)", r1["merge_s"], r2["merge_s"]),
        ("analyze + plots (s)", r1["analyze_s"], r2["analyze_s"]),
        ("whole run wall (s)", r1["total_wall_s"], r2["total_wall_s"]),
    ]
    lines = [
        START,
        "## Harness: a whole run (`benchmarks/bench_run.py`)",
        "",
        f"Example pool (24 DAGs), 4 cells (budget 0.5x/2x nominal x deadline 1x/2x nominal), all 13 methods, "
        f"{res['trials']} trials: {r1['records']} records in {r1['shards']} shards ({r1['dags_per_shard']} DAGs "
        f"per shard), MCPP with the harness defaults ({res['mcpp']}). One compiled thread per shard process.",
        "",
        "| | 1 worker | 2 workers |",
        "|---|---|---|",
        *[f"| {name} | {a:.1f} | {b:.1f} |" for name, a, b in rows],
        "",
        f"Parallel efficiency of the shard phase on 2 cores: T1 / (2 x T2) = **{res['efficiency']:.2f}** "
        f"(speed-up {res['speedup']:.2f}x). Records identical between the two runs (timing fields aside): "
        f"{'yes' if res['identical'] else 'NO'}.",
        "",
        f"Measured {res['date']} on `{res['host']}` ({res['cpus']} cores, Python {res['python']}); 1-minute load "
        f"average before/after: {res['load_before']:.1f} / {res['load_after']:.1f} (the machine is shared: "
        "a load above the core count inflates wall times and lowers the efficiency). "
        "Reproduce: `python3 -m benchmarks.bench_run --write-readme`.",
        END,
    ]
    return "\n".join(lines)


def write_readme(section: str) -> None:
    write_readme_section(START, END, section)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10, help="trials per (DAG, cell, method) (10)")
    ap.add_argument("--results-root", type=cliargs.output_path("dir"), default=None, help="where the two runs go (default: a temp dir, removed)")
    ap.add_argument("--write-readme", action="store_true", help="update the section in benchmarks/README.md")
    ap.add_argument("--json", type=cliargs.output_path(), default=None, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)
    os.environ["NUMBA_NUM_THREADS"] = "1"
    root = args.results_root or tempfile.mkdtemp(prefix="bench_run_")
    load_before = os.getloadavg()[0]
    runs = [run_once(root, w, args.trials, {}) for w in (1, 2)]
    load_after = os.getloadavg()[0]
    from harness.merge import strip_timing

    def records(run_dir):
        cells = os.path.join(run_dir, "merged", "cells")
        return {c: [strip_timing(json.loads(x)) for x in open(os.path.join(cells, c, "records.jsonl"))]
                for c in sorted(os.listdir(cells))}  # fmt: skip

    identical = records(runs[0]["run_dir"]) == records(runs[1]["run_dir"])
    from harness.config import resolve_mcpp

    mc = resolve_mcpp({})
    res = {
        "trials": args.trials,
        "runs": runs,
        "speedup": runs[0]["shards_wall_s"] / runs[1]["shards_wall_s"],
        "efficiency": runs[0]["shards_wall_s"] / (2 * runs[1]["shards_wall_s"]),
        "identical": identical,
        "mcpp": f"M={mc['M']}, base_ks={mc['base_ks']}, max_candidate_actions={mc['max_candidate_actions']}",
        "date": time.strftime("%Y-%m-%d"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": load_before,
        "load_after": load_after,
    }
    section = markdown(res)
    print(section)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(res, fh, indent=2)
    if args.write_readme:
        write_readme(section)
    if not args.results_root:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())

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

It also measures the faithful planner's first decision on the synthetic
4-model layered DAGs of ``bench_scaling`` (40 and 80 nodes, width 4, caps 260
and 2048, M = 8, one thread) in both trees, alternating, with the µs per
simulation, the ratio and a digest of every pair's wins (must be equal).

    python -m benchmarks.bench_grid                    # against 5f48d5e, 2 warm pairs
    python -m benchmarks.bench_grid --rev HEAD~3 --pairs 3
    python -m benchmarks.bench_grid --skip-grid        # only the faithful decisions
    python -m benchmarks.bench_grid --write-readme     # also the section in benchmarks/README.md
    python -m benchmarks.bench_grid --rev 205eb08 --skip-faithful --mcpp4 --readme-key bench_grid_i31 --write-readme

Phases: today's tree writes ``<run>/logs/local_timings.json`` (start-up,
prepare, shards, merge, analysis with its tables / figures / report) and each
shard logs its pool reading; the phase table of each warm run of today's tree
comes from those, the MCPP planning seconds from the records'
``planner_wall_ms``, and "exit and the rest" is the measured wall time minus
the phases (printing the table, the interpreter's exit, bash).

``--mcpp4``: MCPP alone on a synthetic 4-model pool of 257 DAGs (5 DAGs x 2
trials x the same 4 cells), both trees alternating, with the seconds each
shard spends reading the pool (today's tree: its log; the old tree: the same
whole-pool read, hash and validation its shards do, timed in that tree).

Never run by the test suite (minutes of wall time).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from simulator.base import cliargs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "results_grid.json")
START = "<!-- bench_grid:start -->"
END = "<!-- bench_grid:end -->"
POOL4_ARGS = ["--topology", "layered:257", "--models", "4", "--seed", "3"]
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


def run_grid(tree: str, results: str, cache: str, pool: str, trials: int, extra: dict | None = None) -> float:
    """One whole run (prepare, shards, merge, analysis) of ``tree``; its wall time in seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MC_PORTFOLIO_", "PLANNING_", "PLOT_"))}
    env.pop("NUMBA_NUM_THREADS", None)  # `local` gives each worker cores // workers threads
    env.update({
        "PYTHON": sys.executable, "NUMBA_CACHE_DIR": cache, "DAG_POOL_PATH": pool, "RESULTS_ROOT": results,
        "RUN_NAME": "grid", "N_EXEC_TRIALS": str(trials), "BUDGET_RATIOS": "0.5 2", "DEADLINE_RATIOS": "1 2",
        "METHOD_SET": "all", "N_WORKERS": "all", **(extra or {}),
    })  # fmt: skip
    t = time.perf_counter()
    p = subprocess.run(["bash", "run_experiment.sh", "local"], cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"run in {tree} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall


#: run in each tree (cwd = the tree): µs/simulation of the faithful first decision and a digest of all pair wins
FAITHFUL_SCRIPT = r"""
import hashlib, json, sys, time
import numba
numba.set_num_threads(1)
# `python -c` in the tree puts the tree first on the module path; trees before the layer folders use flat modules
try:
    import simulator.mcpp.policy as mpp
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget, nominal_deadline
    from simulator.pools.pool import pool_from_objects
    from simulator.engine.testing import MODELS4, first_view, layered_dag
except ImportError:
    import simulator.mc_portfolio_policy as mpp
    from simulator.arrays import CostSetting, dag_arrays
    from simulator.nominal import nominal_budget, nominal_deadline
    from simulator.pool import pool_from_objects
    from simulator.testing import MODELS4, first_view, layered_dag
MCPortfolioPolicy = mpp.MCPortfolioPolicy
n, cap, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
arr = dag_arrays(pool_from_objects([layered_dag(7, n_nodes=n, width=4, models=MODELS4)]), 0, CostSetting())
pol = MCPortfolioPolicy({"max_candidate_actions": cap, "M": 8})
pol.reset(arr, 42, 0, 0)
view = first_view(arr, nominal_budget(arr), nominal_deadline(arr))
wins = []
serial = mpp.run_pairs_serial
def spy(*a):
    serial(*a)
    wins.append(a[-1].copy())
mpp.run_pairs_serial = spy
d = pol.decide(view)  # warm-up (loads the compiled code), and the wins
mpp.run_pairs_serial = serial
best = 1e9
for _ in range(reps):
    t = time.perf_counter()
    d = pol.decide(view)
    best = min(best, time.perf_counter() - t)
h = hashlib.sha256(b"".join(w.tobytes() for w in wins)).hexdigest()
print(json.dumps({"us_per_sim": best / d.n_simulations * 1e6, "ms": best * 1e3, "candidate": d.candidate,
                  "member": d.member, "score": d.score, "wins_sha256": h}))
"""

FAITHFUL_CASES = ((40, 260), (40, 2048), (80, 260), (80, 2048))


def faithful(trees: dict, caches: dict, rounds: int, reps: int) -> list[dict]:
    """The faithful first decision in both trees, alternating (old, new, new, old, ...), one thread."""
    rows = []
    for n, cap in FAITHFUL_CASES:
        out = {"old": [], "new": []}
        for i in range(rounds):
            for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
                env = {**os.environ, "NUMBA_NUM_THREADS": "1", "NUMBA_CACHE_DIR": caches[which],
                       "PYTHONPATH": trees[which]}  # fmt: skip
                p = subprocess.run([sys.executable, "-c", FAITHFUL_SCRIPT, str(n), str(cap), str(reps)],
                                   cwd=trees[which], env=env, capture_output=True, text=True, check=True)  # fmt: skip
                out[which].append(json.loads(p.stdout.strip().splitlines()[-1]))
        ratios = [o["us_per_sim"] / w["us_per_sim"] for o, w in zip(out["old"], out["new"])]
        same = len({r["wins_sha256"] for r in out["old"] + out["new"]}) == 1 and len(
            {(r["candidate"], r["member"], r["score"]) for r in out["old"] + out["new"]}) == 1  # fmt: skip
        row = {"nodes": n, "models": 4, "cap": cap, "M": 8, "old_us": statistics.median(r["us_per_sim"] for r in out["old"]),
               "new_us": statistics.median(r["us_per_sim"] for r in out["new"]), "ratios": ratios,
               "ratio_median": statistics.median(ratios), "identical": same}  # fmt: skip
        rows.append(row)
        print(f"faithful n={n} cap={cap}: {row['old_us']:.3f} -> {row['new_us']:.3f} us/sim, x{row['ratio_median']:.2f} "
              f"(pairs {', '.join(f'{r:.2f}' for r in ratios)}), identical: {same}", flush=True)  # fmt: skip
    return rows


def phases(results: str, wall: float) -> dict | None:
    """The run's own phase timings (today's tree), MCPP planning seconds and each shard's pool reading."""
    import glob
    import re

    path = os.path.join(results, "grid", "logs", "local_timings.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        t = json.load(fh)
    pool_reads = []
    for log in glob.glob(os.path.join(results, "grid", "logs", "s*.log")):
        with open(log, encoding="utf-8", errors="replace") as fh:
            pool_reads += [float(x) for x in re.findall(r"reading the pool ([\d.]+) s", fh.read())]
    planner_ms, decisions = 0.0, 0
    for rec_path in glob.glob(os.path.join(results, "grid", "merged", "cells", "*", "records.jsonl")):
        with open(rec_path, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("base_method") == "mc_portfolio_rollout":
                    planner_ms += r.get("planner_wall_ms") or 0.0
                    decisions += r.get("planner_calls") or 0
    known = sum(t.get(k) or 0.0 for k in ("start_s", "prepare_s", "shards_s", "merge_s", "analysis_s"))
    return {**t, "wall_s": wall, "rest_s": wall - known, "pool_reads_s": pool_reads,
            "mcpp_planning_s": planner_ms / 1000.0, "mcpp_decisions": decisions}  # fmt: skip


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
    command = res.get("command") or "python -m benchmarks.bench_grid --write-readme   # -> benchmarks/results_grid.json"
    title = res.get("title") or "## Before/after: the 1-model grid end to end and faithful decisions (`benchmarks/bench_grid.py`)"
    lines = [START, title, "", "```bash", command, "```", ""]
    g = res.get("grid")
    if g:
        old, new = g["old"], g["new"]
        lines += [
            f"`bash run_experiment.sh local` (one worker per core, harness defaults: faithful MCPP) with all 13 "
            f"default methods on a synthetic 1-model pool of 20 DAGs (`poolbuild.synthetic {' '.join(POOL_ARGS)}`), "
            f"{g['trials']} trials x 4 cells (budget 0.5x/2x x deadline 1x/2x nominal): {g['n_records']} records. "
            f"Today's tree against `{res['rev'][:7]}` exported with `git archive`, each with its own fresh numba "
            f"cache (first run cold, then warm), fresh results directories, warm runs alternating.",
            "",
            f"| whole run | `{res['rev'][:7]}` | today | ratio |",
            "|---|---|---|---|",
            f"| cold (s) | {old['cold_s']:.1f} | {new['cold_s']:.1f} | {old['cold_s'] / new['cold_s']:.2f} |",
            f"| warm (s, median) | {statistics.median(old['warm_s']):.1f} | {statistics.median(new['warm_s']):.1f} | "
            f"**{g['ratio_median']:.2f}** (per pair: {', '.join(f'{r:.2f}' for r in g['ratios'])}) |",
            "",
            f"Records identical (timing fields aside) across all {2 * (1 + g['pairs'])} runs: "
            f"{'yes' if g['identical'] else 'NO'}.",
            "",
        ]
        lines += phase_table(new["phases"], "the warm runs of today's tree")
    m4 = res.get("mcpp4")
    if m4:
        old, new = m4["old"], m4["new"]
        reads = [x for ph in new["phases"] for x in ph["pool_reads_s"]]
        lines += [
            f"MCPP alone on a synthetic 4-model pool of 257 DAGs (`poolbuild.synthetic {' '.join(POOL4_ARGS)}`, "
            f"{m4['pool_bytes'] / 1e6:.1f} MB), `N_DAGS=5`, {m4['trials']} trials x the same 4 cells "
            f"({m4['n_records']} records), both trees warm, alternating:",
            "",
            f"| | `{res['rev'][:7]}` | today | ratio |",
            "|---|---|---|---|",
            f"| whole run (s, median of warm) | {statistics.median(old['warm_s']):.1f} | "
            f"{statistics.median(new['warm_s']):.1f} | **{m4['ratio_median']:.2f}** (per pair: "
            f"{', '.join(f'{r:.2f}' for r in m4['ratios'])}) |",
            f"| pool reading per shard (s) | {m4['old_pool_read_s']:.3f} (hash, read and validate the whole pool; "
            f"best of 5) | {max(reads):.4f} max, {statistics.median(reads):.4f} median over {len(reads)} shards "
            f"(its rows by the index) | {m4['old_pool_read_s'] / max(max(reads), 1e-9):.0f} |",
            "",
            f"Records identical across the {2 * (1 + m4['pairs'])} runs: {'yes' if m4['identical'] else 'NO'}.",
            "",
        ]
        lines += phase_table(new["phases"], "the warm runs of today's tree, MCPP alone, 4-model pool")
    f = res.get("faithful")
    if f:
        lines += [
            "Faithful first decision (the `bench_scaling` DAGs: 4-model layered, width 4, nominal budget and "
            "deadline, M = 8, one thread), best of "
            f"{res['faithful_reps']} decisions per process, {res['faithful_rounds']} processes per tree alternating; "
            "identical = the same chosen action, score and wins of every pair in both trees:",
            "",
            f"| nodes | cap | µs / sim `{res['rev'][:7]}` | µs / sim today | ratio (median) | per pair | identical |",
            "|---|---|---|---|---|---|---|",
            *[f"| {r['nodes']} | {r['cap']} | {r['old_us']:.3f} | {r['new_us']:.3f} | **{r['ratio_median']:.2f}** | "
              f"{', '.join(f'{x:.2f}' for x in r['ratios'])} | {'yes' if r['identical'] else 'NO'} |" for r in f],
            "",
        ]
    lines += [
        f"Measured {res['date']} on `{res['host']}` ({res['cpus']} cores, Python {res['python']}); 1-minute load "
        f"average before/after: {res['load_before']:.1f} / {res['load_after']:.1f} (shared machine: compare the "
        "ratios, not the times).",
        END,
    ]
    return "\n".join(lines)


def phase_table(runs: list[dict], what: str) -> list[str]:
    """Where the wall time of a run goes (medians over ``runs``), from the run's own timings."""
    if not runs:
        return []

    def med(key, sub=None):
        return statistics.median(((r.get(sub) or {}).get(key) if sub else r.get(key)) or 0.0 for r in runs)

    wall = med("wall_s")
    rows = [
        ("start-up: interpreter, imports, settings check", med("start_s")),
        ("prepare: validation, pool index, job list (the shard hosts start meanwhile)", med("prepare_s")),
        ("shards: every shard on the workers (warm-up included when cold)", med("shards_s")),
        ("merge (the analysis's process imports its libraries meanwhile)", med("merge_s")),
        ("analysis: waiting for its process's imports", med("analysis_import_wait_s")),
        ("analysis: loading the merged records", med("load_s", "analysis")),
        ("analysis: tables (the figures are drawn meanwhile, in worker processes)", med("tables_s", "analysis")),
        ("analysis: the figures left (drawn there too) and waiting for the workers", med("plots_wait_s", "analysis")),
        ("analysis: report", med("report_s", "analysis")),
        ("the rest: printing, interpreter exit, bash", med("rest_s")),
    ]
    reads = [x for r in runs for x in r["pool_reads_s"]]
    out = [f"Phases of {what} (median of {len(runs)}; `logs/local_timings.json` of each run, the wall time measured "
           "outside):", "", "| phase | s | share |", "|---|---|---|"]  # fmt: skip
    out += [f"| {name} | {s:.2f} | {100 * s / wall:.0f}% |" for name, s in rows]
    out += [f"| **whole run** | **{wall:.2f}** | 100% |", ""]
    out += [f"Inside the shards: MCPP planning {med('mcpp_planning_s'):.2f} s over {int(med('mcpp_decisions'))} "
            f"decisions (summed over the workers); reading the pool {max(reads) if reads else 0:.4f} s at most per shard "
            f"({len(reads)} shards).", ""]  # fmt: skip
    return out


def write_readme(section: str, key: str = "bench_grid") -> None:
    from simulator.base.io_utils import atomic_write_text

    path = os.path.join(ROOT, "benchmarks", "README.md")
    text = open(path, encoding="utf-8").read()
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    if start in text and end in text:
        a, b = text.index(start), text.index(end) + len(end)
        text = text[:a] + section + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    atomic_write_text(path, text)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default=DEFAULT_REV, help=f"git revision to compare against ({DEFAULT_REV})")
    ap.add_argument("--pairs", type=int, default=2, help="warm (old, new) grid pairs, alternating order (2)")
    ap.add_argument("--trials", type=int, default=10, help="trials per (DAG, cell, method) (10)")
    ap.add_argument("--faithful-rounds", type=int, default=2, help="processes per tree and faithful case (2)")
    ap.add_argument("--faithful-reps", type=int, default=3, help="timed decisions per process (3)")
    ap.add_argument("--skip-grid", action="store_true", help="only the faithful decisions")
    ap.add_argument("--skip-faithful", action="store_true", help="only the grid")
    ap.add_argument("--out", type=cliargs.output_path(), default=OUT, help="results JSON (benchmarks/results_grid.json)")
    ap.add_argument("--write-readme", action="store_true", help="update the section in benchmarks/README.md")
    ap.add_argument("--keep", type=cliargs.output_path("dir"), default=None, help="keep the trees and runs in this directory (default: temp, removed)")
    ap.add_argument("--mcpp4", action="store_true", help="also MCPP alone on a 4-model pool of 257 DAGs")
    ap.add_argument("--readme-key", default="bench_grid", help="marker name of the README section (bench_grid)")
    args = ap.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="bench_grid_")
    os.makedirs(work, exist_ok=True)
    ok = True
    try:
        old_tree = os.path.join(work, "old")
        rev = export_rev(args.rev, old_tree)
        trees = {"old": old_tree, "new": ROOT}
        caches = {k: os.path.join(work, f"numba_cache_{k}") for k in trees}
        for c in caches.values():
            shutil.rmtree(c, ignore_errors=True)
        out = {"rev": rev, "date": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpus": os.cpu_count(),
               "python": platform.python_version(), "load_before": os.getloadavg()[0]}  # fmt: skip
        if not args.skip_grid:
            out["grid"] = grid(trees, caches, work, args.pairs, args.trials)
            ok = ok and out["grid"]["identical"]
        if args.mcpp4:
            out["mcpp4"] = mcpp4(trees, caches, work, args.pairs)
            ok = ok and out["mcpp4"]["identical"]
        if not args.skip_faithful:
            out["faithful"] = faithful(trees, caches, args.faithful_rounds, args.faithful_reps)
            out["faithful_rounds"], out["faithful_reps"] = args.faithful_rounds, args.faithful_reps
            ok = ok and all(r["identical"] for r in out["faithful"])
        out["load_after"] = os.getloadavg()[0]
        if args.readme_key != "bench_grid":
            out["title"] = (f"### Before/after against `{args.rev}`: the 1-model grid"
                            + (" and MCPP alone on a 4-model pool" if args.mcpp4 else "") + " (`benchmarks/bench_grid.py`)")
            given = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--write-readme"]
            out["command"] = "python -m benchmarks.bench_grid " + " ".join(given) + " --write-readme"
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    from simulator.base.io_utils import atomic_write_json

    atomic_write_json(args.out, out)
    section = markdown(out)
    if args.readme_key != "bench_grid":
        section = section.replace(START, f"<!-- {args.readme_key}:start -->").replace(END, f"<!-- {args.readme_key}:end -->")
    print(section)
    if args.write_readme:
        write_readme(section, args.readme_key)
    return 0 if ok else 1


def grid(trees: dict, caches: dict, work: str, pairs: int, trials: int, pool: str | None = None,
         extra: dict | None = None, tag: str = "grid", cold: bool = True) -> dict:  # fmt: skip
    """Cold run of each tree, then ``pairs`` warm pairs alternating; wall times, ratios, identical records."""
    if pool is None:
        pool = os.path.join(work, "pool_1model.jsonl")
        build_pool(pool)
    res = {k: {"warm_s": [], "phases": []} for k in trees}
    digests, n = [], 0

    def one(which: str, label: str) -> float:
        nonlocal n
        n += 1
        results = os.path.join(work, f"{tag}{n:02d}_{which}_{label}")
        shutil.rmtree(results, ignore_errors=True)
        wall = run_grid(trees[which], results, caches[which], pool, trials, extra)
        digests.append(records(results))
        ph = phases(results, wall)
        if ph and label == "warm":
            res[which]["phases"].append(ph)
        shutil.rmtree(results, ignore_errors=True)
        print(f"{tag} {which:3s} {label}: {wall:6.1f} s" + (f"  phases {json.dumps(ph)}" if ph else ""), flush=True)
        return wall

    for which in ("old", "new"):
        res[which]["cold_s"] = one(which, "cold" if cold else "first")
    ratios = []
    for i in range(pairs):
        w = {k: one(k, "warm") for k in (("old", "new") if i % 2 == 0 else ("new", "old"))}
        res["old"]["warm_s"].append(w["old"])
        res["new"]["warm_s"].append(w["new"])
        ratios.append(w["old"] / w["new"])
    return {"trials": trials, "pairs": pairs, "old": res["old"], "new": res["new"], "ratios": ratios,
            "ratio_median": statistics.median(ratios), "identical": all(d == digests[0] for d in digests[1:]),
            "n_records": sum(len(v) for v in digests[0].values())}  # fmt: skip


#: run in the old tree (cwd = the tree): what each of its shards did to read the pool (hash, read and validate all)
OLD_POOL_READ = r"""
import hashlib, json, sys, time
from simulator.pools.pool import load_pool
path, dags = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
best = 1e9
for _ in range(5):
    t = time.perf_counter()
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    load_pool(path, indices=dags)
    best = min(best, time.perf_counter() - t)
print(json.dumps({"s": best}))
"""


def mcpp4(trees: dict, caches: dict, work: str, pairs: int) -> dict:
    """MCPP alone on a 4-model pool of 257 DAGs (5 DAGs x 2 trials x 4 cells), both trees; pool reading per shard."""
    pool = os.path.join(work, "pool_4model.jsonl")
    subprocess.run([sys.executable, "-m", "poolbuild.synthetic", *POOL4_ARGS, "--out", pool], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    out = grid(trees, caches, work, pairs, 2, pool, {"METHOD_SET": "mcpp", "N_DAGS": "5"}, tag="mcpp4", cold=False)
    env = {**os.environ, "PYTHONPATH": trees["old"], "NUMBA_CACHE_DIR": caches["old"]}
    p = subprocess.run([sys.executable, "-c", OLD_POOL_READ, pool, "0"], cwd=trees["old"], env=env,
                       capture_output=True, text=True, check=True)  # fmt: skip
    out["old_pool_read_s"] = json.loads(p.stdout.strip().splitlines()[-1])["s"]
    out["pool_bytes"] = os.path.getsize(pool)
    return out


if __name__ == "__main__":
    sys.exit(main())

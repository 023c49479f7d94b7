"""MCPP planner speed: µs per simulation, ms per decision, s per episode, thread speed-up, JIT time.

Run by hand (timings depend on the machine and its load)::

    python -m benchmarks.bench_mcpp [--quick]
    python -m benchmarks.bench_mcpp --compare REV [--reps 8]   # this tree vs git revision REV

Writes ``benchmarks/results_mcpp.json``. Workloads: the first decision of
every DAG of the example pool (nominal budget and deadline) and of three
20-node layered DAGs with 4 models, at 260 and 2048 candidates. "Per
simulation" divides the decision's wall time by its nominal simulation count
|candidates| x |members| x M; simulations whose failure is certain are
settled without being run (exact pruning), so the same figure is also given
with pruning off (every simulation run to its end).

``--compare REV`` times a small set of workloads (a few minutes; one
thread, CPU time, best of a few repetitions per decision) in fresh
processes, alternating between the git revision REV (exported to a
temporary directory) and this working tree, and reports the ratio this / REV
per workload: the way to check that a change to the kernel or the engine
costs nothing beyond noise on a shared machine. Writes
``benchmarks/results_mcpp_compare.json``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from simulator.base import cliargs
from simulator.base.io_utils import atomic_write_json
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.engine.testing import first_view, layered_dag
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.pools.pool import load_pool, pool_from_objects

from .common import export_revision

ROOT = Path(__file__).resolve().parents[1]

JIT_SCRIPT = r"""
import sys, time
t0 = time.perf_counter()
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.pools.pool import pool_from_objects
from simulator.engine.testing import first_view, layered_dag
pool = pool_from_objects([layered_dag(1, n_nodes=6)])
arr = dag_arrays(pool, 0, CostSetting())
pol = MCPortfolioPolicy(M=4, max_candidate_actions=20)
pol.reset(arr, 1, 0, 0)
v = first_view(arr, nominal_budget(arr), nominal_deadline(arr))
t1 = time.perf_counter(); pol.decide(v); t2 = time.perf_counter(); pol.decide(v); t3 = time.perf_counter()
print(t1 - t0, (t2 - t1) - (t3 - t2))
"""


def jit_seconds() -> dict:
    """First-decision compile time with an empty numba cache, and with the on-disk cache."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold_compile", "warm_cache"):
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            p = subprocess.run([sys.executable, "-c", JIT_SCRIPT], env=env, cwd=ROOT,
                               capture_output=True, text=True, check=True)
            imp, jit = map(float, p.stdout.split())
            out[label] = {"import_s": imp, "first_decision_overhead_s": jit}
    return out


COMPARE_SCRIPT = r"""
import json, sys, time
import numba
import numpy as np
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.engine.episode import DecisionView
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.pools.pool import load_pool

numba.set_num_threads(1)
# CPU time of this (single-threaded) process: less sensitive than wall time to other users' load
E = np.zeros(0, dtype=np.int64)


def first_view(arr, dag):
    roots = [v for v in range(arr.n) if arr.parent_ptr[v + 1] == arr.parent_ptr[v]]
    return DecisionView(
        arr=arr, t=0.0, budget_left=float(nominal_budget(arr)), deadline=float(nominal_deadline(arr)),
        completed=np.zeros(arr.n, dtype=bool), ready=np.array(roots, dtype=np.int64), inflight_node=E,
        inflight_model=E, already_success=np.zeros(0, dtype=bool), remaining_ptr=np.zeros(1, dtype=np.int64),
        remaining=np.zeros(0), seed=42, dag=dag, trial=0, decision_index=0,
    )


def decisions(path, cands, prune, reps):
    pool = load_pool(path)
    total = 0.0
    for i in range(len(pool)):
        arr = dag_arrays(pool, i, CostSetting())
        pol = MCPortfolioPolicy({{"max_candidate_actions": cands}}, prune=prune)
        pol.reset(arr, 42, i, 0)
        view = first_view(arr, i)
        pol.decide(view)  # warm-up
        best = np.inf
        for _ in range(reps):
            t = time.process_time()
            pol.decide(view)
            best = min(best, time.process_time() - t)
        total += best
    return total


def baselines(path, trials, reps):
    from simulator.baselines.compiled import BASELINE_METHODS
    from simulator.simulate import simulate_baseline

    pool = load_pool(path)
    arrs = [dag_arrays(pool, i, CostSetting()) for i in range(len(pool))]
    simulate_baseline(arrs[0], "sequential", 1.0, range(2), 0, 0)
    best = np.inf
    for _ in range(reps):
        t = time.process_time()
        for method in BASELINE_METHODS:
            for i, arr in enumerate(arrs):
                simulate_baseline(arr, method, nominal_budget(arr), range(trials), 42, i)
        best = min(best, time.process_time() - t)
    return best


example, layered = {example!r}, {layered!r}
out = {{
    "mcpp_example_pool_260": decisions(example, 260, True, 3),
    "mcpp_layered20x4_260": decisions(layered, 260, True, 3),
    "mcpp_layered20x4_260_pruning_off": decisions(layered, 260, False, 2),
}}
try:
    out["baselines_example_pool"] = baselines(example, 300, 3)
except ImportError as e:  # the baseline entry point moved: say so, time the rest
    print("baselines not timed:", e, file=sys.stderr)
print(json.dumps(out))
"""


def compare(rev: str, reps: int, out: str) -> int:
    """Interleaved timings of this tree vs ``rev``: ratio this / rev per workload (median over reps)."""
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        export_revision(rev, before)
        layered = Path(tmp) / "layered20x4.jsonl"
        layered.write_text("".join(json.dumps(layered_dag(s, n_nodes=20)) + "\n" for s in range(3)))
        example = ROOT / "examples" / "example_pool.jsonl"
        trees = {"before": before, "after": ROOT}
        env = {**os.environ, "NUMBA_NUM_THREADS": "1"}

        def run(tree: Path) -> dict:
            code = COMPARE_SCRIPT.format(example=str(example), layered=str(layered))  # cwd = tree
            p = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"timing run failed in {tree}:\n{p.stderr[-2000:]}")
            return json.loads(p.stdout.strip().splitlines()[-1])

        for name, tree in trees.items():  # compile / load the numba cache of each tree, untimed
            print(f"warm-up {name} ...", flush=True)
            run(tree)
        times: dict[str, list[dict]] = {"before": [], "after": []}
        load = [os.getloadavg()[0]]
        for r in range(reps):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")  # cancel drift
            for name in order:
                times[name].append(run(trees[name]))
            load.append(os.getloadavg()[0])
            print(f"rep {r + 1}/{reps}:", {k: round(times["after"][-1][k] / times["before"][-1][k], 3)
                                           for k in times["after"][-1] if k in times["before"][-1]}, flush=True)
    keys = [k for k in times["after"][0] if k in times["before"][0]]
    ratios = {k: [a[k] / b[k] for a, b in zip(times["after"], times["before"])] for k in keys}
    res = {
        "before": rev,
        "after": "working tree",
        "reps": reps,
        "threads": 1,
        "loadavg_1min": load,
        "machine": {"python": platform.python_version(), "numba": numba.__version__, "cpus": os.cpu_count()},
        "seconds": times,
        "ratio_after_over_before_median": {k: float(np.median(v)) for k, v in ratios.items()},
        "ratio_after_over_before_min_max": {k: [float(min(v)), float(max(v))] for k, v in ratios.items()},
        "ratio_of_summed_times": {
            k: sum(a[k] for a in times["after"]) / sum(b[k] for b in times["before"]) for k in keys
        },
    }
    atomic_write_json(out, res)
    print(json.dumps({k: res[k] for k in ("ratio_after_over_before_median", "ratio_of_summed_times")}, indent=1))
    return 0


def time_decision(arr, cands: int, threads: int, reps: int, prune: bool = True, seed: int = 42, dag: int = 0):
    numba.set_num_threads(threads)
    pol = MCPortfolioPolicy({"max_candidate_actions": cands}, prune=prune)
    pol.reset(arr, seed, dag, 0)
    view = first_view(arr, nominal_budget(arr), nominal_deadline(arr), seed=seed, dag=dag)
    d = pol.decide(view)  # warm-up (compiles on first use)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        d = pol.decide(view)
        best = min(best, time.perf_counter() - t)
    return best, d.n_simulations, d.n_candidates


def workload(name: str, arrs, cands: int, threads: int, reps: int, prune: bool = True) -> dict:
    tot_t = tot_s = 0.0
    per = []
    big = []  # decisions with the full candidate count (>= 256)
    for i, arr in enumerate(arrs):
        t, s, c = time_decision(arr, cands, threads, reps, prune, dag=i)
        tot_t += t
        tot_s += s
        per.append(t)
        if c >= min(cands, 256):
            big.append(t)
    return {
        "workload": name,
        "candidates_cap": cands,
        "threads": threads,
        "prune": prune,
        "decisions": len(arrs),
        "us_per_simulation": 1e6 * tot_t / tot_s,
        "ms_per_decision_mean": 1e3 * float(np.mean(per)),
        "ms_per_decision_full_size_mean": 1e3 * float(np.mean(big)) if big else None,
        "ms_per_decision_max": 1e3 * float(np.max(per)),
        "simulations_per_decision_mean": tot_s / len(arrs),
    }


def main() -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one repetition, fewer episodes")
    ap.add_argument("--out", type=cliargs.output_path(), default=None, help="output JSON (default benchmarks/results_mcpp[_compare].json)")
    ap.add_argument("--compare", metavar="REV", help="time this tree against git revision REV, interleaved")
    ap.add_argument("--reps", type=int, default=8, help="--compare: timed runs per tree")
    args = ap.parse_args()
    if args.compare:
        return compare(args.compare, args.reps, args.out or str(ROOT / "benchmarks" / "results_mcpp_compare.json"))
    args.out = args.out or str(ROOT / "benchmarks" / "results_mcpp.json")
    reps = 1 if args.quick else 3
    ex_path = ROOT / "examples" / "example_pool.jsonl"
    ex = load_pool(ex_path)
    ex_arrs = [dag_arrays(ex, i, CostSetting()) for i in range(len(ex))]
    lay = pool_from_objects([layered_dag(s, n_nodes=20) for s in range(3)])
    lay_arrs = [dag_arrays(lay, i, CostSetting()) for i in range(len(lay))]
    max_threads = numba.config.NUMBA_NUM_THREADS
    res: dict = {
        "machine": {"python": platform.python_version(), "numba": numba.__version__, "cpus": os.cpu_count(),
                    "numba_threads": max_threads, "loadavg_start": os.getloadavg()},
        "jit": jit_seconds(),
        "decisions": [],
    }
    for name, arrs in (("example_pool", ex_arrs), ("layered20x4", lay_arrs)):
        for cands in (260, 2048):
            for threads in sorted({1, min(2, max_threads)}):
                row = workload(name, arrs, cands, threads, reps)
                res["decisions"].append(row)
                print(row, flush=True)
        row = workload(name, arrs, 260, 1, 1, prune=False)
        res["decisions"].append(row)
        print(row, flush=True)
    # episodes: default parameters, nominal budget and deadline, all threads
    numba.set_num_threads(max_threads)
    eps = []
    n_ep = 2 if args.quick else 4
    for name, pool in (("example_pool", ex), ("layered20x4", lay)):
        t0 = time.perf_counter()
        n = 0
        idx = range(0, len(pool), max(1, len(pool) // 6))
        for i in idx:
            arr = dag_arrays(pool, i, CostSetting())
            pol = MCPortfolioPolicy({"dag_model_ids": pool[i].model_ids})
            for t in range(n_ep):
                run_policy_episode(arr, pol, nominal_budget(arr), nominal_deadline(arr), 42, i, t)
                n += 1
        eps.append({"workload": name, "episodes": n, "s_per_episode": (time.perf_counter() - t0) / n,
                    "threads": max_threads})
        print(eps[-1], flush=True)
    res["episodes"] = eps
    sp = {}
    for name in ("example_pool", "layered20x4"):
        for cands in (260, 2048):
            rows = {r["threads"]: r for r in res["decisions"]
                    if r["workload"] == name and r["candidates_cap"] == cands and r["prune"]}
            if 1 in rows and 2 in rows:
                sp[f"{name}_{cands}"] = rows[1]["ms_per_decision_mean"] / rows[2]["ms_per_decision_mean"]
    res["speedup_1_to_2_threads"] = sp
    res["machine"]["loadavg_end"] = os.getloadavg()
    atomic_write_json(args.out, res)
    print("speed-up 1->2 threads:", sp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Baseline simulator benchmark (run by hand; not a test).

Reports, on one core:
* baseline episodes per second and microseconds per episode, averaged over
  the 12 baselines and the DAGs of the example pool and of 20-node layered
  4-model DAGs, at budget ratios 0.5 / 1 / 2 of the nominal budget;
* JIT compile time (cold numba cache) and cache-load time, apart;
* peak memory to load a 10,000-DAG pool vs its JSONL size.

    python -m benchmarks.bench_baselines            # writes benchmarks/results_baselines.json

Targets (issue 2): < 10 µs per baseline episode averaged over the example
pool and the 12 baselines; pool memory < 3x its JSONL size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from simulator.base import cliargs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "example_pool.jsonl"


def episodes_per_second(pool_path: str, trials: int, ratios=(0.5, 1.0, 2.0)) -> dict:
    from simulator.baselines.compiled import BASELINE_METHODS
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget
    from simulator.pools.pool import load_pool
    from simulator.simulate import simulate_baseline

    pool = load_pool(pool_path)
    setting = CostSetting()
    arrs = [dag_arrays(pool, i, setting) for i in range(len(pool))]
    # warm up (compile / load cache) outside the timed region
    simulate_baseline(arrs[0], "sequential", 1.0, range(2), 0, 0)
    simulate_baseline(arrs[0], "uniform", 1.0, range(2), 0, 0)
    per_method = {}
    total_eps, total_time = 0, 0.0
    for method in BASELINE_METHODS:
        eps, sec = 0, 0.0
        for i, arr in enumerate(arrs):
            nb = nominal_budget(arr)
            for r in ratios:
                t0 = time.perf_counter()
                simulate_baseline(arr, method, r * nb, range(trials), 42, i)
                sec += time.perf_counter() - t0
                eps += trials
        per_method[method] = sec / eps * 1e6
        total_eps += eps
        total_time += sec
    return {
        "pool": os.path.relpath(pool_path, ROOT) if str(pool_path).startswith(str(ROOT)) else pool_path,
        "dags": len(pool),
        "nodes_mean": float(np.mean([a.n for a in arrs])),
        "trials_per_cell": trials,
        "budget_ratios": list(ratios),
        "us_per_episode_mean": total_time / total_eps * 1e6,
        "episodes_per_second": total_eps / total_time,
        "us_per_episode_by_method": per_method,
    }


def jit_times() -> dict:
    """Cold compile (empty numba cache dir) and warm cache load, in fresh processes."""
    code = textwrap.dedent(
        f"""
        import sys, time
        t0 = time.perf_counter()
        from simulator.pools.pool import load_pool
        from simulator.costs.arrays import dag_arrays, CostSetting
        from simulator.simulate import simulate_baseline
        pool = load_pool({str(EXAMPLE)!r})
        arr = dag_arrays(pool, 0, CostSetting())
        t1 = time.perf_counter()
        simulate_baseline(arr, "sequential", 1e4, range(2), 0, 0)
        simulate_baseline(arr, "uniform", 1e4, range(2), 0, 0)
        t2 = time.perf_counter()
        print(t1 - t0, t2 - t1)
        """
    )
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("cold_compile", "warm_cache"):
            res = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                                 check=True)
            imp, first = map(float, res.stdout.split())
            out[label] = {"import_and_load_s": imp, "first_calls_s": first}
    return out


def pool_memory(n_dags: int) -> dict:
    """Peak RSS growth while loading an n_dags synthetic 4-model pool with rows, vs file size."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.jsonl")
        subprocess.run(
            [sys.executable, "-m", "poolbuild.synthetic", "--topology", f"layered:{n_dags}",
             "--n-nodes", "5-16", "--rows", "16", "--seed", "1", "--out", path],
            cwd=ROOT, check=True, capture_output=True,
        )
        size = os.path.getsize(path)
        code = textwrap.dedent(
            f"""
            import resource, sys, time
            import numpy, json
            from simulator.pools.pool import load_pool
            def rss():
                with open('/proc/self/status') as fh:
                    for line in fh:
                        if line.startswith('VmRSS'):
                            return int(line.split()[1]) * 1024
            before = rss()
            t0 = time.perf_counter()
            pool = load_pool({path!r})
            t1 = time.perf_counter()
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            print(before, peak, rss(), t1 - t0, len(pool))
            """
        )
        res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        before, peak, after, secs, n = res.stdout.split()
        before, peak, after = int(before), int(peak), int(after)
    return {
        "dags": int(n),
        "jsonl_bytes": size,
        "load_seconds": float(secs),
        "peak_rss_growth_bytes": peak - before,
        "retained_rss_growth_bytes": after - before,
        "peak_growth_over_jsonl": (peak - before) / size,
        "retained_growth_over_jsonl": (after - before) / size,
    }


def main() -> None:
    ap = cliargs.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--memory-dags", type=int, default=10000)
    ap.add_argument("--out", type=cliargs.output_path(), default=str(ROOT / "benchmarks" / "results_baselines.json"))
    args = ap.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    results = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    results["jit"] = jit_times()
    print("jit", json.dumps(results["jit"]))
    results["example_pool"] = episodes_per_second(str(EXAMPLE), args.trials)
    print(f"example pool: {results['example_pool']['us_per_episode_mean']:.2f} us/episode")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "layered20.jsonl")
        subprocess.run(
            [sys.executable, "-m", "poolbuild.synthetic", "--topology", "layered:20", "--n-nodes", "20-20",
             "--rows", "16", "--seed", "3", "--out", path],
            cwd=ROOT, check=True, capture_output=True,
        )
        results["layered_20_nodes"] = episodes_per_second(path, args.trials)
        results["layered_20_nodes"]["pool"] = "synthetic layered, 20 DAGs x 20 nodes, 4 models, 16 rows"
    print(f"layered 20: {results['layered_20_nodes']['us_per_episode_mean']:.2f} us/episode")
    results["pool_memory"] = pool_memory(args.memory_dags)
    print("pool memory", json.dumps(results["pool_memory"]))
    from simulator.base.io_utils import atomic_write_json

    atomic_write_json(args.out, results)
    print("wrote", args.out)


if __name__ == "__main__":
    main()

"""MCPP scaling report: decision time and simulations/s vs DAG size, models, candidate cap; anytime; cold start.

Run by hand (never in the test suite; about 6-10 minutes on a 2-core machine)::

    python -m benchmarks.bench_scaling                 # -> benchmarks/results_scaling.json
    python -m benchmarks.bench_scaling --write-readme  # also the section in benchmarks/README.md
    python -m benchmarks.bench_scaling --sizes 5 10 20 --skip-cold --skip-quality   # quicker

Parts:

* **grid**: the first decision (nominal budget and deadline) of a synthetic
  layered DAG (:func:`simulator.engine.testing.layered_dag`, width 4) of each size x
  models (1, 4) x candidate cap (260, 2048), one thread; faithful and
  anytime (``time_limit_ms``, default 100). Faithful decisions on DAGs of
  40 nodes or more are measured with M = 8 instead of 64 (simulations are
  independent, so the time is linear in M; pruned pairs cost nothing either
  way) and the M = 64 decision time is extrapolated: ``decision_ms_m64``.
  µs/simulation = decision wall time / nominal simulations (candidates x
  members x M, pruned included), as in ``bench_mcpp``.
* **threads**: the same faithful decision with 1 and 2 threads, interleaved
  (1, 2, 1, 2, ...), ratio per pair of runs: on a shared machine only a
  side-by-side ratio means something.
* **quality**: paired episodes (same keyed execution randomness) of the
  faithful planner and the anytime planner over the example pool: completion
  probability and the paired difference with its 95% interval.
* **cold**: fresh processes with an empty ``NUMBA_CACHE_DIR`` (a temporary
  directory): ``python -m simulator simulate --method sequential`` and
  ``--method mc_portfolio_rollout`` to their first result, then the same
  warm; and the compile time of each kernel (first call minus second call in
  one cold process). Peak RSS of each process.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import numba
import numpy as np

from simulator.base import cliargs
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.testing import MODELS4, first_view, layered_dag
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.pools.pool import pool_from_objects

from .bench_anytime import example_pool, paired_episodes
from .bench_coldstart import COMMANDS, LABELS, cold_and_warm
from .common import finish_run, log, measured_line, run_record

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results_scaling.json"
START, END = "<!-- bench_scaling:start -->", "<!-- bench_scaling:end -->"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_arr(n: int, n_models: int, seed: int = 7):
    pool = pool_from_objects([layered_dag(seed, n_nodes=n, width=4, models=MODELS4[:n_models])])
    return dag_arrays(pool, 0, CostSetting())


def time_decisions(arr, params: dict, reps: int, threads: int) -> dict:
    """Best-of-``reps`` and max wall time of the first decision (after one warm-up decision)."""
    numba.set_num_threads(threads)
    pol = MCPortfolioPolicy(params)
    pol.reset(arr, 42, 0, 0)
    view = first_view(arr, nominal_budget(arr), nominal_deadline(arr))
    pol.decide(view)  # warm-up: loads the compiled code
    walls, d = [], None
    for _ in range(reps):
        t = time.perf_counter()
        d = pol.decide(view)
        walls.append(time.perf_counter() - t)
    return {"best_s": min(walls), "max_s": max(walls), "decision": d}


def grid(sizes, models, caps, limit_ms: float, reps: int, log) -> list[dict]:
    rows = []
    for n in sizes:
        for nm in models:
            arr = make_arr(n, nm)
            for cap in caps:
                m_meas = 64 if n < 40 else 8
                f = time_decisions(arr, {"max_candidate_actions": cap, "M": m_meas}, reps if n < 40 else 1, 1)
                d = f["decision"]
                us = f["best_s"] / max(d.n_simulations, 1) * 1e6
                nominal64 = d.n_candidates * len(d.members) * 64
                a = time_decisions(arr, {"max_candidate_actions": cap, "time_limit_ms": limit_ms}, reps, 1)
                ad = a["decision"]
                row = {
                    "nodes": n, "models": nm, "cap": cap, "candidates": d.n_candidates, "pairs": d.n_pairs,
                    "faithful_M_measured": m_meas, "faithful_ms": f["best_s"] * 1e3,
                    "faithful_ms_m64": f["best_s"] * 1e3 * 64 / m_meas, "faithful_us_per_sim": us,
                    "faithful_sims_per_s": 1e6 / us, "faithful_nominal_sims_m64": nominal64,
                    "faithful_score": d.score,
                    "anytime_limit_ms": limit_ms, "anytime_ms_best": a["best_s"] * 1e3, "anytime_ms_max": a["max_s"] * 1e3,
                    "anytime_sims": ad.n_simulations, "anytime_sims_per_s": ad.n_simulations / a["best_s"],
                    "anytime_limit_hit": ad.anytime["limit_hit"], "anytime_score": ad.score,
                    "anytime_interval": ad.anytime["interval"], "peak_rss_mb": peak_rss_mb(),
                }  # fmt: skip
                rows.append(row)
                log(f"grid n={n:3d} models={nm} cap={cap:4d}: {d.n_candidates:4d} cand, faithful "
                    f"{row['faithful_ms_m64']:9.1f} ms (M64) {us:6.3f} us/sim | anytime max {row['anytime_ms_max']:6.1f} ms "
                    f"{ad.n_simulations:8d} sims, score {ad.score:.3f} vs {d.score:.3f}")  # fmt: skip
    return rows


def threads_part(sizes, reps: int, log, models=(4,), M: int | None = None) -> list[dict]:
    """Faithful 2048-candidate decisions (4-model DAGs unless ``models`` says), 1 vs 2 threads interleaved.

    ``M``: simulations per pair (default 64 below 40 nodes, 8 from 40 nodes, to keep the run short).
    """
    rows = []
    for n, nm in [(n, nm) for nm in models for n in sizes]:
        arr = make_arr(n, nm)
        m_meas = M or (64 if n < 40 else 8)
        params = {"max_candidate_actions": 2048, "M": m_meas}
        ratios, t1s, t2s = [], [], []
        for _ in range(reps):
            t1 = time_decisions(arr, params, 1, 1)["best_s"]
            t2 = time_decisions(arr, params, 1, 2)["best_s"]
            t1s.append(t1)
            t2s.append(t2)
            ratios.append(t1 / t2)
        rows.append({"nodes": n, "models": nm, "cap": 2048, "M_measured": m_meas, "t1_ms": float(np.median(t1s)) * 1e3,
                     "t2_ms": float(np.median(t2s)) * 1e3, "speedup_median": float(np.median(ratios)),
                     "speedup_range": [float(min(ratios)), float(max(ratios))]})  # fmt: skip
        log(f"threads n={n} models={nm}: 1 -> 2 threads x{np.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")
    numba.set_num_threads(1)
    return rows


def quality(limit_ms: float, trials: int, ratios, log) -> dict:
    """Paired episodes over the example pool: faithful vs anytime (:mod:`benchmarks.bench_anytime`)."""
    return paired_episodes(example_pool(), ratios, trials, 2048, limit_ms, log, "quality")


def cold(log) -> dict:
    """Cold and warm start of the two first commands (:mod:`benchmarks.bench_coldstart`, one repetition)."""
    res = {}
    for command in COMMANDS:
        r = cold_and_warm(ROOT, command)
        res[command] = {"cold_s": r["cold"]["wall_s"], "warm_s": r["warm"]["wall_s"],
                        "cold_peak_rss_mb": r["cold"]["peak_rss_mb"], "warm_peak_rss_mb": r["warm"]["peak_rss_mb"]}  # fmt: skip
        log(f"cold start {command}: cold {res[command]['cold_s']:.1f} s, warm {res[command]['warm_s']:.1f} s")
    return res


def markdown(res: dict) -> str:
    g = res["grid"]
    lines = [
        START,
        "## MCPP scaling (`bench_scaling.py`)",
        "",
        "```bash",
        "python -m benchmarks.bench_scaling --write-readme   # -> benchmarks/results_scaling.json (6-10 minutes)",
        "```",
        "",
        f"First decision of a synthetic layered DAG (width 4, `simulator.engine.testing.layered_dag`) at its nominal budget and "
        f"deadline, one thread. Faithful decisions of 40+ nodes measured with M = 8 and scaled to M = 64 (time is "
        f"linear in M). Anytime = `time_limit_ms={res['args']['limit_ms']:g}`. µs/sim = wall / nominal simulations "
        f"(candidates x members x M, pruned ones included). The scores are the planners' own estimates of the chosen "
        f"action (the faithful one is the largest of many noisy pair scores, biased upward, more so at M = 8); the "
        f"paired episodes below measure what the choice is worth.",
        "",
        "| nodes | models | cap | candidates | faithful ms (M=64) | µs / sim | anytime ms (max) | anytime sims | "
        "anytime sims / s | anytime score vs faithful |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in g:
        lines.append(
            f"| {r['nodes']} | {r['models']} | {r['cap']} | {r['candidates']} | {r['faithful_ms_m64']:.1f} | "
            f"{r['faithful_us_per_sim']:.3f} | {r['anytime_ms_max']:.1f} | {r['anytime_sims']:,} | "
            f"{r['anytime_sims_per_s']:,.0f} | {r['anytime_score']:.3f} vs {r['faithful_score']:.3f} |"
        )
    if res.get("threads"):
        lines += ["", "1 vs 2 threads (faithful, 4 models, cap 2048; interleaved runs, ratio = t1 / t2):", "",
                  "| nodes | M | 1 thread ms | 2 threads ms | speed-up (median) | range |", "|---|---|---|---|---|---|"]  # fmt: skip
        for r in res["threads"]:
            lines.append(f"| {r['nodes']} | {r['M_measured']} | {r['t1_ms']:.1f} | {r['t2_ms']:.1f} | {r['speedup_median']:.2f} | "
                         f"{r['speedup_range'][0]:.2f}-{r['speedup_range'][1]:.2f} |")  # fmt: skip
    q = res.get("quality")
    if q:
        lines += ["", f"Completion probability, paired episodes over the example pool ({q['episodes']} episodes: 24 DAGs x "
                  f"budget ratios {q['budget_ratios']} x {q['trials']} trials, deadline 1x nominal, cap 2048): faithful "
                  f"{q['faithful_p']:.3f}, anytime {q['anytime_p']:.3f}, paired difference {q['diff']:+.3f} "
                  f"[{q['diff_ci'][0]:+.3f}, {q['diff_ci'][1]:+.3f}] (95%); longest anytime decision "
                  f"{q['anytime_decision_ms_max']:.0f} ms."]  # fmt: skip
    c = res.get("cold")
    if c:
        lines += ["", "Cold start (empty `NUMBA_CACHE_DIR`, fresh process, to the first result) and warm (same cache, "
                  "second process); the side-by-side comparison and the compile time per kernel are in the cold-start "
                  "section (`bench_coldstart.py`):", "", "| command | cold s | warm s | peak RSS MB (cold) |",
                  "|---|---|---|---|"]  # fmt: skip
        for k in COMMANDS:
            lines.append(f"| {LABELS[k]} | {c[k]['cold_s']:.1f} | {c[k]['warm_s']:.1f} | {c[k]['cold_peak_rss_mb']:.0f} |")
    lines += ["", f"Peak RSS of the benchmark process: {max(r['peak_rss_mb'] for r in g):.0f} MB.", "",
              measured_line(res) + ". The machine is shared with other users: absolute times vary by 2x or more between runs; compare ratios measured "
              "side by side (the threads table), not times across runs.", END]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20, 40, 80, 160])
    ap.add_argument("--models", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--caps", type=int, nargs="+", default=[260, 2048])
    ap.add_argument("--limit-ms", type=cliargs.number(0, lo_inclusive=False), default=100.0, help="anytime limit (100)")
    ap.add_argument("--reps", type=int, default=3, help="timed decisions per cell (3; 1 at 40+ nodes, faithful)")
    ap.add_argument("--thread-sizes", type=int, nargs="*", default=[20, 40, 80])
    ap.add_argument("--thread-reps", type=int, default=3)
    ap.add_argument("--quality-trials", type=int, default=4, help="trials per (DAG, budget) of the quality part")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--out", type=cliargs.output_path(), default=str(OUT))
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    res = run_record(args, numba_threads_available=numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(1)
    res["grid"] = grid(args.sizes, args.models, args.caps, args.limit_ms, args.reps, log)
    if args.thread_sizes and numba.config.NUMBA_NUM_THREADS > 1:
        res["threads"] = threads_part(args.thread_sizes, args.thread_reps, log)
    if not args.skip_quality:
        res["quality"] = quality(args.limit_ms, args.quality_trials, (0.5, 1.0), log)
    if not args.skip_cold:
        res["cold"] = cold(log)
    finish_run(args, res, markdown, START, END, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

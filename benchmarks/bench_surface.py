"""Prediction surface: CPU time of the tree of trajectories vs cell-by-cell evaluation, in one run.

Run by hand::

    python -m benchmarks.bench_surface [--pool P --dag I] [--budgets lo:hi:n] [--deadlines lo:hi:n]
        [--trials N] [--tree-trials T] [--sample-cells S] [--sample-trials U]
    python -m benchmarks.bench_surface --pool P --dags all|lo-hi|i,j,... [--resume] [the options above]

Default workload: the 100 x 100 x 100-trial MCPP surface of a 9-node,
4-model layered DAG (``simulator.engine.testing.layered_dag``, seed 9, 12
empirical rows per (node, model)) in token mode, budgets 0.05-10 x its
nominal budget and deadlines 0.05-10 x its nominal deadline (log-spaced),
with the harness's MCPP settings (M = 64, 2048 candidates). ``--pool`` /
``--dag`` take a real pool's DAG instead (axes as multiples of its nominal
scales unless given as absolute ``lo:hi:n``).

Both sides are measured on one core (``NUMBA_NUM_THREADS=1`` is set before
numba loads), in CPU seconds of this process, after a warm-up that compiles
every kernel:

* the surface: the trees of ``--tree-trials`` trials (default: all), scaled
  to ``--trials`` when fewer are run;
* cell by cell: ``--sample-cells`` cells drawn at random (seeded) x
  ``--sample-trials`` trials, each an ordinary MCPP episode
  (``run_policy_episode``, what the grid and ``predict`` run); its mean CPU
  time per episode x cells x trials is the cell-by-cell estimate.

The sampled episodes are also checked against the tree's outcomes for the
same cells and trials (they must be identical). Writes
``benchmarks/results_surface.json``; the last line printed is
``speedup: <ratio>x``.

The single DAG's projection of the published set (462 DAGs x 100 x 100
cells x 100 trials) is made only from trees measured at those axes
(100 x 100): a tree's cost grows with its branches, not with its cells
(about cells^0.45 before the compiled decision), so no cell count is
scaled. Trials are independent draws of the same distribution, so the mean
CPU per trial times 100 is the DAG's cost (``published_set_cpu_hours``:
that x 462, on one core) -- **as if every DAG of the set were this DAG**
(an upper figure when it is the largest DAG; the whole-pool mode below
measures a real mix). With ``--tree-trials`` = ``--trials`` = 100 the run
is the full-size DAG, and ``projection_check`` compares the projection from
its first ``--project-from`` trials with the whole measured run.

Whole-pool mode (``--dags all``, a comma list or ``lo-hi`` ranges of
``--pool``'s rows): every chosen DAG is measured the same way (axes as
multiples of each DAG's own nominal scales, ``--tree-trials`` trees each,
one core, one warm-up before the first DAG). Per DAG the file keeps
``problem_id``, ``n_nodes``, the CPU seconds of every trial and the DAG's
cost (mean CPU per trial x ``--trials``); ``--sample-cells`` x
``--sample-trials`` cells *of each DAG* are checked against cell-by-cell
episodes (exit 1 on a mismatch, as in the single-DAG mode). One progress
line per DAG; the file (default ``benchmarks/results_surface_pool.json``)
is rewritten atomically after every DAG, so an interrupted run keeps what it
measured, and ``--resume`` skips the DAGs already in it (refused in one line
when it was measured with other workload settings; with nothing left to
run it only recomputes the projection). The published set is projected
from the measured DAGs by :func:`project_published_set` (its model is
written beside it, ``published_set_model``).
"""

from __future__ import annotations

import os

from simulator.base import cliargs

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import heapq  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from harness.shards import parse_dag_list  # noqa: E402
from simulator.base.errors import ConfigError, cli_entry  # noqa: E402
from simulator.base.io_utils import atomic_write_json  # noqa: E402
from simulator.base.validation import check_int, check_number  # noqa: E402
from simulator.costs.arrays import CostSetting, dag_arrays  # noqa: E402
from simulator.costs.nominal import nominal_budget, nominal_deadline  # noqa: E402
from simulator.engine.episode import run_policy_episode  # noqa: E402
from simulator.engine.loop import REASONS  # noqa: E402
from simulator.engine.testing import layered_dag  # noqa: E402
from simulator.pools.pool import index_pool_lines, load_pool, pool_from_objects  # noqa: E402
from simulator.simulate import policy_for  # noqa: E402
from simulator.surface.tree import mcpp_trial_cells  # noqa: E402

OUT = Path(__file__).resolve().parent / "results_surface.json"
OUT_POOL = Path(__file__).resolve().parent / "results_surface_pool.json"
MCPP_PARAMS = {"max_candidate_actions": 2048}  # the harness's default (the policy's own is 260)
#: the published set: DAGs, budgets x deadlines, trials per DAG
PUBLISHED = {"dags": 462, "cells": (100, 100), "trials": 100}
WORKERS = (2, 64)  # this workstation's cores; a 64-core SLURM allocation


def parse_axis(text: str, flag: str) -> tuple[bool, float, float, int]:
    """``[r]lo:hi:n`` -> (ratio, lo, hi, n), refused in one line naming ``flag`` (0 < lo <= hi, n >= 1)."""
    parts = str(text).lstrip("r").split(":")
    if len(parts) != 3:
        raise ConfigError(f"{flag} {text!r}: expected lo:hi:n (r before lo: multiples of the nominal scale)")
    lo = check_number(parts[0], f"{flag} lo", "flag", lo=0, lo_inclusive=False)
    hi = check_number(parts[1], f"{flag} hi", "flag", lo=lo)
    n = check_int(parts[2], f"{flag} n", "flag", lo=1, hi=10**6)
    return str(text).startswith("r"), lo, hi, n


def axis(text: str, nominal: float) -> np.ndarray:
    """``lo:hi:n`` log-spaced; ``r`` before lo makes lo and hi multiples of the nominal scale."""
    ratio, lo, hi, n = parse_axis(text, "axis")
    vals = np.geomspace(lo, hi, n)
    return vals * nominal if ratio else vals


def measure_trees(arr, policy, budgets, deadlines, seed: int, dag: int, n_tree: int):
    """The trees of trials 0..n_tree-1: (CPU seconds per trial, outcomes by trial, tree counters)."""
    stats: dict = {}
    outs = {}
    per_trial = []
    for trial in range(n_tree):
        c0 = time.process_time()
        outs[trial] = mcpp_trial_cells(arr, policy, budgets, deadlines, seed, dag, trial, stats)
        per_trial.append(time.process_time() - c0)
    return per_trial, outs, stats


def check_cells(arr, policy, budgets, deadlines, seed: int, dag: int, outs: dict, n_cells: int, n_trials: int,
                rng: np.random.Generator):  # fmt: skip
    """``n_cells`` cells (drawn by ``rng``) x ``n_trials`` trials, each an ordinary MCPP episode compared with
    the tree's outcome: (cells, trials, CPU seconds per episode, mismatches)."""
    nb, nd = len(budgets), len(deadlines)
    cells = rng.choice(nb * nd, size=max(1, min(n_cells, nb * nd)), replace=False)
    trials = list(range(min(n_trials, len(outs))))
    mismatches = 0
    times = []
    for k in cells:
        B, D = float(budgets[k // nd]), float(deadlines[k % nd])
        for trial in trials:
            c0 = time.process_time()
            r = run_policy_episode(arr, policy, B, D, seed, dag, trial)
            times.append(time.process_time() - c0)
            o = outs[trial]
            mismatches += (REASONS[o.reason[k]], o.makespan[k], o.total_cost[k]) != (
                r.termination_reason, r.makespan, r.total_cost)
    return cells, trials, times, mismatches


def lpt_makespan(costs: Sequence[float], workers: int) -> float:
    """Wall time of whole jobs ``costs`` on ``workers`` workers, each job (longest first) to the least-loaded one.

    Longest-processing-time-first: within 4/3 of the best schedule; when it
    equals max(dearest job, total / workers) it is the best schedule.
    """
    loads = [0.0] * max(1, min(workers, len(costs)))
    for c in sorted(costs, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + float(c))
    return max(loads)


PUBLISHED_SET_MODEL = (
    "the set's 462 DAGs are drawn like the measured DAGs: set = 462 x mean per-DAG cost (a DAG's cost = its "
    "mean CPU per measured tree at 100 x 100 cells x 100 trials, one core; no cell count scaled); 95% interval: "
    "percentile bootstrap over the measured DAGs (seeded); worst case: 462 copies of the dearest DAG measured; "
    "wall time on W workers: whole DAGs (the harness's shards) assigned longest-first to the least-loaded worker "
    "(the measured costs tiled to 462 DAGs: each floor(462/n) times, the rest drawn without replacement, seeded; "
    "interval over resampled sets of 462 drawn with replacement), not total / W; not modelled: per-shard "
    "overheads outside the tree, the machine's load"
)


def project_published_set(costs: Sequence[float], n_nodes: Sequence[int], ids: Sequence[str], *,
                          n_set: int = PUBLISHED["dags"], workers: Sequence[int] = WORKERS, boot: int = 2000,
                          boot_makespan: int = 200, seed: int = 0) -> dict:  # fmt: skip
    """The published set's cost from measured per-DAG costs (CPU seconds for 100 trials at 100 x 100 cells).

    Model (:data:`PUBLISHED_SET_MODEL`): the set's ``n_set`` DAGs are drawn
    like the measured ones (e.g. all 129 CodeFlowBench-Repo topologies stand
    for the set's), so the set costs ``n_set`` x the mean per-DAG cost; the
    95% interval is a percentile bootstrap over the measured DAGs (``boot``
    resamples). Beside it: the breakdown by node count (DAGs, mean CPU per
    DAG, share of the total), the worst case (``n_set`` copies of the dearest
    DAG), and the wall time on each of ``workers`` workers. The harness's
    shards are whole DAGs, so wall time is a schedule's makespan, not total /
    W: the measured costs are tiled to ``n_set`` DAGs (each measured DAG
    ``n_set // n`` times, the remaining ``n_set % n`` drawn without
    replacement) and scheduled longest-first (:func:`lpt_makespan`), with
    the lower bound max(dearest DAG, total / W) and a 95% interval over
    ``boot_makespan`` sets of ``n_set`` DAGs drawn with replacement. Pure:
    every draw comes from ``seed``.
    """
    c = np.asarray(costs, dtype=np.float64)
    nn = np.asarray(n_nodes, dtype=np.int64)
    n = len(c)
    if n == 0:
        raise ValueError("no measured DAG to project from")
    rng = np.random.default_rng(seed)
    hours = 1 / 3600
    boot_tot = c[rng.integers(0, n, size=(boot, n))].mean(axis=1) * n_set
    by_nodes = {}
    for k in sorted(set(nn.tolist())):
        sel = c[nn == k]
        by_nodes[str(k)] = {"dags": int(len(sel)), "mean_cpu_s_per_dag": float(sel.mean()),
                            "share_of_total": float(sel.sum() / c.sum()) if c.sum() > 0 else 0.0}  # fmt: skip
    q, r = divmod(n_set, n)
    tiled = np.concatenate([np.repeat(c, q), c[rng.choice(n, size=r, replace=False)]])
    worst = int(np.argmax(c))
    wall = {}
    for w in workers:
        spans = [lpt_makespan(c[rng.integers(0, n, size=n_set)], w) for _ in range(boot_makespan)]
        wall[str(w)] = {
            "makespan_h": lpt_makespan(tiled, w) * hours,
            "lower_bound_h": max(float(tiled.max()), float(tiled.sum()) / w) * hours,
            "makespan_95pct_interval_h": [float(np.percentile(spans, 2.5)) * hours,
                                          float(np.percentile(spans, 97.5)) * hours],
            "total_over_workers_h": float(tiled.sum()) / w * hours,
        }  # fmt: skip
    return {
        "measured_dags": n,
        "set_dags": n_set,
        "mean_cpu_s_per_dag": float(c.mean()),
        "cpu_hours": float(c.mean()) * n_set * hours,
        "cpu_hours_95pct_interval": [float(np.percentile(boot_tot, 2.5)) * hours,
                                     float(np.percentile(boot_tot, 97.5)) * hours],
        "bootstrap": {"resamples": boot, "makespan_resamples": boot_makespan, "seed": seed},
        "by_node_count": by_nodes,
        "worst_case": {"dag": ids[worst], "n_nodes": int(nn[worst]), "cpu_s_per_dag": float(c[worst]),
                       "cpu_hours": float(c[worst]) * n_set * hours},
        "wall_time_by_workers": wall,
    }  # fmt: skip


def _load_resumed(out: str, workload: dict) -> list[dict]:
    """The DAG records of an earlier run's file ``out``, refused in one line unless its workload is ``workload``."""
    if not os.path.exists(out):
        return []
    try:
        with open(out, encoding="utf-8") as fh:
            old = json.load(fh)
        old_workload, dags = old["workload"], old["dags"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--resume {out!r}: not a whole-pool bench_surface file ({exc})") from None
    for key in sorted(set(workload) | set(old_workload)):
        if old_workload.get(key) != workload.get(key):
            raise ConfigError(f"--resume {out!r}: measured with {key} = {old_workload.get(key)!r}, this run has "
                              f"{workload.get(key)!r}; resume with the same workload settings or write elsewhere")
    return list(dags)


def setup_dag(pool, dag: int, budgets: str, deadlines: str):
    """DAG ``dag``'s arrays (token mode), its axes and two MCPP policies (the tree's, the episodes')."""
    arr = dag_arrays(pool, dag, CostSetting())
    b = axis(budgets, nominal_budget(arr, ""))
    d = axis(deadlines, nominal_deadline(arr, ""))
    names = pool[dag].model_ids
    tree_pol, _ = policy_for("mc_portfolio_rollout", MCPP_PARAMS, None, names)
    cell_pol, _ = policy_for("mc_portfolio_rollout", MCPP_PARAMS, None, names)
    return arr, b, d, names, tree_pol, cell_pol


def warm_up(arr, tree_pol, cell_pol, budgets, deadlines, seed: int, dag: int) -> None:
    """Compile (or load) every kernel both sides use: a 2 x 2-cell tree and one episode (not timed)."""
    mcpp_trial_cells(arr, tree_pol, budgets[:2], deadlines[:2], seed, dag, 10**6)
    run_policy_episode(arr, cell_pol, float(budgets[-1]), float(deadlines[-1]), seed, dag, 10**6)


def run_pool(a) -> int:
    """The whole-pool mode: every chosen DAG of ``a.pool`` measured in turn, the file rewritten after each."""
    if not a.pool:
        raise ConfigError("--dags: needs --pool (the pool whose DAGs are measured)")
    pool = load_pool(a.pool)
    chosen = list(range(len(pool))) if a.dags.strip() == "all" else parse_dag_list(a.dags, "--dags")
    if max(chosen) >= len(pool):
        raise ConfigError(f"--dags {a.dags!r}: the pool {a.pool!r} has rows 0..{len(pool) - 1}")
    n_tree = a.tree_trials or a.trials
    out = str(a.out or OUT_POOL)
    workload = {"pool_sha256": index_pool_lines(a.pool)[0], "budgets": a.budgets,
                "deadlines": a.deadlines, "trials": a.trials, "tree_trials_run": n_tree, "seed": a.seed,
                "mcpp": MCPP_PARAMS, "cost_setting": "token (CostSetting())"}  # fmt: skip
    records = _load_resumed(out, workload) if a.resume else []
    done = {r["dag"] for r in records}
    todo = [d for d in chosen if d not in done]
    target_axes = (parse_axis(a.budgets, "--budgets")[3], parse_axis(a.deadlines, "--deadlines")[3]) == \
        PUBLISHED["cells"]

    def write(final: bool) -> dict:
        """The file as measured so far (the projection once the last DAG is in: every DAG of the file)."""
        recs = sorted(records, key=lambda r: r["dag"])
        mism = sum(r["sample"]["mismatches"] for r in recs)
        projected = None
        if target_axes and recs and final:
            projected = project_published_set([r["cpu_s_per_trial_mean"] * PUBLISHED["trials"] for r in recs],
                                              [r["n_nodes"] for r in recs], [r["problem_id"] for r in recs])
        result = {
            "mode": "pool",
            "pool": str(a.pool),
            "workload": workload,
            "dags_measured": len(recs),
            "dags_chosen": len(chosen),
            "cpu_s_measured": float(sum(sum(r["cpu_s_per_trial"]) for r in recs)),
            "sample_mismatches": int(mism),
            "published_set": projected,
            "published_set_model": PUBLISHED_SET_MODEL if target_axes else
                                   "not projected: the axes are not the published 100 x 100",
            "dags": recs,
            "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                        "cores": os.cpu_count()},
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }  # fmt: skip
        atomic_write_json(out, result)
        return result

    print(f"{len(chosen)} DAGs chosen, {len(chosen) - len(todo)} already in {out}, {len(todo)} to measure "
          f"({n_tree} trees each)", flush=True)  # fmt: skip
    t0 = time.perf_counter()
    for i, dag in enumerate(todo):
        if i == 0:  # warm-up on the largest DAG to run (not timed)
            big = max(todo, key=lambda d: (pool[d].n_nodes, -d))
            w_arr, w_b, w_d, _, w_tree, w_cell = setup_dag(pool, big, a.budgets, a.deadlines)
            warm_up(w_arr, w_tree, w_cell, w_b, w_d, a.seed, big)
            print(f"warm-up (compiling or loading the kernels): {time.perf_counter() - t0:.0f} s", flush=True)
        arr, budgets, deadlines, _, tree_pol, cell_pol = setup_dag(pool, dag, a.budgets, a.deadlines)
        per_trial, outs, stats = measure_trees(arr, tree_pol, budgets, deadlines, a.seed, dag, n_tree)
        cells, trials, times, mism = check_cells(arr, cell_pol, budgets, deadlines, a.seed, dag, outs,
                                                 a.sample_cells, a.sample_trials, np.random.default_rng([0, dag]))
        mean = float(np.mean(per_trial))
        records.append({
            "dag": dag, "problem_id": pool[dag].problem_id, "n_nodes": arr.n, "cpu_s_per_trial": per_trial,
            "cpu_s_per_trial_mean": mean, "cost_cpu_s": mean * a.trials,
            "tree_decisions_per_trial": stats.get("decisions", 0) / n_tree,
            "tree_branches_per_trial": stats.get("branches", 0) / n_tree,
            "sample": {"cells": len(cells), "trials": len(trials), "mismatches": int(mism),
                       "cpu_s_per_episode": float(np.mean(times))},
        })  # fmt: skip
        write(final=False)
        print(f"[{i + 1}/{len(todo)}] dag {dag} {pool[dag].problem_id} ({arr.n} nodes): {mean:.3f} s/trial over "
              f"{n_tree} -> {mean * a.trials:.1f} s per DAG; {len(cells)}x{len(trials)} cells checked, "
              f"{mism} mismatches; {time.perf_counter() - t0:.0f} s elapsed", flush=True)  # fmt: skip
    result = write(final=True)
    proj = result["published_set"]
    if proj:
        w = proj["wall_time_by_workers"]
        print(f"published set ({proj['set_dags']} DAGs drawn like {proj['measured_dags']} measured): "
              f"{proj['cpu_hours']:.1f} CPU-h (95% {proj['cpu_hours_95pct_interval'][0]:.1f}-"
              f"{proj['cpu_hours_95pct_interval'][1]:.1f}), worst case {proj['worst_case']['cpu_hours']:.1f} CPU-h; "
              + ", ".join(f"{k} workers {v['makespan_h']:.2f} h" for k, v in w.items()), flush=True)  # fmt: skip
    print(f"wrote {out}", flush=True)
    if result["sample_mismatches"]:
        print(f"error: {result['sample_mismatches']} sampled episodes differ from the surface")
        return 1
    return 0


@cli_entry
def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(prog="python -m benchmarks.bench_surface", description=__doc__.split("\n")[0])
    ap.add_argument("--pool", type=cliargs.input_path(), help="pool JSONL (default: a built 9-node 4-model DAG)")
    ap.add_argument("--dag", type=cliargs.integer(0), default=0)
    ap.add_argument("--dags", default=None,
                    help="whole-pool mode: 'all', or rows of --pool as a comma list or lo-hi ranges (0-15,20)")
    ap.add_argument("--resume", action="store_true", help="whole-pool mode: skip the DAGs already in --out")
    ap.add_argument("--budgets", default="r0.05:10:100", help="lo:hi:n (r prefix: x nominal budget)")
    ap.add_argument("--deadlines", default="r0.05:10:100", help="lo:hi:n (r prefix: x nominal deadline)")
    ap.add_argument("--trials", type=cliargs.integer(1), default=100)
    ap.add_argument("--tree-trials", type=cliargs.integer(1), default=None,
                    help="trees actually run (default: --trials)")
    ap.add_argument("--sample-cells", type=cliargs.integer(0), default=100,
                    help="cells checked cell by cell (at least 1; per DAG in the whole-pool mode)")
    ap.add_argument("--sample-trials", type=cliargs.integer(1), default=2)
    ap.add_argument("--seed", type=cliargs.integer(0), default=42)
    ap.add_argument("--project-from", type=cliargs.integer(1), default=5,
                    help="trials whose mean projects the run (checked against it)")
    ap.add_argument("--out", type=cliargs.output_path(), default=None,
                    help=f"default {OUT.name} ({OUT_POOL.name} in the whole-pool mode)")
    a = ap.parse_args(argv)
    parse_axis(a.budgets, "--budgets")
    parse_axis(a.deadlines, "--deadlines")
    if a.dags is not None:
        return run_pool(a)
    if a.resume:
        raise ConfigError("--resume: only with --dags (the whole-pool mode)")
    a.out = a.out or str(OUT)
    if a.pool:
        pool, dag = load_pool(a.pool), a.dag
        if dag >= len(pool):
            raise ConfigError(f"--dag {dag}: the pool {a.pool!r} has rows 0..{len(pool) - 1}")
    else:
        pool, dag = pool_from_objects([layered_dag(9, n_nodes=9, width=3)]), 0
    arr, budgets, deadlines, names, tree_pol, cell_pol = setup_dag(pool, dag, a.budgets, a.deadlines)
    warm_up(arr, tree_pol, cell_pol, budgets, deadlines, a.seed, dag)

    n_tree = a.tree_trials or a.trials
    per_trial, outs, stats = measure_trees(arr, tree_pol, budgets, deadlines, a.seed, dag, n_tree)
    tree_cpu = float(np.sum(per_trial))
    tree_total = tree_cpu * a.trials / n_tree
    target_axes = (len(budgets), len(deadlines)) == PUBLISHED["cells"]
    first = per_trial[: max(1, min(a.project_from, n_tree))]
    projected = float(np.mean(first)) * a.trials

    nb, nd = len(budgets), len(deadlines)
    cells, trials, times, mismatches = check_cells(arr, cell_pol, budgets, deadlines, a.seed, dag, outs,
                                                   a.sample_cells, a.sample_trials, np.random.default_rng(0))
    cell_cpu = float(np.sum(times))
    per_episode = cell_cpu / (len(cells) * len(trials))
    cell_total = per_episode * nb * nd * a.trials
    speedup = cell_total / tree_total
    # the episodes' CPU times are heavy-tailed (loose cells plan long): a 95% interval of the mean, by cell
    by_cell = np.asarray(times).reshape(len(cells), len(trials)).mean(axis=1)
    se = float(by_cell.std(ddof=1) / np.sqrt(len(cells))) if len(cells) > 1 else 0.0
    speedup_interval = [max(per_episode - 1.96 * se, 0.0) * nb * nd * a.trials / tree_total,
                        (per_episode + 1.96 * se) * nb * nd * a.trials / tree_total]
    result = {
        "workload": {
            "dag": pool[dag].problem_id, "n_nodes": arr.n, "models": list(names), "pool": a.pool or "built",
            "budgets": [float(budgets[0]), float(budgets[-1]), nb], "deadlines": [float(deadlines[0]),
            float(deadlines[-1]), nd], "trials": a.trials, "tree_trials_run": n_tree, "mcpp": MCPP_PARAMS,
        },
        "surface_cpu_s": tree_total,
        "surface_cpu_s_measured": tree_cpu,
        "tree_decisions_per_trial": stats["decisions"] / n_tree,
        "tree_branches_per_trial": stats["branches"] / n_tree,
        "cell_sample": {"cells": len(cells), "trials": len(trials), "cpu_s": cell_cpu, "cpu_s_per_episode": per_episode},
        "cell_by_cell_cpu_s_estimate": cell_total,
        "speedup": speedup,
        "speedup_95pct_interval_over_sampled_cells": speedup_interval,
        "sample_mismatches": int(mismatches),
        "surface_cpu_s_per_trial": {"mean": tree_cpu / n_tree, "min": min(per_trial), "max": max(per_trial),
                                    "all": per_trial},
        "published_set_cpu_hours": (tree_cpu / n_tree * 100 * 462 / 3600) if target_axes else None,
        "published_set_model": "measured at 100 x 100 cells; mean CPU per trial x 100 trials x 462 DAGs, one core, "
                               "as if all 462 DAGs were this DAG (--dags projects from a pool's measured mix)"
                               if target_axes else "not projected: the axes are not the published 100 x 100",
        "projection_check": {"from_trials": len(first), "projected_cpu_s": projected, "measured_cpu_s": tree_total,
                             "measured_trials": n_tree, "ratio_projected_over_measured": projected / tree_total},
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }  # fmt: skip
    atomic_write_json(a.out, result)
    print(json.dumps(result, indent=1))
    if mismatches:
        print(f"error: {mismatches} sampled episodes differ from the surface")
        return 1
    print(f"speedup: {speedup:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Prediction surface: CPU time of the tree of trajectories vs cell-by-cell evaluation, in one run.

Run by hand::

    python -m benchmarks.bench_surface [--pool P --dag I] [--budgets lo:hi:n] [--deadlines lo:hi:n]
        [--trials N] [--tree-trials T] [--sample-cells S] [--sample-trials U]

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

The published set's projection (462 DAGs x 100 x 100 cells x 100 trials)
is made only from trees measured at those axes (100 x 100): a tree's cost
grows with its branches, not with its cells (about cells^0.45 before the
compiled decision), so no cell count is scaled. Trials are independent
draws of the same distribution, so the mean CPU per trial times 100 is the
DAG's cost (``published_set_cpu_hours``: that x 462, on one core). With
``--tree-trials`` = ``--trials`` = 100 the run is the full-size DAG, and
``projection_check`` compares the projection from its first
``--project-from`` trials with the whole measured run.
"""

from __future__ import annotations

import os

from simulator.base import cliargs

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from simulator.base.io_utils import atomic_write_json  # noqa: E402
from simulator.costs.arrays import CostSetting, dag_arrays  # noqa: E402
from simulator.costs.nominal import nominal_budget, nominal_deadline  # noqa: E402
from simulator.engine.episode import run_policy_episode  # noqa: E402
from simulator.engine.loop import REASONS  # noqa: E402
from simulator.engine.testing import layered_dag  # noqa: E402
from simulator.pools.pool import load_pool, pool_from_objects  # noqa: E402
from simulator.simulate import policy_for  # noqa: E402
from simulator.surface.tree import mcpp_trial_cells  # noqa: E402

OUT = Path(__file__).resolve().parent / "results_surface.json"
MCPP_PARAMS = {"max_candidate_actions": 2048}  # the harness's default (the policy's own is 260)


def axis(text: str, nominal: float) -> np.ndarray:
    """``lo:hi:n`` log-spaced; ``r`` before lo makes lo and hi multiples of the nominal scale."""
    ratio = text.startswith("r")
    lo, hi, n = text.lstrip("r").split(":")
    vals = np.geomspace(float(lo), float(hi), int(n))
    return vals * nominal if ratio else vals


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(prog="python -m benchmarks.bench_surface", description=__doc__.split("\n")[0])
    ap.add_argument("--pool", type=cliargs.input_path(), help="pool JSONL (default: a built 9-node 4-model DAG)")
    ap.add_argument("--dag", type=int, default=0)
    ap.add_argument("--budgets", default="r0.05:10:100", help="lo:hi:n (r prefix: x nominal budget)")
    ap.add_argument("--deadlines", default="r0.05:10:100", help="lo:hi:n (r prefix: x nominal deadline)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--tree-trials", type=int, default=None, help="trees actually run (default: --trials)")
    ap.add_argument("--sample-cells", type=int, default=100)
    ap.add_argument("--sample-trials", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--project-from", type=int, default=5, help="trials whose mean projects the run (checked against it)")
    ap.add_argument("--out", type=cliargs.output_path(), default=str(OUT))
    a = ap.parse_args(argv)
    if a.pool:
        pool, dag = load_pool(a.pool), a.dag
    else:
        pool, dag = pool_from_objects([layered_dag(9, n_nodes=9, width=3)]), 0
    arr = dag_arrays(pool, dag, CostSetting())
    budgets = axis(a.budgets, nominal_budget(arr, ""))
    deadlines = axis(a.deadlines, nominal_deadline(arr, ""))
    names = pool[dag].model_ids
    tree_pol, _ = policy_for("mc_portfolio_rollout", MCPP_PARAMS, None, names)
    cell_pol, _ = policy_for("mc_portfolio_rollout", MCPP_PARAMS, None, names)
    # warm-up: compile every kernel both sides use (not timed)
    mcpp_trial_cells(arr, tree_pol, budgets[:2], deadlines[:2], a.seed, dag, 10**6)
    run_policy_episode(arr, cell_pol, float(budgets[-1]), float(deadlines[-1]), a.seed, dag, 10**6)

    n_tree = a.tree_trials or a.trials
    stats: dict = {}
    outs = {}
    per_trial = []
    for trial in range(n_tree):
        c0 = time.process_time()
        outs[trial] = mcpp_trial_cells(arr, tree_pol, budgets, deadlines, a.seed, dag, trial, stats)
        per_trial.append(time.process_time() - c0)
    tree_cpu = float(np.sum(per_trial))
    tree_total = tree_cpu * a.trials / n_tree
    target_axes = (len(budgets), len(deadlines)) == (100, 100)
    first = per_trial[: max(1, min(a.project_from, n_tree))]
    projected = float(np.mean(first)) * a.trials

    rng = np.random.default_rng(0)
    nb, nd = len(budgets), len(deadlines)
    cells = rng.choice(nb * nd, size=max(1, min(a.sample_cells, nb * nd)), replace=False)
    trials = list(range(min(a.sample_trials, n_tree)))
    mismatches = 0
    times = []
    for k in cells:
        B, D = float(budgets[k // nd]), float(deadlines[k % nd])
        for trial in trials:
            c0 = time.process_time()
            r = run_policy_episode(arr, cell_pol, B, D, a.seed, dag, trial)
            times.append(time.process_time() - c0)
            o = outs[trial]
            mismatches += (REASONS[o.reason[k]], o.makespan[k], o.total_cost[k]) != (
                r.termination_reason, r.makespan, r.total_cost)
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
        "published_set_model": "measured at 100 x 100 cells; mean CPU per trial x 100 trials x 462 DAGs, one core"
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

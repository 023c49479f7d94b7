"""Measure MCPP's options against the faithful default on the same DAGs, cells and trials.

Options (``docs/policies.md``, improvements): ``candidate_generator=corrected``,
``evaluation=crn`` and ``evaluation=halving``. Execution randomness is keyed
by (seed, DAG, trial, node, model, attempt), so every variant meets the same
luck: differences are paired. Reports on-time completion probability, the
paired difference to the faithful default with a 95% interval, and planner
time per decision. Run by hand::

    python -m benchmarks.mcpp_options [--dags 6] [--trials 16] [--out benchmarks/results_mcpp_options.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from simulator.arrays import CostSetting, dag_arrays
from simulator.episode import run_policy_episode
from simulator.io_utils import atomic_write_json
from simulator.mc_portfolio_policy import MCPortfolioPolicy
from simulator.nominal import nominal_budget, nominal_deadline
from simulator.pool import load_pool
from simulator.scoring import paired_difference, wilson_interval

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "faithful": {},
    "corrected": {"candidate_generator": "corrected"},
    "crn": {"evaluation": "crn"},
    "halving": {"evaluation": "halving"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default=str(ROOT / "examples" / "example_pool.jsonl"))
    ap.add_argument("--dags", type=int, default=6, help="DAGs (the largest of the pool first)")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--budget-ratios", nargs="+", type=float, default=[0.5, 1.0])
    ap.add_argument("--deadline-ratios", nargs="+", type=float, default=[1.0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results_mcpp_options.json"))
    args = ap.parse_args()
    pool = load_pool(args.pool)
    # DAGs with several ready nodes are where the candidate generator matters: take the largest
    order = sorted(range(len(pool)), key=lambda i: -pool[i].n_nodes)[: args.dags]
    success: dict[str, list[float]] = {v: [] for v in VARIANTS}
    wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
    calls: dict[str, int] = {v: 0 for v in VARIANTS}
    sims: dict[str, int] = {v: 0 for v in VARIANTS}
    t_start = time.time()
    for i in order:
        arr = dag_arrays(pool, i, CostSetting())
        for br in args.budget_ratios:
            for dr in args.deadline_ratios:
                B, D = br * nominal_budget(arr), dr * nominal_deadline(arr)
                for name, opts in VARIANTS.items():
                    pol = MCPortfolioPolicy({**opts, "dag_model_ids": pool[i].model_ids})
                    for t in range(args.trials):
                        r = run_policy_episode(arr, pol, B, D, args.seed, i, t)
                        success[name].append(float(r.success))
                        wall[name].append(r.planner_wall_ms)
                        calls[name] += r.planner_calls
                        sims[name] += r.diagnostics["mc_portfolio_simulations_total"]
        print(f"DAG {i} done ({time.time() - t_start:.0f} s)", flush=True)
    base = success["faithful"]
    out = {"pool": args.pool, "dags": order, "trials": args.trials, "budget_ratios": args.budget_ratios,
           "deadline_ratios": args.deadline_ratios, "seed": args.seed, "variants": {}}
    for name in VARIANTS:
        s = success[name]
        k = int(sum(s))
        lo, hi = wilson_interval(k, len(s))
        pd_ = paired_difference(np.asarray(s) - np.asarray(base))
        d, dlo, dhi = pd_["diff"], pd_["ci_low"], pd_["ci_high"]
        row = {
            "options": VARIANTS[name],
            "episodes": len(s),
            "completion_probability": k / len(s),
            "wilson_95": [lo, hi],
            "paired_diff_vs_faithful": d,
            "paired_diff_95": [dlo, dhi],
            "planner_ms_per_decision": float(np.sum(wall[name]) / max(calls[name], 1)),
            "simulations_per_decision": sims[name] / max(calls[name], 1),
        }
        out["variants"][name] = row
        print(f"{name:10s} P={row['completion_probability']:.3f} [{lo:.3f},{hi:.3f}]  "
              f"diff {d:+.3f} [{dlo:+.3f},{dhi:+.3f}]  {row['planner_ms_per_decision']:.0f} ms/decision  "
              f"{row['simulations_per_decision']:.0f} sims/decision")
    atomic_write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

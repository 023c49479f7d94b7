"""Measure MCPP's options against the faithful default on the same DAGs, cells and trials.

The options run as MCPP variants side by side in one harness run
(``METHOD_SET="mc_portfolio_rollout,mc_portfolio_rollout[corrected],..."``,
see ``docs/adding_a_policy.md``): ``candidate_generator=corrected``,
``evaluation=crn`` and ``evaluation=halving``. Execution randomness is keyed
by (seed, DAG, trial, node, model, attempt), so every variant meets the same
luck: differences are paired. Reports on-time completion probability, the
paired difference to the faithful default with a 95% interval, planner time
and simulations per decision, from the run's merged records. Run by hand::

    python -m benchmarks.mcpp_options [--dags 6] [--trials 16] [--out benchmarks/results_mcpp_options.json]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from simulator.base import cliargs
from simulator.base.io_utils import atomic_write_json
from simulator.base.scoring import paired_difference, wilson_interval
from simulator.mcpp.params import MCPP
from simulator.pools.pool import load_pool

ROOT = Path(__file__).resolve().parents[1]

#: variant name -> the options it sets (the variant syntax of the method registry)
VARIANTS = {
    "faithful": (MCPP, {}),
    "corrected": (f"{MCPP}[corrected]", {"candidate_generator": "corrected"}),
    "crn": (f"{MCPP}[crn]", {"evaluation": "crn"}),
    "halving": (f"{MCPP}[halving]", {"evaluation": "halving"}),
}


def _records(run_dir: str) -> list[dict]:
    out = []
    cells = os.path.join(run_dir, "merged", "cells")
    for c in sorted(os.listdir(cells)):
        with open(os.path.join(cells, c, "records.jsonl"), encoding="utf-8") as fh:
            out.extend(json.loads(line) for line in fh)
    return out


def main() -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=cliargs.input_path(), default=str(ROOT / "examples" / "example_pool.jsonl"))
    ap.add_argument("--dags", type=int, default=6, help="DAGs (the largest of the pool first)")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--budget-ratios", nargs="+", type=cliargs.number(0, lo_inclusive=False), default=[0.5, 1.0])
    ap.add_argument("--deadline-ratios", nargs="+", type=cliargs.number(0, lo_inclusive=False), default=[1.0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", type=cliargs.output_path(), default=str(ROOT / "benchmarks" / "results_mcpp_options.json"))
    args = ap.parse_args()
    pool = load_pool(args.pool)
    # DAGs with several ready nodes are where the candidate generator matters: take the largest
    order = sorted(range(len(pool)), key=lambda i: -pool[i].n_nodes)[: args.dags]
    with tempfile.TemporaryDirectory() as tmp:
        index = os.path.join(tmp, "dags.json")
        with open(index, "w", encoding="utf-8") as fh:
            json.dump(sorted(order), fh)
        env = {
            **os.environ, "PYTHON": sys.executable, "DAG_POOL_PATH": args.pool, "RESULTS_ROOT": tmp,
            "RUN_NAME": "mcpp_options", "USE_DAG_INDICES_FILE": index, "N_EXEC_TRIALS": str(args.trials),
            "BUDGET_RATIOS": " ".join(map(str, args.budget_ratios)),
            "DEADLINE_RATIOS": " ".join(map(str, args.deadline_ratios)), "SEED": str(args.seed),
            "METHOD_SET": ",".join(name for name, _ in VARIANTS.values()),
        }  # fmt: skip
        subprocess.run(["bash", str(ROOT / "run_experiment.sh"), "local"], env=env, check=True)
        records = _records(os.path.join(tmp, "mcpp_options"))
    key = sorted({(r["cell"], r["dag_idx"], r["exec_trial"]) for r in records})
    by = {(r["method"], r["cell"], r["dag_idx"], r["exec_trial"]): r for r in records}
    out = {"pool": args.pool, "dags": order, "trials": args.trials, "budget_ratios": args.budget_ratios,
           "deadline_ratios": args.deadline_ratios, "seed": args.seed, "variants": {}}  # fmt: skip
    base = np.array([float(by[(MCPP, *k)]["on_time_success"]) for k in key])
    for name, (method, opts) in VARIANTS.items():
        rs = [by[(method, *k)] for k in key]
        s = np.array([float(r["on_time_success"]) for r in rs])
        calls = max(sum(r["planner_calls"] for r in rs), 1)
        k = int(s.sum())
        lo, hi = wilson_interval(k, len(s))
        pd_ = paired_difference(s - base, np.array([kk[1] for kk in key]))
        d, dlo, dhi = pd_["diff"], pd_["ci_low"], pd_["ci_high"]
        row = {
            "method": method,
            "options": opts,
            "episodes": len(s),
            "completion_probability": k / len(s),
            "wilson_95": [lo, hi],
            "paired_diff_vs_faithful": d,
            "paired_diff_95": [dlo, dhi],
            "planner_ms_per_decision": sum(r["planner_wall_ms"] for r in rs) / calls,
            "simulations_per_decision": sum(r["mc_portfolio_simulations_total"] for r in rs) / calls,
        }
        out["variants"][name] = row
        print(f"{name:10s} P={row['completion_probability']:.3f} [{lo:.3f},{hi:.3f}]  "
              f"diff {d:+.3f} [{dlo:+.3f},{dhi:+.3f}]  {row['planner_ms_per_decision']:.0f} ms/decision  "
              f"{row['simulations_per_decision']:.0f} sims/decision")
    atomic_write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the anytime planner's time limit costs: paired episodes, faithful vs anytime MCPP.

Run by hand (never in the test suite; about 15 minutes on one core)::

    python -m benchmarks.bench_anytime --write-readme     # -> benchmarks/results_anytime.json
    python -m benchmarks.bench_anytime --example-trials 2 --synthetic-dags 2   # quicker

Each episode runs twice on the same keyed execution randomness (seed, DAG,
trial): once with the faithful planner (no time limit), once with
``time_limit_ms`` (default 100). The completion probability of each and the
paired difference anytime - faithful, with a 95% interval clustered by DAG
(:func:`simulator.base.scoring.paired_difference`), over two pools:

* the example pool (24 DAGs, 4 models), budgets 0.5 / 1 / 2 x nominal,
  deadline 1 x nominal, the harness's candidate cap (2048);
* a synthetic pool of 40-node, 4-model layered DAGs
  (:func:`simulator.engine.testing.layered_dag`, width 4), budgets 0.5 / 1 x
  nominal, deadline 1 x nominal, candidate cap 260 (faithful 40-node
  decisions at cap 2048 take seconds each, so an episode takes minutes).

The anytime planner's choices depend on how many simulations fit in the
limit, hence on the machine and its load: its episodes are not reproducible
bit for bit (the faithful planner's are). The longest anytime decision of
each pool is reported too.
"""

from __future__ import annotations

import os
import platform
import sys
import time

import numba
import numpy as np

from simulator.base import cliargs
from simulator.base.scoring import paired_difference, wilson_interval
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.engine.testing import layered_dag
from simulator.mcpp.policy import MCPortfolioPolicy
from simulator.pools.pool import load_pool, pool_from_objects

from .common import ROOT, finish_run, log, measured_line

OUT = ROOT / "benchmarks" / "results_anytime.json"
START, END = "<!-- bench_anytime:start -->", "<!-- bench_anytime:end -->"


def paired_episodes(pool, ratios, trials: int, cap: int, limit_ms: float, log, label: str) -> dict:
    """Faithful and anytime episodes of every (DAG, budget ratio, trial), deadline 1 x nominal."""
    numba.set_num_threads(1)
    succ_f, succ_a, groups, walls = [], [], [], []
    t0 = time.perf_counter()
    for i in range(len(pool)):
        arr = dag_arrays(pool, i, CostSetting())
        for r in ratios:
            b, dl = r * nominal_budget(arr), nominal_deadline(arr)
            for tr in range(trials):
                out = []
                for params in ({"max_candidate_actions": cap},
                               {"max_candidate_actions": cap, "time_limit_ms": limit_ms}):  # fmt: skip
                    pol = MCPortfolioPolicy({**params, "dag_model_ids": pool[i].model_ids})
                    out.append(run_policy_episode(arr, pol, b, dl, 42, int(pool[i].index), tr))
                succ_f.append(float(out[0].success))
                succ_a.append(float(out[1].success))
                walls.append(out[1].diagnostics.get("mc_portfolio_wall_ms_max", 0.0))
                groups.append(i)
        log(f"{label}: DAG {i + 1}/{len(pool)} done, {len(succ_f)} paired episodes, "
            f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    d = paired_difference(np.array(succ_a) - np.array(succ_f), np.array(groups))
    n = len(succ_f)
    return {
        "episodes": n, "dags": len(pool), "budget_ratios": list(ratios), "trials": trials, "cap": cap,
        "limit_ms": limit_ms, "faithful_p": float(np.mean(succ_f)), "faithful_ci": wilson_interval(sum(succ_f), n),
        "anytime_p": float(np.mean(succ_a)), "anytime_ci": wilson_interval(sum(succ_a), n),
        "diff": d["diff"], "diff_ci": [d["ci_low"], d["ci_high"]],
        "episodes_differing": int(np.sum(np.array(succ_a) != np.array(succ_f))),
        "anytime_decision_ms_max": float(max(walls)), "seconds": time.perf_counter() - t0,
    }  # fmt: skip


def example_pool():
    return load_pool(str(ROOT / "examples" / "example_pool.jsonl"))


def synthetic_pool(n_dags: int, n_nodes: int = 40):
    return pool_from_objects([layered_dag(100 + s, n_nodes=n_nodes) for s in range(n_dags)])


def markdown(res: dict) -> str:
    lines = [START, "## Anytime planner vs faithful (`bench_anytime.py`)", "", "```bash",
             "python -m benchmarks.bench_anytime --write-readme   # -> benchmarks/results_anytime.json", "```", "",
             "Paired episodes (the same keyed execution randomness for both planners), deadline 1 x nominal, one "
             f"thread, anytime limit {res['limit_ms']:.0f} ms. Difference = anytime - faithful completion "
             "probability, 95% interval clustered by DAG.", "",
             "| pool | episodes | cap | faithful | anytime | difference [95% interval] | episodes that differ | "
             "longest anytime decision ms |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for key, label in (("example", "example pool (24 DAGs, 4 models)"),
                       ("synthetic", "synthetic 40-node x 4-model layered")):  # fmt: skip
        q = res.get(key)
        if q:
            lines.append(f"| {label}, budgets {'/'.join(f'{r:g}' for r in q['budget_ratios'])} x nominal | "
                         f"{q['episodes']} | {q['cap']} | {q['faithful_p']:.3f} | {q['anytime_p']:.3f} | "
                         f"{100 * q['diff']:+.1f} points [{100 * q['diff_ci'][0]:+.1f}, {100 * q['diff_ci'][1]:+.1f}] | "
                         f"{q['episodes_differing']} | {q['anytime_decision_ms_max']:.0f} |")  # fmt: skip
    lines += ["", measured_line(res) + ". The anytime planner's choices depend on the simulations that fit in "
              "its limit, so its episodes vary with the machine's load (the faithful ones are bit-reproducible).", END]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit-ms", type=cliargs.number(0, lo_inclusive=False), default=100.0)
    ap.add_argument("--example-trials", type=int, default=8, help="trials per (DAG, budget) on the example pool (8)")
    ap.add_argument("--synthetic-dags", type=int, default=8, help="40-node DAGs in the synthetic pool (8)")
    ap.add_argument("--synthetic-trials", type=int, default=4, help="trials per (DAG, budget) there (4)")
    ap.add_argument("--skip-example", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--out", type=cliargs.output_path(), default=str(OUT))
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)

    res = {"args": vars(args), "limit_ms": args.limit_ms, "host": platform.node(),
           "when": time.strftime("%Y-%m-%d %H:%M"), "load_before": os.getloadavg()[0]}  # fmt: skip
    if not args.skip_example:
        res["example"] = paired_episodes(example_pool(), (0.5, 1.0, 2.0), args.example_trials, 2048, args.limit_ms,
                                         log, "example")  # fmt: skip
    if not args.skip_synthetic:
        res["synthetic"] = paired_episodes(synthetic_pool(args.synthetic_dags), (0.5, 1.0), args.synthetic_trials,
                                           260, args.limit_ms, log, "synthetic 40x4")  # fmt: skip
    finish_run(args, res, markdown, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())

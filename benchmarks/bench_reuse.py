"""What MCPP's ``reuse="state"`` saves and what it changes: paired episodes, reuse off vs on.

Run by hand (never in the test suite; about 5-10 minutes on one core)::

    python -m benchmarks.bench_reuse --write-readme     # -> benchmarks/results_reuse.json
    python -m benchmarks.bench_reuse --trials 3 --synthetic-dags 2   # quicker

As a run does (``simulator.simulate.simulate_policy``), one planner plays all
trials of a (DAG, budget, deadline) cell in turn. With ``reuse="state"`` the
first decision of every trial after the first is the one computed in the
first trial (the state is identical), and so is any later state that
repeats. The planner time (the policy's own time in its decisions), the
share of decisions reused, and the completion probability of both planners
over the same keyed execution randomness (the paired difference reuse - off,
95% interval clustered by DAG) are reported for:

* the example pool (24 DAGs, 4 models), budgets 0.5 / 1 / 2 x nominal,
  deadline 1 x nominal, the harness's candidate cap (2048), faithful M = 64;
  and the same with the anytime planner (``time_limit_ms``, default 100);
* synthetic 20-node, 4-model layered DAGs (:func:`simulator.engine.testing.layered_dag`),
  budgets 0.5 / 1 x nominal, candidate cap 260, faithful.

The planners differ in their keys (state vs trial), so their episodes differ
by Monte Carlo luck, not by method: the difference should be within its
interval of zero.
"""

from __future__ import annotations

import sys
import time

import numba
import numpy as np

from simulator.base import cliargs
from simulator.base.scoring import paired_difference
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.engine.episode import run_policy_episode
from simulator.mcpp.policy import MCPortfolioPolicy

from .bench_anytime import example_pool, synthetic_pool
from .common import ROOT, finish_run, log, measured_line, run_record

OUT = ROOT / "benchmarks" / "results_reuse.json"
START, END = "<!-- bench_reuse:start -->", "<!-- bench_reuse:end -->"


def _cell(arr, pool_dag, params: dict, budget: float, deadline: float, trials: int) -> tuple[list, float, int, int]:
    """One planner over the cell's trials: (successes, planner ms, decisions, decisions reused)."""
    pol = MCPortfolioPolicy({**params, "dag_model_ids": pool_dag.model_ids})
    succ, ms, n, reused = [], 0.0, 0, 0
    for tr in range(trials):
        r = run_policy_episode(arr, pol, budget, deadline, 42, int(pool_dag.index), tr)
        d = r.diagnostics
        succ.append(float(r.success))
        ms += d["mc_portfolio_wall_ms_total"]
        n += d["mc_portfolio_decisions"]
        reused += d.get("mc_portfolio_decisions_reused", 0)
    return succ, ms, n, reused


def paired(pool, ratios, trials: int, params: dict, log, label: str) -> dict:
    """Reuse off and on over every (DAG, budget ratio) cell of ``pool``, deadline 1 x nominal."""
    numba.set_num_threads(1)
    s_off, s_on, groups = [], [], []
    ms_off = ms_on = 0.0
    n_dec = n_reused = 0
    t0 = time.perf_counter()
    for i in range(len(pool)):
        arr = dag_arrays(pool, i, CostSetting())
        for r in ratios:
            b, dl = r * nominal_budget(arr), nominal_deadline(arr)
            a, ma, _, _ = _cell(arr, pool[i], params, b, dl, trials)
            c, mc, n, k = _cell(arr, pool[i], {**params, "reuse": "state"}, b, dl, trials)
            s_off += a
            s_on += c
            groups += [i] * trials
            ms_off += ma
            ms_on += mc
            n_dec += n
            n_reused += k
        log(f"{label}: DAG {i + 1}/{len(pool)}, planner ms off {ms_off:.0f} / on {ms_on:.0f}, "
            f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    d = paired_difference(np.array(s_on) - np.array(s_off), np.array(groups))
    return {
        "episodes": len(s_off), "dags": len(pool), "budget_ratios": list(ratios), "trials": trials, "params": params,
        "planner_ms_off": ms_off, "planner_ms_on": ms_on, "planner_time_ratio": ms_on / ms_off if ms_off else None,
        "decisions_on": n_dec, "decisions_reused": n_reused, "p_off": float(np.mean(s_off)),
        "p_on": float(np.mean(s_on)), "diff": d["diff"], "diff_ci": [d["ci_low"], d["ci_high"]],
        "seconds": time.perf_counter() - t0,
    }  # fmt: skip


def markdown(res: dict) -> str:
    lines = [START, "## Reusing decisions across identical states (`bench_reuse.py`)", "", "```bash",
             "python -m benchmarks.bench_reuse --write-readme   # -> benchmarks/results_reuse.json", "```", "",
             "One planner per (DAG, budget, deadline) cell plays its trials in turn (as a run does), one thread, "
             "deadline 1 x nominal, the same keyed execution randomness with reuse off and on. Planner time = the "
             "policy's own time in its decisions, summed; difference = on - off completion probability, 95% "
             "interval clustered by DAG.", "",
             "| workload | episodes | decisions reused | planner time on / off | completion off | completion on | "
             "difference [95% interval] |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for q in res["parts"]:
        lines.append(f"| {q['label']} | {q['episodes']} | {q['decisions_reused']} of {q['decisions_on']} "
                     f"({100 * q['decisions_reused'] / max(q['decisions_on'], 1):.0f}%) | "
                     f"{q['planner_time_ratio']:.2f} ({q['planner_ms_on'] / 1e3:.1f} s / {q['planner_ms_off'] / 1e3:.1f} s) | "
                     f"{q['p_off']:.3f} | {q['p_on']:.3f} | {100 * q['diff']:+.1f} points "
                     f"[{100 * q['diff_ci'][0]:+.1f}, {100 * q['diff_ci'][1]:+.1f}] |")  # fmt: skip
    lines += ["", measured_line(res) + ".", END]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10, help="trials per cell (10, the harness's default)")
    ap.add_argument("--limit-ms", type=cliargs.number(0, lo_inclusive=False), default=100.0, help="the anytime part's limit (100)")
    ap.add_argument("--synthetic-dags", type=int, default=4, help="20-node DAGs of the synthetic part (4)")
    ap.add_argument("--out", type=cliargs.output_path(), default=str(OUT))
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)

    res = run_record(args, parts=[])
    ex = example_pool()
    for label, pool, ratios, params in (
        ("example pool, faithful, cap 2048", ex, (0.5, 1.0, 2.0), {"max_candidate_actions": 2048}),
        (f"example pool, anytime {args.limit_ms:g} ms, cap 2048", ex, (0.5, 1.0, 2.0),
         {"max_candidate_actions": 2048, "time_limit_ms": args.limit_ms}),
        ("synthetic 20-node x 4-model, faithful, cap 260", synthetic_pool(args.synthetic_dags, n_nodes=20),
         (0.5, 1.0), {"max_candidate_actions": 260}),
    ):  # fmt: skip
        res["parts"].append({"label": label, **paired(pool, ratios, args.trials, params, log, label)})
    finish_run(args, res, markdown, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())

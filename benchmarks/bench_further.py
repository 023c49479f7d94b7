"""Further baselines (LOADER, Chernoff deadline): cost per decision and per episode next to the baselines and MCPP.

Run by hand (timings depend on the machine and its load)::

    python -m benchmarks.bench_further [--quick] [--no-readme]

Writes ``benchmarks/results_further.json`` and the section between the
``further:begin``/``further:end`` markers of ``benchmarks/README.md``.

Workloads: every DAG of the example pool, and 40-node layered DAGs (4
models, 12 rows per (node, model)), at the nominal budget and deadline, in
token mode (the grid's default cost mode) and in money mode (where the
Chernoff policies are meant to run). One thread throughout
(``NUMBA_NUM_THREADS=1``; MCPP is about 2x faster on 2 threads, see its own
benchmark).

* *per decision*: the policy's own time per call (``planner_wall_ms /
  planner_calls``); for the compiled baselines the whole episode divided by
  its decisions (their rule is a few instructions inside the loop);
* *per episode*: wall time of a whole episode (draws, events, launches,
  decisions), averaged over the episodes run;
* *on time*: the fraction of those episodes that completed by the nominal
  deadline (indicative only: few trials).
"""

from __future__ import annotations

import os

from simulator.base import cliargs

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

from simulator.baselines.compiled import BASELINE_METHODS  # noqa: E402
from simulator.baselines.further.variants import FURTHER_METHODS  # noqa: E402
from simulator.costs.arrays import CostSetting, dag_arrays  # noqa: E402
from simulator.costs.nominal import nominal_budget, nominal_deadline  # noqa: E402
from simulator.engine.episode import run_policy_episode  # noqa: E402
from simulator.engine.testing import layered_dag  # noqa: E402
from simulator.mcpp.policy import MCPortfolioPolicy  # noqa: E402
from simulator.pools.pool import load_pool, pool_from_objects  # noqa: E402
from simulator.simulate import SimSpec, simulate_baseline, simulate_run  # noqa: E402

MCPP = "mc_portfolio_rollout"
OUT = ROOT / "benchmarks" / "results_further.json"
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- further:begin -->", "<!-- further:end -->"


def workloads(quick: bool):
    pool = load_pool(ROOT / "examples" / "example_pool.jsonl")
    n40 = 2 if quick else 6
    models = ("4B_ins", "4B_think", "30B_ins", "30B_think")  # priced in the default table (money mode)
    big = pool_from_objects(
        [layered_dag(100 + s, n_nodes=40, width=6, models=models) for s in range(n40)], name="layered40"
    )
    return {"example_pool": pool, "layered40": big}


def measure(pool, mode: str, method: str, trials: int, dags: list[int], k_on_time: int) -> dict:
    """Timings over ``trials`` per DAG; the on-time rate over trials ``< k_on_time`` (the same for all methods)."""
    cs = CostSetting(cost_mode=mode)
    wall = 0.0
    episodes = 0
    decisions = 0
    policy_ms = 0.0
    on_time = 0
    scored = 0
    for i in dags:
        arr = dag_arrays(pool, i, cs)
        B, D = nominal_budget(arr), nominal_deadline(arr)
        tr = range(trials)
        if method in BASELINE_METHODS:
            simulate_baseline(arr, method, B, range(2), 42, i)  # warm
            t0 = time.perf_counter()
            b = simulate_baseline(arr, method, B, tr, 42, i)
            wall += time.perf_counter() - t0
            calls = b.planner_calls
            ok = b.on_time(D)
            policy_ms += float("nan")
        elif method == MCPP:
            pol = MCPortfolioPolicy({"n_threads": 1})
            res = []
            t0 = time.perf_counter()
            for trial in tr:
                res.append(run_policy_episode(arr, pol, B, D, 42, i, trial))
            wall += time.perf_counter() - t0
            calls = np.array([r.planner_calls for r in res])
            ok = np.array([r.success and r.makespan <= D for r in res])
            policy_ms += sum(r.planner_wall_ms for r in res)
        else:
            t0 = time.perf_counter()
            b = simulate_run(arr, method, SimSpec(budget=B, deadline=D, trials=tr, seed=42, dag=i))
            wall += time.perf_counter() - t0
            calls = b.planner_calls
            ok = b.on_time(D)
            policy_ms += float(b.planner_wall_ms.sum())
        episodes += trials
        decisions += int(np.sum(calls))
        on_time += int(np.sum(np.asarray(ok)[:k_on_time]))
        scored += min(trials, k_on_time)
    per_episode_ms = wall * 1e3 / episodes
    per_decision_ms = (wall * 1e3 if math.isnan(policy_ms) else policy_ms) / max(decisions, 1)
    return {
        "method": method,
        "mode": mode,
        "episodes": episodes,
        "decisions_per_episode": decisions / episodes,
        "ms_per_decision": per_decision_ms,
        "ms_per_episode": per_episode_ms,
        "on_time": on_time / max(scored, 1),
    }


def warm_further(pool) -> None:
    """Compile (or load from the cache) every kernel once, outside the timings."""
    for mode in ("token", "money"):
        arr = dag_arrays(pool, 0, CostSetting(cost_mode=mode))
        for m in FURTHER_METHODS:
            simulate_run(arr, m, SimSpec(budget=nominal_budget(arr), deadline=nominal_deadline(arr), trials=range(1),
                                         seed=1, dag=0))
        run_policy_episode(arr, MCPortfolioPolicy({"n_threads": 1, "M": 4}), nominal_budget(arr),
                           nominal_deadline(arr), 1, 0, 0)  # fmt: skip


def fmt(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.01:
        return f"{x:.3f}"
    return f"{x:.4f}"


def table(rows: list[dict], workload: str) -> str:
    lines = [
        f"**{workload}** (ms; token mode | money mode)",
        "",
        "| method | per decision | per episode | decisions / episode | on time |",
        "|---|---|---|---|---|",
    ]
    by = {(r["method"], r["mode"]): r for r in rows if r["workload"] == workload}
    methods = [m for m in BASELINE_METHODS + FURTHER_METHODS + (MCPP,) if (m, "token") in by]
    for m in methods:
        a, b = by[(m, "token")], by.get((m, "money"))

        def two(key, f=fmt, a=a, b=b):
            return f"{f(a[key])} \\| {f(b[key])}" if b else f(a[key])

        name = f"**{m}**" if m in FURTHER_METHODS else m
        lines.append(
            f"| {name} | {two('ms_per_decision')} | {two('ms_per_episode')} | "
            f"{two('decisions_per_episode', lambda x: f'{x:.1f}')} | {two('on_time', lambda x: f'{x:.2f}')} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer DAGs and trials (a smoke run)")
    ap.add_argument("--no-readme", action="store_true", help="do not rewrite the README section")
    args = ap.parse_args(argv)
    wl = workloads(args.quick)
    t_start = time.perf_counter()
    warm_further(wl["example_pool"])
    rows = []
    plan = {
        # workload: (DAGs, trials per method family)
        "example_pool": (list(range(len(wl["example_pool"]))), {"baseline": 200, "further": 5, "mcpp": 5}),
        "layered40": (list(range(len(wl["layered40"]))), {"baseline": 200, "further": 3, "mcpp": 3}),
    }
    if args.quick:
        plan = {k: (d[:4], {"baseline": 20, "further": 1, "mcpp": 1}) for k, (d, _) in plan.items()}
    for name, (dags, trials) in plan.items():
        pool = wl[name]
        for mode in ("token", "money"):
            for m in BASELINE_METHODS + FURTHER_METHODS + (MCPP,):
                fam = "baseline" if m in BASELINE_METHODS else ("mcpp" if m == MCPP else "further")
                use = dags
                r = measure(pool, mode, m, trials[fam], use, trials["further"])
                r.update(workload=name, dags=len(use), trials=trials[fam])
                rows.append(r)
                print(f"{name:13s} {mode:5s} {m:24s} {r['ms_per_decision']:10.4f} ms/dec "
                      f"{r['ms_per_episode']:10.3f} ms/ep  on time {r['on_time']:.2f}", flush=True)  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_at_end": load},
        "numba_threads": os.environ.get("NUMBA_NUM_THREADS"),
        "quick": args.quick,
        "seconds": time.perf_counter() - t_start,
        "rows": rows,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if not args.no_readme:
        write_readme(rows, out)
    return 0


def summary(rows: list[dict]) -> str:
    """Means over the further methods vs the baselines and MCPP (per decision, per episode), and their ratios."""
    out = []
    for wl in ("example_pool", "layered40"):
        for mode in ("token", "money"):
            sel = [r for r in rows if r["workload"] == wl and r["mode"] == mode]
            if not sel:
                continue
            f = [r for r in sel if r["method"] in FURTHER_METHODS]
            b = [r for r in sel if r["method"] in BASELINE_METHODS]
            m = [r for r in sel if r["method"] == MCPP]
            worst = max(f, key=lambda r: r["ms_per_decision"])
            f_dec = float(np.mean([r["ms_per_decision"] for r in f]))
            f_ep = float(np.mean([r["ms_per_episode"] for r in f]))
            b_ep = float(np.mean([r["ms_per_episode"] for r in b]))
            m_dec, m_ep = (m[0]["ms_per_decision"], m[0]["ms_per_episode"]) if m else (math.nan, math.nan)
            out.append(
                f"| {wl} | {mode} | {fmt(f_dec)} (max {fmt(worst['ms_per_decision'])}, {worst['method']}) |"
                f" {fmt(f_ep)} | {fmt(b_ep)} | {fmt(m_dec) if m else '-'} | {fmt(m_ep) if m else '-'} |"
                f" {f_ep / b_ep:,.0f}x | {m_dec / f_dec:,.0f}x | {m_ep / f_ep:,.0f}x |"
            )
    head = ("| workload | mode | further: ms / decision (mean of 8) | further: ms / episode | "
            "12 baselines: ms / episode | MCPP: ms / decision | MCPP: ms / episode | "
            "episode: further / baselines | decision: MCPP / further | episode: MCPP / further |\n"
            "|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    return head + "\n" + "\n".join(out)


def write_readme(rows: list[dict], meta: dict) -> None:
    load = meta["machine"]["load_at_end"]
    body = "\n\n".join(
        [
            "## Further baselines (`bench_further.py`)",
            "```bash\npython -m benchmarks.bench_further     # -> benchmarks/results_further.json and this section\n```",
            (
                f"Written by the script ({'quick run, ' if meta['quick'] else ''}{meta['seconds'] / 60:.1f} minutes; "
                f"{meta['machine']['cpus']}-core machine, load average {load:.1f} at the end, one numba thread). "
                "Nominal budget and deadline of each DAG; example pool = 24 DAGs of 4-8 nodes, "
                "layered40 = 6 40-node layered DAGs with 4 models. Episodes per DAG: 200 for the baselines, 5 (example "
                "pool) or 3 (layered40) for the further methods and MCPP. "
                "'Per decision' is the policy's own time per call (for the compiled baselines: episode time / "
                "decisions); 'per episode' is the whole episode. 'On time' = completed by the nominal deadline, "
                "over the same (DAG, trial) pairs for every method (5 or 3 trials per DAG: indicative only)."
            ),
            summary(rows),
            table(rows, "example_pool"),
            table(rows, "layered40"),
        ]
    )
    text = README.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{body}\n{END}"
    if BEGIN in text and END in text:
        pre, rest = text.split(BEGIN, 1)
        post = rest.split(END, 1)[1]
        text = pre + block + post
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())

"""The statistical gate of learning pools from traces: explore a known world, rebuild, compare with its truth.

The loopback world serving a pool P0 draws every attempt as a uniform row of
P0, so P0's rows *are* the truth. One replication (seed s):

1. ``executor explore``'s loop (:func:`executor.explore.explore`) against an
   in-process world with seed ``1000 + s`` on ``agree``'s virtual clock (model
   time moves only when nothing else can happen, so a span is the drawn
   latency exactly), ``N`` observations per (node, model) of DAG 0;
2. :mod:`poolbuild.from_traces` rebuilds the pool line;
3. per pair, z-scores of the rebuilt success rate, mean latency and mean
   output tokens against P0's rows (the standard error of a mean of n uniform
   row draws: the rows' population sd / sqrt(n)).

Were the rebuild exact up to sampling, the z-scores would be standard normal
(mean 0, sd 1, 4.6% beyond 2). **Power**: a world serving a perturbed P0 (one
pair's success rate -0.1 and latency x 1.3) is explored the same way and the
rebuild is tested against the unperturbed P0; it is rejected when any |z| passes
the Bonferroni bound for a 5% family-wise level. **Censoring**: ``sequential_2``
runs in batches of 2 (``sequential_2``) with ``--cancel-siblings`` at a tight deadline (many requests cancelled on
the wire) are rebuilt twice, dropping the censored requests (naive) and with the
Kaplan-Meier rows; the latency z-scores of the pairs with censoring, each
estimate against its own standard error (the naive one: a mean of the complete
observations; the Kaplan-Meier rows: the KM mean's Greenwood-type error plus
the donors' noise, :func:`poolbuild.censored.imputed_mean_var`), show the
naive estimate failing and the censoring-aware one passing. The loopback
runs' trace ids are keyed by their inputs (:func:`executor.agree.loopback_trace_ids`),
so the donors, keyed by trace id, are the same on every rerun.

``python -m benchmarks.learn_gate --seeds 20 --per-pair 30`` writes
``benchmarks/results_learn_gate.json`` (the numbers in benchmarks/README.md).
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from executor.agree import live_episodes
from executor.clock import VirtualClock
from executor.explore import explore, placeholder_line
from executor.inputs import load_dag, make_workflow
from executor.live import Options
from executor.tasks import load_tasks
from executor.workflow import check_workflow, pool_workflow_doc
from executor.world import World
from poolbuild.bootstrap import logit, logit_var, quote_z, resample_runs
from poolbuild.censored import imputed_mean_var
from poolbuild.from_traces import Graph, Obs, build_line, collect, trace_files
from simulator.base import cliargs
from simulator.base.io_utils import atomic_write_json
from simulator.costs.limits import Limits
from simulator.pools.pool import pool_from_objects

ROOT = Path(__file__).resolve().parents[1]
POOL = str(ROOT / "examples" / "example_pool.jsonl")
PERTURBED = (4, "30B_ins")  # node id, model: success -0.1, latency x 1.3


def truth(raw_line: dict[str, Any]) -> dict[tuple[int, str], dict[str, np.ndarray]]:
    """Per (node id, model): the rows' success, latency and tokens (what the world draws from)."""
    out = {}
    for n in raw_line["nodes"]:
        for m, rows in (n.get("empirical_samples_by_model") or {}).items():
            out[(int(n["node_id"]), m)] = {
                "success": np.array([float(r["success"]) for r in rows]),
                "latency": np.array([float(r["latency"]) for r in rows]),
                "tokens": np.array([float(r.get("token_cost", r.get("cost"))) for r in rows])}
    return out


def perturbed_line(raw_line: dict[str, Any]) -> dict[str, Any]:
    """P0 with one pair's success rate lowered by exactly 0.1 and its latencies x 1.3 (rows repeated 10 times,
    so that a tenth of them is a whole number of rows)."""
    line = json.loads(json.dumps(raw_line))
    v, m = PERTURBED
    node = next(n for n in line["nodes"] if int(n["node_id"]) == v)
    rows = [dict(r) for r in node["empirical_samples_by_model"][m] for _ in range(10)]
    flip = int(round(0.1 * len(rows)))
    wins = [i for i, r in enumerate(rows) if int(r["success"])]
    assert len(wins) >= flip
    for i in wins[:flip]:
        rows[i]["success"] = 0
    for r in rows:
        r["latency"] = float(r["latency"]) * 1.3
    node["empirical_samples_by_model"][m] = rows
    t = node["model_templates"][m]
    t["success_prob"] = float(np.mean([int(r["success"]) for r in rows]))
    t["lat_mean"] = float(np.mean([r["latency"] for r in rows]))
    t["lat_std"] = float(np.std([r["latency"] for r in rows]))
    return line


def z_scores(line: dict[str, Any], true: dict[tuple[int, str], dict[str, np.ndarray]]) -> list[dict[str, Any]]:
    """Per pair and measure: the rebuilt line's mean against the truth's, in standard errors of n draws."""
    out = []
    for n in line["nodes"]:
        for m, rows in n["empirical_samples_by_model"].items():
            t = true.get((int(n["node_id"]), m))
            if t is None or not rows:
                continue
            got = {"success": np.array([float(r["success"]) for r in rows]),
                   "latency": np.array([float(r["latency"]) for r in rows]),
                   "tokens": np.array([float(r["token_cost"]) for r in rows])}
            k = len(rows)
            for measure in ("success", "latency", "tokens"):
                sd = float(t[measure].std())
                if sd == 0:
                    continue
                z = (float(got[measure].mean()) - float(t[measure].mean())) / (sd / math.sqrt(k))
                out.append({"node": int(n["node_id"]), "model": m, "measure": measure, "n": k, "z": z})
    return out


def _workflow():
    pool, dag = load_dag(POOL, 0)
    st = pool[dag]
    raw = pool.raw(dag)
    ids = [int(x) for x in st.node_ids]
    parents = {int(n["node_id"]): [int(p) for p in n["parents"]] for n in raw["nodes"]}
    tasks = load_tasks(None, ids, parents)
    return pool, raw, check_workflow(pool_workflow_doc(raw, st.problem_id, ids, parents, tasks), "<gate>")


def rebuild(folder: Path, wfile, *, drop_censored: bool = False) -> dict[str, Any]:
    """The learned line of the traces in ``folder`` (``drop_censored``: the naive estimate, censored ones left out)."""
    c = collect(trace_files([str(folder)]), wfile.hash, lambda _m: None)
    obs: list[Obs] = [o for o in c.obs if not drop_censored or (o.lat_observed and o.tok_observed)]
    g = Graph(wfile.name, wfile.hash, list(wfile.node_ids), dict(wfile.names), dict(wfile.parents))
    return build_line(g, obs, prior_line=None, prior_meta=None, strength=0, seed=0, faults=c.faults,
                      other_model=c.other_model, traces=c.traces, say=lambda _m: None, offered=c.models)


async def _explore_world(world_line: dict[str, Any], seed: int, per_pair: int, folder: Path,
                         concurrency: int) -> None:
    _, _, wfile = _workflow()
    world_pool = pool_from_objects([world_line], name="<gate world>")
    clock = VirtualClock(0.1)
    world = World(world_pool, seed=1000 + seed, clock=clock)
    await world.start()
    try:
        eps = {e.model_id: e for e in world.endpoints()}
        ph = pool_from_objects([placeholder_line(wfile, eps)], name="<explore>")
        wf = make_workflow(ph, 0, "<explore>", eps, "<world>", None, "token_cost_mean", workflow=wfile)
        await explore(wfile, wf, eps, budget=1e12, per_pair=per_pair, trace_dir=folder, deadline=1e6, clock=clock,
                      concurrency=concurrency, seed=seed, options=Options(), say=lambda _m: None)
    finally:
        await world.stop()


def replicate(seed: int, per_pair: int, *, perturb: bool = False, concurrency: int = 20) -> list[dict[str, Any]]:
    """One replication's z-scores (the rebuild against the unperturbed truth)."""
    _, raw, wfile = _workflow()
    world_line = perturbed_line(raw) if perturb else raw
    with tempfile.TemporaryDirectory(prefix="learn_gate_") as tmp:
        asyncio.run(_explore_world(world_line, seed, per_pair, Path(tmp), concurrency))
        line = rebuild(Path(tmp), wfile)
    return z_scores(line, truth(raw))


def bonferroni_bound(k: int, alpha: float = 0.05) -> float:
    return float(stats.norm.isf(alpha / (2 * k)))


def rejected(zs: list[dict[str, Any]]) -> bool:
    return max(abs(z["z"]) for z in zs) > bonferroni_bound(len(zs))


def aggregate(zs: list[dict[str, Any]]) -> dict[str, Any]:
    z = np.array([x["z"] for x in zs])
    return {"count": int(len(z)), "mean": float(z.mean()), "sd": float(z.std(ddof=1)),
            "beyond_2": float(np.mean(np.abs(z) > 2))}


def censoring_demo(seed: int = 0, runs: int = 200, deadline_ratio: float = 1.0,
                   method: str = "sequential_2") -> dict[str, Any]:
    """``sequential_2`` (batches of 2) with --cancel-siblings at a tight deadline: latency z of the pairs with
    censored requests, rebuilt naively (censored ones dropped) and with the Kaplan-Meier rows, each against its own
    standard error (``se``; the KM rows' in two parts, ``se_km`` and ``se_imputation``)."""
    pool, raw, wfile = _workflow()
    wf = make_workflow(pool, 0, POOL, None, "", None, "token_cost_mean")
    b, d = Limits.ratios(4.0, deadline_ratio).resolve(wf.arr, f"{wf.source}: ")
    with tempfile.TemporaryDirectory(prefix="learn_cens_") as tmp:
        asyncio.run(live_episodes(wf, pool, method, b, d, runs, scale=0.1, seed=seed, world_seed=1000 + seed,
                                  concurrency=50, trace_dir=tmp, options=Options(cancel_siblings=True)))
        c = collect(trace_files([tmp]), wfile.hash, lambda _m: None)
        naive, aware = rebuild(Path(tmp), wfile, drop_censored=True), rebuild(Path(tmp), wfile)
    true = truth(raw)
    out = []
    for (v, m), t in sorted(true.items()):
        mine = [o for o in c.obs if (o.node, o.model) == (v, m)]
        cens = [o.lat for o in mine if not o.lat_observed]
        complete = [o.lat for o in mine if o.lat_observed and o.tok_observed and o.success is not None]
        if not cens or not complete:
            continue
        # each estimate against its own sampling error: the naive one is a mean of the complete observations;
        # the Kaplan-Meier rows' mean has the KM mean's error plus the donors' (poolbuild.censored)
        se_naive = float(t["latency"].std()) / math.sqrt(len(complete))
        v_km, v_imp = imputed_mean_var(np.array(complete + cens), np.array([True] * len(complete)
                                                                            + [False] * len(cens)))
        for name, line, se in (("naive", naive, se_naive), ("kaplan_meier", aware, math.sqrt(v_km + v_imp))):
            node = next(n for n in line["nodes"] if int(n["node_id"]) == v)
            got = float(np.mean([r["latency"] for r in node["empirical_samples_by_model"][m]]))
            out.append({"node": v, "model": m, "estimate": name, "z": (got - float(t["latency"].mean())) / se,
                        "se": se, "mean": got, "truth": float(t["latency"].mean()), "complete": len(complete),
                        "censored": len(cens), "dropped": node["model_node_metadata"][m]["dropped_censored"],
                        **({"se_km": math.sqrt(v_km), "se_imputation": math.sqrt(v_imp)}
                           if name == "kaplan_meier" else {})})
    return {"method": method, "runs": runs, "deadline_ratio": deadline_ratio, "seed": seed, "pairs": out}


def _explored(raw: dict[str, Any], wfile, seed: int, per_pair: int):
    """(observations, rebuild): one exploration of the true world and a function rebuilding a line from
    observations (no prior)."""
    with tempfile.TemporaryDirectory(prefix="learn_explore_") as tmp:
        asyncio.run(_explore_world(raw, seed, per_pair, Path(tmp), 20))
        c = collect(trace_files([tmp]), wfile.hash, lambda _m: None)
    g = Graph(wfile.name, wfile.hash, list(wfile.node_ids), dict(wfile.names), dict(wfile.parents))

    def line_of(obs: list[Obs]) -> dict[str, Any]:
        return build_line(g, obs, prior_line=None, prior_meta=None, strength=0, seed=0, faults={}, other_model={},
                          traces=[], say=lambda _m: None, offered=c.models)

    return c, line_of


def _on_time(line: dict[str, Any], budget: float, deadline: float, trials: int, seed: int,
             params: dict[str, Any]) -> float:
    """MCPP's simulated on-time rate on a pool line (live rules, ``trials`` episodes)."""
    from simulator.costs.arrays import CostSetting, build_arrays
    from simulator.engine.registry import LIVE
    from simulator.simulate import SimSpec, simulate_run

    st = pool_from_objects([line], name="<e2e>")[0]
    arr = build_arrays(st, CostSetting(cost_mode="token_cost_mean"))
    spec = SimSpec(budget=budget, deadline=deadline, trials=list(range(trials)), seed=seed, dag=0, rules=LIVE)
    batch = simulate_run(arr, "mc_portfolio_rollout", spec, params=params, model_names=st.model_ids)
    on_time, _, _ = batch.scored(deadline)
    return float(np.mean(on_time))


def end_to_end(seed: int = 0, per_pair: int = 30, boot: int = 10, trials: int = 200,
               cells: tuple[tuple[float, ...], ...] = ((0.5, 0.5), (0.5, 0.7), (0.3, 0.7)),
               params: dict[str, Any] | None = None) -> dict[str, Any]:
    """MCPP's simulated on-time rate from the learned pool against the world pool's, at budget and deadline
    ratios ``cells`` (of the world pool's nominal scales), with the learned pool's own sampling error from a
    bootstrap over runs (traces resampled with replacement, the pool rebuilt, MCPP simulated again). The world
    pool's episodes are seeded by the replication (``11 + 100 seed``: 11 for seed 0), so that the replications'
    z-scores are independent (one world simulation shared by all would lend its luck to every one)."""
    from simulator.costs.arrays import CostSetting, build_arrays
    from simulator.costs.nominal import nominal_budget, nominal_deadline

    params = {"M": 8} if params is None else params
    pool, raw, wfile = _workflow()
    arr0 = build_arrays(pool[0], CostSetting(cost_mode="token_cost_mean"))
    b0, d0 = nominal_budget(arr0), nominal_deadline(arr0)
    c, line_of = _explored(raw, wfile, seed, per_pair)

    ids = {o.key.split(":", 1)[0] for o in c.obs}
    boots = [line_of(obs) for obs in resample_runs(list(c.obs), boot, seed)]
    learned = line_of(list(c.obs))
    out = []
    for rb, rd in cells:
        b, d = rb * b0, rd * d0
        world = _on_time(raw, b, d, trials, 11 + 100 * seed, params)
        mine = _on_time(learned, b, d, trials, 12, params)
        rates = [_on_time(x, b, d, trials, 12, params) for x in boots]
        se_boot = float(np.std(rates, ddof=1))
        se = math.sqrt(se_boot ** 2 + world * (1 - world) / trials + mine * (1 - mine) / trials)
        out.append({"budget_ratio": rb, "deadline_ratio": rd, "world": world, "learned": mine,
                    "se_bootstrap": se_boot, "se": se, "z": (mine - world) / se if se > 0 else 0.0,
                    "bootstrap_rates": rates})
        print(f"end to end: budget {rb} deadline {rd}: world {world:.3f}, learned {mine:.3f}, "
              f"bootstrap sd {se_boot:.3f}, z {out[-1]['z']:+.2f}", flush=True)
    return {"seed": seed, "world_seed": 11 + 100 * seed, "per_pair": per_pair, "boot": boot, "trials": trials,
            "params": params, "runs": len(ids), "cells": out}


def quote_check(seed: int = 0, per_pair: int = 30, runs: int = 400, target: float = 0.8,
                deadline_ratio: float = 1.5, method: str = "sequential", boot: int = 40) -> dict[str, Any]:
    """``quote`` from the learned pool against the on-time rate of ``runs`` live runs at the quoted budget: the
    runs plan with the learned pool and meet the world (its true pool) on the virtual clock. The quote's error
    has three parts: the live runs' binomial SE, the quote's own (its simulated episodes) and the learned pool's
    sampling error (a bootstrap over the exploration's runs: the quoted budget's rate on ``boot`` rebuilt pools,
    every one on the same episodes, seeded apart from the quote's own); compared on the logit scale
    (:func:`quote_z`)."""
    from executor.quote import quote
    from simulator.costs.arrays import CostSetting, build_arrays
    from simulator.costs.nominal import nominal_deadline
    from simulator.engine.registry import LIVE
    from simulator.simulate import SimSpec, simulate_run

    pool, raw, wfile = _workflow()
    d = deadline_ratio * nominal_deadline(build_arrays(pool[0], CostSetting(cost_mode="token_cost_mean")))
    c, line_of = _explored(raw, wfile, seed, per_pair)

    learned = line_of(list(c.obs))
    lpool = pool_from_objects([learned], name="<learned>")
    q = quote(lpool, 0, method, d, target, runs, seed=seed + 7, rules=LIVE)
    assert q.budget is not None, "the target is out of reach on the learned pool"
    ids = {o.key.split(":", 1)[0] for o in c.obs}
    rates = []
    for obs in resample_runs(list(c.obs), boot, seed):
        st = pool_from_objects([line_of(obs)], name="<boot>")[0]
        spec = SimSpec(budget=q.budget, deadline=d, trials=list(range(runs)), seed=seed + 11, dag=0, rules=LIVE)
        batch = simulate_run(build_arrays(st, CostSetting(cost_mode="token_cost_mean")), method, spec,
                             model_names=st.model_ids)
        rates.append(float(np.mean(batch.scored(d)[0])))
    wf = make_workflow(lpool, 0, "<learned>", None, "", None, "token_cost_mean", workflow=wfile)
    results, _ = asyncio.run(live_episodes(wf, pool, method, q.budget, d, runs, scale=0.1, seed=seed + 3,
                                           world_seed=2000 + seed, concurrency=200))
    live = float(np.mean([r.on_time for r in results]))
    se_boot = float(np.std(rates, ddof=1))
    se = math.sqrt(se_boot ** 2 + live * (1 - live) / runs + q.rate * (1 - q.rate) / runs)
    zl = quote_z(q.rate, runs, live, runs, rates, runs)
    out = {"method": method, "target": target, "deadline": d, "deadline_ratio": deadline_ratio,
           "quoted_budget": q.budget, "quoted_rate": q.rate, "live_runs": runs, "live_rate": live,
           "se_bootstrap": se_boot, "se": se, "z_rate": (live - q.rate) / se, **zl, "bootstrap_rates": rates,
           "boot": boot, "exploration_runs": len(ids)}
    print(f"quote check: {method}, quoted budget {q.budget:.6g} for {q.rate:.3f} on time; live {live:.3f} over "
          f"{runs} runs; bootstrap sd {se_boot:.3f} (logit {zl['sd_bootstrap_logit']:.3f}); z {out['z']:+.2f}",
          flush=True)
    return out


def oracle_vs_bootstrap(seed: int, budget: float, pools: int = 40, boot: int = 40, per_pair: int = 30,
                        deadline_ratio: float = 1.5, method: str = "sequential") -> dict[str, Any]:
    """The sampling distribution the bootstrap estimates, drawn from the truth itself: ``pools`` pools learned
    from observations drawn from the world's rows (each pair as often as exploration ``seed`` observed it),
    against ``boot`` bootstrap rebuilds of that exploration; each pool's on-time rate at ``budget`` on the same
    400 episodes, summarised on the rate and the logit scales."""
    from collections import Counter

    from simulator.costs.arrays import CostSetting, build_arrays
    from simulator.costs.nominal import nominal_deadline
    from simulator.engine.registry import LIVE
    from simulator.simulate import SimSpec, simulate_run

    pool, raw, wfile = _workflow()
    d = deadline_ratio * nominal_deadline(build_arrays(pool[0], CostSetting(cost_mode="token_cost_mean")))
    c, line_of = _explored(raw, wfile, seed, per_pair)

    def rate(line: dict[str, Any]) -> float:
        st = pool_from_objects([line], name="<oracle>")[0]
        spec = SimSpec(budget=budget, deadline=d, trials=list(range(400)), seed=12, dag=0, rules=LIVE)
        arr = build_arrays(st, CostSetting(cost_mode="token_cost_mean"))
        return float(np.mean(simulate_run(arr, method, spec, model_names=st.model_ids).scored(d)[0]))

    true, counts = truth(raw), Counter((o.node, o.model) for o in c.obs)
    rng = np.random.default_rng(5)
    oracle = []
    for k in range(pools):
        obs = []
        for (v, m), n in sorted(counts.items()):
            t = true[(v, m)]
            obs += [Obs(v, m, float(t["latency"][j]), True, float(t["tokens"][j]), True, int(t["success"][j]),
                        f"o{k}.{v}.{m}.{i}:0") for i, j in enumerate(rng.integers(0, len(t["success"]), n))]
        oracle.append(rate(line_of(obs)))
    boots = [rate(line_of(o)) for o in resample_runs(list(c.obs), boot, seed)]

    def summary(rates: list[float]) -> dict[str, float]:
        lg = [logit(r, 400) for r in rates]
        return {"mean": float(np.mean(rates)), "sd": float(np.std(rates, ddof=1)), "sd_logit": float(np.std(lg, ddof=1))}

    out = {"seed": seed, "budget": budget, "learned": rate(line_of(list(c.obs))), "oracle": summary(oracle),
           "bootstrap": summary(boots), "oracle_rates": oracle, "bootstrap_rates": boots}
    print(f"oracle vs bootstrap at {budget:.6g}: learned {out['learned']:.3f}; oracle {out['oracle']}; "
          f"bootstrap {out['bootstrap']}", flush=True)
    return out


def quote_selection(seed: int = 0, per_pair: int = 30, requotes: int = 12, trials: int = 400,
                    check_trials: int = 4000, target: float = 0.8, deadline_ratio: float = 1.5,
                    method: str = "sequential") -> dict[str, Any]:
    """The quote's own error on a fixed pool (the learned pool of exploration ``seed``): ``requotes`` quotes with
    other seeds, each quoted budget's true rate on that pool estimated from ``check_trials`` fresh episodes. The
    quoted budget is the cheapest whose ``trials`` simulated episodes reach the target, so its quoted rate leans
    high (the winner's curse of a noisy threshold): ``bias`` is the mean of true - quoted, ``sd`` its spread."""
    from executor.quote import quote
    from simulator.costs.arrays import CostSetting, build_arrays
    from simulator.costs.nominal import nominal_deadline
    from simulator.engine.registry import LIVE
    from simulator.simulate import SimSpec, simulate_run

    pool, raw, wfile = _workflow()
    d = deadline_ratio * nominal_deadline(build_arrays(pool[0], CostSetting(cost_mode="token_cost_mean")))
    c, line_of = _explored(raw, wfile, seed, per_pair)
    lpool = pool_from_objects([line_of(list(c.obs))], name="<learned>")
    arr = build_arrays(lpool[0], CostSetting(cost_mode="token_cost_mean"))
    rows = []
    for r in range(requotes):
        q = quote(lpool, 0, method, d, target, trials, seed=500 + r, rules=LIVE)
        assert q.budget is not None, "the target is out of reach on the learned pool"
        spec = SimSpec(budget=q.budget, deadline=d, trials=list(range(check_trials)), seed=9000 + r, dag=0,
                       rules=LIVE)
        true = float(np.mean(simulate_run(arr, method, spec, model_names=lpool[0].model_ids).scored(d)[0]))
        rows.append({"quote_seed": 500 + r, "budget": q.budget, "quoted": q.rate, "true": true})
        print(f"quote selection: budget {q.budget:.6g} quoted {q.rate:.3f} true {true:.3f}", flush=True)
    diff = np.array([x["true"] - x["quoted"] for x in rows])
    dl = np.array([logit(x["true"], check_trials) - logit(x["quoted"], trials) for x in rows])
    out = {"seed": seed, "trials": trials, "check_trials": check_trials, "target": target, "method": method,
           "bias": float(diff.mean()), "sd": float(diff.std(ddof=1)), "bias_logit": float(dl.mean()),
           "sd_logit": float(dl.std(ddof=1)), "binomial_sd_logit": math.sqrt(logit_var(target, trials)),
           "quotes": rows}
    print(f"quote selection ({trials} episodes per budget): true - quoted {out['bias']:+.4f} (sd {out['sd']:.4f}); "
          f"logit {out['bias_logit']:+.3f} (sd {out['sd_logit']:.3f}, binomial {out['binomial_sd_logit']:.3f})")
    return out


def replications_summary(folder: Path) -> str:
    """The end-to-end and quote checks over every seed on disk (``results_learn_gate_{e2e,quote}[_seed<S>].json``):
    one line per seed and the pass counts (a cell or a quote passes within 2 SE)."""
    lines = []
    for kind in ("e2e", "quote"):
        paths = sorted(folder.glob(f"results_learn_gate_{kind}*.json"),
                       key=lambda p: int(p.stem.rsplit("_seed", 1)[1]) if "_seed" in p.stem else 0)  # fmt: skip
        passed = total = 0
        every: list[float] = []
        for path in paths:
            res = json.loads(path.read_text())
            seed = int(path.stem.rsplit("_seed", 1)[1]) if "_seed" in path.stem else 0
            zs = [c["z"] for c in res["cells"]] if kind == "e2e" else [res["z"]]
            passed += sum(abs(z) <= 2 for z in zs)
            total += len(zs)
            every += zs
            lines.append(f"{kind} seed {seed}: z " + ", ".join(f"{z:+.2f}" for z in zs))
        if total:
            lines.append(f"{kind}: {passed} of {total} within 2 SE over {len(paths)} explorations")
            if total > 1:
                z = np.array(every)
                lines.append(f"{kind}: z mean {z.mean():+.2f}, sd {z.std(ddof=1):.2f}, above 0 in {int((z > 0).sum())} "
                             f"of {total}")
    return "\n".join(lines) or f"no results_learn_gate_e2e*.json or results_learn_gate_quote*.json in {folder}"


def main(argv: list[str] | None = None) -> int:
    ap = cliargs.ArgumentParser(prog="python -m benchmarks.learn_gate", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--per-pair", type=int, default=30)
    ap.add_argument("--perturbed-seeds", type=int, default=10)
    ap.add_argument("--out", type=cliargs.output_path(), default=str(ROOT / "benchmarks" / "results_learn_gate.json"))
    ap.add_argument("--end-to-end", action="store_true",
                    help="only MCPP's on-time rate from a learned pool vs the world's (bootstrap over runs)")
    ap.add_argument("--boot", type=int, default=None,
                    help="bootstrap resamples (default: 10 for --end-to-end, 40 for --quote-check)")
    ap.add_argument("--quote-check", action="store_true",
                    help="only quote from a learned pool vs 400 live runs at the quoted budget")
    ap.add_argument("--quote-selection", type=int, default=0, metavar="R",
                    help="only the quote's own error on the learned pool of --seed: R re-quotes with other seeds")
    ap.add_argument("--oracle", type=cliargs.number(0, lo_inclusive=False), default=None, metavar="BUDGET",
                    help="only the bootstrap of --seed's exploration against pools drawn from the truth, at BUDGET")
    ap.add_argument("--quote-trials", type=int, default=400, help="--quote-selection's episodes per budget")
    ap.add_argument("--cells", default="0.5:0.5,0.5:0.7,0.3:0.7",
                    help="--end-to-end's (budget ratio:deadline ratio) cells, comma-separated")
    ap.add_argument("--censoring-runs", type=int, default=200, help="runs of the naive vs Kaplan-Meier comparison")
    ap.add_argument("--censoring-only", choices=["sequential_2", "sequential_4"], default=None, metavar="METHOD",
                    help="only the naive vs Kaplan-Meier comparison, with METHOD (sequential_4: its limit case); "
                         "writes results_learn_gate_censoring_<METHOD>.json beside --out")
    ap.add_argument("--seed", type=cliargs.integer(0), default=0,
                    help="--end-to-end's and --quote-check's exploration seed (a replication; files *_seed<S>.json)")
    ap.add_argument("--replications", action="store_true",
                    help="summarise the end-to-end and quote checks of every seed beside --out, and exit")
    args = ap.parse_args(argv)
    if args.replications:
        print(replications_summary(Path(args.out).parent))
        return 0
    suffix = "" if args.seed == 0 else f"_seed{args.seed}"
    if args.censoring_only:
        res = censoring_demo(runs=args.censoring_runs, method=args.censoring_only)
        atomic_write_json(str(Path(args.out).with_name(f"results_learn_gate_censoring_{args.censoring_only}.json")),
                          res)
        print_censoring(res)
        return 0
    if args.oracle is not None:
        res = oracle_vs_bootstrap(args.seed, args.oracle, boot=args.boot or 40, per_pair=args.per_pair)
        atomic_write_json(str(Path(args.out).with_name(f"results_learn_gate_oracle_b{args.oracle:g}{suffix}.json")),
                          res)
        return 0
    if args.quote_selection:
        res = quote_selection(seed=args.seed, per_pair=args.per_pair, requotes=args.quote_selection,
                              trials=args.quote_trials)
        atomic_write_json(str(Path(args.out).with_name(f"results_learn_gate_selection_t{args.quote_trials}"
                                                       f"{suffix}.json")), res)
        return 0
    if args.quote_check:
        res = quote_check(seed=args.seed, per_pair=args.per_pair, boot=args.boot or 40)
        atomic_write_json(str(Path(args.out).with_name(f"results_learn_gate_quote{suffix}.json")), res)
        return 0
    if args.end_to_end:
        cells = tuple(tuple(float(x) for x in c.split(":")) for c in args.cells.split(","))
        res = end_to_end(seed=args.seed, per_pair=args.per_pair, boot=args.boot or 10, cells=cells)
        atomic_write_json(str(Path(args.out).with_name(f"results_learn_gate_e2e{suffix}.json")), res)
        return 0
    null = []
    per_seed = []
    for s in range(args.seeds):
        zs = replicate(s, args.per_pair)
        null += zs
        per_seed.append({"seed": s, **aggregate(zs), "rejected": rejected(zs)})
        print(f"seed {s}: {per_seed[-1]}", flush=True)
    power = []
    for s in range(args.perturbed_seeds):
        zs = replicate(100 + s, args.per_pair, perturb=True)
        power.append({"seed": 100 + s, "rejected": rejected(zs),
                      "max_abs_z": max(abs(z["z"]) for z in zs),
                      "perturbed_pair": [z for z in zs if (z["node"], z["model"]) == PERTURBED]})
        print(f"perturbed seed {100 + s}: rejected {power[-1]['rejected']}", flush=True)
    demo = censoring_demo(runs=args.censoring_runs)
    res = {"per_pair": args.per_pair, "seeds": args.seeds, "null": aggregate(null),
           "null_by_measure": {m: aggregate([z for z in null if z["measure"] == m])
                               for m in ("success", "latency", "tokens")},
           "false_rejections": sum(p["rejected"] for p in per_seed), "per_seed": per_seed,
           "bonferroni_bound": bonferroni_bound(len(null) // max(args.seeds, 1)),
           "power": {"replications": len(power), "rejected": sum(p["rejected"] for p in power), "runs": power},
           "censoring": demo}
    atomic_write_json(args.out, res)
    print(json.dumps({k: res[k] for k in ("null", "null_by_measure", "false_rejections", "power")}, default=str)[:2000])
    print_censoring(demo)
    return 0


def print_censoring(demo: dict[str, Any]) -> None:
    """One line per (pair, estimate) of :func:`censoring_demo`."""
    for p in demo["pairs"]:
        print(f"censoring: {p['estimate']:13s} node {p['node']} {p['model']}: latency {p['mean']:.3f} against "
              f"{p['truth']:.3f}, z {p['z']:+.2f} on SE {p['se']:.3f} ({p['complete']} complete, {p['censored']} "
              f"censored, {p['dropped']} beyond every observed value)")


if __name__ == "__main__":
    raise SystemExit(main())

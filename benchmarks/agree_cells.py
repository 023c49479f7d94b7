"""``executor agree`` over a grid of cells under the live rules: live episodes vs simulated ones, cell by cell.

Run by hand: ``python -m benchmarks.agree_cells [--runs 400] [--dag 0] [--seed 0] [--methods ...]``
writes ``benchmarks/results_agree_cells.json`` (``results_agree_cells_seed<S>.json`` for a seed other
than 0) and prints a Markdown table (quoted in ``docs/executor.md``). The world draws with seed + 1, so
the two sides are independent samples; a cell agrees when both differences (on-time rate, mean spend)
are within 2 standard errors.

``python -m benchmarks.agree_cells --summary`` reads every ``results_agree_cells*.json`` (one per seed)
and prints how the z-scores spread over the replications: were the two sides equal in distribution, a
z-score would be standard normal, and 4.6% of comparisons would lie beyond 2 SE by chance.
``--spread METHOD B D [--seeds 40]`` checks the standard errors themselves on the simulated side alone.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_json
from simulator.base.validation import check_int
from simulator.costs.limits import BUDGET, DEADLINE, MODEL_SECONDS, RATIO, Limit
from simulator.methods import method_spec

ROOT = Path(__file__).resolve().parent.parent
POOL = str(ROOT / "examples" / "example_pool.jsonl")
METHODS = ("mc_portfolio_rollout", "sequential", "uniform")
BUDGETS = ("0.5", "0.7", "1")
DEADLINES = ("0.7", "1", "1.5")


def seed_of(path: Path) -> int:
    """The seed of a replication's file (``results_agree_cells.json`` is seed 0)."""
    return int(path.stem.removeprefix("results_agree_cells").removeprefix("_seed") or 0)


def summary(paths: list[Path], twins: Path | None = None, before: Path | None = None) -> str:
    """The z-scores of every replication, per method and per seed, against a standard normal's.

    With ``twins`` (a folder of :func:`twin_cells`), also how many live cells equal their simulated twin's
    (on-time rate and mean spend, to 1e-9); with ``before`` (a folder of the same seeds' replications), how the
    live cells moved (:func:`before_after`).
    """
    by_method: dict[str, list[tuple[str, float]]] = {}
    rep_means: dict[str, list[tuple[int, float]]] = {}  # per method: (seed, the replication's mean on-time z)
    lines = ["| seed | cells | within 2 SE |", "|---|---|---|"]
    every_cell = {"all methods": [0, 0], "the baselines": [0, 0]}  # [replications with every cell in, replications]
    for path in paths:
        res = json.loads(path.read_text())
        cells = res["cells"]
        lines.append(f"| {res.get('seed', 0)} | {len(cells)} | {sum(c['pass'] for c in cells)} |")
        baselines = [c for c in cells if c["method"] != METHODS[0]]
        for name, group in (("all methods", cells if len(baselines) < len(cells) else []), ("the baselines", baselines)):
            if group:
                every_cell[name][0] += all(c["pass"] for c in group)
                every_cell[name][1] += 1
        rep: dict[str, list[float]] = {}
        for c in cells:
            degenerate = c["live"] == c["sim"] and c["live"] in (0.0, 1.0)  # both rates 0 or 1: no spread to compare
            if not degenerate:
                by_method.setdefault(c["method"], []).append(("on time", c["z_on_time"]))
                rep.setdefault(c["method"], []).append(c["z_on_time"])
            by_method.setdefault(c["method"], []).append(("spend", c["z_spend"]))
        for method, zs in rep.items():
            rep_means.setdefault(method, []).append((int(res.get("seed", 0)), float(np.mean(zs))))
    lines += ["", "| method | measure | comparisons | beyond 2 SE | mean z | sd of z |", "|---|---|---|---|---|---|"]
    for method, zs in by_method.items():
        for measure in ("on time", "spend"):
            z = np.array([v for m, v in zs if m == measure])
            if not len(z):  # every on-time comparison of the method degenerate
                continue
            lines.append(f"| {method} | {measure} | {len(z)} | {int((np.abs(z) > 2).sum())} ({(np.abs(z) > 2).mean():.1%}) "
                         f"| {z.mean():+.2f} | {f'{z.std(ddof=1):.2f}' if len(z) > 1 else '-'} |")  # fmt: skip
    # the cells of one replication share their seeds (their luck), so the mean's SE is the spread between
    # replications; and replication s's world (seed s + 1) is replication s + 1's simulated seed, so neighbours
    # share a sample and their z-scores are anti-correlated: the replications with even seeds share none
    lines += ["", "| method | replications | mean on-time z | SE over replications | even seeds only (no shared sample) |",
              "|---|---|---|---|---|"]  # fmt: skip
    for method, pairs in rep_means.items():
        every, even = [m for _, m in pairs], [m for seed, m in pairs if seed % 2 == 0]
        lines.append(f"| {method} | {len(every)} | {np.mean(every):+.2f} | {_se(every)} | "
                     f"{f'{np.mean(even):+.2f} +- {_se(even)} ({len(even)})' if even else '-'} |")  # fmt: skip
    if twins is not None:
        lines.append("")
        lines += twin_check(paths, twins)
    if paths and all(json.loads(p.read_text()).get("twin") for p in paths):  # live sides that are twins: keyed
        lines.append("")
        lines += planner_key_effect(paths)
    if before is not None:
        lines.append("")
        lines += before_after(paths, before)
    z_all = np.array([v for zs in by_method.values() for _, v in zs])
    lines.append(f"\nall: {int((np.abs(z_all) > 2).sum())} of {len(z_all)} comparisons beyond 2 SE "
                 f"({(np.abs(z_all) > 2).mean():.1%}; a standard normal: 4.6%)")  # fmt: skip
    for name, (n_in, n) in every_cell.items():
        lines.append(f"every cell of {name} within 2 SE: {n_in} of {n} replications")
    return "\n".join(lines)


def _counterparts(paths: list[Path], other: Path):
    """(cell, the same seed's cell of the same method, budget and deadline in folder ``other``), for every cell of
    ``paths`` that has one (files matched by name: one seed per file)."""
    for path in paths:
        if not (other / path.name).exists():
            continue
        theirs = {(c["method"], c["budget_ratio"], c["deadline_ratio"]): c
                  for c in json.loads((other / path.name).read_text())["cells"]}  # fmt: skip
        for c in json.loads(path.read_text())["cells"]:
            if (o := theirs.get((c["method"], c["budget_ratio"], c["deadline_ratio"]))) is not None:
                yield c, o


def twin_check(paths: list[Path], twins: Path) -> list[str]:
    """Per method: how many live cells on disk equal their simulated twin's cell (same seed, budget, deadline)."""
    same: dict[str, list[int]] = {}
    for c, t in _counterparts(paths, twins):
        hit = abs(c["live"] - t["live"]) <= 1e-9 and abs(c["spend_live"] - t["spend_live"]) <= 1e-9
        count = same.setdefault(c["method"], [0, 0])
        count[0] += hit
        count[1] += 1
    return [f"{method}: {k} of {n} live cells equal their simulated twin's (on-time rate and mean spend)"
            for method, (k, n) in same.items()] or ["no live cell has a simulated twin on disk"]


def planner_key_effect(paths: list[Path]) -> list[str]:
    """Replication s's live side (planner seed s, draws s + 1) against replication s + 1's simulated side (planner
    and draws s + 1): the same draws, only the planner's key differs. With keyed streams apart (the planner's and
    the attempts' keys never coincide) the on-time difference has mean 0; its noise is small, since only trials
    whose decisions part can differ. Per method: the mean difference per replication pair, with its SE."""
    by_seed = {seed_of(p): {(c["method"], c["budget_ratio"], c["deadline_ratio"]): c
                            for c in json.loads(p.read_text())["cells"]} for p in paths}  # fmt: skip
    diffs: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for seed, cells in by_seed.items():
        nxt = by_seed.get(seed + 1)
        if nxt is None:
            continue
        per: dict[str, list[float]] = {}
        for key, c in cells.items():
            if key in nxt:
                per.setdefault(key[0], []).append(c["live"] - nxt[key]["sim"])
        for method, d in per.items():
            diffs.setdefault(method, []).append(float(np.mean(d)))
            n = counts.setdefault(method, [0, 0, 0])
            n[0] += sum(x < -1e-12 for x in d)
            n[1] += sum(abs(x) <= 1e-12 for x in d)
            n[2] += sum(x > 1e-12 for x in d)
    return [f"{method}: planner key s vs s + 1 on the same draws, {len(d)} replication pairs: on-time difference "
            f"{np.mean(d):+.4f} (SE {_se(d, 4)}); cells lower {counts[method][0]}, equal {counts[method][1]}, "
            f"higher {counts[method][2]}" for method, d in diffs.items()]  # fmt: skip


def _se(values: list[float], digits: int = 2) -> str:
    """The standard error of the mean of ``values`` (independent), or '-' for fewer than two."""
    return f"{np.std(values, ddof=1) / np.sqrt(len(values)):.{digits}f}" if len(values) > 1 else "-"


def before_after(paths: list[Path], before: Path) -> list[str]:
    """Per method: the cells of the replications on disk paired with the same seed's cell in ``before`` (the same
    seeds, older code): how often the live on-time rate went up, stayed or went down, and the mean change of z."""
    moves: dict[str, list[tuple[float, float]]] = {}
    for c, o in _counterparts(paths, before):
        moves.setdefault(c["method"], []).append((c["live"] - o["live"], c["z_on_time"] - o["z_on_time"]))
    lines = []
    for method, m in moves.items():
        d = np.array(m)
        lines.append(f"{method}: {len(d)} cells paired with {before}: live on-time rate up in {int((d[:, 0] > 1e-12).sum())}, "
                     f"the same in {int((np.abs(d[:, 0]) <= 1e-12).sum())}, down in {int((d[:, 0] < -1e-12).sum())}; "
                     f"mean change {d[:, 0].mean():+.4f}, of the on-time z {d[:, 1].mean():+.3f}")
    return lines or [f"no replication on disk has a counterpart in {before}"]


def spread(method: str, budget_ratio: float, deadline_ratio: float, seeds: int, runs: int, dag: int) -> str:
    """The simulated side alone over ``seeds`` seeds: the spread of its on-time rate and mean spend between seeds
    against the standard errors ``agree`` computes within one seed (equal, if its trials are independent draws)."""
    from executor.agree import simulated_side
    from executor.inputs import load_dag, make_workflow
    from simulator.costs.limits import Limits

    pool, row = load_dag(POOL, dag)
    wf = make_workflow(pool, row, POOL, None, "", None, "token_cost_mean")
    budget, deadline = Limits.ratios(budget_ratio, deadline_ratio).resolve(wf.arr, f"{wf.source}: ")
    sides = [simulated_side(wf, method, budget, deadline, runs, s, None) for s in range(seeds)]
    rates = np.array([side.rate()[0] for side in sides])
    spends = np.array([side.mean_spend() for side in sides])
    p = rates.mean()
    far = int(np.argmax(np.abs(spends[:, 0] - spends[:, 0].mean())))
    return (f"{method} at budget {budget_ratio:g} x, deadline {deadline_ratio:g} x, {seeds} seeds of {runs} trials: "
            f"on-time rate sd between seeds {rates.std(ddof=1):.4f}, binomial SE {np.sqrt(p * (1 - p) / runs):.4f}; "
            f"mean spend sd between seeds {spends[:, 0].std(ddof=1):.1f}, "
            f"SE within a seed {spends[:, 1].mean():.1f} (mean); farthest seed's spend {far}: "
            f"{(spends[far, 0] - spends[:, 0].mean()) / spends[:, 1].mean():+.2f} SE from the mean of the seeds")  # fmt: skip


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: a cell's cost, whatever the machine's load."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def twin_side(wf, method: str, budget: float, deadline: float, runs: int, seed: int, world_seed: int,
              params: dict | None = None):
    """The simulated twin of ``agree``'s live side: the planner keyed by ``seed`` (the live run's seed), every
    attempt drawn with ``world_seed`` (the world's), under the live execution rules.

    A live run on the virtual clock meets the world's draws at the model times its simulated twin does (paired
    runs are identical trial for trial), so its on-time outcome and spend are the twin's. For ``sequential`` and
    ``uniform`` (plans that draw nothing) the twin is the simulation at ``world_seed`` itself; MCPP draws its
    rollouts with the run's seed, so its planner gets that seed back whatever seed the episode draws with.
    """
    import dataclasses
    import math

    from executor.agree import Forwarding, Side
    from simulator.engine.episode import run_policy_episode
    from simulator.engine.loop import REASONS
    from simulator.engine.registry import HARD, LIVE, execution_of
    from simulator.simulate import policy_for

    ex = execution_of(method_spec(method), LIVE)
    policy, rule = policy_for(method, params, None, wf.stats.model_ids, ex.launch)

    class Keyed(Forwarding):  # the planner's own key: the run's seed, whatever seed the episode draws with
        def reset(self, arr, _draw_seed, dag, trial):
            policy.reset(arr, seed, dag, trial)

        def act(self, view):
            return policy.act(dataclasses.replace(view, seed=seed))

    D = float(deadline) if ex.deadline == HARD else math.inf
    res = [run_policy_episode(wf.arr, Keyed(policy), budget, D, world_seed, wf.dag_row, t, launch=rule) for t in range(runs)]
    on_time = np.array([r.termination_reason == REASONS[0] and r.makespan <= deadline for r in res])
    return Side(on_time, np.array([r.total_cost for r in res], dtype=float), [r.termination_reason for r in res])


def twin_cells(args: argparse.Namespace) -> str:
    """The replications with the simulated twin (:func:`twin_side`) standing in for replication s's live side.

    Replication s runs the simulated side with seed s and the live side's twin with planner seed s and world
    seed s + 1; :func:`summary` ``twins=`` checks every live cell on disk against its twin (on-time rate and mean
    spend equal), and the twins give the z-scores of as many replications as CPU allows: a simulated side costs
    a fraction of a live one (no HTTP), the baselines' (compiled) almost nothing.
    """
    from executor.agree import compare, simulated_side
    from executor.inputs import load_dag, make_workflow
    from simulator.costs.limits import Limits

    pool, row = load_dag(POOL, args.dag)
    wf = make_workflow(pool, row, POOL, None, "", None, "token_cost_mean")
    out = Path(args.twin_out)
    out.mkdir(parents=True, exist_ok=True)
    for s in range(args.seed, args.seed + args.seeds):
        rows = []
        for method in args.methods:
            for b in BUDGETS:
                for d in DEADLINES:
                    budget, deadline = Limits.ratios(float(b), float(d)).resolve(wf.arr, f"{wf.source}: ")
                    sim = simulated_side(wf, method, budget, deadline, args.runs, s, None)
                    r = compare(twin_side(wf, method, budget, deadline, args.runs, s, s + 1), sim, 2.0)
                    rows.append({"method": method, "budget_ratio": b, "deadline_ratio": d,
                                 "live": r["on_time"]["live"], "sim": r["on_time"]["sim"],
                                 "z_on_time": r["on_time"]["z_score"], "spend_live": r["spend"]["live"],
                                 "spend_sim": r["spend"]["sim"], "z_spend": r["spend"]["z_score"],
                                 "pass": r["pass"]})  # fmt: skip
        path = out / ("results_agree_cells.json" if s == 0 else f"results_agree_cells_seed{s}.json")
        if path.exists():  # merged as run_cells does: other methods' cells of the seed kept
            rows = [c for c in json.loads(path.read_text())["cells"] if c["method"] not in args.methods] + rows
        rows.sort(key=lambda c: METHODS.index(c["method"]) if c["method"] in METHODS else len(METHODS))
        atomic_write_json(path, {"runs": args.runs, "dag": str(args.dag), "seed": s, "twin": True, "cells": rows},
                          indent=1)  # fmt: skip
        print(f"replication {s}: written to {path}", flush=True)
    return (f"replications {args.seed}-{args.seed + args.seeds - 1} of {', '.join(args.methods)} with simulated "
            f"twins written to {out}")


def agree_cell(method: str, budget_ratio: str, deadline_ratio: str, args: argparse.Namespace) -> dict:
    """One ``executor agree`` cell in its own process: the row of the results table."""
    t0, cpu0 = time.perf_counter(), _children_cpu()
    out = subprocess.run([sys.executable, "-m", "executor", "agree", "--pool", POOL, "--dag", str(args.dag),
                          "--method", method, "--runs", str(args.runs), "--budget-ratio", budget_ratio,
                          "--deadline-ratio", deadline_ratio, "--z", "2", "--seed", str(args.seed), "--json"],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    if out.returncode not in (0, 1):  # 1: the cell disagrees, still a result
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"executor agree ({method}, budget {budget_ratio}, deadline {deadline_ratio}) "
                          f"exited {out.returncode}: {last}")  # fmt: skip
    r = json.loads(out.stdout)
    return {"method": method, "budget_ratio": budget_ratio, "deadline_ratio": deadline_ratio,
            "live": r["on_time"]["live"], "sim": r["on_time"]["sim"], "z_on_time": r["on_time"]["z_score"],
            "spend_live": r["spend"]["live"], "spend_sim": r["spend"]["sim"], "z_spend": r["spend"]["z_score"],
            "pass": r["pass"], "seconds": round(time.perf_counter() - t0, 1),
            "cpu_s": round(_children_cpu() - cpu0, 1)}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked before any cell runs (a bad one is one line, exit 2)."""
    ap = cliargs.ArgumentParser(prog="python -m benchmarks.agree_cells")
    ap.add_argument("--summary", action="store_true", help="summarise the replications on disk and exit")
    ap.add_argument("--spread", nargs=3, metavar=("METHOD", "BUDGET_RATIO", "DEADLINE_RATIO"),
                    help="the simulated side alone over --seeds seeds: its spread between seeds against its SE")
    ap.add_argument("--seeds", default="40")
    ap.add_argument("--runs", default="400")
    ap.add_argument("--dag", default="0")
    ap.add_argument("--seed", default="0", help="the simulated side's seed (the world's is seed + 1)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--out", type=cliargs.output_path(), default=None)
    ap.add_argument("--twin-out", type=cliargs.output_path("dir"), default=None,
                    help="write --seeds replications of --methods with simulated twins as live sides here, and exit")
    ap.add_argument("--twins", type=cliargs.input_path("dir"), default=None,
                    help="with --summary: check each live cell against its simulated twin in this folder")
    ap.add_argument("--before", type=cliargs.input_path("dir"), default=None,
                    help="with --summary: pair each cell with the same seed's cell in this folder (older code)")
    ap.add_argument("--results", type=cliargs.input_path("dir"), default=None,
                    help="where --summary finds the replications (default: benchmarks/)")
    args = ap.parse_args(argv)
    args.seeds = check_int(args.seeds, "--seeds", "flag", lo=2 if args.spread else 1)
    args.runs = check_int(args.runs, "--runs", "flag", lo=2)
    args.dag = check_int(args.dag, "--dag", "flag", lo=0)
    args.seed = check_int(args.seed, "--seed", "flag", lo=0)
    if args.spread:
        method, b, d = args.spread
        args.spread = (method, Limit(BUDGET, b, RATIO, name="--spread BUDGET_RATIO").value,
                       Limit(DEADLINE, d, RATIO, MODEL_SECONDS, name="--spread DEADLINE_RATIO").value)
    for method in [args.spread[0]] if args.spread else args.methods:
        method_spec(method)
    if not args.summary:
        from executor.inputs import load_dag

        load_dag(POOL, args.dag)  # a row the pool lacks: refused here, not by the first cell's process
    return args


def run_cells(args: argparse.Namespace) -> list[dict]:
    """Every cell of ``args.methods``, merged into the seed's results file (other methods' cells kept).

    The file is rewritten (atomically) after every cell, so a replication stopped part way keeps the cells it
    finished; a rerun of the same methods replaces them.
    """
    out_name = "results_agree_cells.json" if args.seed == 0 else f"results_agree_cells_seed{args.seed}.json"
    out = Path(args.out or ROOT / "benchmarks" / out_name)
    kept: list[dict] = []
    if out.exists():  # a replication run a method at a time: keep the other methods' cells of the same seed
        old = json.loads(out.read_text())
        if (old["runs"], int(old["dag"]), old.get("seed", 0)) == (args.runs, args.dag, args.seed):
            kept = [c for c in old["cells"] if c["method"] not in args.methods]
    rows: list[dict] = []
    for method in args.methods:
        for b in BUDGETS:
            for d in DEADLINES:
                rows.append(agree_cell(method, b, d, args))
                print(json.dumps(rows[-1]), flush=True)
                cells = sorted(kept + rows, key=lambda c: METHODS.index(c["method"]) if c["method"] in METHODS
                               else len(METHODS))  # fmt: skip
                atomic_write_json(out, {"runs": args.runs, "dag": str(args.dag), "seed": args.seed, "cells": cells},
                                  indent=1)  # fmt: skip
    return sorted(kept + rows, key=lambda c: METHODS.index(c["method"]) if c["method"] in METHODS else len(METHODS))


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        if args.spread:
            print(spread(*args.spread, args.seeds, args.runs, args.dag))
            return 0
        if args.twin_out:
            print(twin_cells(args))
            return 0
        if args.summary:
            print(summary(sorted(Path(args.results or ROOT / "benchmarks").glob("results_agree_cells*.json"), key=seed_of),
                          Path(args.twins) if args.twins else None, Path(args.before) if args.before else None))
            return 0
        rows = run_cells(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("| method | budget | deadline | on time live | simulated | z | spend live | simulated | z | within 2 SE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['budget_ratio']} | {r['deadline_ratio']} | {r['live']:.3f} | {r['sim']:.3f} | "
              f"{r['z_on_time']:+.2f} | {r['spend_live']:.0f} | {r['spend_sim']:.0f} | {r['z_spend']:+.2f} | "
              f"{'yes' if r['pass'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m simulator calibrate``: how far MCPP's own estimate is from the on-time rate a user gets.

MCPP's first decision reports its best score: a maximum over noisy candidate
estimates (it reads high) of an open-loop continuation (the chosen action,
then a fixed member policy) that the re-planning run will not follow (it
reads low). The calibrated estimate is what the method, as it will run,
achieves from the same state: the on-time rate of whole simulated episodes
from the start, with draws independent of the search and of the realized
episodes (seed ``seed + CALIBRATION_SEED_OFFSET``). Per cell (DAG x budget
ratio x deadline ratio) both estimates stand beside the realized on-time
rate over ``--trials`` episodes; then a reliability table by estimate bin
(tenths) and, as the last line, the expected calibration error of each
estimate (``ECE raw: x  calibrated: y``: the bins' size-weighted mean
|estimate - realized|). ``--plot F`` draws the reliability diagram.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.validation import check_int
from simulator.cli.args import add_pool_arguments, check_common_args, cost_setting_from_args
from simulator.costs.arrays import dag_arrays
from simulator.costs.limits import Limits
from simulator.engine.live_episode import CALIBRATION_SEED_OFFSET
from simulator.engine.registry import EXECUTION_RULES, PUBLISHED
from simulator.mcpp.params import add_mcpp_arguments, mcpp_params_from_args, resolve_params
from simulator.methods import canonical_method, method_spec
from simulator.pools.pool import load_pool
from simulator.simulate import SimSpec, simulate_run

BINS = 10


def _dags(text: str | None, n: int) -> list[int]:
    if text is None:
        return list(range(n))
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        a, _, b = part.partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            raise ConfigError(f"--dags {text!r}: a comma list of DAG rows or ranges (0,2,5-7)")
        lo, hi = int(a), int(b or a)
        if lo > hi or hi >= n:
            raise ConfigError(f"--dags {text!r}: rows must be increasing ranges within 0..{n - 1}")
        out += list(range(lo, hi + 1))
    if len(set(out)) != len(out):
        raise ConfigError(f"--dags {text!r}: a DAG is listed twice")
    return out


def _ratios(values: Sequence[str], flag: str) -> list[float]:
    from simulator.base.settings import check_ratio

    return [float(check_ratio(v, flag, "flag")) for v in values]


def ece(estimate: np.ndarray, realized: np.ndarray) -> float:
    """Expected calibration error over tenths of the estimate: sum over bins of n_b / n x |mean est - mean real|."""
    b = np.minimum((estimate * BINS).astype(int), BINS - 1)
    total = 0.0
    for k in range(BINS):
        sel = b == k
        if sel.any():
            total += sel.sum() / len(estimate) * abs(estimate[sel].mean() - realized[sel].mean())
    return float(total)


def reliability(estimate: np.ndarray, realized: np.ndarray) -> list[dict]:
    b = np.minimum((estimate * BINS).astype(int), BINS - 1)
    rows = []
    for k in range(BINS):
        sel = b == k
        if sel.any():
            rows.append({"bin": f"{k / BINS:.1f}-{(k + 1) / BINS:.1f}", "cells": int(sel.sum()),
                         "estimate": float(estimate[sel].mean()), "realized": float(realized[sel].mean())})
    return rows


def _cell(pool, d: int, rb: float, rd: float, trials: int, method: str, seed: int, setting, params: dict,
          execution_rules: str) -> dict:
    """One cell: the first decision's raw score, the calibrated estimate and the realized on-time rate."""
    arr = dag_arrays(pool, d, setting)
    st = pool[d]
    where = f"DAG {d} ({st.problem_id}): "
    B, D = Limits.ratios(rb, rd).resolve(arr, where)
    spec = SimSpec(budget=B, deadline=D, trials=list(range(trials)), seed=seed, dag=int(st.index),
                   rules=execution_rules)
    real = simulate_run(arr, method, spec, params=params, model_names=st.model_ids)
    calib = simulate_run(arr, method, dataclasses.replace(spec, seed=seed + CALIBRATION_SEED_OFFSET), params=params,
                         model_names=st.model_ids)
    first = [g.get("mc_portfolio_best_score_first") for g in real.diagnostics]
    first = [x for x in first if x is not None]
    return {"dag": d, "problem_id": st.problem_id, "budget_ratio": rb, "deadline_ratio": rd,
            "raw": float(np.mean(first)) if first else float("nan"),
            "calibrated": float(calib.on_time(D).mean()), "realized": float(real.on_time(D).mean())}


_WORKER_POOL = None


def _worker_init(pool_path: str) -> None:
    global _WORKER_POOL
    _WORKER_POOL = load_pool(pool_path)


def _worker_cell(job: tuple) -> dict:
    return _cell(_WORKER_POOL, *job)


def calibrate(pool, dags, budget_ratios, deadline_ratios, trials: int, method: str, seed: int, setting,
              params: dict, execution_rules: str = PUBLISHED, *, workers: int = 1, pool_path: str | None = None,
              progress: bool = False) -> dict:
    """Every cell's raw, calibrated and realized rates, the reliability tables and both ECEs.

    ``workers`` > 1 runs the cells in that many processes (each loads the
    pool from ``pool_path`` once); every cell's draws are keyed by its DAG,
    trial and seed, so the report is the same for any number of workers.
    """
    jobs = [(d, rb, rd, trials, method, seed, setting, params, execution_rules)
            for d in dags for rb in budget_ratios for rd in deadline_ratios]
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), unit="cell", desc="calibrate", disable=not progress)
    if workers > 1 and len(jobs) > 1:
        if pool_path is None:
            raise ConfigError("calibrate with workers > 1 needs the pool's path")
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=mp.get_context("spawn"),
                                 initializer=_worker_init, initargs=(pool_path,)) as ex:
            cells = []
            for c in ex.map(_worker_cell, jobs):
                cells.append(c)
                bar.update()
    else:
        cells = []
        for job in jobs:
            cells.append(_cell(pool, *job))
            bar.update()
    bar.close()
    raw = np.array([c["raw"] for c in cells])
    cal = np.array([c["calibrated"] for c in cells])
    real = np.array([c["realized"] for c in cells])
    ok = np.isfinite(raw)
    return {"method": method, "trials": trials, "seed": seed, "execution_rules": execution_rules, "cells": cells,
            "reliability_raw": reliability(raw[ok], real[ok]), "reliability_calibrated": reliability(cal, real),
            "ece_raw": ece(raw[ok], real[ok]) if ok.any() else float("nan"), "ece_calibrated": ece(cal, real)}


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simulator.base.io_utils import atomic_write_bytes

    fig, ax = plt.subplots(figsize=(5, 5), layout="constrained")
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect")
    for key, label, color in (("reliability_raw", "MCPP's best score (raw)", "#d62728"),
                              ("reliability_calibrated", "calibrated (whole episodes)", "#1f77b4")):
        rows = report[key]
        ax.plot([r["estimate"] for r in rows], [r["realized"] for r in rows], marker="o", color=color,
                label=f"{label}: ECE {report['ece_' + key.split('_')[1]]:.3f}")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="estimate of the first decision", ylabel="realized on-time rate",
           title=f"Calibration of {report['method']} ({len(report['cells'])} cells, {report['trials']} trials)")
    ax.legend(loc="upper left", fontsize=8)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def calibrate_main(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m simulator calibrate",
                                 description="MCPP's first-decision estimates against the on-time rate realized.")
    add_pool_arguments(ap)
    ap.add_argument("--dags", default=None, help="DAG rows: a comma list or ranges (0,2,5-7); default: all")
    ap.add_argument("--budget-ratios", nargs="+", required=True, help="multiples of each DAG's nominal budget")
    ap.add_argument("--deadline-ratios", nargs="+", required=True, help="multiples of each DAG's nominal deadline")
    ap.add_argument("--trials", default="200", help="episodes per cell (each estimate and the realized rate)")
    ap.add_argument("--method", default="MCPP", help="MCPP or one of its variants (its first decision's score)")
    ap.add_argument("--execution-rules", default=PUBLISHED, choices=EXECUTION_RULES, help="execution-rule mode")
    ap.add_argument("--plot", type=cliargs.output_path(), default=None, help="write the reliability diagram here (PNG)")
    ap.add_argument("--json", action="store_true", help="print the whole report as JSON")
    ap.add_argument("--workers", default="1", help="processes running cells at once (the report is the same)")
    add_mcpp_arguments(ap)
    args = check_common_args(ap.parse_args(argv))
    method = canonical_method(args.method)
    if method_spec(method, "--method").settings_key != "mcpp":
        raise ConfigError(f"--method {args.method!r}: calibrate needs MCPP or a variant (its first decision's score)")
    params = mcpp_params_from_args(args)
    resolve_params(params)
    brs, drs = _ratios(args.budget_ratios, "--budget-ratios"), _ratios(args.deadline_ratios, "--deadline-ratios")
    workers = check_int(args.workers, "--workers", "flag", lo=1)
    trials = check_int(args.trials, "--trials", "flag", lo=1)
    pool = load_pool(args.pool)
    dags = _dags(args.dags, len(pool))
    setting = cost_setting_from_args(args)
    for d in dags:  # a DAG the method cannot run on is refused before the first cell
        st = pool[d]
        method_spec(method).refuse_dag(params, st, dag_arrays(pool, d, setting),
                                       f"DAG {d} (problem {st.problem_id!r}, {args.pool} line {st.line}): ")
    report = calibrate(pool, dags, brs, drs, trials, method, args.seed, setting,
                       params, args.execution_rules, workers=workers, pool_path=args.pool, progress=True)
    if args.plot:
        plot(report, args.plot)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"calibrate: {method} on {len(dags)} DAG(s) x {len(brs)} budget x {len(drs)} deadline ratios, "
          f"{report['trials']} episodes per estimate ({report['execution_rules']} rules)")
    print(f"{'dag':>4} {'budget':>7} {'deadline':>8} {'raw':>7} {'calibrated':>10} {'realized':>8}")
    for c in report["cells"]:
        print(f"{c['dag']:>4} {c['budget_ratio']:>7g} {c['deadline_ratio']:>8g} {c['raw']:>7.3f} "
              f"{c['calibrated']:>10.3f} {c['realized']:>8.3f}")
    for key in ("reliability_raw", "reliability_calibrated"):
        print(f"reliability ({key.split('_')[1]}): " + "; ".join(
            f"{r['bin']}: {r['cells']} cells, est {r['estimate']:.3f} vs {r['realized']:.3f}" for r in report[key]))
    print(f"ECE raw: {report['ece_raw']:.4f}  calibrated: {report['ece_calibrated']:.4f}")
    return 0

"""``analyze``: tables, paired comparisons, plots and a Markdown report from ``merged/`` alone.

Tables (CSV and Parquet, in ``<run>/analysis/``):

* ``summary``: per cell x method: n, on-time successes, rate with a Wilson
  95% interval, completion rate (ignoring the deadline), mean cost (and as a
  share of the budget), makespan quantiles (p50/p90/p99, episodes capped at
  the deadline), shares of each termination reason, planner time.
* ``paired``: each non-baseline method (the registry says which) minus each baseline, per cell, **paired** on (DAG, trial)
  — the same luck on the same attempt (common random numbers). Mean
  difference with a 95% interval at the trial level, and a DAG-clustered
  interval (more honest when generalising over DAGs), win/loss counts and an
  exact McNemar p-value.
* ``best_baseline``: per cell, the baseline with the highest on-time success
  (any label, suite included), and each non-baseline method's paired difference to it.

``main_table.tex``: the main table as a LaTeX booktabs ``tabular``.

Plots (PNG, with PDF and SVG beside each when ``PLOT_FORMATS`` asks, ``plots/``): success vs budget per
deadline; a budget x deadline heatmap per method; each non-baseline method minus the best baseline as a
heatmap. They are drawn in worker processes while the tables are written (``harness.plots.start_plots``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.base.errors import UserError
from simulator.base.io_utils import atomic_write_text
from simulator.base.scoring import paired_difference, wilson_interval
from simulator.engine.reasons import REASONS

from .latex import main_table_tex
from .merge import load_report
from .methods import compared_labels, is_baseline_label
from .shards import loads_record

COLUMNS = (
    "cell", "dag_idx", "exec_trial", "method", "on_time_success", "success", "total_cost", "makespan",
    "termination_reason", "budget", "deadline", "planner_wall_ms", "total_rollouts",
)  # fmt: skip


def load_records(merged_dir: str, report: dict) -> pd.DataFrame:
    """The analysis columns of every merged record (one pass over each cell file)."""
    frames = []
    for c in report["cells"]:
        path = os.path.join(merged_dir, "cells", c["cell"], "records.jsonl")
        cols: dict[str, list] = {k: [] for k in COLUMNS}
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                r = loads_record(line)
                for k in COLUMNS:
                    cols[k].append(r.get(k))
        df = pd.DataFrame(cols)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    for k in ("cell", "method", "termination_reason"):
        df[k] = df[k].astype("category")
    df["on_time_success"] = df["on_time_success"].astype(bool)
    df["success"] = df["success"].astype(bool)
    for k in ("total_cost", "makespan", "budget", "deadline", "planner_wall_ms"):
        df[k] = pd.to_numeric(df[k], errors="coerce").astype(float)
    return df


@dataclass
class AnalysisResult:
    summary: pd.DataFrame
    paired: pd.DataFrame
    best: pd.DataFrame
    main_table: pd.DataFrame
    main_table_text: str
    report_path: str
    plots: list[str] = field(default_factory=list)
    #: wall seconds of the steps (not a result): loading, tables (the figures drawing meanwhile), waiting for the
    #: figures, the report
    timings: dict[str, float] = field(default_factory=dict)


def summarize(df: pd.DataFrame, cells: list[dict], labels: list[str]) -> pd.DataFrame:
    rows = []
    cell_info = {c["cell"]: c for c in cells}
    for (cell, method), g in df.groupby(["cell", "method"], observed=True, sort=False):
        n = len(g)
        k = int(g["on_time_success"].sum())
        lo, hi = wilson_interval(k, n)
        mk = g["makespan"].to_numpy()
        ratio = (g["total_cost"] / g["budget"]).replace([np.inf, -np.inf], np.nan)
        row = {
            **{key: cell_info[cell][key] for key in ("cell", "budget_group", "budget_input_type",
                                                     "budget_axis_value", "deadline_input_type",
                                                     "deadline_axis_value")},
            "method": method,
            "is_baseline": is_baseline_label(method),
            "n": n,
            "on_time_successes": k,
            "on_time_rate": k / n,
            "ci_low": lo,
            "ci_high": hi,
            "completion_rate": float(g["success"].mean()),
            "mean_cost": float(g["total_cost"].mean()),
            "mean_cost_share_of_budget": float(ratio.mean()),
            "mean_budget": float(g["budget"].mean()),
            "mean_deadline": float(g["deadline"].mean()),
            "makespan_p50": float(np.quantile(mk, 0.5)),
            "makespan_p90": float(np.quantile(mk, 0.9)),
            "makespan_p99": float(np.quantile(mk, 0.99)),
            "mean_makespan_on_time": float(g.loc[g["on_time_success"], "makespan"].mean()) if k else math.nan,
            "mean_rollouts": float(g["total_rollouts"].mean()),
            "mean_planner_ms": float(g["planner_wall_ms"].mean()),
        }  # fmt: skip
        counts = g["termination_reason"].value_counts()
        for r in REASONS:
            row[f"share_{r}"] = float(counts.get(r, 0)) / n
        rows.append(row)
    out = pd.DataFrame(rows)
    order_c = {c["cell"]: i for i, c in enumerate(cells)}
    order_m = {m: i for i, m in enumerate(labels)}
    out = out.sort_values(by=["cell", "method"], key=lambda s: s.map(order_c if s.name == "cell" else order_m))
    return out.reset_index(drop=True)


def paired_table(df: pd.DataFrame, cells: list[dict], labels: list[str]) -> pd.DataFrame:
    """Each non-baseline method minus each baseline, paired on (DAG, trial), per cell."""
    methods = compared_labels(labels)
    if not methods:
        return pd.DataFrame()
    rows = []
    for c in cells:
        sub = df[df["cell"] == c["cell"]]
        wide = sub.pivot_table(index=["dag_idx", "exec_trial"], columns="method", values="on_time_success",
                               aggfunc="first", observed=True)  # fmt: skip
        dags = wide.index.get_level_values(0).to_numpy()
        for method in methods:
            if method not in wide:
                continue
            for base in labels:
                if not is_baseline_label(base) or base not in wide:
                    continue
                d = wide[method].astype(float).to_numpy() - wide[base].astype(float).to_numpy()
                rows.append({"cell": c["cell"], "method": method, "baseline": base, **paired_difference(d, dags)})
    return pd.DataFrame(rows)


def best_baseline_table(summary: pd.DataFrame, paired: pd.DataFrame, cells: list[dict]) -> pd.DataFrame:
    """Per cell, the best baseline (first maximum in method order) and each non-baseline method against it.

    One row per (cell, non-baseline method); one row per cell (``method`` empty) when every method is a baseline.
    """
    rows = []
    for c in cells:
        s = summary[(summary["cell"] == c["cell"])]
        base = s[s["is_baseline"]]
        if base.empty:
            continue
        b = base.loc[base["on_time_rate"].idxmax()]  # first maximum in method order
        row = {"cell": c["cell"], "best_baseline": b["method"], "best_baseline_rate": b["on_time_rate"],
               "best_baseline_ci_low": b["ci_low"], "best_baseline_ci_high": b["ci_high"]}  # fmt: skip
        others = s[~s["is_baseline"]]
        if others.empty:
            rows.append({**row, "method": None})
        for _, m in others.iterrows():
            r = {**row, "method": m["method"], "method_rate": float(m["on_time_rate"]),
                 "method_ci_low": float(m["ci_low"]), "method_ci_high": float(m["ci_high"])}  # fmt: skip
            if not paired.empty:
                p = paired[(paired["cell"] == c["cell"]) & (paired["method"] == m["method"])
                           & (paired["baseline"] == b["method"])]  # fmt: skip
                if not p.empty:
                    p = p.iloc[0]
                    r.update(diff=p["diff"], diff_ci_low=p["ci_low"], diff_ci_high=p["ci_high"],
                             diff_ci_low_dag=p["ci_low_dag"], diff_ci_high_dag=p["ci_high_dag"])  # fmt: skip
            rows.append(r)
    return pd.DataFrame(rows)


def main_table(summary: pd.DataFrame, cells: list[dict], labels: list[str]) -> pd.DataFrame:
    """Methods x cells, on-time success in percent (the table printed at the end of ``local``)."""
    t = summary.pivot_table(index="method", columns="cell", values="on_time_rate", aggfunc="first", observed=True)
    t = t.reindex(index=[m for m in labels if m in t.index], columns=[c["cell"] for c in cells])
    return (100.0 * t).round(1)


def table_text(t: pd.DataFrame, title: str) -> str:
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.max_rows", None):
        return f"{title}\n{t.to_string(na_rep='-')}"


def _write_table(df: pd.DataFrame, out_dir: str, name: str) -> None:
    import io

    buf = io.StringIO()
    df.to_csv(buf, index=False)
    atomic_write_text(os.path.join(out_dir, f"{name}.csv"), buf.getvalue())
    tmp = os.path.join(out_dir, f".{name}.parquet.tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, os.path.join(out_dir, f"{name}.parquet"))


def analyze_run(merged_dir: str, out_dir: str, plots: bool = True, formats=("png",),
                plot_workers: int | None = None) -> AnalysisResult:  # fmt: skip
    """Everything from the merged directory alone; writes tables, plots (``formats``) and report.md."""
    import time

    from .plots import start_plots
    from .report import shown_methods, write_report

    t0 = time.perf_counter()
    from .prefetch import join_prefetch

    join_prefetch()  # nothing half imported when the figures' workers fork
    report = load_report(merged_dir)
    if not report.get("complete"):
        raise UserError(
            f"{merged_dir}: the merge is incomplete ({len(report.get('missing', []))} gaps); "
            "finish the run and merge again before analysing"
        )
    with open(os.path.join(merged_dir, "run.json"), encoding="utf-8") as fh:
        run = json.load(fh)
    cells = report["cells"]
    labels = report["method_labels"]
    df = load_records(merged_dir, report)
    t_load = time.perf_counter()
    summary = summarize(df, cells, labels)
    os.makedirs(out_dir, exist_ok=True)
    # the figures need the best baseline's method and rate per cell, not the paired differences: they start
    # drawing now, while the paired table (and its statistics library's import) and the tables are made
    drawing = start_plots(summary, best_baseline_table(summary, pd.DataFrame(), cells), cells, labels,
                          os.path.join(out_dir, "plots"), run, formats, plot_workers) if plots else None  # fmt: skip
    paired = paired_table(df, cells, labels)
    best = best_baseline_table(summary, paired, cells)
    mt = main_table(summary, cells, labels)
    _write_table(summary, out_dir, "summary")
    _write_table(best, out_dir, "best_baseline")
    if not paired.empty:
        _write_table(paired, out_dir, "paired")
    _write_table(mt.reset_index(), out_dir, "main_table")
    # booktabs, for a paper (methods by the names a reader knows: MCPP)
    atomic_write_text(os.path.join(out_dir, "main_table.tex"), main_table_tex(shown_methods(mt)))
    t_tables = time.perf_counter()
    pngs = drawing.wait() if drawing is not None else []
    t_plots = time.perf_counter()
    text = table_text(shown_methods(mt), "On-time success (%) per method (rows) and cell (columns):")
    rp = write_report(out_dir, run, report, summary, paired, best, mt, pngs)
    t_end = time.perf_counter()
    timings = {"load_s": t_load - t0, "tables_s": t_tables - t_load, "plots_wait_s": t_plots - t_tables,
               "report_s": t_end - t_plots}  # fmt: skip
    return AnalysisResult(summary, paired, best, mt, text, rp, pngs, {k: round(v, 3) for k, v in timings.items()})

"""Outputs of ``claims``: ``claims.md``, CSV and LaTeX tables, the regime map (PNG, PDF, SVG).

Every file is written atomically (a temporary file renamed into place), and
``claims.md`` last: a reader never sees a half-written file, and a failure on
the way leaves the previous report as it was.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from simulator.base.io_utils import atomic_write_text

from .claims import CLAIM_TITLES, DEFAULT_ROBUST_MARGIN, LEVEL, ClaimsResult, evaluate, load_run
from .latex import booktabs, escape

MARK = {"holds": "✓", "fails": "✗", "inconclusive": "·"}


def _pp(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:+.1f}"


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _entry(r) -> str:
    return f"{_pp(r['diff'])} [{_pp(r['ci_low'])}, {_pp(r['ci_high'])}] {r['verdict']}"


def _md_table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    return out


def _csv(df: pd.DataFrame, path: str) -> None:
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    atomic_write_text(path, buf.getvalue())


def _cell_name(r) -> str:
    def one(kind, v):
        return f"{v:g}x" if kind == "ratio" else f"{v:g}"

    return f"B {one(r['budget_input_type'], r['budget_axis_value'])}, D {one(r['deadline_input_type'], r['deadline_axis_value'])}"


def regime_map(res: ClaimsResult, out_dir: str, formats=("png",)) -> list[str]:
    """Per mode: budget x deadline heatmap of MCPP minus the best baseline (claim 1), verdict marks."""
    from .plots import _mpl, save_figure

    sub = res.cells[(res.cells["claim"] == 1) & (res.cells["comparison"] == "MCPP - best baseline")]
    if sub.empty:
        return []
    plt = _mpl()
    modes = list(dict.fromkeys(sub["mode"]))
    b = sorted(set(sub["budget_axis_value"]))
    d = sorted(set(sub["deadline_axis_value"]))
    lim = max(0.05, float(np.nanmax(np.abs(sub["diff"].to_numpy(dtype=float)))))
    width = max(5.5, 1.8 + (0.9 * max(len(d), 2) + 0.8) * len(modes))
    fig, axes = plt.subplots(1, len(modes), figsize=(width, 2.0 + 0.55 * max(len(b), 2)), squeeze=False,
                             layout="constrained")  # fmt: skip
    im = None
    for ax, mode in zip(axes[0], modes):
        m = sub[sub["mode"] == mode]
        mat = np.full((len(b), len(d)), np.nan)
        marks = {}
        for _, r in m.iterrows():
            i, j = b.index(r["budget_axis_value"]), d.index(r["deadline_axis_value"])
            mat[i, j] = r["diff"]
            marks[(i, j)] = MARK[r["verdict"]]
        im = ax.imshow(mat, origin="lower", aspect="auto", cmap="RdBu", vmin=-lim, vmax=lim)
        for (i, j), mk in marks.items():
            if np.isfinite(mat[i, j]):
                dark = abs(mat[i, j]) > 0.6 * lim
                ax.text(j, i, f"{100 * mat[i, j]:+.0f} {mk}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")  # fmt: skip
        ax.set_xticks(range(len(d)), [f"{x:g}" for x in d])
        ax.set_yticks(range(len(b)), [f"{x:g}" for x in b])
        ax.set_xlabel("deadline" + (" (x nominal)" if m["deadline_input_type"].iloc[0] == "ratio" else " (s)"))
        ax.set_ylabel("budget" + (" (x nominal)" if m["budget_input_type"].iloc[0] == "ratio" else ""))
        ax.set_title(f"{mode}", fontsize=9)
    fig.suptitle("MCPP minus best baseline (pp)\n✓ holds, ✗ fails, · inconclusive (95%, DAG-clustered)", fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label="difference in on-time success")
    pdir = os.path.join(out_dir, "plots")
    os.makedirs(pdir, exist_ok=True)
    path = save_figure(fig, os.path.join(pdir, "regime_map.png"), formats=formats)
    plt.close(fig)
    return [path]


def summary_tex(summary: pd.DataFrame) -> str:
    rows = [[int(r["claim"]), escape(r["comparison"]), escape(r["mode"]), escape(r["noise"]), int(r["holds"]),
             int(r["fails"]), int(r["inconclusive"]), f"{100 * r['diff_min']:+.1f}", f"{100 * r['diff_median']:+.1f}",
             f"{100 * r['diff_max']:+.1f}", escape(r["overall"])] for _, r in summary.iterrows()]  # fmt: skip
    header = ["claim", "comparison", "mode", "noise", "holds", "fails", "inconcl.", "min (pp)", "median (pp)",
              "max (pp)", "verdict"]  # fmt: skip
    return booktabs(header, rows, align="rllrrrrrrrl", raw_columns=range(len(header)), fmt="{}")


def cells_tex(cells: pd.DataFrame) -> str:
    rows = []
    for _, r in cells.iterrows():
        rows.append([int(r["claim"]), escape(r["comparison"]), escape(r["mode"]), escape(r["noise"]),
                     escape(_cell_name(r)), escape(r["against"] or "--"), f"{100 * r['diff']:+.1f}"
                     if math.isfinite(r["diff"]) else "--", f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}]",
                     f"{100 * r['margin']:.1f}", escape(r["verdict"])])  # fmt: skip
    header = ["claim", "comparison", "mode", "noise", "cell", "against", "diff (pp)", "95% CI", "margin (pp)",
              "verdict"]  # fmt: skip
    return booktabs(header, rows, align="rlllllrrrl", raw_columns=range(len(header)), fmt="{}")


def _runs_section(res: ClaimsResult) -> list[str]:
    rows = [[f"`{r.name}`", r.mode, r.noise_label, "yes" if r.has_mcpp else "no", len(r.labels), f"`{r.path}`"]
            for r in res.runs]  # fmt: skip
    s = res.runs[0].settings
    return [
        "## Runs", "",
        f"{len(s.get('dags', []))} DAGs (pool sha256 `{str(s.get('pool_sha256'))[:16]}…`), "
        f"{s.get('n_exec_trials')} trials per (DAG, cell, method), {len(res.runs[0].cells)} cells, seed "
        f"{s.get('seed')}, cost mode `{s.get('cost_mode')}`.", "",
        *_md_table(["run", "execution rules", "planning statistics", "MCPP", "methods", "directory"], rows),
    ]  # fmt: skip


def _claim_tables(res: ClaimsResult, claim: int) -> list[str]:
    c = res.cells[res.cells["claim"] == claim]
    out: list[str] = []
    for (mode, noise), g in c.groupby(["mode", "noise"], sort=False):
        comps = list(dict.fromkeys(g["comparison"]))
        out += ["", f"### Mode `{mode}`, planning statistics: {noise}", ""]
        if claim == 3:
            rows = []
            for _, r in g.iterrows():
                rows.append([_cell_name(r), _pct(r["mcpp_rate"]), _pct(r["mcpp_estimate"]),
                             f"{r['against'] or '-'} ({_pct(r['against_rate'])})",
                             f"{int(r['members_present'])}/{int(r['members_total'])}", _entry(r), f"{100 * r['epsilon']:.1f}"
                             if math.isfinite(r["epsilon"]) else "-", r["strict_verdict"]])  # fmt: skip
            out += _md_table(["cell", "MCPP %", "MCPP's estimate %", "best member (%)", "members run",
                              "MCPP − best member, pp [95% CI] verdict vs −ε", "ε (pp)", "strict (vs 0)"], rows)
            src = sorted(set(g["members_source"]))
            out += ["", "Members: " + "; ".join(src) + "."]
            continue
        rows = []
        for _, gc in g.groupby("cell", sort=False):
            r0 = gc.iloc[0]
            row = [_cell_name(r0), _pct(r0["mcpp_rate"])]
            for comp in comps:
                hit = gc[gc["comparison"] == comp]
                if hit.empty:
                    row.append("-")
                    continue
                r = hit.iloc[0]
                against = f" vs `{r['against']}`" if r["family"] > 1 else ""
                row.append(_entry(r) + against)
            rows.append(row)
        out += _md_table(["cell", "MCPP %", *[f"{x}, pp [95% CI]" for x in comps]], rows)
    return out


def render(res: ClaimsResult, robust_margin: float, figures: list[str], out_dir: str) -> str:
    s = res.summary
    lines = ["# Claims report", "",
             "Generated by `run_experiment.sh claims` from the `merged/` directories of the runs below. Every "
             "number is a paired difference in on-time success (MCPP minus the other side, same DAG, same trial), "
             "in percentage points, with its 95% interval clustered by DAG.", ""]  # fmt: skip
    lines += ["## Verdicts", ""]
    if s.empty:
        lines.append("No comparison could be made (see the notes).")
    for claim in (1, 2, 3):
        sc = s[s["claim"] == claim] if not s.empty else s
        if sc.empty:
            continue
        words = list(sc["overall"])
        total = {k: int(sc[k].sum()) for k in ("holds", "fails", "inconclusive")}
        word = "fails" if "fails" in words else ("holds" if all(w == "holds" for w in words) else
                                                  ("holds in part" if any(w.startswith("holds") for w in words)
                                                   else "inconclusive"))  # fmt: skip
        lines.append(f"- **Claim {claim}** ({CLAIM_TITLES[claim]}): **{word}** — over {sum(total.values())} "
                     f"(comparison, cell) pairs: {total['holds']} hold, {total['fails']} fail, "
                     f"{total['inconclusive']} inconclusive.")  # fmt: skip
        for _, r in sc.iterrows():
            lines.append(f"  - {r['comparison']} [{r['mode']}, {r['noise']}]: {r['sentence']}; difference "
                         f"{_pp(r['diff_min'])} to {_pp(r['diff_max'])} pp (median {_pp(r['diff_median'])}).")  # fmt: skip
    lines += ["", *_runs_section(res)]
    for n in res.notes:
        lines += ["", f"Note: {n}."]
    lines += ["", "## How the verdicts are made", "",
              f"- Interval: cluster-robust (CR1) standard error of the mean paired difference, clustered by DAG, "
              f"with the Student-t quantile on (number of DAGs − 1) degrees of freedom, {LEVEL:.0%} two-sided "
              "(`simulator.base.scoring.clustered_difference`). The DAG is the unit of replication: with few DAGs the "
              "interval is wide however many trials each has.",
              "- Best of several (best baseline, best further baseline, best portfolio member): the best is picked "
              "on the data, so each of the J differences gets a Bonferroni-simultaneous interval (level "
              "1 − 0.05/J); the difference to the best is the smallest difference and its interval "
              "[min lower, min upper] covers the difference to the true best at 95% whichever method the data "
              "pick. The `family` column of `claims_cells.csv` gives J.",
              "- Verdict with margin m: **holds** if the lower bound > −m, **fails** if the upper bound < −m, "
              "**inconclusive** otherwise. m = 0 for \"MCPP improves on X\" (claim 1, noisy MCPP vs baselines); "
              f"m = {100 * robust_margin:g} pp for \"noise costs MCPP at most m\" (claim 2, noisy minus exact; "
              "setting `CLAIMS_MARGIN`); m = MCPP's Hoeffding epsilon for claim 3 (the mean over the cell's "
              "episodes of `mc_portfolio_epsilon_max`, the largest epsilon of each episode, so the margin is "
              "generous); the strict column of claim 3 uses m = 0.",
              "- A cell where every pair is tied (e.g. all methods fail: a hopeless cell) has the interval [0, 0] "
              "and is inconclusive.",
              "- Runs are paired across directories on (cell, DAG, trial): the runs must share the pool, DAGs, "
              "trials, grid, cost setting and seed (checked). Baselines of a mode may come from any run of that "
              "mode (planning noise does not change them).",
              "- Under `published` rules the baselines launch per attempt without a deadline and MCPP atomically "
              "with the deadline, so MCPP-vs-baseline mixes the value of planning with the launch rules; the "
              "`atomic` and `per_attempt` modes put every method under one rule."]  # fmt: skip
    present = set(res.cells["claim"]) if not res.cells.empty else set()
    for claim in (1, 2, 3):
        if claim not in present:
            continue
        lines += ["", f"## Claim {claim}: {CLAIM_TITLES[claim]}"]
        lines += _claim_tables(res, claim)
    if figures:
        lines += ["", "## Regime map", "", "MCPP minus the best baseline per (budget, deadline) cell and mode "
                  "(claim 1); where planning pays is blue.", ""]  # fmt: skip
        lines += [f"![regime map]({os.path.relpath(p, out_dir)})" for p in figures]
    lines += ["", "## Files", "",
              "`claims_cells.csv` (one row per comparison and cell), `claims_summary.csv`, `claims_table.tex` and "
              "`claims_cells.tex` (LaTeX booktabs), `plots/regime_map.{png,pdf,svg}`.", ""]  # fmt: skip
    return "\n".join(lines)


def write_claims(res: ClaimsResult, out_dir: str, robust_margin: float, plots: bool = True,
                 formats=("png",)) -> str:  # fmt: skip
    """Write every output (``claims.md`` last); returns its path."""
    os.makedirs(out_dir, exist_ok=True)
    figures = regime_map(res, out_dir, formats) if plots else []
    _csv(res.cells, os.path.join(out_dir, "claims_cells.csv"))
    _csv(res.summary, os.path.join(out_dir, "claims_summary.csv"))
    if not res.summary.empty:
        atomic_write_text(os.path.join(out_dir, "claims_table.tex"), summary_tex(res.summary))
        atomic_write_text(os.path.join(out_dir, "claims_cells.tex"), cells_tex(res.cells))
    path = os.path.join(out_dir, "claims.md")
    atomic_write_text(path, render(res, robust_margin, figures, out_dir))
    return path


def claims_from_dirs(paths: Sequence[str], out_dir: str | None = None,
                     robust_margin: float = DEFAULT_ROBUST_MARGIN, plots: bool = True,
                     formats=("png",)) -> tuple[ClaimsResult, str]:  # fmt: skip
    """Load the runs, evaluate the claims and write the report; returns the result and the path of ``claims.md``
    (in ``out_dir``, else ``analysis/`` of the first run)."""
    from .rundir import RunDir

    res = evaluate([load_run(p) for p in paths], robust_margin)
    out = out_dir or RunDir(paths[0]).analysis
    return res, write_claims(res, out, robust_margin, plots=plots, formats=formats)

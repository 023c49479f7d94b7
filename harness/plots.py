"""PNG plots of the analysis: success vs budget per deadline, budget x deadline heatmaps."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from .grid import format_value
from .methods import compared_labels


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: vector formats written beside every PNG (paper-ready figures); no timestamps, so reruns give identical files
VECTOR_FORMATS = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def save_figure(fig, png_path: str, dpi: int = 110) -> str:
    """Write ``fig`` as PNG plus PDF and SVG beside it (same stem), each atomically; returns the PNG path."""
    stem = os.path.splitext(png_path)[0]
    for ext, meta in (("png", None), *VECTOR_FORMATS.items()):
        path = f"{stem}.{ext}"
        tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp")
        fig.savefig(tmp, dpi=dpi, format=ext, metadata=meta)
        os.replace(tmp, path)
    return png_path


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _axis_name(kind: str, what: str, run: dict) -> str:
    if kind == "ratio":
        return f"{what} (x nominal {what})"
    unit = {"token_cost_mean": "tokens", "output_money_cost_mean": "$", "cost_mean": "cost", "lat_mean": "s"}
    return f"{what} ({unit.get(run.get('settings', {}).get('cost_mode'), '')})" if what == "budget" else "deadline (s)"


def success_vs_budget(summary: pd.DataFrame, labels: list[str], out_dir: str, run: dict) -> str:
    plt = _mpl()
    deadlines = list(dict.fromkeys(zip(summary["deadline_input_type"], summary["deadline_axis_value"])))
    n = len(deadlines)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.0 * rows), squeeze=False)
    cmap = plt.get_cmap("tab20")
    bold = {m: ("black", "tab:red", "tab:purple", "tab:brown")[k % 4] for k, m in enumerate(compared_labels(labels))}
    for i, (dk, dv) in enumerate(deadlines):
        ax = axes[i // cols][i % cols]
        sub = summary[(summary["deadline_input_type"] == dk) & (summary["deadline_axis_value"] == dv)]
        for j, m in enumerate(labels):
            s = sub[sub["method"] == m].sort_values("budget_axis_value")
            if s.empty:
                continue
            x = s["budget_axis_value"].to_numpy(dtype=float)
            style = {"lw": 2.6, "color": bold[m], "marker": "o", "zorder": 5} if m in bold else {
                "lw": 1.2, "color": cmap(j % 20), "marker": ".", "alpha": 0.85}  # fmt: skip
            ax.plot(x, s["on_time_rate"], label=m, **style)
            ax.fill_between(x, s["ci_low"], s["ci_high"], color=style["color"], alpha=0.12, lw=0)
        budgets = sub["budget_axis_value"].to_numpy(dtype=float)
        if len(budgets) and budgets.min() > 0 and budgets.max() / budgets.min() > 5:
            ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        dname = f"{format_value(dv)} x nominal" if dk == "ratio" else f"{format_value(dv)} s"
        ax.set_title(f"deadline {dname}")
        ax.set_xlabel(_axis_name(sub["budget_input_type"].iloc[0] if len(sub) else "ratio", "budget", run))
        ax.set_ylabel("on-time success (95% CI)")
        ax.grid(alpha=0.3)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="center right", fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    path = os.path.join(out_dir, "success_vs_budget.png")
    save_figure(fig, path)
    plt.close(fig)
    return path


def _matrix(summary: pd.DataFrame, method: str, value: str = "on_time_rate"):
    s = summary[summary["method"] == method]
    b = sorted(set(summary["budget_axis_value"]))
    d = sorted(set(summary["deadline_axis_value"]))
    mat = np.full((len(b), len(d)), np.nan)
    for _, r in s.iterrows():
        mat[b.index(r["budget_axis_value"]), d.index(r["deadline_axis_value"])] = r[value]
    return b, d, mat


def _heatmap(mat, b, d, title, path, run, summary, cmap="viridis", vmin=0.0, vmax=1.0, fmt="{:.0%}") -> str:
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * max(len(d), 2), 1.2 + 0.55 * max(len(b), 2)))
    im = ax.imshow(mat, origin="lower", aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(len(d)), [format_value(x) for x in d])
    ax.set_yticks(range(len(b)), [format_value(x) for x in b])
    ax.set_xlabel(_axis_name(summary["deadline_input_type"].iloc[0], "deadline", run))
    ax.set_ylabel(_axis_name(summary["budget_input_type"].iloc[0], "budget", run))
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if not np.isnan(mat[i, j]):
                ax.text(j, i, fmt.format(mat[i, j]), ha="center", va="center", fontsize=7, color="white"
                        if cmap == "viridis" and mat[i, j] < 0.6 else "black")  # fmt: skip
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def make_plots(summary, best, cells, labels, out_dir: str, run: dict) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = [success_vs_budget(summary, labels, out_dir, run)]
    hdir = os.path.join(out_dir, "heatmaps")
    os.makedirs(hdir, exist_ok=True)
    for m in labels:
        b, d, mat = _matrix(summary, m)
        paths.append(_heatmap(mat, b, d, f"{m}: on-time success", os.path.join(hdir, f"{_safe(m)}.png"), run, summary))
    for m in compared_labels(labels):  # each non-baseline method minus the cell's best baseline
        if best.empty or "method" not in best or not (best["method"] == m).any():
            continue
        rows = summary[summary["method"] == m].merge(best.loc[best["method"] == m, ["cell", "best_baseline_rate"]],
                                                     on="cell")  # fmt: skip
        rows = rows.assign(delta=rows["on_time_rate"] - rows["best_baseline_rate"])
        b, d, mat = _matrix(rows, m, "delta")
        lim = max(0.05, float(np.nanmax(np.abs(mat))) if np.isfinite(mat).any() else 0.05)
        paths.append(_heatmap(mat, b, d, f"{m} minus best baseline (on-time success)",
                              os.path.join(out_dir, f"{_safe(m)}_minus_best_baseline.png"), run, summary,
                              cmap="RdBu", vmin=-lim, vmax=lim, fmt="{:+.0%}"))  # fmt: skip
    return paths

"""Plots of the analysis (PNG; PDF and SVG alike when asked): success vs budget per deadline, budget x deadline heatmaps.

MCPP (and any other non-baseline method) is highlighted; the baselines are
grouped by colour family; the legend sits outside the panels and titles wrap
to the figure, whatever the grid's shape. Figures use matplotlib's
constrained layout, so everything is inside the figure and the three formats
look the same.

What a figure costs: every format is a whole new drawing (layout, text,
rasterising or writing vectors), so PDF and SVG are written only when asked
(``PLOT_FORMATS``, which ``paper`` sets to ``png,pdf,svg``). The figures are
independent, so :func:`start_plots` draws them in forked worker processes
(matplotlib and the method styles set up once, before the fork) while the
caller writes its tables; :meth:`PlotJobs.wait` collects them. The files are
the same as drawn one by one in one process.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pandas as pd

from simulator.base.errors import ConfigError
from simulator.methods import method_label, method_spec

from .grid import format_value
from .methods import SUITE_SEP, compared_labels


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: vector formats that may be written beside a PNG (paper-ready figures); no timestamps, so reruns give identical files
VECTOR_FORMATS = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}
#: what a figure is saved as unless more is asked for (``PLOT_FORMATS``)
DEFAULT_FORMATS = ("png",)
ALL_FORMATS = ("png", "pdf", "svg")


def save_figure(fig, png_path: str, dpi: int = 110, formats=DEFAULT_FORMATS) -> str:
    """Write ``fig`` as PNG, plus each vector format of ``formats`` beside it (same stem), each atomically.

    Returns the PNG path (the PNG is always written: the report shows it).
    """
    stem = os.path.splitext(png_path)[0]
    for ext in dict.fromkeys(("png", *formats)):
        meta = VECTOR_FORMATS.get(ext)
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


#: colour families of the baselines (matplotlib colormaps): one hue per family, one shade per member
FAMILY_COLORMAPS = {"sequential": "Blues", "static": "Greens", "further_loader": "Purples",
                    "further_deadline": "Oranges"}  # fmt: skip
#: colours of the highlighted (non-baseline) methods, MCPP first: none is in a baseline family's hue
HIGHLIGHT_COLORS = ("#d62728", "#000000", "#e377c2", "#8c564b")
_FAMILY_TITLES = {"sequential": "Sequential-k", "static": "static dispatch-once", "further_loader": "LOADER",
                  "further_deadline": "Chernoff deadline", "": "other baselines"}  # fmt: skip
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">")


def display_label(label: str) -> str:
    """The name a plot shows for a result label: ``MCPP`` for ``mc_portfolio_rollout`` (variants and suite kept)."""
    method, sep, model = label.partition(SUITE_SEP)
    return method_label(method) + sep + model


def _family(label: str) -> str:
    try:
        return method_spec(label.split(SUITE_SEP, 1)[0]).family
    except ConfigError:
        return ""


def method_styles(labels: list[str]) -> dict[str, dict]:
    """Line style of each label: highlighted methods in strong colours with bands, baselines by colour family.

    A family (Sequential-k, static, ...) is one hue with a shade and marker per
    member, so 13 methods read as MCPP against two groups rather than 13
    colours; a suite label (``method@model``) is its method's colour, dashed.
    """
    plt = _mpl()
    highlight = compared_labels(labels)
    styles: dict[str, dict] = {}
    for k, m in enumerate(highlight):
        styles[m] = {"color": HIGHLIGHT_COLORS[k % len(HIGHLIGHT_COLORS)], "lw": 2.6, "marker": "o", "ms": 5,
                     "zorder": 10 - k, "band": True, "group": "highlight"}  # fmt: skip
    families: dict[str, list[str]] = {}
    for m in labels:
        if m not in styles:
            families.setdefault(_family(m), []).append(m.split(SUITE_SEP, 1)[0])
    for fam, members in families.items():
        members = list(dict.fromkeys(members))
        cmap = plt.get_cmap(FAMILY_COLORMAPS.get(fam, "Greys"))
        shades = np.linspace(0.45, 0.95, len(members)) if len(members) > 1 else np.array([0.7])
        for m in labels:
            if m in styles or _family(m) != fam:
                continue
            j = members.index(m.split(SUITE_SEP, 1)[0])
            styles[m] = {"color": cmap(float(shades[j])), "lw": 1.3, "marker": _MARKERS[j % len(_MARKERS)],
                         "ms": 4, "zorder": 3, "band": False, "group": fam,
                         "ls": "--" if SUITE_SEP in m else "-"}  # fmt: skip
    return styles


def _legend_entries(labels: list[str], styles: dict[str, dict]):
    """(handles, names) grouped: the highlighted methods, then each baseline family under a heading."""
    from matplotlib.lines import Line2D

    handles, names = [], []
    groups = list(dict.fromkeys(styles[m]["group"] for m in labels if m in styles))
    groups.sort(key=lambda g: g != "highlight")  # MCPP first, then the families in method order
    for g in groups:
        members = [m for m in labels if m in styles and styles[m]["group"] == g]
        if g != "highlight":
            handles.append(Line2D([], [], linestyle="none"))
            names.append(_FAMILY_TITLES.get(g, g.replace("_", " ")) + ":")
        for m in members:
            st = styles[m]
            handles.append(Line2D([], [], color=st["color"], lw=st["lw"], marker=st["marker"], ms=st["ms"],
                                  ls=st.get("ls", "-")))  # fmt: skip
            names.append(display_label(m))
    return handles, names


def wrap_title(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` (about 0.55 em a character)."""
    import textwrap

    per_line = max(12, int(width_in * 72.0 / (0.55 * fontsize)))
    return "\n".join(textwrap.wrap(text, per_line, break_on_hyphens=False)) or text


def success_vs_budget_figure(summary: pd.DataFrame, labels: list[str], run: dict, styles: dict | None = None):
    """The figure of ``success_vs_budget.png``: one panel per deadline, the legend outside the panels."""
    plt = _mpl()
    deadlines = list(dict.fromkeys(zip(summary["deadline_input_type"], summary["deadline_axis_value"])))
    n = max(len(deadlines), 1)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    styles = method_styles(labels) if styles is None else styles
    handles, names = _legend_entries(labels, styles)
    height = 3.5 * rows + 0.7
    per_col = max(1, int((height - 0.4) / 0.19))  # legend lines a column holds at this height
    ncol = max(1, math.ceil(len(names) / per_col))
    legend_w = ncol * (0.75 + 0.062 * max((len(x) for x in names), default=0))  # inches at 7.5 pt
    plot_w = 4.3 * cols
    fig = plt.figure(figsize=(plot_w + legend_w, height), layout="constrained")
    # two side-by-side subfigures: the panels with their title, and the legend outside them
    panel_fig, legend_fig = fig.subfigures(1, 2, width_ratios=(plot_w, legend_w), wspace=0.0)
    axes = panel_fig.subplots(rows, cols, squeeze=False)
    highlight = [display_label(m) for m in compared_labels(labels)]
    for i, (dk, dv) in enumerate(deadlines):
        ax = axes[i // cols][i % cols]
        sub = summary[(summary["deadline_input_type"] == dk) & (summary["deadline_axis_value"] == dv)]
        for m in labels:
            s = sub[sub["method"] == m].sort_values("budget_axis_value")
            if s.empty or m not in styles:
                continue
            st = styles[m]
            x = s["budget_axis_value"].to_numpy(dtype=float)
            ax.plot(x, s["on_time_rate"], color=st["color"], lw=st["lw"], marker=st["marker"], ms=st["ms"],
                    ls=st.get("ls", "-"), zorder=st["zorder"], label=display_label(m))  # fmt: skip
            if st["band"]:  # intervals of the highlighted methods only: a band per baseline merges into one mass
                ax.fill_between(x, s["ci_low"], s["ci_high"], color=st["color"], alpha=0.15, lw=0,
                                zorder=st["zorder"] - 1)  # fmt: skip
        budgets = sub["budget_axis_value"].to_numpy(dtype=float)
        if len(budgets) and budgets.min() > 0 and budgets.max() / budgets.min() > 5:
            ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        dname = f"{format_value(dv)} x nominal" if dk == "ratio" else f"{format_value(dv)} s"
        ax.set_title(f"deadline {dname}", fontsize=10)
        ax.set_xlabel(_axis_name(sub["budget_input_type"].iloc[0] if len(sub) else "ratio", "budget", run))
        ax.set_ylabel("on-time success")
        ax.grid(alpha=0.3)
    for k in range(len(deadlines), rows * cols):
        axes[k // cols][k % cols].axis("off")
    if handles:
        legend_fig.legend(handles, names, loc="upper left", fontsize=7.5, frameon=False, handlelength=2.6, ncol=ncol)
    band = f" (band: 95% CI of {', '.join(highlight)})" if highlight else ""
    panel_fig.suptitle(wrap_title(f"On-time success vs budget{band}", plot_w - 0.3, 10), fontsize=10)
    return fig


def success_vs_budget(summary: pd.DataFrame, labels: list[str], out_dir: str, run: dict,
                      formats=DEFAULT_FORMATS) -> str:  # fmt: skip
    path = os.path.join(out_dir, "success_vs_budget.png")
    _draw_figure((path, success_vs_budget_figure, (summary, labels, run), {}), formats)
    return path


def _matrix(summary: pd.DataFrame, method: str, value: str = "on_time_rate"):
    s = summary[summary["method"] == method]
    b = sorted(set(summary["budget_axis_value"]))
    d = sorted(set(summary["deadline_axis_value"]))
    mat = np.full((len(b), len(d)), np.nan)
    for _, r in s.iterrows():
        mat[b.index(r["budget_axis_value"]), d.index(r["deadline_axis_value"])] = r[value]
    return b, d, mat


def heatmap_figure(mat, b, d, title, run, summary, cmap="viridis", vmin=0.0, vmax=1.0, fmt="{:.0%}", scale=1.0,
                   cbar_label="on-time success"):
    """A budget x deadline heatmap; the figure is wide enough for its axis labels, the title wraps to fit.

    A cell's text is ``fmt`` of its value times ``scale`` (a difference of rates: x 100, in percentage
    points, never ``%``, which would read as a relative change); the colour bar says what it shows.
    """
    plt = _mpl()
    width = max(4.6, 2.2 + 0.9 * len(d))
    fig, ax = plt.subplots(figsize=(width, 1.6 + 0.55 * max(len(b), 2)), layout="constrained")
    im = ax.imshow(mat, origin="lower", aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(len(d)), [format_value(x) for x in d])
    ax.set_yticks(range(len(b)), [format_value(x) for x in b])
    ax.set_xlabel(_axis_name(summary["deadline_input_type"].iloc[0], "deadline", run))
    ax.set_ylabel(_axis_name(summary["budget_input_type"].iloc[0], "budget", run))
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if not np.isnan(mat[i, j]):
                dark = mat[i, j] < 0.6 if cmap == "viridis" else abs(mat[i, j]) > 0.6 * max(abs(vmin), abs(vmax))
                ax.text(j, i, fmt.format(scale * mat[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")  # fmt: skip
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_label(cbar_label, fontsize=8)
    tick = fmt.replace("+", "") if scale == 1.0 else fmt
    bar.ax.yaxis.set_major_formatter(lambda v, _pos: tick.format(scale * v))
    fig.suptitle(wrap_title(title, width - 0.4, 9), fontsize=9)  # over the figure, not the (narrow) axes
    return fig


# A figure job: (PNG path, function building the figure, its positional and keyword arguments).
_Job = tuple


def _draw_figure(job: _Job, formats) -> str:
    """Build one figure, save it in ``formats``, close it; its PNG path."""
    plt = _mpl()
    path, build, args, kw = job
    fig = build(*args, **kw)
    try:
        save_figure(fig, path, formats=formats)
    finally:
        plt.close(fig)
    return path


def plot_jobs(summary, best, cells, labels, out_dir: str, run: dict) -> list[_Job]:
    """Every figure of the analysis as a job (cheap: the tables are sliced here, nothing is drawn)."""
    os.makedirs(out_dir, exist_ok=True)
    hdir = os.path.join(out_dir, "heatmaps")
    os.makedirs(hdir, exist_ok=True)
    styles = method_styles(labels)  # the shared style, computed once for every figure that needs it
    jobs: list[_Job] = [(os.path.join(out_dir, "success_vs_budget.png"), success_vs_budget_figure,
                         (summary, labels, run, styles), {})]  # fmt: skip
    for m in labels:
        b, d, mat = _matrix(summary, m)
        jobs.append((os.path.join(hdir, f"{_safe(m)}.png"), heatmap_figure,
                     (mat, b, d, f"{display_label(m)}: on-time success", run, summary), {}))  # fmt: skip
    for m in compared_labels(labels):  # each non-baseline method minus the cell's best baseline
        if best.empty or "method" not in best or not (best["method"] == m).any():
            continue
        rows = summary[summary["method"] == m].merge(best.loc[best["method"] == m, ["cell", "best_baseline_rate"]],
                                                     on="cell")  # fmt: skip
        rows = rows.assign(delta=rows["on_time_rate"] - rows["best_baseline_rate"])
        b, d, mat = _matrix(rows, m, "delta")
        lim = max(0.05, float(np.nanmax(np.abs(mat))) if np.isfinite(mat).any() else 0.05)
        jobs.append((os.path.join(out_dir, f"{_safe(m)}_minus_best_baseline.png"), heatmap_figure,
                     (mat, b, d, f"{display_label(m)} minus the best baseline (on-time success, percentage points)", run,
                      summary),
                     {"cmap": "RdBu", "vmin": -lim, "vmax": lim, "fmt": "{:+.0f}", "scale": 100.0,
                      "cbar_label": "difference in on-time success (percentage points)"}))  # fmt: skip
    return jobs


def _fork_render(jobs: list[_Job], formats, queue: int, done: int) -> int:
    """A forked child drawing jobs taken from ``queue`` (job numbers) and reporting each on ``done``; its pid.

    The child ends with os._exit (no atexit work of the parent); a figure that fails ends it with 1 (the parent
    draws what was not reported done, raising the real error in its own process).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        while True:
            i = _take(queue)
            if i is None:
                break
            _draw_figure(jobs[i], formats)
            os.write(done, i.to_bytes(_WIDTH, "little"))
        code = 0
    except BaseException:  # the parent draws it again and raises the real error in its own process
        pass
    finally:
        os._exit(code)


#: bytes of a job number in the queue (one read takes one job: the queue is filled before any reader starts)
_WIDTH = 2
#: at most this many jobs are queued (they must fit in a pipe's buffer, written before the children start)
_MAX_QUEUED = 2048


def _take(queue: int) -> int | None:
    """The next job number of the queue, None when it is empty."""
    b = os.read(queue, _WIDTH)
    return int.from_bytes(b, "little") if len(b) == _WIDTH else None


class PlotJobs:
    """Figures being drawn (:func:`start_plots`); :meth:`wait` returns their PNG paths in order.

    The worker processes take the figures one at a time from a queue (a pipe
    holding the job numbers, the heaviest figure first), so none waits for
    another's share; the caller, once done with its own work, draws what is
    left in :meth:`wait` too.
    """

    def __init__(self, jobs: list[_Job], formats, workers: int) -> None:
        self.jobs, self.formats = jobs, tuple(formats)
        self.children: list[int] = []
        self._queue = self._done = -1
        if workers > 1 and 1 < len(jobs) <= _MAX_QUEUED and hasattr(os, "fork"):
            _mpl()  # import matplotlib once, before the fork: the children inherit it
            queue, feed = os.pipe()
            os.write(feed, b"".join(i.to_bytes(_WIDTH, "little") for i in range(len(jobs))))
            os.close(feed)
            done, report = os.pipe()
            try:
                for _ in range(min(workers, len(jobs))):
                    self.children.append(_fork_render(jobs, self.formats, queue, report))
            finally:
                os.close(report)
            self._queue, self._done = queue, done
        else:
            for job in jobs:
                _draw_figure(job, self.formats)

    def wait(self) -> list[str]:
        """Draw what is left, wait for the children; what a failed child did not draw is drawn here (raising)."""
        if not self.children and self._queue < 0:
            return [job[0] for job in self.jobs]
        children, self.children = self.children, []
        drawn = set()
        try:
            while (i := _take(self._queue)) is not None:
                _draw_figure(self.jobs[i], self.formats)
                drawn.add(i)
        finally:
            for pid in children:
                os.waitpid(pid, 0)
            with os.fdopen(self._done, "rb") as fh:
                reported = fh.read()
            os.close(self._queue)
            self._queue = self._done = -1
        drawn.update(int.from_bytes(reported[k:k + _WIDTH], "little") for k in range(0, len(reported), _WIDTH))
        for i, job in enumerate(self.jobs):
            if i not in drawn:
                _draw_figure(job, self.formats)
        return [job[0] for job in self.jobs]


def plot_workers() -> int:
    """Processes drawing figures: the cores this process may use, at most 4."""
    from .variables import cores

    return max(1, min(4, cores()))


def start_plots(summary, best, cells, labels, out_dir: str, run: dict, formats=DEFAULT_FORMATS,
                workers: int | None = None) -> PlotJobs:  # fmt: skip
    """Start drawing every figure of the analysis (in worker processes when there are cores to spare)."""
    jobs = plot_jobs(summary, best, cells, labels, out_dir, run)
    return PlotJobs(jobs, formats, plot_workers() if workers is None else workers)


def make_plots(summary, best, cells, labels, out_dir: str, run: dict, formats=DEFAULT_FORMATS,
               workers: int | None = 1) -> list[str]:  # fmt: skip
    """Draw every figure of the analysis; their PNG paths (PDF / SVG beside them when in ``formats``)."""
    return start_plots(summary, best, cells, labels, out_dir, run, formats, workers).wait()

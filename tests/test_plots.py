"""The analysis plots read at a glance: nothing clipped, the legend off the data, MCPP highlighted.

Checked with matplotlib's own layout (tight bounding boxes of the drawn
artists) on the grid shape of README command 1 (13 methods, 3 budgets, one
deadline column), on a wide grid, and with a baseline suite (a long legend).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from harness.plots import heatmap_figure, make_plots, method_styles, success_vs_budget_figure
from simulator.methods import METHOD_ORDER, METHOD_SETS

RUN = {"settings": {"cost_mode": "token_cost_mean"}}


def _summary(labels, budgets, deadlines, seed=0):
    """A summary table of the analysis's shape (ratios on both axes)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in deadlines:
        for b in budgets:
            for m in labels:
                r = float(rng.uniform(0, 1))
                rows.append({"cell": f"B_r{b}__D_r{d}", "budget_input_type": "ratio", "budget_axis_value": b,
                             "deadline_input_type": "ratio", "deadline_axis_value": d, "method": m,
                             "on_time_rate": r, "ci_low": max(0.0, r - 0.1), "ci_high": min(1.0, r + 0.1),
                             "is_baseline": m != "mc_portfolio_rollout"})  # fmt: skip
    return pd.DataFrame(rows)


def _best(summary):
    rows = []
    for cell, s in summary.groupby("cell"):
        base = s[s["is_baseline"]]
        rows.append({"cell": cell, "method": "mc_portfolio_rollout",
                     "best_baseline_rate": float(base["on_time_rate"].max())})  # fmt: skip
    return pd.DataFrame(rows)


def _inside(inner, outer, tol=0.5):
    return (inner.x0 >= outer.x0 - tol and inner.y0 >= outer.y0 - tol and inner.x1 <= outer.x1 + tol
            and inner.y1 <= outer.y1 + tol)  # fmt: skip


def _overlaps(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _check_layout(fig):
    """Every title and legend inside the figure; no legend over any axes' data area; titles clear of legends."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    frame = fig.bbox
    sups = [f._suptitle for f in (fig, *fig.subfigs)]
    titles = [t for t in (*sups, *(ax.title for ax in fig.axes)) if t is not None and t.get_text()]
    assert titles, "no title drawn"
    legends = fig.findobj(lambda a: a.__class__.__name__ == "Legend")
    labels = [t for ax in fig.axes for t in (ax.xaxis.label, ax.yaxis.label) if t.get_text()]
    for t in (*titles, *labels, *(x for leg in legends for x in leg.get_texts())):
        assert _inside(t.get_window_extent(r), frame), f"text {t.get_text()!r} is clipped by the figure"
    for leg in legends:
        box = leg.get_window_extent(r)
        assert _inside(box, frame), "legend outside the figure"
        for ax in fig.axes:
            if ax.axison:
                assert not _overlaps(box, ax.get_window_extent(r)), "legend over an axes' data area"
        for t in titles:
            assert not _overlaps(box, t.get_window_extent(r)), f"legend over the title {t.get_text()!r}"
    for ax in fig.axes:
        if ax.axison:
            assert _inside(ax.get_tightbbox(r), frame), "an axes (labels, ticks) is clipped"
    return legends


@pytest.mark.parametrize(
    "labels, budgets, deadlines",
    [
        (list(METHOD_ORDER), [0.5, 1.0, 2.0], [1.0]),  # README command 1
        (list(METHOD_ORDER), [0.3, 0.5, 1.0, 2.0, 5.0, 10.0], [0.5, 1.0, 1.5, 2.0, 3.0]),
        (list(METHOD_ORDER) + [f"{m}@4B_ins" for m in METHOD_SETS["baselines"]]
         + [f"{m}@30B_ins_long_model_name" for m in METHOD_SETS["baselines"]], [0.5, 1.0, 2.0], [1.0]),
    ],
)
def test_success_vs_budget_fits_and_keeps_the_legend_off_the_data(labels, budgets, deadlines):
    import matplotlib.pyplot as plt

    fig = success_vs_budget_figure(_summary(labels, budgets, deadlines), labels, RUN)
    try:
        (leg,) = _check_layout(fig)
        names = [t.get_text() for t in leg.get_texts()]
        assert names[0] == "MCPP" and "mc_portfolio_rollout" not in names  # highlighted first, user-facing name
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n_budgets, n_deadlines", [(3, 1), (1, 1), (6, 10)])
def test_heatmap_titles_fit_any_grid_shape(n_budgets, n_deadlines):
    import matplotlib.pyplot as plt

    labels = list(METHOD_ORDER)
    summary = _summary(labels, list(np.geomspace(0.5, 4, n_budgets)), list(np.geomspace(0.5, 3, n_deadlines)))
    mat = np.zeros((n_budgets, n_deadlines))
    fig = heatmap_figure(mat, list(range(n_budgets)), list(range(n_deadlines)),
                         "MCPP minus the best baseline (on-time success)", RUN, summary, cmap="RdBu",
                         vmin=-0.2, vmax=0.2, fmt="{:+.0f}", scale=100.0, cbar_label="percentage points")  # fmt: skip
    try:
        _check_layout(fig)
    finally:
        plt.close(fig)


def test_the_difference_heatmap_labels_percentage_points_and_its_colour_bar(tmp_path):
    """A difference of rates is in percentage points (+26, never +26%, a relative change), the bar labelled."""
    import matplotlib.pyplot as plt

    from harness.plots import plot_jobs

    labels = list(METHOD_ORDER)
    summary = _summary(labels, [0.5, 1.0, 2.0], [1.0, 2.0])
    (job,) = [j for j in plot_jobs(summary, _best(summary), None, labels, str(tmp_path), RUN)
              if j[0].endswith("_minus_best_baseline.png")]
    _path, build, args, kw = job
    fig = build(*args, **kw)
    try:
        ax, bar_ax = fig.axes[0], fig.axes[1]
        texts = [t.get_text() for t in ax.texts]
        assert texts and all("%" not in t for t in texts) and all(t[0] in "+-" for t in texts), texts
        assert "percentage points" in bar_ax.get_ylabel()
        title = fig._suptitle.get_text().replace("\n", " ")
        assert "percentage points" in title and title.startswith("MCPP")
        fig.canvas.draw()
        ticks = [t.get_text() for t in bar_ax.get_yticklabels()]
        assert ticks and all("%" not in t for t in ticks), ticks
    finally:
        plt.close(fig)


def test_baseline_families_share_a_hue_and_mcpp_stands_out():
    import matplotlib.colors as mc

    styles = method_styles(list(METHOD_ORDER))
    hue = {m: mc.rgb_to_hsv(mc.to_rgb(st["color"]))[0] for m, st in styles.items()}
    seq, static = METHOD_SETS["seq"], METHOD_SETS["static"]
    for fam in (seq, static):
        assert max(hue[m] for m in fam) - min(hue[m] for m in fam) < 0.1  # one hue family
    assert min(abs(hue[a] - hue[b]) for a in seq for b in static) > 0.1  # told apart from the other family
    assert min(abs(hue["mc_portfolio_rollout"] - hue[m]) for m in seq + static) > 0.2
    assert len({styles[m]["color"] for m in seq}) == len(seq)  # a shade per member
    mcpp = styles["mc_portfolio_rollout"]
    assert mcpp["band"] and mcpp["lw"] > max(styles[m]["lw"] for m in seq + static)
    assert not any(styles[m]["band"] for m in seq + static)  # no band per baseline: they merged into one mass


def test_png_pdf_svg_have_the_same_page(tmp_path):
    """The three formats come from one figure with everything inside it: same size and aspect."""
    import re

    from PIL import Image

    labels = list(METHOD_ORDER)
    summary = _summary(labels, [0.5, 1.0, 2.0], [1.0])
    paths = make_plots(summary, _best(summary), [], labels, str(tmp_path), RUN, formats=("png", "pdf", "svg"))
    for png in (p for p in paths if "heatmaps" not in p):
        stem = os.path.splitext(png)[0]
        w, h = Image.open(png).size
        svg = open(stem + ".svg", encoding="utf-8").read()
        sw, sh = (float(x) for x in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
        pdf = open(stem + ".pdf", "rb").read()
        box = [float(x) for x in re.search(rb"/MediaBox \[ *([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) *\]", pdf).groups()]
        pw, ph = box[2] - box[0], box[3] - box[1]
        assert abs(sw - pw) < 1 and abs(sh - ph) < 1  # the same page in points
        assert abs(w / h - pw / ph) < 0.01  # and the PNG has its aspect


def _files(root) -> dict[str, bytes]:
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(root) for f in fs}  # fmt: skip


def test_png_only_by_default_and_worker_processes_draw_the_same_files(tmp_path):
    """Default: PNGs only. Drawn by forked workers (while the caller goes on) = drawn one by one, byte for byte."""
    from harness.plots import start_plots

    labels = list(METHOD_ORDER)
    summary = _summary(labels, [0.5, 1.0, 2.0], [1.0, 2.0])
    serial = make_plots(summary, _best(summary), [], labels, str(tmp_path / "a"), RUN, workers=1)
    assert all(p.endswith(".png") for p in _files(tmp_path / "a"))
    assert len(serial) == len(labels) + 2  # success vs budget, a heatmap per method, MCPP minus the best baseline
    for formats in (("png",), ("png", "pdf", "svg")):
        out = tmp_path / f"w{len(formats)}"
        drawing = start_plots(summary, _best(summary), [], labels, str(out), RUN, formats, workers=2)
        assert len(drawing.children) == 2
        paths = drawing.wait()
        assert [os.path.relpath(p, out) for p in paths] == [os.path.relpath(p, tmp_path / "a") for p in serial]
        files = _files(out)
        assert {os.path.splitext(f)[1] for f in files} == {"." + f for f in formats}
        pngs = {k: v for k, v in files.items() if k.endswith(".png")}
        assert pngs == _files(tmp_path / "a")
        assert not [f for f in files if "tmp" in f]


def test_a_figure_failing_in_a_worker_raises_in_the_caller(tmp_path, monkeypatch):
    from harness import plots

    labels = list(METHOD_ORDER)
    summary = _summary(labels, [0.5, 1.0], [1.0])

    def broken(*a, **k):
        raise RuntimeError("figure broke")

    monkeypatch.setattr(plots, "success_vs_budget_figure", broken)
    drawing = plots.start_plots(summary, _best(summary), [], labels, str(tmp_path), RUN, workers=2)
    with pytest.raises(RuntimeError, match="figure broke"):
        drawing.wait()


@pytest.mark.parametrize("text, want", [("", ("png",)), ("png", ("png",)), ("pdf", ("png", "pdf")),
                                        ("png, svg,PDF", ("png", "svg", "pdf"))])  # fmt: skip
def test_plot_formats_setting(text, want):
    from harness import variables

    assert variables.read({"PLOT_FORMATS": text}, "PLOT_FORMATS") == want


def test_a_bad_plot_format_is_one_line_before_any_work(tmp_path):
    from tests.harness_util import harness

    r = harness("analyze", {"RUN_DIR": str(tmp_path), "PLOT_FORMATS": "png,jpeg"}, check=False)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "PLOT_FORMATS (environment): unknown value 'jpeg'" in r.stderr

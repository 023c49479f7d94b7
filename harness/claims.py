"""``claims``: test the paper's three claims on one or more runs of one pool and grid.

Input: the ``merged/`` directories of runs that share the pool, the DAGs,
the trials, the grid, the cost setting and the seed (so every method met the
same luck on the same (DAG, trial): keyed randomness pairs records across
runs as well as within one), one run per execution-rule mode and
planning-noise level. Output (``docs/claims.md``): ``claims.md``, tables
(CSV, LaTeX) and the regime-map figure.

Every verdict comes from one paired difference, MCPP minus the other side,
on the same (DAG, trial) of a cell, with a cluster-robust Student-t interval
over DAGs (:func:`simulator.base.scoring.clustered_difference`). A difference to
"the best of several" methods (best baseline, best portfolio member) takes
the minimum of the differences to each, with Bonferroni-simultaneous
intervals: if every difference lies in its interval, the difference to the
best lies in [min lower, min upper], so picking the best on the data costs
no coverage. A verdict, with margin ``m``: ``holds`` when the lower bound is
above ``-m``, ``fails`` when the upper bound is below ``-m``, else
``inconclusive``. Margins: 0 for "MCPP improves on X" (claims 1 and 2b), the
robustness margin for "noise costs at most m" (claim 2a), MCPP's own
Hoeffding epsilon for the safe-improvement claim (3).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simulator.base.errors import ConfigError, UserError
from simulator.base.scoring import clustered_difference
from simulator.methods import MCPP

from .methods import SUITE_SEP, is_baseline_label
from .rundir import RunDir

LEVEL = 0.95
#: the execution-rule modes (a run without the setting is ``published``)
MODES = ("published", "atomic", "per_attempt", "live")
#: methods of the "further" family (LOADER, Chernoff deadline methods): compared separately
FURTHER_PREFIXES = ("loader_", "deadline_")
#: settings two runs must share to be paired (everything that decides which (DAG, trial, cell) a record is)
SAME_SETTINGS = ("pool_sha256", "dags", "n_exec_trials", "grid", "cost_mode", "latency_dist", "prices",
                 "default_price_model", "seed")  # fmt: skip
NOISE_NAMES = {"noise_logit_sigma": "logit", "noise_latency_sigma": "latency", "noise_cost_sigma": "cost"}
DEFAULT_ROBUST_MARGIN = 0.05
CLAIM_TITLES = {
    1: "MCPP improves constrained completion over the baselines",
    2: "MCPP stays robust to noisy planning statistics",
    3: "MCPP does at least as well as the best member of its portfolio, up to its Hoeffding epsilon",
}


# --------------------------------------------------------------------------- runs


@dataclass
class ClaimRun:
    """One run as the claims see it: its mode, planning noise and a success table per cell."""

    name: str
    path: str
    settings: dict
    mode: str
    noise: dict
    labels: list[str]
    cells: list[dict]
    wide: dict[str, pd.DataFrame]  # cell -> (dag_idx, exec_trial) x label, on-time success as 0.0/1.0
    mcpp: pd.DataFrame  # MCPP records: cell, dag_idx, exec_trial, epsilon, estimate, model_ids, base_ks

    @property
    def has_mcpp(self) -> bool:
        return MCPP in self.labels

    @property
    def noise_label(self) -> str:
        return noise_label(self.noise)


def noise_label(noise: Mapping[str, Any]) -> str:
    """``exact`` or e.g. ``logit 0.5, latency 0.5 (seed 0)``."""
    if not noise:
        return "exact"
    parts = [f"{NOISE_NAMES[k]} {noise[k]:g}" for k in NOISE_NAMES if k in noise]
    if "pool" in noise:
        parts.append(f"planning pool {os.path.basename(str(noise['pool']))}")
    text = ", ".join(parts)
    if "noise_seed" in noise and any(k in noise for k in NOISE_NAMES):
        text += f" (seed {noise['noise_seed']})"
    return text


def run_noise(settings: Mapping[str, Any]) -> dict:
    """The planning settings that make MCPP's statistics differ from the execution's (empty = exact)."""
    planning = dict(settings.get("planning") or {})
    out = {k: float(planning[k]) for k in NOISE_NAMES if float(planning.get(k) or 0) > 0}
    if planning.get("pool"):
        out["pool"] = planning["pool"]
    if out and "noise_seed" in planning:
        out["noise_seed"] = int(planning["noise_seed"])
    return out


def resolve_run_dirs(names: Sequence[str], results_root: str) -> list[str]:
    """Each name is a run directory, else a run name under ``results_root``."""
    out = []
    for name in names:
        path = name if os.path.isdir(name) else os.path.join(results_root, name)
        if not os.path.isdir(path):
            raise ConfigError(f"claims: run {name!r}: no directory {name!r} nor {path!r}")
        out.append(os.path.abspath(path))
    if len(set(out)) != len(out):
        raise ConfigError("claims: the same run directory is listed twice")
    return out


def _mode_of(settings: Mapping[str, Any], run: Mapping[str, Any], where: str) -> str:
    mode = settings.get("execution_rules") or run.get("execution_rules") or "published"
    if mode not in MODES:
        raise UserError(f"{where}: execution_rules {mode!r} is not one of {', '.join(MODES)}")
    return str(mode)


def load_run(path: str) -> ClaimRun:
    """Read one run's ``run.json`` and ``merged/`` (complete merges only)."""
    from .merge import load_report

    rd = RunDir(path)
    run = rd.require_prepared()
    report = load_report(rd.merged)
    if not report.get("complete"):
        raise UserError(f"{rd.merged}: the merge is incomplete; finish the run and merge it before `claims`")
    settings = run.get("settings", {})
    declared = settings.get("execution_rules") or run.get("execution_rules")
    mode = _mode_of(settings, run, rd.run_json)
    cols: dict[str, list] = {k: [] for k in ("cell", "dag_idx", "exec_trial", "method", "ok")}
    mc: dict[str, list] = {k: [] for k in ("cell", "dag_idx", "exec_trial", "epsilon", "estimate", "model_ids",
                                            "base_ks")}  # fmt: skip
    for c in report["cells"]:
        fpath = os.path.join(rd.merged, "cells", c["cell"], "records.jsonl")
        with open(fpath, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                rec_mode = r.get("execution_rules") or "published"
                if declared is None:  # run.json predates the setting: the records say it
                    declared = mode = _mode_of({"execution_rules": rec_mode}, {}, fpath)
                elif rec_mode != mode:
                    raise UserError(f"{fpath}: a record has execution_rules {rec_mode!r}, the run {mode!r}")
                key = (c["cell"], int(r["dag_idx"]), int(r["exec_trial"]))
                for k, v in zip(("cell", "dag_idx", "exec_trial"), key):
                    cols[k].append(v)
                cols["method"].append(r["method"])
                cols["ok"].append(1.0 if r["on_time_success"] else 0.0)
                if r["method"] == MCPP:
                    for k, v in zip(("cell", "dag_idx", "exec_trial"), key):
                        mc[k].append(v)
                    mc["epsilon"].append(_epsilon(r))
                    mc["estimate"].append(r.get("mc_portfolio_best_score_first", math.nan))
                    params = r.get("mc_portfolio_params") or settings.get("mcpp") or {}
                    mc["model_ids"].append(tuple(params.get("model_ids") or ()))
                    mc["base_ks"].append(tuple(params.get("base_ks") or ()))
    df = pd.DataFrame(cols)
    wide = {}
    for cell, g in df.groupby("cell", sort=False):
        wide[cell] = g.set_index(["dag_idx", "exec_trial", "method"])["ok"].unstack("method").sort_index()
    return ClaimRun(
        name=run.get("run_name") or os.path.basename(path), path=path, settings=settings, mode=mode,
        noise=run_noise(settings), labels=list(report["method_labels"]), cells=list(report["cells"]), wide=wide,
        mcpp=pd.DataFrame(mc),
    )  # fmt: skip


def _epsilon(r: Mapping[str, Any]) -> float:
    """MCPP's Hoeffding epsilon of the episode: recorded (largest over its decisions), else from its counts.

    The fallback is the docs' formula sqrt(ln(2 n_pairs / delta) / (2 M)) with
    n_pairs the mean number of (candidate, member) pairs per decision.
    """
    eps = r.get("mc_portfolio_epsilon_max")
    if eps is not None:
        return float(eps)
    params = r.get("mc_portfolio_params") or {}
    dec, pairs = r.get("mc_portfolio_decisions"), r.get("mc_portfolio_pairs_total")
    if not dec or not pairs or not params.get("M") or not params.get("delta"):
        return math.nan
    return math.sqrt(math.log(2 * (pairs / dec) / params["delta"]) / (2 * params["M"]))


def check_compatible(runs: Sequence[ClaimRun]) -> None:
    """One readable line when the runs cannot be paired or two of them claim the same (mode, noise)."""
    first = runs[0]
    for r in runs[1:]:
        for key in SAME_SETTINGS:
            a, b = first.settings.get(key), r.settings.get(key)
            if a != b:
                raise UserError(
                    f"claims: runs {first.name!r} and {r.name!r} differ in {key} ({_short(a)} vs {_short(b)}); "
                    "the claims pair runs of one pool and grid (same DAGs, trials, cells, cost setting and seed)"
                )
    with_mcpp = [r for r in runs if r.has_mcpp]
    seen: dict[tuple, str] = {}
    for r in with_mcpp:
        key = (r.mode, json.dumps(r.noise, sort_keys=True))
        if key in seen:
            raise UserError(f"claims: runs {seen[key]!r} and {r.name!r} both run MCPP under mode {r.mode!r} with "
                            f"planning noise {r.noise_label!r}; give one run per (mode, noise level)")  # fmt: skip
        seen[key] = r.name
    for r in with_mcpp[1:]:
        if r.settings.get("mcpp") != with_mcpp[0].settings.get("mcpp"):
            raise UserError(f"claims: runs {with_mcpp[0].name!r} and {r.name!r} run MCPP with different parameters "
                            "(MC_PORTFOLIO_*); the claims compare one planner across modes and noise levels")  # fmt: skip
    if not with_mcpp:
        raise UserError("claims: no run has MCPP (mc_portfolio_rollout); nothing to test")


def _short(v: Any) -> str:
    text = json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- comparisons


def is_further_label(label: str) -> bool:
    return label.split(SUITE_SEP, 1)[0].startswith(FURTHER_PREFIXES)


def is_standard_baseline(label: str) -> bool:
    return label != MCPP and is_baseline_label(label) and not is_further_label(label)


def member_label(model: str | None, k: int) -> str:
    """The baseline label of portfolio member Seq-(model, k): ``sequential[_k]@model`` (``None``: legacy model)."""
    name = "sequential" if int(k) == 1 else f"sequential_{int(k)}"
    return name if model is None else f"{name}{SUITE_SEP}{model}"


def verdict(lo: float, hi: float, margin: float = 0.0) -> str:
    """``holds`` / ``fails`` / ``inconclusive``: where the interval lies relative to ``-margin``."""
    if lo > -margin:
        return "holds"
    if hi < -margin:
        return "fails"
    return "inconclusive"


def compare(y: pd.Series, others: Mapping[str, pd.Series], margin: float = 0.0, level: float = LEVEL) -> dict:
    """MCPP (``y``) minus the best of ``others``, paired on the index (dag_idx, exec_trial).

    One other: its cluster-robust t interval at ``level``. Several: each at
    the Bonferroni level 1 - (1 - level) / J; the difference to the best is
    the smallest difference, its interval [min lower, min upper] (valid for
    the maximum whichever method the data pick).
    """
    names = list(others)
    frame = pd.concat([y.rename("__y__"), *(others[n].rename(n) for n in names)], axis=1, join="inner").dropna()
    names = _distinct_columns(frame, names)
    J = len(names)
    lvl = 1.0 - (1.0 - level) / max(J, 1)
    dags = frame.index.get_level_values(0).to_numpy()
    best = None
    lo_min = hi_min = math.inf
    for n in names:
        res = clustered_difference(frame["__y__"].to_numpy() - frame[n].to_numpy(), dags, lvl)
        lo_min, hi_min = min(lo_min, res["ci_low"]), min(hi_min, res["ci_high"])
        if best is None or res["diff"] < best[1]["diff"]:
            best = (n, res)
    if best is None or not len(frame):
        return {"against": None, "diff": math.nan, "ci_low": -1.0, "ci_high": 1.0, "verdict": "inconclusive",
                "n_pairs": 0, "n_dags": 0, "family": J, "level": lvl, "margin": margin, "mcpp_rate": math.nan,
                "against_rate": math.nan}  # fmt: skip
    n, res = best
    return {
        "against": n, "diff": res["diff"], "ci_low": lo_min, "ci_high": hi_min,
        "verdict": verdict(lo_min, hi_min, margin), "n_pairs": res["n_pairs"], "n_dags": res["n_dags"], "family": J,
        "level": lvl, "margin": margin, "mcpp_rate": float(frame["__y__"].mean()), "against_rate": float(frame[n].mean()),
    }  # fmt: skip


def _distinct_columns(frame: pd.DataFrame, names: list[str]) -> list[str]:
    """``names`` without the columns identical to an earlier one (e.g. ``sequential`` and
    ``sequential@m`` when every node's legacy model is m): the same difference counted twice would only
    widen the Bonferroni family."""
    out: list[str] = []
    seen: set[bytes] = set()
    for n in names:
        key = frame[n].to_numpy(dtype=np.float64).tobytes()
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


@dataclass
class ModeRuns:
    """The runs of one execution-rule mode: MCPP per noise level, baselines from any of them."""

    mode: str
    exact: ClaimRun | None
    noisy: list[ClaimRun]
    providers: list[ClaimRun]  # baseline sources, the exact MCPP run first

    def baseline(self, cell: str, label: str) -> pd.Series | None:
        for r in self.providers:
            w = r.wide.get(cell)
            if w is not None and label in w:
                return w[label]
        return None

    def labels(self, cell: str) -> list[str]:
        out: list[str] = []
        for r in self.providers:
            for lab in r.labels:
                w = r.wide.get(cell)
                if lab != MCPP and lab not in out and w is not None and lab in w:
                    out.append(lab)
        return out


def group_by_mode(runs: Sequence[ClaimRun]) -> list[ModeRuns]:
    out = []
    for mode in MODES:
        rs = [r for r in runs if r.mode == mode]
        if not rs:
            continue
        mc = [r for r in rs if r.has_mcpp]
        exact = next((r for r in mc if not r.noise), None)
        noisy = [r for r in mc if r.noise]
        providers = ([exact] if exact else []) + [r for r in rs if r is not exact]
        out.append(ModeRuns(mode, exact, noisy, providers))
    return out


def _cell_info(c: Mapping[str, Any]) -> dict:
    return {k: c.get(k) for k in ("cell", "budget_input_type", "budget_axis_value", "deadline_input_type",
                                  "deadline_axis_value")}  # fmt: skip


def portfolio_members(mcpp: pd.DataFrame, cell: str) -> list[tuple[str | None, int]]:
    """The (model, k) members of MCPP's portfolio in ``cell`` (union over its episodes), in portfolio order."""
    sub = mcpp[mcpp["cell"] == cell]
    out: list[tuple[str | None, int]] = []
    for models, ks in dict.fromkeys(zip(sub["model_ids"], sub["base_ks"])):
        for m in models or (None,):
            for k in ks:
                if (m, int(k)) not in out:
                    out.append((m, int(k)))
    return out


@dataclass
class ClaimsResult:
    cells: pd.DataFrame  # one row per (claim, comparison, mode, noise, cell)
    summary: pd.DataFrame  # one row per (claim, comparison, mode, noise)
    runs: list[ClaimRun]
    notes: list[str] = field(default_factory=list)


def evaluate(runs: Sequence[ClaimRun], robust_margin: float = DEFAULT_ROBUST_MARGIN) -> ClaimsResult:
    """Every comparison of the three claims, per cell."""
    check_compatible(runs)
    rows: list[dict] = []
    notes: list[str] = []
    for g in group_by_mode(runs):
        if g.exact is None:
            notes.append(f"mode {g.mode}: no run of MCPP with exact planning statistics; claims 1 and 3 and the "
                         "noisy-minus-exact part of claim 2 are skipped for this mode")  # fmt: skip
        for c in g.providers[0].cells:
            cell = c["cell"]
            base = _cell_info(c)
            labels = g.labels(cell)

            if g.exact is not None:
                rows += _vs_baselines(g, g.exact, cell, base, labels, 1, "MCPP - ")
                rows.append(_claim3_row(g, g.exact, cell, base, labels))
            for run in g.noisy:
                if g.exact is not None:
                    res = compare(run.wide[cell][MCPP], {f"{MCPP} (exact)": g.exact.wide[cell][MCPP]}, robust_margin)
                    rows.append({"claim": 2, "comparison": "noisy MCPP - exact MCPP", "mode": g.mode,
                                 "noise": run.noise_label, "run": run.name, **base, **res})  # fmt: skip
                rows += _vs_baselines(g, run, cell, base, labels, 2, "noisy MCPP - ")
    cells = pd.DataFrame(rows)
    return ClaimsResult(cells, summarize(cells), list(runs), notes)


def _vs_baselines(g: ModeRuns, run: ClaimRun, cell: str, base: dict, labels: list[str], claim: int,
                  prefix: str) -> list[dict]:  # fmt: skip
    """MCPP of ``run`` minus uniform, sequential, the best baseline and the best further baseline of the mode."""
    y = run.wide[cell][MCPP]
    std = [lab for lab in labels if is_standard_baseline(lab)]
    further = [lab for lab in labels if is_further_label(lab)]
    out = []
    for what, names in (("uniform", ["uniform"]), ("sequential (Retry)", ["sequential"]), ("best baseline", std),
                        ("best further baseline", further)):  # fmt: skip
        names = [n for n in names if n in labels]
        if names:
            res = compare(y, {n: g.baseline(cell, n) for n in names})
            out.append({"claim": claim, "comparison": f"{prefix}{what}", "mode": g.mode, "noise": run.noise_label,
                        "run": run.name, **base, **res})  # fmt: skip
    return out


def _claim3_row(g: ModeRuns, run: ClaimRun, cell: str, base: dict, labels: list[str]) -> dict:
    members = portfolio_members(run.mcpp, cell)
    suite = {member_label(m, k): (m, k) for m, k in members}
    present = [lab for lab in suite if lab in labels]
    source = "suite baselines (exact members)"
    if not present:  # no baseline suite: the legacy-model Seq-k baselines stand in for the members
        present = list(dict.fromkeys(member_label(None, k) for _, k in members if member_label(None, k) in labels))
        source = "legacy-model Seq-k baselines (run with BASELINE_SUITE=all for the exact members)"
    sub = run.mcpp[run.mcpp["cell"] == cell]
    eps = float(np.nanmean(sub["epsilon"])) if sub["epsilon"].notna().any() else math.nan
    margin = eps if math.isfinite(eps) else 0.0
    y = run.wide[cell][MCPP]
    res = compare(y, {n: g.baseline(cell, n) for n in present}, margin) if present else compare(y, {}, margin)
    strict = verdict(res["ci_low"], res["ci_high"], 0.0) if present else "inconclusive"
    return {"claim": 3, "comparison": "MCPP - best portfolio member", "mode": g.mode, "noise": run.noise_label,
            "run": run.name, **base, **res, "epsilon": eps, "strict_verdict": strict,
            "mcpp_estimate": float(np.nanmean(sub["estimate"])) if len(sub) else math.nan,
            "members_present": len(present), "members_total": len(members), "members_source": source}  # fmt: skip


def overall(verdicts: Sequence[str]) -> tuple[str, str]:
    """(word, sentence) of a comparison over its cells, with the counts."""
    n = len(verdicts)
    h, f = verdicts.count("holds"), verdicts.count("fails")
    i = n - h - f
    if n == 0:
        return "no cell", "no cell"
    if f:
        return "fails", f"fails in {f} of {n} cells (holds in {h}, inconclusive in {i})"
    if h == n:
        return "holds", f"holds in all {n} cells"
    if h:
        return "holds in part", f"holds in {h} of {n} cells, inconclusive in {i}, fails in none"
    return "inconclusive", f"inconclusive in all {n} cells"


def summarize(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return pd.DataFrame()
    rows = []
    for (claim, comp, mode, noise), g in cells.groupby(["claim", "comparison", "mode", "noise"], sort=False):
        v = list(g["verdict"])
        word, sentence = overall(v)
        rows.append({"claim": claim, "comparison": comp, "mode": mode, "noise": noise, "cells": len(v),
                     "holds": v.count("holds"), "fails": v.count("fails"),
                     "inconclusive": len(v) - v.count("holds") - v.count("fails"), "diff_min": g["diff"].min(),
                     "diff_median": g["diff"].median(), "diff_max": g["diff"].max(), "overall": word,
                     "sentence": sentence})  # fmt: skip
    return pd.DataFrame(rows)

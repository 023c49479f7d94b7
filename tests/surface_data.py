"""Generated prediction-surface data sets in the file layout of docs/surface.md, for the page's tests.

The surfaces look like real ones (success rises with log budget and log deadline, a better method reaches
a level at a lower budget, binomial noise, a few partial and missing cells) so that contours, differences
and the cheapest-budget readout have something to show. Values are drawn from a seeded generator; tests
read the expected numbers back from the written files, never from this module.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

import numpy as np

from simulator.base.scoring import wilson_bounds
from simulator.methods import method_label

#: (id, display name, baseline, budget shift, deadline shift): a negative shift reaches a level with less
#: budget / time; the static baseline is fast (parallel dispatch) but costly, so it beats MCPP at short deadlines
METHODS = (
    ("mc_portfolio_rollout", "MCPP", False, -0.45, 0.0),
    ("sequential_4", "Sequential-4", True, 0.0, 0.0),
    ("static_cheapest", "Static-cheapest", True, 0.35, -0.9),
)

_WORDS = ("Array", "Binary", "Graph", "Prime", "String", "Tree", "Matrix", "Path", "Queue", "Game", "Coins",
          "Robot", "Segments", "Permutation", "Subsequence", "Tokens", "Towers", "Bridges", "Colors", "Divisors")


@dataclass
class SurfaceSet:
    """Where a generated set lies: ``data_dir`` holds manifest.json etc., ``page_dir`` is where the page goes."""

    page_dir: pathlib.Path
    data_dir: pathlib.Path
    queries: list[dict]

    def matrix(self, i: int) -> dict:
        """The matrix file of query ``i``, as written."""
        return json.loads((self.data_dir / self.queries[i]["matrix_path"]).read_text(encoding="utf-8"))

    @property
    def axes(self) -> dict:
        return json.loads((self.data_dir / "axes.json").read_text(encoding="utf-8"))


def _title(q: int) -> str:
    return f"{_WORDS[q % len(_WORDS)]} {_WORDS[(q * 7 + 3) % len(_WORDS)].lower()} {q}"


def _nullable(arr: np.ndarray, missing: np.ndarray) -> list:
    return np.where(missing, None, arr.astype(object)).tolist()


def _method_cells(u, n, nb, nd, shift, dshift, missing, budgets, level):
    """One method's arrays: trials, successes, percent, Wilson bounds (percent), mean cost.

    Trial t succeeds at a cell when ``u[t] < p(cell)``: common random numbers over cells and methods, as the
    real job's keyed draws give, so that a surface is smooth rather than independent noise per cell.
    """
    lb = np.linspace(0.0, 1.0, nb)[:, None] * 6.0 - 3.0 - shift * 2.0 - level
    ld = np.linspace(0.0, 1.0, nd)[None, :] * 6.0 - 2.2 + level * 0.5 - dshift * 2.0
    p = 0.985 / (1.0 + np.exp(-2.2 * lb)) / (1.0 + np.exp(-1.8 * ld))
    k = np.searchsorted(np.sort(u), p)  # trials with u[t] < p, over all of u
    for b, d in zip(*np.nonzero(n < len(u))):
        k[b, d] = int((u[: n[b, d]] < p[b, d]).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.rint(np.where(n > 0, 100.0 * k / np.maximum(n, 1), 0.0)).astype(np.int64)
    lo, hi = wilson_bounds(k, n)
    cost = np.round(budgets[:, None] * (0.25 + 0.5 * p) * np.ones((1, nd)), 6)
    return {
        "success_pct": _nullable(pct, missing),
        "successes": _nullable(k, missing),
        "n_trials": _nullable(n, missing),
        "wilson_low_pct": _nullable(np.round(100.0 * lo, 2), missing),
        "wilson_high_pct": _nullable(np.round(100.0 * hi, 2), missing),
        "mean_cost": _nullable(cost, missing),
    }


def write_surface(
    root: pathlib.Path,
    *,
    n_queries: int,
    n_budgets: int,
    n_deadlines: int,
    methods: tuple = METHODS,
    unit: str = "tokens",
    expected: int = 20,
    seed: int = 0,
    published: bool = False,
    distinct: int | None = None,
    missing_frac: float = 0.03,
    partial_frac: float = 0.04,
) -> SurfaceSet:
    """Write a data set under ``root`` and return where it lies.

    ``published=True`` writes the published layout (no ``methods``, intervals, units or format version) into
    ``root/data/`` (where the published page keeps it). ``distinct`` surfaces are drawn and reused cyclically
    (each query still gets its own file with its own ids): the speed test's 462 full-size files would take
    too long to draw one by one and their values do not matter there.
    """
    rng = np.random.default_rng(seed)
    data_dir = root / "data" if published else root
    (data_dir / "matrices").mkdir(parents=True, exist_ok=True)
    budgets = np.geomspace(500.0, 60000.0, n_budgets) if unit == "tokens" else np.geomspace(0.02, 20.0, n_budgets)
    deadlines = np.geomspace(30.0, 7200.0, n_deadlines)
    n_distinct = n_queries if distinct is None else distinct
    bodies, counts = [], []
    for _ in range(n_distinct):
        missing = rng.random((n_budgets, n_deadlines)) < missing_frac
        partial = ~missing & (rng.random((n_budgets, n_deadlines)) < partial_frac)
        level = rng.uniform(-0.8, 0.8)
        n = np.full((n_budgets, n_deadlines), expected, dtype=np.int64)
        n[partial] = rng.integers(1, expected, size=int(partial.sum()))
        n[missing] = 0
        u = rng.random(expected)
        per = {mid: _method_cells(u, n, n_budgets, n_deadlines, shift, dshift, missing, budgets, level)
               for mid, _, _, shift, dshift in methods}
        first = per[methods[0][0]]
        body = {"success_pct": first["success_pct"], "n_trials": first["n_trials"]}
        if not published:
            body["methods"] = per
        bodies.append(json.dumps(body, separators=(",", ":"))[1:])  # without its "{": ids go in front
        counts.append((int((~missing & ~partial).sum()), int(missing.sum()), int(partial.sum())))
    queries = []
    for q in range(n_queries):
        entry = {"query_id": f"codeflow_{q:03d}", "problem_id": f"{1400 + q}{'ABCDE'[q % 5]}", "title": _title(q),
                 "matrix_path": f"matrices/query_{q:03d}.json"}
        head = json.dumps({k: entry[k] for k in ("query_id", "problem_id", "title")}, separators=(",", ":"))[:-1]
        (data_dir / entry["matrix_path"]).write_text(head + "," + bodies[q % n_distinct], encoding="utf-8")
        if not published:
            entry.update(dag_index=q, n_nodes=3 + q % 9)
        queries.append(entry)
    per_query = [counts[q % n_distinct] for q in range(n_queries)]
    complete, missing_n, partial_n = (sum(c[i] for c in per_query) for i in range(3))
    manifest = {
        "dataset": "generated test surface", "generated_at": "2026-01-02T03:04:05Z", "query_count": n_queries,
        "budget_count": n_budgets, "deadline_count": n_deadlines, "expected_trials_per_cell": expected,
        "complete_cells": complete, "missing_cells": missing_n, "partial_cells": partial_n,
        "missing_policy": "missing", "public_data_notice": "Synthetic numbers drawn for the page's tests.",
        "model_ids": ["m-small", "m-large"], "model_display_names": ["Small model", "Large model"],
    }
    if not published:
        manifest.update({
            "format_version": 1, "budget_unit": unit, "deadline_unit": "s", "cost_mode": "token_cost_mean",
            "execution_rules": "published", "seed": seed, "approximation": None,
            "methods": [{"id": m, "display_name": name, "label": method_label(m), "baseline": base}
                        for m, name, base, *_ in methods],
            "pool": {"path": "examples/example_pool.jsonl", "sha256": "0" * 64},
        })
    (data_dir / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    axes = {"budgets": [round(float(b), 8) for b in budgets], "deadlines": [round(float(d), 6) for d in deadlines]}
    (data_dir / "axes.json").write_text(json.dumps(axes), encoding="utf-8")
    (data_dir / "queries.json").write_text(json.dumps(queries, indent=1), encoding="utf-8")
    return SurfaceSet(page_dir=root, data_dir=data_dir, queries=queries)


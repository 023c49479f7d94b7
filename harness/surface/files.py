"""Merge a surface job's per-DAG parts into the published layout (``<run>/surface/``, docs/surface.md).

Files (compact JSON, each written atomically): ``manifest.json``,
``axes.json``, ``queries.json`` and ``matrices/query_NNN.json``, in the
published format plus our fields (every method's matrices, Wilson 95%
bounds, mean cost, trials per cell). A DAG whose part is missing (not
computed yet) gives ``null`` cells (counted in ``missing_cells``); a part
that was computed but no longer verifies (truncated, edited, swapped, of
another run) stops the merge before anything is written (:class:`DamagedParts`,
exit 1) and its shard is pending again. Rounding: ``success_pct`` is
``floor(100 x successes / n_trials + 0.5)`` (half up), the Wilson bounds are
percentages rounded to 0.1 (half up as well).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os

import numpy as np

from simulator.base.errors import UserError
from simulator.base.io_utils import atomic_write_text, dumps_compact
from simulator.base.scoring import wilson_bounds
from simulator.methods import method_label, method_spec

from .job import JOB_DIR, check_part, load_job

FORMAT_VERSION = 1
NOTICE = ("Simulated on-time-within-budget success rates of the listed methods, computed by this project's "
          "simulator from the pool's statistics (synthetic pools are not measurements).")  # fmt: skip
UNITS = {"output_money_cost_mean": "USD", "token_cost_mean": "tokens", "cost_mean": "cost", "lat_mean": "s"}


class DamagedParts(UserError):
    """Parts that were computed but no longer verify: the merge writes nothing (exit 1)."""


def _half_up(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return np.floor(x * scale + 0.5) / scale


def _grid(values: np.ndarray, present: np.ndarray, cast) -> list:
    return [[cast(v) if ok else None for v, ok in zip(row, okr)] for row, okr in zip(values, present)]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def merge_surface(run_dir: str, write_page=True, log=print) -> dict:
    """Write ``<run>/surface/`` from the parts; returns the manifest."""
    from ..shard_runner import check_pool_sha256
    from ..state import ShardState

    job = os.path.join(run_dir, JOB_DIR)
    cfg, shards = load_job(job)
    # the parts were computed from the pool of prepare: never publish them under another pool's checksum
    check_pool_sha256(cfg.pool_path, cfg.pool_sha256, f"the surface job {job} was prepared")
    out = os.path.join(run_dir, "surface")
    os.makedirs(os.path.join(out, "matrices"), exist_ok=True)
    nb, nd = len(cfg.budgets), len(cfg.deadlines)
    fp = shards[0].fingerprint if shards else cfg.fingerprint()
    shard_of = {d: s for s in shards for d in s.dags}
    parts: dict[int, dict | None] = {}
    state = ShardState(os.path.join(job, "state"))
    bad: list[str] = []
    for d in cfg.dags:
        spec = shard_of[d]
        check = check_part(spec.part(d), d, fp, spec.counts())
        parts[d] = None
        if check.ok:
            with open(spec.part(d), encoding="utf-8") as fh:
                parts[d] = json.load(fh)
        elif check.problem != "missing" or state.is_done(spec.shard_id):
            bad.append(f"{spec.part(d)} ({check.problem})")
            state.unmark_done(spec.shard_id)  # pending again: the next `surface` recomputes it
    if bad:  # a damaged part is never published, and the surface it would replace stays as it was
        raise DamagedParts(f"surface: {len(bad)} part(s) bad, nothing written: {'; '.join(bad[:3])}"
                           f"{' ...' if len(bad) > 3 else ''}; their shards are pending again: "
                           "`bash run_experiment.sh surface` recomputes them")  # fmt: skip
    missing = [d for d in cfg.dags if parts[d] is None]
    known = _pool_titles(cfg.pool_path, missing) if missing else {}
    queries, counts = [], {"complete": 0, "missing": 0}
    for q, d in enumerate(cfg.dags):
        qid = f"query_{q:03d}"
        part = parts[d]
        n = cfg.n_trials
        methods = {}
        for m in cfg.methods:
            if part is None:
                s = np.zeros((nb, nd))
                cost = np.zeros((nb, nd))
                present = np.zeros((nb, nd), dtype=bool)
            else:
                s = np.asarray(part["methods"][m]["successes"], dtype=np.float64)
                cost = np.asarray(part["methods"][m]["mean_cost"], dtype=np.float64)
                present = np.ones((nb, nd), dtype=bool)
            lo, hi = wilson_bounds(s, np.full_like(s, n))
            methods[m] = {
                "success_pct": _grid(_half_up(100.0 * s / n), present, int),
                "successes": _grid(s, present, int),
                "n_trials": _grid(np.full_like(s, n), present, int),
                "wilson_low_pct": _grid(_half_up(100.0 * np.asarray(lo), 10.0), present, float),
                "wilson_high_pct": _grid(_half_up(100.0 * np.asarray(hi), 10.0), present, float),
                "mean_cost": _grid(cost, present, float),
            }
        first = methods[cfg.methods[0]]
        counts["complete" if part is not None else "missing"] += nb * nd
        title = part["problem_id"] if part else known[d][0]
        doc = {"query_id": qid, "problem_id": title, "title": title, "success_pct": first["success_pct"],
               "n_trials": first["n_trials"], "methods": methods}  # fmt: skip
        atomic_write_text(os.path.join(out, "matrices", f"{qid}.json"), dumps_compact(doc) + "\n")
        queries.append({"query_id": qid, "problem_id": title, "title": title, "matrix_path": f"matrices/{qid}.json",
                        "dag_index": d, "n_nodes": part["n_nodes"] if part else known[d][1]})  # fmt: skip
    atomic_write_text(os.path.join(out, "queries.json"), dumps_compact(queries) + "\n")
    atomic_write_text(os.path.join(out, "axes.json"), dumps_compact({"budgets": cfg.budgets,
                                                                     "deadlines": cfg.deadlines}) + "\n")
    models = list(cfg.model_ids)
    manifest = {
        "dataset": cfg.dataset,
        "generated_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "query_count": len(cfg.dags), "budget_count": nb, "deadline_count": nd,
        "expected_trials_per_cell": cfg.n_trials, "complete_cells": counts["complete"],
        "missing_cells": counts["missing"], "partial_cells": 0, "missing_policy": "missing",
        "public_data_notice": NOTICE, "model_ids": models, "model_display_names": models,
        "format_version": FORMAT_VERSION,
        "methods": [{"id": m, "display_name": method_spec(m).display_name, "label": method_label(m),
                     "baseline": bool(method_spec(m).baseline)} for m in cfg.methods],
        "budget_unit": UNITS.get(cfg.cost_mode, cfg.cost_mode), "deadline_unit": "s", "cost_mode": cfg.cost_mode,
        "execution_rules": cfg.execution_rules, "seed": cfg.seed, "approximation": None,
        "pool": {"path": cfg.pool_path, "sha256": _sha256(cfg.pool_path)},
    }  # fmt: skip
    atomic_write_text(os.path.join(out, "manifest.json"), dumps_compact(manifest) + "\n")
    if write_page:
        try:
            from .page import write_page as page_writer
        except ImportError:
            log("surface: the page module is not there yet; wrote the data files only")
        else:
            import pathlib

            page_writer(pathlib.Path(out))
    log(f"surface: {len(cfg.dags)} DAGs x {nb} budgets x {nd} deadlines -> {out} "
        f"({counts['complete']} complete, {counts['missing']} missing cells)")  # fmt: skip
    return manifest


def _pool_titles(pool_path: str, dags: list[int]) -> dict[int, tuple[str, int]]:
    """{DAG: (problem id, node count)} from the pool, for the queries of missing parts."""
    from simulator.pools.pool import load_pool

    pool = load_pool(pool_path, indices=dags)
    return {int(pool[i].index): (str(pool[i].problem_id), int(pool[i].n_nodes)) for i in range(len(pool))}


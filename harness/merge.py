"""``merge``: combine the per-DAG outputs into per-cell record files, with a coverage check.

Coverage: every (DAG, trial, method label, cell) of the run must be present
exactly once — no gaps, no duplicates, no record of a foreign DAG. Everything
is located from the run directory (``run.json``), never from the current
directory. Output::

    merged/merge_report.json             complete?, counts, what is missing
    merged/run.json                      copy of the run's metadata
    merged/cells/<cell>/records.jsonl    records in (DAG, method, trial) order
    merged/cells/<cell>/params.json      the cell and every run setting

An incomplete run writes only ``merge_report.json`` (``complete: false``)
and exits non-zero naming the missing DAGs, trials and methods.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

from simulator.base.errors import UserError
from simulator.base.io_utils import atomic_write_json

from .rundir import RunDir
from .shards import compress_ints, dag_output_path, has_part_header, is_part_header, read_records

REPORT_LIMIT = 25


class IncompleteRun(UserError):
    """Raised (exit non-zero) when the merge finds gaps."""


def _check_file(path: str, dag: int, expected: set, cells: set, check=None) -> tuple[str, set, dict[str, list[str]]]:
    """(problem or '', present keys, raw lines per cell) of one per-DAG file.

    ``check`` (a shard's :meth:`~harness.shards.ShardSpec.part_checker`) checks
    the part's header first: a part of another run (fingerprint), or whose
    size or counts disagree with its header, contributes no record.
    """
    if not os.path.exists(path):
        return "file missing", set(), {c: [] for c in cells}
    present: set = set()
    lines: dict[str, list[str]] = {c: [] for c in cells}
    if check is not None:
        found = check(path, dag)  # header, size, fingerprint, counts and the records' sha256
        if not found.ok and has_part_header(path):  # a part that fails its own header: none of its records
            return found.problem, set(), lines
    problem = ""
    for no, raw, rec in read_records(path):
        if no == 1 and is_part_header(rec):
            continue
        if rec is None or not isinstance(rec, dict):
            problem = "truncated"
            continue
        key = (rec.get("cell"), rec.get("method"), rec.get("exec_trial"))
        if rec.get("dag_idx") != dag or key not in expected:
            problem = problem or "unexpected records"
            continue
        if key in present:
            problem = problem or "duplicate records"
            continue
        present.add(key)
        lines[key[0]].append(raw)
    if not problem and present != expected:
        problem = "incomplete"
    return problem, present, lines


def merge(rd: RunDir, out=print) -> dict:
    """Merge a run; returns the report (raises :class:`IncompleteRun` on gaps)."""
    run = rd.run
    if run.get("kind") == "surface":
        raise UserError(f"{rd.path} is a prediction-surface job, not a grid run: merge it with "
                        f"`RUN_DIR={os.path.dirname(rd.path)} bash run_experiment.sh surface --merge`")  # fmt: skip
    missing_keys = [k for k in ("method_labels", "settings", "cells", "shards") if k not in run]
    if missing_keys:
        raise UserError(f"{rd.run_json}: not the run.json of a prepared grid run (no {', '.join(missing_keys)}); "
                        "prepare the run again (`prepare --force` archives the old one)")  # fmt: skip
    t0 = time.time()
    labels = [m["label"] for m in run["method_labels"]]
    n_trials = int(run["settings"]["n_exec_trials"])
    dags = list(run["settings"]["dags"])
    cells = run["cells"]
    cells_by_group: dict[str, list[str]] = {}
    for c in cells:
        cells_by_group.setdefault(c["budget_group"], []).append(c["cell"])
    tmp_root = tempfile.mkdtemp(prefix=".merge-", dir=rd.path)
    try:
        writers = {c["cell"]: open(os.path.join(tmp_root, c["cell"] + ".jsonl"), "w", encoding="utf-8") for c in cells}
        counts = {c["cell"]: 0 for c in cells}
        gaps: list[dict] = []
        checker_of = {}
        for spec in rd.shards:
            checker_of.setdefault(spec.group, spec.part_checker())
        for group, group_cells in cells_by_group.items():
            expected = {(c, lab, t) for c in group_cells for lab in labels for t in range(n_trials)}
            for dag in dags:
                path = dag_output_path(rd.outputs, group, dag)
                problem, present, lines = _check_file(path, dag, expected, set(group_cells), checker_of.get(group))
                for c in group_cells:  # present records count even in a bad file: present + missing = expected
                    counts[c] += len(lines[c])
                if problem:
                    missing = expected - present
                    added = False
                    for c in group_cells:
                        miss_c = [k for k in missing if k[0] == c]
                        if miss_c:
                            added = True
                            gaps.append({
                                "cell": c, "dag_idx": dag, "problem": problem, "file": path,
                                "missing_methods": sorted({k[1] for k in miss_c}, key=labels.index),
                                "missing_trials": compress_ints(sorted({k[2] for k in miss_c})),
                                "n_missing": len(miss_c),
                            })  # fmt: skip
                    if not added:  # every key present, but the file also holds wrong records
                        gaps.append({"cell": ",".join(group_cells), "dag_idx": dag, "problem": problem,
                                     "file": path, "missing_methods": [], "missing_trials": "", "n_missing": 0})
                    continue
                for c in group_cells:
                    writers[c].writelines(lines[c])
        for w in writers.values():
            w.close()
        report = {
            "complete": not gaps,
            "run_name": run.get("run_name"),
            "fingerprint": run.get("fingerprint"),
            "merged_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "n_dags": len(dags),
            "n_trials": n_trials,
            "method_labels": labels,
            "cells": [{**c, "n_records": counts[c["cell"]]} for c in cells],
            "n_records": sum(counts.values()),
            "expected_records": len(dags) * n_trials * len(labels) * len(cells),
            "n_missing": sum(g["n_missing"] for g in gaps),
            "missing": gaps,
            "missing_dags": sorted({g["dag_idx"] for g in gaps}),
            "missing_methods": sorted({m for g in gaps for m in g["missing_methods"]}, key=labels.index),
            "missing_trials": compress_ints(sorted({t for g in gaps for t in _expand(g["missing_trials"])})),
            "wall_s": round(time.time() - t0, 3),
        }
        os.makedirs(rd.merged, exist_ok=True)
        if gaps:
            report["reopened_shards"] = reopen_shards(rd, gaps)
            atomic_write_json(os.path.join(rd.merged, "merge_report.json"), report)
            raise IncompleteRun(describe_gaps(report, rd))
        cells_dir = os.path.join(rd.merged, "cells")
        for c in cells:
            d = os.path.join(cells_dir, c["cell"])
            os.makedirs(d, exist_ok=True)
            os.replace(os.path.join(tmp_root, c["cell"] + ".jsonl"), os.path.join(d, "records.jsonl"))
            atomic_write_json(os.path.join(d, "params.json"), cell_params(run, c, counts[c["cell"]]))
        current = {c["cell"] for c in cells}
        for name in sorted(os.listdir(cells_dir)):  # cells of an earlier configuration no longer belong here
            if name not in current:
                shutil.rmtree(os.path.join(cells_dir, name), ignore_errors=True)
        atomic_write_json(os.path.join(rd.merged, "run.json"), run)
        atomic_write_json(os.path.join(rd.merged, "merge_report.json"), report)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    out(
        f"merge: complete — {report['n_records']} records, {len(cells)} cells x {len(labels)} methods x "
        f"{len(dags)} DAGs x {n_trials} trials -> {rd.merged}"
    )
    return report


def reopen_shards(rd: RunDir, gaps: list[dict]) -> list[str]:
    """Shards marked done whose files turned out bad (e.g. truncated later): make them pending again."""
    from .state import ShardState

    st = ShardState(rd.state)
    bad = {(str(g["cell"]).split(",")[0], g["dag_idx"]) for g in gaps}
    group_of = {c["cell"]: c["budget_group"] for c in rd.run["cells"]}
    bad_pairs = {(group_of.get(c, ""), d) for c, d in bad}
    reopened = []
    for s in rd.shards:
        if st.is_done(s.shard_id) and any((s.group, d) in bad_pairs for d in s.dags):
            os.unlink(st.f(s.shard_id, "done"))
            reopened.append(s.shard_id)
    return reopened


def strip_timing(rec: dict) -> dict:
    """A record without its wall-clock fields (the only fields that differ between identical runs)."""
    return {k: v for k, v in rec.items() if "wall_ms" not in k}


def _expand(text: str) -> list[int]:
    from .shards import expand_ints

    return expand_ints(text) if text else []


def cell_params(run: dict, cell: dict, n_records: int) -> dict:
    return {
        "cell": cell,
        "n_records": n_records,
        "run_name": run.get("run_name"),
        "fingerprint": run.get("fingerprint"),
        "settings": run.get("settings"),
        "method_labels": run.get("method_labels"),
        "pool": run.get("pool"),
        "nominal_summary": run.get("nominal_summary"),
        "environment": run.get("environment"),
    }


def describe_gaps(report: dict, rd: RunDir) -> str:
    gaps = report["missing"]
    labels = report["method_labels"]
    mm = report["missing_methods"]
    lines = [
        f"merge: INCOMPLETE run {rd.path}: {report['n_records']} of {report['expected_records']} records present, "
        f"{report['n_missing']} missing ({len(gaps)} (cell, DAG) gaps)",
        f"  missing DAGs: {compress_ints(report['missing_dags'])}",
        f"  missing methods: {', '.join(mm) if len(mm) < len(labels) else f'all {len(labels)}: ' + ', '.join(mm)}",
        f"  missing trials: {report['missing_trials']}",
        "  details:",
    ]
    for g in gaps[:REPORT_LIMIT]:
        lines.append(
            f"    cell {g['cell']} DAG {g['dag_idx']}: {g['problem']}; methods "
            f"{g['missing_methods'] if len(g['missing_methods']) < len(labels) else 'all'}; trials {g['missing_trials']}"
        )
    if len(gaps) > REPORT_LIMIT:
        lines.append(f"    ... {len(gaps) - REPORT_LIMIT} more in merged/merge_report.json")
    if report.get("reopened_shards"):
        lines.append(f"  shards {report['reopened_shards']} were marked done but their files are bad: pending again")
    lines.append("  run the missing shards (`run_experiment.sh status`, `local`, `auto` or `resume`), then merge again")
    return "\n".join(lines)


def load_report(merged_dir: str) -> dict:
    path = os.path.join(merged_dir, "merge_report.json")
    if not os.path.exists(path):
        raise UserError(f"{merged_dir}: no merge_report.json; run `run_experiment.sh merge` first")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
